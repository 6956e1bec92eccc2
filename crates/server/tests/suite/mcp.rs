//! `lumen mcp`: MCP (JSON-RPC over stdio lines), spoken raw by the test as
//! a client would.

use std::time::Duration;

use super::{Env, McpClient};
use serde_json::{Value, json};

#[tokio::test]
async fn mcp_lists_tools_drives_the_browser_and_runs_tasks() {
    let env = Env::new().await;
    let mut mcp = McpClient::start(env.options());

    let init = mcp.initialize().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "lumen", "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object());

    let list = mcp.call("tools/list", json!({})).await;
    let mut names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "click",
            "open",
            "press",
            "run_task",
            "screenshot",
            "scroll",
            "snapshot",
            "type"
        ]
    );

    let text = |v: &Value| -> Value {
        serde_json::from_str(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    let opened = mcp
        .call(
            "tools/call",
            json!({"name": "open", "arguments": {"url": env.counter()}}),
        )
        .await;
    assert_eq!(text(&opened)["ok"], true, "{opened}");
    let clicked = mcp
        .call(
            "tools/call",
            json!({"name": "click", "arguments": {"x": 160, "y": 120}}),
        )
        .await;
    let clicked = text(&clicked);
    assert_eq!(clicked["ok"], true, "{clicked}");
    assert_eq!(clicked["effect"]["target"]["name"], "Click me", "{clicked}");
    assert_eq!(
        clicked["effect"]["pageChanged"], true,
        "the counter changed: {clicked}"
    );
    let bad = mcp
        .call(
            "tools/call",
            json!({"name": "click", "arguments": {"x": "left"}}),
        )
        .await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    let snap = mcp
        .call("tools/call", json!({"name": "snapshot", "arguments": {}}))
        .await;
    let snap = snap["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(snap.contains("Click me"), "{snap}");
    let shot = mcp
        .call("tools/call", json!({"name": "screenshot", "arguments": {}}))
        .await;
    assert_eq!(shot["result"]["content"][0]["type"], "image", "{shot}");
    assert_eq!(shot["result"]["content"][0]["mimeType"], "image/jpeg");

    env.click();
    env.done("clicked via mcp");
    let run = mcp.call(
        "tools/call",
        json!({"name": "run_task", "arguments": {"instruction": "Click", "startUrl": env.counter(), "maxSteps": 3}}),
    )
    .await;
    let outcome = text(&run);
    assert_eq!(outcome["status"], "completed", "{run}");
    assert_eq!(outcome["result"], "clicked via mcp");
    assert_eq!(outcome["steps"], 2);

    let unknown = mcp
        .call("tools/call", json!({"name": "fly", "arguments": {}}))
        .await;
    assert!(unknown["error"].is_object(), "{unknown}");

    mcp.close(Duration::from_secs(60)).await;
}

/// MCP's snapshot says what the page says, inside its frames too.
#[tokio::test]
async fn mcp_snapshot_shows_page_text_and_frames() {
    let env = Env::new().await;
    let mut mcp = McpClient::start(env.options());
    mcp.initialize().await;
    for (page, said) in [
        ("real/article.html", "text \"Total due: $42.50\""),
        ("real/frames-nested.html", "text \"Level three text\""),
    ] {
        let opened = mcp
            .call(
                "tools/call",
                json!({"name": "open", "arguments": {"url": env.site.url(page)}}),
            )
            .await;
        assert_ne!(opened["result"]["isError"], true, "{opened}");
        let snap = mcp
            .call("tools/call", json!({"name": "snapshot", "arguments": {}}))
            .await;
        let shown = snap["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(shown.contains(said), "{said} missing from\n{shown}");
    }
    mcp.close(Duration::from_secs(60)).await;
}

/// The direct tools' Chromium dies (`kill -9`): at most the call that meets
/// the dead browser fails, and the next gets a fresh one.
#[tokio::test]
async fn mcp_direct_tools_get_a_fresh_browser_after_a_crash() {
    let env = Env::new().await;
    let counted = super::pool::Counted::new();
    let mut options = env.options();
    options.launch.executable = Some(counted.executable.clone());
    let mut mcp = McpClient::start(options);
    mcp.initialize().await;
    let open = json!({"name": "open", "arguments": {"url": env.counter()}});
    let ok = |v: &Value| {
        v["result"]["isError"] != true
            && v["result"]["content"][0]["text"]
                .as_str()
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .is_some_and(|t| t["ok"] == true)
    };
    let first = mcp.call("tools/call", open.clone()).await;
    assert!(ok(&first), "{first}");
    assert_eq!(counted.pids().len(), 1);
    let killed = std::process::Command::new("kill")
        .args(["-9", &counted.pids()[0]])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut answers = Vec::new();
    for _ in 0..2 {
        let answer = mcp.call("tools/call", open.clone()).await;
        let done = ok(&answer);
        answers.push(answer);
        if done {
            break;
        }
    }
    assert!(ok(answers.last().unwrap()), "{answers:?}");
    assert_eq!(counted.pids().len(), 2, "a fresh Chromium");
    mcp.close(Duration::from_secs(60)).await;
}

/// The direct tools' browser holds the operator policy on every request,
/// as a run's does: a page a tool opened cannot take the tab to a blocked
/// host by its own script (`redirect.html?auto=cross` goes to the
/// `localhost` name of the fixture server 300 ms after loading).
#[tokio::test]
async fn mcp_direct_tools_hold_the_policy_on_what_a_page_does() {
    let env = Env::new().await;
    let mut options = env.options();
    options.policy.blocked_domains = vec!["localhost".into()];
    let mut mcp = McpClient::start(options);
    mcp.initialize().await;
    let url = format!("{}?auto=cross", env.site.url("redirect.html"));
    let opened = mcp
        .call(
            "tools/call",
            json!({"name": "open", "arguments": {"url": url}}),
        )
        .await;
    assert!(
        opened
            .to_string()
            .contains("blocked by policy before it was sent"),
        "{opened}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let paths: Vec<String> = env.site.requests().into_iter().map(|r| r.path).collect();
    assert!(
        !paths.iter().any(|p| p == "/links/page1.html"),
        "the page's navigation to the blocked host was sent: {paths:?}"
    );
    let snap = mcp
        .call("tools/call", json!({"name": "snapshot", "arguments": {}}))
        .await;
    // The tab keeps trying; whatever it shows is not the blocked page.
    let shown = snap["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    // (The page's own text may name the blocked URL; the blocked page is
    // "Page 1 of 3".)
    assert!(!shown.contains("Page 1 of 3"), "{shown}");
    assert!(shown.contains("off-site navigation"), "{shown}");
    mcp.close(Duration::from_secs(60)).await;
}

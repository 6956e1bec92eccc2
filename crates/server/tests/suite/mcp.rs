//! `lumen mcp`: MCP (JSON-RPC over stdio lines), spoken raw by the test as
//! a client would.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use super::Env;

#[tokio::test]
async fn mcp_lists_tools_drives_the_browser_and_runs_tasks() {
    let env = Env::new().await;
    let (mut client_in, server_in) = tokio::io::duplex(1 << 20);
    let (server_out, client_out) = tokio::io::duplex(1 << 20);
    let service = tokio::spawn(lumen_server::mcp(env.options(), server_in, server_out));
    let mut lines = BufReader::new(client_out).lines();
    let mut id = 0;
    let mut call = async |method: &str, params: Value| -> Value {
        id += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        client_in
            .write_all(format!("{req}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
                .await
                .expect("mcp went quiet")
                .unwrap()
                .expect("mcp closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                if method == "initialize" {
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                    client_in
                        .write_all(format!("{note}\n").as_bytes())
                        .await
                        .unwrap();
                }
                return v;
            }
        }
    };

    let init = call(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    )
    .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "lumen", "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object());

    let list = call("tools/list", json!({})).await;
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
    let opened = call(
        "tools/call",
        json!({"name": "open", "arguments": {"url": env.counter()}}),
    )
    .await;
    assert_eq!(text(&opened)["ok"], true, "{opened}");
    let clicked = call(
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
    let bad = call(
        "tools/call",
        json!({"name": "click", "arguments": {"x": "left"}}),
    )
    .await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    let snap = call("tools/call", json!({"name": "snapshot", "arguments": {}})).await;
    let snap = snap["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(snap.contains("Click me"), "{snap}");
    let shot = call("tools/call", json!({"name": "screenshot", "arguments": {}})).await;
    assert_eq!(shot["result"]["content"][0]["type"], "image", "{shot}");
    assert_eq!(shot["result"]["content"][0]["mimeType"], "image/jpeg");

    env.click();
    env.done("clicked via mcp");
    let run = call(
        "tools/call",
        json!({"name": "run_task", "arguments": {"instruction": "Click", "startUrl": env.counter(), "maxSteps": 3}}),
    )
    .await;
    let outcome = text(&run);
    assert_eq!(outcome["status"], "completed", "{run}");
    assert_eq!(outcome["result"], "clicked via mcp");
    assert_eq!(outcome["steps"], 2);

    let unknown = call("tools/call", json!({"name": "fly", "arguments": {}})).await;
    assert!(unknown["error"].is_object(), "{unknown}");

    drop(client_in);
    tokio::time::timeout(Duration::from_secs(60), service)
        .await
        .expect("mcp did not stop at end of input")
        .unwrap()
        .unwrap();
}

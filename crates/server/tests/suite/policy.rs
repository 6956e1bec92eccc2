//! The operator policy: what a client may ask is refused before anything
//! starts when the operator does not allow it (HTTP runs, MCP's `run_task`
//! and direct tools, resumed runs).

use std::time::Duration;

use super::{Client, Env, McpClient, Stored};
use lumen::safety::PolicyConfig;
use lumen_server::Server;
use serde_json::{Value, json};

/// Posts a run and expects a refusal with `status`, `code` and `field`.
async fn refused(c: &Client, body: Value, status: u16, code: &str, field: &str) -> Value {
    let (got, answer) = c.post("/v1/runs", body.clone()).await;
    assert_eq!(got, status, "{body} → {answer}");
    assert_eq!(answer["error"]["code"], code, "{answer}");
    assert_eq!(answer["error"]["field"], field, "{answer}");
    assert!(
        !answer["error"]["message"].as_str().unwrap_or("").is_empty(),
        "{answer}"
    );
    answer
}

#[tokio::test]
async fn a_client_policy_that_widens_the_operator_policy_is_refused() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let answer = refused(
        &c,
        json!({"instruction": "Read a file", "policy": {"allowedSchemes": ["file"]}}),
        403,
        "policy_denied",
        "policy.allowedSchemes",
    )
    .await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("file"),
        "{answer}"
    );
    refused(
        &c,
        json!({"instruction": "x", "policy": {"allowedPrivateHosts": ["169.254.169.254"]}}),
        403,
        "policy_denied",
        "policy.allowedPrivateHosts",
    )
    .await;
    // A malformed policy is a 400 naming the setting.
    refused(
        &c,
        json!({"instruction": "x", "policy": {"allowedSchemes": ["not a scheme"]}}),
        400,
        "invalid_field",
        "policy.allowedSchemes",
    )
    .await;
    // Narrowing is fine, and `blockPrivateNetwork: false` cannot turn the
    // operator's rule off: the run keeps it.
    let id = c
        .create(json!({"instruction": "x", "maxSteps": 1, "policy": {
            "blockedDomains": ["ads.example"], "blockPrivateNetwork": false}}))
        .await;
    let run = c.run(&id).await;
    assert_eq!(run["policy"]["blockPrivateNetwork"], true, "{run}");
    assert_eq!(run["policy"]["blockedDomains"], json!(["ads.example"]));
    assert_eq!(run["policy"]["allowedPrivateHosts"], json!(["127.0.0.1"]));
    c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    server.shutdown().await;
}

#[tokio::test]
async fn start_urls_the_operator_policy_denies_are_refused_before_anything_starts() {
    let env = Env::new().await;
    // The server's own port is refused even though the operator allows
    // 127.0.0.1, also when it was started on port 0 and the port is known
    // only once it listens.
    let server = Server::start(env.options()).await.unwrap();
    let port = server.local_addr().port();
    let c = Client::new(server.local_addr());
    let site_port = reqwest::Url::parse(&env.counter()).unwrap().port().unwrap();
    // A scheme the operator does not allow makes the URL invalid here.
    for url in [
        "file:///etc/passwd",
        "view-source:http://example.com/",
        "javascript:alert(1)",
        "chrome://settings",
        "devtools://devtools/bundled/inspector.html",
        "not a url",
    ] {
        refused(
            &c,
            json!({"instruction": "Look", "startUrl": url}),
            400,
            "invalid_field",
            "startUrl",
        )
        .await;
    }
    // A host the operator policy refuses is forbidden.
    for url in [
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[::ffff:169.254.169.254]/".to_string(),
        "http://10.0.0.1/".to_string(),
        // A name that resolves to loopback, while only 127.0.0.1 is allowed.
        format!("http://localhost:{site_port}/counter.html"),
        format!("http://127.0.0.1:{port}/health"),
    ] {
        refused(
            &c,
            json!({"instruction": "Look", "startUrl": url}),
            403,
            "policy_denied",
            "startUrl",
        )
        .await;
    }
    // Nothing started: no run, no model call.
    let (_, list) = c.get("/v1/runs").await;
    assert_eq!(list["runs"], json!([]), "{list}");
    assert_eq!(env.requests(), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn loopback_is_refused_by_default_and_works_once_the_operator_allows_it() {
    let env = Env::new().await;
    let site_port = reqwest::Url::parse(&env.counter()).unwrap().port().unwrap();
    let localhost = format!("http://localhost:{site_port}/counter.html");

    let mut options = env.options();
    options.policy = PolicyConfig::operator_default();
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    for url in [env.counter(), localhost.clone()] {
        refused(
            &c,
            json!({"instruction": "Click", "startUrl": url}),
            403,
            "policy_denied",
            "startUrl",
        )
        .await;
    }
    server.shutdown().await;

    let mut options = env.options();
    options.policy.allowed_private_hosts = vec!["localhost".into()];
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("seen");
    let id = c
        .create(json!({"instruction": "Look", "startUrl": localhost, "maxSteps": 2}))
        .await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "seen", "{run}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_resumed_run_does_not_reopen_a_url_the_policy_denies() {
    let env = Env::new().await;
    env.click();
    env.stall();
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let id = c
        .create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 5}))
        .await;
    c.wait(&id, "step 2 in flight", |r| {
        r["stepsCompleted"] == 1 && env.requests() == 2
    })
    .await;
    server.shutdown().await;

    // The last URL seen was somewhere the policy forbids (as a blocked
    // action's `url_after` is).
    let stored = Stored::open(env.data.path()).await;
    let mut info = stored.record(&id).await;
    info["lastUrl"] = json!("http://169.254.169.254/latest/meta-data/");
    stored.set_record(&info).await;
    stored.0.close().await;

    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("twice");
    let (status, answer) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{answer}");
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["lastUrl"], env.counter(), "{run}");
    let events = Stored::open(env.data.path()).await.events_text(&id).await;
    assert!(
        !events.contains("169.254.169.254"),
        "the denied URL was opened: {events}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn mcp_refuses_to_open_what_the_operator_policy_denies() {
    let env = Env::new().await;
    let mut mcp = McpClient::start(env.options());
    mcp.initialize().await;
    let text = |v: &Value| -> String {
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    for url in [
        "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data/",
        "localhost:9/",
        "chrome://settings",
    ] {
        let opened = mcp
            .call(
                "tools/call",
                json!({"name": "open", "arguments": {"url": url}}),
            )
            .await;
        assert_eq!(opened["result"]["isError"], true, "{url}: {opened}");
        assert!(text(&opened).contains("operator policy"), "{url}: {opened}");
    }
    // The browser never left about:blank.
    let snap = mcp
        .call("tools/call", json!({"name": "snapshot", "arguments": {}}))
        .await;
    let snap = text(&snap);
    assert!(snap.starts_with("about:blank"), "{snap}");
    assert!(!snap.contains("root:"), "{snap}");
    // A run's start URL is judged the same way.
    let run = mcp.call(
        "tools/call",
        json!({"name": "run_task", "arguments": {"instruction": "Read it", "startUrl": "file:///etc/passwd"}}),
    )
    .await;
    assert_eq!(run["result"]["isError"], true, "{run}");
    assert!(text(&run).contains("file: URLs are not allowed"), "{run}");
    // The operator's opt-in (127.0.0.1) still works.
    let opened = mcp
        .call(
            "tools/call",
            json!({"name": "open", "arguments": {"url": env.counter()}}),
        )
        .await;
    assert_ne!(opened["result"]["isError"], true, "{opened}");
    mcp.close(Duration::from_secs(30)).await;
}

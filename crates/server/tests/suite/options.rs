//! The run body is `lumen::RunOptions`: its options take effect on the
//! real server (real Chromium, the mock provider), and what a network
//! client may not choose (paths, endpoints, unknown keys) gets a 4xx
//! naming the field.

use std::time::Duration;

use lumen_server::Server;
use serde_json::{Value, json};

use super::{Client, Env, McpClient};

fn bodies(env: &Env) -> Vec<String> {
    env.mock
        .requests()
        .into_iter()
        .map(|r| r.body.to_string())
        .collect()
}

#[tokio::test]
async fn a_verify_url_refuses_completion_and_the_screenshot_format_reaches_the_model() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("too early");
    env.done("still too early");
    let id = c
        .create(
            json!({"instruction": "Finish on the receipt page", "startUrl": env.counter(),
            "maxSteps": 2, "verifyUrl": "receipt\\.html$", "screenshotFormat": "png",
            "checkpointInterval": 0, "imagesKept": 1}),
        )
        .await;
    let run = c.wait(&id, "ended", |r| r["status"] == "failed").await;
    assert_eq!(run["outcome"], "maxSteps", "completion was refused: {run}");
    assert_eq!(run["options"]["verifyUrl"], "receipt\\.html$", "{run}");
    let bodies = bodies(&env);
    assert_eq!(bodies.len(), 2);
    assert!(
        bodies[0].contains("data:image/png;base64"),
        "png screenshots reach the model"
    );
    assert!(!bodies[0].contains("data:image/jpeg"));
    assert!(
        bodies[1].contains("should be at a URL matching"),
        "the verifier's reason reaches the model: {}",
        &bodies[1][..bodies[1].len().min(2000)]
    );

    // The same pattern on the page it names lets the run complete.
    env.done("on the page");
    let id = c
        .create(
            json!({"instruction": "Finish here", "startUrl": env.counter(),
            "maxSteps": 2, "verifyUrl": "counter\\.html$"}),
        )
        .await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "on the page");
    server.shutdown().await;
}

async fn refused(c: &Client, body: Value) -> (u16, String, String) {
    let (status, answer) = c.post("/v1/runs", body.clone()).await;
    let code = answer["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let field = answer["error"]["field"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!((400..500).contains(&status), "{body} → {status} {answer}");
    (status, code, field)
}

#[tokio::test]
async fn options_a_client_may_not_choose_are_refused_by_name() {
    let env = Env::new().await;
    let roots = tempfile::tempdir().unwrap();
    let uploads = roots.path().join("uploads");
    std::fs::create_dir_all(uploads.join("mine")).unwrap();
    let mut options = env.options();
    options.upload_root = Some(uploads.clone());
    // One listed browser: any other endpoint is still refused.
    options.allowed_cdp_urls = vec!["http://127.0.0.1:9/".into()];
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    let with = |extra: Value| {
        let mut body = json!({"instruction": "x", "startUrl": env.counter()});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for (extra, status, code, field) in [
        (
            json!({"cdpUrl": "http://127.0.0.1:9222"}),
            403,
            "policy_denied",
            "cdpUrl",
        ),
        (
            json!({"browserbase": true}),
            403,
            "policy_denied",
            "browserbase",
        ),
        (
            json!({"uploadDir": "../.."}),
            403,
            "policy_denied",
            "uploadDir",
        ),
        (
            json!({"uploadDir": "/etc"}),
            403,
            "policy_denied",
            "uploadDir",
        ),
        (
            json!({"downloadDir": true}),
            403,
            "policy_denied",
            "downloadDir",
        ),
        (json!({"cache": "c"}), 403, "policy_denied", "cache"),
        (
            json!({"workflows": "/tmp/wf.json"}),
            403,
            "policy_denied",
            "workflows",
        ),
        (
            json!({"uploadDir": "missing"}),
            400,
            "invalid_field",
            "uploadDir",
        ),
        (json!({"maxStep": 3}), 400, "unknown_field", "maxStep"),
        (
            json!({"confidenceGate": 1}),
            400,
            "invalid_field",
            "confidenceGate",
        ),
        (
            json!({"viewport": "huge"}),
            400,
            "invalid_field",
            "viewport",
        ),
        (
            json!({"verifierModel": " "}),
            400,
            "invalid_field",
            "verifierModel",
        ),
        (
            json!({"maxSteps": 100000}),
            400,
            "invalid_field",
            "maxSteps",
        ),
    ] {
        let got = refused(&c, with(extra.clone())).await;
        assert_eq!(got, (status, code.to_owned(), field.to_owned()), "{extra}");
    }
    // The listed endpoint is accepted (the run then fails to attach:
    // nothing listens there).
    let (status, answer) = c
        .post("/v1/runs", with(json!({"cdpUrl": "http://127.0.0.1:9"})))
        .await;
    assert!((200..300).contains(&status), "{status} {answer}");
    // A symlink out of the operator's folder is refused too.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc", uploads.join("escape")).unwrap();
        let got = refused(&c, with(json!({"uploadDir": "escape"}))).await;
        assert_eq!(got, (403, "policy_denied".into(), "uploadDir".into()));
    }

    // Allowed: a subfolder of the operator's folder, and secrets, which are
    // never written to disk.
    env.stall();
    let (status, run) = c
        .post(
            "/v1/runs",
            with(
                json!({"uploadDir": "mine", "secrets": {"PW": "s3cret-value"},
                "secretDomains": {"PW": ["127.0.0.1"]}}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["options"]["uploadDir"], "mine");
    assert_eq!(run["secretNames"], json!(["PW"]));
    assert!(!run.to_string().contains("s3cret-value"), "{run}");
    let id = run["id"].as_str().unwrap().to_owned();
    let record =
        std::fs::read_to_string(env.data.path().join("runs").join(&id).join("run.json")).unwrap();
    assert!(
        record.contains("\"PW\"") && !record.contains("s3cret-value"),
        "{record}"
    );
    c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    tokio::time::timeout(Duration::from_secs(60), server.shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn mcp_run_task_takes_the_run_options_and_names_an_unknown_one() {
    let env = Env::new().await;
    let mut mcp = McpClient::start(env.options());
    mcp.initialize().await;
    let bad = mcp
        .call(
            "tools/call",
            json!({"name": "run_task", "arguments": {"instruction": "x", "maxStep": 2}}),
        )
        .await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert!(bad.to_string().contains("maxStep"), "{bad}");
    env.done("done");
    let run = mcp
        .call(
            "tools/call",
            json!({"name": "run_task", "arguments": {"instruction": "Finish", "startUrl": env.counter(),
                "maxSteps": 2, "verifyUrl": "counter", "screenshotFormat": "png", "maxFailures": 2}}),
        )
        .await;
    let text = run["result"]["content"][0]["text"].as_str().unwrap();
    let outcome: Value = serde_json::from_str(text).unwrap();
    assert_eq!(outcome["status"], "completed", "{run}");
    assert!(bodies(&env)[0].contains("data:image/png;base64"));
    mcp.close(Duration::from_secs(60)).await;
}

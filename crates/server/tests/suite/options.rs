//! The run body is `lumen::RunOptions`: its options take effect on the
//! real server (real Chromium, the mock provider), and what a network
//! client may not choose (paths, endpoints, unknown keys) gets a 4xx
//! naming the field.

use std::time::Duration;

use lumen_server::Server;
use serde_json::{Value, json};

use super::{Client, Env, MODEL, McpClient, Stored};

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

/// A run request on the counter page, with `extra`'s fields.
fn counter_run(env: &Env, extra: Value) -> Value {
    let mut body = json!({"instruction": "x", "startUrl": env.counter()});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    body
}

/// An operator's model list holds for a run's model, its planner's and its
/// verifier's, before any other check; the default model is always allowed.
#[tokio::test]
async fn only_the_models_the_operator_allows_are_accepted() {
    let env = Env::new().await;
    let mut options = env.options();
    options.allowed_models = vec!["compatible/qwen3-vl-*".into()];
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    let with = |extra: Value| counter_run(&env, extra);
    for extra in [
        json!({"model": "compatible/llama-3.2-vision"}),
        json!({"plannerModel": "compatible/qwen2-vl"}),
        json!({"verifierModel": "compatible/qwen3-vl"}),
        // Refused for the list before the provider check (400) is reached.
        json!({"model": "anthropic/claude-opus-4-7"}),
    ] {
        let field = extra.as_object().unwrap().keys().next().unwrap().clone();
        let (status, answer) = c.post("/v1/runs", with(extra.clone())).await;
        assert_eq!(status, 403, "{extra} → {answer}");
        assert_eq!(answer["error"]["code"], "policy_denied", "{answer}");
        assert_eq!(answer["error"]["field"], field, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("compatible/qwen3-vl-*"), "{message}");
    }
    for extra in [
        json!({"verifierModel": "compatible/qwen3-vl-8b", "plannerModel": MODEL}),
        json!({"model": MODEL}),
    ] {
        env.stall();
        let (status, run) = c.post("/v1/runs", with(extra.clone())).await;
        assert_eq!(status, 201, "{extra} → {run}");
        let id = run["id"].as_str().unwrap().to_owned();
        c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    }
    server.shutdown().await;
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
    let with = |extra: Value| counter_run(&env, extra);
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
        // Each attempt has its own steps: the limit (500) holds for all.
        (
            json!({"mode": "exec", "attempts": 10, "maxSteps": 100}),
            400,
            "invalid_field",
            "attempts",
        ),
        // The operator's base URL serves the default model's provider: a
        // model of another provider would take that provider's key there.
        (
            json!({"model": "anthropic/claude-sonnet-4-6"}),
            400,
            "invalid_field",
            "model",
        ),
        (
            json!({"plannerModel": "google/gemini-2.5-flash"}),
            400,
            "invalid_field",
            "plannerModel",
        ),
        (
            json!({"verifierModel": "openai/gpt-5"}),
            400,
            "invalid_field",
            "verifierModel",
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
    let record = Stored::open(env.data.path())
        .await
        .record(&id)
        .await
        .to_string();
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
    // Nobody could answer a hand-over from a blocking tool call.
    let handoff = mcp
        .call(
            "tools/call",
            json!({"name": "run_task", "arguments": {"instruction": "x", "handoff": {}}}),
        )
        .await;
    assert_eq!(handoff["result"]["isError"], true, "{handoff}");
    assert!(
        handoff.to_string().contains("lumen run --handoff"),
        "{handoff}"
    );
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

#[tokio::test]
async fn a_run_with_scoped_secrets_resumes_after_a_restart_and_says_they_are_missing() {
    let env = Env::new().await;
    env.click();
    env.stall();
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let id = c
        .create(
            json!({"instruction": "Log in", "startUrl": env.counter(), "maxSteps": 4,
            "secrets": {"PW": "s3cret-value"}, "secretDomains": {"PW": ["127.0.0.1"]}}),
        )
        .await;
    c.wait(&id, "step 2 in flight", |r| {
        r["stepsCompleted"] == 1 && env.requests() == 2
    })
    .await;
    assert!(c.run(&id).await.get("missingSecrets").is_none());
    server.shutdown().await;

    // The values were never written: after a restart the run says so, and
    // resumes without them rather than failing on a scope that names one.
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let run = c.run(&id).await;
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["secretNames"], json!(["PW"]));
    assert_eq!(run["missingSecrets"], json!(["PW"]), "{run}");
    env.done("resumed");
    let (status, resumed) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{resumed}");
    let run = c
        .wait(&id, "an ending", |r| {
            !["queued", "running", "paused"].contains(&r["status"].as_str().unwrap())
        })
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"], "resumed");
    assert_eq!(run["missingSecrets"], json!(["PW"]));
    assert_eq!(run["stepsCompleted"], 2);
    server.shutdown().await;
}

#[tokio::test]
async fn the_run_record_and_result_are_redacted_with_the_runs_secrets() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    const VALUE: &str = "s3cret-value";
    env.done(&format!("typed {VALUE} as asked"));
    env.done(&format!("still {VALUE}"));
    let id = c
        .create(json!({"instruction": format!("Use the password {VALUE}"),
            "systemPrompt": format!("The password is {VALUE}."),
            "startUrl": env.counter(), "maxSteps": 3, "secrets": {"PW": VALUE}}))
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    let (status, _) = c
        .post(
            &format!("/v1/runs/{id}/tasks"),
            json!({"instruction": format!("Again with {VALUE}")}),
        )
        .await;
    assert_eq!(status, 202);
    let (status, _) = c
        .post(
            &format!("/v1/runs/{id}/message"),
            json!({"text": format!("hint: {VALUE}")}),
        )
        .await;
    assert_eq!(status, 202);
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    let run = c.wait_status(&id, "completed").await;
    // The stream ends once the ending is on disk.
    let events = c.events(&id).await;
    let stored = Stored::open(env.data.path()).await;
    let record = stored.record(&id).await.to_string();
    let result = stored.result(&id).await.unwrap();
    let log = stored.events_text(&id).await;
    let (_, list) = c.get("/v1/runs").await;
    let (_, trace) = c.get(&format!("/v1/runs/{id}/trace")).await;
    for (what, text) in [
        ("the stored record", record.clone()),
        ("the stored result", result),
        ("the stored events", log),
        ("GET /v1/runs/{id}", run.to_string()),
        ("GET /v1/runs", list.to_string()),
        ("the trace", trace.to_string()),
        ("the event log", json!(events).to_string()),
    ] {
        assert!(!text.contains(VALUE), "{what} holds the secret: {text}");
    }
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["instruction"], "Use the password <secret:PW>");
    assert_eq!(record["systemPrompt"], "The password is <secret:PW>.");
    assert_eq!(record["tasks"], json!(["Again with <secret:PW>"]));
    assert_eq!(record["taskResults"][1]["result"], "still <secret:PW>");
    assert_eq!(record["result"], "still <secret:PW>");
    server.shutdown().await;
}

//! The HTTP API: runs end to end, control, errors, auth.

use lumen_server::{ServeError, Server};
use serde_json::{Value, json};

use super::{Client, Env, assert_every_step_once};

#[tokio::test]
async fn a_run_completes_and_its_trace_screenshots_and_events_are_served() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.click();
    env.click();
    env.done("clicked twice");
    let id = c
        .create(json!({"instruction": "Click the button twice", "startUrl": env.counter(), "maxSteps": 5}))
        .await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "clicked twice");
    assert_eq!(run["outcome"], "success");
    assert_eq!(run["stepsCompleted"], 3);
    assert!(run["usage"]["inputTokens"].as_u64().unwrap() > 0, "{run}");

    let (status, list) = c.get("/v1/runs").await;
    assert_eq!(status, 200);
    assert_eq!(list["runs"][0]["id"], id.as_str());

    // The trace has every step, with its actions and screenshot URL.
    let (status, trace) = c.get(&format!("/v1/runs/{id}/trace")).await;
    assert_eq!(status, 200);
    let steps = trace["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["step"], i);
        assert_eq!(s["completed"], true);
        assert_eq!(
            s["screenshot"],
            format!("/v1/runs/{id}/steps/{i}/screenshot")
        );
    }
    assert_eq!(steps[0]["actions"][0]["call"]["action"]["type"], "click");
    assert_eq!(steps[0]["actions"][0]["execution"]["ok"], true);

    // The screenshot is the JPEG the model saw.
    let shot = c
        .http
        .get(format!("{}/v1/runs/{id}/steps/1/screenshot", c.base))
        .bearer_auth(super::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(shot.status(), 200);
    assert_eq!(shot.headers()["content-type"], "image/jpeg");
    assert_eq!(&shot.bytes().await.unwrap()[..2], &[0xFF, 0xD8]);
    // The run's folder follows lumen-trace's layout, like a `lumen run`
    // trace, and gets its report.html once the run has ended (written just
    // after the end, run.gif last, so wait for that).
    let folder = env.data.path().join("runs").join(&id);
    assert!(folder.join("screenshots/step-002.jpg").is_file());
    for _ in 0..200 {
        if folder.join("run.gif").is_file() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        folder.join("run.gif").is_file(),
        "the ended run has a run.gif"
    );
    let html = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(html.contains("Click the button twice"), "{html}");
    assert!(html.contains("<span id=\"step-count\">3</span>"), "{html}");
    let (status, err) = c.get(&format!("/v1/runs/{id}/steps/9/screenshot")).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("not_found"))
    );

    // The full event stream of an ended run, then resumed after an id.
    let all = c.sse(&id, None).await;
    let events: Vec<Value> = all.iter().map(|(_, _, d)| d.clone()).collect();
    assert_every_step_once(&events, 3);
    for (sse_id, name, data) in &all {
        assert_eq!(Some(*sse_id), data["seq"].as_u64());
        assert_eq!(name, data["type"].as_str().unwrap());
    }
    assert_eq!(all.first().unwrap().1, "run_started");
    assert_eq!(all.last().unwrap().1, "done");
    let tail = c.sse(&id, Some(5)).await;
    assert_eq!(tail.first().unwrap().0, 6);
    assert_eq!(tail, all[6..].to_vec());

    // Control of an ended run is a conflict; a message is not taken.
    let (status, err) = c
        .post(&format!("/v1/runs/{id}/message"), json!({"text": "hi"}))
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("run_ended"))
    );
    for action in ["pause", "resume", "cancel"] {
        let (status, err) = c
            .post_raw(&format!("/v1/runs/{id}/{action}"), String::new())
            .await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (409, Some("invalid_state")),
            "{action}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn pause_message_and_resume_steer_a_run() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.click();
    env.done("ok");
    let id = c
        .create(json!({"instruction": "Click once", "startUrl": env.counter(), "maxSteps": 4}))
        .await;
    // Paused before its first step: it does not call the model.
    let (status, run) = c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    assert_eq!((status, run["status"].as_str()), (200, Some("paused")));
    let (status, reply) = c
        .post(
            &format!("/v1/runs/{id}/message"),
            json!({"text": "Prefer the green button"}),
        )
        .await;
    assert_eq!(
        (status, reply["delivery"].as_str()),
        (202, Some("next_step"))
    );
    // Guidance goes into the model's next prompt: a message of over 8,000
    // characters is refused, and at most 16 wait at once.
    let (status, err) = c
        .post(
            &format!("/v1/runs/{id}/message"),
            json!({"text": "x".repeat(8_001)}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["field"].as_str()),
        (400, Some("text"))
    );
    for _ in 1..16 {
        let (status, _) = c
            .post(&format!("/v1/runs/{id}/message"), json!({"text": "more"}))
            .await;
        assert_eq!(status, 202);
    }
    let (status, err) = c
        .post(
            &format!("/v1/runs/{id}/message"),
            json!({"text": "one too many"}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("invalid_state")),
        "{err}"
    );
    let run = c
        .wait(&id, "running while paused", |r| r["startedAtMs"].is_u64())
        .await;
    assert_eq!(run["status"], "paused");
    assert_eq!(env.requests(), 0);

    let (status, run) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!((status, run["status"].as_str()), (200, Some("running")));
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["stepsCompleted"], 2);
    assert!(run.get("undeliveredMessages").is_none(), "{run}");
    // The guidance reached the model at the first step, once.
    let bodies: Vec<String> = env
        .mock
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[0].contains("Prefer the green button"));
    server.shutdown().await;
}

#[tokio::test]
async fn cancel_with_a_reason_and_a_full_queue_is_429() {
    let env = Env::new().await;
    let mut options = env.options();
    options.max_concurrent = 1;
    options.queue_limit = 1;
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.stall();
    let body = json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 3});
    let a = c.create(body.clone()).await;
    let b = c.create(body.clone()).await;
    let (status, err) = c.post("/v1/runs", body).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (429, Some("queue_full"))
    );

    // One run is inside its first model call; the other waits for the slot.
    c.wait(&a, "the model call", |_| env.requests() == 1).await;
    let (a, b) = match c.run(&a).await["status"].as_str() {
        Some("running") => (a, b),
        _ => (b, a),
    };
    assert_eq!(c.run(&a).await["status"], "running");
    assert_eq!(c.run(&b).await["status"], "queued");
    let (status, run) = c.post(&format!("/v1/runs/{b}/cancel"), json!({})).await;
    assert_eq!(status, 202, "{run}");
    let run = c.wait_status(&b, "cancelled").await;
    assert_eq!(run["cancelReason"], "user_explicit_cancel");

    // Reasons are the fixed set; anything else names them.
    for bad in [
        json!({"reason": "because"}),
        json!({"reason": ""}),
        json!({"reason": 7}),
    ] {
        let (status, err) = c.post(&format!("/v1/runs/{a}/cancel"), bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {err}");
        assert_eq!(err["error"]["field"], "reason", "{err}");
    }
    let (_, err) = c
        .post(
            &format!("/v1/runs/{a}/cancel"),
            json!({"reason": "because"}),
        )
        .await;
    assert!(
        err["error"]["message"].as_str().unwrap().contains(
            "user_interrupted, user_explicit_cancel, timeout, sibling_error, server_shutdown"
        ),
        "{err}"
    );
    assert_eq!(
        c.run(&a).await["status"],
        "running",
        "a refused cancel changes nothing"
    );
    let (status, _) = c
        .post(
            &format!("/v1/runs/{a}/cancel"),
            json!({"reason": "timeout"}),
        )
        .await;
    assert_eq!(status, 202);
    let run = c.wait_status(&a, "cancelled").await;
    assert_eq!(run["cancelReason"], "timeout");
    assert_eq!(run["stepsCompleted"], 0);
    let events = c.events(&a).await;
    assert_eq!(events.last().unwrap()["status"], "cancelled");
    assert_eq!(env.requests(), 1, "the queued run never reached the model");
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_bodies_name_the_field_and_unknown_things_are_404() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let cases = [
        ("{not json", "invalid_json", None),
        ("[1, 2]", "invalid_json", None),
        (
            r#"{"startUrl": "http://127.0.0.1/"}"#,
            "missing_field",
            Some("instruction"),
        ),
        (
            r#"{"instruction": "  "}"#,
            "invalid_field",
            Some("instruction"),
        ),
        (
            r#"{"instruction": 7}"#,
            "invalid_field",
            Some("instruction"),
        ),
        (
            r#"{"instruction": "x", "maxSteps": 0}"#,
            "invalid_field",
            Some("maxSteps"),
        ),
        (
            r#"{"instruction": "x", "maxSteps": "ten"}"#,
            "invalid_field",
            Some("maxSteps"),
        ),
        (
            r#"{"instruction": "x", "startUrl": "file:///etc/passwd"}"#,
            "invalid_field",
            Some("startUrl"),
        ),
        (
            r#"{"instruction": "x", "mode": "fast"}"#,
            "invalid_field",
            Some("mode"),
        ),
        (
            r#"{"instruction": "x", "policy": {"allowedDomains": 5}}"#,
            "invalid_field",
            Some("policy"),
        ),
        (
            r#"{"instruction": "x", "policy": {"bogus": []}}"#,
            "invalid_field",
            Some("policy"),
        ),
        (
            r#"{"instruction": "x", "colour": "red"}"#,
            "unknown_field",
            Some("colour"),
        ),
    ];
    for (body, code, field) in cases {
        let (status, err) = c.post_raw("/v1/runs", body.to_string()).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["error"]["code"], code, "{body}: {err}");
        assert_eq!(err["error"]["field"].as_str(), field, "{body}: {err}");
        assert!(err["error"]["message"].as_str().unwrap().len() > 5);
    }
    assert_eq!(
        c.get("/v1/runs").await.1["runs"],
        json!([]),
        "nothing was created"
    );

    for path in [
        "/v1/runs/run_nope",
        "/v1/runs/..%2F..%2Fetc%2Fpasswd",
        "/v1/runs/..%2Fruns/trace",
        "/v1/runs/%2e%2e/steps/0/screenshot",
        "/v1/nothing",
    ] {
        let (status, err) = c.get(path).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    let (status, err) = c
        .post("/v1/runs/run_nope/message", json!({"text": "x"}))
        .await;
    assert_eq!(status, 404, "{err}");

    // Health, tools and the OpenAPI document.
    let (status, health) = c.get("/health").await;
    assert_eq!(status, 200);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["runsActive"], 0);
    let (_, tools) = c.get("/v1/tools").await;
    assert!(tools["actions"]["oneOf"].as_array().unwrap().len() > 20);
    let (_, doc) = c.get("/openapi.json").await;
    assert_eq!(doc, lumen_server::openapi_document());
    server.shutdown().await;
}

#[tokio::test]
async fn a_token_is_required_off_loopback_and_enforced() {
    let env = Env::new().await;
    let mut options = env.options();
    options.host = "0.0.0.0".parse().unwrap();
    for token in [None, Some("  ".to_string())] {
        options.token = token;
        let err = Server::start(options.clone()).await.unwrap_err();
        assert!(matches!(err, ServeError::TokenRequired(_)), "{err}");
    }
    options.token = Some("s3cret-token".into());
    let server = Server::start(options).await.unwrap();
    let mut c = Client::new(server.local_addr());
    assert_eq!(c.get("/health").await.0, 200, "health needs no token");
    let (status, err) = c.get("/v1/runs").await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    for wrong in ["s3cret-toke", "s3cret-token2", "S3cret-token"] {
        c.token = Some(wrong.into());
        assert_eq!(c.get("/v1/runs").await.0, 401, "{wrong}");
        assert_eq!(c.get("/openapi.json").await.0, 401, "{wrong}");
    }
    c.token = Some("s3cret-token".into());
    assert_eq!(c.get("/v1/runs").await.0, 200);
    server.shutdown().await;
}

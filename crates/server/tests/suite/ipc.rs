//! `lumen ipc`: JSON lines in, responses and events out.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use super::{Env, assert_every_step_once};

#[tokio::test]
async fn ipc_runs_a_task_and_streams_its_events_as_lines() {
    let env = Env::new().await;
    env.click();
    env.done("clicked");
    let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_out) = tokio::io::duplex(1 << 16);
    let service = tokio::spawn(lumen_server::ipc(env.options(), server_in, server_out));
    let mut lines = BufReader::new(client_out).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
            .await
            .expect("ipc went quiet")
            .unwrap()
            .expect("ipc closed");
        serde_json::from_str(&line).unwrap()
    };

    let requests = [
        json!({"id": 1, "method": "health"}),
        json!({"id": 2, "method": "create", "params": {"instruction": "x", "maxSteps": 0}}),
        json!({"id": 3, "method": "fly"}),
        json!({"id": "c", "method": "create", "params": {
            "instruction": "Click", "startUrl": env.counter(), "maxSteps": 3, "subscribe": true
        }}),
    ];
    for r in &requests {
        client_in
            .write_all(format!("{r}\n").as_bytes())
            .await
            .unwrap();
    }
    client_in.write_all(b"not json\n").await.unwrap();
    let health = next().await;
    assert_eq!(
        (health["id"].clone(), health["result"]["status"].clone()),
        (json!(1), json!("ok"))
    );
    let bad = next().await;
    assert_eq!(bad["id"], 2);
    assert_eq!(bad["error"]["field"], "maxSteps");
    assert_eq!(next().await["error"]["field"], "method");

    let mut run_id = None;
    let mut events = Vec::new();
    let mut saw_parse_error = false;
    loop {
        let m = next().await;
        if m["id"] == "c" {
            run_id = m["result"]["id"].as_str().map(str::to_string);
        } else if m.get("event").is_some() {
            events.push(m["event"].clone());
        } else if m["ended"] == true {
            break;
        } else if m["error"]["code"] == "invalid_json" {
            saw_parse_error = true;
        } else {
            panic!("unexpected line {m}");
        }
    }
    assert!(saw_parse_error);
    let run_id = run_id.unwrap();
    assert_every_step_once(&events, 2);

    let get = json!({"id": 9, "method": "get", "params": {"runId": run_id}});
    client_in
        .write_all(format!("{get}\n").as_bytes())
        .await
        .unwrap();
    let run = next().await;
    assert_eq!(run["result"]["status"], "completed");
    assert_eq!(run["result"]["result"], "clicked");
    let msg = json!({"id": 10, "method": "message", "params": {"runId": run_id, "text": "late"}});
    client_in
        .write_all(format!("{msg}\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(next().await["error"]["code"], "run_ended");

    // End of input shuts the service down cleanly.
    drop(client_in);
    service.await.unwrap().unwrap();
}

/// A line over the body limit is not kept: it is answered with an error,
/// and the requests after it are served.
#[tokio::test]
async fn a_line_over_the_limit_is_refused_and_the_next_is_served() {
    let env = Env::new().await;
    let mut options = env.options();
    options.max_body_bytes = 1024;
    let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_out) = tokio::io::duplex(1 << 16);
    let service = tokio::spawn(lumen_server::ipc(options, server_in, server_out));
    let mut lines = BufReader::new(client_out).lines();
    let huge = format!("{{\"id\": 1, \"method\": \"{}\"}}\n", "x".repeat(200_000));
    let writer = tokio::spawn(async move {
        client_in.write_all(huge.as_bytes()).await.unwrap();
        client_in
            .write_all(b"{\"id\": 2, \"method\": \"health\"}\n")
            .await
            .unwrap();
        client_in
    });
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("ipc went quiet")
            .unwrap()
            .expect("ipc closed");
        serde_json::from_str(&line).unwrap()
    };
    let refused = next().await;
    assert_eq!(refused["error"]["code"], "invalid_json", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("longer than 1024 bytes"), "{message}");
    let health = next().await;
    assert_eq!(
        (health["id"].clone(), health["result"]["status"].clone()),
        (json!(2), json!("ok"))
    );
    drop(writer.await.unwrap());
    service.await.unwrap().unwrap();
}

//! Run lifecycle hardening: a panicking run still ends, followers never
//! miss the last events, status changes are compare-and-set.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use lumen_server::Server;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{Client, Env, assert_every_step_once};

/// Reads a WebSocket subscription to its `ended` message; the events.
async fn ws_follow(addr: std::net::SocketAddr, id: &str) -> (Vec<Value>, bool) {
    let (mut ws, _) = tokio_tungstenite::connect_async(super::ws_request(
        addr,
        &[("authorization", format!("Bearer {}", super::TOKEN))],
    ))
    .await
    .unwrap();
    let sub = json!({"type": "subscribe", "runId": id}).to_string();
    ws.send(Message::Text(sub.into())).await.unwrap();
    let mut events = Vec::new();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(90), ws.next())
            .await
            .expect("the WebSocket went quiet")
            .expect("the WebSocket closed")
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let m: Value = serde_json::from_str(&t).unwrap();
        match m["type"].as_str() {
            Some("event") => events.push(m["event"].clone()),
            Some("ended") => return (events, true),
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_run_whose_task_panics_ends_failed_and_every_follower_gets_the_end() {
    let env = Env::new().await;
    let mut options = env.options();
    // The run's own task panics (in its recorder, called by the loop) as
    // step 1 starts.
    options.test_hooks.panic_at_step = Some(1);
    let server = Server::start(options).await.unwrap();
    let addr = server.local_addr();
    let c = Client::new(addr);
    // Step 0 clicks; step 1 panics before it asks the model.
    env.click();
    let id = c
        .create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 4}))
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    // Followers that are live when it panics.
    let sse = tokio::spawn({
        let (c, id) = (Client::new(addr), id.clone());
        async move { c.sse(&id, None).await }
    });
    let ws = tokio::spawn({
        let id = id.clone();
        async move { ws_follow(addr, &id).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200);

    let run = c
        .wait(&id, "an end", |r| {
            r["status"] != "running" && r["status"] != "paused"
        })
        .await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["outcome"], "failure");
    let result = run["result"].as_str().unwrap();
    assert!(
        result.contains("panicked") && result.contains("injected panic at step 1"),
        "{result}"
    );
    assert_eq!(run["stepsCompleted"], 1);

    let sse = tokio::time::timeout(Duration::from_secs(60), sse)
        .await
        .expect("the SSE stream did not close")
        .unwrap();
    let (last_id, name, data) = sse.last().unwrap().clone();
    assert_eq!(name, "done");
    assert_eq!(data["status"], "failure");
    assert!(data["result"].as_str().unwrap().contains("panicked"));
    let ids: Vec<u64> = sse.iter().map(|(i, _, _)| *i).collect();
    assert_eq!(ids, (0..=last_id).collect::<Vec<_>>(), "every event once");
    let (ws_events, ended) = tokio::time::timeout(Duration::from_secs(60), ws)
        .await
        .expect("the WebSocket subscription did not end")
        .unwrap();
    assert!(ended);
    assert_eq!(ws_events.last().unwrap()["type"], "done");
    assert_eq!(ws_events.len(), sse.len());
    // The log on disk ends the same way, and a new follower gets it all.
    let again = c.sse(&id, None).await;
    assert_eq!(again, sse);

    // Its slot and counters were released: the next run gets the slot
    // (and a sane browser) and completes.
    let (_, health) = c.get("/health").await;
    assert_eq!(
        (
            health["runsActive"].as_u64(),
            health["runsRunning"].as_u64()
        ),
        (Some(0), Some(0)),
        "{health}"
    );
    env.done("fine");
    let next = c
        .create(json!({"instruction": "Finish", "startUrl": env.counter(), "maxSteps": 2}))
        .await;
    let run = c.wait_status(&next, "completed").await;
    assert_eq!(run["result"], "fine");
    server.shutdown().await;
}

#[tokio::test]
async fn a_follower_that_connects_while_the_run_finishes_gets_every_event_once() {
    let env = Env::new().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let reached = Arc::new(tokio::sync::Notify::new());
    let mut options = env.options();
    options.test_hooks.follow_gate = Some(gate.clone());
    options.test_hooks.follow_reached_gate = Some(reached.clone());
    let server = Server::start(options).await.unwrap();
    let addr = server.local_addr();
    let c = Client::new(addr);
    env.click();
    env.done("done");
    let id = c
        .create(json!({"instruction": "Click", "startUrl": env.counter(), "maxSteps": 3}))
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    c.wait(&id, "started", |r| r["startedAtMs"].is_u64()).await;
    // The follower has sent its backlog and stands between it and the live
    // events while the whole run executes and ends.
    let sse = tokio::spawn({
        let (c, id) = (Client::new(addr), id.clone());
        async move { c.sse(&id, None).await }
    });
    reached.notified().await;
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    c.wait_status(&id, "completed").await;
    gate.add_permits(100);
    let events = tokio::time::timeout(Duration::from_secs(60), sse)
        .await
        .expect("the follower did not end")
        .unwrap();
    let data: Vec<Value> = events.iter().map(|(_, _, d)| d.clone()).collect();
    assert_every_step_once(&data, 2);
    assert_eq!(events.last().unwrap().1, "done", "the final event arrived");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_status_changes_take_effect_once_and_losers_get_409() {
    let env = Env::new().await;
    env.click();
    env.stall();
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let id = c
        .create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 5}))
        .await;
    // Two pauses at once: one pauses, the other is told it already is.
    let path = format!("/v1/runs/{id}/pause");
    let (a, b) = tokio::join!(c.post(&path, json!({})), c.post(&path, json!({})));
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [200, 409], "{a:?} {b:?}");
    let loser = if a.0 == 409 { &a.1 } else { &b.1 };
    assert_eq!(loser["error"]["code"], "invalid_state");
    assert!(
        loser["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already paused")
    );
    // Resuming a paused run twice: one resumes, the other finds it running.
    let path = format!("/v1/runs/{id}/resume");
    let (a, b) = tokio::join!(c.post(&path, json!({})), c.post(&path, json!({})));
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [200, 409], "{a:?} {b:?}");
    c.wait(&id, "step 2 in flight", |r| {
        r["stepsCompleted"] == 1 && env.requests() == 2
    })
    .await;
    server.shutdown().await;

    // An interrupted run resumed by two clients at once starts once.
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    assert_eq!(c.run(&id).await["status"], "interrupted");
    env.done("twice");
    let (a, b) = tokio::join!(c.post(&path, json!({})), c.post(&path, json!({})));
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [200, 409], "{a:?} {b:?}");
    let loser = if a.0 == 409 { &a.1 } else { &b.1 };
    let message = loser["error"]["message"].as_str().unwrap();
    assert!(message.contains("not paused"), "{message}");
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["resumes"], 1, "{run}");
    assert_eq!(env.requests(), 3, "the resumed step asked the model once");
    let events = c.events(&id).await;
    assert_every_step_once(&events, 2);

    // Two cancels of an ended run, and every other change: clear 409s.
    for (op, says) in [
        ("cancel", "already ended (completed)"),
        ("pause", "is completed"),
        ("resume", "has ended (completed)"),
    ] {
        let (status, body) = c.post(&format!("/v1/runs/{id}/{op}"), json!({})).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("invalid_state")),
            "{op}: {body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{op}: {message}");
    }
    server.shutdown().await;
}

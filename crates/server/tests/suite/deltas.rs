//! The model's reasoning and text streamed live as `reasoning_delta` and
//! `assistant_delta` events over SSE, and kept out of the event log.

use std::time::Duration;

use lumen_server::Server;
use lumen_test_support::mock_provider::script::chat_turn;
use lumen_test_support::mock_provider::{Reply, Route, SseEvent};
use serde_json::{Value, json};

use super::{Client, Env, TOKEN, parse_sse};

/// A Chat Completions chunk carrying `delta`.
fn chunk(delta: Value) -> SseEvent {
    SseEvent::data(
        &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk",
        "model": "mock", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
    )
}

#[tokio::test]
async fn reasoning_and_text_stream_live_over_sse_but_are_not_logged() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    // One turn: reasoning in three pieces, visible text (in pieces of two
    // characters), then the terminating call.
    let Reply::Sse(mut events) = chat_turn(
        &[(
            "d",
            "task_complete",
            json!({"result": "seen", "status": "success"}),
        )],
        Some("Finishing now."),
        100,
    ) else {
        panic!("chat_turn streams")
    };
    for (i, piece) in ["The counter ", "is on the ", "page."].iter().enumerate() {
        events.insert(1 + i, chunk(json!({"reasoning_content": piece})));
    }
    env.mock.push(Route::ChatCompletions, Reply::Sse(events));

    let id = c
        .create(json!({"instruction": "Look", "startUrl": env.counter(), "maxSteps": 2}))
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    // The follower subscribes before the response headers come back, so
    // nothing published after this is missed.
    let resp = c
        .http
        .get(format!("{}/v1/runs/{id}/events", c.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    let text = tokio::time::timeout(Duration::from_secs(90), resp.text())
        .await
        .expect("the event stream did not end with the run")
        .unwrap();
    let live = parse_sse(&text);
    let joined = |kind: &str| -> String {
        live.iter()
            .filter(|(_, t, _)| t == kind)
            .map(|(_, _, e)| e["text"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(joined("reasoning_delta"), "The counter is on the page.");
    assert_eq!(joined("assistant_delta"), "Finishing now.");
    assert!(
        live.iter()
            .filter(|(_, t, _)| t == "assistant_delta")
            .count()
            > 1,
        "the text arrives in pieces: {text}"
    );
    let kinds: Vec<&str> = live.iter().map(|(_, t, _)| t.as_str()).collect();
    let first_delta = kinds.iter().position(|t| *t == "reasoning_delta").unwrap();
    let thinking = kinds.iter().position(|t| *t == "thinking").unwrap();
    let action = kinds.iter().position(|t| *t == "action").unwrap();
    // Live: the pieces come before the action runs and before the
    // complete thinking, which is logged.
    assert!(first_delta < action && action < thinking, "{kinds:?}");
    let mut last_logged = None;
    for (seq, kind, e) in &live {
        assert_eq!(e["seq"].as_u64(), Some(*seq));
        if kind.ends_with("_delta") {
            assert_eq!(e["step"], 0, "{e}");
            // A delta repeats the seq of the logged event before it.
            assert_eq!(Some(*seq), last_logged, "{e}");
        } else {
            last_logged = Some(*seq);
        }
    }

    // The log (and so a replayed stream) has the complete thinking and no
    // deltas; its seqs have no gaps.
    let replay = c.sse(&id, None).await;
    assert!(replay.iter().all(|(_, t, _)| !t.ends_with("_delta")));
    let seqs: Vec<u64> = replay.iter().map(|(s, _, _)| *s).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert!(
        replay
            .iter()
            .any(|(_, t, e)| t == "thinking" && e["text"] == "The counter is on the page.")
    );
    let logged: Vec<(u64, String, Value)> = live
        .into_iter()
        .filter(|(_, t, _)| !t.ends_with("_delta"))
        .collect();
    assert_eq!(logged, replay, "live minus deltas is the log");
    server.shutdown().await;
}

//! The run modes over HTTP: the server runs plan and exec through the
//! facade's `Session::run_mode`, the same path as the agent and the CLI
//! (the retry wording and the planner call are the session's).

use lumen_server::Server;
use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::Reply;
use lumen_test_support::mock_provider::Route;
use lumen_test_support::mock_provider::script::chat_turn;
use serde_json::{Value, json};

use super::{Client, Env};

fn bodies(env: &Env) -> Vec<Value> {
    env.mock.requests().into_iter().map(|r| r.body).collect()
}

#[tokio::test]
async fn an_exec_run_retries_a_failed_attempt_through_the_session() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.mock.push(
        Route::ChatCompletions,
        chat_turn(
            &[(
                "f",
                "task_complete",
                json!({"result": "REASON-MARKER: nothing happened", "status": "failure"}),
            )],
            None,
            100,
        ),
    );
    env.click();
    env.done("clicked");
    let id = c
        .create(
            json!({"instruction": "Click once", "startUrl": env.counter(),
            "maxSteps": 4, "mode": "exec", "attempts": 2}),
        )
        .await;
    let follower = tokio::spawn({
        let c = Client::new(server.local_addr());
        let id = id.clone();
        async move { c.sse(&id, None).await }
    });
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["mode"], "exec");
    assert_eq!(run["result"], "clicked");
    assert_eq!(run["outcome"], "success");
    let bodies: Vec<String> = bodies(&env).iter().map(Value::to_string).collect();
    assert_eq!(bodies.len(), 3, "a failed attempt, then two steps");
    assert!(!bodies[0].contains("Attempt 2"));
    for retry in &bodies[1..] {
        assert!(retry.contains("Attempt 2 of 2"), "{retry}");
        assert!(retry.contains("REASON-MARKER"));
        assert!(retry.contains("Take a different approach"));
    }
    // The failed attempt's ending is where it happened, before the retry's
    // events, in the log and for a client that followed the run live.
    let logged = c.sse(&id, None).await;
    for seen in [logged, follower.await.unwrap()] {
        let events: Vec<Value> = seen.into_iter().map(|(_, _, d)| d).collect();
        for (i, e) in events.iter().enumerate() {
            assert_eq!(
                e["seq"].as_u64(),
                Some(i as u64),
                "out of order at {i}: {e}"
            );
        }
        let endings: Vec<&Value> = events.iter().filter(|e| e["type"] == "done").collect();
        assert_eq!(endings.len(), 2, "{endings:?}");
        assert_eq!(endings[0]["status"], "failure");
        assert_eq!(endings[1]["status"], "success");
        assert_eq!(events.last().unwrap()["type"], "done");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_plan_run_opens_the_start_url_and_answers_with_the_plan() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.mock.push(
        Route::ChatCompletions,
        Reply::Json(
            StatusCode::OK,
            json!({"id": "chatcmpl-p", "object": "chat.completion", "model": "mock",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "1. Click Increment."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}}),
        ),
    );
    let id = c
        .create(json!({"instruction": "Click once", "startUrl": env.counter(), "mode": "plan"}))
        .await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "1. Click Increment.");
    assert_eq!(run["stepsCompleted"], 0);
    let bodies = bodies(&env);
    assert_eq!(bodies.len(), 1);
    assert_ne!(bodies[0]["stream"], true, "a single-shot planner call");
    assert!(
        bodies[0]
            .to_string()
            .contains(&format!("Current URL: {}", env.counter())),
        "the planner saw the start page"
    );
    // A plan run takes no step: its event stream is empty.
    assert!(c.sse(&id, None).await.is_empty());
    server.shutdown().await;
}

//! Follow-on tasks (`POST /v1/runs/{id}/tasks`, IPC `add_task`): run in
//! the same browser after the task before them succeeded, every answer
//! kept. Real Chromium, the real server, the mock provider.

use std::time::Duration;

use lumen_server::Server;
use lumen_test_support::mock_provider::Route;
use lumen_test_support::mock_provider::script::chat_turn;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use super::{Client, Env, Stored};

impl Env {
    /// A `goto` to the fixture site's `page` (a navigation the next task
    /// can only see if it runs in the same browser).
    fn goto(&self, page: &str) {
        self.mock.push(
            Route::ChatCompletions,
            chat_turn(
                &[("g", "goto", json!({"url": self.site.url(page)}))],
                None,
                100,
            ),
        );
    }

    fn fail(&self, reason: &str) {
        self.mock.push(
            Route::ChatCompletions,
            chat_turn(
                &[(
                    "d",
                    "task_complete",
                    json!({"result": reason, "status": "failure"}),
                )],
                None,
                100,
            ),
        );
    }
}

/// Every event of the log numbered 0, 1, 2… with no gap and no repeat.
fn assert_one_numbering(events: &[Value]) {
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (0..events.len() as u64).collect::<Vec<_>>(),
        "one numbering"
    );
}

/// Each task's answer, in task order.
fn answers(run: &Value) -> Vec<&str> {
    run["taskResults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["result"].as_str().unwrap_or_default())
        .collect()
}

/// The URL of each `step_started` event, with its step, in log order.
fn step_urls(events: &[Value]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "step_started")
        .map(|e| {
            (
                e["step"].as_u64().unwrap(),
                e["url"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_follow_on_task_runs_in_the_same_browser_and_every_answer_is_kept() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    // Task 0 leaves the start page for page 2; task 1 answers at once.
    env.goto("links/page2.html");
    env.done("one");
    env.done("two");
    let id = c
        .create(json!({"instruction": "Open page 2", "startUrl": env.counter(), "maxSteps": 4}))
        .await;
    // Paused before its first step, so the task is queued while the run
    // has not ended, whatever the timing.
    let (status, _) = c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    assert_eq!(status, 200);
    let path = format!("/v1/runs/{id}/tasks");

    // Bad bodies name the field and queue nothing.
    for (body, code, field) in [
        (json!({"instruction": "  "}), "invalid_field", "instruction"),
        (json!({"instruction": 3}), "invalid_field", "instruction"),
        (json!({}), "missing_field", "instruction"),
        (
            json!({"instruction": "x", "task": "y"}),
            "unknown_field",
            "task",
        ),
    ] {
        let (status, err) = c.post(&path, body.clone()).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["error"]["code"], code, "{body}");
        assert_eq!(err["error"]["field"], field, "{body}");
    }
    let (status, err) = c.post_raw(&path, "[1]".into()).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("invalid_json"))
    );
    let (status, err) = c
        .post("/v1/runs/run_nope/tasks", json!({"instruction": "x"}))
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("not_found"))
    );

    let (status, queued) = c
        .post(&path, json!({"instruction": "Say what page this is"}))
        .await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued, json!({"id": id, "task": 1, "queued": 1}));
    let run = c.run(&id).await;
    assert_eq!(run["tasks"], json!(["Say what page this is"]));
    assert_eq!(run["taskIndex"], 0);

    let (status, _) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200);
    let run = c.wait_status(&id, "completed").await;
    // The run's answer is the last task's; each task's is kept.
    assert_eq!(run["result"], "two", "{run}");
    assert_eq!(run["outcome"], "success");
    assert_eq!(run["taskIndex"], 1);
    assert_eq!(run["stepsCompleted"], 3, "both tasks' steps count");
    let results = run["taskResults"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{run}");
    assert_eq!(results[0]["instruction"], "Open page 2");
    assert_eq!(results[0]["result"], "one");
    assert_eq!(results[0]["status"], "success");
    assert_eq!(results[0]["steps"], 2);
    assert_eq!(results[1]["instruction"], "Say what page this is");
    assert_eq!(results[1]["result"], "two");
    assert_eq!(results[1]["steps"], 1);

    // One event log: each task's loop starts and ends in it, and the second
    // task starts on the page the first left (a fresh browser would show
    // about:blank or the start URL).
    let events = c.events(&id).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "run_started").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "done").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"done"));
    assert_one_numbering(&events);
    let page2 = env.site.url("links/page2.html");
    assert_eq!(
        step_urls(&events),
        vec![(0, env.counter()), (1, page2.clone()), (0, page2.clone())]
    );
    let second = events
        .iter()
        .rposition(|e| e["type"] == "run_started")
        .unwrap();
    assert_eq!(events[second]["instruction"], "Say what page this is");
    // The model's third request (task 1's only step) is the new task, on
    // page 2, without the first task's history.
    let bodies: Vec<String> = env
        .mock
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(bodies.len(), 3);
    assert!(bodies[2].contains("Say what page this is"));
    assert!(bodies[2].contains("links/page2.html"));
    assert!(!bodies[2].contains("Open page 2"), "a fresh history");

    // An ended run takes no task.
    let (status, err) = c.post(&path, json!({"instruction": "late"})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("run_ended"))
    );
    assert_eq!(c.run(&id).await["tasks"].as_array().unwrap().len(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn a_task_that_fails_ends_the_run_and_the_rest_stay_listed_not_run() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.fail("no such button");
    let id = c
        .create(
            json!({"instruction": "Find the red button", "startUrl": env.counter(), "maxSteps": 3}),
        )
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    let path = format!("/v1/runs/{id}/tasks");
    for (n, task) in ["then this", "and this"].iter().enumerate() {
        let (status, queued) = c.post(&path, json!({"instruction": task})).await;
        assert_eq!(status, 202);
        assert_eq!(queued["task"], n + 1);
        assert_eq!(queued["queued"], n + 1);
    }
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    let run = c.wait_status(&id, "failed").await;
    assert_eq!(run["result"], "no such button");
    assert_eq!(run["taskIndex"], 0);
    assert_eq!(run["tasks"], json!(["then this", "and this"]));
    let results = run["taskResults"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{run}");
    assert_eq!(results[0]["status"], "failure");
    assert_eq!(env.requests(), 1, "the follow-on tasks never ran");
    server.shutdown().await;
}

#[tokio::test]
async fn ipc_add_task_queues_a_follow_on_task() {
    let env = Env::new().await;
    env.click();
    env.done("clicked");
    env.done("still here");
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
    let mut send = async |v: Value| {
        client_in
            .write_all(format!("{v}\n").as_bytes())
            .await
            .unwrap();
    };
    send(json!({"id": 1, "method": "create", "params": {
        "instruction": "Click", "startUrl": env.counter(), "maxSteps": 3
    }}))
    .await;
    let created = next().await;
    let run_id = created["result"]["id"].as_str().unwrap().to_string();
    for r in [
        json!({"id": 2, "method": "pause", "params": {"runId": run_id}}),
        json!({"id": 3, "method": "add_task", "params": {"runId": run_id, "instruction": "Check the count"}}),
        json!({"id": 4, "method": "add_task", "params": {"runId": run_id, "instruction": ""}}),
        json!({"id": 5, "method": "add_task", "params": {"instruction": "x"}}),
        json!({"id": 6, "method": "resume", "params": {"runId": run_id}}),
        json!({"id": 7, "method": "subscribe", "params": {"runId": run_id}}),
    ] {
        send(r).await;
    }
    assert_eq!(next().await["result"]["status"], "paused");
    let added = next().await;
    assert_eq!(added["id"], 3);
    assert_eq!(
        added["result"],
        json!({"id": run_id, "task": 1, "queued": 1})
    );
    let empty = next().await;
    assert_eq!(empty["error"]["field"], "instruction");
    assert_eq!(next().await["error"]["field"], "runId");
    assert_eq!(next().await["id"], 6);
    let mut done = Vec::new();
    loop {
        let m = next().await;
        if m["ended"] == true {
            break;
        }
        if m["event"]["type"] == "done" {
            done.push(m["event"]["result"].clone());
        }
    }
    assert_eq!(done, vec![json!("clicked"), json!("still here")]);
    send(json!({"id": 8, "method": "get", "params": {"runId": run_id}})).await;
    let run = next().await["result"].clone();
    assert_eq!(run["status"], "completed");
    assert_eq!(run["result"], "still here");
    assert_eq!(run["taskResults"].as_array().unwrap().len(), 2);
    send(
        json!({"id": 9, "method": "add_task", "params": {"runId": run_id, "instruction": "late"}}),
    )
    .await;
    assert_eq!(next().await["error"]["code"], "run_ended");
    drop(client_in);
    service.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_run_interrupted_in_a_follow_on_task_resumes_it_then_runs_the_rest() {
    let env = Env::new().await;
    env.click();
    env.done("one");
    env.stall();
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let id = c
        .create(json!({"instruction": "Click once", "startUrl": env.counter(), "maxSteps": 4}))
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    let path = format!("/v1/runs/{id}/tasks");
    let (status, _) = c.post(&path, json!({"instruction": "Now report"})).await;
    assert_eq!(status, 202);
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    // The follow-on task's first step is in flight (the model stalls) when
    // the server goes down: no step of it is completed.
    c.wait(&id, "task 1's first step in flight", |r| {
        r["taskIndex"] == 1 && env.requests() == 3
    })
    .await;
    server.shutdown().await;

    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let run = c.run(&id).await;
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["taskIndex"], 1);
    // An interrupted run still takes tasks: they run after the resume.
    let (status, queued) = c.post(&path, json!({"instruction": "And stop"})).await;
    assert_eq!(status, 202, "{queued}");
    // Task 2, next after task 1 (which is still to finish).
    assert_eq!(
        (queued["task"].as_u64(), queued["queued"].as_u64()),
        (Some(2), Some(1))
    );
    env.done("two");
    env.done("three");
    let (status, _) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200);
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "three", "{run}");
    assert_eq!(run["taskIndex"], 2);
    assert_eq!(answers(&run), ["one", "two", "three"]);
    assert_eq!(run["stepsCompleted"], 4);

    // Task 0's events survive the resume of task 1 (its snapshot holds no
    // step): one numbering, every answer's `done` logged once.
    let events = c.events(&id).await;
    assert_one_numbering(&events);
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "done")
        .map(|e| &e["result"])
        .collect();
    assert_eq!(done, [&json!("one"), &json!("two"), &json!("three")]);
    let steps: Vec<u64> = step_urls(&events).into_iter().map(|(s, _)| s).collect();
    assert_eq!(steps, vec![0, 1, 0, 0]);
    // The resumed task is task 1 on the page task 0 left, without task 0's
    // history.
    let requests = env.mock.requests();
    let resumed = requests[3].body.to_string();
    assert!(resumed.contains("Now report"), "{resumed}");
    assert!(!resumed.contains("Click once"), "{resumed}");
    assert!(requests[4].body.to_string().contains("And stop"));
    server.shutdown().await;
}

/// Options whose executions stop at every task boundary until the test
/// lets them go: (the gate, notified when one is reached).
fn gated(env: &Env) -> (lumen_server::ServeOptions, Gate) {
    let gate = Gate {
        permits: std::sync::Arc::new(tokio::sync::Semaphore::new(0)),
        reached: std::sync::Arc::new(tokio::sync::Notify::new()),
    };
    let mut options = env.options();
    options.test_hooks.task_gate = Some(gate.permits.clone());
    options.test_hooks.task_gate_reached = Some(gate.reached.clone());
    (options, gate)
}

struct Gate {
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    reached: std::sync::Arc<tokio::sync::Notify>,
}

impl Gate {
    async fn reached(&self) {
        tokio::time::timeout(Duration::from_secs(90), self.reached.notified())
            .await
            .expect("no task boundary reached");
    }

    fn open(&self) {
        self.permits.add_permits(1);
    }
}

/// Creates a paused run of `instruction`, queues `tasks` on it and resumes
/// it.
async fn with_tasks(c: &Client, env: &Env, instruction: &str, tasks: &[&str]) -> String {
    let id = c
        .create(json!({"instruction": instruction, "startUrl": env.counter(), "maxSteps": 4}))
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;
    for task in tasks {
        let (status, queued) = c
            .post(
                &format!("/v1/runs/{id}/tasks"),
                json!({"instruction": task}),
            )
            .await;
        assert_eq!(status, 202, "{queued}");
    }
    let (status, _) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200);
    id
}

#[tokio::test]
async fn a_cancel_at_a_task_boundary_ends_the_run_cancelled_with_the_rest_listed() {
    let env = Env::new().await;
    let (options, gate) = gated(&env);
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("one");
    let id = with_tasks(&c, &env, "Answer", &["then this", "and this"]).await;
    // Task 0 has succeeded; the cancel lands before task 1 is decided on.
    gate.reached().await;
    let (status, _) = c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    assert_eq!(status, 202);
    gate.open();
    let run = c
        .wait(&id, "an ending", |r| {
            !["queued", "running", "paused"].contains(&r["status"].as_str().unwrap())
        })
        .await;
    assert_eq!(run["status"], "cancelled", "{run}");
    assert_eq!(run["cancelReason"], "user_explicit_cancel");
    assert_eq!(run["tasks"], json!(["then this", "and this"]));
    assert_eq!(run["taskIndex"], 0, "no follow-on task ran: {run}");
    let results = run["taskResults"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{run}");
    assert_eq!(
        (&results[0]["status"], &results[0]["result"]),
        (&json!("success"), &json!("one"))
    );
    assert_eq!(run["stepsCompleted"], 1);
    assert_eq!(env.requests(), 1, "the follow-on tasks never ran");
    let record = Stored::open(env.data.path()).await.record(&id).await;
    assert_eq!(record["status"], "cancelled");
    assert_eq!(record["tasks"].as_array().unwrap().len(), 2);
    let (status, err) = c
        .post(
            &format!("/v1/runs/{id}/tasks"),
            json!({"instruction": "late"}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("run_ended"))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_at_a_task_boundary_leaves_the_run_resumable_at_the_next_task() {
    let env = Env::new().await;
    let (options, gate) = gated(&env);
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.click();
    env.done("one");
    let id = with_tasks(&c, &env, "Click once", &["Now report", "And stop"]).await;
    gate.reached().await;
    // The shutdown cancels every run before its first await: once the
    // server says it is shutting down, the cancel has landed.
    let runs = server.runs().clone();
    let stopping = tokio::spawn(server.shutdown());
    while runs.health()["status"] != "shutting_down" {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    gate.open();
    stopping.await.unwrap();
    let record = Stored::open(env.data.path()).await.record(&id).await;
    assert_eq!(record["status"], "interrupted", "{record}");
    assert_eq!(record["cancelReason"], "server_shutdown");
    assert_eq!(record["tasks"], json!(["Now report", "And stop"]));
    assert_eq!(record["taskIndex"], 1, "the next task is the one to run");
    assert_eq!(record["taskResults"][0]["result"], "one");
    assert_eq!(env.requests(), 2);

    // After a restart the run goes on with the next task, then the rest.
    env.done("two");
    env.done("three");
    let mut options = env.options();
    options.test_hooks = Default::default();
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    let (status, _) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200);
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(answers(&run), ["one", "two", "three"]);
    assert_eq!(run["stepsCompleted"], 4);
    let events = c.events(&id).await;
    assert_one_numbering(&events);
    let steps: Vec<u64> = step_urls(&events).into_iter().map(|(s, _)| s).collect();
    assert_eq!(steps, vec![0, 1, 0, 0], "each task once, from its start");
    let requests = env.mock.requests();
    assert!(requests[2].body.to_string().contains("Now report"));
    assert!(
        !requests[2].body.to_string().contains("Click once"),
        "a fresh history"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_stopped_between_a_boundarys_record_and_snapshot_starts_the_task_afresh() {
    let env = Env::new().await;
    let (options, gate) = gated(&env);
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.click();
    env.done("one");
    env.stall();
    let id = with_tasks(&c, &env, "Click once", &["Now report"]).await;
    // At the boundary session.json is still task 0's last snapshot (two
    // steps): what a server that stopped after the boundary's record and
    // before its snapshot leaves.
    gate.reached().await;
    let stored = Stored::open(env.data.path()).await;
    let task0 = stored.session(&id).await.unwrap();
    gate.open();
    c.wait(&id, "task 1's first step in flight", |r| {
        r["taskIndex"] == 1 && env.requests() == 3
    })
    .await;
    // The cancelled task 1 meets the gate too.
    gate.permits.add_permits(8);
    server.shutdown().await;
    stored.set_session(&id, &task0).await;
    stored.0.close().await;

    env.done("two");
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    assert_eq!(c.run(&id).await["taskIndex"], 1);
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "two", "{run}");
    assert_eq!(run["stepsCompleted"], 3, "{run}");
    let events = c.events(&id).await;
    let steps: Vec<u64> = step_urls(&events).into_iter().map(|(s, _)| s).collect();
    assert_eq!(steps, vec![0, 1, 0], "task 1 from its own step 0");
    // The resumed request is task 1 alone, not task 0's history.
    let resumed = env.mock.requests()[3].body.to_string();
    assert!(resumed.contains("Now report"), "{resumed}");
    assert!(!resumed.contains("Click once"), "{resumed}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_run_takes_at_most_the_operators_number_of_follow_on_tasks() {
    let env = Env::new().await;
    let mut options = env.options();
    options.max_tasks_per_run = 2;
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.stall();
    let id = c
        .create(json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 2}))
        .await;
    let path = format!("/v1/runs/{id}/tasks");
    for n in 1..=2 {
        let (status, queued) = c
            .post(&path, json!({"instruction": format!("task {n}")}))
            .await;
        assert_eq!(status, 202, "{queued}");
    }
    let (status, err) = c.post(&path, json!({"instruction": "one too many"})).await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "task_limit");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_tasks_per_run = 2"), "{message}");
    assert_eq!(c.run(&id).await["tasks"], json!(["task 1", "task 2"]));
    c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_resumed_follow_on_task_never_replaces_an_earlier_tasks_screenshots() {
    let env = Env::new().await;
    // Task 0 goes from the counter page to page 2, where task 1 (and its
    // resume) looks: its screenshots differ from task 0's first.
    env.goto("links/page2.html");
    env.done("one");
    env.stall();
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let id = with_tasks(&c, &env, "Open page 2", &["Now report"]).await;
    c.wait(&id, "task 1's first step in flight", |r| {
        r["taskIndex"] == 1 && env.requests() == 3
    })
    .await;
    server.shutdown().await;
    let shots = env.data.path().join("runs").join(&id).join("screenshots");
    let files = |dir: &std::path::Path| -> std::collections::BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| {
                (
                    e.file_name().into_string().unwrap(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    };
    // Task 0's two steps; task 1's first is redone after the resume.
    let before = files(&shots);

    env.done("two");
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    c.wait_status(&id, "completed").await;
    let after = files(&shots);
    for (name, bytes) in &before {
        if name.starts_with("step-001-2") {
            continue; // task 1's step 0, in flight at the shutdown: redone
        }
        assert!(after.get(name) == Some(bytes), "{name} was replaced");
    }
    assert_eq!(
        after.len(),
        3,
        "one file per step of the run: {:?}",
        after.keys()
    );

    // The trace numbers the run's steps once each, and each step's
    // screenshot is its own.
    let (status, trace) = c.get(&format!("/v1/runs/{id}/trace")).await;
    assert_eq!(status, 200);
    let steps = trace["steps"].as_array().unwrap();
    let numbers: Vec<(u64, u64)> = steps
        .iter()
        .map(|s| (s["step"].as_u64().unwrap(), s["taskStep"].as_u64().unwrap()))
        .collect();
    assert_eq!(numbers, vec![(0, 0), (1, 1), (2, 0)]);
    let urls: Vec<&str> = steps
        .iter()
        .map(|s| s["screenshot"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [0, 1, 2].map(|n| format!("/v1/runs/{id}/steps/{n}/screenshot")),
        "one URL per step of the run"
    );
    let mut images = Vec::new();
    for url in urls {
        let r = c
            .http
            .get(format!("{}{url}", c.base))
            .bearer_auth(super::TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{url}");
        images.push(r.bytes().await.unwrap().to_vec());
    }
    // Each step's own file: task 1's step 0 is the newest file of loop
    // step 0 (the same page may look the same, so compare by name).
    assert!(
        images[0] == after["step-001.jpg"],
        "step 0 is task 0's step 0"
    );
    assert!(
        images[1] == after["step-002.jpg"],
        "step 1 is task 0's step 1"
    );
    assert!(
        images[2] == after["step-001-2.jpg"],
        "step 2 is task 1's step 0"
    );
    assert!(images[0] != images[2], "the counter page is not page 2");
    server.shutdown().await;
}

//! Many workers, one queue: two servers on one real PostgreSQL (a
//! throwaway cluster, `lumen_test_support::postgres`), real Chromium, the
//! mock provider.

use std::time::Duration;

use lumen_server::{ServeOptions, Server};
use serde_json::{Value, json};

use super::{Client, Env, assert_every_step_once};

async fn database() -> String {
    tokio::task::spawn_blocking(lumen_test_support::postgres::database)
        .await
        .unwrap()
        .expect("a PostgreSQL for the test")
}

fn worker(env: &Env, url: &str, name: &str) -> ServeOptions {
    let mut o = env.options();
    o.database_url = Some(url.to_string());
    o.worker_id = Some(name.to_string());
    o.lease = Duration::from_secs(1);
    o
}

async fn events(c: &Client, id: &str) -> Vec<Value> {
    c.sse(id, None)
        .await
        .into_iter()
        .map(|(_, _, d)| d)
        .collect()
}

fn ids_and_states(list: &Value) -> Vec<(String, String)> {
    let mut v: Vec<_> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Runs created on either worker are executed once each, by whichever
/// worker claims them; either worker answers for any run; a run held by
/// one worker is cancelled through the other.
#[tokio::test]
async fn two_workers_share_one_queue_and_answer_for_every_run() {
    let env = Env::new().await;
    let url = database().await;
    let a = Server::start(worker(&env, &url, "worker-a")).await.unwrap();
    let b = Server::start(worker(&env, &url, "worker-b")).await.unwrap();
    let (ca, cb) = (Client::new(a.local_addr()), Client::new(b.local_addr()));
    let mut ids = Vec::new();
    for i in 0..4 {
        env.done(&format!("answer {i}"));
        let c = if i % 2 == 0 { &ca } else { &cb };
        ids.push(
            c.create(json!({"instruction": "Report", "startUrl": env.counter(), "maxSteps": 3}))
                .await,
        );
    }
    for (i, id) in ids.iter().enumerate() {
        // Asked of the worker that did not create it.
        let c = if i % 2 == 0 { &cb } else { &ca };
        let run = c.wait_status(id, "completed").await;
        assert_eq!(run["stepsCompleted"], 1, "{run}");
        let log = events(c, id).await;
        assert_every_step_once(&log, 1);
        assert_eq!(
            log.iter().filter(|e| e["type"] == "done").count(),
            1,
            "one ending: {log:?}"
        );
        assert_eq!(ca.run(id).await, cb.run(id).await, "both workers agree");
    }
    assert_eq!(env.requests(), 4, "each run asked the model once");
    let (_, la) = ca.get("/v1/runs").await;
    let (_, lb) = cb.get("/v1/runs").await;
    assert_eq!(ids_and_states(&la), ids_and_states(&lb));

    // A run one worker executes, steered through the other.
    env.stall();
    let id = ca
        .create(json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 3}))
        .await;
    let run = ca
        .wait(&id, "held by a worker", |r| {
            r["status"] == "running" && r["worker"].is_string()
        })
        .await;
    let other = if run["worker"] == "worker-a" {
        &cb
    } else {
        &ca
    };
    let (status, answer) = other
        .post(&format!("/v1/runs/{id}/message"), json!({"text": "hello"}))
        .await;
    assert_eq!(
        (status, &answer["delivery"]),
        (202, &json!("next_step")),
        "{answer}"
    );
    let (status, answer) = other
        .post(&format!("/v1/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 202, "{answer}");
    let (status, again) = other
        .post(&format!("/v1/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (409, Some("invalid_state")),
        "the holder's own checks answer: {again}"
    );
    other.wait_status(&id, "cancelled").await;
    a.shutdown().await;
    b.shutdown().await;
}

/// A worker that dies mid-run (its runtime stopped where it stood: no
/// shutdown, no last write) loses the run when its lease runs out; the
/// other worker resumes it from its last completed step, and every step is
/// recorded once.
#[tokio::test]
async fn a_dead_workers_run_is_taken_over_and_resumed() {
    let env = Env::new().await;
    let url = database().await;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
    let options_a = worker(&env, &url, "worker-a");
    let dying = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(Server::start(options_a)).unwrap();
        addr_tx.send(server.local_addr()).unwrap();
        let _ = kill_rx.recv();
        // Every task of the worker stops where it is.
        rt.shutdown_background();
        std::mem::forget(server);
    });
    let addr = tokio::task::spawn_blocking(move || addr_rx.recv().unwrap())
        .await
        .unwrap();
    let ca = Client::new(addr);
    // Worker A: step 0 clicks, step 1 never gets its answer.
    env.click();
    env.stall();
    let id = ca
        .create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 5}))
        .await;
    ca.wait(&id, "step 1 in flight on worker A", |r| {
        r["stepsCompleted"] == 1 && env.requests() == 2
    })
    .await;
    kill_tx.send(()).unwrap();
    tokio::task::spawn_blocking(move || dying.join().unwrap())
        .await
        .unwrap();

    // Worker B starts after the death and takes the run over.
    env.click();
    env.done("twice");
    let b = Server::start(worker(&env, &url, "worker-b")).await.unwrap();
    let cb = Client::new(b.local_addr());
    let run = cb.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "twice", "{run}");
    assert_eq!(run["resumes"], 1, "{run}");
    assert_eq!(run["stepsCompleted"], 3, "{run}");
    assert_eq!(env.requests(), 4);
    let log = events(&cb, &id).await;
    assert_every_step_once(&log, 3);
    b.shutdown().await;
}

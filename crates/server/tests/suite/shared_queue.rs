//! Many workers, one queue: two servers on one real PostgreSQL (a
//! throwaway cluster, `lumen_test_support::postgres`), real Chromium, the
//! mock provider.

use std::time::Duration;

use lumen_server::{ServeOptions, Server};
use serde_json::{Value, json};

use super::{Client, Env, assert_every_step_once, serve_options};

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
        let log = c.events(id).await;
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

/// The environment variable that turns [`worker_process`] into a worker:
/// the JSON of [`WorkerConfig`].
const WORKER_ENV: &str = "LUMEN_TEST_WORKER";

#[derive(serde::Serialize, serde::Deserialize)]
struct WorkerConfig {
    data_dir: std::path::PathBuf,
    mock: String,
    database_url: String,
    port: u16,
}

/// Not a test of its own: the body of a worker process that
/// [`a_worker_killed_with_sigkill_loses_its_run_to_another`] starts (this
/// test binary again, running only this function, with [`WORKER_ENV`]
/// set). Run as a test, it returns at once.
#[tokio::test]
async fn worker_process() {
    let Ok(config) = std::env::var(WORKER_ENV) else {
        return;
    };
    let config: WorkerConfig = serde_json::from_str(&config).unwrap();
    let mut o = serve_options(&config.data_dir, &config.mock);
    o.port = config.port;
    o.database_url = Some(config.database_url);
    o.worker_id = Some("worker-killed".into());
    o.lease = Duration::from_secs(1);
    let _server = Server::start(o).await.unwrap();
    std::future::pending::<()>().await;
}

/// A worker process killed with SIGKILL mid-run (no shutdown, no last
/// write, its connections cut by the kernel) loses the run when its lease
/// runs out: the other worker resumes it from its last completed step, and
/// every step is recorded once.
#[tokio::test]
async fn a_worker_killed_with_sigkill_loses_its_run_to_another() {
    let env = Env::new().await;
    let url = database().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = WorkerConfig {
        data_dir: env.data.path().to_path_buf(),
        mock: env.mock.base_url(),
        database_url: url.clone(),
        port,
    };
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::shared_queue::worker_process",
            "--nocapture",
        ])
        .env(WORKER_ENV, serde_json::to_string(&config).unwrap())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let ca = Client::new(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while ca
        .http
        .get(format!("{}/health", ca.base))
        .send()
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.click();
    env.stall();
    let id = ca
        .create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 5}))
        .await;
    let run = ca
        .wait(&id, "step 1 in flight on the worker", |r| {
            r["stepsCompleted"] == 1 && env.requests() == 2
        })
        .await;
    assert_eq!(run["worker"], "worker-killed");
    // Its Chromium goes with it: lumen-browser's watchdog kills the
    // browser's process group when the worker's end of its pipe closes.
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    env.click();
    env.done("twice");
    let b = Server::start(worker(&env, &url, "worker-b")).await.unwrap();
    let cb = Client::new(b.local_addr());
    let run = cb.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "twice", "{run}");
    assert_eq!(run["resumes"], 1, "{run}");
    assert_eq!(run["stepsCompleted"], 3, "{run}");
    assert_eq!(env.requests(), 4);
    assert_every_step_once(&cb.events(&id).await, 3);
    b.shutdown().await;
}

/// The global limit holds across workers (one run executes at a time
/// however many workers have free slots), a queued run waits for it, a
/// queue holding `queue_limit` runs refuses more with 429, and cancelling
/// the running run lets the next one start.
#[tokio::test]
async fn the_global_limit_and_the_queue_limit_hold_across_workers() {
    let env = Env::new().await;
    let url = database().await;
    let limited = |name: &str| {
        let mut o = worker(&env, &url, name);
        o.global_max_concurrent = Some(1);
        o.queue_limit = 2;
        o
    };
    let a = Server::start(limited("worker-a")).await.unwrap();
    let b = Server::start(limited("worker-b")).await.unwrap();
    let (ca, cb) = (Client::new(a.local_addr()), Client::new(b.local_addr()));
    env.stall();
    env.stall();
    let body = json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 3});
    let first = ca.create(body.clone()).await;
    let second = cb.create(body.clone()).await;
    ca.wait(&first, "one run executing", |_| true).await;
    let held = |r: &Value| r["status"] == "running" && r["worker"].is_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (running, waiting) = loop {
        let (r1, r2) = (ca.run(&first).await, cb.run(&second).await);
        match (held(&r1), held(&r2)) {
            (true, false) => break (first.clone(), second.clone()),
            (false, true) => break (second.clone(), first.clone()),
            (true, true) => panic!("two runs execute under a global limit of 1"),
            (false, false) => {}
        }
        assert!(tokio::time::Instant::now() < deadline, "no run started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Both workers have a free slot and poll every second: still only one.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for c in [&ca, &cb] {
        assert_eq!(c.run(&waiting).await["status"], "queued");
        assert!(held(&c.run(&running).await));
    }
    // Steering the waiting run keeps it in the queue: a pause holds it
    // there, a resume and a message leave it waiting for the limit.
    for (op, body, status) in [
        ("pause", json!({}), "paused"),
        ("resume", json!({}), "queued"),
    ] {
        let (code, answer) = cb.post(&format!("/v1/runs/{waiting}/{op}"), body).await;
        assert_eq!(
            (code, answer["status"].as_str()),
            (200, Some(status)),
            "{answer}"
        );
    }
    let (code, answer) = ca
        .post(
            &format!("/v1/runs/{waiting}/message"),
            json!({"text": "hi"}),
        )
        .await;
    assert_eq!(code, 202, "{answer}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(ca.run(&waiting).await["status"], "queued");
    assert!(held(&cb.run(&running).await));
    // The queue holds `waiting`; one more fits, the next is refused.
    let third = ca.create(body.clone()).await;
    let (status, full) = cb.post("/v1/runs", body).await;
    assert_eq!(
        (status, full["error"]["code"].as_str()),
        (429, Some("queue_full")),
        "{full}"
    );
    // The running run ends: the next one in the queue starts.
    let (status, _) = cb
        .post(&format!("/v1/runs/{running}/cancel"), json!({}))
        .await;
    assert_eq!(status, 202);
    ca.wait_status(&running, "cancelled").await;
    cb.wait(&waiting, "the next run started", held).await;
    for id in [&waiting, &third] {
        let (status, answer) = ca.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
        assert_eq!(status, 202, "{answer}");
    }
    for id in [&waiting, &third] {
        cb.wait_status(id, "cancelled").await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

//! Durability: a server killed mid-run, or shut down gracefully, leaves
//! runs that resume from their last completed step, with no step lost or
//! repeated.

use std::sync::mpsc;

use lumen_server::{ServeOptions, Server};
use serde_json::json;

use super::{Client, Env, Stored, assert_every_step_once};

/// A server on its own runtime in its own thread, so the test can kill it
/// the hard way: dropping the runtime drops every task mid-flight (the
/// browser it launched dies with it, its lock file is closed), as a crash
/// would. Nothing graceful runs.
struct Doomed {
    addr: std::net::SocketAddr,
    kill: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Doomed {
    fn start(options: ServeOptions) -> Doomed {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (kill, kill_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let server = rt.block_on(Server::start(options)).unwrap();
            addr_tx.send(server.local_addr()).unwrap();
            // The server lives in a task of its own runtime: no shutdown
            // runs, the runtime is dropped with every task in it, and the
            // data directory's lock is released as a dead process's is.
            rt.spawn(async move {
                let _server = server;
                std::future::pending::<()>().await
            });
            let _ = kill_rx.recv();
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        });
        Doomed {
            addr: addr_rx.recv().unwrap(),
            kill,
            thread,
        }
    }

    fn kill(self) {
        self.kill.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

#[tokio::test]
async fn a_run_killed_mid_step_resumes_after_a_restart_with_every_step_once() {
    let env = Env::new().await;
    env.click();
    env.click();
    env.stall();
    let doomed = Doomed::start(env.options());
    let c = Client::new(doomed.addr);
    let id = c
        .create(
            json!({"instruction": "Click four times", "startUrl": env.counter(), "maxSteps": 6}),
        )
        .await;
    // Two steps done, the third waiting on the model: kill.
    c.wait(&id, "step 3 in flight", |r| {
        r["stepsCompleted"] == 2 && env.requests() == 3
    })
    .await;
    doomed.kill();

    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let run = c.run(&id).await;
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(run["cancelReason"], "server_restart");
    assert_eq!(run["stepsCompleted"], 2);
    // The interrupted run's stream is what was logged, and then it ends.
    let before = c.events(&id).await;
    assert_eq!(super::completed_steps(&before), vec![0, 1]);

    let (status, reply) = c
        .post(
            &format!("/v1/runs/{id}/message"),
            json!({"text": "Carry on clicking"}),
        )
        .await;
    assert_eq!(
        (status, reply["delivery"].as_str()),
        (202, Some("on_resume"))
    );
    env.click();
    env.done("four clicks");
    let (status, run) = c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{run}");
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["stepsCompleted"], 4);
    assert_eq!(run["resumes"], 1);
    assert_eq!(run["result"], "four clicks");

    let events = c.events(&id).await;
    assert_every_step_once(&events, 4);
    assert_eq!(events.iter().filter(|e| e["type"] == "done").count(), 1);
    // The resumed run went on from step 2 with the history of steps 0-1:
    // its first request answers the second step's click and carries the
    // message given while it was interrupted.
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 5);
    let resumed = requests[3].body.to_string();
    assert!(resumed.contains("Carry on clicking"));
    assert_eq!(
        resumed.matches("\"role\":\"tool\"").count(),
        requests[2]
            .body
            .to_string()
            .matches("\"role\":\"tool\"")
            .count(),
        "the resumed request has the same tool results as the killed one"
    );
    let (_, trace) = c.get(&format!("/v1/runs/{id}/trace")).await;
    let steps: Vec<u64> = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, vec![0, 1, 2, 3]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_graceful_shutdown_interrupts_and_persists_runs_for_resume() {
    let env = Env::new().await;
    env.click();
    env.stall();
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let id = c
        .create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 5}))
        .await;
    c.wait(&id, "step 2 in flight", |r| {
        r["stepsCompleted"] == 1 && env.requests() == 2
    })
    .await;
    server.shutdown().await;

    // Stored, before any restart: interrupted by the shutdown.
    let stored = Stored::open(env.data.path()).await;
    let record = stored.record(&id).await;
    assert_eq!(record["status"], "interrupted");
    assert_eq!(record["cancelReason"], "server_shutdown");
    assert_eq!(record["stepsCompleted"], 1);
    assert!(stored.session(&id).await.is_some());
    stored.0.close().await;

    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    assert_eq!(c.run(&id).await["status"], "interrupted");
    env.done("twice");
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["stepsCompleted"], 2);
    assert_every_step_once(&c.events(&id).await, 2);
    server.shutdown().await;
}

#[tokio::test]
async fn sigterm_makes_serve_interrupt_and_persist_runs() {
    let env = Env::new().await;
    env.click();
    env.stall();
    let mut options = env.options();
    // `serve` does not report its address: take a free port first.
    options.port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], options.port));
    let serving = tokio::spawn(lumen_server::serve(options));
    let c = Client::new(addr);
    // Health answering means the signal handlers are installed.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while c
        .http
        .get(format!("{}/health", c.base))
        .send()
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "serve did not start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let id = c
        .create(json!({"instruction": "Click", "startUrl": env.counter(), "maxSteps": 5}))
        .await;
    c.wait(&id, "step 2 in flight", |r| {
        r["stepsCompleted"] == 1 && env.requests() == 2
    })
    .await;
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::timeout(std::time::Duration::from_secs(60), serving)
        .await
        .expect("serve did not stop on SIGTERM")
        .unwrap()
        .unwrap();
    let record = Stored::open(env.data.path()).await.record(&id).await;
    assert_eq!(record["status"], "interrupted");
    assert_eq!(record["cancelReason"], "server_shutdown");
    assert_eq!(record["stepsCompleted"], 1);
}

/// A stream ends only once the run's ending is stored: a client that reads
/// the result the moment its stream closes finds it. The ending gate
/// holds the server between deciding how the run ended and saving it.
#[tokio::test]
async fn the_event_stream_ends_only_after_the_result_is_saved() {
    let env = Env::new().await;
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let mut options = env.options();
    options.test_hooks.ending_gate = Some(gate.clone());
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("saved");
    let id = c
        .create(json!({"instruction": "Finish", "startUrl": env.counter(), "maxSteps": 2}))
        .await;
    // Ended in memory, not yet saved.
    c.wait_status(&id, "completed").await;
    let stored = Stored::open(env.data.path()).await;
    assert!(
        stored.result(&id).await.is_none(),
        "the gate holds the save"
    );
    let stream = tokio::spawn({
        let c = Client::new(server.local_addr());
        let id = id.clone();
        async move { c.sse(&id, None).await }
    });
    // However long it is given, the stream does not end while the ending
    // is unsaved.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !stream.is_finished(),
        "the stream ended before the result was saved"
    );
    gate.add_permits(1);
    let events = stream.await.unwrap();
    assert!(
        stored.result(&id).await.is_some(),
        "the result is stored when the stream ends"
    );
    assert_eq!(events.last().unwrap().1, "done");
    server.shutdown().await;
}

//! Where runs get their browsers.
//!
//! - Remote browsers (`ServeOptions::browser_endpoints`): real Chromium
//!   processes started with `--remote-debugging-port`, reached over CDP
//!   like a browser pool. Runs spread over the endpoints; one that refuses
//!   (a pool's 429) is skipped; a browser killed mid-run fails over to the
//!   other endpoint and the run resumes from its last completed step.
//! - Local Chromium: runs at once share one process (or spread over
//!   `browser_processes`); a shared process killed mid-run is replaced and
//!   the run resumes on the new one.

use std::time::Duration;

use lumen::browser::chromium::{DetachedChromium, DetachedOptions};
use lumen_server::{BrowserEndpoint, Server};
use lumen_test_support::mock_provider::script::chat_turn;
use lumen_test_support::mock_provider::{Reply, Route};
use serde_json::{Value, json};

use super::{Client, Env, assert_every_step_once};

/// A Chromium started apart from the server, as a pool's browser is.
struct Remote {
    chromium: Option<DetachedChromium>,
    url: String,
    _profile: tempfile::TempDir,
}

impl Remote {
    async fn start() -> Remote {
        let profile = tempfile::tempdir().unwrap();
        let mut chromium = DetachedChromium::spawn(&DetachedOptions::new(profile.path())).unwrap();
        let url = chromium
            .devtools_url(Duration::from_secs(60))
            .await
            .unwrap();
        Remote {
            chromium: Some(chromium),
            url,
            _profile: profile,
        }
    }

    /// `host:port` of its DevTools.
    fn authority(&self) -> &str {
        let rest = self.url.trim_start_matches("ws://");
        &rest[..rest.find('/').unwrap()]
    }

    /// The URLs of its pages.
    async fn pages(&self) -> Vec<String> {
        let list: Value = reqwest::get(format!("http://{}/json/list", self.authority()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .filter(|t| t["type"] == "page")
            .map(|t| t["url"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    fn kill(&mut self) {
        if let Some(c) = self.chromium.take() {
            c.kill(Duration::ZERO);
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.kill();
    }
}

fn endpoint(url: &str) -> BrowserEndpoint {
    BrowserEndpoint::new(url, 1).unwrap()
}

/// `chat_turn`'s click on the counter's `#inc`, each event 1 s apart: time
/// for the test to kill the browser before the click arrives.
fn slow_click() -> Reply {
    let x = lumen::normalize(160.0, 1280);
    let y = lumen::normalize(120.0, 720);
    match chat_turn(&[("s", "click", json!({"x": x, "y": y}))], None, 100) {
        Reply::Sse(events) => Reply::Slow {
            events,
            pause: Duration::from_secs(1),
        },
        other => other,
    }
}

/// Creates a run whose model clicks, then clicks slowly (a step to lose the
/// browser in), then answers "after the failover" to the step asked again.
async fn click_twice_slowly(env: &Env, c: &Client) -> String {
    env.click();
    env.mock.push(Route::ChatCompletions, slow_click());
    env.done("after the failover");
    c.create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 4}))
        .await
}

/// Waits until run `id` is neither queued nor running.
async fn ended(c: &Client, id: &str) -> Value {
    c.wait(id, "ended", |r| {
        r["status"] != "running" && r["status"] != "queued"
    })
    .await
}

/// Sends signal `name` (`-STOP`, `-KILL`…) to process `pid`.
fn signal(pid: &str, name: &str) -> bool {
    std::process::Command::new("kill")
        .args([name, pid])
        .status()
        .unwrap()
        .success()
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_spread_over_the_endpoints_and_a_lost_browser_fails_over() {
    let env = Env::new().await;
    let (mut a, mut b) = (Remote::start().await, Remote::start().await);
    let mut options = env.options();
    options.max_concurrent = 2;
    options.browser_endpoints = vec![endpoint(&a.url), endpoint(&b.url)];
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());

    // Two runs at once: one on each endpoint (each takes one session).
    env.stall();
    env.stall();
    let body = json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 3});
    let first = c.create(body.clone()).await;
    let second = c.create(body).await;
    wait_for("both runs ask the model", async || env.requests() == 2).await;
    let on = |pages: Vec<String>| pages.iter().filter(|u| u.ends_with("counter.html")).count();
    assert_eq!((on(a.pages().await), on(b.pages().await)), (1, 1));
    for id in [&first, &second] {
        c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
        c.wait_status(id, "cancelled").await;
    }

    // A run whose browser dies mid-step goes on in the other one, from its
    // last completed step: the lost step is asked again, each step is
    // recorded once.
    let id = click_twice_slowly(&env, &c).await;
    // A client following the run live, from before the loss.
    let follower = tokio::spawn({
        let c = Client::new(server.local_addr());
        let id = id.clone();
        async move { c.sse(&id, None).await }
    });
    wait_for("the second model call", async || env.requests() == 4).await;
    let on_a = on(a.pages().await) == 1;
    let (lost, other) = if on_a { (&mut a, &b) } else { (&mut b, &a) };
    lost.kill();
    let run = ended(&c, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"], "after the failover");
    assert_eq!(env.requests(), 5, "the lost step was asked again, once");
    let events = c.events(&id).await;
    assert_every_step_once(&events, 2);
    // The live follower saw the same: no `done` or `error` for the lost
    // browser (the run had not ended), every step once.
    let live: Vec<Value> = follower
        .await
        .unwrap()
        .into_iter()
        .map(|(_, _, d)| d)
        .collect();
    let endings: Vec<&Value> = live
        .iter()
        .filter(|e| e["type"] == "done" || e["type"] == "error")
        .collect();
    assert_eq!(endings.len(), 1, "{endings:?}");
    assert_eq!(endings[0]["status"], "success");
    assert_every_step_once(&live, 2);
    // The run's context and our tab are closed with it: only the page the
    // browser started with is left.
    wait_for("the other browser back to its first page", async || {
        other.pages().await.len() == 1
    })
    .await;
    server.shutdown().await;
}

/// A pool that is full answers 429: the run goes to the next endpoint.
#[tokio::test]
async fn an_endpoint_that_answers_429_is_skipped() {
    let full = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let full_url = format!("http://{}", full.local_addr().unwrap());
    let refusals = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn({
        let refusals = refusals.clone();
        async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            while let Ok((mut s, _)) = full.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                refusals.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = s
                    .write_all(b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            }
        }
    });
    let env = Env::new().await;
    let b = Remote::start().await;
    let mut options = env.options();
    options.browser_endpoints = vec![endpoint(&full_url), endpoint(&b.url)];
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("served by the other");
    let id = c
        .create(json!({"instruction": "Finish", "startUrl": env.counter(), "maxSteps": 2}))
        .await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "served by the other");
    assert!(
        refusals.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the full pool was asked first"
    );
    server.shutdown().await;
}

#[test]
fn endpoints_that_cannot_work_are_refused_with_the_fix() {
    assert!(
        BrowserEndpoint::new("127.0.0.1:9222", 1)
            .unwrap_err()
            .contains("http://host:port")
    );
    assert!(
        BrowserEndpoint::new("http://127.0.0.1:9222", 0)
            .unwrap_err()
            .contains("at least one")
    );
    assert!(BrowserEndpoint::new(" ws://h:1/devtools/browser/x ", 2).is_ok());
}

/// A Browserbase project as the pool (the API stood in for on 127.0.0.1,
/// its sessions a real Chromium): each run creates a session and releases
/// it when its execution ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browserbase_pool_creates_and_releases_a_session_per_run() {
    let env = Env::new().await;
    let remote = Remote::start().await;
    let (api, mut requests) = lumen_test_support::browserbase_stub(remote.url.clone())
        .await
        .unwrap();
    let mut bb = lumen::browser::BrowserbaseOptions::new("bb_live_test", "proj_test");
    bb.api_base = api;
    let mut options = env.options();
    options.browser_endpoints = vec![BrowserEndpoint::browserbase(bb, 2).unwrap()];
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("in browserbase");
    let id = c
        .create(json!({"instruction": "Finish", "startUrl": env.counter(), "maxSteps": 2}))
        .await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "in browserbase");
    let create = requests.recv().await.unwrap();
    assert!(create.starts_with("POST /v1/sessions HTTP/1.1"), "{create}");
    let release = tokio::time::timeout(Duration::from_secs(30), requests.recv())
        .await
        .expect("the session was never released")
        .unwrap();
    assert!(release.contains("REQUEST_RELEASE"), "{release}");
    server.shutdown().await;
    assert!(
        BrowserEndpoint::browserbase(lumen::browser::BrowserbaseOptions::new("", "p"), 1)
            .unwrap_err()
            .contains("API key")
    );
}

/// A Chromium launcher that records the pid of each browser it starts
/// (`exec`, so the pid is Chromium's own).
pub(crate) struct Counted {
    pub(crate) executable: std::path::PathBuf,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Counted {
    pub(crate) fn new() -> Counted {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (executable, log) = (dir.path().join("chromium"), dir.path().join("pids"));
        let chromium = lumen_test_support::locate_chromium().unwrap();
        std::fs::write(
            &executable,
            format!(
                "#!/bin/sh\necho $$ >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                chromium.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&executable, std::fs::Permissions::from_mode(0o755)).unwrap();
        Counted {
            executable,
            log,
            _dir: dir,
        }
    }

    /// The browsers launched so far.
    pub(crate) fn pids(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Two runs at once, `processes` local Chromium allowed: how many were
/// launched for them.
async fn launched_for_two_runs(env: &Env, processes: usize) -> (Server, Counted) {
    let counted = Counted::new();
    let mut options = env.options();
    options.max_concurrent = 2;
    options.browser_processes = processes;
    options.launch.executable = Some(counted.executable.clone());
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    let asked = env.requests();
    env.stall();
    env.stall();
    let body = json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 3});
    let (first, second) = (c.create(body.clone()).await, c.create(body).await);
    wait_for("both runs ask the model", async || {
        env.requests() == asked + 2
    })
    .await;
    for id in [&first, &second] {
        c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
        c.wait_status(id, "cancelled").await;
    }
    (server, counted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_runs_share_one_chromium_and_fail_over_together_when_it_dies() {
    let env = Env::new().await;
    let (server, counted) = launched_for_two_runs(&env, 1).await;
    assert_eq!(counted.pids().len(), 1, "two runs at once, one Chromium");
    let c = Client::new(server.local_addr());

    // The shared browser killed while both runs are mid-step: both resume
    // on one fresh Chromium from their last completed step, each step
    // recorded once.
    env.click();
    env.click();
    env.mock.push(Route::ChatCompletions, slow_click());
    env.mock.push(Route::ChatCompletions, slow_click());
    let body = json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 4});
    let ids = [c.create(body.clone()).await, c.create(body).await];
    // Two fast clicks and two slow ones, in either run: whichever took the
    // slow ones, both are inside a model call now.
    wait_for("both runs in a slow model call", async || {
        env.requests() == 6
    })
    .await;
    assert_eq!(
        counted.pids().len(),
        1,
        "the next runs took the same browser"
    );
    // The answers to the steps asked again.
    env.done("after the failover");
    env.done("after the failover");
    let status = std::process::Command::new("kill")
        .args(["-9", &counted.pids()[0]])
        .status()
        .unwrap();
    assert!(status.success());
    let mut steps = 0;
    for id in &ids {
        let run = ended(&c, id).await;
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(run["result"], "after the failover");
        let completed = run["stepsCompleted"].as_u64().unwrap();
        let events = c.events(id).await;
        assert_every_step_once(&events, completed);
        steps += completed;
    }
    assert_eq!(steps, 4, "two clicks and two answers, each once");
    assert_eq!(env.requests(), 8, "each lost step was asked again, once");
    assert_eq!(counted.pids().len(), 2, "one fresh Chromium took over both");
    server.shutdown().await;
}

/// A shared Chromium that stops answering (SIGSTOP: its connection stays
/// open) is not lent again once a run lost it: the run resumes on a fresh
/// one instead of failing over into the same wedged browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wedged_shared_chromium_is_replaced() {
    let env = Env::new().await;
    let counted = Counted::new();
    let mut options = env.options();
    options.launch.executable = Some(counted.executable.clone());
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    let id = click_twice_slowly(&env, &c).await;
    wait_for("the second model call", async || env.requests() == 2).await;
    let pid = counted.pids()[0].clone();
    let signal = |name: &str| signal(&pid, name);
    assert!(signal("-STOP"));
    let run = ended(&c, &id).await;
    // Ended once its last run let go (a zombie counts: its parent reaps
    // it). Killed here whatever happened: a stopped process must not
    // outlive the test.
    let ended = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ended() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gone = ended();
    signal("-KILL");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"], "after the failover");
    assert_eq!(counted.pids().len(), 2, "a fresh Chromium took over");
    assert!(gone, "the wedged Chromium was ended with its last run");
    server.shutdown().await;
}

/// A shared Chromium that stops answering while no run holds it is not
/// lent to every run after: the next run cannot open its context there,
/// the pool asks the browser, forgets it, and the run fails over to a
/// fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chromium_wedged_between_runs_is_replaced() {
    let env = Env::new().await;
    let counted = Counted::new();
    let mut options = env.options();
    options.launch.executable = Some(counted.executable.clone());
    // The wedged browser's calls time out sooner.
    options.launch.tab.call_timeout = Duration::from_secs(3);
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    let body = json!({"instruction": "Answer", "startUrl": env.counter(), "maxSteps": 2});
    env.done("first");
    let first = c.create(body.clone()).await;
    let run = ended(&c, &first).await;
    assert_eq!(run["status"], "completed", "{run}");
    let pid = counted.pids()[0].clone();
    let signal = |name: &str| signal(&pid, name);
    assert!(signal("-STOP"));
    env.done("second");
    let second = c.create(body).await;
    let run = ended(&c, &second).await;
    signal("-KILL");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"], "second");
    assert_eq!(counted.pids().len(), 2, "a fresh Chromium took over");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_processes_spreads_runs_over_that_many_chromium() {
    let env = Env::new().await;
    let (server, counted) = launched_for_two_runs(&env, 2).await;
    assert_eq!(counted.pids().len(), 2, "a Chromium for each run at once");
    server.shutdown().await;
}

/// With `prelaunch`, Chromium is running before any run, and the first run
/// takes that one; without it, an idle server holds no browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prelaunch_starts_chromium_before_the_first_run_which_takes_it() {
    let env = Env::new().await;
    let idle = Counted::new();
    let mut options = env.options();
    options.launch.executable = Some(idle.executable.clone());
    let server = Server::start(options).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(idle.pids().is_empty(), "no run, no Chromium by default");
    server.shutdown().await;

    let counted = Counted::new();
    let mut options = env.options();
    options.launch.executable = Some(counted.executable.clone());
    options.prelaunch = true;
    let server = Server::start(options).await.unwrap();
    wait_for("Chromium launched before any run", async || {
        counted.pids().len() == 1
    })
    .await;
    let c = Client::new(server.local_addr());
    env.done("ready");
    let id = c
        .create(json!({"instruction": "Answer", "startUrl": env.counter(), "maxSteps": 2}))
        .await;
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "ready", "{run}");
    assert_eq!(counted.pids().len(), 1, "the run took the prelaunched one");
    server.shutdown().await;
}

//! Runs share pooled browsers, never browser state: each run drives a
//! browser context of its own.

use std::time::Duration;

use lumen_server::Server;
use lumen_test_support::FixtureServer;
use serde_json::json;

use super::{Client, Env};

/// Reports what it finds from earlier visits (cookie, local storage,
/// IndexedDB databases, service workers), then stores its own, then says
/// so.
const PAGE: &str = r#"<!doctype html><title>memory</title><body>memory
<script>
(async () => {
  const found = new URLSearchParams({
    cookie: document.cookie,
    local: localStorage.getItem('secret') || '',
    workers: String((await navigator.serviceWorker.getRegistrations()).length),
    databases: String((await indexedDB.databases()).length),
  });
  await fetch('report.txt?' + found);
  document.cookie = 'secret=run-one; max-age=3600; path=/';
  localStorage.setItem('secret', 'run-one');
  await new Promise((ok, err) => {
    const open = indexedDB.open('secret-db');
    open.onsuccess = ok;
    open.onerror = err;
  });
  // A service worker too, where the browser lets one register (the
  // session's request filter may hold its script back): bounded wait.
  await Promise.race([
    navigator.serviceWorker.register('sw.js').catch(() => {}),
    new Promise((ok) => setTimeout(ok, 3000)),
  ]);
  await fetch('stored.txt');
})();
</script>"#;

#[tokio::test]
async fn a_run_sees_nothing_an_earlier_run_stored_in_the_same_browser() {
    let env = Env::new().await;
    let pages = tempfile::tempdir().unwrap();
    std::fs::write(pages.path().join("memory.html"), PAGE).unwrap();
    std::fs::write(
        pages.path().join("sw.js"),
        "self.addEventListener('fetch', () => {});",
    )
    .unwrap();
    let site = FixtureServer::start_at(pages.path()).await.unwrap();
    let reports = || {
        site.requests()
            .into_iter()
            .filter(|r| r.path == "/report.txt")
            .map(|r| r.query.unwrap_or_default())
            .collect::<Vec<_>>()
    };
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());

    // Run 1 opens the page, which stores a cookie, local storage, a
    // database and a service worker while the run is held paused before
    // its first step; then it is cancelled.
    let first = c
        .create(json!({"instruction": "Look", "startUrl": site.url("memory.html"), "maxSteps": 2}))
        .await;
    c.post(&format!("/v1/runs/{first}/pause"), json!({})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !site.requests().iter().any(|r| r.path == "/stored.txt") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "run 1's page never stored its state: {:?}",
            site.requests()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.post(&format!("/v1/runs/{first}/cancel"), json!({})).await;
    c.wait_status(&first, "cancelled").await;
    let expected_empty = "cookie=&local=&workers=0&databases=0";
    assert_eq!(reports(), vec![expected_empty.to_string()]);

    // Run 2, in the same pooled browser (one slot), finds none of it.
    env.done("nothing here");
    let second = c
        .create(json!({"instruction": "Look", "startUrl": site.url("memory.html"), "maxSteps": 2}))
        .await;
    c.wait_status(&second, "completed").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while reports().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "run 2's page never reported"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(reports()[1], expected_empty, "run 2 saw run 1's state");
    server.shutdown().await;
}

/// Two runs at once in one Chromium, one allowed only `localhost`, the
/// other on `127.0.0.1`: neither policy judges the other run's requests.
/// (A request filter intercepts on the browser session and sees both runs'
/// requests; without telling them apart, the first run's policy refused
/// the second's start page.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_at_once_keep_to_their_own_policies() {
    let env = Env::new().await;
    let counted = super::pool::Counted::new();
    let mut options = env.options();
    options.launch.executable = Some(counted.executable.clone());
    options.max_concurrent = 2;
    options.policy.allowed_private_hosts = vec!["127.0.0.1".into(), "localhost".into()];
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.stall();
    env.stall();
    let narrow = c
        .create(json!({
            "instruction": "Wait",
            "startUrl": format!("http://localhost:{}/form.html", env.site.port()),
            "maxSteps": 3,
            "policy": {"allowedDomains": ["localhost"]},
        }))
        .await;
    // Its filter is in place once it asks the model.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while env.requests() < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first run never asked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let other = c
        .create(json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 3}))
        .await;
    let run = c
        .wait(&other, "asks the model or ends", |r| {
            r["status"] != "queued"
        })
        .await;
    let run = match run["status"].as_str() {
        Some("running") => {
            while env.requests() < 2 && c.run(&other).await["status"] == "running" {
                assert!(tokio::time::Instant::now() < deadline, "never asked");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            c.run(&other).await
        }
        _ => run,
    };
    assert_eq!(run["status"], "running", "{run}");
    assert_eq!(env.requests(), 2, "both runs asked the model");
    assert_eq!(counted.pids().len(), 1, "both runs in one Chromium");
    for id in [&narrow, &other] {
        c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
        c.wait_status(id, "cancelled").await;
    }
    server.shutdown().await;
}

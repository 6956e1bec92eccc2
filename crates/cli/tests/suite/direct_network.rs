//! `lumen browser network …`, `set …`, `--profile` and `--proxy` on real
//! Chromium: routes block and mock what the page fetches, the request log
//! lists it, emulation set by one command is seen by later ones (the
//! session's keeper holds it), and the keeper goes with the browser.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::direct::Session;
use super::harness::{alive, code, text};

/// Runs a command with `--json`; it must succeed.
async fn json(s: &Session, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&s.ok(&all).await).unwrap()
}

/// Runs a command that must fail with `expected`; returns its stderr.
async fn fails(s: &Session, args: &[&str], expected: i32) -> String {
    let out = s.cmd(args).await;
    assert_eq!(code(&out), expected, "{args:?}: {}", text(&out.stdout));
    text(&out.stderr)
}

/// The session's state file.
fn state(s: &Session, session: &str) -> Value {
    let path = s.state.path().join(format!("{session}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The keeper's pid, from the state file.
fn keeper_pid(s: &Session) -> u32 {
    let v = state(s, "default");
    u32::try_from(v["keeper"]["pid"].as_u64().expect("a keeper was recorded")).unwrap()
}

/// Waits up to 10 s for `pid` to be gone.
async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// What a page's `fetch` of `url` ended with: `ok STATUS BODY` or `err`.
fn fetch(url: &str) -> String {
    format!(
        "fetch({url:?}).then(r => r.text().then(t => 'ok ' + r.status + ' ' + t), \
         () => 'err')"
    )
}

/// A tiny HTTP server (or proxy: it answers whatever it is asked) that
/// records each request's head and answers with `body` as HTML.
struct Tiny {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Tiny {
    async fn start(body: &'static str) -> Tiny {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    seen.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf).into_owned());
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(reply.as_bytes()).await;
                });
            }
        });
        Tiny { port, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_block_and_mock_requests_and_the_log_lists_them() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;

    // The first `network` command starts the keeper: nothing recorded yet.
    let v = json(&s, &["network", "requests", "--clear"]).await;
    assert_eq!(v["requests"], Value::Array(vec![]), "{v}");
    let keeper = keeper_pid(&s);

    // A mock: the page gets the mock's body and status, not the server's.
    let v = json(
        &s,
        &[
            "network",
            "route",
            "/data/api.json",
            "--body",
            "{\"mocked\":true}",
            "--status",
            "201",
            "--content-type",
            "application/json",
        ],
    )
    .await;
    assert_eq!(v["routes"][0]["action"], "mock", "{v}");
    assert_eq!(
        s.eval(&fetch("/data/api.json")).await,
        "ok 201 {\"mocked\":true}"
    );
    // A block: the request fails and never reaches the server.
    s.site.clear_requests();
    s.ok(&["network", "route", "/data/sample.txt", "--abort"])
        .await;
    assert_eq!(s.eval(&fetch("/data/sample.txt")).await, "err");
    assert!(
        !s.site.requests().iter().any(|r| r.path.contains("sample")),
        "a blocked request reached the server"
    );
    // Other requests go through untouched.
    let through = s.eval(&fetch("/data/slow.json")).await;
    assert!(through.as_str().unwrap().starts_with("ok 200"), "{through}");

    // The log lists what the page fetched, and how routes handled it.
    let v = json(&s, &["network", "requests", "--filter", "/data/"]).await;
    let list = v["requests"].as_array().unwrap();
    let find = |part: &str| {
        list.iter()
            .find(|r| r["url"].as_str().unwrap().contains(part))
            .unwrap_or_else(|| panic!("{part} not in {v}"))
            .clone()
    };
    assert_eq!(find("api.json")["routed"], "mocked");
    assert_eq!(find("api.json")["status"], 201);
    assert_eq!(find("sample.txt")["routed"], "blocked");
    assert!(
        find("sample.txt")["failed"]
            .as_str()
            .unwrap()
            .contains("BLOCKED_BY_CLIENT")
    );
    assert_eq!(find("slow.json")["status"], 200);
    assert!(
        list.iter()
            .all(|r| r["url"].as_str().unwrap().contains("/data/"))
    );
    let plain = s.ok(&["network", "requests"]).await;
    assert!(
        plain.contains("[blocked]") && plain.contains("GET 201"),
        "{plain}"
    );

    // Unroute: the file is fetched from the server again.
    let v = json(&s, &["network", "unroute", "/data/sample.txt"]).await;
    assert_eq!(v["removed"], 1, "{v}");
    assert_eq!(
        s.eval(&fetch("/data/sample.txt"))
            .await
            .as_str()
            .map(|t| t.starts_with("ok 200")),
        Some(true)
    );
    let err = fails(&s, &["network", "unroute", "/nope"], 2).await;
    assert!(err.contains("no route \"/nope\""), "{err}");
    let err = fails(&s, &["network", "route", "/x"], 2).await;
    assert!(err.contains("--abort"), "{err}");
    let err = fails(
        &s,
        &["network", "route", "/x", "--body", "b", "--status", "99"],
        2,
    )
    .await;
    assert!(err.contains("HTTP status"), "{err}");
    json(&s, &["network", "unroute"]).await;
    assert!(
        state(&s, "default")["routes"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(keeper_pid(&s), keeper, "one keeper serves the session");

    // The keeper's folder is private.
    use std::os::unix::fs::PermissionsExt as _;
    let dir = s.state.path().join("default.keeper");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("sock")), 0o600);

    s.ok(&["close"]).await;
    assert!(gone(keeper).await, "close ends the keeper");
    assert!(!dir.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulation_set_by_one_command_holds_for_the_next() {
    let s = Session::new().await;
    let origin = Tiny::start("<title>headers</title>").await;
    s.ok(&["open", &s.site.url("form.html")]).await;

    let v = json(&s, &["set", "viewport", "800", "600"]).await;
    assert_eq!(v["emulation"]["viewport"]["width"], 800, "{v}");
    assert_eq!(s.eval("innerWidth + 'x' + innerHeight").await, "800x600");
    // It outlives a navigation too.
    s.ok(&["reload"]).await;
    assert_eq!(s.eval("innerWidth").await, 800);

    json(&s, &["set", "device", "Pixel 7"]).await;
    assert!(
        s.eval("navigator.userAgent")
            .await
            .as_str()
            .unwrap()
            .contains("Pixel 7")
    );
    assert_eq!(s.eval("devicePixelRatio").await, 2.625);
    assert_eq!(s.eval("screen.width").await, 412);
    assert_eq!(s.eval("navigator.maxTouchPoints > 0").await, true);
    let list = s.ok(&["set", "device", "list"]).await;
    assert!(list.contains("iPhone 15"), "{list}");
    let err = fails(&s, &["set", "device", "Nokia 3310"], 2).await;
    assert!(err.contains("known devices"), "{err}");

    json(&s, &["set", "useragent", "LumenTestAgent/1.0"]).await;
    assert_eq!(s.eval("navigator.userAgent").await, "LumenTestAgent/1.0");

    json(&s, &["set", "geo", "-33.8688", "151.2093"]).await;
    let at = s
        .eval(
            "new Promise(r => navigator.geolocation.getCurrentPosition(\
             p => r([p.coords.latitude, p.coords.longitude]), e => r('denied ' + e.message)))",
        )
        .await;
    assert_eq!(at, serde_json::json!([-33.8688, 151.2093]));
    let err = fails(&s, &["set", "geo", "91", "0"], 2).await;
    assert!(err.contains("latitude"), "{err}");

    json(&s, &["set", "offline", "on"]).await;
    assert_eq!(s.eval(&fetch("/data/sample.txt")).await, "err");
    json(&s, &["set", "offline", "off"]).await;
    assert!(
        s.eval(&fetch("/data/sample.txt"))
            .await
            .as_str()
            .unwrap()
            .starts_with("ok 200")
    );

    json(&s, &["set", "media", "dark"]).await;
    assert_eq!(
        s.eval("matchMedia('(prefers-color-scheme: dark)').matches")
            .await,
        true
    );

    // Extra headers reach the server (a navigation by a later command).
    json(&s, &["set", "headers", "{\"X-Lumen-Test\": \"hello\"}"]).await;
    let err = fails(
        &s,
        &["set", "headers", "{\"X-A\": \"a\\r\\nInjected: 1\"}"],
        2,
    )
    .await;
    assert!(err.contains("line break"), "{err}");
    let err = fails(&s, &["set", "headers", "[1]"], 2).await;
    assert!(err.contains("JSON object"), "{err}");
    s.ok(&["open", &format!("http://127.0.0.1:{}/h", origin.port)])
        .await;
    let heads = origin.heads();
    assert!(
        heads
            .iter()
            .any(|h| h.to_ascii_lowercase().contains("x-lumen-test: hello")),
        "{heads:?}"
    );

    // Reset drops it all.
    s.ok(&["open", &s.site.url("form.html")]).await;
    json(&s, &["set", "reset"]).await;
    assert_eq!(s.eval("innerWidth").await, 1280);
    assert_ne!(s.eval("navigator.userAgent").await, "LumenTestAgent/1.0");
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_exits_when_the_browser_dies() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    s.ok(&["set", "viewport", "640", "480"]).await;
    let keeper = keeper_pid(&s);
    assert!(alive(keeper));
    let browser = u32::try_from(state(&s, "default")["pid"].as_u64().unwrap()).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{browser}")])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(gone(keeper).await, "the keeper outlived its browser");
    // The next command says the session is gone and cleans up.
    let err = fails(&s, &["set", "viewport", "640", "480"], 2).await;
    assert!(err.contains("open"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_keeps_cookies_across_close_and_open() {
    let s = Session::new().await;
    let profile = s.state.path().join("my-profile");
    let dir = profile.to_str().unwrap();
    s.ok(&["--profile", dir, "open", &s.site.url("form.html")])
        .await;
    s.eval("document.cookie = 'kept=yes; max-age=3600'").await;
    // Another session cannot take a profile in use.
    let err = fails(
        &s,
        &[
            "--session",
            "other",
            "--profile",
            dir,
            "open",
            &s.site.url("form.html"),
        ],
        2,
    )
    .await;
    assert!(err.contains("in use"), "{err}");
    s.ok(&["close"]).await;
    assert!(profile.is_dir(), "close deleted the user's profile");

    s.ok(&["--profile", dir, "open", &s.site.url("form.html")])
        .await;
    assert_eq!(s.eval("document.cookie").await, "kept=yes");
    s.ok(&["close"]).await;
    // Without --profile the session starts clean.
    s.ok(&["open", &s.site.url("form.html")]).await;
    assert_eq!(s.eval("document.cookie").await, "");
    s.ok(&["close"]).await;
    assert!(profile.is_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_carries_the_browsers_traffic() {
    let s = Session::new().await;
    let proxy = Tiny::start("<title>via the proxy</title>").await;
    let url = format!("http://127.0.0.1:{}", proxy.port);
    // Credentials are refused before anything starts, and not echoed.
    let secret_url = format!("http://user:s3cret@127.0.0.1:{}", proxy.port);
    let err = fails(&s, &["--proxy", &secret_url, "open", "http://a.test/"], 2).await;
    assert!(
        err.contains("user name or password") && !err.contains("s3cret"),
        "{err}"
    );
    assert!(!s.state.path().join("default.json").exists());

    // A host that does not exist: only the proxy can answer for it.
    s.ok(&["--proxy", &url, "open", "http://lumen-proxy.test/page"])
        .await;
    assert_eq!(s.ok(&["title"]).await, "via the proxy");
    let heads = proxy.heads();
    assert!(
        heads
            .iter()
            .any(|h| h.starts_with("GET http://lumen-proxy.test/page HTTP/1.1")),
        "{heads:?}"
    );
    s.ok(&["close"]).await;
}

//! Launch, connect, disconnect and cleanup.

use std::time::Duration;

use lumen_browser::{BrowserbaseOptions, CdpTab, LaunchOptions, TabOptions};
use lumen_core::{BrowserTab, ErrorCode};
use lumen_test_support::FixtureServer;
use tokio::io::AsyncBufReadExt as _;

use super::common::{env, launch_options, survivors};

/// The folder Chromium keeps its single-instance socket in, linked from
/// the profile; asserted to exist while the browser runs.
fn socket_dir(profile: &std::path::Path) -> std::path::PathBuf {
    let socket = std::fs::read_link(profile.join("SingletonSocket")).unwrap();
    let dir = socket.parent().unwrap().to_owned();
    assert!(dir.exists(), "{}", dir.display());
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_leaves_no_chromium_and_no_profile() {
    let e = env().await;
    let dir = e.tab.user_data_dir().unwrap();
    let needle = dir.to_string_lossy().into_owned();
    assert!(!super::common::processes_mentioning(&needle).is_empty());
    let sockets = socket_dir(&dir);
    e.open("index.html").await;
    e.close().await;
    assert_eq!(survivors(&needle).await, Vec::<u32>::new());
    assert!(!dir.exists(), "the temporary profile was not deleted");
    assert!(!sockets.exists(), "{} was left behind", sockets.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_profile_and_extra_args_are_used_and_kept() {
    let profile = tempfile::tempdir().unwrap();
    let options = LaunchOptions {
        user_data_dir: Some(profile.path().to_path_buf()),
        args: vec!["--lang=fr".to_owned()],
        ..launch_options(TabOptions::default())
    };
    let tab = CdpTab::launch(options).await.unwrap();
    assert_eq!(tab.user_data_dir().as_deref(), Some(profile.path()));
    let pid = tab.browser_pid().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).contains("--lang=fr"));
    tab.close().await.unwrap();
    // The caller's profile survives (only temporary ones are deleted).
    assert!(profile.path().join("Default").exists() || profile.path().join("Local State").exists());
    assert_eq!(
        survivors(&profile.path().to_string_lossy()).await,
        Vec::<u32>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_tab_kills_chromium() {
    let tab = CdpTab::launch(launch_options(TabOptions::default()))
        .await
        .unwrap();
    let needle = tab.user_data_dir().unwrap().to_string_lossy().into_owned();
    let sockets = socket_dir(&tab.user_data_dir().unwrap());
    let clone = tab.clone();
    drop(tab);
    // A clone still owns the browser.
    assert!(!super::common::processes_mentioning(&needle).is_empty());
    drop(clone);
    assert_eq!(survivors(&needle).await, Vec::<u32>::new());
    // Killed, Chromium leaves its socket folder: the drop deletes it.
    assert!(!sockets.exists(), "{} was left behind", sockets.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_chromium_is_browser_disconnected_within_five_seconds() {
    let options = TabOptions {
        // Far above the 5 s bound: only crash detection can make it.
        call_timeout: Duration::from_secs(60),
        ..TabOptions::default()
    };
    let tab = CdpTab::launch(launch_options(options)).await.unwrap();
    assert_eq!(tab.title().await.unwrap(), "");
    let pid = tab.browser_pid().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let err = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            // The first call may still squeeze through before the socket dies.
            if let Err(e) = tab.title().await {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("no BROWSER_DISCONNECTED within 5 s");
    assert_eq!(err.code(), ErrorCode::BrowserDisconnected, "{err}");
    // Actions are fatal too, not page-level failures.
    let err = tab.goto("about:blank").await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::BrowserDisconnected);
    assert!(tab.is_disconnected());
    tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_by_http_endpoint_and_by_websocket() {
    let server = FixtureServer::start().await.unwrap();
    let owner = CdpTab::launch(launch_options(TabOptions::default()))
        .await
        .unwrap();
    let ws = owner.websocket_url().to_owned();
    let port = ws
        .trim_start_matches("ws://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_owned();

    let by_http = CdpTab::connect(&format!("http://127.0.0.1:{port}"), TabOptions::default())
        .await
        .unwrap();
    assert!(by_http.goto(&server.url("counter.html")).await.unwrap().ok);
    assert_eq!(by_http.title().await.unwrap(), "Lumen fixtures: counter");
    let by_ws = CdpTab::connect(&ws, TabOptions::default()).await.unwrap();
    assert!(by_ws.goto(&server.url("form.html")).await.unwrap().ok);
    assert!(by_ws.tabs().await.unwrap().len() >= 3);

    // Closing a connected tab closes only its own tab, never the browser.
    by_http.close().await.unwrap();
    by_ws.close().await.unwrap();
    assert_eq!(owner.title().await.unwrap(), "");
    assert_eq!(owner.tabs().await.unwrap().len(), 1);
    owner.close().await.unwrap();

    let err = CdpTab::connect("http://127.0.0.1:9", TabOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::BrowserDisconnected);
    let err = CdpTab::connect("ftp://nowhere", TabOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ConfigError);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browserbase_session_is_created_used_and_released() {
    let server = FixtureServer::start().await.unwrap();
    let owner = CdpTab::launch(LaunchOptions {
        tab: TabOptions::default(),
        ..launch_options(TabOptions::default())
    })
    .await
    .unwrap();
    let (api, mut requests) =
        lumen_test_support::browserbase_stub(owner.websocket_url().to_owned())
            .await
            .unwrap();

    let mut options = BrowserbaseOptions::new("bb_live_test", "proj_test");
    options.api_base = api.clone();
    assert!(
        !format!("{options:?}").contains("bb_live_test"),
        "the key leaks into Debug"
    );
    let tab = CdpTab::browserbase(options).await.unwrap();
    let create = requests.recv().await.unwrap();
    assert!(
        create.starts_with("POST /v1/sessions HTTP/1.1\n"),
        "{create}"
    );
    let body: serde_json::Value = serde_json::from_str(create.lines().nth(1).unwrap()).unwrap();
    assert_eq!(body, serde_json::json!({"projectId": "proj_test"}));

    assert!(tab.goto(&server.url("counter.html")).await.unwrap().ok);
    assert_eq!(tab.title().await.unwrap(), "Lumen fixtures: counter");
    tab.close().await.unwrap();
    let release = requests.recv().await.unwrap();
    assert!(
        release.starts_with("POST /v1/sessions/sess_0123456789 HTTP/1.1\n"),
        "{release}"
    );
    let body: serde_json::Value = serde_json::from_str(release.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"projectId": "proj_test", "status": "REQUEST_RELEASE"})
    );

    let mut bad = BrowserbaseOptions::new("wrong", "proj_test");
    bad.api_base = api;
    let err = CdpTab::browserbase(bad).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ConfigError);
    assert!(err.to_string().contains("401"), "{err}");
    owner.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_shell_is_preferred_when_installed_with_a_fallback() {
    // Without an explicit executable the launcher picks the headless shell
    // when installed, else Chromium; both must give a working tab with the
    // exact viewport.
    let tab = CdpTab::launch(LaunchOptions::default()).await.unwrap();
    assert_eq!(
        tab.viewport().await.unwrap(),
        lumen_core::Size::new(1280, 720)
    );
    let shell = lumen_test_support::locate_headless_shell();
    let version = tab
        .cdp(
            "Runtime.evaluate",
            serde_json::json!({"expression": "navigator.userAgent", "returnByValue": true}),
        )
        .await
        .unwrap();
    let ua = version["result"]["value"].as_str().unwrap().to_owned();
    assert!(ua.contains("HeadlessChrome"), "{ua}");
    let dir = tab.user_data_dir().unwrap();
    let procs = super::common::processes_mentioning(&dir.to_string_lossy());
    let exe = std::fs::read_link(format!("/proc/{}/exe", tab.browser_pid().unwrap())).unwrap();
    let explicit = ["LUMEN_CHROME", "CHROME_PATH"]
        .iter()
        .find_map(|v| std::env::var_os(v).filter(|p| !p.is_empty()));
    match (explicit, shell) {
        // An explicit choice wins over the automatic one.
        (Some(_), _) => {}
        (None, Some(_)) => assert!(exe.to_string_lossy().contains("headless"), "{exe:?}"),
        (None, None) => assert!(exe.to_string_lossy().contains("chromium"), "{exe:?}"),
    }
    assert!(!procs.is_empty());
    tab.close().await.unwrap();
}

/// Set in the child process of `a_sigkilled_owner_leaves_no_chromium`.
const HOLD_VAR: &str = "LUMEN_BROWSER_TEST_HOLD";

/// The child half of `a_sigkilled_owner_leaves_no_chromium` (this same test
/// binary, re-run with [`HOLD_VAR`] set): launch, report, wait to be killed.
/// In a normal run it only checks that launching works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_launches_and_waits_when_asked() {
    let tab = CdpTab::launch(launch_options(TabOptions::default()))
        .await
        .unwrap();
    let profile = tab.user_data_dir().unwrap();
    if std::env::var_os(HOLD_VAR).is_none() {
        tab.close().await.unwrap();
        assert!(!profile.exists());
        return;
    }
    // The parent reads this line from our stdout.
    let mut out = std::io::stdout();
    std::io::Write::write_all(
        &mut out,
        format!("profile: {}\n", profile.display()).as_bytes(),
    )
    .unwrap();
    std::io::Write::flush(&mut out).unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_owner_leaves_no_chromium() {
    // SIGKILL runs no destructor: only the watchdog can clean up.
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::connect::holder_launches_and_waits_when_asked",
            "--nocapture",
        ])
        .env(HOLD_VAR, "1")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let profile = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the child exited early");
        if let Some(p) = line.strip_prefix("profile: ") {
            break p.to_owned();
        }
    };
    assert!(!super::common::processes_mentioning(&profile).is_empty());
    let sockets = socket_dir(std::path::Path::new(&profile));
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_eq!(survivors(&profile).await, Vec::<u32>::new());
    // The watchdog deletes the temporary profile too.
    let profile = std::path::Path::new(&profile);
    for _ in 0..100 {
        if !profile.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!profile.exists(), "{} was left behind", profile.display());
    assert!(!sockets.exists(), "{} was left behind", sockets.display());
}

/// A web page cannot drive the browser through its DevTools port: the
/// page's WebSocket to the browser endpoint carries an Origin, which
/// Chromium refuses without `--remote-allow-origins`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cannot_open_the_devtools_websocket() {
    let e = env().await;
    e.open("index.html").await;
    let ws = e.tab.websocket_url().to_owned();
    let script = format!(
        "new Promise(done => {{
            const s = new WebSocket({ws:?});
            s.onopen = () => {{ s.close(); done('open'); }};
            s.onerror = () => done('refused');
            setTimeout(() => done('timeout'), 5000);
        }})"
    );
    let answer = e.tab.evaluate(&script).await.unwrap();
    assert_eq!(answer, serde_json::json!("refused"), "{ws}");
    e.close().await;
}

/// A session created but never connected (its browser cannot be reached)
/// is released at once, not left running and billed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browserbase_session_that_cannot_be_connected_is_released() {
    let (api, mut requests) =
        lumen_test_support::browserbase_stub("ws://127.0.0.1:9/devtools/browser/none".to_owned())
            .await
            .unwrap();
    let mut options = BrowserbaseOptions::new("bb_live_test", "proj_test");
    options.api_base = api;
    let err = CdpTab::browserbase(options).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::BrowserDisconnected, "{err}");
    let create = requests.recv().await.unwrap();
    assert!(create.starts_with("POST /v1/sessions "), "{create}");
    let release = tokio::time::timeout(Duration::from_secs(10), requests.recv())
        .await
        .expect("the session was never released")
        .unwrap();
    assert!(
        release.starts_with("POST /v1/sessions/sess_0123456789 ")
            && release.contains("REQUEST_RELEASE"),
        "{release}"
    );
}

/// A session whose browser was lost is still released through the API
/// (else it runs on, billed, until Browserbase times it out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browserbase_session_whose_browser_died_is_still_released() {
    let owner = CdpTab::launch(launch_options(TabOptions::default()))
        .await
        .unwrap();
    let (api, mut requests) =
        lumen_test_support::browserbase_stub(owner.websocket_url().to_owned())
            .await
            .unwrap();
    let mut options = BrowserbaseOptions::new("bb_live_test", "proj_test");
    options.api_base = api;
    let tab = CdpTab::browserbase(options).await.unwrap();
    let create = requests.recv().await.unwrap();
    assert!(create.starts_with("POST /v1/sessions "), "{create}");
    owner.close().await.unwrap();
    for _ in 0..200 {
        if tab.is_disconnected() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tab.is_disconnected(), "the loss was never noticed");
    tab.close().await.unwrap();
    let release = tokio::time::timeout(Duration::from_secs(10), requests.recv())
        .await
        .expect("the session was never released")
        .unwrap();
    assert!(release.contains("REQUEST_RELEASE"), "{release}");
}

//! The `lumen browser` keeper and the session's state on real Chromium:
//! concurrent first `set`/`network` commands start one keeper and lose
//! none of each other's settings.

use std::path::Path;

use serde_json::Value;

use super::direct::Session;
use super::harness::{alive, code, text};

/// The session's state file.
fn state(s: &Session) -> Value {
    let path = s.state.path().join("default.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The live keeper processes of sessions kept in `state_dir`.
fn keepers(state_dir: &Path) -> Vec<u32> {
    let wanted = format!("LUMEN_STATE_DIR={}", state_dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("keeper-internal")
                && environ
                    .split(|b| *b == 0)
                    .any(|var| var == wanted.as_bytes())
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// What a page's `fetch` of `url` ended with: `ok STATUS` or `err`.
fn fetch(url: &str) -> String {
    format!("fetch({url:?}).then(r => 'ok ' + r.status, () => 'err')")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_commands_start_one_keeper_and_keep_every_setting() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    assert!(keepers(s.state.path()).is_empty());

    // Three first commands at once: each needs the keeper, none finds one.
    let (viewport, geo, route) = tokio::join!(
        s.cmd(&["set", "viewport", "800", "600"]),
        s.cmd(&["set", "geo", "10", "20"]),
        s.cmd(&["network", "route", "/data/sample.txt", "--abort"]),
    );
    for out in [&viewport, &geo, &route] {
        assert_eq!(code(out), 0, "{}", text(&out.stderr));
    }
    let running = keepers(s.state.path());
    assert_eq!(running.len(), 1, "keepers: {running:?}");
    let saved = state(&s);
    assert_eq!(saved["keeper"]["pid"].as_u64(), Some(u64::from(running[0])));
    // No command's change was lost to another's write.
    assert_eq!(saved["emulation"]["viewport"]["width"], 800, "{saved}");
    assert_eq!(saved["emulation"]["geo"], serde_json::json!([10.0, 20.0]));
    assert_eq!(saved["routes"][0]["pattern"], "/data/sample.txt", "{saved}");
    // And the browser has them all.
    assert_eq!(s.eval("innerWidth").await, 800);
    assert_eq!(s.eval(&fetch("/data/sample.txt")).await, "err");

    s.ok(&["close"]).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !keepers(s.state.path()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "a keeper outlived close"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

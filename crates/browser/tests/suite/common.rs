//! Shared set-up: a fixture server plus a launched tab.

use std::path::PathBuf;

use lumen_browser::{CdpTab, LaunchOptions, TabOptions};
use lumen_core::{ActionOutcome, BrowserTab};
use lumen_test_support::{FixtureServer, locate_chromium};
use serde_json::Value;

pub(crate) struct Env {
    pub(crate) server: FixtureServer,
    pub(crate) tab: CdpTab,
}

/// Launch options for tests: the system Chromium (never the shell unless
/// asked), headless.
pub(crate) fn launch_options(tab: TabOptions) -> LaunchOptions {
    LaunchOptions {
        executable: Some(locate_chromium().unwrap()),
        tab,
        ..LaunchOptions::default()
    }
}

pub(crate) async fn env() -> Env {
    env_with(TabOptions::default()).await
}

pub(crate) async fn env_with(tab: TabOptions) -> Env {
    let server = FixtureServer::start().await.unwrap();
    let tab = CdpTab::launch(launch_options(tab)).await.unwrap();
    Env { server, tab }
}

impl Env {
    /// Navigates to a fixture page and asserts it loaded.
    pub(crate) async fn open(&self, page: &str) {
        let out = self.tab.goto(&self.server.url(page)).await.unwrap();
        assert!(out.ok, "goto {page}: {out:?}");
    }

    /// Reads `window.lumen.<path>`.
    pub(crate) async fn lumen(&self, path: &str) -> Value {
        self.tab
            .evaluate(&format!("window.lumen.{path}"))
            .await
            .unwrap()
    }

    pub(crate) async fn close(self) {
        self.tab.close().await.unwrap();
    }
}

/// The receipt of an outcome (panics when there is none).
pub(crate) fn receipt(o: &ActionOutcome) -> &lumen_core::EffectReceipt {
    o.effect
        .as_deref()
        .unwrap_or_else(|| panic!("no receipt in {o:?}"))
}

/// Processes (not zombies) whose command line mentions `needle`.
pub(crate) fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// Waits (bounded) until no process mentions `needle`; returns survivors.
pub(crate) async fn survivors(needle: &str) -> Vec<u32> {
    for _ in 0..100 {
        let left = processes_mentioning(needle);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    processes_mentioning(needle)
}

pub(crate) fn fixtures_dir() -> PathBuf {
    lumen_test_support::fixtures_root()
}

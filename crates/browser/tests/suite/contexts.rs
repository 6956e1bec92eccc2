//! Tabs of browser contexts sharing one Chromium (`open_isolated`, as
//! `lumen serve` runs them) stay apart: the browser-wide events one
//! context's connection hears (targets created, downloads) are not another
//! context's receipts, a tab never follows a page of another context, and
//! never runs a script in another context's frame.

use std::time::{Duration, Instant};

use lumen_browser::TabOptions;
use lumen_core::{ActionOutcome, BrowserTab, ClickOptions, Point};

use super::common::env;

/// Hovers on `tab` for `span`, returning each hover's outcome.
async fn keep_acting(tab: &lumen_browser::CdpTab, span: Duration) -> Vec<ActionOutcome> {
    let until = Instant::now() + span;
    let mut outs = Vec::new();
    while Instant::now() < until {
        outs.push(tab.hover(Point { x: 600, y: 600 }).await.unwrap());
    }
    outs
}

/// While A acts, B's page opens a popup and B downloads a file: A's
/// receipts report neither, and A keeps driving its own page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_neither_reports_nor_follows_another_contexts_tabs_and_downloads() {
    let e = env().await;
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let with_downloads = |dir: &tempfile::TempDir| TabOptions {
        download_dir: Some(dir.path().to_path_buf()),
        ..TabOptions::default()
    };
    let a = e
        .tab
        .open_isolated_with(with_downloads(&dirs.0))
        .await
        .unwrap();
    let b = e
        .tab
        .open_isolated_with(with_downloads(&dirs.1))
        .await
        .unwrap();
    assert!(a.goto(&e.server.url("counter.html")).await.unwrap().ok);
    let a_page = a.active_tab_id();
    assert!(b.goto(&e.server.url("download.html")).await.unwrap().ok);

    // A popup of B's page, opened by a timer (no click of A's could have
    // opened it), and a download of B's, both while A acts.
    b.evaluate("setTimeout(() => window.open(location.origin + '/links/page2.html'), 300)")
        .await
        .unwrap();
    let b_clicks = async {
        tokio::time::sleep(Duration::from_millis(600)).await;
        b.click(Point { x: 160, y: 104 }, ClickOptions::default())
            .await
            .unwrap()
    };
    let (a_outs, b_download) = tokio::join!(keep_acting(&a, Duration::from_secs(2)), b_clicks);

    let b_saved = b_download
        .effect
        .as_ref()
        .and_then(|r| r.download.clone())
        .expect("B's click downloads");
    assert!(b_saved.completed, "{b_download:?}");
    for out in &a_outs {
        let receipt = out.effect.as_deref();
        assert!(
            receipt.is_none_or(|r| r.new_tab.is_none() && r.download.is_none()),
            "A's receipt reports B's tab or download: {out:?}"
        );
        assert!(
            !out.hints
                .iter()
                .any(|h| h.contains("tab") || h.contains("download")),
            "{out:?}"
        );
    }
    assert_eq!(a.active_tab_id(), a_page, "A follows only its own tabs");
    assert!(a.url().await.unwrap().ends_with("/counter.html"));
    assert_eq!(a.tabs().await.unwrap().len(), 1);
    // The tab they were opened from, in the default context, neither
    // lists nor drives their pages.
    assert_eq!(e.tab.tabs().await.unwrap().len(), 1);
    assert!(e.tab.switch_to_tab(&a_page).await.is_err());
    assert!(std::fs::read_dir(dirs.0.path()).unwrap().next().is_none());
    // B's own popup is B's.
    assert_eq!(b.tabs().await.unwrap().len(), 2);

    // B's page has an out-of-process frame (its own target, listed by the
    // browser to every connection); A's page has none.
    b.switch_to_tab(&b.tabs().await.unwrap()[0].id)
        .await
        .unwrap();
    assert!(b.goto(&e.server.url("iframes.html")).await.unwrap().ok);
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.evaluate_in_frame("origin=cross", "1").await.is_err() {
        assert!(Instant::now() < deadline, "B's frame never loaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let crossed = a
        .evaluate_in_frame("origin=cross", "window.lumen.clicks")
        .await;
    assert!(crossed.is_err(), "A ran a script in B's frame: {crossed:?}");
    a.close().await.unwrap();
    b.close().await.unwrap();
    e.close().await;
}

/// A page that opens windows in a loop keeps at most `MAX_OPEN_TABS`
/// open: the rest are closed as Chromium announces them, the receipt says
/// so, and the model's own `new_tab` is refused at the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cannot_open_tabs_past_the_cap() {
    use lumen_browser::limits::MAX_OPEN_TABS;
    let e = env().await;
    let tab = e.tab.open_isolated().await.unwrap();
    assert!(tab.goto(&e.server.url("counter.html")).await.unwrap().ok);
    let page = tab.active_tab_id();
    // No click: popups opened by script alone, as a hostile page would.
    tab.evaluate("for (let i = 0; i < 60; i++) window.open('about:blank'); 0")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut hints = Vec::new();
    loop {
        let out = tab.hover(Point { x: 5, y: 5 }).await.unwrap();
        hints.extend(out.hints);
        if tab.tabs().await.unwrap().len() <= MAX_OPEN_TABS
            && hints.iter().any(|h| h.contains("past the limit"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} tabs open; hints {hints:?}",
            tab.tabs().await.unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tab.tabs().await.unwrap().len(), MAX_OPEN_TABS);
    let refused = tab.new_tab().await.unwrap();
    assert!(!refused.ok, "{refused:?}");
    // Closing one makes room again.
    let other = tab
        .tabs()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.id != page && t.id != tab.active_tab_id())
        .unwrap();
    assert!(tab.close_tab(&other.id).await.unwrap().ok);
    assert!(tab.new_tab().await.unwrap().ok);
    tab.close().await.unwrap();
    e.close().await;
}

/// A browser reached over CDP may be a person's: its tabs are never closed
/// for the cap, and the tab opens as many as it is asked to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_browser_keeps_every_tab() {
    use lumen_browser::chromium::{DetachedChromium, DetachedOptions};
    use lumen_browser::limits::MAX_OPEN_TABS;
    let profile = tempfile::tempdir().unwrap();
    let mut options = DetachedOptions::new(profile.path());
    options.executable = Some(lumen_test_support::locate_chromium().unwrap());
    let mut chromium = DetachedChromium::spawn(&options).unwrap();
    let url = chromium
        .devtools_url(Duration::from_secs(60))
        .await
        .unwrap();
    let tab = lumen_browser::CdpTab::connect(&url, TabOptions::default())
        .await
        .unwrap();
    let before = tab.tabs().await.unwrap().len();
    for i in 0..MAX_OPEN_TABS + 2 {
        let out = tab.new_tab().await.unwrap();
        assert!(out.ok, "tab {i}: {out:?}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let out = tab.hover(Point { x: 5, y: 5 }).await.unwrap();
    assert!(
        !out.hints.iter().any(|h| h.contains("past the limit")),
        "{out:?}"
    );
    assert_eq!(tab.tabs().await.unwrap().len(), before + MAX_OPEN_TABS + 2);
    tab.close().await.unwrap();
    chromium.kill(Duration::ZERO);
}

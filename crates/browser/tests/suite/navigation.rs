//! Navigation and settling.

use lumen_core::{BrowserTab, ClickOptions, ImageFormat, Point, ScreenshotOptions, SettleOptions};

use std::time::Duration;

use lumen_browser::{CdpTab, TabOptions};
use lumen_test_support::FixtureServer;

use super::common::{env, launch_options, receipt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goto_back_forward_reload_and_failures() {
    let e = env().await;
    let page1 = e.server.url("links/page1.html");
    let out = e.tab.goto(&page1).await.unwrap();
    assert!(out.ok, "{out:?}");
    let r = receipt(&out);
    assert!(r.navigated);
    assert_eq!(r.url_before.as_deref(), Some("about:blank"));
    assert_eq!(r.url_after.as_deref(), Some(page1.as_str()));
    assert_eq!(e.lumen("page").await, 1);

    // A link click navigates; the receipt says so and names the link.
    let next = e.tab.evaluate("(() => { const r = document.getElementById('next').getBoundingClientRect(); return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; })()").await.unwrap();
    let at = Point::new(
        next[0].as_i64().unwrap() as i32,
        next[1].as_i64().unwrap() as i32,
    );
    let out = e.tab.click(at, ClickOptions::default()).await.unwrap();
    let r = receipt(&out);
    assert!(r.navigated, "{out:?}");
    assert_eq!(r.target.as_ref().unwrap().role.as_deref(), Some("link"));
    assert!(
        r.url_after.as_ref().unwrap().ends_with("/links/page2.html"),
        "{r:?}"
    );
    e.tab.settle(&SettleOptions::default()).await.unwrap();
    assert_eq!(e.lumen("page").await, 2);

    let out = e.tab.back().await.unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(e.lumen("page").await, 1);
    let out = e.tab.forward().await.unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(e.lumen("page").await, 2);
    e.tab
        .evaluate("window.lumen.marker = 'before reload'")
        .await
        .unwrap();
    let out = e.tab.reload().await.unwrap();
    assert!(out.ok && receipt(&out).navigated);
    assert_eq!(e.lumen("marker").await, serde_json::Value::Null);

    // Forward past the end and an unreachable host are ok: false, not errors.
    let out = e.tab.forward().await.unwrap();
    assert!(!out.ok);
    assert!(out.error.unwrap().contains("no next page"));
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = e
        .tab
        .goto(&format!("http://127.0.0.1:{closed_port}/nothing"))
        .await
        .unwrap();
    assert!(!out.ok);
    assert!(
        out.error
            .as_ref()
            .unwrap()
            .contains("ERR_CONNECTION_REFUSED"),
        "{out:?}"
    );
    let out = e.tab.goto("").await.unwrap();
    assert!(!out.ok);
    // A script error is a Script error, not a disconnect.
    let err = e.tab.evaluate("throw new Error('boom')").await.unwrap_err();
    assert_eq!(err.code(), lumen_core::ErrorCode::ScriptError);
    assert!(err.to_string().contains("boom"));
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_waits_for_slow_content_and_returns_at_once_when_settled() {
    let e = env().await;
    e.open("index.html").await;
    // A script-initiated navigation to the slow page: settle follows it
    // through the image (~1 s) and the late fetch (~1.5 s).
    e.tab
        .evaluate(&format!("location.href = {:?}", e.server.url("slow.html")))
        .await
        .unwrap();
    let report = e
        .tab
        .settle(&SettleOptions {
            expect_navigation: true,
            ..SettleOptions::default()
        })
        .await
        .unwrap();
    assert!(!report.timed_out, "{report:?}");
    assert!(report.navigated);
    assert_eq!(e.lumen("ready").await, true);
    assert_eq!(e.lumen("dataLoaded").await, true);
    let out = e
        .tab
        .click(Point::new(140, 354), ClickOptions::default())
        .await
        .unwrap();
    assert!(out.ok);
    assert_eq!(e.lumen("readyClicks").await, 1);

    // Already settled: nothing to wait for, and no time-out.
    let report = e.tab.settle(&SettleOptions::default()).await.unwrap();
    assert!(!report.timed_out && !report.navigated, "{report:?}");

    // goto itself waits for the same.
    e.open("slow.html").await;
    assert_eq!(e.lumen("ready").await, true);
    e.close().await;
}

/// The page's own resources hold the network busy only while they load,
/// but the answer to a fetch restarts the quiet window: the script reading
/// it may start the next request, and settling waits for that one too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_waits_for_a_fetch_started_by_the_answer_to_another() {
    let e = env().await;
    for _ in 0..3 {
        e.open("chain.html").await;
        assert_eq!(e.lumen("done").await, true);
        assert_eq!(
            e.lumen("events").await,
            serde_json::json!(["first", "second"])
        );
    }
    e.close().await;
}

/// A settle that leaves its last frame's check for later
/// (`stable_at_capture`) returns while a change is still going on. The
/// screenshot after it sees the page move during the capture and captures
/// again once the page holds still; an input after it waits for that first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_left_to_the_capture_still_captures_the_settled_page() {
    let e = env().await;
    let deferred = SettleOptions {
        stable_at_capture: true,
        ..SettleOptions::default()
    };
    let png = ScreenshotOptions {
        format: ImageFormat::Png,
        ..ScreenshotOptions::default()
    };
    let go = Point::new(80, 40);

    e.open("frames-chain.html").await;
    let out = e.tab.click(go, ClickOptions::default()).await.unwrap();
    assert!(out.ok, "{out:?}");
    e.tab.settle(&deferred).await.unwrap();
    // The change runs for 30 frames: the settle did not wait for it.
    let frame = e.lumen("frame").await.as_i64().unwrap();
    assert!(
        frame < 30,
        "the settle waited for the whole change ({frame})"
    );
    let shot = e.tab.screenshot(&png).await.unwrap();
    assert_eq!(e.lumen("done").await, true);
    let pixels = image::load_from_memory(&shot.image.data)
        .unwrap()
        .to_rgba8();
    assert_eq!(pixels.get_pixel(400, 500).0, [0, 160, 0, 255]);
    assert_eq!(
        pixels.get_pixel(625, 236).0,
        [0x25, 0x63, 0xeb, 255],
        "#mover at its end"
    );

    // An input right after such a settle lands where the page came to rest.
    e.open("frames-chain.html").await;
    e.tab.click(go, ClickOptions::default()).await.unwrap();
    e.tab.settle(&deferred).await.unwrap();
    let out = e
        .tab
        .click(Point::new(670, 220), ClickOptions::default())
        .await
        .unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(e.lumen("moverClicks").await, 1);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_catches_the_late_layout_shift() {
    let e = env().await;
    e.open("index.html").await;
    e.tab
        .evaluate(&format!("location.href = {:?}", e.server.url("shift.html")))
        .await
        .unwrap();
    let report = e
        .tab
        .settle(&SettleOptions {
            expect_navigation: true,
            ..SettleOptions::default()
        })
        .await
        .unwrap();
    assert!(!report.timed_out, "{report:?}");
    assert_eq!(e.lumen("shifted").await, true);
    assert_eq!(e.lumen("targetTop").await, 230);
    // Clicking where the target is now hits it, not the banner.
    let out = e
        .tab
        .click(Point::new(160, 260), ClickOptions::default())
        .await
        .unwrap();
    assert!(out.ok);
    assert_eq!(e.lumen("targetClicks").await, 1);
    assert_eq!(e.lumen("bannerClicks").await, 0);

    // A short page timer after a click is waited for too.
    e.tab
        .evaluate("setTimeout(() => { document.body.dataset.late = 'yes'; }, 300)")
        .await
        .unwrap();
    let report = e.tab.settle(&SettleOptions::default()).await.unwrap();
    assert!(!report.timed_out);
    assert_eq!(
        e.tab.evaluate("document.body.dataset.late").await.unwrap(),
        "yes"
    );
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_page_is_a_page_failure_not_a_disconnect() {
    let options = lumen_browser::TabOptions {
        call_timeout: std::time::Duration::from_secs(2),
        ..lumen_browser::TabOptions::default()
    };
    let e = super::common::env_with(options).await;
    e.open("counter.html").await;
    // The deadline fires, the browser still answers: the page is at fault.
    let err = e.tab.evaluate("while (true) {}").await.unwrap_err();
    assert_eq!(err.code(), lumen_core::ErrorCode::ScriptError, "{err}");
    assert!(err.to_string().contains("did not answer"), "{err}");
    assert!(err.to_string().contains("the script was stopped"), "{err}");
    // The runaway script was stopped: the page answers again.
    assert_eq!(e.tab.evaluate("1 + 1").await.unwrap(), 2);
    assert!(!e.tab.is_disconnected());
    let out = e.tab.goto(&e.server.url("form.html")).await.unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(e.tab.title().await.unwrap(), "Lumen fixtures: form");
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_navigation_is_reported_as_still_loading_then_settled() {
    let e = env().await;
    e.open("links/page1.html").await;
    e.server
        .set_delay("/links/page2.html", std::time::Duration::from_millis(4000));
    let next = e.tab.evaluate("(() => { const r = document.getElementById('next').getBoundingClientRect(); return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; })()").await.unwrap();
    let at = Point::new(
        next[0].as_i64().unwrap() as i32,
        next[1].as_i64().unwrap() as i32,
    );
    let out = e.tab.click(at, ClickOptions::default()).await.unwrap();
    assert!(out.ok);
    assert!(!receipt(&out).navigated, "{out:?}");
    assert!(
        out.hints.iter().any(|h| h.contains("still loading")),
        "{out:?}"
    );
    let report = e
        .tab
        .settle(&SettleOptions {
            max_wait: std::time::Duration::from_secs(10),
            ..SettleOptions::default()
        })
        .await
        .unwrap();
    assert!(report.navigated && !report.timed_out, "{report:?}");
    assert_eq!(e.lumen("page").await, 2);
    e.close().await;
}

/// A goto waits for the load event by the navigation timeout, not by the
/// per-call one: a page that commits at once but whose image holds its
/// load event past the call timeout opens. (chromiumoxide holds a
/// `Page.navigate` sent through it until the load event, capped at 30 s,
/// so a 40 MB page failed its goto on a loaded machine.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goto_waits_for_a_late_load_event_by_the_navigation_timeout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("late.html"),
        "<!doctype html><title>late</title><img src=late.png>\
         <script>window.lumen = { loaded: false };\
         addEventListener('load', () => { window.lumen.loaded = true; });</script>",
    )
    .unwrap();
    std::fs::write(dir.path().join("late.png"), b"not really a png").unwrap();
    let server = FixtureServer::start_at(dir.path()).await.unwrap();
    server.set_delay("/late.png", Duration::from_secs(4));
    let tab = CdpTab::launch(launch_options(TabOptions {
        call_timeout: Duration::from_secs(2),
        navigation_timeout: Duration::from_secs(20),
        ..TabOptions::default()
    }))
    .await
    .unwrap();
    let out = tab.goto(&server.url("late.html")).await.unwrap();
    assert!(out.ok, "{out:?}");
    assert!(receipt(&out).navigated, "{out:?}");
    assert!(
        !out.hints.iter().any(|h| h.contains("still loading")),
        "{out:?}"
    );
    assert_eq!(tab.evaluate("window.lumen.loaded").await.unwrap(), true);
    tab.close().await.unwrap();
}

/// `url()` answers from the page's tracker, without asking the page: it
/// must still be what `location.href` says after every kind of URL change
/// a page makes on its own (pushState, replaceState, a fragment, a script
/// navigation, back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracked_url_is_the_pages_after_every_kind_of_change() {
    let e = env().await;
    let page1 = e.server.url("links/page1.html");
    assert!(e.tab.goto(&page1).await.unwrap().ok);
    let href = || async { e.tab.evaluate("location.href").await.unwrap() };
    assert_eq!(e.tab.url().await.unwrap(), page1);
    for change in [
        "history.pushState({}, '', '?pushed=1')",
        "history.replaceState({}, '', 'elsewhere.html?replaced=ä')",
        "location.hash = 'part two'",
        "history.back()",
        "location.href = 'page2.html'",
    ] {
        e.tab.evaluate(change).await.unwrap();
        e.tab.settle(&SettleOptions::default()).await.unwrap();
        let page = href().await;
        assert_eq!(
            serde_json::Value::from(e.tab.url().await.unwrap()),
            page,
            "after {change}"
        );
    }
    assert!(e.tab.url().await.unwrap().ends_with("/links/page2.html"));
}

//! `PageLink`, the one-shot client on its own WebSocket: the same input,
//! capture and navigation commands as `CdpTab`, sent over another transport.

use std::time::Duration;

use lumen_browser::{FillResult, PageLink, SavedRef, page_tabs};
use lumen_core::{MouseButton, Point};

use super::common::env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_link_clicks_types_presses_fills_and_captures() {
    let e = env().await;
    e.open("form.html").await;
    let id = e.tab.active_tab_id();
    let ws = e.tab.websocket_url().to_owned();
    let tabs = page_tabs(&ws, Duration::from_secs(10)).await.unwrap();
    assert!(tabs.iter().any(|t| t.id == id), "{tabs:?}");

    let link = PageLink::attach(&ws, &id, Duration::from_secs(10))
        .await
        .unwrap();
    let r = link
        .evaluate(
            "(() => { const r = document.querySelector('#name').getBoundingClientRect(); \
             return [r.x + r.width / 2, r.y + r.height / 2]; })()",
        )
        .await
        .unwrap();
    let at = Point::new(r[0].as_f64().unwrap() as i32, r[1].as_f64().unwrap() as i32);
    assert!(!link.click(at, MouseButton::Left, 1).await.unwrap());
    link.type_text("Ada").await.unwrap();
    link.press(&["Tab".to_owned()]).await.unwrap();
    assert_eq!(
        link.evaluate("[document.querySelector('#name').value, window.lumen.lastFocus]")
            .await
            .unwrap(),
        serde_json::json!(["Ada", "email"])
    );

    let snap = link.snapshot(None, None, &[], &[]).await.unwrap();
    let email = snap
        .snapshot
        .nodes
        .iter()
        .find(|n| n.role == "textbox" && n.name == "Email")
        .expect("an Email textbox");
    let number: u32 = email.reference.trim_start_matches("@e").parse().unwrap();
    let backend = snap
        .refs
        .iter()
        .find(|(n, _)| *n == number)
        .map(|(_, b)| *b)
        .unwrap();
    let target = SavedRef {
        number,
        backend,
        mark: &snap.mark,
        frames: &snap.frames,
    };
    assert_eq!(
        link.fill(target, "ada@example.test").await.unwrap(),
        FillResult::Filled { scrolled: false }
    );
    assert_eq!(
        link.evaluate("document.querySelector('#email').value")
            .await
            .unwrap(),
        "ada@example.test"
    );

    let png = link.screenshot_png().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    drop(link);
    e.close().await;
}

/// A page that opens dialogs in a loop cannot make a link hold them all:
/// the last 64 are kept, each message cut at 1,000 characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_keeps_a_bounded_number_of_dialogs() {
    let e = env().await;
    e.open("form.html").await;
    let link = link_to(&e).await;
    link.evaluate("for (let i = 0; i < 100; i++) alert(i + ':' + 'x'.repeat(5000)); 1")
        .await
        .unwrap();
    let dialogs = link.dialogs().await;
    assert_eq!(dialogs.len(), 64);
    assert!(
        dialogs[63].message.starts_with("99:"),
        "the newest are kept"
    );
    assert!(dialogs.iter().all(|d| d.message.chars().count() == 1_000));
    assert!(link.dialogs().await.is_empty());
}

/// A link whose page starts the navigation a moment after the click (a
/// script that follows the link on a timer): the click still waits for it
/// and says it navigated. A link a script's router handles within the
/// document ends the wait at once, even when a navigation follows later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_on_a_link_waits_for_a_navigation_that_starts_late() {
    let e = env().await;
    let target = e.server.url("links/page2.html");
    let block = "style='display:block;width:200px;height:80px;margin:0'";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("late.html"),
        format!(
            "<!doctype html><body style=margin:0><a href='{target}' {block} \
             onclick='event.preventDefault(); setTimeout(() => location.href = this.href, 150)'>go</a>\
             <a href='#top' {block}>here</a>\
             <a href='{target}' {block} onclick='event.preventDefault(); \
             history.pushState(null, \"\", \"#routed\"); \
             setTimeout(() => location.href = this.href, 300)'>route</a></body>"
        ),
    )
    .unwrap();
    let site = lumen_test_support::FixtureServer::start_at(dir.path())
        .await
        .unwrap();
    let page = site.url("late.html");
    let link = link_to(&e).await;
    let open = || async {
        let out = lumen_core::BrowserTab::goto(&e.tab, &page).await.unwrap();
        assert!(out.ok, "{out:?}");
    };
    let click = |y: i32| link.click(Point::new(50, y), MouseButton::Left, 1);

    open().await;
    // A fragment link does not navigate the page: no wait, not navigated.
    assert!(!click(120).await.unwrap());
    assert!(
        click(40).await.unwrap(),
        "the late navigation was waited for"
    );
    let url = link.evaluate("location.href").await.unwrap();
    assert_eq!(url.as_str(), Some(target.as_str()));

    open().await;
    // The router moved within the document: the click is over, and the
    // navigation its script starts later is not taken for its own.
    assert!(!click(200).await.unwrap());
    assert!(
        link.evaluate("location.href")
            .await
            .unwrap()
            .as_str()
            .unwrap()
            .ends_with("#routed")
    );
}

/// A link to the tab's page, on a WebSocket of its own.
async fn link_to(e: &super::common::Env) -> PageLink {
    PageLink::attach(
        e.tab.websocket_url(),
        &e.tab.active_tab_id(),
        Duration::from_secs(10),
    )
    .await
    .unwrap()
}

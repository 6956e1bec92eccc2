//! Dialogs, popups, downloads, uploads, frames and the accessibility tree.

use lumen_browser::{DialogPolicy, TabOptions};
use lumen_core::{BrowserTab, ClickOptions, Point};

use super::common::{env, env_with, fixtures_dir, receipt};

async fn click(e: &super::common::Env, x: i32, y: i32) -> lumen_core::ActionOutcome {
    e.tab
        .click(Point::new(x, y), ClickOptions::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_follow_the_default_policy_and_are_reported() {
    let e = env().await;
    e.open("dialogs.html").await;
    let out = click(&e, 140, 104).await;
    let d = receipt(&out).dialog.clone().unwrap();
    assert_eq!(
        (d.kind.as_str(), d.message.as_str(), d.accepted),
        ("alert", "Hello from the Lumen alert", true)
    );
    assert!(
        out.hints.iter().any(|h| h.contains("alert dialog")),
        "{out:?}"
    );
    assert_eq!(e.lumen("alertClosed").await, 1);

    let out = click(&e, 140, 169).await;
    let d = receipt(&out).dialog.clone().unwrap();
    assert_eq!((d.kind.as_str(), d.accepted), ("confirm", false));
    assert_eq!(e.lumen("confirmResult").await, false);

    let out = click(&e, 140, 234).await;
    let d = receipt(&out).dialog.clone().unwrap();
    assert_eq!(
        (d.kind.as_str(), d.message.as_str(), d.accepted),
        ("prompt", "What is your name?", false)
    );
    assert_eq!(e.lumen("promptResult").await, serde_json::Value::Null);
    assert_eq!(e.lumen("promptCount").await, 1);

    // beforeunload: arm it (a real click gives the page a user gesture),
    // then leave: the dialog is dismissed and the page stays.
    click(&e, 50, 295).await;
    assert_eq!(e.lumen("beforeunloadArmed").await, true);
    let out = click(&e, 140, 354).await;
    let d = receipt(&out).dialog.clone().unwrap();
    assert_eq!((d.kind.as_str(), d.accepted), ("beforeunload", false));
    assert!(e.tab.url().await.unwrap().ends_with("/dialogs.html"));
    assert_eq!(e.lumen("beforeunloadCount").await, 1);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialog_policy_is_configurable() {
    let policy = DialogPolicy {
        prompt_text: Some("Ada".into()),
        ..DialogPolicy::accept_all()
    };
    let e = env_with(TabOptions {
        dialogs: policy,
        ..TabOptions::default()
    })
    .await;
    e.open("dialogs.html").await;
    click(&e, 140, 169).await;
    assert_eq!(e.lumen("confirmResult").await, true);
    let out = click(&e, 140, 234).await;
    assert!(receipt(&out).dialog.as_ref().unwrap().accepted);
    assert_eq!(e.lumen("promptResult").await, "Ada");
    // Accepting beforeunload lets the navigation through.
    click(&e, 50, 295).await;
    let out = click(&e, 140, 354).await;
    assert!(receipt(&out).navigated, "{out:?}");
    assert!(e.tab.url().await.unwrap().ends_with("/links/page1.html"));
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn popups_and_blank_links_are_followed_and_tabs_switch_back() {
    let e = env().await;
    e.open("popup.html").await;
    let opener = e.tab.active_tab_id();
    let out = click(&e, 150, 104).await;
    let new_tab = receipt(&out).new_tab.clone().unwrap();
    assert!(new_tab.followed, "{out:?}");
    assert_ne!(new_tab.id, opener);
    assert_eq!(e.tab.active_tab_id(), new_tab.id);
    e.tab.settle(&Default::default()).await.unwrap();
    assert!(e.tab.url().await.unwrap().ends_with("/links/page2.html"));
    assert_eq!(e.lumen("page").await, 2);
    let tabs = e.tab.tabs().await.unwrap();
    assert_eq!(tabs.len(), 2, "{tabs:?}");
    assert!(tabs.iter().any(|t| t.id == new_tab.id && t.followed));

    e.tab.switch_to_tab(&opener).await.unwrap();
    assert!(e.tab.url().await.unwrap().ends_with("/popup.html"));
    assert_eq!(e.lumen("popupOpened").await, true);

    let out = click(&e, 150, 174).await;
    let blank = receipt(&out).new_tab.clone().unwrap();
    assert!(blank.followed);
    e.tab.settle(&Default::default()).await.unwrap();
    assert!(e.tab.url().await.unwrap().ends_with("/links/page3.html"));
    assert_eq!(e.tab.tabs().await.unwrap().len(), 3);
    assert!(e.tab.switch_to_tab("no-such-tab").await.is_err());

    // The page closes its own tab: the tab we drove before takes over.
    e.tab
        .evaluate("setTimeout(() => window.close(), 0)")
        .await
        .unwrap();
    for _ in 0..100 {
        if e.tab.tabs().await.unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(e.tab.url().await.unwrap().ends_with("/popup.html"));
    assert_eq!(e.tab.active_tab_id(), opener);
    let shot = e.tab.screenshot(&Default::default()).await.unwrap();
    assert_eq!(shot.image.size(), lumen_core::Size::new(1280, 720));
    let out = click(&e, 150, 104).await;
    assert!(receipt(&out).new_tab.as_ref().unwrap().followed);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_are_saved_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let e = env_with(TabOptions {
        download_dir: Some(dir.path().to_path_buf()),
        ..TabOptions::default()
    })
    .await;
    e.open("download.html").await;
    let out = click(&e, 160, 104).await;
    let d = receipt(&out).download.clone().unwrap();
    assert_eq!(d.suggested_filename, "report.csv");
    assert!(d.completed, "{out:?}");
    let saved = std::fs::read(d.path.as_ref().unwrap()).unwrap();
    assert_eq!(
        saved,
        std::fs::read(fixtures_dir().join("downloads/report.csv")).unwrap()
    );
    assert!(e.tab.url().await.unwrap().ends_with("/download.html"));

    let out = click(&e, 160, 174).await;
    let d = receipt(&out).download.clone().unwrap();
    assert_eq!(d.suggested_filename, "lumen-generated.txt");
    assert!(d.completed);
    assert_eq!(
        std::fs::metadata(dir.path().join("lumen-generated.txt"))
            .unwrap()
            .len(),
        59
    );
    e.close().await;

    // Without a folder, downloads are refused and say so.
    let e = env().await;
    e.open("download.html").await;
    let out = click(&e, 160, 104).await;
    let d = receipt(&out).download.clone().unwrap();
    assert!(!d.completed);
    assert!(out.hints.iter().any(|h| h.contains("refused")), "{out:?}");
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_choosers_are_answered_from_the_allowed_folder() {
    let data = fixtures_dir().join("data");
    let e = env_with(TabOptions {
        upload_dir: Some(data.clone()),
        ..TabOptions::default()
    })
    .await;
    e.open("upload.html").await;
    // Outside the folder: refused before anything happens.
    assert!(
        e.tab
            .set_upload_files(&[fixtures_dir().join("downloads/report.csv")])
            .is_err()
    );
    assert!(e.tab.set_upload_files(&["../index.html".into()]).is_err());

    e.tab.set_upload_files(&["sample.txt".into()]).unwrap();
    let out = click(&e, 220, 104).await;
    assert!(
        out.hints
            .iter()
            .any(|h| h.contains("answered with sample.txt")),
        "{out:?}"
    );
    e.tab.settle(&Default::default()).await.unwrap();
    assert_eq!(e.lumen("changeCount").await, 1);
    assert_eq!(e.lumen("files[0].name").await, "sample.txt");
    let size = std::fs::metadata(data.join("sample.txt")).unwrap().len();
    assert_eq!(e.lumen("files[0].size").await, size);

    // Nothing armed: the chooser is cancelled and the model is told.
    let out = click(&e, 220, 104).await;
    assert!(out.hints.iter().any(|h| h.contains("cancelled")), "{out:?}");
    assert_eq!(e.lumen("changeCount").await, 1);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_and_cross_origin_iframes_take_clicks_typing_and_scripts() {
    let e = env().await;
    e.open("iframes.html").await;
    for _ in 0..100 {
        if e.lumen("framesReady.cross").await == true && e.lumen("framesReady.same").await == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Same-origin frame.
    let out = click(&e, 140, 164).await;
    let target = receipt(&out).target.clone().unwrap();
    assert_eq!(target.tag, "button");
    assert!(
        target
            .frame_url
            .as_deref()
            .unwrap()
            .contains("frames/inner.html")
    );
    click(&e, 180, 230).await;
    e.tab.type_text("same here").await.unwrap();
    assert_eq!(
        e.tab
            .evaluate_in_frame("inner.html", "window.lumen.clicks")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        e.tab
            .evaluate_in_frame("inner.html", "window.lumen.role")
            .await
            .unwrap(),
        "same"
    );

    // Cross-origin (out-of-process) frame: input at pixel coordinates.
    let out = click(&e, 580, 164).await;
    let target = receipt(&out).target.clone().unwrap();
    assert!(target.interactive);
    assert!(
        target
            .frame_url
            .as_deref()
            .unwrap()
            .contains("origin=cross"),
        "{target:?}"
    );
    click(&e, 620, 230).await;
    let out = e.tab.type_text("over there").await.unwrap();
    // Our counters cannot see inside the other process: no false "nothing
    // happened".
    assert!(out.ok && out.hints.is_empty(), "{out:?}");
    // (The parent may log the frame's message meanwhile: then it did change.)
    assert_ne!(receipt(&out).page_changed, Some(false));
    e.tab.settle(&Default::default()).await.unwrap();
    assert_eq!(
        e.tab
            .evaluate_in_frame("origin=cross", "window.lumen.clicks")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        e.tab
            .evaluate_in_frame("origin=cross", "window.lumen.inputValue")
            .await
            .unwrap(),
        "over there"
    );
    assert_eq!(
        e.tab
            .evaluate_in_frame("origin=cross", "window.lumen.role")
            .await
            .unwrap(),
        "cross"
    );
    assert_eq!(e.lumen("frameClicks.cross").await, 1);
    assert_eq!(e.lumen("frameInputs.same").await, "same here");
    assert!(e.tab.evaluate_in_frame("no-such-frame", "1").await.is_err());
    let err = e
        .tab
        .evaluate_in_frame("origin=cross", "throw new Error('inner boom')")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("inner boom"), "{err}");
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accessibility_snapshot_has_stable_refs() {
    let e = env().await;
    e.open("form.html").await;
    let snap = e.tab.accessibility_snapshot().await.unwrap();
    let submit = snap
        .find("button", "Submit")
        .unwrap_or_else(|| panic!("{}", snap.to_text()))
        .clone();
    assert!(submit.reference.starts_with("@e"));
    assert!(snap.nodes.iter().any(|n| n.role == "textbox"));
    assert!(snap.to_text().contains(&format!("[{}]", submit.reference)));
    // Same element, same ref, after the page changed.
    e.tab
        .evaluate("document.getElementById('name').value = 'x'")
        .await
        .unwrap();
    let again = e.tab.accessibility_snapshot().await.unwrap();
    assert_eq!(
        again.find("button", "Submit").unwrap().reference,
        submit.reference
    );
    // A ref resolves to the element's centre, which clicks it.
    let p = e.tab.ref_center(&submit.reference).await.unwrap().unwrap();
    e.tab.click(p, ClickOptions::default()).await.unwrap();
    assert_eq!(e.lumen("submitCount").await, 1);
    assert_eq!(e.tab.ref_center("@e99999").await.unwrap(), None);
    e.close().await;
}

/// A click that opens two windows: the tab follows the first, and the
/// second takes the front. The followed page is brought to the front
/// before the tab waits on it: settling does not run to its deadline (a
/// page behind another draws no frames), and nor does the next input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_tab_behind_a_newer_window_is_brought_to_the_front() {
    let e = env().await;
    e.open("counter.html").await;
    e.tab
        .evaluate(
            "document.addEventListener('click', () => { window.open('/links/page2.html'); \
             window.open('/links/page3.html'); }, { once: true }); 0",
        )
        .await
        .unwrap();
    let out = click(&e, 1200, 700).await;
    let followed = receipt(&out).new_tab.clone().unwrap();
    assert!(followed.followed, "{out:?}");
    let settled = e
        .tab
        .settle(&lumen_core::SettleOptions::default())
        .await
        .unwrap();
    assert!(!settled.timed_out, "{settled:?}");
    // In front: the page is visible, so it draws frames.
    assert_eq!(
        e.tab.evaluate("document.visibilityState").await.unwrap(),
        "visible"
    );
    let hover = e
        .tab
        .hover(lumen_core::Point { x: 600, y: 600 })
        .await
        .unwrap();
    assert!(
        !hover.hints.iter().any(|h| h.contains("settle")),
        "{hover:?}"
    );
    assert_eq!(e.tab.active_tab_id(), followed.id);
    assert_eq!(e.tab.tabs().await.unwrap().len(), 3);
    e.close().await;
}

/// A worker's script is fetched for the page, but only the worker's own
/// target hears the fetch end: it must not hold the page's network busy
/// (settling used to run to its deadline on any page that starts one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_starts_a_worker_settles() {
    let e = env().await;
    e.open("counter.html").await;
    e.tab
        .evaluate(
            "window.w = new Worker(URL.createObjectURL(new Blob(['postMessage(1)'], \
             { type: 'text/javascript' }))); 0",
        )
        .await
        .unwrap();
    let settled = e
        .tab
        .settle(&lumen_core::SettleOptions::default())
        .await
        .unwrap();
    assert!(!settled.timed_out, "{settled:?}");
    e.close().await;
}

/// The loop's snapshot (read_page, find, the ref tools, MCP's snapshot)
/// goes into frames of the page's own renderer at every depth, and a ref
/// there clicks and fills through the page's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_go_into_same_site_frames_at_every_depth() {
    let e = env().await;
    e.open("real/frames-nested.html").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let snap = loop {
        let snap = e.tab.accessibility_snapshot().await.unwrap();
        if snap.find("button", "Deep button").is_some() {
            break snap;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no frame content in\n{}",
            snap.to_text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let text = snap.to_text();
    for said in [
        "Outer text",
        "Level one text",
        "Level two text",
        "Level three text",
    ] {
        assert!(text.contains(said), "{said} missing from\n{text}");
    }
    let button = snap
        .find("button", "Deep button")
        .unwrap()
        .reference
        .clone();
    let p = e.tab.ref_center(&button).await.unwrap().unwrap();
    e.tab.click(p, ClickOptions::default()).await.unwrap();
    let field = snap.find("textbox", "Deep name").unwrap().reference.clone();
    assert!(
        e.tab
            .fill_ref(&field, &serde_json::json!("Ada"))
            .await
            .unwrap()
            .ok
    );
    // The frame tells the page by postMessage, which arrives a task later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut messages = e.lumen("messages").await;
    while messages.as_array().is_some_and(|m| m.len() < 2) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        messages = e.lumen("messages").await;
    }
    assert_eq!(
        messages,
        serde_json::json!(["click:Deep button", "input:Ada"])
    );
    e.close().await;
}

//! Mouse and keyboard, with their receipts.

use std::time::Duration;

use lumen_browser::TabOptions;
use lumen_core::{BrowserTab, ClickOptions, Modifiers, MouseButton, Point};

use super::common::{env, env_with, receipt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_buttons_modifiers_and_counts() {
    let e = env().await;
    e.open("counter.html").await;
    let inc = Point::new(160, 120);
    let out = e.tab.click(inc, ClickOptions::default()).await.unwrap();
    assert!(out.ok && out.hints.is_empty(), "{out:?}");
    let r = receipt(&out);
    let target = r.target.as_ref().unwrap();
    assert_eq!(target.tag, "button");
    assert!(target.interactive);
    assert_eq!(r.page_changed, Some(true));
    assert!(!r.navigated);
    assert_eq!(r.pointer, Some(inc));
    assert_eq!(e.lumen("clicks").await, 1);
    assert_eq!(e.lumen("lastClick.detail").await, 1);

    let mods = Modifiers {
        ctrl: true,
        shift: true,
        ..Modifiers::NONE
    };
    e.tab
        .click(
            inc,
            ClickOptions {
                modifiers: mods,
                ..ClickOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(e.lumen("lastClick.ctrl").await, true);
    assert_eq!(e.lumen("lastClick.shift").await, true);
    assert_eq!(e.lumen("lastClick.alt").await, false);

    let dbl = Point::new(160, 210);
    e.tab
        .click(
            dbl,
            ClickOptions {
                click_count: 2,
                ..ClickOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(e.lumen("dblclicks").await, 1);
    e.tab
        .click(
            inc,
            ClickOptions {
                click_count: 3,
                ..ClickOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(e.lumen("lastClick.detail").await, 3);

    let aux = Point::new(160, 290);
    e.tab
        .click(
            aux,
            ClickOptions {
                button: MouseButton::Right,
                ..ClickOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(e.lumen("contextMenus").await, 1);
    e.tab
        .click(
            aux,
            ClickOptions {
                button: MouseButton::Middle,
                ..ClickOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(e.lumen("middleClicks").await, 1);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_clicks_and_off_viewport_points_are_reported() {
    let e = env().await;
    e.open("counter.html").await;
    // Empty space far from every target: nothing interactive, no change.
    let out = e
        .tab
        .click(Point::new(400, 650), ClickOptions::default())
        .await
        .unwrap();
    assert!(out.ok);
    let r = receipt(&out);
    assert_eq!(r.page_changed, Some(false));
    assert!(!r.target.as_ref().unwrap().interactive);
    assert!(
        out.hints
            .iter()
            .any(|h| h.contains("not interactive") && h.contains("nothing on the page changed")),
        "{out:?}"
    );
    let out = e
        .tab
        .click(Point::new(5000, 10), ClickOptions::default())
        .await
        .unwrap();
    assert!(!out.ok);
    assert!(out.error.unwrap().contains("outside the 1280x720 viewport"));
    assert_eq!(e.lumen("clicks").await, 0);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hover_drag_and_raw_button_presses() {
    let e = env().await;
    e.open("counter.html").await;
    let out = e.tab.hover(Point::new(160, 370)).await.unwrap();
    assert!(out.ok && out.hints.is_empty(), "{out:?}");
    assert_eq!(e.lumen("hovers").await, 1);
    assert_eq!(e.lumen("hovering").await, true);
    assert_eq!(e.tab.cursor(), Some(Point::new(160, 370)));

    let out = e
        .tab
        .drag(
            Point::new(690, 180),
            Point::new(890, 220),
            &[Point::new(750, 190), Point::new(820, 200)],
        )
        .await
        .unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(e.lumen("drag.drags").await, 1);
    assert_eq!(e.lumen("drag.centerX").await, 890);
    assert_eq!(e.lumen("drag.centerY").await, 220);
    assert!(e.lumen("drag.moves").await.as_i64().unwrap() >= 3);
    assert_eq!(e.lumen("drag.lastButtons").await, 1);

    // Down here, move, up there: a drag by hand.
    e.tab
        .mouse_down(Some(Point::new(890, 220)), MouseButton::Left)
        .await
        .unwrap();
    assert_eq!(e.lumen("drag.dragging").await, true);
    e.tab
        .mouse_up(Some(Point::new(790, 200)), MouseButton::Left)
        .await
        .unwrap();
    assert_eq!(e.lumen("drag.dragging").await, false);
    assert_eq!(e.lumen("drag.drags").await, 2);
    assert_eq!(e.lumen("drag.centerX").await, 790);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wheel_scrolls_by_pixels_at_a_point() {
    let e = env().await;
    e.open("scroll.html").await;
    let out = e
        .tab
        .scroll(Point::new(640, 400), 0.0, 400.0, Modifiers::NONE)
        .await
        .unwrap();
    assert!(out.ok);
    assert_eq!(receipt(&out).page_changed, Some(true));
    assert_eq!(e.tab.evaluate("scrollY").await.unwrap(), 400);
    e.tab
        .scroll(Point::new(640, 400), 0.0, -150.0, Modifiers::NONE)
        .await
        .unwrap();
    assert_eq!(e.tab.evaluate("scrollY").await.unwrap(), 250);
    // Over the horizontal strip, a sideways wheel scrolls the strip only.
    e.tab
        .scroll(Point::new(640, 100), 0.0, -1000.0, Modifiers::NONE)
        .await
        .unwrap();
    e.tab
        .scroll(Point::new(640, 100), 320.0, 0.0, Modifiers::NONE)
        .await
        .unwrap();
    assert_eq!(
        e.tab
            .evaluate("document.getElementById('hstrip').scrollLeft")
            .await
            .unwrap(),
        320
    );
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_into_inputs_and_contenteditable() {
    let e = env().await;
    e.open("form.html").await;
    let name = e.tab.evaluate("(() => { const r = document.getElementById('name').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()").await.unwrap();
    let at = Point::new(
        name[0].as_f64().unwrap() as i32,
        name[1].as_f64().unwrap() as i32,
    );
    let out = e.tab.click(at, ClickOptions::default()).await.unwrap();
    assert!(receipt(&out).focus.as_ref().unwrap().editable);
    let out = e.tab.type_text("Ada Lovelace ✓").await.unwrap();
    assert!(out.ok && out.hints.is_empty(), "{out:?}");
    assert_eq!(receipt(&out).page_changed, Some(true));
    assert_eq!(
        e.tab
            .evaluate("document.getElementById('name').value")
            .await
            .unwrap(),
        "Ada Lovelace ✓"
    );

    // ctrl+a then typing replaces the text; Return submits the form.
    let out = e.tab.key_press(&["ctrl+a".to_owned()]).await.unwrap();
    assert!(out.ok);
    e.tab.type_text("Grace").await.unwrap();
    assert_eq!(
        e.tab
            .evaluate("document.getElementById('name').value")
            .await
            .unwrap(),
        "Grace"
    );
    let out = e.tab.key_press(&["Return".to_owned()]).await.unwrap();
    assert!(out.ok);
    assert_eq!(e.lumen("submitCount").await, 1);
    assert_eq!(e.lumen("submitted.name").await, "Grace");

    // contenteditable, with a newline typed as Enter.
    e.tab
        .evaluate("document.getElementById('editor').focus()")
        .await
        .unwrap();
    e.tab.type_text("first\nsecond").await.unwrap();
    let text = e.lumen("editorText").await;
    assert!(
        text.as_str().unwrap().contains("first") && text.as_str().unwrap().contains("second"),
        "{text}"
    );
    assert_eq!(
        e.tab
            .evaluate("document.getElementById('editor').querySelectorAll('div, br').length > 0")
            .await
            .unwrap(),
        true
    );

    // Typing with nothing focused is flagged.
    e.tab
        .evaluate("document.activeElement.blur(); getSelection().removeAllRanges()")
        .await
        .unwrap();
    let out = e.tab.type_text("lost").await.unwrap();
    assert!(
        out.hints
            .iter()
            .any(|h| h.contains("Nothing editable has focus")),
        "{out:?}"
    );
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_names_from_every_dialect_reach_the_page() {
    let e = env_with(TabOptions {
        type_with_key_events: true,
        ..TabOptions::default()
    })
    .await;
    e.open("counter.html").await;
    for (names, key) in [
        (vec!["Page_Down"], "PageDown"),
        (vec!["Next"], "PageDown"),
        (vec!["prior"], "PageUp"),
        (vec!["Return"], "Enter"),
        (vec!["KP_Enter"], "Enter"),
        (vec!["BackSpace"], "Backspace"),
        (vec!["Up"], "ArrowUp"),
        (vec!["escape"], "Escape"),
    ] {
        let keys: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let out = e.tab.key_press(&keys).await.unwrap();
        assert!(out.ok, "{names:?}: {out:?}");
        assert_eq!(e.lumen("lastKey.key").await, key, "{names:?}");
    }
    let out = e
        .tab
        .key_press(&["ctrl".to_owned(), "shift".to_owned(), "k".to_owned()])
        .await
        .unwrap();
    assert!(out.ok);
    assert_eq!(e.lumen("lastKey.ctrl").await, true);
    assert_eq!(e.lumen("lastKey.shift").await, true);
    assert_eq!(e.lumen("lastKey.code").await, "KeyK");
    let out = e.tab.key_press(&["super+a".to_owned()]).await.unwrap();
    assert!(out.ok);
    assert_eq!(e.lumen("lastKey.meta").await, true);

    let out = e
        .tab
        .key_press(&["ctrl".to_owned(), "Blorp".to_owned()])
        .await
        .unwrap();
    assert!(!out.ok);
    assert!(out.error.unwrap().contains("`Blorp`"));

    // Per-key typing sends real keydowns into the focused input.
    e.tab
        .evaluate("document.getElementById('keys').focus()")
        .await
        .unwrap();
    let before = e.lumen("keys.length").await.as_i64().unwrap();
    e.tab.type_text("hi!").await.unwrap();
    assert_eq!(e.lumen("keys.length").await.as_i64().unwrap(), before + 3);
    assert_eq!(
        e.tab
            .evaluate("document.getElementById('keys').value")
            .await
            .unwrap(),
        "hi!"
    );

    let out = e
        .tab
        .hold_key(&["shift".to_owned()], Duration::from_millis(50))
        .await
        .unwrap();
    assert!(out.ok);
    assert_eq!(
        e.lumen("keyups").await.as_array().unwrap().last().unwrap()["key"],
        "Shift"
    );
    e.close().await;
}

/// A key held with `key_down` applies to the mouse events that follow until
/// `key_up` (Gemini's key_down/key_up, OpenAI's keys held while moving or
/// dragging).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_key_modifies_clicks_until_it_is_released() {
    let e = env().await;
    e.open("dpr.html").await;
    e.tab
        .evaluate(
            "window.seen = []; document.addEventListener('click', \
             ev => window.seen.push([ev.shiftKey, ev.ctrlKey]));",
        )
        .await
        .unwrap();
    let at = Point::new(150, 150);
    assert!(e.tab.key_down("Shift").await.unwrap().ok);
    e.tab.click(at, ClickOptions::default()).await.unwrap();
    assert!(e.tab.key_up("Shift").await.unwrap().ok);
    e.tab.click(at, ClickOptions::default()).await.unwrap();
    let seen = e.tab.evaluate("window.seen").await.unwrap();
    assert_eq!(seen, serde_json::json!([[true, false], [false, false]]));
    // Releasing what is not held, or an unknown key, is an ok: false.
    assert!(!e.tab.key_up("Shift").await.unwrap().ok);
    assert!(!e.tab.key_down("NoSuchKey").await.unwrap().ok);
    e.close().await;
}

/// A wheel that ends between the page's snap points: the page's script
/// then moves on to the nearest one over ten frames. Settling follows that
/// motion to its end, both in full and when its last check is left to the
/// screenshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_follows_a_scroll_snap_to_its_end() {
    let e = env().await;
    let png = lumen_core::ScreenshotOptions {
        format: lumen_core::ImageFormat::Png,
        ..lumen_core::ScreenshotOptions::default()
    };
    for stable_at_capture in [false, true] {
        e.open("snap.html").await;
        let out = e
            .tab
            .scroll(Point::new(640, 400), 0.0, 300.0, Modifiers::NONE)
            .await
            .unwrap();
        assert!(out.ok, "{out:?}");
        let settle = lumen_core::SettleOptions {
            stable_at_capture,
            ..lumen_core::SettleOptions::default()
        };
        e.tab.settle(&settle).await.unwrap();
        let shot = e.tab.screenshot(&png).await.unwrap();
        assert_eq!(
            e.lumen("snaps").await,
            1,
            "stable_at_capture: {stable_at_capture}"
        );
        assert_eq!(e.tab.evaluate("scrollY").await.unwrap(), 0);
        // Back at the first section: white to the bottom of the viewport
        // (at 300 the second, red section would show there).
        let pixels = image::load_from_memory(&shot.image.data)
            .unwrap()
            .to_rgba8();
        assert_eq!(
            pixels.get_pixel(640, 715).0,
            [255, 255, 255, 255],
            "stable_at_capture: {stable_at_capture}"
        );
    }
    e.close().await;
}

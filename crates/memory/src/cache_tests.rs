//! Tests of the action cache on real encoded screenshots-like images.

use std::io::Cursor;

use image::{ImageEncoder, Rgb, RgbImage};
use lumen_core::{
    ActionCall, ActionExecution, ActionRecord, EffectReceipt, ImageFormat, Modifiers, MouseButton,
    TerminateStatus, TokenUsage,
};
use pretty_assertions::assert_eq;

use super::*;

type Block = (u32, u32, u32, u32, [u8; 3]);

/// Renders a page-like layout: white background and solid blocks.
fn render(blocks: &[Block]) -> RgbImage {
    let mut img = RgbImage::from_pixel(640, 400, Rgb([255, 255, 255]));
    for &(x, y, w, h, color) in blocks {
        for py in y..(y + h).min(400) {
            for px in x..(x + w).min(640) {
                img.put_pixel(px, py, Rgb(color));
            }
        }
    }
    img
}

fn png(img: &RgbImage) -> Image {
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut bytes))
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    Image::new(ImageFormat::Png, img.width(), img.height(), bytes)
}

fn jpeg(img: &RgbImage) -> Image {
    let mut bytes = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(Cursor::new(&mut bytes), 70)
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    Image::new(ImageFormat::Jpeg, img.width(), img.height(), bytes)
}

const DARK: [u8; 3] = [30, 30, 40];
const BLUE: [u8; 3] = [20, 90, 200];
const GREY: [u8; 3] = [170, 170, 170];

/// A search page: header on top, text lines, a search button on the left.
fn search_page() -> Vec<Block> {
    vec![
        (0, 0, 640, 60, DARK),
        (40, 100, 300, 12, GREY),
        (40, 130, 260, 12, GREY),
        (40, 160, 280, 12, GREY),
        (40, 220, 160, 44, BLUE),
    ]
}

/// The same page with a small difference (a caret in the text, a badge).
fn search_page_touched() -> Vec<Block> {
    let mut blocks = search_page();
    blocks.push((345, 100, 3, 12, DARK));
    blocks.push((600, 20, 14, 14, [220, 40, 40]));
    blocks
}

/// A different layout: header at the bottom, sidebar, button on the right.
fn moved_page() -> Vec<Block> {
    vec![
        (0, 340, 640, 60, DARK),
        (0, 0, 140, 340, GREY),
        (460, 60, 150, 44, BLUE),
        (200, 200, 400, 12, GREY),
    ]
}

fn click() -> Action {
    Action::Click {
        x: 120,
        y: 242,
        button: MouseButton::Left,
        modifiers: Modifiers::NONE,
    }
}

fn button(name: &str) -> ElementInfo {
    ElementInfo {
        tag: "button".into(),
        role: Some("button".into()),
        name: Some(name.into()),
        interactive: true,
        editable: false,
        frame_url: None,
        context: None,
    }
}

/// A record of `action` that worked, hitting `target`.
fn worked(action: Action, target: Option<ElementInfo>) -> ActionRecord {
    let mut execution = ActionExecution::ok();
    execution.effect = Some(Box::new(EffectReceipt {
        target,
        ..EffectReceipt::default()
    }));
    ActionRecord {
        call: ActionCall::new("c", action),
        execution,
        blocked: None,
    }
}

/// A record of typing that worked, into `focus`.
fn typed(text: &str, focus: Option<ElementInfo>) -> ActionRecord {
    let mut record = worked(Action::Type { text: text.into() }, None);
    if let Some(effect) = record.execution.effect.as_mut() {
        effect.focus_before = focus;
    }
    record
}

fn search_box() -> ElementInfo {
    ElementInfo {
        tag: "input".into(),
        role: Some("searchbox".into()),
        editable: true,
        ..button("Search for")
    }
}

fn step(n: u32, url: &str, shot: Image, actions: Vec<ActionRecord>) -> SemanticStep {
    SemanticStep {
        step: n,
        url: url.into(),
        screenshot: Some(shot),
        thinking: Vec::new(),
        text: None,
        actions,
        usage: TokenUsage::default(),
        started_at_ms: 0,
        duration_ms: 0,
        model_ms: 0,
    }
}

fn terminate(answer: &str) -> Action {
    Action::Terminate {
        status: TerminateStatus::Success,
        result: answer.into(),
    }
}

fn key() -> ScriptKey {
    ScriptKey::new("https://shop.test/search?q=tea#top", "  Find   GREEN tea ")
}

const URL: &str = "https://shop.test/search?q=tea";

#[test]
fn dhash_separates_layouts_and_tolerates_small_changes() {
    let a = dhash(&png(&render(&search_page()))).unwrap();
    let touched = dhash(&png(&render(&search_page_touched()))).unwrap();
    let reencoded = dhash(&jpeg(&render(&search_page()))).unwrap();
    let moved = dhash(&png(&render(&moved_page()))).unwrap();
    for (what, other) in [("touched", touched), ("re-encoded", reencoded)] {
        let s = similarity(a, other);
        assert!(s >= DEFAULT_SIMILARITY, "{what}: {s}");
    }
    let s = similarity(a, moved);
    assert!(s < DEFAULT_SIMILARITY, "moved: {s}");
    assert_eq!(similarity(a, a), 1.0);
}

#[test]
fn keys_keep_the_instruction_as_given_and_the_callers_prompt() {
    assert_eq!(
        key(),
        ScriptKey {
            url: URL.into(),
            instruction: "Find   GREEN tea".into(),
            prompt: None,
        }
    );
    // Case and spacing can be what a step types: another task.
    for other in ["find green tea", "Find GREEN tea", "find black tea"] {
        assert_ne!(
            key().file_name(),
            ScriptKey::new(URL, other).file_name(),
            "{other}"
        );
    }
    // The caller's extra system prompt can carry the task's data.
    let with = |p: Option<&str>| key().with_prompt(p);
    assert_eq!(with(None), key());
    assert_eq!(with(Some("  ")), key());
    assert_ne!(with(Some("Ship to 1 Main St")), key());
    assert_ne!(
        with(Some("Ship to 1 Main St")).file_name(),
        with(Some("Ship to 2 Main St")).file_name()
    );
    assert!(!format!("{:?}", with(Some("Ship to 1 Main St"))).contains("Main"));
}

/// A step whose screenshot was a uniform frame (a blank or loading page)
/// guards no click: every blank frame would match it.
#[test]
fn a_blank_frame_guards_no_click() {
    let blank = png(&RgbImage::from_pixel(320, 180, image::Rgb([255, 255, 255])));
    assert_eq!(dhash(&blank).unwrap(), 0);
    let steps = vec![step(
        0,
        URL,
        blank.clone(),
        vec![worked(click(), Some(button("Go")))],
    )];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps[0].similarity(&blank).unwrap(), 0.0);
    // A navigation from a blank page needs no look at it.
    let goto = Action::Goto {
        url: "https://shop.test/".into(),
    };
    let steps = vec![step(
        0,
        "about:blank",
        blank.clone(),
        vec![worked(goto, None)],
    )];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps[0].similarity(&blank).unwrap(), 1.0);
}

/// Scripts are programs the browser runs: private files in a private
/// folder, and a folder every user may write to is refused.
#[cfg(unix)]
#[test]
fn the_cache_is_private_and_refuses_a_folder_anyone_may_write() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let cache = ActionCache::open(&dir).unwrap();
    assert_eq!(mode(&dir), 0o700);
    let page = png(&render(&search_page()));
    let steps = vec![step(0, URL, page, vec![worked(terminate("ok"), None)])];
    let script = RunScript::compile(key(), &steps, "ok").unwrap().unwrap();
    cache.save(&script).unwrap();
    assert_eq!(mode(&cache.path(&key())), 0o600);

    // A script file others may write to is no script of ours.
    let file = cache.path(&key());
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o620)).unwrap();
    assert_eq!(cache.load(&key()), None);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(cache.load(&key()), Some(script));

    // The user's own folder that others may write to (a umask of 002, a
    // careless chmod) is made private; another user's is refused.
    for open in [0o777, 0o770] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(open)).unwrap();
        ActionCache::open(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700, "{open:o}");
    }
    std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
    let err = ActionCache::open(&dir).unwrap_err();
    assert!(err.to_string().contains("another user"), "{err}");
    std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
    // A link in the folder is no script of ours, whatever it points at.
    let link = dir.join("elsewhere.json");
    std::fs::rename(&file, &link).unwrap();
    std::os::unix::fs::symlink(&link, &file).unwrap();
    assert_eq!(cache.load(&key()), None);
}

/// What a recorder never keeps is never replayed, whoever wrote the file:
/// a pointer action without its element, a kind that is not replayed.
#[test]
fn a_script_file_with_what_no_recorder_keeps_is_a_miss() {
    let root = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(root.path().join("cache")).unwrap();
    let page = png(&render(&search_page()));
    let steps = vec![step(
        0,
        URL,
        page,
        vec![worked(click(), Some(button("Search")))],
    )];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    cache.save(&script).unwrap();
    assert!(cache.load(&key()).is_some());

    let mut blind = script.clone();
    blind.steps[0].actions[0].target = None;
    cache.save(&blind).unwrap();
    assert_eq!(cache.load(&key()), None, "a click without its element");

    let mut scripted = script;
    scripted.steps[0].actions[0] = ScriptAction {
        action: Action::JavascriptExec {
            text: "document.body.remove()".into(),
        },
        target: None,
    };
    cache.save(&scripted).unwrap();
    assert_eq!(cache.load(&key()), None, "a page script");
}

/// A click whose element is unknown (receipts off) ends the script before
/// its step; state written before the answer's step ends it too (the page's
/// words it holds are not checked), while the answer's step keeps its own.
#[test]
fn blind_clicks_and_early_state_end_the_script() {
    let page = png(&render(&search_page()));
    let mut data = lumen_core::TaskState::new();
    data.insert("price".into(), "4.20".into());
    let state = Action::WriteState { data };
    let steps = vec![
        step(
            0,
            URL,
            page.clone(),
            vec![worked(click(), Some(button("Search")))],
        ),
        step(1, URL, page.clone(), vec![worked(click(), None)]),
        step(2, URL, page.clone(), vec![worked(terminate("done"), None)]),
    ];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps.len(), 1, "{script:?}");

    // A scroll's receipt names no element: it replays on the screen guard.
    let wheel = Action::Scroll {
        x: 400,
        y: 300,
        direction: lumen_core::ScrollDirection::Down,
        amount: 3.0,
        unit: lumen_core::ScrollUnit::Clicks,
        modifiers: Modifiers::NONE,
    };
    let steps = vec![
        step(
            0,
            URL,
            page.clone(),
            vec![worked(click(), Some(button("Search")))],
        ),
        step(1, URL, page.clone(), vec![worked(wheel, None)]),
    ];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps.len(), 2, "{script:?}");

    // Typing with no field focused went to the page itself, which must
    // have the focus again on a replay; typing whose receipt is missing
    // (receipts off) ends the script.
    let first = step(
        0,
        URL,
        page.clone(),
        vec![worked(click(), Some(button("Search")))],
    );
    let steps = vec![
        first.clone(),
        step(1, URL, page.clone(), vec![typed("tea", None)]),
    ];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps.len(), 2, "{script:?}");
    let target = script.steps[1].actions[0].target.as_ref().unwrap();
    assert_eq!(*target, ScriptTarget::of_focus(None));
    assert_ne!(*target, ScriptTarget::of_focus(Some(&search_box())));
    let mut unknown = typed("tea", None);
    unknown.execution.effect = None;
    let steps = vec![first, step(1, URL, page.clone(), vec![unknown])];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps.len(), 1, "{script:?}");

    let steps = vec![
        step(
            0,
            URL,
            page.clone(),
            vec![worked(click(), Some(button("Search")))],
        ),
        step(1, URL, page.clone(), vec![worked(state.clone(), None)]),
        step(2, URL, page.clone(), vec![worked(terminate("done"), None)]),
    ];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps.len(), 1, "{script:?}");

    let steps = vec![
        step(
            0,
            URL,
            page.clone(),
            vec![worked(click(), Some(button("Search")))],
        ),
        step(
            1,
            URL,
            page,
            vec![worked(state.clone(), None), worked(terminate("done"), None)],
        ),
    ];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps.len(), 2, "{script:?}");
    assert_eq!(script.steps[1].actions[0].action, state);
    assert!(script.steps[1].page_text.is_some());
}

#[test]
fn a_run_compiles_to_its_working_actions_with_their_guards() {
    let page = png(&render(&search_page()));
    let typing = Action::Type {
        text: "green tea".into(),
    };
    let mut failed = worked(click(), None);
    failed.execution = ActionExecution::failed("nothing there");
    let mut blocked = worked(
        Action::Goto {
            url: "https://evil.test".into(),
        },
        None,
    );
    blocked.blocked = Some("policy".into());
    let steps = vec![
        step(
            0,
            URL,
            page.clone(),
            vec![
                worked(click(), Some(button("Search"))),
                typed("green tea", Some(search_box())),
            ],
        ),
        // Only observations, a failure and a blocked call: nothing to replay.
        step(
            1,
            URL,
            page.clone(),
            vec![worked(Action::PageText, None), failed, blocked],
        ),
        step(2, URL, page.clone(), vec![worked(terminate("£3"), None)]),
    ];
    let script = RunScript::compile(key(), &steps, "Green tea £3")
        .unwrap()
        .unwrap();
    assert_eq!(script.steps.len(), 2);
    let first = &script.steps[0];
    assert_eq!((first.width, first.height), (640, 400));
    assert_eq!(first.page_text, None);
    assert_eq!(
        first.actions,
        vec![
            ScriptAction {
                action: click(),
                target: Some(ScriptTarget::from(&button("Search"))),
            },
            ScriptAction {
                action: typing,
                target: Some(ScriptTarget::from(&search_box())),
            },
        ]
    );
    let last = &script.steps[1];
    assert!(last.text_matches("Green   tea\n£3"), "whitespace aside");
    assert!(!last.text_matches("Green tea £4"));
    assert!(first.text_matches("anything: it did not end the run"));
    assert_eq!(first.similarity(&page).unwrap(), 1.0);
    assert!(first.similarity(&png(&render(&moved_page()))).unwrap() < DEFAULT_SIMILARITY);
    let smaller = Image::new(ImageFormat::Png, 320, 200, page.data);
    assert_eq!(first.similarity(&smaller).unwrap(), 0.0, "another size");
    assert!(first.same_url(&format!("{URL}#results")));
    assert!(!first.same_url("https://shop.test/search?q=coffee"));
}

#[test]
fn a_step_that_needs_the_model_ends_the_script_before_it() {
    let page = png(&render(&search_page()));
    let steps = vec![
        step(
            0,
            URL,
            page.clone(),
            vec![worked(click(), Some(button("Search")))],
        ),
        step(
            1,
            URL,
            page.clone(),
            vec![worked(
                Action::ClickRef {
                    reference: "e3".into(),
                    button: MouseButton::Left,
                    click_count: 1,
                    modifiers: Modifiers::NONE,
                },
                None,
            )],
        ),
        step(2, URL, page, vec![worked(terminate("done"), None)]),
    ];
    let script = RunScript::compile(key(), &steps, "").unwrap().unwrap();
    assert_eq!(script.steps.len(), 1, "{script:?}");
    assert_eq!(script.steps[0].actions[0].action, click());

    // A first step that needs the model leaves nothing to replay.
    assert_eq!(RunScript::compile(key(), &steps[1..], "").unwrap(), None);
    // A step restored without its screenshot cannot be guarded.
    let mut bare = steps;
    bare[0].screenshot = None;
    assert_eq!(RunScript::compile(key(), &bare, "").unwrap(), None);
}

#[test]
fn targets_match_on_tag_role_name_and_row() {
    let t = ScriptTarget::from(&button("Search"));
    assert!(t.matches(&button("Search")));
    assert!(!t.matches(&button("Clear")));
    let mut link = button("Search");
    link.tag = "a".into();
    assert!(!t.matches(&link));

    // The same "Delete" on another row is another target.
    let in_row = |text: &str| ElementInfo {
        context: Some(text.into()),
        ..button("Delete")
    };
    let t = ScriptTarget::from(&in_row("Green tea × 3 Delete"));
    assert!(
        t.matches(&in_row("Green tea  × 3\nDelete")),
        "spacing aside"
    );
    assert!(!t.matches(&in_row("Black tea × 1 Delete")));
    assert!(!t.matches(&button("Delete")), "no longer in a row");
    let json = serde_json::to_string(&t).unwrap();
    assert!(
        !json.contains("Green"),
        "the row's words are not kept: {json}"
    );
}

#[test]
fn scripts_round_trip_and_unreadable_files_are_misses() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    assert_eq!(cache.load(&key()), None);
    let page = png(&render(&search_page()));
    let steps = vec![step(0, URL, page, vec![worked(terminate("ok"), None)])];
    let script = RunScript::compile(key(), &steps, "ok").unwrap().unwrap();
    cache.save(&script).unwrap();
    assert_eq!(cache.load(&key()), Some(script.clone()));
    assert_eq!(cache.load(&ScriptKey::new(URL, "another task")), None);

    // Corrupt, of another version, of another key under the same name,
    // with a step of no actions (no compiled script has one), or too large.
    let path = cache.path(&key());
    let mut empty_step = script.clone();
    empty_step.steps[0].actions.clear();
    let mut huge = serde_json::to_string(&script).unwrap();
    huge.push_str(&" ".repeat(5 << 20));
    for text in [
        "{not json".to_string(),
        serde_json::to_string(&RunScript {
            version: 1,
            ..script.clone()
        })
        .unwrap(),
        serde_json::to_string(&RunScript {
            key: ScriptKey::new(URL, "another task"),
            ..script
        })
        .unwrap(),
        serde_json::to_string(&empty_step).unwrap(),
        huge,
    ] {
        std::fs::write(&path, text).unwrap();
        assert_eq!(cache.load(&key()), None);
    }
    cache.remove(&key()).unwrap();
    cache.remove(&key()).unwrap();
    assert!(!path.exists());
}

#[test]
fn an_undecodable_screenshot_is_an_error_not_a_panic() {
    let bad = Image::new(ImageFormat::Png, 4, 4, vec![1u8, 2, 3]);
    let err = dhash(&bad).unwrap_err();
    assert_eq!(err.code(), lumen_core::ErrorCode::InvalidData);
    let steps = vec![step(
        0,
        URL,
        bad,
        vec![worked(click(), Some(button("Search")))],
    )];
    assert!(RunScript::compile(key(), &steps, "").is_err());
}

//! The run script's screen guard on real screenshots: fixture pages served by the
//! fixture server and captured by headless Chromium (its own `--screenshot`
//! mode; the browser crate is not needed to take a picture).

use std::path::Path;

use lumen_core::{
    Action, ActionCall, ActionExecution, ActionRecord, EffectReceipt, ElementInfo, Image,
    ImageFormat, Modifiers, MouseButton, SemanticStep, TokenUsage,
};
use lumen_memory::{ActionCache, RunScript, ScriptKey, cache};
use lumen_test_support::{FixtureServer, locate_chromium};

/// Captures `url` at 800x600 in a fresh headless Chromium and returns the
/// PNG.
async fn capture(url: &str, dir: &Path, name: &str) -> Image {
    let chromium = locate_chromium().unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join(format!("{name}.png"));
    let profile = tempfile::tempdir().unwrap();
    let status = tokio::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=800,600",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", out.display()))
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "chromium exited with {status}");
    let bytes = std::fs::read(&out).unwrap();
    let decoded = image::load_from_memory(&bytes).unwrap();
    Image::new(ImageFormat::Png, decoded.width(), decoded.height(), bytes)
}

#[tokio::test]
async fn a_script_step_holds_on_the_same_fixture_page_and_not_on_another() {
    let server = FixtureServer::start().await.unwrap();
    let shots = tempfile::tempdir().unwrap();
    let form = capture(&server.url("form.html"), shots.path(), "form-1").await;
    let form_again = capture(&server.url("form.html"), shots.path(), "form-2").await;
    let counter = capture(&server.url("counter.html"), shots.path(), "counter").await;
    assert_eq!((form.width, form.height), (800, 600));

    let same = cache::similarity(
        cache::dhash(&form).unwrap(),
        cache::dhash(&form_again).unwrap(),
    );
    let other = cache::similarity(
        cache::dhash(&form).unwrap(),
        cache::dhash(&counter).unwrap(),
    );
    assert!(same >= cache::DEFAULT_SIMILARITY, "same page: {same}");
    assert!(other < cache::DEFAULT_SIMILARITY, "different page: {other}");

    // A one-step script taken on form.html: a click on the Name field.
    let click = Action::Click {
        x: 200,
        y: 131,
        button: MouseButton::Left,
        modifiers: Modifiers::NONE,
    };
    let mut execution = ActionExecution::ok();
    execution.effect = Some(Box::new(EffectReceipt {
        target: Some(ElementInfo {
            tag: "input".into(),
            role: Some("textbox".into()),
            ..ElementInfo::default()
        }),
        ..EffectReceipt::default()
    }));
    let step = SemanticStep {
        step: 0,
        url: server.url("form.html"),
        screenshot: Some(form.clone()),
        thinking: Vec::new(),
        text: None,
        actions: vec![ActionRecord {
            call: ActionCall::new("c", click.clone()),
            execution,
            blocked: None,
        }],
        usage: TokenUsage::default(),
        started_at_ms: 0,
        duration_ms: 0,
        model_ms: 0,
    };
    let key = ScriptKey::new(&server.url("form.html"), "Fill in the form");
    let script = RunScript::compile(key.clone(), &[step], "")
        .unwrap()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    cache.save(&script).unwrap();
    let loaded = cache.load(&key).unwrap();
    let guard = &loaded.steps[0];
    assert_eq!(guard.actions[0].action, click);
    // The URL is the same in both checks on purpose: what changed is the
    // page shown, as when a site ships a new layout under the same address.
    let same = guard.similarity(&form_again).unwrap();
    let other = guard.similarity(&counter).unwrap();
    assert!(same >= cache.threshold(), "same page: {same}");
    assert!(other < cache.threshold(), "another page: {other}");
}

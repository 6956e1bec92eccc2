//! Tests of the history manager, its compression and its serialization.

use std::sync::Mutex;

use lumen_core::{
    Action, ActionCall, ActionExecution, ActionRecord, ErrorCode, ImageFormat, ImageScale,
    ModelInfo, ModelResponse, ModelStream, Screenshot, Size, TerminateStatus,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::StateStore;

fn image(step: u32) -> Image {
    Image::new(ImageFormat::Png, 4, 3, vec![step as u8; 16])
}

fn images_in(wire: &[WireRecord]) -> Vec<u32> {
    wire.iter()
        .filter_map(|r| match r {
            WireRecord::Screenshot(s) if s.image.is_some() => Some(s.step),
            _ => None,
        })
        .collect()
}

fn markers_in(wire: &[WireRecord]) -> Vec<u32> {
    wire.iter()
        .filter_map(|r| match r {
            WireRecord::Screenshot(s) if s.image.is_none() => {
                assert!(
                    s.compressed,
                    "a screenshot without image must be marked compressed"
                );
                Some(s.step)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_request_carries_exactly_keep_recent_images() {
    for keep_recent in 0..=4usize {
        for shots in 0..=6u32 {
            let mut h = HistoryManager::new(HistoryConfig {
                keep_recent,
                keep_turns: None,
                ..HistoryConfig::default()
            });
            for step in 0..shots {
                h.push_screenshot(step, image(step), Some(format!("https://a.test/{step}")));
                h.push_assistant(AssistantTurn::default());
            }
            let kept = keep_recent.min(shots as usize) as u32;
            let expected_images: Vec<u32> = (shots - kept..shots).collect();
            let expected_markers: Vec<u32> = (0..shots - kept).collect();
            assert_eq!(
                images_in(h.wire()),
                expected_images,
                "keep_recent={keep_recent} shots={shots}"
            );
            assert_eq!(markers_in(h.wire()), expected_markers);
            // Compressing again changes nothing: what is stored is what is sent.
            assert_eq!(h.compress(), 0);
        }
    }
}

#[test]
fn compressed_screenshots_keep_their_step_and_url_for_the_marker() {
    let mut h = HistoryManager::new(HistoryConfig {
        keep_recent: 1,
        ..HistoryConfig::default()
    });
    h.push_screenshot(7, image(7), Some("https://a.test/x".into()));
    h.push_screenshot(8, image(8), None);
    let WireRecord::Screenshot(old) = &h.wire()[0] else {
        panic!("expected a screenshot record");
    };
    assert_eq!(
        old,
        &WireScreenshot {
            step: 7,
            image: None,
            compressed: true,
            url: Some("https://a.test/x".into()),
            tabs: Vec::new(),
        }
    );
    assert_eq!(screenshot_marker(old.step), "[screenshot: step 7]");
}

/// An in-memory adapter (the real adapters live in `lumen-models`, which
/// memory must not depend on). Its estimate is honest arithmetic over what
/// it is given: 1000 tokens per image plus a token per 4 characters of text.
struct CountingAdapter {
    info: ModelInfo,
    summary: Result<String>,
    seen: Mutex<Vec<(usize, Option<TaskState>)>>,
}

impl CountingAdapter {
    fn new(context_window_tokens: u64, summary: Result<String>) -> Self {
        Self {
            info: ModelInfo {
                model_id: "counting".into(),
                provider: "test".into(),
                patch_size: None,
                max_image_dimension: None,
                max_image_pixels: None,
                supports_thinking: false,
                native_computer_use: false,
                context_window_tokens,
                tab_inventory: false,
            },
            summary,
            seen: Mutex::new(Vec::new()),
        }
    }
}

fn text_tokens(s: &str) -> u64 {
    s.len() as u64 / 4
}

#[async_trait::async_trait]
impl ModelAdapter for CountingAdapter {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn stream(&self, _ctx: &StepContext<'_>) -> Result<ModelStream> {
        Err(LumenError::invalid_data(
            "test adapter",
            "streaming is not scripted",
        ))
    }

    async fn step(&self, _ctx: &StepContext<'_>) -> Result<ModelResponse> {
        Err(LumenError::invalid_data(
            "test adapter",
            "steps are not scripted",
        ))
    }

    fn estimate_tokens(&self, ctx: &StepContext<'_>) -> u64 {
        let mut tokens = text_tokens(ctx.system_prompt);
        for r in ctx.wire {
            tokens += match r {
                WireRecord::Screenshot(s) if s.image.is_some() => 1000,
                WireRecord::Screenshot(_) => 5,
                WireRecord::Assistant(t) => 20 * t.calls.len() as u64 + 5,
                WireRecord::ToolResult(t) => 5 + t.error.as_deref().map(text_tokens).unwrap_or(0),
                WireRecord::Summary { content, .. } => text_tokens(content),
                _ => 0,
            };
        }
        tokens
    }

    async fn summarize(&self, wire: &[WireRecord], state: Option<&TaskState>) -> Result<String> {
        self.seen.lock().unwrap().push((wire.len(), state.cloned()));
        self.summary.clone()
    }
}

fn screenshot_for_ctx() -> Screenshot {
    Screenshot {
        image: image(0),
        viewport: Size::new(4, 3),
        scale: ImageScale::IDENTITY,
    }
}

fn ctx<'a>(step: u32, shot: &'a Screenshot, state: Option<&'a TaskState>) -> StepContext<'a> {
    StepContext {
        step,
        max_steps: 50,
        instruction: "find the price",
        system_prompt: "",
        screenshot: shot,
        wire: &[],
        state,
        url: "https://a.test/",
        temperature: None,
        cursor: None,
    }
}

fn call(id: &str) -> ActionCall {
    ActionCall::new(id, Action::Wait { ms: 10 })
}

fn ok_result(id: &str, error: Option<String>) -> ToolResult {
    ToolResult {
        call_id: id.into(),
        action: "wait".into(),
        ok: error.is_none(),
        error,
        hints: vec![],
        acknowledged_safety_checks: vec![],
        image: None,
        output: None,
        download: None,
    }
}

/// One step as the loop records it: screenshot, turn, result.
fn push_step(h: &mut HistoryManager, step: u32, result_error: Option<String>) {
    h.push_screenshot(step, image(step), None);
    let id = format!("c{step}");
    h.push_assistant(AssistantTurn {
        calls: vec![call(&id)],
        ..AssistantTurn::default()
    });
    h.push_tool_result(ok_result(&id, result_error));
}

#[tokio::test]
async fn compaction_follows_the_current_estimate_not_the_cumulative_spend() {
    // Window 10 000 tokens, threshold 0.5: compaction past 5 000.
    let adapter = CountingAdapter::new(10_000, Ok("Opened the shop and searched.".into()));
    let mut h = HistoryManager::new(HistoryConfig {
        keep_recent: 2,
        compaction_threshold: 0.5,
        ..HistoryConfig::default()
    });
    let shot = screenshot_for_ctx();
    let mut cumulative = 0;
    for step in 0..30 {
        push_step(&mut h, step, None);
        let estimate = adapter.estimate_tokens(&StepContext {
            wire: h.wire(),
            ..ctx(step, &shot, None)
        });
        cumulative += estimate;
        let done = h
            .compact_if_needed(&adapter, ctx(step, &shot, None))
            .await
            .unwrap();
        assert_eq!(
            done, None,
            "step {step}: the current request is small ({estimate} tokens)"
        );
    }
    // Summing every request would have crossed the threshold long ago.
    assert!(cumulative > 5_000, "cumulative {cumulative}");
    assert!(adapter.seen.lock().unwrap().is_empty());

    // A large tool result makes the *current* request cross the threshold.
    h.push_tool_result(ok_result("big", Some("x".repeat(16_000))));
    h.push_screenshot(30, image(30), None);
    let state: TaskState = json!({"cheapest": "£3"}).as_object().unwrap().clone();
    let before_len = h.wire().len();
    let done = h
        .compact_if_needed(&adapter, ctx(30, &shot, Some(&state)))
        .await
        .unwrap()
        .expect("the estimate crossed the threshold");
    assert!(done.tokens_before > 5_000);
    assert!(done.tokens_after < done.tokens_before);
    assert_eq!(done.records_replaced, before_len - 1);
    assert_eq!(done.step, 30);
    // The summariser saw the whole wire history and the state.
    assert_eq!(
        adapter.seen.lock().unwrap().as_slice(),
        &[(before_len, Some(state.clone()))]
    );
    // One summary anchor, then the current screenshot, still with its image.
    assert_eq!(h.wire().len(), 2);
    assert_eq!(
        h.wire()[0],
        WireRecord::Summary {
            content: "Opened the shop and searched.".into(),
            compacted_at: 30
        }
    );
    assert_eq!(images_in(h.wire()), vec![30]);
    // Semantic history is never touched by compaction (nothing recorded here).
    assert!(h.semantic().is_empty());
}

#[tokio::test]
async fn compaction_without_a_trailing_screenshot_replaces_everything() {
    let adapter = CountingAdapter::new(100, Ok(" summary \n".into()));
    let mut h = HistoryManager::new(HistoryConfig::default());
    for step in 0..3 {
        push_step(&mut h, step, None);
    }
    let shot = screenshot_for_ctx();
    let done = h
        .compact_if_needed(&adapter, ctx(3, &shot, None))
        .await
        .unwrap();
    assert!(done.is_some());
    assert_eq!(
        h.wire(),
        &[WireRecord::Summary {
            content: "summary".into(),
            compacted_at: 3
        }]
    );
}

#[tokio::test]
async fn a_failed_or_empty_summary_keeps_the_history() {
    let shot = screenshot_for_ctx();
    for summary in [
        Err(LumenError::invalid_data("summary", "provider down")),
        Ok("   ".to_owned()),
    ] {
        let adapter = CountingAdapter::new(100, summary);
        let mut h = HistoryManager::new(HistoryConfig::default());
        push_step(&mut h, 0, None);
        push_step(&mut h, 1, None);
        let before = h.clone();
        let err = h
            .compact_if_needed(&adapter, ctx(2, &shot, None))
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidData);
        assert_eq!(h, before);
    }
}

#[test]
fn the_threshold_must_be_a_share_of_the_window() {
    for ok in [0.1, 0.8, 1.0] {
        let c = HistoryConfig {
            compaction_threshold: ok,
            ..HistoryConfig::default()
        };
        c.validate().unwrap();
    }
    for bad in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let c = HistoryConfig {
            compaction_threshold: bad,
            ..HistoryConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.code(), ErrorCode::ConfigError, "{bad}");
    }
}

#[test]
fn a_zero_context_window_never_triggers_compaction() {
    let h = HistoryManager::new(HistoryConfig::default());
    assert!(!h.needs_compaction(u64::MAX, 0));
    assert!(h.needs_compaction(81, 100));
    assert!(!h.needs_compaction(80, 100));
}

#[test]
fn folds_are_one_line_capped_and_listed_in_the_prompt() {
    let mut h = HistoryManager::new(HistoryConfig::default());
    assert_eq!(h.folds_prompt(), None);
    h.fold(3, "  Logged in\n as   alice ").unwrap();
    let long = "y".repeat(MAX_FOLD_CHARS + 50);
    let f = h.fold(5, &long).unwrap();
    assert_eq!(f.summary.chars().count(), MAX_FOLD_CHARS + 1);
    assert!(f.summary.ends_with('…'));
    let err = h.fold(6, " \n ").unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidData);
    assert_eq!(h.folds().len(), 2);
    assert_eq!(
        h.folds()[0],
        FoldRecord {
            step: 3,
            summary: "Logged in as alice".into()
        }
    );
    let prompt = h.folds_prompt().unwrap();
    assert!(
        prompt.contains("\n1. Logged in as alice\n2. yyy"),
        "{prompt}"
    );
}

#[tokio::test]
async fn folds_and_state_survive_compaction() {
    let adapter = CountingAdapter::new(100, Ok("s".into()));
    let mut h = HistoryManager::new(HistoryConfig::default());
    let mut state = StateStore::new();
    state
        .write(json!({"k": 1}).as_object().unwrap().clone())
        .unwrap();
    push_step(&mut h, 0, None);
    h.fold(0, "searched").unwrap();
    push_step(&mut h, 1, None);
    let shot = screenshot_for_ctx();
    h.compact_if_needed(&adapter, ctx(2, &shot, state.get()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(h.folds().len(), 1);
    assert_eq!(
        state.get(),
        Some(&json!({"k": 1}).as_object().unwrap().clone())
    );
}

fn semantic_step(step: u32, actions: Vec<ActionRecord>) -> SemanticStep {
    SemanticStep {
        step,
        url: format!("https://a.test/{step}"),
        screenshot: Some(image(step)),
        thinking: vec![],
        text: Some(format!("step {step}")),
        actions,
        usage: TokenUsage {
            input_tokens: 100 + u64::from(step),
            output_tokens: 10,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        },
        started_at_ms: 1_700_000_000_000 + u64::from(step) * 1000,
        duration_ms: 900,
        model_ms: 600,
    }
}

fn terminate_record(ok: bool, blocked: Option<&str>) -> ActionRecord {
    let control = ControlRequest::Terminate {
        status: TerminateStatus::Success,
        result: "42".into(),
    };
    let mut execution = ActionExecution::control(control);
    execution.ok = ok;
    ActionRecord {
        call: ActionCall::new(
            "t",
            Action::Terminate {
                status: TerminateStatus::Success,
                result: "42".into(),
            },
        ),
        execution,
        blocked: blocked.map(str::to_owned),
    }
}

#[test]
fn semantic_history_keeps_the_accepted_terminate() {
    let mut h = HistoryManager::new(HistoryConfig::default());
    h.record_step(semantic_step(0, vec![terminate_record(false, None)]));
    assert_eq!(
        h.accepted_terminate(),
        None,
        "a rejected terminate is not accepted"
    );
    h.record_step(semantic_step(
        1,
        vec![terminate_record(true, Some("policy"))],
    ));
    assert_eq!(h.accepted_terminate(), None);
    h.record_step(semantic_step(2, vec![terminate_record(true, None)]));
    assert_eq!(
        h.accepted_terminate(),
        Some((TerminateStatus::Success, "42"))
    );
    assert_eq!(h.semantic()[2].actions.len(), 1);
    assert_eq!(h.step_count(), 3);
    assert_eq!(h.usage().input_tokens, 100 + 101 + 102);
}

#[test]
fn unanswered_calls_are_the_newest_turns_calls_without_results() {
    let mut h = HistoryManager::new(HistoryConfig::default());
    assert!(h.unanswered_calls().is_empty());
    h.push_assistant(AssistantTurn {
        calls: vec![call("a"), call("b")],
        ..AssistantTurn::default()
    });
    h.push_tool_result(ok_result("a", None));
    let ids: Vec<&str> = h.unanswered_calls().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, vec!["b"]);
}

/// A deterministic stand-in for the loop's recording of one step: what it
/// writes depends only on the step index and the state so far.
fn scripted_step(h: &mut HistoryManager, state: &mut StateStore, step: u32) {
    push_step(h, step, (step % 3 == 2).then(|| format!("miss {step}")));
    let mut next = state.get().cloned().unwrap_or_default();
    next.insert(format!("s{step}"), json!(step * 2));
    state.write(next).unwrap();
    if step == 4 {
        h.fold(step, "collected the first prices").unwrap();
    }
    let record = ActionRecord {
        call: call(&format!("c{step}")),
        execution: ActionExecution::ok(),
        blocked: None,
    };
    h.record_step(semantic_step(step, vec![record]));
}

#[test]
fn resuming_from_a_saved_file_continues_exactly_like_an_uninterrupted_run() {
    let config = HistoryConfig {
        keep_recent: 2,
        ..HistoryConfig::default()
    };
    let mut straight = HistoryManager::new(config);
    let mut straight_state = StateStore::new();
    for step in 0..8 {
        scripted_step(&mut straight, &mut straight_state, step);
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let mut first = HistoryManager::new(config);
    let mut first_state = StateStore::new();
    for step in 0..5 {
        scripted_step(&mut first, &mut first_state, step);
    }
    first
        .to_serialized(first_state.get(), true)
        .save(&path)
        .unwrap();
    drop(first);

    let loaded = SerializedHistory::load(&path).unwrap();
    let (mut resumed, state) = HistoryManager::resume(loaded, config);
    let mut resumed_state = StateStore::new();
    resumed_state.restore(state).unwrap();
    assert_eq!(resumed.step_count(), 5, "the run resumes at the next step");
    for step in resumed.step_count()..8 {
        scripted_step(&mut resumed, &mut resumed_state, step);
    }
    assert_eq!(resumed, straight);
    assert_eq!(resumed_state, straight_state);
}

#[test]
fn serialization_round_trips_exactly() {
    let mut h = HistoryManager::new(HistoryConfig::default());
    let mut state = StateStore::new();
    for step in 0..4 {
        scripted_step(&mut h, &mut state, step);
    }
    h.push(WireRecord::Summary {
        content: "earlier: opened the site".into(),
        compacted_at: 4,
    });
    let snapshot = h.to_serialized(state.get(), true);
    let text = snapshot.to_json().unwrap();
    let back = SerializedHistory::from_json(&text).unwrap();
    assert_eq!(back, snapshot);
    assert_eq!(back.to_json().unwrap(), text);
    assert_eq!(back.version, crate::serialize::CURRENT_VERSION);

    let without = h.to_serialized(None, false);
    assert_eq!(without.semantic, None);
    assert!(!without.to_json().unwrap().contains("\"semantic\""));
    let (resumed, state) = HistoryManager::resume(without, HistoryConfig::default());
    assert!(resumed.semantic().is_empty());
    assert_eq!(resumed.wire(), h.wire());
    assert_eq!(state, None);
}

#[test]
fn resume_reapplies_the_current_keep_recent() {
    let mut h = HistoryManager::new(HistoryConfig {
        keep_recent: 4,
        ..HistoryConfig::default()
    });
    for step in 0..5 {
        push_step(&mut h, step, None);
    }
    let (resumed, _) = HistoryManager::resume(
        h.to_serialized(None, false),
        HistoryConfig {
            keep_recent: 1,
            ..HistoryConfig::default()
        },
    );
    assert_eq!(images_in(resumed.wire()), vec![4]);
}

#[test]
fn corrupt_or_future_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        ("{\"version\": 1, \"wire\": [", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ("{\"wire\": []}", "no `version` field"),
        ("{\"version\": \"one\"}", "not a whole number"),
        (
            "{\"version\": 0, \"wire\": [], \"stepCount\": 0}",
            "version 0",
        ),
        (
            "{\"version\": 99, \"wire\": [], \"stepCount\": 0}",
            "format version 99, written by a newer Lumen",
        ),
        (
            "{\"version\": 1, \"wire\": [{\"role\": \"alien\"}], \"stepCount\": 0}",
            "unreadable content",
        ),
        ("{\"version\": 1, \"wire\": []}", "stepCount"),
    ];
    for (i, (content, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("h{i}.json"));
        std::fs::write(&path, content).unwrap();
        let err = SerializedHistory::load(&path).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidData, "{content}");
        let msg = err.to_string();
        assert!(msg.contains(expected), "{content}: {msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
    }
    let missing = SerializedHistory::load(&dir.path().join("none.json")).unwrap_err();
    assert!(missing.to_string().contains("does not exist"), "{missing}");
}

#[test]
fn every_truncation_of_a_valid_file_is_an_error_never_a_panic() {
    let mut h = HistoryManager::new(HistoryConfig::default());
    let mut state = StateStore::new();
    for step in 0..2 {
        scripted_step(&mut h, &mut state, step);
    }
    let text = h.to_serialized(state.get(), true).to_json().unwrap();
    for cut in 0..text.len() {
        if !text.is_char_boundary(cut) {
            continue;
        }
        assert!(
            SerializedHistory::from_json(&text[..cut]).is_err(),
            "cut at {cut}"
        );
    }
}

#[test]
fn save_with_scrubs_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.json");
    let mut h = HistoryManager::new(HistoryConfig::default());
    h.push_tool_result(ok_result("a", Some("typed hunter2 into nothing".into())));
    h.to_serialized(None, false)
        .save_with(&path, |v| {
            let text = v.to_string().replace("hunter2", "<secret:pw>");
            *v = serde_json::from_str(&text).unwrap();
        })
        .unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(!written.contains("hunter2"));
    assert!(written.contains("<secret:pw>"));
}

fn turns_in(wire: &[WireRecord]) -> usize {
    wire.iter()
        .filter(|r| matches!(r, WireRecord::Assistant(_)))
        .count()
}

#[test]
fn old_turns_condense_in_blocks_and_every_call_keeps_its_result() {
    let mut h = HistoryManager::new(HistoryConfig {
        keep_turns: Some(3),
        ..HistoryConfig::default()
    });
    let mut verbatim = Vec::new();
    for step in 0..12 {
        push_step(&mut h, step, (step == 1).then(|| "no such element".into()));
        verbatim.push(turns_in(h.wire()));
    }
    // Turns pile up to 2 × 3, then the oldest 3 condense at the next
    // screenshot (a request never carries more than 5 turns verbatim): the
    // prefix changes once every 3 steps.
    assert_eq!(verbatim, vec![1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6]);
    let WireRecord::Summary {
        content,
        compacted_at,
    } = &h.wire()[0]
    else {
        panic!(
            "the wire starts with the condensed summary: {:?}",
            h.wire()[0]
        );
    };
    assert_eq!(*compacted_at, 6, "the first step still sent verbatim");
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 6, "{content}");
    assert_eq!(lines[0], "step 1: wait ms=10 -> ok");
    assert_eq!(lines[1], "step 2: wait ms=10 -> error: no such element");
    // What stays verbatim starts at a step boundary, and every call in it
    // has its result.
    assert!(matches!(&h.wire()[1], WireRecord::Screenshot(s) if s.step == 6));
    for record in h.wire() {
        if let WireRecord::Assistant(turn) = record {
            for c in &turn.calls {
                assert!(
                    h.wire()
                        .iter()
                        .any(|r| matches!(r, WireRecord::ToolResult(t) if t.call_id == c.id))
                );
            }
        }
    }
    // Nothing is lost: the semantic history is untouched by condensing.
    assert_eq!(images_in(h.wire()), vec![10, 11]);
}

#[test]
fn condensing_is_off_when_keep_turns_is_none_and_zero_is_refused() {
    let mut h = HistoryManager::new(HistoryConfig {
        keep_turns: None,
        ..HistoryConfig::default()
    });
    for step in 0..20 {
        push_step(&mut h, step, None);
    }
    assert_eq!(turns_in(h.wire()), 20);
    let zero = HistoryConfig {
        keep_turns: Some(0),
        ..HistoryConfig::default()
    };
    assert!(
        zero.validate()
            .unwrap_err()
            .to_string()
            .contains("keepTurns")
    );
    for scale in [0.0, -1.0, 1.5, f64::NAN] {
        let c = HistoryConfig {
            older_image_scale: scale,
            ..HistoryConfig::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("olderImageScale"),
            "{scale}"
        );
    }
}

fn real_jpeg(width: u32, height: u32) -> Image {
    let pixels = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
    });
    let mut data = Vec::new();
    pixels
        .write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
            std::io::Cursor::new(&mut data),
            80,
        ))
        .unwrap();
    Image::new(ImageFormat::Jpeg, width, height, data)
}

#[test]
fn older_screenshots_are_swapped_for_reduced_copies_but_never_the_newest() {
    let full = real_jpeg(1280, 720);
    let small = shrink_image(&full, 0.5).unwrap();
    assert_eq!((small.width, small.height), (640, 360));
    assert_eq!(small.format, ImageFormat::Jpeg);
    assert!(small.data.len() < full.data.len());
    // It really is a JPEG of that size.
    let decoded = image::load_from_memory(&small.data).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (640, 360));
    // Each pixel averages its 2 × 2 square, channels in order (lossy:
    // within a few levels of (20.5, 20.5, 128)).
    let [r, g, b] = decoded.to_rgb8().get_pixel(10, 10).0;
    for (got, want) in [(r, 20.5), (g, 20.5), (b, 128.0)] {
        assert!((f64::from(got) - want).abs() < 6.0, "{:?}", (r, g, b));
    }

    let mut h = HistoryManager::new(HistoryConfig::default());
    h.push_screenshot(0, full.clone(), None);
    assert!(
        !h.replace_older_image(0, small.clone()),
        "the newest screenshot is what the model grounds on"
    );
    h.push_screenshot(1, full.clone(), None);
    assert!(h.replace_older_image(0, small.clone()));
    let sizes: Vec<(u32, u32)> = h
        .wire()
        .iter()
        .filter_map(|r| match r {
            WireRecord::Screenshot(s) => s.image.as_ref().map(|i| (i.width, i.height)),
            _ => None,
        })
        .collect();
    assert_eq!(sizes, vec![(640, 360), (1280, 720)]);
    // Once tier 1 dropped it, there is nothing left to replace.
    h.push_screenshot(2, full, None);
    assert!(!h.replace_older_image(0, small));
    // An unchanged page: the older copy is dropped, never the newest.
    assert!(!h.drop_older_image(2));
    assert!(h.drop_older_image(1));
    assert_eq!(images_in(h.wire()), vec![2]);
    assert_eq!(markers_in(h.wire()), vec![0, 1]);
}

#[test]
fn a_whole_factor_averages_each_square_of_pixels() {
    // 4 × 2 pixels, halved: each output pixel is the mean of a 2 × 2 square.
    let px: Vec<u8> = [
        [0, 0, 0],
        [2, 4, 6],
        [100, 100, 100],
        [200, 200, 200],
        [4, 8, 12],
        [6, 12, 18],
        [100, 100, 100],
        [201, 201, 201],
    ]
    .concat();
    let img = image::RgbImage::from_raw(4, 2, px).unwrap();
    let small = super::reduce(&img, 2, 1);
    assert_eq!(small.as_raw(), &vec![3, 6, 9, 150, 150, 150]);
    // A size the whole factor does not reach exactly is finished by
    // resampling, and always comes out at the size asked for.
    let odd = image::RgbImage::from_pixel(1281, 721, image::Rgb([10, 20, 30]));
    let small = super::reduce(&odd, 641, 361);
    assert_eq!(small.dimensions(), (641, 361));
    assert_eq!(small.get_pixel(320, 180), &image::Rgb([10, 20, 30]));
}

#[test]
fn shrinking_garbage_or_a_bad_scale_is_an_error_not_a_panic() {
    let garbage = Image::new(ImageFormat::Jpeg, 10, 10, vec![1, 2, 3]);
    assert!(shrink_image(&garbage, 0.5).is_err());
    assert!(shrink_image(&real_jpeg(8, 8), 0.0).is_err());
    assert!(shrink_image(&real_jpeg(8, 8), 2.0).is_err());
}

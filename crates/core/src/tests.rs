//! Contract tests: every public shape round-trips through JSON, and the JSON
//! itself is pinned by snapshots (a change to a snapshot is a change to the
//! public contract and must be deliberate).

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::*;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    value: &T,
) -> serde_json::Value {
    let json = serde_json::to_value(value).expect("serialize");
    let back: T = serde_json::from_value(json.clone()).expect("deserialize");
    assert_eq!(
        &back, value,
        "round trip changed the value; JSON was {json}"
    );
    json
}

fn state() -> TaskState {
    let mut s = TaskState::new();
    s.insert("min_price".into(), json!("£3.49"));
    s.insert("seen".into(), json!([1, 2]));
    s
}

fn every_action() -> Vec<Action> {
    let shift = Modifiers {
        shift: true,
        ..Modifiers::NONE
    };
    vec![
        Action::Click {
            x: 10,
            y: 20,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE,
        },
        Action::Click {
            x: 1,
            y: 2,
            button: MouseButton::Right,
            modifiers: Modifiers {
                ctrl: true,
                ..Modifiers::NONE
            },
        },
        Action::Click {
            x: 3,
            y: 4,
            button: MouseButton::Middle,
            modifiers: Modifiers::NONE,
        },
        Action::DoubleClick {
            x: 5,
            y: 6,
            modifiers: Modifiers::NONE,
        },
        Action::TripleClick {
            x: 7,
            y: 8,
            modifiers: shift,
        },
        Action::Drag {
            start_x: 1,
            start_y: 2,
            end_x: 30,
            end_y: 40,
            path: vec![],
        },
        Action::Drag {
            start_x: 1,
            start_y: 2,
            end_x: 30,
            end_y: 40,
            path: vec![Point::new(10, 20), Point::new(20, 30)],
        },
        Action::Hover { x: 100, y: 200 },
        Action::MouseDown {
            x: None,
            y: None,
            button: MouseButton::Left,
        },
        Action::MouseUp {
            x: Some(5),
            y: Some(9),
            button: MouseButton::Right,
        },
        Action::Scroll {
            x: 640,
            y: 360,
            direction: ScrollDirection::Down,
            amount: 3.0,
            unit: ScrollUnit::Clicks,
            modifiers: Modifiers::NONE,
        },
        Action::Scroll {
            x: 0,
            y: 0,
            direction: ScrollDirection::Left,
            amount: 120.0,
            unit: ScrollUnit::Pixels,
            modifiers: shift,
        },
        Action::Type {
            text: "hello <secret:password>".into(),
        },
        Action::KeyPress {
            keys: vec!["ctrl".into(), "a".into()],
        },
        Action::HoldKey {
            keys: vec!["shift".into()],
            duration_ms: 500,
        },
        Action::Wait { ms: 1000 },
        Action::Goto {
            url: "https://example.com/".into(),
        },
        Action::Back,
        Action::Forward,
        Action::Screenshot,
        Action::CursorPosition,
        Action::Zoom {
            region: Rect {
                x0: 0,
                y0: 0,
                x1: 640,
                y1: 360,
            },
        },
        Action::WriteState { data: state() },
        Action::Terminate {
            status: TerminateStatus::Success,
            result: "Sharp Objects".into(),
        },
        Action::Terminate {
            status: TerminateStatus::Failure,
            result: "site is down".into(),
        },
        Action::Delegate {
            instruction: "collect prices".into(),
            max_steps: Some(15),
        },
        Action::Delegate {
            instruction: "collect names".into(),
            max_steps: None,
        },
        Action::Fold {
            summary: "logged in".into(),
        },
        Action::Invalid {
            name: "teleport".into(),
            input: json!({"to": "mars"}),
            error: "unknown action `teleport`".into(),
        },
    ]
}

#[test]
fn every_action_round_trips_and_has_a_pinned_shape() {
    let actions = every_action();
    let json: Vec<_> = actions.iter().map(round_trip).collect();
    // The tag is the kind; keep the two in step.
    for (a, j) in actions.iter().zip(&json) {
        assert_eq!(j["type"], a.kind(), "{j}");
    }
    // Action::KINDS lists every kind, once.
    for a in &actions {
        assert!(Action::KINDS.contains(&a.kind()), "{} is missing", a.kind());
    }
    let unique: std::collections::BTreeSet<_> = Action::KINDS.iter().collect();
    assert_eq!(unique.len(), Action::KINDS.len(), "a kind is listed twice");
    insta::assert_json_snapshot!("actions", json);
}

#[test]
fn action_json_uses_defaults_for_omitted_fields() {
    let a: Action = serde_json::from_value(json!({"type": "click", "x": 1, "y": 2})).unwrap();
    assert_eq!(
        a,
        Action::Click {
            x: 1,
            y: 2,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE
        }
    );
    let s: Action = serde_json::from_value(
        json!({"type": "scroll", "x": 1, "y": 2, "direction": "up", "amount": 5}),
    )
    .unwrap();
    assert!(matches!(
        s,
        Action::Scroll {
            unit: ScrollUnit::Pixels,
            ..
        }
    ));
    let err = serde_json::from_value::<Action>(json!({"type": "teleport"})).unwrap_err();
    assert!(err.to_string().contains("teleport"), "{err}");
    // writeState data must be an object.
    assert!(serde_json::from_value::<Action>(json!({"type": "writeState", "data": [1]})).is_err());
}

#[test]
fn categories_and_browser_use() {
    assert_eq!(
        Action::Hover { x: 0, y: 0 }.category(),
        ActionCategory::Passive
    );
    assert_eq!(Action::Screenshot.category(), ActionCategory::Observe);
    assert_eq!(Action::Back.category(), ActionCategory::Productive);
    assert!(
        !Action::Fold {
            summary: String::new()
        }
        .touches_browser()
    );
    assert!(Action::Back.touches_browser());
    assert_eq!(
        Action::Drag {
            start_x: 1,
            start_y: 2,
            end_x: 3,
            end_y: 4,
            path: vec![]
        }
        .point(),
        Some(Point::new(1, 2))
    );
    assert_eq!(
        Action::MouseDown {
            x: None,
            y: Some(3),
            button: MouseButton::Left
        }
        .point(),
        None
    );
}

#[test]
fn scroll_units_become_pixels_in_one_place() {
    let vp = Size::new(1280, 800);
    let scroll = |direction, amount, unit| Action::Scroll {
        x: 0,
        y: 0,
        direction,
        amount,
        unit,
        modifiers: Modifiers::NONE,
    };
    assert_eq!(
        scroll(ScrollDirection::Down, 3.0, ScrollUnit::Clicks).scroll_delta(vp),
        Some((0.0, 300.0))
    );
    assert_eq!(
        scroll(ScrollDirection::Up, 250.0, ScrollUnit::Pixels).scroll_delta(vp),
        Some((0.0, -250.0))
    );
    assert_eq!(
        scroll(ScrollDirection::Right, 1.0, ScrollUnit::Pages).scroll_delta(vp),
        Some((1120.0, 0.0))
    );
    assert_eq!(
        scroll(ScrollDirection::Left, 2.0, ScrollUnit::Pages).scroll_delta(vp),
        Some((-2240.0, 0.0))
    );
    // Nonsense amounts scroll nothing rather than jumping to infinity.
    assert_eq!(
        scroll(ScrollDirection::Down, f64::NAN, ScrollUnit::Pixels).scroll_delta(vp),
        Some((0.0, 0.0))
    );
    assert_eq!(
        scroll(ScrollDirection::Down, -4.0, ScrollUnit::Clicks).scroll_delta(vp),
        Some((0.0, 0.0))
    );
    assert_eq!(Action::Back.scroll_delta(vp), None);
}

#[test]
fn modifier_mask_matches_cdp() {
    assert_eq!(Modifiers::NONE.cdp_mask(), 0);
    assert_eq!(
        Modifiers {
            alt: true,
            ctrl: true,
            meta: true,
            shift: true
        }
        .cdp_mask(),
        15
    );
    assert_eq!(
        Modifiers {
            shift: true,
            ..Modifiers::NONE
        }
        .cdp_mask(),
        8
    );
}

fn image() -> Image {
    Image::new(ImageFormat::Png, 2, 1, vec![0x89, b'P', b'N', b'G'])
}

fn screenshot() -> Screenshot {
    Screenshot {
        image: image(),
        viewport: Size::new(4, 2),
        scale: ImageScale { x: 0.5, y: 0.5 },
    }
}

fn receipt() -> EffectReceipt {
    EffectReceipt {
        url_before: Some("http://127.0.0.1/a".into()),
        url_after: Some("http://127.0.0.1/b".into()),
        navigated: true,
        new_tab: Some(TabInfo {
            id: "T1".into(),
            url: "http://127.0.0.1/c".into(),
            title: String::new(),
            followed: true,
        }),
        dialog: Some(DialogInfo {
            kind: "confirm".into(),
            message: "Sure?".into(),
            accepted: false,
        }),
        download: Some(DownloadInfo {
            url: "http://127.0.0.1/d.csv".into(),
            suggested_filename: "d.csv".into(),
            path: Some("/tmp/d.csv".into()),
            completed: true,
            failed: false,
            error: None,
        }),
        target: Some(ElementInfo {
            tag: "button".into(),
            role: Some("button".into()),
            name: Some("Next".into()),
            interactive: true,
            editable: false,
            frame_url: None,
            context: None,
        }),
        focus: None,
        focus_before: None,
        page_changed: Some(true),
        pointer: Some(Point::new(3, 4)),
        blocked_requests: vec![crate::BlockedRequest {
            url: "http://blocked.test/".into(),
            reason: "blocked.test is blocked in this session".into(),
            kind: crate::BlockKind::Navigation,
            resource_type: "Document".into(),
        }],
    }
}

#[test]
fn outcomes_and_executions_round_trip() {
    let outcome = ActionOutcome::ok()
        .with_effect(receipt())
        .with_hint("clicked a button");
    let failed = ActionOutcome::failed("unknown key `Hyper`");
    let execs = [
        ActionExecution::from(outcome.clone()),
        ActionExecution::from(failed.clone()),
        ActionExecution::control(ControlRequest::Terminate {
            status: TerminateStatus::Success,
            result: "42".into(),
        }),
        ActionExecution::control(ControlRequest::Delegate {
            instruction: "x".into(),
            max_steps: Some(3),
        }),
        ActionExecution::control(ControlRequest::Screenshot),
        ActionExecution::control(ControlRequest::Fold {
            summary: "done".into(),
        }),
    ];
    round_trip(&outcome);
    round_trip(&failed);
    let json: Vec<_> = execs.iter().map(round_trip).collect();
    assert!(execs[2].is_terminate() && !execs[3].is_terminate());
    assert!(receipt().changed_anything());
    assert!(!EffectReceipt::default().changed_anything());
    insta::assert_json_snapshot!("executions", json);
}

fn wire() -> Vec<WireRecord> {
    vec![
        WireRecord::Screenshot(WireScreenshot {
            step: 0,
            image: Some(image()),
            compressed: false,
            url: Some("http://x/".into()),
            tabs: Vec::new(),
        }),
        WireRecord::Assistant(AssistantTurn {
            calls: vec![ActionCall::new(
                "toolu_1",
                Action::Click {
                    x: 1,
                    y: 2,
                    button: MouseButton::Left,
                    modifiers: Modifiers::NONE,
                },
            )],
            thinking: vec![ThinkingBlock {
                text: "look left".into(),
                signature: Some("sig==".into()),
                redacted: false,
            }],
            text: Some("Clicking.".into()),
            provider: Some(ProviderTurn {
                provider: "anthropic".into(),
                data: json!({"content": []}),
            }),
        }),
        WireRecord::ToolResult(ToolResult {
            call_id: "toolu_1".into(),
            action: "click".into(),
            ok: false,
            error: Some("nothing there".into()),
            hints: vec!["try scrolling".into()],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        }),
        WireRecord::Screenshot(WireScreenshot {
            step: 1,
            image: None,
            compressed: true,
            url: None,
            tabs: Vec::new(),
        }),
        WireRecord::Summary {
            content: "Opened the page.".into(),
            compacted_at: 7,
        },
    ]
}

#[test]
fn wire_records_round_trip() {
    let json: Vec<_> = wire().iter().map(round_trip).collect();
    insta::assert_json_snapshot!("wire", json);
}

#[test]
fn semantic_steps_and_results_round_trip() {
    let step = SemanticStep {
        step: 3,
        url: "http://127.0.0.1/form.html".into(),
        screenshot: Some(image()),
        thinking: vec![],
        text: None,
        actions: vec![ActionRecord {
            call: ActionCall {
                id: "call_1".into(),
                action: Action::Goto {
                    url: "https://blocked.example/".into(),
                },
                safety_checks: vec![SafetyCheck {
                    id: "sc_1".into(),
                    code: "irrelevant_domain".into(),
                    message: "off task".into(),
                }],
            },
            execution: ActionExecution::failed("blocked by policy: blocked.example is not allowed"),
            blocked: Some("blocked.example is not allowed".into()),
        }],
        usage: TokenUsage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 900,
            cache_write_tokens: 0,
        },
        started_at_ms: 1_700_000_000_000,
        duration_ms: 420,
        model_ms: 300,
    };
    round_trip(&step);
    let result = RunResult {
        status: RunStatus::MaxSteps,
        result: None,
        steps: 4,
        history: vec![step],
        state: Some(state()),
        usage: TokenUsage::default(),
        usage_by_source: UsageBreakdown::default(),
        cost_usd: None,
        cost_note: None,
        error: Some(ErrorInfo::from(&LumenError::disconnected("socket closed"))),
    };
    let json = round_trip(&result);
    assert_eq!(json["status"], "maxSteps");
    assert_eq!(json["error"]["code"], "BROWSER_DISCONNECTED");
    assert!(json.get("costUsd").is_none());
    let main = TokenUsage {
        input_tokens: 100,
        output_tokens: 10,
        ..TokenUsage::default()
    };
    let verifier = TokenUsage {
        input_tokens: 50,
        output_tokens: 1,
        ..TokenUsage::default()
    };
    let budget = RunResult {
        status: RunStatus::BudgetExceeded,
        usage: main + verifier,
        usage_by_source: UsageBreakdown {
            main,
            verifier,
            ..UsageBreakdown::default()
        },
        cost_usd: Some(0.0125),
        ..result
    };
    let json = round_trip(&budget);
    assert_eq!(json["status"], "budgetExceeded");
    assert_eq!(json["usageBySource"]["verifier"]["inputTokens"], 50);
    assert_eq!(json["costUsd"], 0.0125);
    assert_eq!(budget.usage_by_source.total(), budget.usage);
    // A result written before the breakdown existed still reads.
    let old: RunResult =
        serde_json::from_value(serde_json::json!({"status": "success", "steps": 1})).unwrap();
    assert_eq!(old.usage_by_source, UsageBreakdown::default());
}

fn every_event() -> Vec<StreamEvent> {
    let call = ActionCall::new("c1", Action::Type { text: "hi".into() });
    vec![
        StreamEvent::RunStarted {
            instruction: "find it".into(),
            model: "anthropic/claude-sonnet-4-6".into(),
            max_steps: 20,
        },
        StreamEvent::StepStarted {
            step: 0,
            url: "about:blank".into(),
        },
        StreamEvent::Screenshot {
            step: 0,
            screenshot: screenshot(),
        },
        StreamEvent::ReasoningDelta {
            step: 0,
            text: "hm".into(),
        },
        StreamEvent::AssistantDelta {
            step: 0,
            text: "Looking".into(),
        },
        StreamEvent::Thinking {
            step: 0,
            text: "hmm".into(),
        },
        StreamEvent::Action {
            step: 0,
            call: call.clone(),
        },
        StreamEvent::ActionResult {
            step: 0,
            call: call.clone(),
            execution: ActionExecution::ok(),
        },
        StreamEvent::ActionBlocked {
            step: 0,
            call,
            reason: "denied".into(),
        },
        StreamEvent::StateWritten {
            step: 0,
            state: state(),
        },
        StreamEvent::Nudge {
            step: 1,
            level: 5,
            message: "try something else".into(),
        },
        StreamEvent::Compaction {
            step: 2,
            tokens_before: 150_000,
            tokens_after: 3_000,
        },
        StreamEvent::TerminationRejected {
            step: 2,
            reason: "no answer visible".into(),
        },
        StreamEvent::StepCompleted {
            step: 2,
            usage: TokenUsage::default(),
            duration_ms: 80,
            model_ms: 50,
        },
        StreamEvent::Error {
            error: ErrorInfo::from(&LumenError::Cancelled {
                reason: "user_explicit_cancel".into(),
            }),
        },
        StreamEvent::Done {
            status: RunStatus::Success,
            result: Some("42".into()),
            steps: 3,
            usage: TokenUsage::default(),
            usage_by_source: Default::default(),
            cost_usd: None,
            state: None,
        },
    ]
}

#[test]
fn stream_events_round_trip_bare_and_recorded() {
    let events = every_event();
    let json: Vec<_> = events.iter().map(round_trip).collect();
    for (e, j) in events.iter().zip(&json) {
        assert_eq!(e.step().is_some(), j.get("step").is_some(), "{j}");
        // Only the streamed pieces are live only.
        assert_eq!(
            e.is_live_only(),
            j["type"].as_str().is_some_and(|t| t.ends_with("_delta")),
            "{j}"
        );
    }
    insta::assert_json_snapshot!("events", json);
    for (seq, event) in events.into_iter().enumerate() {
        let recorded = RecordedEvent {
            seq: seq as u64,
            timestamp_ms: 1_700_000_000_000 + seq as u64,
            event,
        };
        let j = round_trip(&recorded);
        assert_eq!(j["seq"], seq as u64);
        assert!(
            j.get("type").is_some(),
            "the event is flattened next to seq: {j}"
        );
    }
}

#[test]
fn options_and_misc_shapes_round_trip() {
    round_trip(&ScreenshotOptions::default());
    round_trip(&ScreenshotOptions {
        format: ImageFormat::Png,
        quality: 100,
        max_edge: Some(1344),
        max_pixels: Some(1_176_000),
        cursor_overlay: true,
        region: Some(Rect {
            x0: 1,
            y0: 2,
            x1: 3,
            y1: 4,
        }),
    });
    round_trip(&ClickOptions::default());
    let settle = SettleOptions {
        max_wait: Duration::from_millis(2500),
        network_quiet: Duration::from_millis(50),
        expect_navigation: true,
        stable_at_capture: true,
    };
    assert_eq!(
        round_trip(&settle),
        json!({"maxWait": 2500, "networkQuiet": 50, "expectNavigation": true, "stableAtCapture": true})
    );
    round_trip(&SettleReport {
        waited_ms: 12,
        timed_out: false,
        navigated: true,
    });
    round_trip(&ModelResponse {
        turn: AssistantTurn::default(),
        usage: TokenUsage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_tokens: 3,
            cache_write_tokens: 4,
        },
        stop_reason: Some("tool_use".into()),
    });
    round_trip(&ModelInfo {
        model_id: "claude-sonnet-4-6".into(),
        provider: "anthropic".into(),
        patch_size: Some(28),
        max_image_dimension: Some(1344),
        max_image_pixels: None,
        supports_thinking: true,
        native_computer_use: true,
        context_window_tokens: 200_000,
        tab_inventory: false,
    });
    round_trip(&HookDecision::Deny {
        reason: "rate limited".into(),
    });
    assert_eq!(
        serde_json::to_value(HookDecision::Allow).unwrap(),
        json!({"decision": "allow"})
    );
    round_trip(&VerifyResult::reject("no"));
    round_trip(&screenshot());
}

#[test]
fn usage_adds_up() {
    let a = TokenUsage {
        input_tokens: 1,
        output_tokens: 2,
        cache_read_tokens: 3,
        cache_write_tokens: 4,
    };
    let mut b = a;
    b += a;
    assert_eq!(b, a + a);
    assert_eq!(b.total_input(), 16);
}

#[test]
fn images_serialize_as_base64_and_never_dump_bytes_in_debug() {
    let img = image();
    let json = round_trip(&img);
    assert_eq!(
        json,
        json!({"format": "png", "width": 2, "height": 1, "data": "iVBORw=="})
    );
    assert_eq!(img.to_data_url(), "data:image/png;base64,iVBORw==");
    assert_eq!(
        format!("{img:?}"),
        "Image { format: Png, width: 2, height: 1, bytes: 4 }"
    );
    let bad = serde_json::from_value::<Image>(
        json!({"format": "png", "width": 1, "height": 1, "data": "***"}),
    );
    assert!(bad.unwrap_err().to_string().contains("not valid base64"));
    // Clones share the bytes.
    let c = img.clone();
    assert!(Arc::ptr_eq(&c.data, &img.data));
}

#[test]
fn errors_have_stable_codes_and_clear_messages() {
    let api = LumenError::ModelApi {
        provider: "anthropic".into(),
        status: Some(529),
        kind: ModelErrorKind::Overloaded,
        retryable: true,
        message: "Overloaded".into(),
        body: Some(r#"{"type":"error"}"#.into()),
        retry_after: Some(Duration::from_secs(2)),
    };
    let cases: Vec<(LumenError, &str, &str)> = vec![
        (
            LumenError::disconnected("websocket closed"),
            "BROWSER_DISCONNECTED",
            "browser disconnected: websocket closed",
        ),
        (
            api.clone(),
            "MODEL_API_ERROR",
            "anthropic API error (HTTP 529): Overloaded",
        ),
        (
            LumenError::SessionTimeout {
                what: "run".into(),
                after: Duration::from_millis(1500),
            },
            "SESSION_TIMEOUT",
            "timed out after 1.5s: run",
        ),
        (
            LumenError::MaxRetriesExceeded {
                attempts: 3,
                last: Box::new(api.clone()),
            },
            "MAX_RETRIES_EXCEEDED",
            "gave up after 3 attempts: anthropic API error (HTTP 529): Overloaded",
        ),
        (
            LumenError::PolicyViolation {
                reason: "file: URLs".into(),
            },
            "POLICY_VIOLATION",
            "policy violation: file: URLs",
        ),
        (
            LumenError::ChildLoopFailed { reason: "x".into() },
            "CHILD_LOOP_FAILED",
            "child loop failed: x",
        ),
        (
            LumenError::config("ANTHROPIC_API_KEY", "not set; export it or pass --api-key"),
            "CONFIG_ERROR",
            "invalid configuration `ANTHROPIC_API_KEY`: not set; export it or pass --api-key",
        ),
        (
            LumenError::Cancelled {
                reason: "server_shutdown".into(),
            },
            "CANCELLED",
            "cancelled: server_shutdown",
        ),
        (
            LumenError::invalid_data("session file", "version 9 is newer than this build (1)"),
            "INVALID_DATA",
            "invalid session file: version 9 is newer than this build (1)",
        ),
        (
            LumenError::Script {
                message: "ReferenceError: x".into(),
            },
            "SCRIPT_ERROR",
            "script error: ReferenceError: x",
        ),
    ];
    for (err, code, message) in cases {
        let info = ErrorInfo::from(&err);
        assert_eq!(serde_json::to_value(info.code).unwrap(), json!(code));
        assert_eq!(info.message, message);
        round_trip(&info);
    }
    assert!(api.is_retryable() && api.is_fatal());
    assert!(
        !LumenError::Script {
            message: String::new()
        }
        .is_fatal()
    );
    let no_status = LumenError::ModelApi {
        provider: "openai".into(),
        status: None,
        kind: ModelErrorKind::Stream,
        retryable: false,
        message: "stream closed before response.completed".into(),
        body: None,
        retry_after: None,
    };
    assert_eq!(
        no_status.to_string(),
        "openai API error: stream closed before response.completed"
    );
}

// The traits must stay object-safe: the loop stores them as `Arc<dyn _>`.
#[allow(dead_code)]
fn traits_are_object_safe(
    _: Arc<dyn BrowserTab>,
    _: Arc<dyn ModelAdapter>,
    _: Arc<dyn PreActionHook>,
    _: Arc<dyn Verifier>,
    _: Arc<dyn LoopMonitor>,
) {
}

#[test]
fn a_search_ranks_interactive_matches_first_without_a_model() {
    use crate::{AxNode, AxSnapshot};
    let node = |r: &str, role: &str, name: &str| AxNode {
        reference: r.into(),
        role: role.into(),
        name: name.into(),
        value: None,
        depth: 1,
        focusable: role != "heading",
    };
    let snapshot = AxSnapshot {
        url: "http://x/".into(),
        nodes: vec![
            node("@e1", "heading", "Email preferences"),
            node("@e2", "textbox", "Name"),
            node("@e3", "textbox", "Email"),
            node("@e4", "button", "Submit"),
        ],
    };
    let found: Vec<&str> = snapshot
        .search("the email field", 20)
        .iter()
        .map(|n| n.reference.as_str())
        .collect();
    assert_eq!(found, ["@e3", "@e1"]);
    assert_eq!(snapshot.search("submit button", 20)[0].reference, "@e4");
    assert!(snapshot.search("the", 20).is_empty());
    assert_eq!(snapshot.search("e", 20).len(), 0);
}

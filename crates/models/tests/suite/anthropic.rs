//! The Anthropic adapter: its request body for a three-step history, and
//! the adapter end to end over real HTTP against the mock provider,
//! including every fault.

use std::time::Duration;

use lumen_core::{
    Action, ErrorCode, LumenError, ModelAdapter, ModelErrorKind, ModelEvent, Modifiers,
    MouseButton, Size, StepContext, WireRecord,
};
use lumen_models::anthropic::{AnthropicAdapter, ComputerTool};
use lumen_models::stream::collect_events;
use lumen_models::{AdapterOptions, ApiKey, Deadlines, RetryPolicy, create_adapter_with_env};
use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::{MockProvider, Reply, Route, SseEvent};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{
    SYSTEM_PROMPT, normalise_all, redact_images, screenshot, shot_1280, three_step_history,
};

const KEY: &str = "sk-ant-test-key-0123456789";

fn options(base_url: Option<String>) -> AdapterOptions {
    AdapterOptions {
        api_key: Some(ApiKey::new(KEY)),
        base_url,
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(20),
            max_wait: None,
        },
        deadlines: Deadlines {
            idle: Duration::from_secs(2),
            ..Deadlines::default()
        },
        ..AdapterOptions::default()
    }
}

fn ctx<'a>(wire: &'a [WireRecord], shot: &'a lumen_core::Screenshot) -> StepContext<'a> {
    StepContext {
        step: 5,
        max_steps: 30,
        instruction: "buy two desk lamps",
        system_prompt: SYSTEM_PROMPT,
        screenshot: shot,
        wire,
        state: None,
        url: "http://127.0.0.1/shop/lamp-1",
        temperature: None,
        cursor: None,
    }
}

/// The events of a synthetic computer-use answer (no public recording of
/// one exists): thinking, text, a left_click, a scroll and a task_complete.
pub(crate) fn computer_use_events() -> Vec<SseEvent> {
    let ev = |v: Value| SseEvent::typed(&v);
    vec![
        ev(
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 5000, "output_tokens": 1}}}),
        ),
        ev(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Click the lamp."}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-1"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 0})),
        ev(
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "computer", "input": {}}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"action\": \"left_cl"}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "ick\", \"coordinate\": [640, 360]}"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 1})),
        ev(
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_b", "name": "computer", "input": {}}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"action\": \"scroll\", \"coordinate\": [100, 100], \"scroll_direction\": \"down\", \"scroll_amount\": 3}"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 2})),
        ev(
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_c", "name": "computer", "input": {}}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"action\": \"left_click\", \"coordinate\": [1"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 3})),
        ev(
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 80}}),
        ),
        ev(json!({"type": "message_stop"})),
    ]
}

fn adapter(mock: &MockProvider, model: &str) -> AnthropicAdapter {
    AnthropicAdapter::new(model, options(Some(mock.base_url()))).unwrap()
}

#[test]
fn request_body_for_a_three_step_history() {
    let wire = three_step_history();
    let shot = shot_1280();
    let adapter = AnthropicAdapter::new("claude-sonnet-4-6", options(None)).unwrap();
    assert_eq!(adapter.computer_tool(), ComputerTool::V20251124);
    let mut body = adapter.request_body(&ctx(&wire, &shot), true);
    redact_images(&mut body);
    insta::assert_json_snapshot!(body);
}

#[test]
fn request_body_replays_native_turns_verbatim() {
    // A turn this adapter recorded is sent back exactly as the model wrote it.
    let shot = shot_1280();
    let native = json!({"id": "msg_1", "content": [
        {"type": "thinking", "thinking": "t", "signature": "sig"},
        {"type": "tool_use", "id": "toolu_x", "name": "computer", "input": {"action": "key", "text": "ctrl+a Delete"}},
    ]});
    let wire = vec![
        WireRecord::Assistant(lumen_core::AssistantTurn {
            calls: vec![
                lumen_core::ActionCall::new(
                    "toolu_x",
                    Action::KeyPress {
                        keys: vec!["ctrl".into(), "a".into()],
                    },
                ),
                lumen_core::ActionCall::new(
                    "toolu_x#2",
                    Action::KeyPress {
                        keys: vec!["Delete".into()],
                    },
                ),
            ],
            thinking: vec![],
            text: None,
            provider: Some(lumen_core::ProviderTurn {
                provider: "anthropic".into(),
                data: native.clone(),
            }),
        }),
        WireRecord::ToolResult(lumen_core::ToolResult {
            call_id: "toolu_x".into(),
            action: "keyPress".into(),
            ok: true,
            error: None,
            hints: vec![],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        }),
    ];
    let adapter = AnthropicAdapter::new("claude-sonnet-4-5", options(None)).unwrap();
    assert_eq!(adapter.computer_tool(), ComputerTool::V20250124);
    let mut body = adapter.request_body(&ctx(&wire, &shot), false);
    redact_images(&mut body);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"], native["content"]);
    // One tool_result for the one tool_use; the second part never ran, so
    // the call is reported as failed, with the image of the current screen.
    let result = &messages[2]["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_x");
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["content"][0]["text"],
        "keyPress: ok\n1 of 2 parts of this call did not run"
    );
    assert_eq!(result["content"][1]["source"]["data"], "<IMG step 5>");
    assert_eq!(
        body["tools"][0],
        json!({"type": "computer_20250124", "name": "computer", "display_width_px": 1280, "display_height_px": 720})
    );
}

#[tokio::test]
async fn streams_actions_as_their_arguments_complete() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(Route::AnthropicMessages, Reply::Sse(computer_use_events()));
    // The model saw a 1280x720 picture of a 2560x1440 viewport.
    let shot = screenshot(Size::new(2560, 1440), Size::new(1280, 720), 5);
    let wire = three_step_history();
    let adapter = adapter(&mock, "claude-opus-4-6");
    let stream = adapter.stream(&ctx(&wire, &shot)).await.unwrap();
    let items = collect_events(stream).await;

    let actions: Vec<&lumen_core::ActionCall> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::Action(c)) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(actions.len(), 3);
    assert_eq!(actions[0].id, "toolu_a");
    assert_eq!(
        actions[0].action,
        Action::Click {
            x: 1280,
            y: 720,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE
        }
    );
    assert_eq!(actions[1].action.kind(), "scroll");
    assert!(
        matches!(&actions[2].action, Action::Invalid { error, .. } if error.starts_with("the arguments are not valid JSON"))
    );
    // Each action comes before Completed, which repeats them all, once.
    let Some(Ok(ModelEvent::Completed(response))) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(response.turn.calls.iter().collect::<Vec<_>>(), actions);
    assert_eq!(response.usage.cache_read_tokens, 5000);
    assert_eq!(response.usage.cache_write_tokens, 300);
    assert_eq!(response.usage.output_tokens, 80);
    assert_eq!(
        response.turn.thinking[0].signature.as_deref(),
        Some("sig-1")
    );
    assert_eq!(
        items
            .iter()
            .filter(|i| matches!(i, Ok(ModelEvent::Completed(_))))
            .count(),
        1
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.key_headers, vec!["x-api-key"]);
    assert_eq!(r.headers["anthropic-version"], "2023-06-01");
    assert_eq!(r.headers["anthropic-beta"], "computer-use-2025-11-24");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["tools"][0]["display_width_px"], 1280);
    assert!(!format!("{r:?}").contains(KEY));
}

#[tokio::test]
async fn http_chunking_does_not_change_the_events() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let body: String = computer_use_events()
        .iter()
        .map(SseEvent::to_wire)
        .collect();
    mock.push(Route::AnthropicMessages, Reply::Sse(computer_use_events()));
    mock.push(
        Route::AnthropicMessages,
        Reply::SseChunked {
            body: body.clone(),
            sizes: vec![1],
        },
    );
    mock.push(
        Route::AnthropicMessages,
        Reply::SseChunked {
            body: body.replace('\n', "\r\n"),
            sizes: vec![3, 1, 7, 2],
        },
    );
    let shot = shot_1280();
    let adapter = adapter(&mock, "claude-opus-4-6");
    let mut runs = Vec::new();
    for _ in 0..3 {
        let stream = adapter.stream(&ctx(&[], &shot)).await.unwrap();
        runs.push(normalise_all(&collect_events(stream).await));
    }
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[0], runs[2]);
}

#[tokio::test]
async fn step_parses_a_json_answer_and_text_terminates() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(
        Route::AnthropicMessages,
        Reply::Json(
            StatusCode::OK,
            json!({
                "id": "msg_2", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "The lamp costs $12."}],
                "usage": {"input_tokens": 10, "output_tokens": 7},
            }),
        ),
    );
    let shot = shot_1280();
    let response = adapter(&mock, "claude-sonnet-4-6")
        .step(&ctx(&[], &shot))
        .await
        .unwrap();
    assert_eq!(response.turn.calls.len(), 1);
    assert_eq!(
        response.turn.calls[0].action,
        Action::Terminate {
            status: lumen_core::TerminateStatus::Success,
            result: "The lamp costs $12.".into()
        }
    );
    assert_eq!(response.usage.input_tokens, 10);
    assert!(mock.requests()[0].body.get("stream").is_none());
}

async fn stream_error(mock: &MockProvider) -> LumenError {
    let shot = shot_1280();
    let adapter = adapter(mock, "claude-sonnet-4-6");
    let result = adapter.stream(&ctx(&[], &shot)).await;
    match result {
        Err(e) => e,
        Ok(stream) => {
            let items = collect_events(stream).await;
            match items.into_iter().last() {
                Some(Err(e)) => e,
                other => panic!("expected an error, got {other:?}"),
            }
        }
    }
}

fn kind_of(e: &LumenError) -> ModelErrorKind {
    match e {
        LumenError::ModelApi { kind, .. } => *kind,
        other => panic!("expected a model API error, got {other:?}"),
    }
}

#[tokio::test]
async fn retries_429_500_and_529_then_succeeds() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(
        Route::AnthropicMessages,
        Reply::error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "slow down",
            Some(0),
        ),
    );
    mock.push(
        Route::AnthropicMessages,
        Reply::error(
            StatusCode::from_u16(529).unwrap(),
            "overloaded_error",
            "Overloaded",
            None,
        ),
    );
    mock.push(Route::AnthropicMessages, Reply::Sse(computer_use_events()));
    let shot = shot_1280();
    let stream = adapter(&mock, "claude-sonnet-4-6")
        .stream(&ctx(&[], &shot))
        .await
        .unwrap();
    let items = collect_events(stream).await;
    assert!(matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))));
    assert_eq!(mock.requests().len(), 3);

    mock.push(
        Route::AnthropicMessages,
        Reply::error(StatusCode::INTERNAL_SERVER_ERROR, "api_error", "boom", None),
    );
    mock.push(Route::AnthropicMessages, Reply::Sse(computer_use_events()));
    let stream = adapter(&mock, "claude-sonnet-4-6")
        .stream(&ctx(&[], &shot))
        .await
        .unwrap();
    assert!(matches!(
        collect_events(stream).await.last(),
        Some(Ok(ModelEvent::Completed(_)))
    ));
}

#[tokio::test]
async fn gives_up_with_max_retries_exceeded() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    for _ in 0..3 {
        mock.push(
            Route::AnthropicMessages,
            Reply::error(
                StatusCode::from_u16(529).unwrap(),
                "overloaded_error",
                "Overloaded",
                Some(0),
            ),
        );
    }
    let e = stream_error(&mock).await;
    assert_eq!(e.code(), ErrorCode::MaxRetriesExceeded);
    let LumenError::MaxRetriesExceeded { attempts, last } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*attempts, 3);
    assert_eq!(kind_of(last), ModelErrorKind::Overloaded);
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn auth_bad_request_and_context_length_are_typed_and_not_retried() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(
        Route::AnthropicMessages,
        Reply::error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
            None,
        ),
    );
    let e = stream_error(&mock).await;
    assert_eq!(kind_of(&e), ModelErrorKind::Auth);
    assert!(e.to_string().contains("invalid x-api-key"), "{e}");
    assert!(!format!("{e:?}").contains(KEY));

    mock.push(
        Route::AnthropicMessages,
        Reply::error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            None,
        ),
    );
    assert_eq!(
        kind_of(&stream_error(&mock).await),
        ModelErrorKind::ContextLength
    );

    mock.push(
        Route::AnthropicMessages,
        Reply::error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "messages: roles must alternate",
            None,
        ),
    );
    let e = stream_error(&mock).await;
    assert_eq!(kind_of(&e), ModelErrorKind::BadRequest);
    assert!(e.to_string().contains("roles must alternate"));
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn stream_faults_are_typed_errors() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let head: Vec<SseEvent> = computer_use_events().into_iter().take(9).collect();

    // Disconnect mid-stream: the click already came, then an error.
    mock.push(Route::AnthropicMessages, Reply::Disconnect(head.clone()));
    let shot = shot_1280();
    let a = adapter(&mock, "claude-sonnet-4-6");
    let items = collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await;
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Ok(ModelEvent::Action(c)) if c.id == "toolu_a"))
    );
    assert_eq!(
        kind_of(items.last().unwrap().as_ref().unwrap_err()),
        ModelErrorKind::Stream
    );

    // A malformed event.
    let mut bad = head.clone();
    bad.push(SseEvent::raw(
        "{\"type\": \"content_block_delta\", \"index\": ",
    ));
    mock.push(Route::AnthropicMessages, Reply::Sse(bad));
    let e = stream_error(&mock).await;
    assert!(e.to_string().contains("malformed"), "{e}");

    // A stall: the idle timeout ends it.
    mock.push(Route::AnthropicMessages, Reply::Stall(head.clone()));
    let e = stream_error(&mock).await;
    assert!(e.to_string().contains("idle"), "{e}");

    // An error event inside the stream.
    let mut errored = head.clone();
    errored.push(SseEvent::typed(
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    mock.push(Route::AnthropicMessages, Reply::Sse(errored));
    assert_eq!(
        kind_of(&stream_error(&mock).await),
        ModelErrorKind::Overloaded
    );

    // The body ends without message_stop.
    mock.push(Route::AnthropicMessages, Reply::Sse(head));
    let e = stream_error(&mock).await;
    assert!(e.to_string().contains("message_stop"), "{e}");
}

#[tokio::test]
async fn summarize_uses_the_cheap_model() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(
        Route::AnthropicMessages,
        Reply::Json(StatusCode::OK, json!({"id": "m", "content": [{"type": "text", "text": "Found the lamp."}], "stop_reason": "end_turn"})),
    );
    let summary = adapter(&mock, "claude-opus-4-6")
        .summarize(&three_step_history(), None)
        .await
        .unwrap();
    assert_eq!(summary, "Found the lamp.");
    let body = &mock.requests()[0].body;
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert!(!body.to_string().contains("PNG-BYTES"));
}

/// A summary's tokens come back with it, so the run counts them.
#[tokio::test]
async fn a_summary_reports_the_tokens_it_used() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(
        Route::AnthropicMessages,
        Reply::Json(
            StatusCode::OK,
            json!({"id": "m", "content": [{"type": "text", "text": "Found the lamp."}],
                   "stop_reason": "end_turn",
                   "usage": {"input_tokens": 812, "output_tokens": 31}}),
        ),
    );
    let (summary, usage) = adapter(&mock, "claude-opus-4-6")
        .summarize_counted(&three_step_history(), None)
        .await
        .unwrap();
    assert_eq!(summary, "Found the lamp.");
    assert_eq!((usage.input_tokens, usage.output_tokens), (812, 31));
}

#[test]
fn estimate_counts_images_by_the_750_rule() {
    let shot = shot_1280();
    let wire = three_step_history();
    let adapter = AnthropicAdapter::new("claude-sonnet-4-6", options(None)).unwrap();
    let estimate = adapter.estimate_tokens(&ctx(&wire, &shot));
    // One full 1280x720 image (1229 tokens) plus some text.
    assert!((1229..4000).contains(&estimate), "{estimate}");
}

#[test]
fn model_strings_select_adapters_and_keys_come_from_the_env() {
    let env = |name: &str| match name {
        "ANTHROPIC_API_KEY" => Some(KEY.to_owned()),
        _ => None,
    };
    let adapter = create_adapter_with_env(
        "anthropic/claude-sonnet-4-6",
        AdapterOptions::default(),
        env,
    )
    .unwrap();
    assert_eq!(adapter.info().provider, "anthropic");
    assert_eq!(adapter.info().model_id, "claude-sonnet-4-6");
    assert!(!format!("{:?}", adapter.info()).contains(KEY));

    // Keys never print: not in options, adapters or their Debug output.
    let with_key = options(None);
    assert!(!format!("{with_key:?}").contains(KEY));
    let concrete = AnthropicAdapter::new("claude-sonnet-4-6", with_key).unwrap();
    assert!(!format!("{concrete:?}").contains(KEY));

    let e = create_adapter_with_env(
        "anthropic/claude-sonnet-4-6",
        AdapterOptions::default(),
        |_| None,
    )
    .err()
    .unwrap();
    assert_eq!(e.code(), ErrorCode::ConfigError);
    assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
    let e = create_adapter_with_env("mystery-model", AdapterOptions::default(), |_| None)
        .err()
        .unwrap();
    assert_eq!(e.code(), ErrorCode::ConfigError);
}

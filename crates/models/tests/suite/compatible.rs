//! The OpenAI-compatible adapter: request bodies in both coordinate
//! spaces, streamed tool-call deltas assembled by index and id, text
//! answers, usage, and faults over real HTTP against the mock provider.

use std::time::Duration;

use lumen_core::{
    Action, ActionCall, ModelAdapter, ModelEvent, Modifiers, MouseButton, Size, StepContext,
    WireRecord,
};
use lumen_models::compatible::CompatibleAdapter;
use lumen_models::stream::collect_events;
use lumen_models::{
    AdapterOptions, CoordinateSpace, Deadlines, RetryPolicy, create_adapter_with_env,
};
use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::{Reply, Route, SseEvent};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{SYSTEM_PROMPT, redact_images, screenshot, shot_1280, three_step_history};

fn options(base_url: &str, space: CoordinateSpace) -> AdapterOptions {
    AdapterOptions {
        base_url: Some(base_url.to_owned()),
        coordinate_space: space,
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

fn chunk(delta: Value, finish: Option<&str>) -> SseEvent {
    SseEvent::data(
        &json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
    )
}

/// Two tool calls whose arguments arrive in pieces, interleaved by index as
/// vLLM and Ollama send them, then usage and `[DONE]`.
pub(crate) fn tool_call_events() -> Vec<SseEvent> {
    vec![
        chunk(
            json!({"role": "assistant", "content": null, "reasoning_content": "Click, then type."}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "click", "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"x\": 500, "}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"y\": 250}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "type", "arguments": "{\"text\""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": ": \"lamp\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        SseEvent::data(
            &json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 512}}}),
        ),
        SseEvent::raw("[DONE]"),
    ]
}

#[test]
fn request_body_for_a_three_step_history() {
    let wire = three_step_history();
    let shot = shot_1280();
    for (space, name) in [
        (CoordinateSpace::Normalized, "grid"),
        (CoordinateSpace::Pixels, "pixels"),
    ] {
        let adapter =
            CompatibleAdapter::new("qwen2.5-vl:7b", options("http://127.0.0.1:1/v1", space))
                .unwrap();
        let mut body = adapter.request_body(&ctx(&wire, &shot), true);
        redact_images(&mut body);
        insta::with_settings!({snapshot_suffix => name}, {
            insta::assert_json_snapshot!(body);
        });
    }
}

#[tokio::test]
async fn assembles_tool_call_deltas_and_counts_usage() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(Route::ChatCompletions, Reply::Sse(tool_call_events()));
    let shot = screenshot(Size::new(1288, 728), Size::new(1000, 565), 5);
    let adapter = CompatibleAdapter::new(
        "qwen2.5-vl:7b",
        options(
            &format!("{}/v1", mock.base_url()),
            CoordinateSpace::Normalized,
        ),
    )
    .unwrap();
    let items = collect_events(adapter.stream(&ctx(&[], &shot)).await.unwrap()).await;
    // The click is yielded as soon as call index 1 starts, before the type.
    let order: Vec<String> = items
        .iter()
        .map(|i| match i {
            Ok(ModelEvent::Action(c)) => format!("action {}", c.id),
            Ok(ModelEvent::ThinkingDelta(_)) => "thinking".into(),
            Ok(ModelEvent::Completed(_)) => "completed".into(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        order,
        ["thinking", "action call_a", "action call_b", "completed"]
    );
    let Some(Ok(ModelEvent::Completed(r))) = items.last() else {
        panic!()
    };
    assert_eq!(
        r.turn.calls,
        vec![
            ActionCall::new(
                "call_a",
                Action::Click {
                    x: 644,
                    y: 182,
                    button: MouseButton::Left,
                    modifiers: Modifiers::NONE
                }
            ),
            ActionCall::new(
                "call_b",
                Action::Type {
                    text: "lamp".into()
                }
            ),
        ]
    );
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cache_read_tokens,
            r.usage.output_tokens
        ),
        (388, 512, 30)
    );
    assert_eq!(r.turn.thinking[0].text, "Click, then type.");
    let req = &mock.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert!(req.key_headers.is_empty(), "no key configured, none sent");
    assert_eq!(req.body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn text_answers_missing_done_and_faults() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let base = format!("{}/v1", mock.base_url());
    let env = |name: &str| match name {
        "OPENAI_BASE_URL" => Some(base.clone()),
        "OPENAI_API_KEY" => Some("sk-local-0123456789".to_owned()),
        _ => None,
    };
    let adapter = create_adapter_with_env(
        "llava:13b",
        AdapterOptions {
            retry: RetryPolicy {
                max_retries: 2,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(5),
                max_wait: None,
            },
            ..AdapterOptions::default()
        },
        env,
    )
    .unwrap();
    assert_eq!(adapter.info().provider, "compatible");
    let shot = shot_1280();

    // A text answer; the server never sends [DONE] but did finish.
    mock.push(
        Route::ChatCompletions,
        Reply::Sse(vec![
            chunk(json!({"role": "assistant", "content": "Two lamps "}), None),
            chunk(json!({"content": "are in the cart."}), Some("stop")),
        ]),
    );
    let items = collect_events(adapter.stream(&ctx(&[], &shot)).await.unwrap()).await;
    let Some(Ok(ModelEvent::Completed(r))) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(
        r.turn.calls[0].action,
        Action::Terminate {
            status: lumen_core::TerminateStatus::Success,
            result: "Two lamps are in the cart.".into()
        }
    );
    assert_eq!(mock.requests()[0].key_headers, vec!["authorization"]);

    // Truncated: no finish reason and no [DONE].
    mock.push(
        Route::ChatCompletions,
        Reply::Sse(tool_call_events().into_iter().take(3).collect()),
    );
    let items = collect_events(adapter.stream(&ctx(&[], &shot)).await.unwrap()).await;
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert!(e.to_string().contains("truncated"), "{e}");

    // Invalid JSON arguments become an invalid action, not an error.
    mock.push(Route::ChatCompletions, Reply::Sse(vec![
        chunk(json!({"tool_calls": [{"index": 0, "id": "call_x", "function": {"name": "click", "arguments": "{\"x\": 5,"}}]}), Some("tool_calls")),
        SseEvent::raw("[DONE]"),
    ]));
    let items = collect_events(adapter.stream(&ctx(&[], &shot)).await.unwrap()).await;
    assert!(
        matches!(&items[0], Ok(ModelEvent::Action(c)) if matches!(&c.action, Action::Invalid { name, .. } if name == "click"))
    );

    // 503 then a JSON step.
    mock.push(
        Route::ChatCompletions,
        Reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "loading model",
            None,
        ),
    );
    mock.push(Route::ChatCompletions, Reply::Json(StatusCode::OK, json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_s", "type": "function", "function": {"name": "scroll", "arguments": "{\"x\":500,\"y\":500,\"direction\":\"down\",\"amount\":5}"}}]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    })));
    let r = adapter.step(&ctx(&[], &shot)).await.unwrap();
    assert_eq!(r.turn.calls[0].action.kind(), "scroll");

    // No base URL anywhere: a config error that names the fix.
    let e = create_adapter_with_env("llava:13b", AdapterOptions::default(), |_| None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("OPENAI_BASE_URL"), "{e}");
}

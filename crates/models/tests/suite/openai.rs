//! The OpenAI Responses adapter: request bodies (full input and chained),
//! computer calls (single action and batches, with safety checks), function
//! calls and text answers over real HTTP against the mock provider, and its
//! faults. Computer-call events are synthetic (no public recording exists).

use std::time::Duration;

use lumen_core::{
    Action, ActionCall, AssistantTurn, ModelAdapter, ModelErrorKind, ModelEvent, Modifiers,
    MouseButton, ProviderTurn, ScrollDirection, ScrollUnit, Size, StepContext, ToolResult,
    WireRecord, WireScreenshot,
};
use lumen_models::openai::OpenAiAdapter;
use lumen_models::stream::collect_events;
use lumen_models::{AdapterOptions, ApiKey, Deadlines, RetryPolicy};
use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::{MockProvider, Reply, Route, SseEvent};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{SYSTEM_PROMPT, redact_images, screenshot, shot_1280, three_step_history};

const KEY: &str = "sk-openai-test-key-0123456789";

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

fn adapter(mock: &MockProvider, model: &str) -> OpenAiAdapter {
    OpenAiAdapter::new(model, options(Some(format!("{}/v1", mock.base_url())))).unwrap()
}

fn ev(v: Value) -> SseEvent {
    SseEvent::typed(&v)
}

/// A `computer` tool answer: reasoning, a batch of three actions with a
/// pending safety check, then a function call.
pub(crate) fn batched_events() -> Vec<SseEvent> {
    vec![
        ev(
            json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        ),
        ev(
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        ),
        ev(
            json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 2, "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "Fill the quantity."}),
        ),
        ev(
            json!({"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Fill the quantity."}], "encrypted_content": "enc-1"}}),
        ),
        ev(
            json!({"type": "response.output_item.added", "sequence_number": 4, "output_index": 1, "item": {"type": "computer_call", "id": "cu_1", "call_id": "call_batch", "status": "in_progress"}}),
        ),
        ev(
            json!({"type": "response.output_item.done", "sequence_number": 5, "output_index": 1, "item": {
                "type": "computer_call", "id": "cu_1", "call_id": "call_batch", "status": "completed",
                "actions": [
                    {"type": "click", "x": 640, "y": 360, "button": "left"},
                    {"type": "type", "text": "2"},
                    {"type": "scroll", "x": 100, "y": 100, "scroll_x": 0, "scroll_y": 200},
                ],
                "pending_safety_checks": [{"id": "sc_1", "code": "malicious_instructions", "message": "Check the page."}],
            }}),
        ),
        ev(
            json!({"type": "response.output_item.added", "sequence_number": 6, "output_index": 2, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_nav", "name": "navigate", "arguments": ""}}),
        ),
        ev(
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 7, "item_id": "fc_1", "output_index": 2, "delta": "{\"url\":\"http://127.0.0.1/cart\"}"}),
        ),
        ev(
            json!({"type": "response.output_item.done", "sequence_number": 8, "output_index": 2, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_nav", "name": "navigate", "arguments": "{\"url\":\"http://127.0.0.1/cart\"}", "status": "completed"}}),
        ),
        ev(
            json!({"type": "response.completed", "sequence_number": 9, "response": {"id": "resp_1", "status": "completed", "output": [], "usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 2048}, "output_tokens": 120, "output_tokens_details": {"reasoning_tokens": 64}}}}),
        ),
    ]
}

#[test]
fn request_body_for_a_three_step_history() {
    let wire = three_step_history();
    let shot = shot_1280();
    for (model, name) in [("computer-use-preview", "preview"), ("gpt-5.4", "computer")] {
        let adapter = OpenAiAdapter::new(model, options(None)).unwrap();
        let mut body = adapter.request_body(&ctx(&wire, &shot), true);
        redact_images(&mut body);
        insta::with_settings!({snapshot_suffix => name}, {
            insta::assert_json_snapshot!(body);
        });
    }
}

/// History this adapter wrote itself: a native computer_call answered by
/// its results and the next screenshot.
fn native_history() -> Vec<WireRecord> {
    let output = json!([
        {"type": "reasoning", "id": "rs_0", "summary": [], "encrypted_content": "enc-0"},
        {"type": "computer_call", "id": "cu_0", "call_id": "call_0", "action": {"type": "click", "x": 10, "y": 10, "button": "left"}, "pending_safety_checks": [{"id": "sc_0", "code": "irrelevant_domain", "message": "Odd domain."}], "status": "completed"},
    ]);
    vec![
        WireRecord::Screenshot(WireScreenshot {
            step: 0,
            image: None,
            compressed: true,
            url: None,
            tabs: Vec::new(),
        }),
        WireRecord::Assistant(AssistantTurn {
            calls: vec![ActionCall::new(
                "call_0",
                Action::Click {
                    x: 10,
                    y: 10,
                    button: MouseButton::Left,
                    modifiers: Modifiers::NONE,
                },
            )],
            thinking: vec![],
            text: None,
            provider: Some(ProviderTurn {
                provider: "openai".into(),
                data: json!({"id": "resp_0", "output": output}),
            }),
        }),
        WireRecord::ToolResult(ToolResult {
            call_id: "call_0".into(),
            action: "click".into(),
            ok: true,
            error: None,
            hints: vec![],
            acknowledged_safety_checks: vec![
                json!({"id": "sc_0", "code": "irrelevant_domain", "message": "Odd domain."}),
            ],
            image: None,
            output: None,
            download: None,
        }),
        WireRecord::Screenshot(WireScreenshot {
            step: 1,
            image: Some(shot_1280().image),
            compressed: false,
            url: Some("http://127.0.0.1/a".into()),
            tabs: Vec::new(),
        }),
    ]
}

#[test]
fn native_turns_are_answered_by_call_id_with_the_screenshot() {
    let shot = shot_1280();
    let wire = native_history();
    let adapter = OpenAiAdapter::new("computer-use-preview", options(None)).unwrap();
    let mut body = adapter.request_body(&ctx(&wire, &shot), true);
    redact_images(&mut body);
    let input = body["input"].as_array().unwrap();
    // [marker], reasoning, computer_call, computer_call_output, result text, prompt.
    assert_eq!(input[0]["content"][0]["text"], "[screenshot: step 0]");
    assert_eq!(input[1]["encrypted_content"], "enc-0");
    // Stateless replay: the reasoning item travels with its encrypted
    // content; the computer call keeps the id its SDK type requires.
    assert_eq!(input[1]["id"], "rs_0");
    assert_eq!(input[2]["call_id"], "call_0");
    assert_eq!(input[2]["id"], "cu_0");
    assert_eq!(
        input[3],
        json!({
            "type": "computer_call_output",
            "call_id": "call_0",
            "output": {"type": "computer_screenshot", "image_url": "<IMG step 5>"},
            "acknowledged_safety_checks": [{"id": "sc_0", "code": "irrelevant_domain", "message": "Odd domain."}],
        })
    );
    assert_eq!(
        input[4]["content"][0]["text"],
        "Result of computer call call_0: ok"
    );
    assert_eq!(input[5]["content"][0]["text"], SYSTEM_PROMPT);
    assert_eq!(input.len(), 6);
    assert_eq!(body["store"], false);
    assert_eq!(body["tools"][0]["type"], "computer_use_preview");
}

#[test]
fn chained_requests_send_only_the_new_items() {
    let shot = shot_1280();
    let wire = native_history();
    let adapter = OpenAiAdapter::new(
        "gpt-5.4",
        AdapterOptions {
            openai_chain_responses: true,
            ..options(None)
        },
    )
    .unwrap();
    let mut body = adapter.request_body(&ctx(&wire, &shot), true);
    redact_images(&mut body);
    assert_eq!(body["previous_response_id"], "resp_0");
    assert_eq!(body["store"], true);
    let input = body["input"].as_array().unwrap();
    assert_eq!(input[0]["type"], "computer_call_output");
    assert_eq!(input[0]["call_id"], "call_0");
    assert_eq!(input.len(), 3);
}

#[tokio::test]
async fn streams_a_computer_batch_with_safety_checks() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(Route::OpenAiResponses, Reply::Sse(batched_events()));
    let shot = screenshot(Size::new(2560, 1440), Size::new(1280, 720), 5);
    let items = collect_events(
        adapter(&mock, "gpt-5.4")
            .stream(&ctx(&[], &shot))
            .await
            .unwrap(),
    )
    .await;
    let calls: Vec<&ActionCall> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::Action(c)) => Some(c),
            _ => None,
        })
        .collect();
    let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        ["call_batch", "call_batch#2", "call_batch#3", "call_nav"]
    );
    assert_eq!(
        calls[0].action,
        Action::Click {
            x: 1280,
            y: 720,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE
        }
    );
    assert_eq!(
        calls[2].action,
        Action::Scroll {
            x: 200,
            y: 200,
            direction: ScrollDirection::Down,
            amount: 400.0,
            unit: ScrollUnit::Pixels,
            modifiers: Modifiers::NONE
        }
    );
    assert!(
        calls[..3]
            .iter()
            .all(|c| c.safety_checks.len() == 1
                && c.safety_checks[0].code == "malicious_instructions")
    );
    assert_eq!(
        calls[3].action,
        Action::Goto {
            url: "http://127.0.0.1/cart".into()
        }
    );
    let Some(Ok(ModelEvent::Completed(r))) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(r.turn.calls.len(), 4);
    assert_eq!(r.turn.thinking[0].signature.as_deref(), Some("enc-1"));
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cache_read_tokens,
            r.usage.output_tokens
        ),
        (952, 2048, 120)
    );
    assert_eq!(r.turn.provider.as_ref().unwrap().data["id"], "resp_1");

    let req = &mock.requests()[0];
    assert_eq!(req.path, "/v1/responses");
    assert_eq!(req.key_headers, vec!["authorization"]);
    assert_eq!(req.body["tools"][0], json!({"type": "computer"}));
    assert!(!format!("{req:?}").contains(KEY));
}

#[tokio::test]
async fn step_decodes_a_preview_call_and_a_text_answer() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(Route::OpenAiResponses, Reply::Json(StatusCode::OK, json!({
        "id": "resp_2", "status": "completed",
        "output": [{"type": "computer_call", "id": "cu_2", "call_id": "call_2", "action": {"type": "keypress", "keys": ["CTRL", "L"]}, "pending_safety_checks": []}],
        "usage": {"input_tokens": 10, "output_tokens": 3},
    })));
    mock.push(Route::OpenAiResponses, Reply::Json(StatusCode::OK, json!({
        "id": "resp_3", "status": "completed",
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two lamps are in the cart."}]}],
    })));
    let shot = shot_1280();
    let a = adapter(&mock, "computer-use-preview");
    let r = a.step(&ctx(&[], &shot)).await.unwrap();
    assert_eq!(
        r.turn.calls[0].action,
        Action::KeyPress {
            keys: vec!["CTRL".into(), "L".into()]
        }
    );
    let r = a.step(&ctx(&[], &shot)).await.unwrap();
    assert_eq!(r.turn.calls[0].id, "text_answer");
    assert_eq!(
        r.turn.calls[0].action,
        Action::Terminate {
            status: lumen_core::TerminateStatus::Success,
            result: "Two lamps are in the cart.".into()
        }
    );
    assert_eq!(mock.requests()[0].body["tools"][0]["display_width"], 1280);
}

fn kind_of(e: &lumen_core::LumenError) -> ModelErrorKind {
    match e {
        lumen_core::LumenError::ModelApi { kind, .. } => *kind,
        other => panic!("expected a model API error, got {other:?}"),
    }
}

#[tokio::test]
async fn faults_are_typed_errors() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let shot = shot_1280();
    let a = adapter(&mock, "gpt-5.4");
    let last_error = |items: Vec<lumen_core::Result<ModelEvent>>| match items.into_iter().last() {
        Some(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    };

    // 429 with Retry-After, then success.
    mock.push(
        Route::OpenAiResponses,
        Reply::error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            "Rate limit reached",
            Some(0),
        ),
    );
    mock.push(Route::OpenAiResponses, Reply::Sse(batched_events()));
    let items = collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await;
    assert!(matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))));

    // In-stream error event (as recorded in openai-error.1).
    let mut errored: Vec<SseEvent> = batched_events().into_iter().take(1).collect();
    errored.push(ev(json!({"type": "error", "sequence_number": 2, "error": {"type": "server_error", "code": "server_error", "message": "The server had an error."}})));
    mock.push(Route::OpenAiResponses, Reply::Sse(errored));
    let e = last_error(collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await);
    assert_eq!(kind_of(&e), ModelErrorKind::Server);
    assert!(e.to_string().contains("The server had an error."));

    // Disconnect after the batch: its actions came, then an error.
    mock.push(
        Route::OpenAiResponses,
        Reply::Disconnect(batched_events().into_iter().take(6).collect()),
    );
    let items = collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await;
    assert_eq!(
        items
            .iter()
            .filter(|i| matches!(i, Ok(ModelEvent::Action(_))))
            .count(),
        3
    );
    assert_eq!(kind_of(&last_error(items)), ModelErrorKind::Stream);

    // Missing response.completed.
    mock.push(
        Route::OpenAiResponses,
        Reply::Sse(batched_events().into_iter().take(9).collect()),
    );
    let e = last_error(collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await);
    assert!(e.to_string().contains("response.completed"), "{e}");

    // Context length.
    mock.push(Route::OpenAiResponses, Reply::Status {
        status: StatusCode::BAD_REQUEST,
        retry_after: None,
        body: json!({"error": {"message": "Your input exceeds the context window of this model.", "type": "invalid_request_error", "code": "context_length_exceeded"}}).to_string(),
    });
    let e = a.stream(&ctx(&[], &shot)).await.err().unwrap();
    assert_eq!(kind_of(&e), ModelErrorKind::ContextLength);
}

/// The ids of the output items a request replays, by item type.
fn replayed_ids(body: &Value) -> Vec<(String, Option<String>)> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| matches!(i["type"].as_str(), Some("computer_call" | "reasoning")))
        .map(|i| {
            (
                i["type"].as_str().unwrap().to_owned(),
                i["id"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// The SDK's types require the `id` of a replayed output item; public
/// reports say the API looks such ids up among stored items and, with
/// `store: false`, refuses them. The adapter sends the SDK's shape, and
/// when an answer names an item id it sends the request once more the
/// other way and keeps that shape: tested against a mock answering each
/// way, over real HTTP.
#[tokio::test]
async fn stateless_replay_settles_item_ids_by_the_apis_answer() {
    let wire = native_history();
    let shot = shot_1280();
    let with_ids: Vec<(String, Option<String>)> =
        [("reasoning", "rs_0"), ("computer_call", "cu_0")]
            .iter()
            .map(|(k, id)| ((*k).to_owned(), Some((*id).to_owned())))
            .collect();
    let without_ids: Vec<(String, Option<String>)> =
        with_ids.iter().map(|(k, _)| (k.clone(), None)).collect();

    // As the SDK's types say: the ids go and are accepted.
    let sdk = lumen_test_support::mock_provider().await.unwrap();
    let a = adapter(&sdk, "gpt-5.4");
    for _ in 0..2 {
        sdk.push(Route::OpenAiResponses, Reply::Sse(batched_events()));
        let items = collect_events(a.stream(&ctx(&wire, &shot)).await.unwrap()).await;
        assert!(matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))));
    }
    let sent = sdk.requests();
    assert_eq!(sent.len(), 2, "nothing was sent twice");
    assert_eq!(replayed_ids(&sent[1].body), with_ids);
    assert!(sdk.violations().is_empty(), "{:?}", sdk.violations());

    // As public reports say: the ids are refused with a 404, the request
    // goes once more without them, and later requests go without them.
    let reports = lumen_test_support::mock_provider().await.unwrap();
    reports.refuse_unstored_item_ids();
    let a = adapter(&reports, "gpt-5.4");
    for _ in 0..2 {
        reports.push(Route::OpenAiResponses, Reply::Sse(batched_events()));
        let items = collect_events(a.stream(&ctx(&wire, &shot)).await.unwrap()).await;
        assert!(matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))));
    }
    let sent = reports.requests();
    assert_eq!(sent.len(), 3, "one request went twice");
    assert_eq!(replayed_ids(&sent[0].body), with_ids);
    assert_eq!(replayed_ids(&sent[1].body), without_ids);
    assert_eq!(
        replayed_ids(&sent[2].body),
        without_ids,
        "the shape is remembered"
    );
    assert!(
        reports.violations().is_empty(),
        "{:?}",
        reports.violations()
    );
}

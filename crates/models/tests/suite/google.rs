//! The Gemini adapter: request body for the three-step history, native
//! replay with function responses, and streams over real HTTP (computer-use
//! calls are synthetic: no public recording exists).

use std::time::Duration;

use lumen_core::{
    Action, ActionCall, AssistantTurn, ModelAdapter, ModelErrorKind, ModelEvent, Modifiers,
    MouseButton, ProviderTurn, Size, StepContext, ToolResult, WireRecord, WireScreenshot,
};
use lumen_models::google::GoogleAdapter;
use lumen_models::stream::collect_events;
use lumen_models::{AdapterOptions, ApiKey, Deadlines, RetryPolicy, create_adapter_with_env};
use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::{MockProvider, Reply, Route, SseEvent};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{SYSTEM_PROMPT, redact_images, screenshot, shot_1280, three_step_history};

const KEY: &str = "AIza-test-key-0123456789";

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
        temperature: Some(0.2),
        cursor: None,
    }
}

const MODEL: &str = "gemini-2.5-computer-use-preview-10-2025";

fn adapter(mock: &MockProvider) -> GoogleAdapter {
    GoogleAdapter::new(MODEL, options(Some(mock.base_url()))).unwrap()
}

fn chunk(parts: Value, finish: Option<&str>) -> SseEvent {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    SseEvent::data(&json!({
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 2000, "cachedContentTokenCount": 1500, "candidatesTokenCount": 40, "thoughtsTokenCount": 10},
        "responseId": "resp-g1",
    }))
}

/// A thought, a `type_text_at` with a safety decision, then a streamed
/// `scroll_at` in Gemini 3's partial-argument form.
pub(crate) fn computer_use_events() -> Vec<SseEvent> {
    vec![
        chunk(
            json!([{"text": "Type the quantity.", "thought": true}]),
            None,
        ),
        chunk(
            json!([{
                "functionCall": {"name": "type_text_at", "args": {"x": 500, "y": 500, "text": "2", "press_enter": false,
                    "safety_decision": {"decision": "require_confirmation", "explanation": "Entering a purchase quantity."}}},
                "thoughtSignature": "sig-g1",
            }]),
            None,
        ),
        chunk(
            json!([{"functionCall": {"name": "scroll_at", "willContinue": true}}]),
            None,
        ),
        chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.direction", "stringValue": "do", "willContinue": true}], "willContinue": true}}]),
            None,
        ),
        chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.direction", "stringValue": "wn"}, {"jsonPath": "$.x", "numberValue": 250}, {"jsonPath": "$.y", "numberValue": 750}, {"jsonPath": "$.magnitude", "numberValue": 500}], "willContinue": true}}]),
            None,
        ),
        chunk(json!([{"functionCall": {}}]), Some("STOP")),
    ]
}

#[test]
fn request_body_for_a_three_step_history() {
    let wire = three_step_history();
    let shot = shot_1280();
    let adapter = GoogleAdapter::new(MODEL, options(None)).unwrap();
    let mut body = adapter.request_body(&ctx(&wire, &shot));
    redact_images(&mut body);
    insta::assert_json_snapshot!(body);
}

#[test]
fn native_turns_get_function_responses_with_url_and_screenshot() {
    let shot = shot_1280();
    let parts = json!([
        {"functionCall": {"name": "click_at", "args": {"x": 10, "y": 10, "safety_decision": {"decision": "require_confirmation", "explanation": "x"}}}, "thoughtSignature": "sig-0"},
        {"functionCall": {"name": "wait_5_seconds", "args": {}}},
    ]);
    let wire = vec![
        WireRecord::Screenshot(WireScreenshot {
            step: 0,
            image: None,
            compressed: true,
            url: Some("http://127.0.0.1/a".into()),
            tabs: Vec::new(),
        }),
        WireRecord::Assistant(AssistantTurn {
            calls: vec![
                ActionCall::new(
                    "r-0",
                    Action::Click {
                        x: 13,
                        y: 7,
                        button: MouseButton::Left,
                        modifiers: Modifiers::NONE,
                    },
                ),
                ActionCall::new("r-1", Action::Wait { ms: 5000 }),
            ],
            thinking: vec![],
            text: None,
            provider: Some(ProviderTurn {
                provider: "google".into(),
                data: json!({"responseId": "r", "parts": parts, "callIds": ["r-0", "r-1"]}),
            }),
        }),
        WireRecord::ToolResult(ToolResult {
            call_id: "r-0".into(),
            action: "click".into(),
            ok: true,
            error: None,
            hints: vec![],
            acknowledged_safety_checks: vec![json!({"id": "r-0"})],
            image: None,
            output: None,
            download: None,
        }),
        WireRecord::ToolResult(ToolResult {
            call_id: "r-1".into(),
            action: "wait".into(),
            ok: false,
            error: Some("cancelled".into()),
            hints: vec![],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        }),
        WireRecord::Screenshot(WireScreenshot {
            step: 1,
            image: Some(shot.image.clone()),
            compressed: false,
            url: Some("http://127.0.0.1/b".into()),
            tabs: Vec::new(),
        }),
    ];
    let adapter = GoogleAdapter::new(MODEL, options(None)).unwrap();
    let mut body = adapter.request_body(&ctx(&wire, &shot));
    redact_images(&mut body);
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents[1]["parts"], parts);
    assert_eq!(contents[2]["role"], "user");
    assert_eq!(
        contents[2]["parts"][0],
        json!({"functionResponse": {"name": "click_at", "response": {"url": "http://127.0.0.1/b", "result": "ok", "safety_acknowledgement": "true"}}})
    );
    assert_eq!(
        contents[2]["parts"][1],
        json!({"functionResponse": {
            "name": "wait_5_seconds",
            "response": {"url": "http://127.0.0.1/b", "error": "wait: error: cancelled"},
            "parts": [{"inlineData": {"mimeType": "image/png", "data": "<IMG step 5>"}}],
        }})
    );
    assert_eq!(contents[2]["parts"][2], json!({"text": SYSTEM_PROMPT}));
}

#[tokio::test]
async fn streams_computer_use_with_partial_arguments() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(Route::Gemini, Reply::Sse(computer_use_events()));
    // An odd, downscaled screenshot: the grid maps onto the viewport.
    let shot = screenshot(Size::new(1288, 728), Size::new(1000, 565), 5);
    let items = collect_events(adapter(&mock).stream(&ctx(&[], &shot)).await.unwrap()).await;
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
        [
            "resp-g1-0",
            "resp-g1-0#2",
            "resp-g1-0#3",
            "resp-g1-0#4",
            "resp-g1-1"
        ]
    );
    assert_eq!(
        calls[0].action,
        Action::Click {
            x: 644,
            y: 364,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE
        }
    );
    assert_eq!(calls[3].action, Action::Type { text: "2".into() });
    assert_eq!(calls[0].safety_checks[0].code, "require_confirmation");
    assert_eq!(
        calls[4].action,
        Action::Scroll {
            x: 322,
            y: 546,
            direction: lumen_core::ScrollDirection::Down,
            amount: 364.0,
            unit: lumen_core::ScrollUnit::Pixels,
            modifiers: Modifiers::NONE
        }
    );
    let Some(Ok(ModelEvent::Completed(r))) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cache_read_tokens,
            r.usage.output_tokens
        ),
        (500, 1500, 50)
    );
    let data = &r.turn.provider.as_ref().unwrap().data;
    assert_eq!(data["parts"][0]["thoughtSignature"], "sig-g1");
    assert_eq!(
        data["parts"][1]["functionCall"],
        json!({"name": "scroll_at", "args": {"direction": "down", "x": 250, "y": 750, "magnitude": 500}})
    );
    assert_eq!(data["callIds"], json!(["resp-g1-0", "resp-g1-1"]));

    let req = &mock.requests()[0];
    assert_eq!(
        req.path,
        format!("/v1beta/models/{MODEL}:streamGenerateContent?alt=sse")
    );
    assert_eq!(req.key_headers, vec!["x-goog-api-key"]);
    assert_eq!(
        req.body["tools"][0],
        json!({"computerUse": {"environment": "ENVIRONMENT_BROWSER"}})
    );
    assert_eq!(req.body["generationConfig"]["temperature"], json!(0.2));
}

#[tokio::test]
async fn step_text_answer_and_faults() {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let shot = shot_1280();
    let a = adapter(&mock);
    mock.push(Route::Gemini, Reply::Json(StatusCode::OK, json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Two lamps are in the cart."}]}, "finishReason": "STOP"}],
        "responseId": "r2",
    })));
    let r = a.step(&ctx(&[], &shot)).await.unwrap();
    assert_eq!(
        r.turn.calls[0].action,
        Action::Terminate {
            status: lumen_core::TerminateStatus::Success,
            result: "Two lamps are in the cart.".into()
        }
    );
    assert_eq!(
        mock.requests()[0].path,
        format!("/v1beta/models/{MODEL}:generateContent")
    );

    let last_error = |items: Vec<lumen_core::Result<ModelEvent>>| match items.into_iter().last() {
        Some(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    // No finish reason: truncated.
    mock.push(
        Route::Gemini,
        Reply::Sse(computer_use_events().into_iter().take(4).collect()),
    );
    let e = last_error(collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await);
    assert!(
        e.to_string()
            .contains("ended inside the arguments of `scroll_at`")
            || e.to_string().contains("finish reason"),
        "{e}"
    );

    // An error object in the stream.
    let mut errored: Vec<SseEvent> = computer_use_events().into_iter().take(1).collect();
    errored.push(SseEvent::data(&json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})));
    mock.push(Route::Gemini, Reply::Sse(errored));
    let e = last_error(collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await);
    assert!(
        matches!(
            &e,
            lumen_core::LumenError::ModelApi {
                kind: ModelErrorKind::Overloaded,
                ..
            }
        ),
        "{e:?}"
    );

    // 500 then success.
    mock.push(
        Route::Gemini,
        Reply::Status {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            retry_after: None,
            body:
                json!([{"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}])
                    .to_string(),
        },
    );
    mock.push(Route::Gemini, Reply::Sse(computer_use_events()));
    let items = collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await;
    assert!(matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))));

    // A malformed chunk.
    mock.push(
        Route::Gemini,
        Reply::Sse(vec![SseEvent::raw("{\"candidates\": [")]),
    );
    let e = last_error(collect_events(a.stream(&ctx(&[], &shot)).await.unwrap()).await);
    assert!(e.to_string().contains("malformed"), "{e}");
}

#[test]
fn google_keys_come_from_either_variable() {
    let env = |name: &str| (name == "GOOGLE_API_KEY").then(|| KEY.to_owned());
    let a = create_adapter_with_env(&format!("google/{MODEL}"), AdapterOptions::default(), env)
        .unwrap();
    assert_eq!(a.info().provider, "google");
    // `gemini/` names Google too, as the registry (and so an operator's
    // model list and the base-URL provider check) reads it: never a model
    // on an OpenAI-compatible server.
    let a = create_adapter_with_env(&format!("gemini/{MODEL}"), AdapterOptions::default(), env)
        .unwrap();
    assert_eq!(a.info().provider, "google");
    let e = create_adapter_with_env("google/x", AdapterOptions::default(), |_| None)
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("GEMINI_API_KEY or GOOGLE_API_KEY"),
        "{e}"
    );
}

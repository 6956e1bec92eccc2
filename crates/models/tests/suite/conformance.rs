//! "A real API would accept it", for every model family in the registry:
//! request bodies over multi-step histories (images, tool results with
//! errors, a compacted summary, thinking, safety acknowledgements, each
//! provider's own replayed turns) are checked against the official SDK's
//! request types and the registry's rules, streamed and not, with and
//! without thinking and a temperature.

use lumen_core::{
    AssistantTurn, ModelEvent, Screenshot, StepContext, ToolResult, WireRecord, WireScreenshot,
};
use lumen_models::anthropic::AnthropicAdapter;
use lumen_models::compatible::CompatibleAdapter;
use lumen_models::google::GoogleAdapter;
use lumen_models::openai::OpenAiAdapter;
use lumen_models::registry::{MODELS, request_violations};
use lumen_models::{AdapterOptions, ApiKey, BrowserOptIns, Effort, Provider, Tools};
use lumen_test_support::mock_provider::Route;
use lumen_test_support::mock_provider::conformance::schema_violations;
use serde_json::Value;

use super::{SYSTEM_PROMPT, shot_1280, three_step_history};

fn route(provider: Provider) -> Route {
    match provider {
        Provider::Anthropic => Route::AnthropicMessages,
        Provider::OpenAi => Route::OpenAiResponses,
        Provider::Google => Route::Gemini,
        Provider::Compatible => Route::ChatCompletions,
    }
}

/// The provider's own turn, as its stream parser records it (thinking with
/// signatures, encrypted reasoning, thought signatures, call ids).
fn native_turn(provider: Provider, shot: &Screenshot) -> AssistantTurn {
    let events = match provider {
        Provider::Anthropic => super::anthropic::computer_use_events(),
        Provider::OpenAi => super::openai::batched_events(),
        Provider::Google => super::google::computer_use_events(),
        Provider::Compatible => super::compatible::tool_call_events(),
    };
    let bytes: Vec<Vec<u8>> = events.iter().map(|e| e.to_wire().into_bytes()).collect();
    let items = lumen_models::decode_recording_blocking(provider, shot, bytes).expect("decodes");
    match items.into_iter().last() {
        Some(Ok(ModelEvent::Completed(response))) => response.turn,
        other => panic!("{provider:?}: no completed turn: {other:?}"),
    }
}

/// The three-step history, then the provider's own turn answered (the
/// first call failed, a safety check acknowledged) and a fresh screenshot.
fn history(provider: Provider, shot: &Screenshot) -> Vec<WireRecord> {
    let mut wire = three_step_history();
    let turn = native_turn(provider, shot);
    let results: Vec<WireRecord> = turn
        .calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            WireRecord::ToolResult(ToolResult {
                call_id: call.id.clone(),
                action: call.action.kind().into(),
                ok: i != 0,
                error: (i == 0).then(|| "nothing at that point".into()),
                hints: vec!["the page scrolled".into()],
                acknowledged_safety_checks: call
                    .safety_checks
                    .iter()
                    .map(|c| serde_json::json!({"id": c.id, "code": c.code, "message": c.message}))
                    .collect(),
                // A zoom's image rides on its result.
                image: (i == 1).then(|| shot.image.clone()),
                output: (i == 1).then(|| "- button \"Buy\" [@e4]".to_owned()),
                // Downloads as each call left them: failed (cancelled),
                // saved, still running.
                download: (i < 3).then(|| lumen_core::DownloadInfo {
                    url: "http://127.0.0.1/invoice.pdf".into(),
                    suggested_filename: "invoice.pdf".into(),
                    path: (i == 1).then(|| "/tmp/downloads/invoice.pdf".into()),
                    completed: i == 1,
                    failed: i == 0,
                    error: (i == 0).then(|| "the browser cancelled the download".into()),
                }),
            })
        })
        .collect();
    wire.push(WireRecord::Assistant(turn));
    wire.extend(results);
    // The tabs after the turn (the browser toolset reports them): one
    // opened since the model last heard.
    let tab = |id: &str, url: &str, followed| lumen_core::TabInfo {
        id: id.into(),
        url: url.into(),
        title: "Cart".into(),
        followed,
    };
    if let Some(WireRecord::Screenshot(first)) = wire
        .iter_mut()
        .find(|r| matches!(r, WireRecord::Screenshot(_)))
    {
        first.tabs = vec![tab("T1", "http://127.0.0.1/shop/", true)];
    }
    wire.push(WireRecord::Screenshot(WireScreenshot {
        step: 6,
        image: Some(shot.image.clone()),
        compressed: false,
        url: Some("http://127.0.0.1/shop/cart".into()),
        tabs: vec![
            tab("T1", "http://127.0.0.1/shop/cart", false),
            tab("T2", "http://127.0.0.1/help", true),
        ],
    }));
    wire
}

/// Every way an adapter is configured that changes the request.
fn variants() -> Vec<(&'static str, AdapterOptions)> {
    let base = AdapterOptions {
        api_key: Some(ApiKey::new("test-key-0123456789")),
        base_url: Some("http://127.0.0.1:9".into()),
        ..AdapterOptions::default()
    };
    vec![
        ("plain", base.clone()),
        (
            "small budget",
            AdapterOptions {
                thinking_budget: Some(512),
                ..base.clone()
            },
        ),
        (
            "large budget",
            AdapterOptions {
                thinking_budget: Some(16_000),
                ..base.clone()
            },
        ),
        (
            "effort max",
            AdapterOptions {
                effort: Some(Effort::Max),
                ..base.clone()
            },
        ),
        (
            "max images 1",
            AdapterOptions {
                max_images: Some(1),
                ..base.clone()
            },
        ),
        (
            "browser toolset",
            AdapterOptions {
                tools: Some(Tools::Browser),
                ..base.clone()
            },
        ),
        (
            "browser toolset with opt-ins",
            AdapterOptions {
                tools: Some(Tools::Browser),
                browser_opt_ins: BrowserOptIns {
                    javascript_exec: true,
                    file_upload: true,
                },
                ..base
            },
        ),
    ]
}

/// The request body an adapter of `provider` builds for `ctx`.
fn body(
    provider: Provider,
    model: &str,
    options: AdapterOptions,
    ctx: &StepContext<'_>,
    stream: bool,
) -> Value {
    match provider {
        Provider::Anthropic => AnthropicAdapter::new(model, options)
            .expect("adapter")
            .request_body(ctx, stream),
        Provider::OpenAi => OpenAiAdapter::new(model, options)
            .expect("adapter")
            .request_body(ctx, stream),
        Provider::Google => GoogleAdapter::new(model, options)
            .expect("adapter")
            .request_body(ctx),
        Provider::Compatible => CompatibleAdapter::new(model, options)
            .expect("adapter")
            .request_body(ctx, stream),
    }
}

fn violations(provider: Provider, body: &Value) -> Vec<String> {
    let mut found = schema_violations(route(provider), body);
    found.extend(request_violations(provider, body));
    found
}

#[test]
fn every_model_family_sends_requests_its_api_accepts() {
    let shot = shot_1280();
    let mut checked = 0;
    let mut failures = Vec::new();
    for spec in MODELS {
        let provider = spec.provider;
        let wire = history(provider, &shot);
        let model = match provider {
            Provider::Compatible => "qwen2.5-vl:7b",
            _ => spec.id,
        };
        for (variant, options) in variants() {
            // The browser toolset is Anthropic's alone.
            if options.tools == Some(Tools::Browser) && provider != Provider::Anthropic {
                continue;
            }
            for temperature in [None, Some(0.0), Some(0.7)] {
                for empty_history in [false, true] {
                    let ctx = StepContext {
                        step: 6,
                        max_steps: 30,
                        instruction: "buy two desk lamps",
                        system_prompt: SYSTEM_PROMPT,
                        screenshot: &shot,
                        wire: if empty_history { &[] } else { &wire },
                        state: None,
                        url: "http://127.0.0.1/shop/cart",
                        temperature,
                        cursor: None,
                    };
                    let stream = !empty_history;
                    let body = body(provider, model, options.clone(), &ctx, stream);
                    let found = violations(provider, &body);
                    checked += 1;
                    if variant.starts_with("browser toolset") {
                        // Read-only members on; the dangerous ones as chosen.
                        let configs = &body["tools"][0]["configs"];
                        let opted = variant.ends_with("opt-ins");
                        assert_eq!(configs["read_console"]["enabled"], true, "{configs}");
                        assert_eq!(configs["read_network"]["enabled"], true, "{configs}");
                        assert_eq!(configs["javascript_exec"]["enabled"], opted, "{configs}");
                        assert_eq!(configs["file_upload"]["enabled"], opted, "{configs}");
                    }
                    if variant.starts_with("browser toolset") && !empty_history {
                        let text = body.to_string();
                        assert!(
                            text.contains("\"browser_state\""),
                            "{model}: no browser_state"
                        );
                        assert!(text.contains("\"tab_opened\""), "{model}: no tab_opened");
                        for change in ["download_completed", "download_failed"] {
                            assert!(
                                text.contains(&format!("\"{change}\"")),
                                "{model}: no {change}"
                            );
                        }
                    }
                    if !found.is_empty() {
                        failures.push(format!(
                            "{model} [{variant}, temperature {temperature:?}, empty history \
                             {empty_history}]:\n  {}",
                            found.join("\n  ")
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 600, "{checked}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

//! Every fault the mock provider injects, against every adapter over real
//! HTTP: 429 with Retry-After, 500 and 529 (retried, then success),
//! persistent 529 (MAX_RETRIES_EXCEEDED), a disconnect mid-stream, a
//! malformed event, a stall (idle timeout) and an in-stream error event.

use std::sync::Arc;
use std::time::Duration;

use lumen_core::{ErrorCode, LumenError, ModelAdapter, ModelEvent, StepContext};
use lumen_models::stream::collect_events;
use lumen_models::{AdapterOptions, ApiKey, Deadlines, RetryPolicy, create_adapter_with_env};
use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::{MockProvider, Reply, Route, SseEvent};
use serde_json::json;

use super::shot_1280;

struct Case {
    model: &'static str,
    route: Route,
    base_path: &'static str,
    events: Vec<SseEvent>,
    /// How many leading events form a valid, unfinished prefix.
    head: usize,
    error_event: SseEvent,
    /// An event that carries nothing: Anthropic's `ping`, else a blank
    /// data line.
    keep_alive: SseEvent,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            model: "anthropic/claude-sonnet-4-6",
            route: Route::AnthropicMessages,
            base_path: "",
            events: super::anthropic::computer_use_events(),
            head: 9,
            error_event: SseEvent::typed(
                &json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
            ),
            keep_alive: SseEvent::typed(&json!({"type": "ping"})),
        },
        Case {
            model: "openai/gpt-5.4",
            route: Route::OpenAiResponses,
            base_path: "/v1",
            events: super::openai::batched_events(),
            head: 6,
            error_event: SseEvent::typed(
                &json!({"type": "error", "code": "server_error", "message": "The server had an error."}),
            ),
            keep_alive: SseEvent::raw(" "),
        },
        Case {
            model: "google/gemini-2.5-computer-use-preview-10-2025",
            route: Route::Gemini,
            base_path: "",
            events: super::google::computer_use_events(),
            head: 3,
            error_event: SseEvent::data(
                &json!({"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}),
            ),
            keep_alive: SseEvent::raw(" "),
        },
        Case {
            model: "compatible/qwen2.5-vl:7b",
            route: Route::ChatCompletions,
            base_path: "/v1",
            events: super::compatible::tool_call_events(),
            head: 5,
            error_event: SseEvent::data(
                &json!({"error": {"message": "model crashed", "code": 500}}),
            ),
            keep_alive: SseEvent::raw(" "),
        },
    ]
}

fn adapter(mock: &MockProvider, case: &Case) -> Arc<dyn ModelAdapter> {
    adapter_with(
        mock,
        case,
        Deadlines {
            idle: Duration::from_millis(500),
            ..Deadlines::default()
        },
    )
}

fn adapter_with(mock: &MockProvider, case: &Case, deadlines: Deadlines) -> Arc<dyn ModelAdapter> {
    let options = AdapterOptions {
        api_key: Some(ApiKey::new("test-key-0123456789")),
        base_url: Some(format!("{}{}", mock.base_url(), case.base_path)),
        retry: RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(20),
            max_wait: None,
        },
        deadlines,
        ..AdapterOptions::default()
    };
    create_adapter_with_env(case.model, options, |_| None).unwrap()
}

fn ctx(shot: &lumen_core::Screenshot) -> StepContext<'_> {
    StepContext {
        step: 0,
        max_steps: 10,
        instruction: "test",
        system_prompt: "Task: test.",
        screenshot: shot,
        wire: &[],
        state: None,
        url: "http://127.0.0.1/",
        temperature: None,
        cursor: None,
    }
}

/// The error a call ends with (before the stream or inside it).
async fn error_of(adapter: &dyn ModelAdapter) -> LumenError {
    let shot = shot_1280();
    match adapter.stream(&ctx(&shot)).await {
        Err(e) => e,
        Ok(stream) => match collect_events(stream).await.into_iter().last() {
            Some(Err(e)) => e,
            other => panic!("expected an error, got {other:?}"),
        },
    }
}

#[tokio::test]
async fn every_adapter_survives_every_fault() {
    for case in cases() {
        let name = case.model;
        let mock = lumen_test_support::mock_provider().await.unwrap();
        let a = adapter(&mock, &case);
        let shot = shot_1280();

        // 429 (Retry-After), 500, 529, then the answer.
        mock.push(
            case.route,
            Reply::error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "slow down",
                Some(0),
            ),
        );
        mock.push(
            case.route,
            Reply::error(StatusCode::INTERNAL_SERVER_ERROR, "api_error", "boom", None),
        );
        mock.push(
            case.route,
            Reply::error(
                StatusCode::from_u16(529).unwrap(),
                "overloaded_error",
                "Overloaded",
                None,
            ),
        );
        mock.push(case.route, Reply::Sse(case.events.clone()));
        let items = collect_events(a.stream(&ctx(&shot)).await.unwrap()).await;
        assert!(
            matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))),
            "{name}: {items:?}"
        );
        assert_eq!(mock.requests().len(), 4, "{name}");

        // Overloaded every time: give up with MAX_RETRIES_EXCEEDED.
        for _ in 0..4 {
            mock.push(
                case.route,
                Reply::error(
                    StatusCode::from_u16(529).unwrap(),
                    "overloaded_error",
                    "Overloaded",
                    Some(0),
                ),
            );
        }
        let e = error_of(a.as_ref()).await;
        assert_eq!(e.code(), ErrorCode::MaxRetriesExceeded, "{name}: {e}");

        let head: Vec<SseEvent> = case.events.iter().take(case.head).cloned().collect();

        // Disconnect mid-stream.
        mock.push(case.route, Reply::Disconnect(head.clone()));
        let e = error_of(a.as_ref()).await;
        assert_eq!(e.code(), ErrorCode::ModelApiError, "{name}: {e}");

        // A malformed event.
        let mut bad = head.clone();
        bad.push(SseEvent::raw("{\"truncated\": "));
        mock.push(case.route, Reply::Sse(bad));
        let e = error_of(a.as_ref()).await;
        assert!(e.to_string().contains("malformed"), "{name}: {e}");

        // A stall: the idle timeout ends the stream.
        mock.push(case.route, Reply::Stall(head.clone()));
        let e = error_of(a.as_ref()).await;
        assert!(e.to_string().contains("idle"), "{name}: {e}");

        // An error event inside the stream.
        let mut errored = head.clone();
        errored.push(case.error_event.clone());
        mock.push(case.route, Reply::Sse(errored));
        let e = error_of(a.as_ref()).await;
        assert!(
            matches!(
                e,
                LumenError::ModelApi {
                    retryable: false,
                    ..
                }
            ),
            "{name}: {e:?}"
        );

        // The scripted queue was used up exactly.
        assert_eq!(mock.pending(case.route), 0, "{name}");
        mock.shutdown().await;
    }
}

/// A `Retry-After` of any value is capped, never a panic; a server that
/// never answers meets the header deadline; a stream kept alive by pings
/// meets the overall deadline; a non-streamed call is bounded the same way.
#[tokio::test]
async fn deadlines_bound_every_call_and_retry_after_never_panics() {
    for case in cases() {
        let name = case.model;
        let mock = lumen_test_support::mock_provider().await.unwrap();
        let deadlines = Deadlines {
            headers: Duration::from_millis(150),
            idle: Duration::from_millis(300),
            overall: Duration::from_millis(800),
        };
        let a = adapter_with(&mock, &case, deadlines);
        let shot = shot_1280();

        // Absurd Retry-After values: waited for at most the policy's cap.
        for value in ["1e20", "inf", "-5", "NaN", "99999999999999999999"] {
            mock.push(
                case.route,
                Reply::Raw {
                    status: StatusCode::TOO_MANY_REQUESTS,
                    headers: vec![
                        ("retry-after".into(), value.into()),
                        ("content-type".into(), "application/json".into()),
                    ],
                    body: json!({"error": {"type": "rate_limit_error", "message": "slow"}})
                        .to_string(),
                },
            );
            mock.push(case.route, Reply::Sse(case.events.clone()));
            let items = collect_events(a.stream(&ctx(&shot)).await.unwrap()).await;
            assert!(
                matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))),
                "{name} with Retry-After {value}: {items:?}"
            );
        }

        // No headers at all, every attempt: a timeout per attempt, then the
        // retries run out.
        for _ in 0..4 {
            mock.push(case.route, Reply::Silent);
        }
        let started = std::time::Instant::now();
        let e = error_of(a.as_ref()).await;
        assert_eq!(e.code(), ErrorCode::MaxRetriesExceeded, "{name}: {e}");
        assert!(e.to_string().contains("response headers"), "{name}: {e}");
        assert!(started.elapsed() < Duration::from_secs(5), "{name}");

        // Pings every 50 ms keep the idle deadline happy, not the overall.
        let mut events = vec![case.events[0].clone()];
        events.extend(std::iter::repeat_n(case.keep_alive.clone(), 40));
        mock.push(
            case.route,
            Reply::Slow {
                events,
                pause: Duration::from_millis(50),
            },
        );
        let e = error_of(a.as_ref()).await;
        assert!(e.to_string().contains("overall deadline"), "{name}: {e}");

        // A non-streamed call (planner, verifier…) that never answers.
        for _ in 0..4 {
            mock.push(case.route, Reply::Silent);
        }
        let e = a.step(&ctx(&shot)).await.unwrap_err();
        assert!(
            matches!(
                e.code(),
                ErrorCode::MaxRetriesExceeded | ErrorCode::ModelApiError
            ),
            "{name}: {e}"
        );
        mock.shutdown().await;
    }
}

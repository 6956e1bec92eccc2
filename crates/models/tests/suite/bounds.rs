//! Hostile answers against every adapter over real HTTP: an SSE event that
//! never ends, an answer that never ends, a huge non-streamed answer (from
//! a raw TCP server in the test, since no real provider misbehaves on
//! cue), and tool calls whose arguments are over their cap or whose
//! Gemini partial-argument path is absurdly deep (from the mock provider).
//! Each is a typed outcome naming its cap, with bounded reading.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lumen_core::{Action, LumenError, ModelAdapter, ModelEvent, StepContext};
use lumen_models::limits::{MAX_SSE_EVENT_BYTES, MAX_TOOL_ARGUMENTS_BYTES};
use lumen_models::stream::collect_events;
use lumen_models::{AdapterOptions, ApiKey, Deadlines, RetryPolicy, create_adapter_with_env};
use lumen_test_support::mock_provider::{MockProvider, Reply, Route, SseEvent};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::shot_1280;

/// Model, path under the server's root, and mock route of each adapter.
const ADAPTERS: [(&str, &str, Route); 4] = [
    ("anthropic/claude-sonnet-4-6", "", Route::AnthropicMessages),
    ("openai/gpt-5.4", "/v1", Route::OpenAiResponses),
    (
        "google/gemini-2.5-computer-use-preview-10-2025",
        "",
        Route::Gemini,
    ),
    ("compatible/qwen2.5-vl:7b", "/v1", Route::ChatCompletions),
];

fn adapter(base_url: String, model: &str) -> Arc<dyn ModelAdapter> {
    let options = AdapterOptions {
        api_key: Some(ApiKey::new("test-key-0123456789")),
        base_url: Some(base_url),
        retry: RetryPolicy {
            max_retries: 0,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
            max_wait: None,
        },
        deadlines: Deadlines {
            headers: Duration::from_secs(20),
            idle: Duration::from_secs(5),
            overall: Duration::from_secs(60),
        },
        ..AdapterOptions::default()
    };
    create_adapter_with_env(model, options, |_| None).unwrap()
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

/// A one-connection HTTP server that answers any request with `head` and
/// then `chunk` over and over, up to `limit` bytes of body, and then holds
/// the connection open (so a client that reads without bound meets its
/// idle deadline instead of a cap). Returns its base URL and a count of
/// the body bytes the client accepted.
async fn hostile_server(head: String, chunk: Vec<u8>, limit: usize) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let written = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&written);
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        while count.load(Ordering::Relaxed) < limit {
            if socket.write_all(&chunk).await.is_err() {
                return;
            }
            count.fetch_add(chunk.len(), Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_secs(120)).await;
    });
    (url, written)
}

/// Reads one request: the head, then a `content-length` body.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut byte).await.unwrap();
        assert!(n > 0, "the client closed before its request");
        buf.extend_from_slice(&byte[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < head_end + length {
        let n = socket.read(&mut byte).await.unwrap();
        assert!(n > 0);
        buf.extend_from_slice(&byte[..n]);
    }
}

/// What the kernel may hold between the test server and the client
/// (send and receive buffers of a loopback connection, autotuned).
const SOCKET_SLACK: usize = 48 << 20;

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// The error a streamed call ends with.
async fn stream_error_of(adapter: &dyn ModelAdapter) -> LumenError {
    let shot = shot_1280();
    let stream = adapter.stream(&ctx(&shot)).await.unwrap();
    match collect_events(stream).await.into_iter().last() {
        Some(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// An event that never ends (a `data:` line with no end) fails every
/// adapter's stream with an error naming the cap, after reading little
/// more than the cap.
#[tokio::test]
async fn an_endless_sse_event_fails_every_stream_at_its_cap() {
    for (model, path, _) in ADAPTERS {
        let head = format!("{SSE_HEAD}data: ");
        let (url, written) = hostile_server(head, vec![b'a'; 64 << 10], 256 << 20).await;
        let a = adapter(format!("{url}{path}"), model);
        let e = stream_error_of(a.as_ref()).await.to_string();
        assert!(e.contains("MAX_SSE_EVENT_BYTES"), "{model}: {e}");
        assert!(e.contains("8 MiB"), "{model}: {e}");
        // What the server got out: the cap, plus what sat in socket
        // buffers (loopback buffers grow to tens of MiB), far from all.
        let sent = written.load(Ordering::Relaxed);
        assert!(sent < MAX_SSE_EVENT_BYTES + SOCKET_SLACK, "{model}: {sent}");
    }
}

/// Endless small events (comments, each a valid event) fail at the cap on
/// a whole streamed answer; the cap lives in the shared HTTP layer, so one
/// adapter shows it.
#[tokio::test]
async fn an_endless_answer_fails_at_its_cap() {
    let (model, path, _) = ADAPTERS[0];
    let chunk = ": keep-alive\n\n".repeat(4096).into_bytes();
    let (url, _) = hostile_server(SSE_HEAD.to_owned(), chunk, 256 << 20).await;
    let a = adapter(format!("{url}{path}"), model);
    let e = stream_error_of(a.as_ref()).await.to_string();
    assert!(e.contains("MAX_STREAMED_ANSWER_BYTES"), "{e}");
    assert!(e.contains("64 MiB"), "{e}");
}

/// A non-streamed answer (planner, verifier) over its cap fails with an
/// error naming it, without reading the rest.
#[tokio::test]
async fn a_huge_non_streamed_answer_fails_at_its_cap() {
    for (model, path, _) in ADAPTERS {
        let body_len = 256usize << 20;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {body_len}\r\n\r\n"
        );
        let (url, written) = hostile_server(head, vec![b' '; 64 << 10], body_len).await;
        let a = adapter(format!("{url}{path}"), model);
        let shot = shot_1280();
        let e = a.step(&ctx(&shot)).await.unwrap_err().to_string();
        assert!(e.contains("MAX_JSON_ANSWER_BYTES"), "{model}: {e}");
        assert!(e.contains("16 MiB"), "{model}: {e}");
        let sent = written.load(Ordering::Relaxed);
        assert!(sent < (16 << 20) + SOCKET_SLACK, "{model}: {sent}");
    }
}

/// `n` bytes of a text argument, in 64 KiB deltas.
fn pieces(n: usize) -> Vec<String> {
    let piece = "a".repeat(64 << 10);
    std::iter::repeat_n(piece, n.div_ceil(64 << 10)).collect()
}

/// Two tool calls per provider (Chat Completions for any other route): a `type` whose text (2 MiB) puts its
/// arguments over the cap, then a small click. Streamed in deltas where the
/// provider streams arguments, whole where it does not.
fn oversized_call_events(route: Route) -> Vec<SseEvent> {
    let big = 2 * MAX_TOOL_ARGUMENTS_BYTES;
    match route {
        Route::AnthropicMessages => {
            let ev = |v: Value| SseEvent::typed(&v);
            let mut events = vec![
                ev(
                    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
                ),
                ev(
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "computer", "input": {}}}),
                ),
                ev(
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"action\": \"type\", \"text\": \""}}),
                ),
            ];
            for p in pieces(big) {
                events.push(ev(
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}),
                ));
            }
            events.extend([
                ev(
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "\"}"}}),
                ),
                ev(json!({"type": "content_block_stop", "index": 0})),
                ev(
                    json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "computer", "input": {"action": "left_click", "coordinate": [10, 20]}}}),
                ),
                ev(json!({"type": "content_block_stop", "index": 1})),
                ev(
                    json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
                ),
                ev(json!({"type": "message_stop"})),
            ]);
            events
        }
        Route::OpenAiResponses => {
            let ev = |v: Value| SseEvent::typed(&v);
            let text = "a".repeat(big);
            vec![
                ev(
                    json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
                ),
                ev(
                    json!({"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": {"type": "computer_call", "id": "cu_1", "call_id": "call_1", "status": "completed", "actions": [{"type": "type", "text": text}]}}),
                ),
                ev(
                    json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 1, "item": {"type": "computer_call", "id": "cu_2", "call_id": "call_2", "status": "completed", "actions": [{"type": "click", "x": 10, "y": 20, "button": "left"}]}}),
                ),
                ev(
                    json!({"type": "response.completed", "sequence_number": 3, "response": {"id": "resp_1", "status": "completed", "output": [], "usage": {"input_tokens": 3, "output_tokens": 1}}}),
                ),
            ]
        }
        Route::Gemini => {
            let chunk = |parts: Value, finish: Option<&str>| {
                let mut candidate =
                    json!({"content": {"role": "model", "parts": parts}, "index": 0});
                if let Some(f) = finish {
                    candidate["finishReason"] = json!(f);
                }
                SseEvent::data(&json!({"candidates": [candidate], "responseId": "resp-g1"}))
            };
            let mut events = vec![chunk(
                json!([{"functionCall": {"name": "type_text_at", "args": {"x": 1, "y": 2}, "willContinue": true}}]),
                None,
            )];
            for p in pieces(big) {
                events.push(chunk(
                    json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.text", "stringValue": p, "willContinue": true}], "willContinue": true}}]),
                    None,
                ));
            }
            events.extend([
                chunk(json!([{"functionCall": {}}]), None),
                chunk(
                    json!([{"functionCall": {"name": "click_at", "args": {"x": 10, "y": 20}}}]),
                    Some("STOP"),
                ),
            ]);
            events
        }
        _ => {
            let chunk = |delta: Value, finish: Option<&str>| {
                SseEvent::data(
                    &json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
                )
            };
            let mut events = vec![chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "type", "arguments": "{\"text\": \""}}]}),
                None,
            )];
            for p in pieces(big) {
                events.push(chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                    None,
                ));
            }
            events.extend([
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"}"}}]}),
                    None,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "click", "arguments": "{\"x\": 10, \"y\": 20}"}}]}),
                    None,
                ),
                chunk(json!({}), Some("tool_calls")),
                SseEvent::raw("[DONE]"),
            ]);
            events
        }
    }
}

/// The start of the actions' debug text (they may hold megabytes).
fn preview(actions: &[Action]) -> String {
    format!("{actions:?}").chars().take(500).collect()
}

/// The actions of a stream that must complete.
async fn actions_of(mock: &MockProvider, model: &str, path: &str) -> Vec<Action> {
    let a = adapter(format!("{}{path}", mock.base_url()), model);
    let shot = shot_1280();
    let items = collect_events(a.stream(&ctx(&shot)).await.unwrap()).await;
    assert!(
        matches!(items.last(), Some(Ok(ModelEvent::Completed(_)))),
        "{model}: {:?}",
        items.last()
    );
    items
        .into_iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::Action(call)) => Some(call.action),
            _ => None,
        })
        .collect()
}

/// A tool call over the arguments cap becomes a failed call the model
/// reads (naming the cap), the stream goes on, and the next call works.
#[tokio::test]
async fn a_tool_call_over_its_cap_is_a_failed_call_and_the_stream_goes_on() {
    for (model, path, route) in ADAPTERS {
        let mock = lumen_test_support::mock_provider().await.unwrap();
        mock.push(route, Reply::Sse(oversized_call_events(route)));
        let actions = actions_of(&mock, model, path).await;
        let [Action::Invalid { error, input, .. }, Action::Click { .. }] = actions.as_slice()
        else {
            panic!("{model}: {}", preview(&actions));
        };
        assert!(
            error.contains("MAX_TOOL_ARGUMENTS_BYTES"),
            "{model}: {error}"
        );
        assert!(error.contains("1 MiB"), "{model}: {error}");
        // The record keeps a short preview, not the megabytes.
        assert!(input.to_string().len() < 1024, "{model}");
        mock.shutdown().await;
    }
}

/// A Gemini partial-argument path tens of thousands of steps deep (which
/// recursed once per step and overflowed the stack) is a failed call
/// naming the depth cap; an index past the bound is one too.
#[tokio::test]
async fn a_deep_gemini_partial_argument_path_is_a_failed_call() {
    let (model, path, route) = ADAPTERS[2];
    let deep = format!("${}", ".a".repeat(200_000));
    let chunk = |parts: Value, finish: Option<&str>| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        SseEvent::data(&json!({"candidates": [candidate], "responseId": "resp-g1"}))
    };
    for (bad_path, cap) in [
        (deep, "MAX_PARTIAL_ARG_PATH_DEPTH"),
        ("$.x[99999999999]".to_owned(), "below 10000"),
    ] {
        let mock = lumen_test_support::mock_provider().await.unwrap();
        let events = vec![
            chunk(
                json!([{"functionCall": {"name": "type_text_at", "willContinue": true}}]),
                None,
            ),
            chunk(
                json!([{"functionCall": {"partialArgs": [{"jsonPath": bad_path, "stringValue": "x"}], "willContinue": true}}]),
                None,
            ),
            chunk(json!([{"functionCall": {}}]), None),
            chunk(
                json!([{"functionCall": {"name": "click_at", "args": {"x": 10, "y": 20}}}]),
                Some("STOP"),
            ),
        ];
        mock.push(route, Reply::Sse(events));
        let actions = actions_of(&mock, model, path).await;
        let [Action::Invalid { error, .. }, Action::Click { .. }] = actions.as_slice() else {
            panic!("{cap}: {}", preview(&actions));
        };
        assert!(error.contains(cap), "{error}");
        mock.shutdown().await;
    }
}

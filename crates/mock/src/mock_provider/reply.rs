//! Scripted answers of the mock provider, faults included.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::Response;
use futures::StreamExt as _;

/// One server-sent event to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name (Anthropic and OpenAI name their events; Gemini
    /// and Chat Completions do not).
    pub event: Option<String>,
    /// The `data:` payload, sent as is (one line per `\n`).
    pub data: String,
}

impl SseEvent {
    /// A `data:`-only event carrying JSON.
    pub fn data(json: &serde_json::Value) -> Self {
        Self {
            event: None,
            data: json.to_string(),
        }
    }

    /// An event named after the JSON's `type` field, as Anthropic and OpenAI
    /// Responses send them.
    pub fn typed(json: &serde_json::Value) -> Self {
        Self {
            event: json.get("type").and_then(|t| t.as_str()).map(str::to_owned),
            data: json.to_string(),
        }
    }

    /// A `data:` event with a raw (possibly invalid) payload.
    pub fn raw(data: impl Into<String>) -> Self {
        Self {
            event: None,
            data: data.into(),
        }
    }

    /// The event's bytes, ending with the blank line that dispatches it.
    pub fn to_wire(&self) -> String {
        let mut out = String::new();
        if let Some(name) = &self.event {
            out.push_str(&format!("event: {name}\n"));
        }
        for line in self.data.split('\n') {
            out.push_str(&format!("data: {line}\n"));
        }
        out.push('\n');
        out
    }
}

/// A scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream` with these events, then the end of the body.
    Sse(Vec<SseEvent>),
    /// A `200` body sent as is in chunks of the given sizes (cycled), for
    /// chunk-splitting tests over real HTTP.
    SseChunked {
        /// The whole body.
        body: String,
        /// Chunk sizes, cycled.
        sizes: Vec<usize>,
    },
    /// A JSON answer with a status.
    Json(StatusCode, serde_json::Value),
    /// An error status, with `Retry-After` seconds when given.
    Status {
        /// The status (429, 500, 529…).
        status: StatusCode,
        /// `Retry-After`, seconds.
        retry_after: Option<u64>,
        /// The body (a provider-style JSON error, usually).
        body: String,
    },
    /// Sends these events, then drops the connection mid-stream.
    Disconnect(Vec<SseEvent>),
    /// Sends these events, then neither sends nor closes (an idle stream).
    Stall(Vec<SseEvent>),
    /// Sends each event after a pause (a slow but live stream).
    Slow {
        /// The events.
        events: Vec<SseEvent>,
        /// Pause before each.
        pause: Duration,
    },
    /// A status with headers exactly as given (e.g. a `Retry-After` that is
    /// not a small whole number) and a body.
    Raw {
        /// The status.
        status: StatusCode,
        /// Headers, sent as given.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// Accepts the request and never answers: no status line, no headers.
    Silent,
}

impl Reply {
    /// A provider-style error answer: `{"type":"error","error":{"type":…,
    /// "message":…}}` with the status.
    pub fn error(status: StatusCode, kind: &str, message: &str, retry_after: Option<u64>) -> Self {
        Reply::Status {
            status,
            retry_after,
            body: serde_json::json!({
                "type": "error",
                "error": {"type": kind, "message": message},
            })
            .to_string(),
        }
    }

    pub(super) async fn into_response(self) -> Response {
        let sse = |body: Body| {
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(body)
                .unwrap_or_default()
        };
        match self {
            Reply::Sse(events) => {
                let body: String = events.iter().map(SseEvent::to_wire).collect();
                sse(Body::from(body))
            }
            Reply::SseChunked { body, sizes } => {
                let bytes = body.into_bytes();
                let mut chunks = Vec::new();
                let mut at = 0;
                let mut i = 0;
                while at < bytes.len() {
                    let size = sizes
                        .get(i % sizes.len().max(1))
                        .copied()
                        .unwrap_or(1)
                        .max(1);
                    let end = (at + size).min(bytes.len());
                    chunks.push(Ok::<_, Infallible>(Bytes::copy_from_slice(&bytes[at..end])));
                    at = end;
                    i += 1;
                }
                sse(Body::from_stream(futures::stream::iter(chunks)))
            }
            Reply::Json(status, value) => Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(value.to_string()))
                .unwrap_or_default(),
            Reply::Status {
                status,
                retry_after,
                body,
            } => {
                let mut builder = Response::builder()
                    .status(status)
                    .header("content-type", "application/json");
                if let Some(secs) = retry_after {
                    builder = builder.header("retry-after", secs.to_string());
                }
                builder.body(Body::from(body)).unwrap_or_default()
            }
            Reply::Disconnect(events) => {
                let head = futures::stream::iter(
                    events
                        .into_iter()
                        .map(|e| Ok::<_, std::io::Error>(Bytes::from(e.to_wire()))),
                );
                // An error item makes hyper abort the connection without
                // finishing the chunked body: a real mid-stream disconnect.
                let tail = futures::stream::once(async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "mock provider: scripted disconnect",
                    ))
                });
                sse(Body::from_stream(head.chain(tail)))
            }
            Reply::Stall(events) => {
                let head = futures::stream::iter(
                    events
                        .into_iter()
                        .map(|e| Ok::<_, Infallible>(Bytes::from(e.to_wire()))),
                );
                sse(Body::from_stream(head.chain(futures::stream::pending())))
            }
            Reply::Slow { events, pause } => {
                let stream = futures::stream::iter(events).then(move |e| async move {
                    tokio::time::sleep(pause).await;
                    Ok::<_, Infallible>(Bytes::from(e.to_wire()))
                });
                sse(Body::from_stream(stream))
            }
            Reply::Raw {
                status,
                headers,
                body,
            } => {
                let mut builder = Response::builder().status(status);
                for (name, value) in headers {
                    builder = builder.header(name, value);
                }
                builder.body(Body::from(body)).unwrap_or_default()
            }
            Reply::Silent => futures::future::pending().await,
        }
    }
}

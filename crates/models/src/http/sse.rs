//! Server-sent events: framing a byte stream (live or recorded) into
//! events, with the line-ending quirks real servers have.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use eventsource_stream::Eventsource as _;
use futures::{Stream, StreamExt as _};
use lumen_core::Result;

use super::client::stream_error;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (`message` when the server sent none).
    pub event: String,
    /// The `data:` payload (lines joined with `\n`).
    pub data: String,
}

/// A stream of SSE events or typed errors.
pub(crate) type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent>> + Send>>;

/// A transport failure inside the byte stream.
#[derive(Debug)]
pub(crate) struct ApiFailure {
    pub(crate) provider: &'static str,
    pub(crate) message: String,
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.provider, self.message)
    }
}

impl std::error::Error for ApiFailure {}

/// Parses a byte stream as SSE. Used by the live client and, over
/// in-memory chunks, by the tests and `cargo xtask decode-stream`.
pub(crate) fn sse_events<S, B>(provider: &'static str, bytes: S) -> SseStream
where
    S: Stream<Item = std::result::Result<B, ApiFailure>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    // A CR at the end of one chunk and the LF at the start of the next are
    // one line ending; the SSE parser would see two (and end the event
    // early), so CRLF is folded to LF before it.
    let mut pending_cr = false;
    let last_was_newline = Arc::new(AtomicBool::new(false));
    let last = Arc::clone(&last_was_newline);
    let folded = bytes.map(move |chunk| {
        chunk.map(|b| {
            if let Some(&byte) = b.as_ref().last() {
                last.store(byte == b'\n' || byte == b'\r', Ordering::Relaxed);
            }
            let b = b.as_ref();
            let mut out = Vec::with_capacity(b.len() + 1);
            let mut i = 0;
            if pending_cr {
                out.push(b'\n');
                if b.first() == Some(&b'\n') {
                    i = 1;
                }
                pending_cr = false;
            }
            while i < b.len() {
                match b[i] {
                    b'\r' if i + 1 == b.len() => pending_cr = true,
                    b'\r' if b[i + 1] == b'\n' => {
                        out.push(b'\n');
                        i += 1;
                    }
                    b'\r' => out.push(b'\n'),
                    c => out.push(c),
                }
                i += 1;
            }
            out
        })
    });
    // At a clean end of the body, a last event whose lines are complete but
    // that misses its closing blank line is still dispatched (recorded
    // streams often lose the final newline); a half-sent line is not.
    let end = futures::stream::once(async move {
        let tail: &[u8] = if last_was_newline.load(Ordering::Relaxed) {
            b"\n"
        } else {
            b""
        };
        Ok::<_, ApiFailure>(tail.to_vec())
    });
    let events = folded.chain(end).eventsource().map(move |item| match item {
        Ok(ev) => Ok(SseEvent {
            event: if ev.event.is_empty() {
                "message".to_owned()
            } else {
                ev.event
            },
            data: ev.data,
        }),
        Err(eventsource_stream::EventStreamError::Transport(e)) => {
            Err(stream_error(provider, e.message))
        }
        Err(e) => Err(stream_error(
            provider,
            format!("malformed event stream: {e}"),
        )),
    });
    Box::pin(events)
}

/// Re-frames a recorded stream into SSE bytes: raw SSE is returned as is;
/// a file of one JSON payload per line becomes `data: <line>\n\n` events.
pub fn reframe_recording(input: &str) -> String {
    let first = input.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let is_sse = ["data:", "event:", "id:", ":", "retry:"]
        .iter()
        .any(|p| first.starts_with(p));
    if is_sse {
        return input.to_owned();
    }
    let mut out = String::with_capacity(input.len() + input.lines().count() * 8);
    for line in input.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        out.push_str("data: ");
        out.push_str(line);
        out.push_str("\n\n");
    }
    out
}

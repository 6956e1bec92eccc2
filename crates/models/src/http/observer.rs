//! The wire observer: what the HTTP layer saw of each model call (requests
//! with secret headers masked, answer bytes as received), for recording
//! provider streams.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// What the HTTP layer saw of one model call, handed to a [`WireObserver`]
/// as it happens.
#[derive(Debug)]
#[non_exhaustive]
pub enum WireEvent<'a> {
    /// A request is about to be sent; a retried call sends (and reports)
    /// one per attempt.
    Request {
        /// Identifies the call in the events that follow; unique within the
        /// process, counting from 1.
        call: u64,
        /// 0 for the first attempt, then 1, 2, … for retries.
        attempt: u32,
        /// The provider's name (`anthropic`, `openai`, `google`,
        /// `compatible`).
        provider: &'a str,
        /// The URL, with the API key removed should it appear in it.
        url: &'a str,
        /// The headers Lumen sets, in order, plus `content-type`; the value
        /// of every secret header (`authorization`, `x-api-key`,
        /// `x-goog-api-key`, `api-key`) is `[redacted]`.
        headers: &'a [(&'a str, String)],
        /// The JSON body, exactly as sent (screenshots included).
        body: &'a serde_json::Value,
        /// Whether the answer is read as server-sent events.
        stream: bool,
    },
    /// The status line and headers of the answer to an attempt arrived.
    Response {
        /// The call (see [`WireEvent::Request`]).
        call: u64,
        /// The attempt this answers.
        attempt: u32,
        /// The HTTP status.
        status: u16,
        /// The response headers as received, in order (values that are not
        /// text are shown lossily).
        headers: &'a [(String, String)],
    },
    /// Bytes of the answer's body, exactly as received, in arrival order
    /// (an error answer's body comes whole, in one piece).
    Body {
        /// The call.
        call: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// The body ended: cleanly (`error` is `None`) or with a transport
    /// error. A stream dropped before its end reports no `End`.
    End {
        /// The call.
        call: u64,
        /// Why the body stopped early, if it did.
        error: Option<&'a str>,
    },
}

/// A callback that sees the raw traffic of an adapter: requests (keys
/// masked) and answer bytes as received. Cheap to clone; called on the
/// task that makes the request, so it must be quick and must not block.
#[derive(Clone)]
pub struct WireObserver(Arc<dyn Fn(&WireEvent<'_>) + Send + Sync>);

impl WireObserver {
    /// Wraps a callback.
    pub fn new(f: impl Fn(&WireEvent<'_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub(super) fn see(&self, event: &WireEvent<'_>) {
        (self.0)(event);
    }
}

impl fmt::Debug for WireObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WireObserver(..)")
    }
}

/// Numbers calls across every adapter of the process.
pub(super) static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

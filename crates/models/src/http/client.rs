//! The client every adapter owns: one `reqwest` client, JSON and SSE
//! requests, retries with backoff and jitter before the first byte of an
//! answer, deadlines, and the mapping from HTTP failures to typed errors.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use futures::StreamExt as _;
use lumen_core::{LumenError, ModelErrorKind, ModelNotice, NoticeSink, NoticeSlot, Result};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::observer::{NEXT_CALL, WireEvent, WireObserver};
use super::sse::{ApiFailure, SseStream, sse_events};
use crate::limits::{MAX_ERROR_BODY_BYTES, MAX_JSON_ANSWER_BYTES, size};

/// How an adapter retries transient failures (429, 5xx, 529, connection
/// errors) before the first byte of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts).
    pub max_retries: u32,
    /// Delay before the first retry; doubles each time, with full jitter.
    pub base_delay: Duration,
    /// Upper bound of any single wait, including a provider's Retry-After.
    pub max_delay: Duration,
    /// Upper bound of all waits of one call together (`--max-wait`): a
    /// retry whose wait would pass it is not made. `None`: only the
    /// call's overall deadline bounds them.
    pub max_wait: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            max_wait: None,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0-based): the provider's
    /// Retry-After when it sent one, else exponential backoff with full
    /// jitter; never more than `max_delay`.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.min(16)))
            .min(self.max_delay);
        // Full jitter: uniform in [exp/2, exp], so concurrent clients spread
        // out but a retry never comes back immediately.
        let half = exp / 2;
        let jitter_ms = fastrand::u64(0..=half.as_millis().min(u64::MAX as u128) as u64);
        half + Duration::from_millis(jitter_ms)
    }
}

/// An API key that never shows up in `Debug`, `Display` or errors.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for a request header. Never log the result.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// Removes the key from a text (a provider may echo it back in an error).
    pub(crate) fn scrub(&self, text: &str) -> String {
        if self.0.len() >= 8 {
            text.replace(&self.0, "[redacted]")
        } else {
            text.to_owned()
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

static TLS_PROVIDER: Once = Once::new();

/// Installs rustls' ring provider once per process (reqwest is built with
/// `rustls-no-provider`, and building a client without a provider fails).
/// Call it before building any other reqwest client in the process (the
/// telemetry exporter's, say).
pub fn install_tls_provider() {
    TLS_PROVIDER.call_once(|| {
        // Err means another crate installed a provider first: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The HTTP client an adapter owns.
#[derive(Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    provider: &'static str,
    key: ApiKey,
    retry: RetryPolicy,
    deadlines: Deadlines,
    observer: Option<WireObserver>,
    /// Where waits before retries are told (the loop sets it per run).
    notices: Arc<NoticeSlot>,
}

/// How long a model call may take. Every call has all three, streamed or
/// not: the planner, verifier, confidence gate and summaries use
/// non-streamed calls and are bounded the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// From sending a request to its response headers, per attempt. A
    /// non-streamed answer's headers come when the whole answer is ready,
    /// so this also bounds a non-streamed generation.
    pub headers: Duration,
    /// How long a stream may stay silent. Keep-alive pings count as
    /// traffic here, and only here.
    pub idle: Duration,
    /// The whole call, retries and waits included, until the last byte.
    /// Nothing extends it, pings included.
    pub overall: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            headers: Duration::from_secs(180),
            idle: Duration::from_secs(90),
            overall: Duration::from_secs(600),
        }
    }
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http")
            .field("provider", &self.provider)
            .field("retry", &self.retry)
            .field("deadlines", &self.deadlines)
            .field("observed", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

impl Http {
    pub(crate) fn new(
        provider: &'static str,
        key: ApiKey,
        retry: RetryPolicy,
        deadlines: Deadlines,
        connect_timeout: Duration,
    ) -> Result<Self> {
        install_tls_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .build()
            .map_err(|e| LumenError::config("http client", e.to_string()))?;
        Ok(Self {
            client,
            provider,
            key,
            retry,
            deadlines,
            observer: None,
            notices: Arc::default(),
        })
    }

    /// Tells waits before retries to `sink` (`None`: to nobody).
    pub(crate) fn set_notices(&self, sink: Option<NoticeSink>) {
        self.notices.set(sink);
    }

    /// Reports this client's traffic to `observer` (none: no reporting).
    pub(crate) fn observed(mut self, observer: Option<WireObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// POSTs `body` and returns the JSON answer, retrying transient failures.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &serde_json::Value,
    ) -> Result<serde_json::Value> {
        let (call, response, deadline) = self.send_with_retry(url, headers, body, false).await?;
        let status = response.status().as_u16();
        let read = read_capped(response, MAX_JSON_ANSWER_BYTES);
        let text = match tokio::time::timeout_at(deadline, read).await {
            Ok(Ok((text, false))) => text,
            Ok(Ok((text, true))) => {
                self.see_body(call, text.as_bytes());
                let error = self.api_error(
                    Some(status),
                    ModelErrorKind::Stream,
                    false,
                    format!(
                        "the answer is over the {} cap on a non-streamed answer \
                         (MAX_JSON_ANSWER_BYTES)",
                        size(MAX_JSON_ANSWER_BYTES)
                    ),
                    None,
                    None,
                );
                self.see_end(call, Some(&error.to_string()));
                return Err(error);
            }
            Ok(Err(e)) => {
                let error = self.transport_error(&e, false);
                self.see_end(call, Some(&error.to_string()));
                return Err(error);
            }
            Err(_) => {
                let error = self.overall_deadline_error();
                self.see_end(call, Some(&error.to_string()));
                return Err(error);
            }
        };
        self.see_body(call, text.as_bytes());
        self.see_end(call, None);
        serde_json::from_str(&text).map_err(|e| {
            self.api_error(
                Some(status),
                ModelErrorKind::Stream,
                false,
                format!("the answer is not JSON: {e}"),
                Some(text),
                None,
            )
        })
    }

    /// POSTs `body` and returns the answer as SSE events. Each event must
    /// arrive within the idle deadline, and the last one within the overall
    /// deadline, or the stream yields an error.
    pub(crate) async fn post_sse(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &serde_json::Value,
    ) -> Result<SseStream> {
        let (call, response, deadline) = self.send_with_retry(url, headers, body, true).await?;
        let provider = self.provider;
        // The observer sees each chunk, then one `End`: the first transport
        // error, or a clean end once the body is exhausted.
        let observer = self.observer.clone();
        let ended = Arc::new(AtomicBool::new(false));
        let ended_early = Arc::clone(&ended);
        let bytes = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| ApiFailure {
                provider,
                message: format!("connection lost mid-stream: {e}"),
            });
            if let Some(o) = &observer {
                match &chunk {
                    Ok(bytes) => o.see(&WireEvent::Body { call, bytes }),
                    Err(e) if !ended_early.swap(true, Ordering::Relaxed) => {
                        o.see(&WireEvent::End {
                            call,
                            error: Some(&e.message),
                        })
                    }
                    Err(_) => {}
                }
            }
            chunk
        });
        let observer = self.observer.clone();
        let end = futures::stream::once(async move {
            if let Some(o) = &observer
                && !ended.swap(true, Ordering::Relaxed)
            {
                o.see(&WireEvent::End { call, error: None });
            }
        })
        .filter_map(|()| async { None });
        let bytes = bytes.chain(end);
        Ok(with_deadlines(
            sse_events(provider, bytes),
            provider,
            self.deadlines,
            deadline,
        ))
    }

    /// Sends until an attempt succeeds or retrying cannot help; returns the
    /// call's number (for the observer), the answer and the instant by
    /// which its body must be complete (the overall deadline).
    async fn send_with_retry(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &serde_json::Value,
        stream: bool,
    ) -> Result<(u64, reqwest::Response, tokio::time::Instant)> {
        let header_map = self.header_map(headers)?;
        let call = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + self.deadlines.overall;
        let mut attempt: u32 = 0;
        let mut waited = Duration::ZERO;
        loop {
            if let Some(o) = &self.observer {
                let mut shown: Vec<(&str, String)> = headers
                    .iter()
                    .map(|(name, value)| {
                        let value = if is_secret_header(name) {
                            "[redacted]".to_owned()
                        } else {
                            self.key.scrub(value)
                        };
                        (*name, value)
                    })
                    .collect();
                shown.push(("content-type", "application/json".to_owned()));
                o.see(&WireEvent::Request {
                    call,
                    attempt,
                    provider: self.provider,
                    url: &self.key.scrub(url),
                    headers: &shown,
                    body,
                    stream,
                });
            }
            let send = self
                .client
                .post(url)
                .headers(header_map.clone())
                .json(body)
                .send();
            let headers_by = (tokio::time::Instant::now() + self.deadlines.headers).min(deadline);
            let result = match tokio::time::timeout_at(headers_by, send).await {
                Ok(result) => result,
                Err(_) if headers_by >= deadline => {
                    let error = self.overall_deadline_error();
                    self.see_end(call, Some(&error.to_string()));
                    return Err(error);
                }
                Err(_) => {
                    let error = self.api_error(
                        None,
                        ModelErrorKind::Timeout,
                        true,
                        format!(
                            "no response headers within {:.0}s",
                            self.deadlines.headers.as_secs_f64()
                        ),
                        None,
                        None,
                    );
                    self.see_end(call, Some(&error.to_string()));
                    if attempt >= self.retry.max_retries {
                        return Err(LumenError::MaxRetriesExceeded {
                            attempts: attempt + 1,
                            last: Box::new(error),
                        });
                    }
                    attempt += 1;
                    continue;
                }
            };
            if let (Some(o), Ok(response)) = (&self.observer, &result) {
                let headers: Vec<(String, String)> = response
                    .headers()
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().to_owned(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect();
                o.see(&WireEvent::Response {
                    call,
                    attempt,
                    status: response.status().as_u16(),
                    headers: &headers,
                });
            }
            let error = match result {
                Ok(response) if response.status().is_success() => {
                    return Ok((call, response, deadline));
                }
                Ok(response) => self.status_error(call, response).await,
                Err(e) => {
                    let error = self.transport_error(&e, true);
                    self.see_end(call, Some(&error.to_string()));
                    error
                }
            };
            if !error.is_retryable() {
                return Err(error);
            }
            if attempt >= self.retry.max_retries {
                return Err(LumenError::MaxRetriesExceeded {
                    attempts: attempt + 1,
                    last: Box::new(error),
                });
            }
            let retry_after = match &error {
                LumenError::ModelApi { retry_after, .. } => *retry_after,
                _ => None,
            };
            let wait = self.retry.delay(attempt, retry_after);
            let over_budget = self.retry.max_wait.is_some_and(|max| waited + wait > max);
            if over_budget || tokio::time::Instant::now() + wait >= deadline {
                // Waiting would pass the overall deadline or the wait
                // budget: give up now, with the error that made us wait.
                return Err(LumenError::MaxRetriesExceeded {
                    attempts: attempt + 1,
                    last: Box::new(error),
                });
            }
            waited += wait;
            self.notices.tell(ModelNotice::Waiting {
                provider: self.provider.to_owned(),
                attempt: attempt + 1,
                wait_ms: wait.as_millis().min(u64::MAX as u128) as u64,
                reason: error.to_string(),
            });
            tracing::warn!(
                provider = self.provider,
                attempt = attempt + 1,
                wait_ms = wait.as_millis() as u64,
                error = %error,
                "model request failed; retrying"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    fn header_map(&self, headers: &[(&'static str, String)]) -> Result<HeaderMap> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                // Never echo the value: it may be the key.
                LumenError::config(
                    format!("{} header `{name}`", self.provider),
                    "the value holds characters not allowed in an HTTP header",
                )
            })?;
            if is_secret_header(name) {
                value.set_sensitive(true);
            }
            map.insert(HeaderName::from_static(name), value);
        }
        Ok(map)
    }

    fn see_body(&self, call: u64, bytes: &[u8]) {
        if let Some(o) = &self.observer {
            o.see(&WireEvent::Body { call, bytes });
        }
    }

    fn see_end(&self, call: u64, error: Option<&str>) {
        if let Some(o) = &self.observer {
            o.see(&WireEvent::End { call, error });
        }
    }

    async fn status_error(&self, call: u64, response: reqwest::Response) -> LumenError {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        // Only the start of an error body is read: the message is near it.
        let (text, _) = read_capped(response, MAX_ERROR_BODY_BYTES)
            .await
            .unwrap_or_default();
        self.see_body(call, text.as_bytes());
        self.see_end(call, None);
        let text = self.key.scrub(&text);
        let message = provider_message(&text).unwrap_or_else(|| {
            if text.trim().is_empty() {
                format!("HTTP {status} with an empty body")
            } else {
                truncate(text.trim(), 500)
            }
        });
        let (kind, retryable) = classify(status, &message);
        self.api_error(
            Some(status),
            kind,
            retryable,
            message,
            Some(text),
            retry_after,
        )
    }

    fn transport_error(&self, e: &reqwest::Error, before_answer: bool) -> LumenError {
        // reqwest errors carry the URL, never headers; scrub anyway in case a
        // key was put in the query string (Gemini accepts `?key=`).
        let message = self.key.scrub(&error_chain(e));
        self.api_error(
            None,
            ModelErrorKind::Transport,
            before_answer,
            message,
            None,
            None,
        )
    }

    fn overall_deadline_error(&self) -> LumenError {
        overall_deadline_error(self.provider, self.deadlines.overall)
    }

    fn api_error(
        &self,
        status: Option<u16>,
        kind: ModelErrorKind,
        retryable: bool,
        message: String,
        body: Option<String>,
        retry_after: Option<Duration>,
    ) -> LumenError {
        LumenError::ModelApi {
            provider: self.provider.to_owned(),
            status,
            kind,
            retryable,
            message,
            body,
            retry_after,
        }
    }
}

/// Reads a body up to `cap` bytes (as text, lossily); `true` when there
/// was more, which is left unread.
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> std::result::Result<(String, bool), reqwest::Error> {
    let mut body = Vec::new();
    let mut over = false;
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            over = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let text = match String::from_utf8(body) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok((text, over))
}

fn is_secret_header(name: &str) -> bool {
    matches!(
        name,
        "authorization" | "x-api-key" | "x-goog-api-key" | "api-key"
    )
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `Retry-After` in seconds (or `retry-after-ms`, which OpenAI and Anthropic
/// also send). HTTP-date values are ignored (backoff applies instead).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && let Some(wait) = seconds(ms / 1000.0)
    {
        return Some(wait);
    }
    seconds(get("retry-after")?.trim().parse::<f64>().ok()?)
}

/// The longest Retry-After taken at its word; [`RetryPolicy::max_delay`]
/// caps it further. Anything longer (`1e20`, `inf`) is read as this.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(24 * 60 * 60);

/// A wait in seconds from a header: negative or NaN values are no wait at
/// all; huge ones are capped (a plain `Duration::from_secs_f64` panics on
/// them).
fn seconds(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(secs).map_or(RETRY_AFTER_CAP, |d| d.min(RETRY_AFTER_CAP)))
}

/// The provider's own error message from an error body: Anthropic, OpenAI
/// and Gemini all use `{"error": {"message": …}}`; some compatible servers
/// send `{"error": "…"}` or `{"message": …}`.
pub(crate) fn provider_message(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let v = match v {
        // Gemini's streaming endpoint wraps errors in an array.
        serde_json::Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        v => v,
    };
    let error = v.get("error").unwrap_or(&v);
    if let Some(s) = error.as_str() {
        return Some(s.to_owned());
    }
    error
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_owned)
}

/// Maps an HTTP status (and the provider's message) to an error kind and
/// whether retrying can help.
pub(crate) fn classify(status: u16, message: &str) -> (ModelErrorKind, bool) {
    match status {
        401 | 403 => (ModelErrorKind::Auth, false),
        408 => (ModelErrorKind::Transport, true),
        429 => (ModelErrorKind::RateLimited, true),
        529 => (ModelErrorKind::Overloaded, true),
        503 if message.to_ascii_lowercase().contains("overload") => {
            (ModelErrorKind::Overloaded, true)
        }
        500..=599 => (ModelErrorKind::Server, true),
        400 | 404 | 413 | 422 if is_context_length(message) => {
            (ModelErrorKind::ContextLength, false)
        }
        _ => (ModelErrorKind::BadRequest, false),
    }
}

/// Whether a provider message says the prompt is longer than the context
/// window (each provider words it differently).
pub(crate) fn is_context_length(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "context_length_exceeded",
        "context length",
        "context window",
        "maximum context",
        "too many tokens",
        "input token count",
        "exceeds the maximum number of tokens",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

pub(crate) fn stream_error(provider: &str, message: impl Into<String>) -> LumenError {
    LumenError::ModelApi {
        provider: provider.to_owned(),
        status: None,
        kind: ModelErrorKind::Stream,
        retryable: false,
        message: message.into(),
        body: None,
        retry_after: None,
    }
}

/// The error of a call that ran past its overall deadline.
fn overall_deadline_error(provider: &str, overall: Duration) -> LumenError {
    LumenError::ModelApi {
        provider: provider.to_owned(),
        status: None,
        kind: ModelErrorKind::Timeout,
        retryable: false,
        message: format!(
            "the call took longer than its overall deadline of {:.0}s",
            overall.as_secs_f64()
        ),
        body: None,
        retry_after: None,
    }
}

/// Ends the stream with an error when no event arrives for `deadlines.idle`
/// or the stream is still going at `deadline` (events, pings included, do
/// not move it).
fn with_deadlines(
    inner: SseStream,
    provider: &'static str,
    deadlines: Deadlines,
    deadline: tokio::time::Instant,
) -> SseStream {
    Box::pin(futures::stream::unfold(
        Some(inner),
        move |state| async move {
            let mut inner = state?;
            let idle_by = tokio::time::Instant::now() + deadlines.idle;
            match tokio::time::timeout_at(idle_by.min(deadline), inner.next()).await {
                Ok(Some(item)) => Some((item, Some(inner))),
                Ok(None) => None,
                Err(_) if idle_by < deadline => Some((
                    Err(stream_error(
                        provider,
                        format!(
                            "the stream went idle: no event for {:.1}s",
                            deadlines.idle.as_secs_f64()
                        ),
                    )),
                    None,
                )),
                Err(_) => Some((
                    Err(overall_deadline_error(provider, deadlines.overall)),
                    None,
                )),
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::super::observer::*;
    use super::super::sse::*;
    use super::*;

    #[test]
    fn classify_maps_statuses() {
        assert_eq!(classify(401, "x"), (ModelErrorKind::Auth, false));
        assert_eq!(classify(429, "x"), (ModelErrorKind::RateLimited, true));
        assert_eq!(classify(529, "x"), (ModelErrorKind::Overloaded, true));
        assert_eq!(classify(500, "x"), (ModelErrorKind::Server, true));
        assert_eq!(
            classify(400, "prompt is too long: 210000 tokens > 200000 maximum"),
            (ModelErrorKind::ContextLength, false)
        );
        assert_eq!(classify(400, "bad"), (ModelErrorKind::BadRequest, false));
    }

    #[test]
    fn retry_after_of_any_value_is_capped_never_a_panic() {
        let mut headers = HeaderMap::new();
        for (value, expected) in [
            ("2", Some(Duration::from_secs(2))),
            ("0.5", Some(Duration::from_millis(500))),
            ("1e20", Some(RETRY_AFTER_CAP)),
            ("inf", Some(RETRY_AFTER_CAP)),
            ("99999999999999999999", Some(RETRY_AFTER_CAP)),
            ("-1", None),
            ("NaN", None),
            ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        ] {
            headers.insert("retry-after", HeaderValue::from_static(value));
            assert_eq!(retry_after(&headers), expected, "{value}");
        }
        headers.insert("retry-after-ms", HeaderValue::from_static("1e300"));
        assert_eq!(retry_after(&headers), Some(RETRY_AFTER_CAP));
    }

    #[test]
    fn retry_delay_honours_retry_after_and_caps() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(p.delay(0, Some(Duration::from_secs(999))), p.max_delay);
        for retry in 0..20 {
            let d = p.delay(retry, None);
            assert!(d <= p.max_delay);
            assert!(d >= p.base_delay.min(p.max_delay) / 2);
        }
    }

    #[test]
    fn api_key_never_prints() {
        let k = ApiKey::new("sk-secret-123456");
        assert_eq!(format!("{k:?}"), "ApiKey([redacted])");
        assert_eq!(k.scrub("bad key sk-secret-123456"), "bad key [redacted]");
    }

    #[test]
    fn provider_message_reads_common_shapes() {
        assert_eq!(
            provider_message(r#"{"type":"error","error":{"type":"x","message":"m1"}}"#).as_deref(),
            Some("m1")
        );
        assert_eq!(
            provider_message(r#"[{"error":{"code":400,"message":"m2"}}]"#).as_deref(),
            Some("m2")
        );
        assert_eq!(provider_message(r#"{"error":"m3"}"#).as_deref(), Some("m3"));
        assert_eq!(provider_message("not json"), None);
    }

    /// An observer sees every attempt of a call (the key masked), each
    /// answer's status, and the streamed bytes exactly as served; the parser
    /// still gets the same events.
    #[tokio::test]
    async fn an_observer_sees_attempts_and_the_bytes_as_received() {
        use lumen_test_support::StatusCode;
        use lumen_test_support::mock_provider::{MockProvider, Reply, Route};

        const KEY: &str = "sk-observer-test-0123456789";
        let mock = MockProvider::start().await.unwrap();
        mock.push(
            Route::AnthropicMessages,
            Reply::Status {
                status: StatusCode::TOO_MANY_REQUESTS,
                retry_after: None,
                body: r#"{"error":{"message":"slow down"}}"#.into(),
            },
        );
        let sse = "event: ping\ndata: {\"n\":1}\n\nevent: ping\ndata: {\"n\":2}\n\n";
        mock.push(
            Route::AnthropicMessages,
            Reply::SseChunked {
                body: sse.into(),
                sizes: vec![3, 7],
            },
        );
        let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let bytes: Arc<std::sync::Mutex<Vec<u8>>> = Arc::default();
        let (log, body) = (Arc::clone(&seen), Arc::clone(&bytes));
        let observer = WireObserver::new(move |e| {
            let line = match e {
                WireEvent::Request {
                    attempt,
                    headers,
                    stream,
                    ..
                } => format!("request {attempt} {headers:?} stream={stream}"),
                WireEvent::Response {
                    attempt, status, ..
                } => format!("response {attempt} {status}"),
                WireEvent::Body { bytes, .. } => {
                    body.lock().unwrap().extend_from_slice(bytes);
                    return;
                }
                WireEvent::End { error, .. } => format!("end {error:?}"),
            };
            log.lock().unwrap().push(line);
        });
        let http = Http::new(
            "anthropic",
            ApiKey::new(KEY),
            RetryPolicy {
                max_retries: 2,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(10),
                max_wait: None,
            },
            Deadlines::default(),
            Duration::from_secs(5),
        )
        .unwrap()
        .observed(Some(observer));
        let url = format!("{}/v1/messages", mock.base_url());
        let headers = [("x-api-key", KEY.to_owned())];
        let events: Vec<SseEvent> = http
            .post_sse(&url, &headers, &serde_json::json!({"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": [], "stream": true}))
            .await
            .unwrap()
            .map(|e| e.unwrap())
            .collect()
            .await;
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].data, r#"{"n":2}"#);
        let masked = r#"[("x-api-key", "[redacted]"), ("content-type", "application/json")]"#;
        assert_eq!(
            *seen.lock().unwrap(),
            [
                format!("request 0 {masked} stream=true"),
                "response 0 429".to_owned(),
                "end None".to_owned(),
                format!("request 1 {masked} stream=true"),
                "response 1 200".to_owned(),
                "end None".to_owned(),
            ]
        );
        let received = String::from_utf8(bytes.lock().unwrap().clone()).unwrap();
        // The 429's body, then the stream byte for byte.
        assert_eq!(
            received,
            format!(r#"{{"error":{{"message":"slow down"}}}}{sse}"#)
        );
        assert!(!seen.lock().unwrap().concat().contains(KEY));
    }

    #[test]
    fn reframe_wraps_json_lines_and_keeps_sse() {
        assert_eq!(
            reframe_recording("{\"a\":1}\n{\"b\":2}\n"),
            "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n"
        );
        let sse = "event: x\ndata: {}\n\n";
        assert_eq!(reframe_recording(sse), sse);
    }
}

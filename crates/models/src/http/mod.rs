//! The HTTP side every adapter shares: one `reqwest` client, JSON and SSE
//! requests, retries with backoff and jitter, and the mapping from HTTP
//! failures to typed [`lumen_core::LumenError::ModelApi`] errors.
//!
//! Retries happen only *before the first byte of the answer*: once a stream
//! has started, actions may already be running in the browser, so a failure
//! mid-stream is reported to the loop, never silently replayed.
//!
//! A [`WireObserver`] (set through `AdapterOptions::wire_observer`) sees
//! every request and every byte of every answer as it arrives, for
//! recording provider streams (`cargo xtask record`). Secret header values
//! never reach it. Without one, nothing changes.
//!
//! Inside: `client.rs` (the client, retries, deadlines, error mapping),
//! `sse.rs` (SSE framing of live and recorded bytes) and `observer.rs` (the
//! wire observer).

mod client;
mod observer;
mod sse;

pub use client::{ApiKey, Deadlines, RetryPolicy, install_tls_provider};
pub(crate) use client::{Http, classify, stream_error};
pub use observer::{WireEvent, WireObserver};
pub(crate) use sse::{ApiFailure, SseStream, sse_events};
pub use sse::{SseEvent, reframe_recording};

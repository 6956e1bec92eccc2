//! Offline doubles for demos, evals and tests: a static site server and a
//! mock model provider, both on `127.0.0.1` at ephemeral ports.
//!
//! Unlike `lumen-test-support` (a dev-dependency only), this crate may be a
//! normal dependency of the top crates (`lumen-cli`, `lumen-server`,
//! `lumen-eval`): `lumen demo` runs a real task offline with it, on a fresh
//! machine with no network and no API key. It depends on no other lumen
//! crate beyond what `cargo xtask tidy` allows (`lumen-core` at most).
//!
//! # Main items
//!
//! - [`FixtureServer`] serves a folder (the workspace's `fixtures/sites/` by
//!   default) with injected latency and status codes and a log of every
//!   request, and stops when dropped.
//! - [`mock_provider::MockProvider`] answers Anthropic Messages, OpenAI
//!   Responses, Chat Completions and Gemini requests from scripted queues,
//!   in each provider's real wire format
//!   ([`mock_provider::script`] builds the turns).
//!
//! # Example
//!
//! ```
//! use lumen_mock::mock_provider::{MockProvider, Route};
//! use lumen_mock::mock_provider::script::chat_turn;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let mock = MockProvider::start().await?;
//! mock.push(
//!     Route::ChatCompletions,
//!     chat_turn(&[("call_1", "task_complete", json!({"result": "done"}))], None, 10),
//! );
//! assert!(mock.base_url().starts_with("http://127.0.0.1:"));
//! # Ok(())
//! # }
//! ```
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]

mod fixture_server;
pub mod mock_provider;
mod page;

pub use axum::http::StatusCode;
pub use fixture_server::{FixtureServer, MAX_QUERY_DELAY, RequestRecord, fixtures_root};
pub use page::element_center;

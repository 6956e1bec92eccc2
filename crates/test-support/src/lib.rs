//! Test support for Lumen: a static server for the fixture sites, the mock
//! model provider and the Chromium locator. Never published.
//!
//! The fixture server and the mock provider live in `lumen-mock` (a
//! publishable crate, so `lumen demo` can use them at runtime) and are
//! re-exported here unchanged.
//!
//! This crate is only ever a dev-dependency. It may depend on `lumen-mock`,
//! `lumen-core`, `lumen-browser` and `lumen-models` and on external crates,
//! but no production crate may name it under `[dependencies]`.
//!
//! # Main items
//!
//! - [`FixtureServer`] serves `fixtures/sites/` (or any folder) on
//!   `127.0.0.1` and `localhost` at an ephemeral port, with injected latency
//!   and status codes and a log of every request, and stops when dropped.
//! - [`mock_provider`](fn@mock_provider) starts the mock model provider
//!   checking every request against the official SDK types and the model
//!   registry's rules: every end-to-end test is a conformance test.
//! - [`locate_chromium`] and [`locate_headless_shell`] find a browser binary,
//!   and [`ChromiumNotFound`] says how to install one when there is none.
//!   They are `lumen-browser`'s locator ([`lumen_browser::chromium`]),
//!   re-exported under the names the tests use.
//! - [`postgres::database`] gives a test a fresh, empty PostgreSQL database
//!   (on a throwaway cluster the process starts once, or on the server of
//!   `LUMEN_TEST_DATABASE_URL`), and [`postgres::psql`] runs SQL on it.
//!
//! The library code returns errors instead of unwrapping, like every other
//! crate in the workspace; only its tests unwrap.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//!
//! use lumen_test_support::{FixtureServer, StatusCode};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let server = FixtureServer::start().await?;
//! let page = server.url("forms/login.html");
//! assert_eq!(page, format!("http://127.0.0.1:{}/forms/login.html", server.port()));
//!
//! // Every page under /api/ now answers 503, and /slow/ waits half a second.
//! server.fail("/api/", StatusCode::SERVICE_UNAVAILABLE);
//! server.set_delay("/slow/", Duration::from_millis(500));
//!
//! // ... drive a browser at `page`, then assert on what it fetched:
//! assert!(server.requests().iter().all(|r| r.method == "GET"));
//! # Ok(())
//! # }
//! ```
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]

/// Finds the Chromium to test with: [`lumen_browser::chromium::locate`]
/// (`LUMEN_CHROME`, `CHROME_PATH`, `/usr/bin/chromium`, then `PATH`).
pub use lumen_browser::chromium::locate as locate_chromium;
pub use lumen_browser::chromium::{ChromiumNotFound, locate_headless_shell};
/// The mock model provider; it lives in `lumen-mock` (so `lumen demo` can
/// use it at runtime) and is re-exported here for the tests.
mod browserbase;
pub use browserbase::browserbase_stub;
#[cfg(unix)]
mod gated;
#[cfg(unix)]
pub use gated::GatedChromium;
#[cfg(unix)]
pub mod postgres;
pub use lumen_mock::mock_provider;
pub use lumen_mock::{
    FixtureServer, MAX_QUERY_DELAY, RequestRecord, StatusCode, element_center, fixtures_root,
};

/// Starts the mock model provider with every check a real API applies: the
/// official SDK request types (built into the mock) and the rules those
/// types cannot express, from the model registry
/// ([`lumen_models::registry::request_violations`]). A request that breaks
/// one is answered with 400 and listed by
/// [`MockProvider::violations`](mock_provider::MockProvider::violations).
///
/// # Errors
///
/// Fails if no loopback port can be bound.
pub async fn mock_provider() -> std::io::Result<mock_provider::MockProvider> {
    let mock = mock_provider::MockProvider::start().await?;
    mock.add_check(registry_rules);
    Ok(mock)
}

/// The model registry's rules for a mock provider route.
pub fn registry_rules(route: mock_provider::Route, body: &serde_json::Value) -> Vec<String> {
    use lumen_models::Provider;
    let provider = match route {
        mock_provider::Route::AnthropicMessages => Provider::Anthropic,
        mock_provider::Route::OpenAiResponses => Provider::OpenAi,
        mock_provider::Route::ChatCompletions => Provider::Compatible,
        mock_provider::Route::Gemini => Provider::Google,
    };
    lumen_models::registry::request_violations(provider, body)
}

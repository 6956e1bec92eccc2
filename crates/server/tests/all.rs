//! The server against real parts: HTTP on 127.0.0.1, real Chromium on the
//! fixture site, the real OpenAI-compatible adapter talking to the mock
//! provider over HTTP/SSE. One test binary (fast to link).

// Test helpers outside #[test] functions unwrap too; clippy's test
// allowances only cover items under cfg(test).
#[cfg(test)]
mod suite;

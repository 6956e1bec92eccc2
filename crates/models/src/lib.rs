//! Model adapters for Lumen (Anthropic, OpenAI, Google and any
//! OpenAI-compatible server) and the `ActionDecoder` that turns each
//! provider's tool calls into [`lumen_core::Action`]s in viewport pixels.
//!
//! May depend on: `lumen-core`, `reqwest`, `eventsource-stream`, `tokio`.
//! Must never be named by `lumen-loop`, `lumen-memory` or `lumen-safety`: the
//! loop sees models only through the `ModelAdapter` trait.
//!
//! Status: the adapters land with the models issue; this crate is a
//! placeholder so the workspace graph and its rules exist from the start.

//! Lumen, a vision-first browser agent engine.
//!
//! An instruction and a start URL go in; Lumen drives a real Chromium in one
//! loop — screenshot → model → action(s) → screenshot — until the task is
//! done and verified.
//!
//! - [`Agent`]: give it a model and a browser (by name, or your own
//!   [`ModelAdapter`] and [`BrowserTab`] through [`AgentOptions`]); it
//!   connects lazily, sets up the adapter and the browser concurrently,
//!   aligns the viewport to the model, and runs on its [`Session`]
//!   ([`Agent::run`], each a fresh task; [`Agent::continue_run`];
//!   [`Agent::stream`], [`Agent::serialize`], [`Agent::resume`]).
//! - [`Session`]: bring your own [`BrowserTab`] and [`ModelAdapter`] (see
//!   `examples/custom_adapter.rs`). The run modes ([`RunMode`]: plan, agent,
//!   exec with retries) and the planner pass live here; the agent, the CLI
//!   and the server all run through [`Session::run_mode`].
//! - [`logging`]: `LUMEN_LOG`, the per-surface `LUMEN_LOG_<SURFACE>`
//!   switches, a verbose level and a logger callback (nothing is logged
//!   unless asked for).
//! - [`telemetry`]: OpenTelemetry traces of runs (run, step, model call,
//!   action spans) over OTLP/HTTP when an endpoint is set; off otherwise.
//! - [`RunOptions`]: every option of a run as one serde type (the server's
//!   run body, MCP's `run_task`, IPC's `create`, what `lumen run`'s flags
//!   and config file fill); [`RunOptions::apply`] sets them onto
//!   [`AgentOptions`].
//! - The layers, re-exported: [`browser`], [`models`], [`memory`],
//!   [`safety`], [`perception`] (the loop), and the contracts from
//!   `lumen-core` at the crate root.
//!
//! May depend on every engine crate: `lumen-core`, `lumen-browser`,
//! `lumen-models`, `lumen-memory`, `lumen-safety` and `lumen-perception`.
//! This facade is one of the few crates (with the CLI, the server and
//! `lumen-eval`) allowed to name both a browser and a model backend; it holds
//! no engine logic of its own beyond wiring and the run modes.
//!
//! # Example
//! ```no_run
//! use lumen::{Agent, AgentOptions, SessionOptions};
//!
//! # async fn run() -> lumen::Result<()> {
//! let mut agent = Agent::new(AgentOptions {
//!     session: SessionOptions {
//!         max_steps: 20,
//!         ..SessionOptions::default()
//!     },
//!     ..AgentOptions::new("anthropic/claude-sonnet-4-6")
//! });
//! let result = agent.run("Find the price of the cheapest book", Some("https://books.toscrape.com")).await?;
//! println!("{:?}: {:?}", result.status, result.result);
//! agent.close().await?;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod agent;
pub mod logging;
mod options;
mod session;
pub mod telemetry;

pub use agent::{Agent, AgentOptions, BrowserSource};
pub use lumen_browser as browser;
pub use lumen_core as core;
pub use lumen_core::*;
pub use lumen_memory as memory;
pub use lumen_models as models;
pub use lumen_perception as perception;
pub use lumen_safety as safety;
pub use options::{
    BROWSERBASE_API_KEY_ENV, BROWSERBASE_PROJECT_ID_ENV, DEFAULT_EXEC_ATTEMPTS, OptionError,
    PathSetting, RunOptions, SecretValues, TaskMode, Viewport, every_option_set, is_plain_subpath,
};
pub use session::{RunMode, Session, SessionOptions};

// Keeps the README's example compiling and true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

//! The perception loop: screenshot → model → action(s) → screenshot.
//!
//! [`PerceptionLoop`] runs the steps: screenshot, model stream,
//! each action through the [`pipeline::ActionPipeline`] as it arrives, then
//! the assistant turn and its tool results recorded in order.
//! Around it, each piece usable alone:
//! - [`pipeline::ActionPipeline`]: the one way any action reaches the
//!   browser, whoever chose it (the loop, the cache, the gate, `lumen
//!   replay`, direct tools): hooks → policy → router → after-effect policy
//!   → verification → redaction.
//! - [`router::ActionRouter`]: the pipeline's dispatch to the tab, with
//!   adaptive settling (or fixed [`router::RouterTiming`]) and secrets
//!   filled at type time. It sees browser actions only.
//! - [`repeat::RepeatDetector`]: repeat, passive-run and URL-stall detection
//!   with sticky, escalating nudges (levels 5, 8, 12).
//! - [`gate::ConfidenceGate`]: several samples and a majority vote on hard
//!   steps.
//! - [`checkpoint::CheckpointManager`]: URL/scroll/state checkpoints for
//!   backtracking.
//! - [`monitor`]: the event bus, console and no-op monitors, and a bounded
//!   live event stream.
//! - [`control::RunControl`]: cancel, pause/resume, stop and guidance.
//! - [`prompt`]: the per-step system prompt, most stable parts first.
//! - [`planner::plan`]: an optional planning pass before the loop.
//! - [`budget`]: token, cost and failure budgets, and the [`budget::Pricing`]
//!   a cost budget needs.
//!
//! May depend on: `lumen-core`, `lumen-memory`, `lumen-safety`, `tokio`.
//! Never on `lumen-browser` or `lumen-models`: the loop drives any
//! `BrowserTab` with any `ModelAdapter`, which is what makes both swappable.
//!
//! The loop also takes a site knowledge base, workflow memory, an action
//! cache and the action verifier from `lumen-memory` and `lumen-safety`
//! (`PerceptionLoop::with_*`); the `lumen` facade wires them from its
//! options. A `zoom` is captured by the router (the region rendered as large
//! as the model's image limits allow) and shown to the model inside the
//! zoom's own tool result, once.

#![deny(missing_docs)]

pub mod budget;
pub mod checkpoint;
pub mod control;
pub mod gate;
pub mod monitor;
pub mod pipeline;
pub mod planner;
pub mod prompt;
pub mod repeat;
pub mod router;

mod perception_loop;
mod scrub;
mod undo;
pub use perception_loop::{
    DEFAULT_MAX_ACTIONS_PER_TURN, LoopConfig, PerceptionLoop, RunState, StepHook,
};

#[cfg(test)]
mod fake;

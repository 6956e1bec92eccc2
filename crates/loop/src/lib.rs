//! The perception loop: screenshot → model → action(s) → screenshot.
//!
//! This crate holds the machinery around the loop, each piece usable alone:
//! - [`router::ActionRouter`]: the one place where actions reach the browser,
//!   with adaptive settling (or fixed [`router::RouterTiming`]) and secrets
//!   filled at type time.
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
//!
//! May depend on: `lumen-core`, `lumen-memory`, `lumen-safety`, `tokio`.
//! Never on `lumen-browser` or `lumen-models`: the loop drives any
//! `BrowserTab` with any `ModelAdapter`, which is what makes both swappable.
//!
//! Status: the `PerceptionLoop` that ties these together lands with the rest
//! of the loop issue.

#![deny(missing_docs)]

pub mod checkpoint;
pub mod control;
pub mod gate;
pub mod monitor;
pub mod prompt;
pub mod repeat;
pub mod router;

#[cfg(test)]
mod fake;

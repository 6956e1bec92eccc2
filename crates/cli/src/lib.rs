//! The library half of `lumen-cli`: what the `lumen` binary shares with
//! other tools.
//!
//! - [`trace`]: the run folder, re-exported from `lumen-trace` (which owns
//!   its layout, the event log, `report.html` and `run.gif`).
//! - [`timeline`]: one-line descriptions of actions for people (also from
//!   `lumen-trace`).
//! - [`pricing`]: a rough dollar estimate for token counts, from the model
//!   registry.
//!
//! The command-line tool itself lives in the `lumen` binary of this
//! package; see `docs/cli.md`.
//!
//! May depend on the `lumen` facade, `lumen-server` (`lumen serve`, `ipc`,
//! `mcp`), `lumen-trace`, `lumen-mock` (the offline demo) and command-line
//! crates (clap, indicatif). Only `lumen-eval` may depend on this library.
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]

pub mod pricing;

pub use lumen_trace as trace;
pub use lumen_trace::timeline;

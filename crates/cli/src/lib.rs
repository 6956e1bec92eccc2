//! The library half of `lumen-cli`: what a run leaves behind, reusable by
//! other tools (the `lumen` binary and `cargo xtask eval` both use it).
//!
//! - [`trace`]: the trace folder. [`trace::Trace`] writes one while a run
//!   goes (`events.jsonl`, `screenshots/`, `result.json`, `report.html`,
//!   `run.gif`); [`trace::render`] turns any folder that holds an
//!   `events.jsonl` and its screenshots into `report.html` and `run.gif`.
//! - [`timeline`]: one-line descriptions of actions for people.
//! - [`pricing`]: a rough dollar estimate for token counts.
//!
//! Secret values passed in [`trace::RenderOptions::secrets`] (or to
//! [`trace::Trace::finish`]) are replaced by their placeholders in every
//! text the report shows. The command-line tool itself lives in the `lumen`
//! binary of this package; see `docs/cli.md`.
//!
//! # Example
//! ```no_run
//! use lumen_cli::trace::{RenderOptions, render};
//!
//! // A folder written by `lumen run` or `cargo xtask eval`.
//! let rendered = render(std::path::Path::new("lumen-traces/my-run"), &RenderOptions::default())?;
//! println!("{} steps: {}", rendered.steps, rendered.report.display());
//! # Ok::<(), lumen_cli::trace::TraceError>(())
//! ```
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]

mod gif;
pub mod pricing;
mod report;
pub mod timeline;
pub mod trace;

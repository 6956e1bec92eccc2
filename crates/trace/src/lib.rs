//! What a Lumen run leaves on disk, in one place.
//!
//! - [`layout`]: the run folder's names (`events.jsonl`, `screenshots/`,
//!   `session.json`, `result.json`, `report.html`, `run.gif`) and the
//!   default folder of a run.
//! - [`Trace`] writes a run folder while the run goes; [`render`] draws
//!   `report.html` and `run.gif` for any folder that follows the layout.
//! - [`jsonl_recorder`]: the event log, one JSON line per recorded event;
//!   [`ScreenshotFiles`]: the screenshot files, named by the layout.
//! - [`write_atomic`]: the one atomic file writer of the workspace (the run
//!   store, saved state and results use it too).
//! - [`clock`]: calendar dates and UTC stamps without a date crate.
//! - [`timeline`]: a run folded into steps, and [`timeline::describe`], the
//!   one-line description of an action that progress lines, reports and
//!   replays print.
//!
//! Secret values passed in [`RenderOptions::secrets`] are replaced by
//! their placeholders in every text artefact.
//!
//! May depend on `lumen-core` and `lumen-safety` (for [`lumen_safety::Secrets`])
//! only among Lumen's crates: it sits below the edge crates (CLI, server,
//! eval) that write run folders and beside `lumen-memory`, which uses its
//! atomic writer. Prices come in as a function ([`Pricing`]) so that the
//! model registry stays the one price table without this crate depending on
//! the adapters.
//!
//! # Example
//! ```no_run
//! use lumen_trace::{RenderOptions, render};
//!
//! // A folder written by `lumen run` or the eval.
//! let rendered = render(std::path::Path::new("lumen-traces/my-run"), &RenderOptions::default())?;
//! println!("{} steps: {}", rendered.steps, rendered.report.display());
//! # Ok::<(), lumen_trace::TraceError>(())
//! ```

#![deny(missing_docs)]

mod atomic;
pub mod clock;
mod folder;
mod gif;
pub mod layout;
mod private;
mod recorder;
mod report;
pub mod timeline;

pub use atomic::{sync_dir, write_atomic, write_private};
pub use folder::{Pricing, RenderOptions, Rendered, Trace, TraceError, render};
pub use layout::{
    EVENTS, GIF, OPTIONS, REPORT, RESULT, SCREENSHOTS, SESSION, default_dir, screenshot_name, slug,
};
pub use private::{NotOwned, own_dir, private_dir, private_file};
pub use recorder::{ScreenshotFiles, jsonl_recorder};

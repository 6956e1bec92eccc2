//! Lumen's memory: wire and semantic history with compression, the
//! `StateStore`, `SiteKB`, `WorkflowMemory` and `ActionCache`.
//!
//! - [`HistoryManager`]: the provider-facing wire history (tier-1 screenshot
//!   compression on insertion, tier-2 summary compaction on the estimated
//!   size of the next request, fold records) and the never-mutated semantic
//!   history.
//! - [`SerializedHistory`]: a versioned, atomically written snapshot a run
//!   resumes from.
//! - [`StateStore`]: the latest task state, size-capped, outside compaction.
//! - [`SiteKB`]: site tips matched on host and path, with a default
//!   knowledge base for the WebVoyager sites.
//! - [`WorkflowMemory`]: step plans learnt from successful runs, persisted
//!   to JSON and matched on the instruction.
//! - [`ActionCache`]: successful runs compiled into [`RunScript`]s keyed by
//!   start URL and instruction, each step guarded by a perceptual hash of
//!   its screenshot and the element each action was aimed at, so a rerun
//!   replays without the model while the page still matches.
//!
//! May depend on: `lumen-core`, `lumen-trace` (the one atomic file writer)
//! and pure data crates (`image` to decode screenshots, `url`). Never on `lumen-browser` or `lumen-models`: memory
//! works on core types, whatever the backend, and reaches a model only
//! through [`lumen_core::ModelAdapter`].
//!
//! Files are plain JSON written atomically; every read failure is a
//! [`lumen_core::LumenError::InvalidData`] and never a panic.
//!
//! # Example
//! ```
//! use lumen_core::{Image, ImageFormat, WireRecord};
//! use lumen_memory::{HistoryConfig, HistoryManager};
//!
//! let mut history = HistoryManager::new(HistoryConfig { keep_recent: 1, ..Default::default() });
//! let shot = Image::new(ImageFormat::Png, 1, 1, vec![0u8; 4]);
//! history.push_screenshot(0, shot.clone(), None);
//! history.push_screenshot(1, shot, None);
//! let images = history
//!     .wire()
//!     .iter()
//!     .filter(|r| matches!(r, WireRecord::Screenshot(s) if s.image.is_some()))
//!     .count();
//! assert_eq!(images, 1);
//! ```

#![deny(missing_docs)]

pub mod cache;
mod fsutil;
pub mod history;
pub mod serialize;
pub mod site_kb;
pub mod state;
mod wire_scrub;
pub mod workflow;

pub use cache::{ActionCache, RunScript, ScriptKey};
pub use history::{Compaction, HistoryConfig, HistoryManager, screenshot_marker, shrink_image};
pub use serialize::{FoldRecord, SerializedHistory};
pub use site_kb::{SiteKB, SiteRule};
pub use state::{StateError, StateStore};
pub use wire_scrub::WireScrub;
pub use workflow::{Workflow, WorkflowMemory};

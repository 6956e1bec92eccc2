//! Lumen, a vision-first browser agent engine.
//!
//! This facade wires the concrete crates together: `Agent` (lazy connect,
//! optional planner pass, run/stream/resume) and `Session` (bring your own tab
//! and adapter). It re-exports the shared contracts from `lumen-core`.
//!
//! May depend on every Lumen crate; it is one of the few places (with the CLI,
//! the server and xtask) allowed to name both a browser and a model backend.
//!
//! Status: `Agent` and `Session` land with the loop issue; for now the facade
//! re-exports the contracts.

pub use lumen_core as core;
pub use lumen_core::*;

// Keeps the README's example compiling and true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

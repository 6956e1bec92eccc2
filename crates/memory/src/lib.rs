//! Lumen's memory: wire and semantic history with compression, the
//! `StateStore`, `SiteKB`, `WorkflowMemory` and `ActionCache`.
//!
//! May depend on: `lumen-core` and pure data crates. Never on `lumen-browser`
//! or `lumen-models`: memory works on core types, whatever the backend.
//!
//! Status: the implementation lands with the memory/safety issue.

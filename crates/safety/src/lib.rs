//! Lumen's safety layers: `PreActionHook` → `SessionPolicy` → execution →
//! `ActionVerifier`, completion `Verifier`s, and secrets.
//!
//! May depend on: `lumen-core` and pure data crates. Never on `lumen-browser`
//! or `lumen-models`: policy is decided on core types alone.
//!
//! Status: the implementation lands with the memory/safety issue.

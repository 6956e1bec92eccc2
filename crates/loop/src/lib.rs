//! The perception loop: screenshot → model → action(s) → screenshot.
//!
//! Holds `PerceptionLoop`, `ActionRouter`, `RepeatDetector`, `ConfidenceGate`,
//! checkpoints, child loops, the planner and the monitors.
//!
//! May depend on: `lumen-core`, `lumen-memory`, `lumen-safety`, `tokio`.
//! Never on `lumen-browser` or `lumen-models`: the loop drives any
//! `BrowserTab` with any `ModelAdapter`, which is what makes both swappable.
//!
//! Status: the implementation lands with the loop issue.

//! The log surfaces: the `tracing` targets each layer logs its internals
//! at, and the structured log line a logger callback receives.
//!
//! Ordinary logs use the emitting module's path as their target
//! (`lumen_browser::tab::navigate`…). The surfaces are the detailed,
//! noisy ones, each off unless asked for (`LUMEN_LOG_<SURFACE>`, or
//! verbose level 2); see `lumen::logging` and docs/logging.md.

use serde::{Deserialize, Serialize};

/// CDP WebSocket traffic: commands, responses and events on the wire
/// (payloads truncated, typed text never in clear).
pub const CDP: &str = "lumen::cdp";
/// The action router: each dispatch with its pixel coordinates and timing.
pub const ACTIONS: &str = "lumen::actions";
/// The CDP tab: navigation, input and screenshot operations.
pub const BROWSER: &str = "lumen::browser";
/// History: compaction and screenshot compression.
pub const HISTORY: &str = "lumen::history";
/// The model adapter: each call's timing and token counts.
pub const ADAPTER: &str = "lumen::adapter";
/// The perception loop: step internals and context utilisation.
pub const LOOP: &str = "lumen::loop";
/// The spans of a run (run, step, model call, action) that `lumen::telemetry`
/// exports. Named outside `lumen` on purpose: the console and callback
/// filters (`lumen=…`) never enable them, so log lines carry no span
/// context, and only the telemetry layer sees them.
pub const TELEMETRY: &str = "otel::lumen";

/// One log surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    /// [`CDP`].
    Cdp,
    /// [`ACTIONS`].
    Actions,
    /// [`BROWSER`].
    Browser,
    /// [`HISTORY`].
    History,
    /// [`ADAPTER`].
    Adapter,
    /// [`LOOP`].
    Loop,
}

impl Surface {
    /// Every surface.
    pub const ALL: [Surface; 6] = [
        Surface::Cdp,
        Surface::Actions,
        Surface::Browser,
        Surface::History,
        Surface::Adapter,
        Surface::Loop,
    ];

    /// Its `tracing` target.
    pub fn target(self) -> &'static str {
        match self {
            Surface::Cdp => CDP,
            Surface::Actions => ACTIONS,
            Surface::Browser => BROWSER,
            Surface::History => HISTORY,
            Surface::Adapter => ADAPTER,
            Surface::Loop => LOOP,
        }
    }

    /// The environment variable that turns it on (`LUMEN_LOG_CDP`…).
    pub fn env_var(self) -> &'static str {
        match self {
            Surface::Cdp => "LUMEN_LOG_CDP",
            Surface::Actions => "LUMEN_LOG_ACTIONS",
            Surface::Browser => "LUMEN_LOG_BROWSER",
            Surface::History => "LUMEN_LOG_HISTORY",
            Surface::Adapter => "LUMEN_LOG_ADAPTER",
            Surface::Loop => "LUMEN_LOG_LOOP",
        }
    }

    /// The surface a target belongs to (the target itself or below it).
    pub fn of_target(target: &str) -> Option<Surface> {
        Surface::ALL.into_iter().find(|s| {
            target
                .strip_prefix(s.target())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
    }
}

/// A log line's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Very detailed.
    Trace,
    /// Detail for debugging (the surfaces log at this level).
    Debug,
    /// Normal operation.
    Info,
    /// Something to look at.
    Warn,
    /// Something failed.
    Error,
}

/// One log line as structured data, for a logger callback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Its level.
    pub level: LogLevel,
    /// The surface it was logged at, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<Surface>,
    /// Its `tracing` target (a surface's, or the module path).
    pub target: String,
    /// The message.
    pub message: String,
    /// The other fields, by name, as text (strings unquoted).
    #[serde(default)]
    pub fields: std::collections::BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_map_back_to_their_surface_and_only_theirs() {
        for s in Surface::ALL {
            assert_eq!(Surface::of_target(s.target()), Some(s));
            assert_eq!(
                Surface::of_target(&format!("{}::inner", s.target())),
                Some(s)
            );
            assert!(s.env_var().starts_with("LUMEN_LOG_"));
        }
        assert_eq!(Surface::of_target("lumen::cdpx"), None);
        assert_eq!(Surface::of_target("lumen_browser::tab"), None);
    }
}

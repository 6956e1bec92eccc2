//! The fatal errors of Lumen.
//!
//! Only conditions that end a run (or a call at the edge of the library) are
//! errors; an action that fails on the page is an
//! [`ActionOutcome`](crate::ActionOutcome) with `ok: false`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `Result` with [`LumenError`] as the default error.
pub type Result<T, E = LumenError> = std::result::Result<T, E>;

/// Stable machine-readable error codes (the server API and traces use them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The CDP connection is gone (socket closed, browser crashed).
    BrowserDisconnected,
    /// A model provider answered with an error.
    ModelApiError,
    /// A run or call exceeded its time limit.
    SessionTimeout,
    /// Retries of a retryable failure ran out.
    MaxRetriesExceeded,
    /// A policy forbade something outside the loop (inside the loop a block
    /// is an action outcome).
    PolicyViolation,
    /// A delegated child loop failed fatally.
    ChildLoopFailed,
    /// The caller's configuration is invalid.
    ConfigError,
    /// The run was cancelled.
    Cancelled,
    /// Stored or received data could not be read.
    InvalidData,
    /// A script evaluated in the page threw.
    ScriptError,
}

/// Why a provider call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// 401/403: the key is missing, wrong or lacks access.
    Auth,
    /// 400/404/422: the request was rejected.
    BadRequest,
    /// The conversation no longer fits the model's context window.
    ContextLength,
    /// 429: rate limited.
    RateLimited,
    /// 529 or an `overloaded` error.
    Overloaded,
    /// 5xx.
    Server,
    /// The connection failed or timed out before a response.
    Transport,
    /// The stream broke: truncated, idle too long, malformed, or an in-stream
    /// error event.
    Stream,
    /// A deadline passed: no response headers in time, or the whole call
    /// ran past its overall deadline.
    Timeout,
}

/// A fatal error.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LumenError {
    /// The browser connection is gone; the run cannot go on.
    #[error("browser disconnected: {reason}")]
    BrowserDisconnected {
        /// What was observed (socket closed, process exited, call timed out).
        reason: String,
    },
    /// A provider answered with an error (or the stream broke).
    #[error("{provider} API error{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    ModelApi {
        /// Which provider (`anthropic`, `openai`, `google`, `compatible`).
        provider: String,
        /// The HTTP status, when there was one.
        status: Option<u16>,
        /// What kind of failure.
        kind: ModelErrorKind,
        /// Whether trying again may succeed.
        retryable: bool,
        /// The provider's own message.
        message: String,
        /// The provider's raw error body, for diagnostics (never contains our
        /// request or keys).
        body: Option<String>,
        /// How long the provider asked us to wait (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// A time limit ran out.
    #[error("timed out after {:.1}s: {what}", after.as_secs_f64())]
    SessionTimeout {
        /// What was being waited for.
        what: String,
        /// The limit.
        after: Duration,
    },
    /// Retries of a retryable failure ran out.
    #[error("gave up after {attempts} attempts: {last}")]
    MaxRetriesExceeded {
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        last: Box<LumenError>,
    },
    /// A policy forbade an operation at the edge of the library.
    #[error("policy violation: {reason}")]
    PolicyViolation {
        /// Which rule and why.
        reason: String,
    },
    /// A child loop failed fatally.
    #[error("child loop failed: {reason}")]
    ChildLoopFailed {
        /// Its error.
        reason: String,
    },
    /// The caller's configuration is invalid.
    #[error("invalid configuration `{setting}`: {message}")]
    Config {
        /// The option, flag or variable to fix (`model`, `ANTHROPIC_API_KEY`).
        setting: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The run was cancelled.
    #[error("cancelled: {reason}")]
    Cancelled {
        /// Who cancelled and why.
        reason: String,
    },
    /// Data could not be read (corrupt or future-version file, bad payload).
    #[error("invalid {what}: {message}")]
    InvalidData {
        /// What was being read.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// A script evaluated in the page threw or could not run.
    #[error("script error: {message}")]
    Script {
        /// The exception text.
        message: String,
    },
}

impl LumenError {
    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            LumenError::BrowserDisconnected { .. } => ErrorCode::BrowserDisconnected,
            LumenError::ModelApi { .. } => ErrorCode::ModelApiError,
            LumenError::SessionTimeout { .. } => ErrorCode::SessionTimeout,
            LumenError::MaxRetriesExceeded { .. } => ErrorCode::MaxRetriesExceeded,
            LumenError::PolicyViolation { .. } => ErrorCode::PolicyViolation,
            LumenError::ChildLoopFailed { .. } => ErrorCode::ChildLoopFailed,
            LumenError::Config { .. } => ErrorCode::ConfigError,
            LumenError::Cancelled { .. } => ErrorCode::Cancelled,
            LumenError::InvalidData { .. } => ErrorCode::InvalidData,
            LumenError::Script { .. } => ErrorCode::ScriptError,
        }
    }

    /// Whether the error ends a run. Script errors and invalid data met
    /// inside the loop are reported to the model instead.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, LumenError::Script { .. })
    }

    /// Whether retrying the same call may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LumenError::ModelApi {
                retryable: true,
                ..
            }
        )
    }

    /// Shorthand for [`LumenError::BrowserDisconnected`].
    pub fn disconnected(reason: impl Into<String>) -> Self {
        LumenError::BrowserDisconnected {
            reason: reason.into(),
        }
    }

    /// Shorthand for [`LumenError::Config`].
    pub fn config(setting: impl Into<String>, message: impl Into<String>) -> Self {
        LumenError::Config {
            setting: setting.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`LumenError::InvalidData`].
    pub fn invalid_data(what: impl Into<String>, message: impl Into<String>) -> Self {
        LumenError::InvalidData {
            what: what.into(),
            message: message.into(),
        }
    }
}

/// A serialisable view of an error (events, the server API, traces).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// The stable code.
    pub code: ErrorCode,
    /// The human-readable message.
    pub message: String,
    /// Whether a retry may succeed.
    #[serde(default)]
    pub retryable: bool,
}

impl From<&LumenError> for ErrorInfo {
    fn from(e: &LumenError) -> Self {
        Self {
            code: e.code(),
            message: e.to_string(),
            retryable: e.is_retryable(),
        }
    }
}

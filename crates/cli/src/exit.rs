//! Exit codes and the one-message errors the CLI prints at its edge.

use std::fmt;
use std::process::ExitCode;

use lumen::{ErrorCode, LumenError, RunStatus};

/// The task succeeded.
pub(crate) const SUCCESS: u8 = 0;
/// The task failed: the model gave up, or a fatal error ended the run.
pub(crate) const FAILURE: u8 = 1;
/// Bad flags, config file, model name, API key, browser or CDP endpoint:
/// nothing ran. (clap uses 2 for usage errors too.)
pub(crate) const CONFIG: u8 = 2;
/// The step budget ran out.
pub(crate) const MAX_STEPS: u8 = 3;
/// `lumen replay`: the page no longer looks as recorded.
pub(crate) const DIVERGED: u8 = 4;
/// `lumen replay --skip-failures`: the replay reached its end, but steps
/// whose actions failed were skipped.
pub(crate) const SKIPPED: u8 = 5;
/// A budget (`--max-tokens`, `--max-cost`, `--max-failures`) was reached.
pub(crate) const BUDGET: u8 = 6;
/// The run handed the browser to a person (`--handoff`) and nobody
/// finished within the handoff timeout.
pub(crate) const HANDOFF_TIMEOUT: u8 = 7;
/// Cancelled (Ctrl-C): 128 + SIGINT, as shells report it.
pub(crate) const CANCELLED: u8 = 130;

/// The exit code for how a run ended.
pub(crate) fn for_status(status: RunStatus) -> u8 {
    match status {
        RunStatus::Success => SUCCESS,
        RunStatus::Failure => FAILURE,
        RunStatus::MaxSteps => MAX_STEPS,
        RunStatus::Cancelled => CANCELLED,
        RunStatus::BudgetExceeded => BUDGET,
        RunStatus::HandoffTimeout => HANDOFF_TIMEOUT,
    }
}

/// An error that stops the CLI: one message, naming the fix, and its exit
/// code. Printed without a backtrace. (Serializable: the session keeper
/// of `lumen browser` sends a command's error back to its process.)
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct CliError {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl CliError {
    /// A configuration error (exit 2).
    pub(crate) fn config(message: impl Into<String>) -> Self {
        Self {
            code: CONFIG,
            message: message.into(),
        }
    }

    /// A failure while running (exit 1).
    pub(crate) fn failure(message: impl Into<String>) -> Self {
        Self {
            code: FAILURE,
            message: message.into(),
        }
    }

    /// Prints the message and returns the exit code.
    pub(crate) fn report(&self) -> ExitCode {
        eprintln!("lumen: {}", crate::terminal::visible(&self.message));
        ExitCode::from(self.code)
    }

    /// An error from setting up a run (adapter, browser, start page), with
    /// the fix spelled out. Everything before the loop starts is
    /// configuration, so these exit with [`CONFIG`].
    pub(crate) fn from_setup(error: &LumenError, cdp_url: Option<&str>) -> Self {
        let text = error.to_string();
        let message = match (error.code(), cdp_url) {
            (ErrorCode::BrowserDisconnected | ErrorCode::SessionTimeout, Some(url)) => format!(
                "could not attach to the browser at {url} ({text}); start Chromium with \
                 --remote-debugging-port=9222 and pass --cdp-url http://127.0.0.1:9222, \
                 or drop --cdp-url to launch one"
            ),
            (ErrorCode::BrowserDisconnected | ErrorCode::SessionTimeout, None) => {
                format!(
                    "could not start Chromium ({text}); install it (Debian/Ubuntu: \
                     `apt-get install chromium`) or attach to one with --cdp-url"
                )
            }
            _ if text.contains("api key") || text.contains("API key") => format!(
                "{text}; export the key in your shell (for example \
                 `export ANTHROPIC_API_KEY=…`) — it is never written to any trace"
            ),
            _ => text,
        };
        Self::config(message)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

//! `lumen browser console|errors` and `wait --load`: what the page logged,
//! its uncaught exceptions, and its load states, all read from what the
//! browser keeps (no process stays attached to collect them; see
//! [`PageLink::page_log`] and [`PageLink::wait_for_load`]).
//!
//! `--clear` cannot empty the browser's own list without emptying the other
//! kind too, so it remembers, in the session's state file, the newest entry
//! shown; later calls show only what came after.

use std::time::Duration;

use lumen::browser::{LoadState, LogEntry, PageLink};
use serde_json::{Value, json};

use super::{State, fail, save_page};
use crate::exit::CliError;

/// `console [--clear]` (`errors` false) or `errors [--clear]` (true).
pub(super) async fn log(
    link: &PageLink,
    state: &mut State,
    session: &str,
    errors: bool,
    clear: bool,
) -> Result<(Value, String), CliError> {
    let cutoff = if errors {
        state.errors_seen
    } else {
        state.console_seen
    };
    let entries: Vec<LogEntry> = link
        .page_log()
        .await
        .map_err(fail)?
        .into_iter()
        .filter(|e| (e.level == "exception") == errors)
        .filter(|e| cutoff.is_none_or(|c| e.timestamp > c))
        .collect();
    if clear && let Some(newest) = entries.iter().map(|e| e.timestamp).reduce(f64::max) {
        if errors {
            state.errors_seen = Some(newest);
        } else {
            state.console_seen = Some(newest);
        }
        save_page(session, state).await?;
    }
    let lines: Vec<String> = entries
        .iter()
        .map(|e| {
            let at = match (&e.url, e.line) {
                (Some(u), Some(l)) => format!(" ({u}:{l})"),
                (Some(u), None) => format!(" ({u})"),
                _ => String::new(),
            };
            if errors {
                format!("{}{at}", e.text)
            } else {
                format!("[{}] {}{at}", e.level, e.text)
            }
        })
        .collect();
    let key = if errors { "errors" } else { "messages" };
    Ok((json!({ key: entries, "cleared": clear }), lines.join("\n")))
}

/// `wait` with a load state (`--load STATE` or `wait load STATE`): waits
/// for it first, then for the other conditions of [`super::wait`].
pub(super) async fn wait(
    link: &PageLink,
    what: &[String],
    text: Option<String>,
    url: Option<String>,
    load: Option<&str>,
    timeout: u64,
) -> Result<(Value, String), CliError> {
    let (load, rest) = match what {
        [kind, value] if kind == "load" => (Some(value.as_str()), &[][..]),
        _ => (load, what),
    };
    let Some(load) = load else {
        return super::wait(link, rest, text, url, timeout).await;
    };
    let wanted: LoadState = load
        .parse()
        .map_err(|e: lumen::LumenError| CliError::config(e.to_string()))?;
    let reached = link
        .wait_for_load(wanted, Duration::from_millis(timeout))
        .await
        .map_err(fail)?;
    if !reached {
        return Err(CliError::failure(format!(
            "gave up after {timeout} ms waiting for the page to reach {load:?}"
        )));
    }
    if rest.is_empty() && text.is_none() && url.is_none() {
        return Ok((json!({"ok": true, "load": load}), "ok".to_owned()));
    }
    super::wait(link, rest, text, url, timeout).await
}

//! [`PageLink`]'s page log and load states for one-shot commands (`lumen
//! browser console`, `errors`, `wait --load networkidle`), read from what
//! the browser itself keeps, so no process has to stay attached:
//!
//! - V8 keeps the console messages and uncaught exceptions of the page's
//!   current documents and sends them all again to every client that sends
//!   `Runtime.enable`; a link enables, takes what comes, and disables.
//! - Blink computes a frame's load states (`DOMContentLoaded`, `load`,
//!   `networkIdle`: no request for 500 ms after loading) for every document
//!   and tells them again to a client that turns lifecycle events on.

use std::time::{Duration, Instant};

use lumen_core::{LumenError, Result};
use serde::Serialize;
use serde_json::{Value, json};

use super::PageLink;
use crate::pagelog;

/// Characters kept of one entry's text.
const MAX_ENTRY: usize = 4000;

/// One console message or uncaught exception of the page.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct LogEntry {
    /// `log`, `info`, `warning`, `error`, `debug`… for a console message;
    /// `exception` for an uncaught exception.
    pub level: String,
    /// The text: the console call's arguments joined by spaces, or the
    /// exception's description (with its stack).
    pub text: String,
    /// When it was logged, in milliseconds since the Unix epoch.
    pub timestamp: f64,
    /// The script it came from, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its line there (1-based), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
}

/// A load state [`PageLink::wait_for_load`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadState {
    /// The document is parsed (`DOMContentLoaded`).
    DomContentLoaded,
    /// The document and its resources are loaded (`load`).
    Load,
    /// Loaded, and no request for 500 ms since (Blink's `networkIdle`).
    NetworkIdle,
}

impl LoadState {
    /// Its lifecycle event's name.
    fn event(self) -> &'static str {
        match self {
            Self::DomContentLoaded => "DOMContentLoaded",
            Self::Load => "load",
            Self::NetworkIdle => "networkIdle",
        }
    }
}

/// A console call's arguments as one line of text.
fn console_text(params: &Value) -> String {
    params["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            pagelog::describe(
                a.get("value"),
                a["unserializableValue"].as_str(),
                a["description"].as_str(),
                a["type"].as_str().unwrap_or("object"),
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The top stack frame's script and line (1-based).
fn origin(stack: &Value, url: &Value, line: &Value) -> (Option<String>, Option<i64>) {
    let top = &stack["callFrames"][0];
    let url = top["url"]
        .as_str()
        .or_else(|| url.as_str())
        .filter(|u| !u.is_empty())
        .map(str::to_owned);
    let line = top["lineNumber"].as_i64().or_else(|| line.as_i64());
    (url, line.map(|l| l + 1))
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_ENTRY {
        let mut end = MAX_ENTRY;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("… (cut)");
    }
    text
}

/// An event as a [`LogEntry`], if it is a console message or exception.
fn entry(ev: &Value) -> Option<LogEntry> {
    let p = &ev["params"];
    match ev["method"].as_str()? {
        "Runtime.consoleAPICalled" => {
            let (url, line) = origin(&p["stackTrace"], &Value::Null, &Value::Null);
            Some(LogEntry {
                level: p["type"].as_str().unwrap_or("log").to_owned(),
                text: cut(console_text(p)),
                timestamp: p["timestamp"].as_f64().unwrap_or(0.0),
                url,
                line,
            })
        }
        "Runtime.exceptionThrown" => {
            let d = &p["exceptionDetails"];
            let text = d["exception"]["description"]
                .as_str()
                .or_else(|| d["text"].as_str())
                .unwrap_or("an exception")
                .to_owned();
            let (url, line) = origin(&d["stackTrace"], &d["url"], &d["lineNumber"]);
            Some(LogEntry {
                level: "exception".to_owned(),
                text: cut(text),
                timestamp: p["timestamp"].as_f64().unwrap_or(0.0),
                url,
                line,
            })
        }
        _ => None,
    }
}

impl PageLink {
    /// The console messages and uncaught exceptions V8 keeps for the
    /// page's current documents (at most its last 1000), oldest first.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn page_log(&self) -> Result<Vec<LogEntry>> {
        self.wire.lock().await.events.clear();
        // V8 sends the kept entries before its answer to `Runtime.enable`.
        self.calls(vec![
            ("Runtime.enable", json!({})),
            ("Runtime.disable", json!({})),
        ])
        .await?;
        let mut wire = self.wire.lock().await;
        let events: Vec<Value> = wire.events.drain(..).collect();
        Ok(events.iter().filter_map(entry).collect())
    }

    /// Waits until the page's main document reaches `state`, for up to
    /// `wait`; `false` when it did not in time. A document that is
    /// replaced meanwhile (a navigation) starts the wait over.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn wait_for_load(&self, state: LoadState, wait: Duration) -> Result<bool> {
        let deadline = Instant::now() + wait;
        self.wire.lock().await.events.clear();
        self.call("Page.setLifecycleEventsEnabled", json!({ "enabled": true }))
            .await?;
        let main = self.target_id.clone();
        let wanted = state.event();
        let mut reached = false;
        let mut wire = self.wire.lock().await;
        loop {
            while let Some(ev) = wire.events.pop_front() {
                let p = &ev["params"];
                if ev["method"] != "Page.lifecycleEvent" || p["frameId"] != main.as_str() {
                    continue;
                }
                match p["name"].as_str() {
                    // A new document: what the old one reached is moot.
                    Some("init") => reached = false,
                    Some(name) if name == wanted => reached = true,
                    _ => {}
                }
            }
            if reached {
                break;
            }
            if !wire.pump(deadline, "waiting for the page to load").await? {
                break;
            }
        }
        drop(wire);
        let _ = self
            .call(
                "Page.setLifecycleEventsEnabled",
                json!({ "enabled": false }),
            )
            .await;
        Ok(reached)
    }
}

impl std::str::FromStr for LoadState {
    type Err = LumenError;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "domcontentloaded" => Ok(Self::DomContentLoaded),
            "load" => Ok(Self::Load),
            "networkidle" => Ok(Self::NetworkIdle),
            _ => Err(LumenError::invalid_data(
                "load state",
                format!("unknown load state {s:?}; use load, domcontentloaded or networkidle"),
            )),
        }
    }
}

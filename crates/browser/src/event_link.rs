//! [`EventLink`]: a browser-level CDP connection for a long-lived helper
//! that reacts to events as they come (`lumen browser`'s per-session
//! keeper: routes, emulation, the request log).
//!
//! Unlike [`PageLink`](crate::PageLink), which reads its socket only while
//! a call waits and keeps events for later, an `EventLink` hands every
//! message (reply or event, of any flattened session) to its owner in
//! order, and never waits for a reply itself: the owner sends, goes on
//! reading, and matches replies by id. Nothing is dropped, so an event
//! that blocks the page until it is answered (`Fetch.requestPaused`) is
//! always seen.

use std::time::Duration;

use lumen_core::{LumenError, Result};
use serde_json::Value;

use crate::ws::Wire;

/// One message from the browser.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to the command with this id: its result, or the
    /// browser's error message.
    Reply {
        /// The id [`EventLink::send`] returned.
        id: u64,
        /// The result, or why the browser refused the command.
        result: std::result::Result<Value, String>,
    },
    /// An event, with the flattened session it came from (`None`: the
    /// browser itself).
    Event {
        /// The `sessionId` of the message, if any.
        session: Option<String>,
        /// Such as `Target.attachedToTarget`.
        method: String,
        /// The event's parameters.
        params: Value,
    },
}

/// A browser-level CDP connection that yields every message.
pub struct EventLink {
    wire: Wire,
}

impl std::fmt::Debug for EventLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLink").finish_non_exhaustive()
    }
}

impl EventLink {
    /// Connects to the browser's DevTools WebSocket
    /// (`ws://host:port/devtools/browser/…`) within `timeout`.
    ///
    /// # Errors
    /// [`LumenError::BrowserDisconnected`] when the browser cannot be
    /// reached; [`LumenError::Config`] for a URL that is not a browser
    /// endpoint.
    pub async fn connect(browser_ws_url: &str, timeout: Duration) -> Result<Self> {
        if !browser_ws_url.contains("/devtools/browser/") {
            return Err(LumenError::config(
                "cdp_url",
                format!("{browser_ws_url} is not a browser DevTools WebSocket URL"),
            ));
        }
        Ok(Self {
            wire: Wire::open(browser_ws_url, timeout).await?,
        })
    }

    /// Sends a command to a flattened session (`None`: the browser) and
    /// returns its id at once; its [`Incoming::Reply`] comes later through
    /// [`next`](Self::next).
    ///
    /// # Errors
    /// [`LumenError::BrowserDisconnected`] when the socket fails.
    pub async fn send(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<u64> {
        self.wire.send_in(session, method, params).await
    }

    /// The next message. Cancel-safe (it can be one branch of a
    /// `tokio::select!`): a message is never half-read.
    ///
    /// # Errors
    /// [`LumenError::BrowserDisconnected`] when the browser closes the
    /// connection (it quit) or the socket fails.
    pub async fn next(&mut self) -> Result<Incoming> {
        loop {
            let Some(mut msg) = self.wire.read("browser events").await? else {
                continue;
            };
            if let Some(id) = msg.get("id").and_then(Value::as_u64) {
                let result = match msg.get("error") {
                    Some(err) => Err(err["message"]
                        .as_str()
                        .unwrap_or("the browser refused the command")
                        .to_owned()),
                    None => Ok(msg["result"].take()),
                };
                return Ok(Incoming::Reply { id, result });
            }
            if let Some(method) = msg.get("method").and_then(Value::as_str) {
                return Ok(Incoming::Event {
                    session: msg
                        .get("sessionId")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    method: method.to_owned(),
                    params: msg["params"].take(),
                });
            }
        }
    }
}

//! [`RequestFilter`]: a judge of every request the browser is about to
//! send, and [`BlockedRequest`], what a tab reports when one was refused.
//!
//! The session's policy (in `lumen-safety`) implements the trait; the
//! browser layer (in `lumen-browser`) installs it with
//! [`BrowserTab::install_request_filter`](crate::BrowserTab::install_request_filter)
//! and asks it about each request *before the request leaves*:
//! navigations, subframes, popups, redirects, form posts, scripts, images,
//! `fetch` calls. Neither crate knows the other; both know this trait.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// A filter's answer about one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "verdict",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum RequestVerdict {
    /// Send it.
    Allow,
    /// Refuse it before it is sent.
    Deny {
        /// Why, written for the model ("blocked.test is blocked in this
        /// session…").
        reason: String,
    },
}

impl RequestVerdict {
    /// Whether the request may be sent.
    pub fn is_allowed(&self) -> bool {
        matches!(self, RequestVerdict::Allow)
    }
}

/// Judges the requests of a browser before they are sent.
///
/// # Contract
/// - [`judge`](Self::judge) may **block** (it may resolve a host name with
///   the system resolver): call it off the async threads
///   (`tokio::task::spawn_blocking`). Implementations should cache
///   resolutions briefly, since a page makes many requests to one host.
/// - It must answer for every URL, including ones it cannot parse (deny
///   them or allow them; never panic).
/// - [`judge_address`](Self::judge_address) judges a request *after* the
///   browser connected, on the address it really connected to: the
///   backstop against a name that resolved to a public address when
///   judged and to a private one when the browser looked it up (DNS
///   rebinding). It must not block.
pub trait RequestFilter: Send + Sync {
    /// Whether a request to `url` may be sent.
    fn judge(&self, url: &str) -> RequestVerdict;

    /// Whether a request to `url` that the browser sent to `ip` was
    /// allowed to reach that address. The default allows everything.
    fn judge_address(&self, url: &str, ip: IpAddr) -> RequestVerdict {
        let _ = (url, ip);
        RequestVerdict::Allow
    }
}

/// A request the browser refused (or, for [`BlockKind::Rebinding`], cut
/// off after it connected), as an action's
/// [`EffectReceipt`](crate::EffectReceipt) reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedRequest {
    /// The URL the request was for.
    pub url: String,
    /// Why the filter refused it.
    pub reason: String,
    /// What kind of request it was.
    pub kind: BlockKind,
    /// The browser's resource type (`Document`, `Script`, `XHR`…), as
    /// reported.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_type: String,
}

impl BlockedRequest {
    /// The sentence the model reads about it.
    pub fn describe(&self) -> String {
        match self.kind {
            BlockKind::Navigation => format!(
                "A navigation to {} was blocked by policy before it was sent: {}",
                self.url, self.reason
            ),
            BlockKind::Subframe => format!(
                "A frame's request to {} was blocked by policy before it was sent: {}",
                self.url, self.reason
            ),
            BlockKind::Subresource => format!(
                "A request to {} was blocked by policy before it was sent: {}",
                self.url, self.reason
            ),
            BlockKind::Rebinding => format!(
                "The page reached {} at an address the policy forbids ({}); the tab was taken away from it",
                self.url, self.reason
            ),
        }
    }
}

/// What kind of request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BlockKind {
    /// A top-level document: a tab or popup navigating (link, form post,
    /// redirect, meta refresh, script).
    Navigation,
    /// A document in a frame inside a page.
    Subframe,
    /// Anything else a page loads (scripts, images, `fetch`…).
    Subresource,
    /// A response that came from a forbidden address although the name
    /// passed the filter when the request left (DNS rebinding); the tab
    /// was navigated away.
    Rebinding,
}

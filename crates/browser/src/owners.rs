//! Which browser context each frame of a browser belongs to.
//!
//! The request guard intercepts on the browser session, where a paused
//! request names only its frame. When tabs of several browser contexts
//! share a browser ([`CdpTab::open_isolated`](crate::CdpTab::open_isolated)),
//! each context's guard sees every context's requests and must judge (and
//! report to its model) only its own. This map is how it tells them apart:
//! every tab opened from one another shares it, and each claims the frames
//! of the pages it drives (a page's main frame is its target id, child
//! frames come with `Page.frameAttached`). A frame Chromium knows as a
//! target (a page, a popup, an out-of-process frame) is attributed by
//! asking it (`Target.getTargetInfo`).
//!
//! Attribution only ever lets a guard **skip** a request on positive
//! evidence that another context's frame made it; a frame nobody claimed
//! is judged by every guard (fail closed), and reported to no model while
//! other contexts share the browser.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cdp::Conn;

/// Frames remembered (the oldest are forgotten first; a forgotten frame is
/// judged by every guard, which is safe).
const CAPACITY: usize = 65_536;
/// How long a guard waits for another tab to claim a frame nobody has
/// claimed yet, while other contexts share the browser: a child frame's
/// `frameAttached` reaches its tab over that tab's own connection, in no
/// order with the paused request on this one.
const CLAIM_WAIT: Duration = Duration::from_millis(150);

/// Whose a paused request is, for one guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A frame of this guard's context.
    Mine,
    /// A frame of another context: that context's guard judges it.
    Other,
    /// Nobody claimed the frame (a worker, a frame of a page no tab
    /// drives): judged, reported only when no other context is in use.
    Unknown,
}

/// The frame → browser context map shared by the tabs of one browser
/// opened from one another.
#[derive(Debug, Default)]
pub(crate) struct FrameOwners {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    frames: HashMap<String, Arc<str>>,
    order: VecDeque<String>,
    /// Contexts with a live tab, counted.
    contexts: HashMap<Arc<str>, usize>,
}

impl FrameOwners {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `frame` belongs to `context`. The first claim stands:
    /// a frame never changes context.
    pub(crate) fn claim(&self, frame: &str, context: &Arc<str>) {
        if frame.is_empty() {
            return;
        }
        let mut s = self.state();
        if s.frames.contains_key(frame) {
            return;
        }
        s.frames.insert(frame.to_owned(), context.clone());
        s.order.push_back(frame.to_owned());
        while s.order.len() > CAPACITY {
            if let Some(old) = s.order.pop_front() {
                s.frames.remove(&old);
            }
        }
    }

    /// The context that claimed `frame`, if any did.
    pub(crate) fn owner(&self, frame: &str) -> Option<Arc<str>> {
        self.state().frames.get(frame).cloned()
    }

    /// Counts a tab of `context` in use until the seat is dropped.
    pub(crate) fn seat(self: &Arc<Self>, context: Arc<str>) -> Seat {
        *self.state().contexts.entry(context.clone()).or_default() += 1;
        Seat {
            owners: self.clone(),
            context,
        }
    }

    /// Whether a tab of a context other than `me` shares this map.
    pub(crate) fn shared_with_others(&self, me: &str) -> bool {
        self.state().contexts.keys().any(|c| &**c != me)
    }

    /// Whose `frame` is, seen from `me`'s guard (see the module docs).
    pub(crate) async fn attribute(&self, conn: &Conn, frame: &str, me: &Arc<str>) -> Owner {
        let judge = |owner: &str| match owner == &**me {
            true => Owner::Mine,
            false => Owner::Other,
        };
        if frame.is_empty() {
            return Owner::Unknown;
        }
        if let Some(owner) = self.owner(frame) {
            return judge(&owner);
        }
        // A target (a page, a popup, an out-of-process frame) has a
        // context Chromium can name.
        if let Some(context) = conn.context_of(frame).await {
            let context: Arc<str> = Arc::from(context);
            self.claim(frame, &context);
            return judge(&context);
        }
        if !self.shared_with_others(me) {
            return Owner::Unknown;
        }
        let deadline = Instant::now() + CLAIM_WAIT;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if let Some(owner) = self.owner(frame) {
                return judge(&owner);
            }
        }
        Owner::Unknown
    }
}

/// A tab of one context counted as in use ([`FrameOwners::seat`]).
#[derive(Debug)]
pub(crate) struct Seat {
    owners: Arc<FrameOwners>,
    context: Arc<str>,
}

impl Seat {
    /// The context of the seat's tab.
    pub(crate) fn context(&self) -> &str {
        &self.context
    }

    /// What the seat's tab claims its frames with.
    pub(crate) fn claims(&self) -> Claims {
        Claims {
            owners: self.owners.clone(),
            context: self.context.clone(),
        }
    }
}

/// One context's hold on the map: claims its frames, attributes requests.
#[derive(Debug, Clone)]
pub(crate) struct Claims {
    owners: Arc<FrameOwners>,
    context: Arc<str>,
}

impl Claims {
    /// Claims `frame` for this context.
    pub(crate) fn claim(&self, frame: &str) {
        self.owners.claim(frame, &self.context);
    }

    /// Whose `frame` is, for this context's guard.
    pub(crate) async fn attribute(&self, conn: &Conn, frame: &str) -> Owner {
        self.owners.attribute(conn, frame, &self.context).await
    }

    /// Whether other contexts use the browser too: a tab of another
    /// context sharing this map, or (for tabs that other processes or
    /// separate connections opened) any target Chromium places in another
    /// context. Unsure counts as shared.
    pub(crate) async fn shared_with_others(&self, conn: &Conn) -> bool {
        if self.owners.shared_with_others(&self.context) {
            return true;
        }
        let Ok(list) = conn
            .browser_raw("Target.getTargets", serde_json::json!({}))
            .await
        else {
            return true;
        };
        list["targetInfos"].as_array().is_none_or(|targets| {
            targets.iter().any(|t| {
                t["browserContextId"]
                    .as_str()
                    .is_some_and(|c| c != &*self.context)
            })
        })
    }

    /// The map, for the tabs opened from this one.
    pub(crate) fn owners(&self) -> &Arc<FrameOwners> {
        &self.owners
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut s = self.owners.state();
        if let Some(n) = s.contexts.get_mut(&self.context) {
            *n -= 1;
            if *n == 0 {
                s.contexts.remove(&self.context);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_keeps_its_first_owner_and_old_frames_are_forgotten() {
        let owners = FrameOwners::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("A"), Arc::from("B"));
        owners.claim("f1", &a);
        owners.claim("f1", &b);
        assert_eq!(owners.owner("f1").as_deref(), Some("A"));
        for i in 0..CAPACITY {
            owners.claim(&format!("x{i}"), &b);
        }
        assert_eq!(owners.owner("f1"), None, "the oldest is forgotten");
        assert_eq!(owners.state().frames.len(), CAPACITY);
    }

    #[test]
    fn seats_count_the_contexts_in_use() {
        let owners = Arc::new(FrameOwners::default());
        let a = owners.seat(Arc::from("A"));
        assert!(!owners.shared_with_others("A"));
        let b1 = owners.seat(Arc::from("B"));
        let b2 = owners.seat(Arc::from("B"));
        assert!(owners.shared_with_others("A"));
        drop(b1);
        assert!(owners.shared_with_others("A"));
        drop(b2);
        assert!(!owners.shared_with_others("A"));
        drop(a);
        assert!(owners.state().contexts.is_empty());
    }
}

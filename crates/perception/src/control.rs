//! Controlling a run from outside: cancel, pause/resume, stop, and guidance
//! delivered at the next step boundary.
//!
//! A [`RunControl`] is a cheap, cloneable handle shared by the loop and its
//! callers (the facade, the CLI's Ctrl-C handler, the server). Cancellation
//! is observed promptly: the loop races every model request and browser call
//! against [`RunControl::cancelled`], and dropping those futures aborts them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lumen_core::{BrowserTab, HandoffTrigger};
use tokio::sync::{oneshot, watch};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Flags {
    cancelled: Option<String>,
    paused: bool,
    stop: bool,
}

/// Handle to steer a running loop.
#[derive(Debug, Clone)]
pub struct RunControl {
    flags: Arc<watch::Sender<Flags>>,
    guidance: Arc<Mutex<Vec<String>>>,
    handoff: Arc<watch::Sender<Option<PendingHandoff>>>,
    /// Where the person's "done" goes (the loop waits on the other end).
    finish: Arc<Mutex<Option<Answer>>>,
    /// Hand-overs opened so far.
    handoffs: Arc<AtomicU64>,
    /// Held shared while a person's input goes into the page, taken
    /// exclusively by the loop once a hand-over closed: no input lands
    /// after the agent drives again.
    live_input: Arc<tokio::sync::RwLock<()>>,
}

/// The open hand-over's number and where the person's note goes.
type Answer = (u64, oneshot::Sender<Option<String>>);

/// A run waiting for a person: what they are asked, and the tab they act
/// in (the one the agent drives).
#[derive(Clone)]
pub struct PendingHandoff {
    /// Numbers the run's hand-overs, from 1.
    pub id: u64,
    /// What the person is asked to do.
    pub reason: String,
    /// Why the run handed over.
    pub trigger: HandoffTrigger,
    /// The driven tab: a live view streams it and sends input into it.
    pub tab: Arc<dyn BrowserTab>,
}

impl std::fmt::Debug for PendingHandoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingHandoff")
            .field("id", &self.id)
            .field("reason", &self.reason)
            .field("trigger", &self.trigger)
            .finish_non_exhaustive()
    }
}

impl Default for RunControl {
    fn default() -> Self {
        Self::new()
    }
}

impl RunControl {
    /// A fresh handle: running, not paused.
    pub fn new() -> Self {
        Self {
            flags: Arc::new(watch::Sender::new(Flags::default())),
            guidance: Arc::default(),
            handoff: Arc::new(watch::Sender::new(None)),
            finish: Arc::default(),
            handoffs: Arc::default(),
            live_input: Arc::default(),
        }
    }

    /// The hand-over waiting for a person, if the run is waiting for one.
    pub fn handoff(&self) -> Option<PendingHandoff> {
        self.handoff.borrow().clone()
    }

    /// Resolves with the next hand-over (at once when one is waiting).
    pub async fn handoff_opened(&self) -> PendingHandoff {
        let mut rx = self.handoff.subscribe();
        loop {
            if let Some(h) = rx.borrow_and_update().clone() {
                return h;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Resolves once hand-over `id` is no longer waiting (finished, timed
    /// out, or the run cancelled).
    pub async fn handoff_closed(&self, id: u64) {
        let mut rx = self.handoff.subscribe();
        loop {
            if rx.borrow_and_update().as_ref().is_none_or(|h| h.id != id) {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The person is done with hand-over `id` (any waiting one with
    /// `None`); `note` goes to the model. `false` when that hand-over is not
    /// waiting (already finished, or none asked).
    pub fn finish_handoff(&self, id: Option<u64>, note: Option<String>) -> bool {
        let mut finish = self.finish.lock().unwrap_or_else(|p| p.into_inner());
        match finish.take() {
            Some((open, tx)) if id.is_none_or(|id| id == open) => {
                self.handoff.send_replace(None);
                tx.send(note).is_ok()
            }
            other => {
                *finish = other;
                false
            }
        }
    }

    /// Runs `send` (a person's input into the page) if hand-over `id` is
    /// still waiting; the hand-over's end waits until it has landed.
    /// `None`, sending nothing, when the hand-over is over.
    pub async fn live_input<T>(&self, id: u64, send: impl Future<Output = T>) -> Option<T> {
        let _held = self.live_input.read().await;
        if self.handoff().is_none_or(|h| h.id != id) {
            return None;
        }
        Some(send.await)
    }

    /// Waits until every input sent during a hand-over that has just
    /// closed has landed (later ones find it closed).
    pub(crate) async fn drain_live_input(&self) {
        drop(self.live_input.write().await);
    }

    /// Opens a hand-over (the loop calls this); the receiver resolves with
    /// the person's note when they finish.
    pub(crate) fn open_handoff(
        &self,
        reason: String,
        trigger: HandoffTrigger,
        tab: Arc<dyn BrowserTab>,
    ) -> (u64, oneshot::Receiver<Option<String>>) {
        let (tx, rx) = oneshot::channel();
        let mut finish = self.finish.lock().unwrap_or_else(|p| p.into_inner());
        let id = self.handoffs.fetch_add(1, Ordering::Relaxed) + 1;
        *finish = Some((id, tx));
        self.handoff.send_replace(Some(PendingHandoff {
            id,
            reason,
            trigger,
            tab,
        }));
        (id, rx)
    }

    /// Closes hand-over `id` without a person (timed out, cancelled).
    pub(crate) fn close_handoff(&self, id: u64) {
        let mut finish = self.finish.lock().unwrap_or_else(|p| p.into_inner());
        if finish.as_ref().is_some_and(|(n, _)| *n == id) {
            *finish = None;
        }
        self.handoff
            .send_if_modified(|h| match h.as_ref().is_some_and(|h| h.id == id) {
                true => {
                    *h = None;
                    true
                }
                false => false,
            });
    }

    /// Cancels the run: the in-flight model request and browser call are
    /// abandoned and the run ends with status `cancelled`. The first reason
    /// given wins.
    pub fn cancel(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.flags.send_modify(|f| {
            f.cancelled.get_or_insert(reason);
        });
    }

    /// The cancellation reason, once cancelled.
    pub fn cancel_reason(&self) -> Option<String> {
        self.flags.borrow().cancelled.clone()
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.flags.borrow().cancelled.is_some()
    }

    /// Resolves when the run is cancelled (immediately if it already is).
    pub async fn cancelled(&self) -> String {
        let mut rx = self.flags.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().cancelled.clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                // The sender lives as long as any handle; unreachable in practice.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Pauses the run at the next step boundary.
    pub fn pause(&self) {
        self.flags.send_modify(|f| f.paused = true);
    }

    /// Resumes a paused run.
    pub fn resume(&self) {
        self.flags.send_modify(|f| f.paused = false);
    }

    /// Whether the run is paused.
    pub fn is_paused(&self) -> bool {
        self.flags.borrow().paused
    }

    /// Asks the run to end after the current step (status `cancelled` with
    /// reason `stopped`), without aborting anything in flight.
    pub fn stop(&self) {
        self.flags.send_modify(|f| f.stop = true);
    }

    /// Whether a stop was requested.
    pub fn is_stopped(&self) -> bool {
        self.flags.borrow().stop
    }

    /// Resolves once the run is cancelled or asked to stop.
    pub async fn halted(&self) {
        let mut rx = self.flags.subscribe();
        loop {
            {
                let f = rx.borrow_and_update();
                if f.cancelled.is_some() || f.stop {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Waits while paused; returns early when cancelled or stopped.
    pub async fn wait_while_paused(&self) {
        let mut rx = self.flags.subscribe();
        loop {
            {
                let f = rx.borrow_and_update();
                if !f.paused || f.cancelled.is_some() || f.stop {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Queues guidance for the model, delivered at the next step boundary.
    pub fn inject_guidance(&self, text: impl Into<String>) {
        if let Ok(mut g) = self.guidance.lock() {
            g.push(text.into());
        }
    }

    /// How many guidance messages wait for the next step.
    pub fn queued_guidance(&self) -> usize {
        self.guidance.lock().map(|g| g.len()).unwrap_or(0)
    }

    /// Takes all queued guidance (the loop calls this once per step).
    pub fn take_guidance(&self) -> Vec<String> {
        self.guidance
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn cancel_wakes_waiters_and_first_reason_wins() {
        let c = RunControl::new();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.cancelled().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        c.cancel("user_explicit_cancel");
        c.cancel("timeout");
        assert_eq!(waiter.await.unwrap(), "user_explicit_cancel");
        assert_eq!(c.cancel_reason().as_deref(), Some("user_explicit_cancel"));
        assert_eq!(
            c.cancelled().await,
            "user_explicit_cancel",
            "already cancelled resolves at once"
        );
    }

    /// A person's input that started before the hand-over closed lands
    /// before the loop goes on; input after the close is not sent.
    #[tokio::test]
    async fn a_closed_handoff_waits_for_input_in_flight_and_refuses_more() {
        let c = RunControl::new();
        let tab: Arc<dyn BrowserTab> = Arc::new(crate::fake::FakeTab::new("about:blank"));
        let (id, _answer) = c.open_handoff("code".into(), HandoffTrigger::Model, tab);
        let (landed_tx, landed_rx) = oneshot::channel::<()>();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let input = tokio::spawn({
            let c = c.clone();
            async move {
                c.live_input(id, async move {
                    let _ = release_rx.await;
                    let _ = landed_tx.send(());
                })
                .await
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.close_handoff(id);
        let drained = tokio::spawn({
            let c = c.clone();
            async move { c.drain_live_input().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !drained.is_finished(),
            "the loop waits for the input in flight"
        );
        release_tx.send(()).unwrap();
        drained.await.unwrap();
        assert!(landed_rx.await.is_ok(), "it landed before the loop went on");
        assert_eq!(input.await.unwrap(), Some(()));
        assert_eq!(
            c.live_input(id, async {}).await,
            None,
            "none after the close"
        );
    }

    #[tokio::test]
    async fn pause_blocks_until_resume_or_cancel() {
        let c = RunControl::new();
        c.wait_while_paused().await; // not paused: returns at once
        c.pause();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.wait_while_paused().await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!waiter.is_finished());
        c.resume();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();

        c.pause();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.wait_while_paused().await }
        });
        c.cancel("x");
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn guidance_is_delivered_once_in_order() {
        let c = RunControl::new();
        let other = c.clone();
        c.inject_guidance("first");
        other.inject_guidance("second");
        assert_eq!(c.take_guidance(), vec!["first", "second"]);
        assert!(c.take_guidance().is_empty());
        c.stop();
        assert!(c.is_stopped());
    }
}

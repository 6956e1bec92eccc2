//! Controlling a run from outside: cancel, pause/resume, stop, and guidance
//! delivered at the next step boundary.
//!
//! A [`RunControl`] is a cheap, cloneable handle shared by the loop and its
//! callers (the facade, the CLI's Ctrl-C handler, the server). Cancellation
//! is observed promptly: the loop races every model request and browser call
//! against [`RunControl::cancelled`], and dropping those futures aborts them.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

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
        }
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

//! Settling instead of sleeping: waits for the navigation to commit, the
//! network to go quiet, short page timers to fire and the layout to hold
//! still, and answers at once on a page that is already settled. With
//! [`SettleOptions::stable_at_capture`], the last check (a frame of
//! stillness after a recent change) is left to the next screenshot, which
//! compares the page before and after capturing, or to the next input.

use std::time::{Duration, Instant};

use lumen_core::{LumenError, Result, SettleOptions, SettleReport};
use serde::Deserialize;

use super::{CdpTab, PageCtx, is_fatal, lock};
use crate::scripts::{PAGE_MARK, SETTLE_PROBE};
use crate::tracker::Ev;

/// Settling stops waiting for pending page timers after this long.
const TIMER_WAIT_CAP: Duration = Duration::from_millis(2000);

#[derive(Debug, Deserialize)]
struct SettleProbe {
    stable: bool,
    pending: u32,
    #[serde(rename = "nextIn")]
    next_in: Option<f64>,
    /// The page's [`PAGE_MARK`] when the frame's check was left for later.
    mark: Option<String>,
}

/// A settle whose last check was left for later: the page's mark then, and
/// the options to finish settling with.
#[derive(Debug, Clone)]
pub(crate) struct Unsettled {
    mark: String,
    options: SettleOptions,
}

impl CdpTab {
    /// Waits until the page is ready (see [`BrowserTab::settle`](lumen_core::BrowserTab::settle)).
    pub(super) async fn wait_until_settled(&self, options: &SettleOptions) -> Result<SettleReport> {
        let ctx = self.active();
        self.bring_to_front(&ctx).await?;
        // Settling again supersedes a check left for later.
        lock(&ctx.unsettled).take();
        let probe_call = format!(
            "{SETTLE_PROBE}({}, () => {PAGE_MARK})",
            options.stable_at_capture
        );
        let start = Instant::now();
        let deadline = start + options.max_wait;
        let seq = ctx.log.lock().seq();
        let mut navigated = false;
        let mut expect_nav = options.expect_navigation;
        let timed_out = loop {
            if let Some(reason) = self.conn().dead_reason() {
                return Err(LumenError::disconnected(reason));
            }
            let now = Instant::now();
            if now >= deadline {
                break true;
            }
            let (nav_busy, awaiting_dom, quiet_for, committed) = {
                let log = ctx.log.lock();
                let committed = log
                    .since(seq)
                    .any(|e| matches!(e, Ev::NavCommitted | Ev::NavWithinDocument));
                (
                    log.nav_pending,
                    log.awaiting_dom,
                    log.quiet_for(now),
                    committed,
                )
            };
            navigated |= committed;
            if committed {
                expect_nav = false;
            }
            let left = deadline - now;
            if nav_busy || (expect_nav && !committed && now - start < Duration::from_millis(500)) {
                ctx.log
                    .wait_change(left.min(Duration::from_millis(100)))
                    .await;
                continue;
            }
            if awaiting_dom {
                // A document restored from the back-forward cache never
                // fires DOMContentLoaded again: ask the page itself.
                match self.eval_in(&ctx, "document.readyState").await {
                    Ok(v) if v != "loading" => ctx.log.lock().awaiting_dom = false,
                    Err(e) if is_fatal(&e) => return Err(e),
                    _ => {
                        ctx.log
                            .wait_change(left.min(Duration::from_millis(50)))
                            .await;
                        continue;
                    }
                }
            }
            if quiet_for < options.network_quiet {
                let need = options.network_quiet - quiet_for;
                ctx.log.wait_change(need.min(left)).await;
                continue;
            }
            let probe = tokio::time::timeout(left, self.eval_in(&ctx, &probe_call)).await;
            let probe: SettleProbe = match probe {
                Err(_) => break true,
                Ok(Err(e)) if is_fatal(&e) => return Err(e),
                // The document went away under us (navigation), or the page
                // broke the probe: pause briefly and go round.
                Ok(Err(_)) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                Ok(Ok(v)) => match serde_json::from_value(v) {
                    Ok(p) => p,
                    Err(_) => break false,
                },
            };
            // Something network- or navigation-wise happened meanwhile?
            // Take in the events Chromium has sent so far first.
            self.flush(&ctx).await;
            let changed_meanwhile = {
                let log = ctx.log.lock();
                log.nav_pending || log.quiet_for(Instant::now()) < options.network_quiet
            };
            if changed_meanwhile || !probe.stable {
                continue;
            }
            let timers_matter = start.elapsed() < TIMER_WAIT_CAP;
            if probe.pending > 0 && timers_matter {
                let wait_ms = probe.next_in.unwrap_or(16.0).clamp(4.0, 100.0);
                let wait = Duration::from_millis(wait_ms as u64)
                    .min(deadline.saturating_duration_since(Instant::now()));
                tokio::time::sleep(wait).await;
                continue;
            }
            if let Some(mark) = probe.mark {
                *lock(&ctx.unsettled) = Some(Unsettled {
                    mark,
                    options: SettleOptions {
                        expect_navigation: false,
                        stable_at_capture: false,
                        ..*options
                    },
                });
            }
            break false;
        };
        Ok(SettleReport {
            waited_ms: start.elapsed().as_millis() as u64,
            timed_out,
            navigated,
        })
    }

    /// Finishes a settle that left its frame's check for later, before
    /// input: the page holds still for a frame first, as it would have.
    pub(super) async fn finish_settling(&self, ctx: &PageCtx) -> Result<()> {
        let pending = lock(&ctx.unsettled).take();
        if let Some(u) = pending {
            self.settle_again(&u).await?;
        }
        Ok(())
    }

    /// Whether the page still is as the settle that left its frame's check
    /// for later saw it. A page that cannot say counts as changed.
    pub(super) async fn still_as_settled(&self, ctx: &PageCtx, u: &Unsettled) -> Result<bool> {
        match self.eval_in(ctx, PAGE_MARK).await {
            Ok(v) => Ok(v.as_str() == Some(u.mark.as_str())),
            Err(e) if is_fatal(&e) => Err(e),
            Err(_) => Ok(false),
        }
    }

    /// Settles with the options of a check left for later.
    pub(super) async fn settle_again(&self, u: &Unsettled) -> Result<SettleReport> {
        self.wait_until_settled(&u.options).await
    }
}

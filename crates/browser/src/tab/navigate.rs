//! Navigation: going to a URL, back, forward and reloading, each waiting
//! for the commit and the load event (bounded), settling, and reporting.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lumen_core::{ActionOutcome, EffectReceipt, LumenError, Result};

use super::{CdpTab, PageCtx, is_fatal, page_level};
use crate::cdp::{CallError, Conn, PAGE_BUSY};
use crate::protocol::pages;
use crate::tracker::Ev;
use crate::ws::Wire;

/// Marks one of our navigation commands in flight on a page for as long
/// as it lives (`PageCtx::leaving`): a `beforeunload` handler cannot
/// trap a goto, back, forward or reload (nor the loop's undo, which uses
/// them).
struct Leaving(Arc<std::sync::atomic::AtomicUsize>);

impl Leaving {
    fn start(ctx: &PageCtx) -> Self {
        ctx.leaving
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(ctx.leaving.clone())
    }
}

impl Drop for Leaving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl CdpTab {
    /// Waits (up to `max`) for a navigation after event `seq` to commit.
    async fn wait_for_navigation(&self, ctx: &PageCtx, seq: u64, max: Duration) -> bool {
        let deadline = Instant::now() + max;
        loop {
            {
                let log = ctx.log.lock();
                let committed = log
                    .since(seq)
                    .any(|e| matches!(e, Ev::NavCommitted | Ev::NavWithinDocument));
                if committed && !log.nav_pending {
                    return true;
                }
            }
            if Instant::now() >= deadline || self.conn().dead_reason().is_some() {
                return false;
            }
            ctx.log
                .wait_change(deadline.saturating_duration_since(Instant::now()))
                .await;
        }
    }

    /// Navigation actions share this: run the command, wait for the commit
    /// and the load event (bounded), settle, and report.
    async fn navigate_with<F, Fut>(&self, what: &str, f: F) -> Result<ActionOutcome>
    where
        F: FnOnce(Arc<PageCtx>) -> Fut,
        Fut: Future<Output = Result<Option<String>>>,
    {
        let ctx = self.active();
        let _leaving = Leaving::start(&ctx);
        let mark = self.blocked_mark();
        let seq = ctx.log.lock().seq();
        let url_before = ctx.log.lock().url.clone();
        let url_before = if url_before.is_empty() {
            self.current_url().await.unwrap_or_default()
        } else {
            url_before
        };
        match f(ctx.clone()).await {
            Ok(None) => {}
            Ok(Some(problem)) => {
                let mut out = ActionOutcome::failed(problem).with_effect(EffectReceipt {
                    url_before: Some(url_before.clone()),
                    url_after: Some(url_before),
                    ..EffectReceipt::default()
                });
                self.note_blocked(&ctx, &mut out, mark).await;
                return Ok(out);
            }
            Err(e) => return page_level(e),
        }
        let nav_timeout = self.shared.options.navigation_timeout;
        let committed = self.wait_for_navigation(&ctx, seq, nav_timeout).await;
        if let Some(reason) = self.conn().dead_reason() {
            return Err(LumenError::disconnected(reason));
        }
        let mut hints = Vec::new();
        if committed {
            // The load event (or a document that is already complete, as
            // after a back-forward cache restore), bounded.
            let deadline = Instant::now() + nav_timeout;
            loop {
                let loaded = ctx
                    .log
                    .lock()
                    .since(seq)
                    .any(|e| matches!(e, Ev::Load | Ev::NavWithinDocument));
                if loaded {
                    break;
                }
                match self.eval_in(&ctx, "document.readyState").await {
                    Ok(v) if v == "complete" => break,
                    Err(e) if is_fatal(&e) => return Err(e),
                    _ => {}
                }
                if Instant::now() >= deadline {
                    hints.push(format!(
                        "The page was still loading after {:.0}s; it is used as it is.",
                        nav_timeout.as_secs_f64()
                    ));
                    break;
                }
                ctx.log
                    .wait_change(
                        deadline
                            .saturating_duration_since(Instant::now())
                            .min(Duration::from_millis(100)),
                    )
                    .await;
            }
            let settle = self.wait_until_settled(&self.shared.options.settle).await?;
            if settle.timed_out {
                hints.push("The page did not fully settle; it may still be changing.".to_owned());
            }
        }
        let url_after = self.current_url().await?;
        let dialog = ctx.log.lock().since(seq).find_map(|e| match e {
            Ev::Dialog(d) => Some(d.clone()),
            _ => None,
        });
        if let Some(d) = &dialog {
            hints.push(format!(
                "A {} dialog appeared (\"{}\") and was {}.",
                d.kind,
                d.message,
                if d.accepted { "accepted" } else { "dismissed" }
            ));
        }
        let receipt = EffectReceipt {
            url_before: Some(url_before),
            url_after: Some(url_after.clone()),
            navigated: committed,
            dialog,
            page_changed: Some(committed),
            ..EffectReceipt::default()
        };
        let mut out = if committed {
            ActionOutcome::ok()
        } else {
            ActionOutcome::failed(format!(
                "{what} did not navigate within {:.0}s (still at {url_after})",
                nav_timeout.as_secs_f64()
            ))
        };
        out = out.with_effect(receipt);
        out.hints.extend(hints);
        self.note_blocked(&ctx, &mut out, mark).await;
        Ok(out)
    }

    /// Goes `delta` steps through the tab's history (-1 back, 1 forward).
    pub(super) async fn history_step(&self, delta: i64) -> Result<ActionOutcome> {
        let what = if delta < 0 { "back" } else { "forward" };
        let conn = self.shared.conn.clone();
        self.navigate_with(what, |ctx| async move {
            let (method, params) = pages::history();
            let history = conn.page_raw(&ctx.page, method, params).await?;
            let Some(id) = pages::history_entry(&history, delta) else {
                return Ok(Some(format!(
                    "cannot go {what}: there is no {} page in this tab's history",
                    if delta < 0 { "previous" } else { "next" }
                )));
            };
            let (method, params) = pages::go_to_entry(id);
            conn.page_raw(&ctx.page, method, params).await?;
            Ok(None)
        })
        .await
    }

    /// Navigates to a URL.
    pub(super) async fn open_url(&self, url: &str) -> Result<ActionOutcome> {
        let url = url.trim().to_owned();
        if url.is_empty() {
            return Ok(ActionOutcome::failed("no URL given"));
        }
        let conn = self.shared.conn.clone();
        let ws_url = self.shared.ws_url.clone();
        let timeout = self.shared.options.navigation_timeout;
        self.navigate_with("goto", |ctx| async move {
            match send_navigate(&conn, &ws_url, &ctx, &url, timeout).await {
                Ok(v) => {
                    Ok(pages::navigate_error(&v)
                        .map(|e| format!("navigation to {url} failed: {e}")))
                }
                Err(CallError::Protocol { message, .. }) => {
                    Ok(Some(format!("navigation to {url} failed: {message}")))
                }
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Reloads the page.
    pub(super) async fn reload_page(&self) -> Result<ActionOutcome> {
        let conn = self.shared.conn.clone();
        self.navigate_with("reload", |ctx| async move {
            let (method, params) = pages::reload();
            conn.page_raw(&ctx.page, method, params).await?;
            Ok(None)
        })
        .await
    }
}

/// Sends a goto's `Page.navigate` to the page of `ctx` and returns its
/// answer, which Chromium gives at the commit (or the failure), within
/// `timeout`.
///
/// Sent through chromiumoxide's page handle, `Page.navigate` is held back
/// until the page's load event, under a 30 s cap no setting changes: a
/// page that took longer to load (40 MB of text on a loaded machine)
/// failed its goto although the tab waits for the commit and the load
/// itself, each bounded by the navigation timeout. So the command goes
/// over a connection of its own to the browser, in a flattened session
/// attached for it alone (closing the socket detaches it); a browser that
/// refuses a second client (a gateway) gets chromiumoxide's way.
async fn send_navigate(
    conn: &Conn,
    browser_ws_url: &str,
    ctx: &PageCtx,
    url: &str,
    timeout: Duration,
) -> std::result::Result<serde_json::Value, CallError> {
    let deadline = Instant::now() + timeout;
    let (method, params) = pages::navigate(url);
    let Ok(mut wire) = Wire::open(browser_ws_url, conn.call_timeout.min(timeout)).await else {
        return conn
            .page_raw_within(&ctx.page, method, params, timeout)
            .await;
    };
    let answer = async {
        let (attach, attach_params) = pages::attach_flat(&ctx.id);
        let id = wire.send(attach, attach_params).await?;
        let attached = wire.reply(id, attach, deadline).await?;
        let session = attached["sessionId"].as_str().unwrap_or_default();
        let id = wire.send_in(Some(session), method, params).await?;
        wire.reply(id, method, deadline).await
    };
    let answer = tokio::select! {
        biased;
        reason = conn.died() => return Err(CallError::Disconnected(reason)),
        answer = answer => answer,
    };
    match answer {
        Ok(v) => Ok(v),
        Err(LumenError::Script { message }) => Err(CallError::Protocol {
            code: -32000,
            message,
        }),
        // No answer in time: a page that does not commit, unless the
        // browser itself is gone.
        Err(e) if conn.browser_alive().await => Err(CallError::Protocol {
            code: PAGE_BUSY,
            message: format!(
                "{method}: no answer within {:.0}s ({e})",
                timeout.as_secs_f64()
            ),
        }),
        Err(e) => Err(CallError::Disconnected(e.to_string())),
    }
}

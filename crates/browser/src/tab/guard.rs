//! The request guard: every request of the browser is judged by the
//! session's [`RequestFilter`] before it is sent, with CDP `Fetch`
//! interception on the **browser** session (one `Fetch.enable` there
//! pauses the requests of every target: tabs, popups, out-of-process
//! frames, workers), and refused ones are failed before they leave.
//!
//! - Allowed: `Fetch.continueRequest`. Refused: `Fetch.failRequest` with
//!   `BlockedByClient`: a refused navigation shows Chromium's "blocked"
//!   error page (`chrome-error://chromewebdata/`), which the loop's
//!   after-effect check then takes the tab back from. (`Aborted` would
//!   leave the tab on its page, but a `Page.navigate` whose redirect is
//!   aborted never answers in Chromium 156, and the next one hangs behind
//!   it.)
//! - Every paused request is answered, whatever happens: a filter that
//!   panics or takes longer than [`JUDGE_DEADLINE`] refuses it (fail
//!   closed); an event chromiumoxide cannot parse arrives raw
//!   ([`crate::cdp::UnparsedPauses`]).
//! - Refusals go to a bounded log the receipts drain
//!   ([`CdpTab::note_blocked`]).
//! - Several browser contexts in one browser: each context's guard sees
//!   every request, and leaves alone those it knows to be another
//!   context's (`crate::owners`: a frame claimed by a tab of that context,
//!   or a target Chromium places there), which that context's own guard
//!   judges. A request of no known frame is judged by every guard (fail
//!   closed) and, while other contexts share the browser, reported to no
//!   model.
//! - The DNS-rebinding backstop: each driven page's responses are checked
//!   on the address the browser really connected to
//!   (`Network.responseReceived`'s `remoteIPAddress`,
//!   [`RequestFilter::judge_address`]); a refused one takes the page to
//!   `about:blank` and is reported.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::fetch::EventRequestPaused;
use chromiumoxide::cdp::browser_protocol::network::EventResponseReceived;
use futures::StreamExt as _;
use lumen_core::{
    ActionOutcome, BlockKind, BlockedRequest, EffectReceipt, RequestFilter, RequestVerdict, Result,
};
use tokio::task::JoinHandle;

use super::{CdpTab, PageCtx, lock};
use crate::cdp::Conn;
use crate::owners::Owner;

/// Longest time a filter may take over one request (a slow DNS lookup)
/// before the request is refused.
pub(crate) const JUDGE_DEADLINE: Duration = Duration::from_secs(5);
/// Refusals kept for the receipts.
const LOG_CAPACITY: usize = 256;
/// The scheme of the page Chromium commits for a refused navigation
/// (`chrome-error://chromewebdata/`).
const ERROR_PAGE_SCHEME: &str = "chrome-error:";
/// Refusals one receipt reports.
const PER_RECEIPT: usize = 16;

/// One paused request, from the typed event or the raw fallback.
#[derive(Debug)]
struct Paused {
    id: String,
    url: String,
    resource_type: String,
    frame_id: String,
}

impl Paused {
    fn from_typed(e: &EventRequestPaused) -> Self {
        Self {
            id: e.request_id.inner().clone(),
            url: e.request.url.clone(),
            resource_type: e.resource_type.as_ref().to_owned(),
            frame_id: e.frame_id.inner().clone(),
        }
    }

    fn from_raw(v: &serde_json::Value) -> Option<Self> {
        let p = &v["params"];
        Some(Self {
            id: p["requestId"].as_str()?.to_owned(),
            url: p["request"]["url"].as_str().unwrap_or_default().to_owned(),
            resource_type: p["resourceType"].as_str().unwrap_or_default().to_owned(),
            frame_id: p["frameId"].as_str().unwrap_or_default().to_owned(),
        })
    }
}

/// What [`RequestGuard::take_unreported`] found.
struct Unreported {
    before: Vec<BlockedRequest>,
    during: Vec<BlockedRequest>,
    /// A navigation of the driven page was refused: Chromium commits its
    /// error page next.
    page_left: bool,
}

/// How long a receipt waits for the error page of a refused navigation
/// of its page to commit.
const ERROR_PAGE_WAIT: Duration = Duration::from_secs(5);

/// The installed filter, the refusal log and the tasks feeding them.
pub(crate) struct RequestGuard {
    filter: RwLock<Arc<dyn RequestFilter>>,
    /// Refusals by sequence number, each with the frame it was for.
    log: Mutex<VecDeque<(u64, BlockedRequest, String)>>,
    next_seq: AtomicU64,
    /// The last sequence number a receipt reported.
    reported: AtomicU64,
    /// Requests answered and the total time spent judging them (µs).
    pub(crate) judged: AtomicU64,
    pub(crate) judge_micros: AtomicU64,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Pages whose responses are watched (by target id).
    watched: Mutex<Vec<String>>,
    /// Tells this tab's context's requests from other contexts' in a
    /// shared browser (`None`: every request counts as ours).
    claims: Option<crate::owners::Claims>,
}

impl std::fmt::Debug for RequestGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestGuard")
            .field("judged", &self.judged.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        for t in lock(&self.tasks).iter() {
            t.abort();
        }
    }
}

impl RequestGuard {
    fn filter(&self) -> Arc<dyn RequestFilter> {
        self.filter
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn record(&self, blocked: BlockedRequest, frame_id: String) {
        tracing::info!(url = %blocked.url, kind = ?blocked.kind, "request blocked: {}", blocked.reason);
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let mut log = lock(&self.log);
        log.push_back((seq, blocked, frame_id));
        while log.len() > LOG_CAPACITY {
            log.pop_front();
        }
    }

    /// Refusals no receipt has reported yet, split at `since` (the
    /// sequence number when the action started): those before it and
    /// those during it, at most [`PER_RECEIPT`] each (the newest); all are
    /// marked reported. With them, whether one was a navigation of the
    /// tab whose main frame is `page` (its error page is on the way).
    fn take_unreported(&self, since: u64, page: &str) -> Unreported {
        let log = lock(&self.log);
        let from = self.reported.load(Ordering::Relaxed);
        let fresh: Vec<&(u64, BlockedRequest, String)> =
            log.iter().filter(|(s, ..)| *s > from).collect();
        if let Some((last, ..)) = fresh.last() {
            self.reported.store(*last, Ordering::Relaxed);
        }
        let page_left = fresh
            .iter()
            .any(|(_, b, frame)| b.kind == BlockKind::Navigation && frame == page);
        let newest = |list: Vec<&(u64, BlockedRequest, String)>| {
            let skip = list.len().saturating_sub(PER_RECEIPT);
            list.into_iter()
                .skip(skip)
                .map(|(_, b, _)| b.clone())
                .collect::<Vec<_>>()
        };
        let (before, during): (Vec<_>, Vec<_>) = fresh.into_iter().partition(|(s, ..)| *s <= since);
        Unreported {
            before: newest(before),
            during: newest(during),
            page_left,
        }
    }
}

impl CdpTab {
    /// Installs `filter` on the whole browser (see the module docs);
    /// installing again swaps the filter.
    pub(super) async fn install_filter(&self, filter: Arc<dyn RequestFilter>) -> Result<bool> {
        if let Some(guard) = self.shared.request_guard.get() {
            *guard.filter.write().unwrap_or_else(|p| p.into_inner()) = filter;
            return Ok(true);
        }
        let conn = self.shared.conn.clone();
        let guard = Arc::new(RequestGuard {
            filter: RwLock::new(filter),
            log: Mutex::default(),
            next_seq: AtomicU64::new(0),
            reported: AtomicU64::new(0),
            judged: AtomicU64::new(0),
            judge_micros: AtomicU64::new(0),
            tasks: Mutex::default(),
            watched: Mutex::default(),
            claims: self.shared.seat.as_ref().map(crate::owners::Seat::claims),
        });
        let mut typed = conn
            .guard(
                "event_listener",
                conn.call_timeout,
                conn.browser.event_listener::<EventRequestPaused>(),
            )
            .await?;
        let (tx, mut raw) = tokio::sync::mpsc::unbounded_channel();
        *lock(&conn.unparsed_pauses) = Some(tx);
        let weak = Arc::downgrade(&guard);
        let task_conn = conn.clone();
        let task = tokio::spawn(async move {
            loop {
                let paused = tokio::select! {
                    e = typed.next() => match e {
                        Some(e) => Paused::from_typed(&e),
                        None => return,
                    },
                    v = raw.recv() => match v.as_ref().and_then(Paused::from_raw) {
                        Some(p) => p,
                        None if v.is_none() => return,
                        None => continue,
                    },
                };
                let Some(guard) = weak.upgrade() else { return };
                tokio::spawn(answer(task_conn.clone(), guard, paused));
            }
        });
        lock(&guard.tasks).push(task);
        conn.browser_raw(
            "Fetch.enable",
            serde_json::json!({ "patterns": [{ "urlPattern": "*", "requestStage": "Request" }] }),
        )
        .await?;
        let guard = match self.shared.request_guard.set(guard.clone()) {
            Ok(()) => guard,
            // Another install won the race: keep its guard.
            Err(_) => return Ok(true),
        };
        let pages: Vec<Arc<PageCtx>> = lock(&self.shared.pages).clone();
        for ctx in pages {
            self.watch_responses(&guard, &ctx).await;
        }
        Ok(true)
    }

    /// Starts the rebinding backstop on a page we drive (once per page).
    pub(super) async fn watch_responses(&self, guard: &Arc<RequestGuard>, ctx: &Arc<PageCtx>) {
        {
            let mut watched = lock(&guard.watched);
            if watched.contains(&ctx.id) {
                return;
            }
            watched.push(ctx.id.clone());
        }
        let conn = self.shared.conn.clone();
        let listener = conn
            .guard(
                "event_listener",
                conn.call_timeout,
                ctx.page.event_listener::<EventResponseReceived>(),
            )
            .await;
        let Ok(mut events) = listener else {
            tracing::debug!("no response watch on tab {}", ctx.id);
            return;
        };
        let weak = Arc::downgrade(guard);
        let page = ctx.page.clone();
        let leaving = ctx.leaving.clone();
        let task = tokio::spawn(async move {
            while let Some(e) = events.next().await {
                let Some(guard) = weak.upgrade() else { return };
                let Some(ip) = e
                    .response
                    .remote_ip_address
                    .as_deref()
                    .map(|s| s.trim_start_matches('[').trim_end_matches(']'))
                    .and_then(|s| s.parse::<IpAddr>().ok())
                else {
                    continue;
                };
                let url = e.response.url.clone();
                let RequestVerdict::Deny { reason } = guard.filter().judge_address(&url, ip) else {
                    continue;
                };
                guard.record(
                    BlockedRequest {
                        url: url.clone(),
                        reason: reason.clone(),
                        kind: BlockKind::Rebinding,
                        resource_type: e.r#type.as_ref().to_owned(),
                    },
                    String::new(),
                );
                // The page already holds the answer: take the tab away from
                // it (not back: the page before may be the one that asked),
                // its beforeunload handler accepted (tab/navigate.rs).
                leaving.fetch_add(1, Ordering::SeqCst);
                let left = conn
                    .page_raw(
                        &page,
                        "Page.navigate",
                        serde_json::json!({ "url": "about:blank" }),
                    )
                    .await;
                leaving.fetch_sub(1, Ordering::SeqCst);
                if let Err(err) = left {
                    tracing::warn!("leaving a page that reached a forbidden address failed: {err}");
                }
            }
        });
        lock(&guard.tasks).push(task);
    }

    /// Where the refusal log stands: take it when an action starts and
    /// give it to [`note_blocked`](Self::note_blocked) when it ends.
    pub(super) fn blocked_mark(&self) -> u64 {
        self.shared
            .request_guard
            .get()
            .map_or(0, |g| g.next_seq.load(Ordering::Relaxed))
    }

    /// Adds the refusals not reported yet to an action's outcome: those
    /// during the action go into the receipt's `blocked_requests` with a
    /// hint each; earlier ones (a timer that fired between actions, a
    /// form post that left just after the last receipt) become hints
    /// saying so, without being blamed on this action.
    ///
    /// When one was a navigation of the driven page, the error page
    /// Chromium shows for it may not have committed yet: the receipt
    /// waits for it (bounded by [`ERROR_PAGE_WAIT`]) and says where the
    /// page is then, so whoever judges the landing (the loop's undo)
    /// judges the page the tab is really on, not the one it is leaving.
    pub(super) async fn note_blocked(&self, ctx: &PageCtx, out: &mut ActionOutcome, mark: u64) {
        let Some(guard) = self.shared.request_guard.get() else {
            return;
        };
        let Unreported {
            before,
            during,
            page_left,
        } = guard.take_unreported(mark, &ctx.id);
        out.hints.extend(
            before
                .iter()
                .map(|b| format!("Before this action: {}", b.describe())),
        );
        if page_left {
            self.await_error_page(ctx, out).await;
        }
        if during.is_empty() {
            return;
        }
        out.hints
            .extend(during.iter().map(BlockedRequest::describe));
        out.effect
            .get_or_insert_with(|| Box::new(EffectReceipt::default()))
            .blocked_requests = during;
    }

    /// Waits for the page to commit the error page of a refused
    /// navigation, then puts the page it is on into the receipt.
    async fn await_error_page(&self, ctx: &PageCtx, out: &mut ActionOutcome) {
        let deadline = Instant::now() + ERROR_PAGE_WAIT;
        loop {
            {
                let log = ctx.log.lock();
                if log.url.starts_with(ERROR_PAGE_SCHEME) && !log.nav_pending {
                    break;
                }
            }
            if Instant::now() >= deadline || self.conn().dead_reason().is_some() {
                tracing::debug!("the error page of a refused navigation did not commit");
                return;
            }
            ctx.log
                .wait_change(deadline.saturating_duration_since(Instant::now()))
                .await;
        }
        let url = ctx.log.lock().url.clone();
        if let Some(effect) = out.effect.as_mut()
            && effect.url_after.as_deref() != Some(url.as_str())
        {
            effect.url_after = Some(url);
            effect.navigated = true;
            effect.page_changed = Some(true);
        }
    }

    /// How many requests the guard answered and their mean judging time
    /// (µs), for measurements; `None` without a filter.
    pub fn request_filter_stats(&self) -> Option<(u64, u64)> {
        let g = self.shared.request_guard.get()?;
        let n = g.judged.load(Ordering::Relaxed);
        Some((n, g.judge_micros.load(Ordering::Relaxed) / n.max(1)))
    }
}

/// Judges one paused request and answers it: always exactly one
/// `continueRequest` or `failRequest`.
async fn answer(conn: Arc<Conn>, guard: Arc<RequestGuard>, p: Paused) {
    let started = Instant::now();
    // Bounded like the judging: a browser slow to name a frame's context
    // leaves the request to be judged.
    let owner = match &guard.claims {
        Some(c) => tokio::time::timeout(JUDGE_DEADLINE, c.attribute(&conn, &p.frame_id))
            .await
            .unwrap_or(Owner::Unknown),
        None => Owner::Mine,
    };
    if owner == Owner::Other {
        // Another context's guard judges it (and reports it to its model).
        if let Err(e) = conn
            .browser_raw(
                "Fetch.continueRequest",
                serde_json::json!({ "requestId": p.id }),
            )
            .await
        {
            tracing::debug!("passing on another context's request failed: {e}");
        }
        return;
    }
    let filter = guard.filter();
    let url = p.url.clone();
    let judged = tokio::time::timeout(
        JUDGE_DEADLINE,
        tokio::task::spawn_blocking(move || filter.judge(&url)),
    )
    .await;
    let verdict = match judged {
        Ok(Ok(v)) => v,
        Ok(Err(_)) => RequestVerdict::Deny {
            reason: "the request filter failed on it".to_owned(),
        },
        Err(_) => RequestVerdict::Deny {
            reason: format!(
                "the policy could not judge it within {}s",
                JUDGE_DEADLINE.as_secs()
            ),
        },
    };
    let result = match &verdict {
        RequestVerdict::Allow => {
            conn.browser_raw(
                "Fetch.continueRequest",
                serde_json::json!({ "requestId": p.id }),
            )
            .await
        }
        RequestVerdict::Deny { reason } => {
            let kind = kind_of(&conn, &p).await;
            let blocked = BlockedRequest {
                url: p.url.clone(),
                reason: reason.clone(),
                kind,
                resource_type: p.resource_type.clone(),
            };
            // Recorded first, so the action that caused it finds it. A
            // request of no known frame may be another context's: while
            // other contexts share the browser, it is refused but kept
            // from this tab's receipts (and so from its model).
            let ours = match (&guard.claims, owner) {
                (None, _) | (_, Owner::Mine) => true,
                (Some(c), _) => {
                    tokio::time::timeout(JUDGE_DEADLINE, c.shared_with_others(&conn)).await
                        == Ok(false)
                }
            };
            if ours {
                guard.record(blocked, p.frame_id.clone());
            } else {
                tracing::info!(url = %blocked.url, "request of an unattributed frame blocked: {}", blocked.reason);
            }
            conn.browser_raw(
                "Fetch.failRequest",
                serde_json::json!({ "requestId": p.id, "errorReason": "BlockedByClient" }),
            )
            .await
        }
    };
    if let Err(e) = result {
        // The target went away meanwhile, or the browser did.
        tracing::debug!("answering a paused request to {} failed: {e}", p.url);
    }
    guard.judged.fetch_add(1, Ordering::Relaxed);
    guard
        .judge_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
}

/// A document request is a navigation when its frame is a tab's main
/// frame (whose id is the tab's target id), else a subframe's.
async fn kind_of(conn: &Conn, p: &Paused) -> BlockKind {
    if p.resource_type != "Document" {
        return BlockKind::Subresource;
    }
    let targets = conn
        .browser_raw("Target.getTargets", serde_json::json!({}))
        .await
        .unwrap_or_default();
    let top = targets["targetInfos"].as_array().is_some_and(|a| {
        a.iter()
            .any(|t| t["targetId"] == p.frame_id.as_str() && t["type"] == "page")
    });
    if top {
        BlockKind::Navigation
    } else {
        BlockKind::Subframe
    }
}

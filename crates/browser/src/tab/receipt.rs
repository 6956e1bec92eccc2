//! Effect receipts: probing the page before and after an action, waiting
//! for effects already under way, and saying what changed (URL, navigation,
//! new tab, dialog, download, the element under the pointer, the focus).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lumen_core::{
    ActionOutcome, DownloadInfo, EffectReceipt, ElementInfo, LumenError, Point, Result, TabInfo,
};
use serde::Deserialize;

use super::{CdpTab, PageCtx, is_fatal, lock, page_level};
use crate::scripts::PROBE_FN;
use crate::tracker::Ev;

/// How long an action's receipt waits for effects that are already under
/// way (a navigation that started, a popup that was requested, a download
/// that began) to land.
const RECEIPT_GRACE: Duration = Duration::from_secs(3);

/// The state of a page around an action.
#[derive(Debug, Clone, Deserialize)]
struct Probe {
    url: String,
    mutations: i64,
    changes: i64,
    focus: Option<ElementInfo>,
    target: Option<ElementInfo>,
}

fn describe(e: &ElementInfo) -> String {
    match (&e.role, &e.name) {
        (_, Some(name)) => format!("<{}> \"{name}\"", e.tag),
        (Some(role), None) => format!("<{}> ({role})", e.tag),
        _ => format!("<{}>", e.tag),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

impl CdpTab {
    /// Probes unless a navigation is pending: Chromium holds a page
    /// session's commands while a cross-document navigation is in flight,
    /// so a probe then would wait for the commit. Gives up (`None`) as soon
    /// as a navigation starts, and on page-level errors.
    async fn probe_soft(&self, ctx: &PageCtx, at: Option<Point>) -> Result<Option<Probe>> {
        let probe = self.probe(ctx, at);
        tokio::pin!(probe);
        loop {
            let changed = ctx.log.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if ctx.log.lock().nav_pending {
                return Ok(None);
            }
            tokio::select! {
                r = &mut probe => {
                    return match r {
                        Ok(p) => Ok(Some(p)),
                        Err(e) if is_fatal(&e) => Err(e),
                        Err(_) => Ok(None),
                    };
                }
                _ = &mut changed => {}
            }
        }
    }

    /// The element a click at `at` would hit, read with the receipt's own
    /// probe (so it is described exactly as receipts describe targets).
    pub(super) async fn element_at_point(&self, at: Point) -> Result<Option<ElementInfo>> {
        let ctx = self.active();
        Ok(self
            .probe_soft(&ctx, Some(at))
            .await?
            .and_then(|p| p.target))
    }

    /// The focused element, read with the receipt's own probe.
    pub(super) async fn focused_now(&self) -> Result<Option<ElementInfo>> {
        let ctx = self.active();
        Ok(self.probe_soft(&ctx, None).await?.and_then(|p| p.focus))
    }

    pub(super) async fn flush(&self, ctx: &PageCtx) {
        tokio::join!(ctx.flusher.flush(), self.shared.browser_flusher.flush());
    }

    async fn probe(&self, ctx: &PageCtx, at: Option<Point>) -> Result<Probe> {
        let args = match at {
            Some(p) => format!("{}, {}", p.x, p.y),
            None => "null, null".to_owned(),
        };
        // The init script keeps a compiled copy of the probe; documents that
        // predate it (or pages that broke it) get the full source.
        let v = match self
            .eval_in(ctx, &format!("window.__lumenAgent.probe({args})"))
            .await
        {
            Ok(v) => v,
            Err(e) if is_fatal(&e) => return Err(e),
            Err(_) => self.eval_in(ctx, &format!("{PROBE_FN}({args})")).await?,
        };
        serde_json::from_value(v).map_err(|e| LumenError::invalid_data("page probe", e.to_string()))
    }

    /// Brings the driven page to the front when a tab opened since it was
    /// last there: the newest window takes the front, and a page behind it
    /// draws no frames, so every wait for one (settling, the first input)
    /// would run to its deadline. One CDP call, only after a tab opened.
    pub(super) async fn bring_to_front(&self, ctx: &PageCtx) -> Result<()> {
        let (now, opened) = {
            let browser = self.shared.browser_log.lock();
            let since = self.shared.fronted.load(Ordering::Relaxed);
            let opened = browser
                .since(since)
                .any(|e| matches!(e, Ev::TargetCreated { id, .. } if *id != ctx.id));
            (browser.seq(), opened)
        };
        if opened {
            let done = self
                .conn()
                .browser_raw(
                    "Target.activateTarget",
                    serde_json::json!({ "targetId": ctx.id }),
                )
                .await;
            if let Err(e @ crate::cdp::CallError::Disconnected(_)) = done {
                return Err(e.into());
            }
        }
        self.shared.fronted.store(now, Ordering::Relaxed);
        Ok(())
    }

    /// Runs an action with a receipt: probe before, act, collect effects.
    pub(super) async fn act<F, Fut>(
        &self,
        at: Option<Point>,
        pointer: bool,
        f: F,
    ) -> Result<ActionOutcome>
    where
        F: FnOnce(Arc<PageCtx>) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let ctx = self.active();
        *lock(&self.shared.input_page) = Arc::downgrade(&ctx);
        if let (Some(p), Some(vp)) = (at, self.viewport_known())
            && !vp.contains(p)
        {
            return Ok(ActionOutcome::failed(format!(
                "({}, {}) is outside the {}x{} viewport; nothing was done",
                p.x, p.y, vp.width, vp.height
            )));
        }
        self.bring_to_front(&ctx).await?;
        // A change the last settle left unchecked holds still first.
        self.finish_settling(&ctx).await?;
        let mark = self.blocked_mark();
        if !self.shared.receipts.load(Ordering::Relaxed) {
            let mut out = match f(ctx.clone()).await {
                Ok(()) => ActionOutcome::ok(),
                Err(e) => return page_level(e),
            };
            self.note_blocked(&ctx, &mut out, mark).await;
            return Ok(out);
        }
        let seq_page = ctx.log.lock().seq();
        let seq_browser = self.shared.browser_log.lock().seq();
        let before = self.probe_soft(&ctx, at.filter(|_| pointer)).await?;
        if let Err(e) = f(ctx.clone()).await {
            return page_level(e);
        }
        let mut out = self
            .receipt(ctx.clone(), before, seq_page, seq_browser, pointer)
            .await?;
        // Requests the filter refused meanwhile (guard.rs).
        self.note_blocked(&ctx, &mut out, mark).await;
        Ok(out)
    }

    async fn receipt(
        &self,
        ctx: Arc<PageCtx>,
        before: Option<Probe>,
        seq_page: u64,
        seq_browser: u64,
        pointer: bool,
    ) -> Result<ActionOutcome> {
        // The input's acknowledgement (and then the probe) are the last
        // round trips of the action: every event sent before them is
        // queued, and a flush makes the trackers process it.
        self.flush(&ctx).await;
        let mut after = self.probe_soft(&ctx, None).await?;
        self.flush(&ctx).await;
        // Let effects already under way land (bounded).
        let deadline = Instant::now() + RECEIPT_GRACE;
        let aborted_grace = Instant::now() + Duration::from_millis(750);
        let mut waited = false;
        loop {
            let waiting = {
                let page = ctx.log.lock();
                let browser = self.shared.browser_log.lock();
                let window_open = page.since(seq_page).any(|e| matches!(e, Ev::WindowOpen));
                let created = browser
                    .since(seq_browser)
                    .any(|e| matches!(e, Ev::TargetCreated { .. } | Ev::TabRefused { .. }));
                let began: Vec<&String> = browser
                    .since(seq_browser)
                    .filter_map(|e| match e {
                        Ev::DownloadBegan { guid, .. } => Some(guid),
                        _ => None,
                    })
                    .collect();
                let download_open = began.iter().any(|g| {
                    !browser
                        .since(seq_browser)
                        .any(|e| matches!(e, Ev::DownloadDone { guid, .. } if guid == *g))
                });
                // A navigation that started and stopped without committing
                // usually turned into a download (or a 204): its download
                // event follows shortly.
                let nav_started = page.since(seq_page).any(|e| matches!(e, Ev::NavStarted));
                let committed = page
                    .since(seq_page)
                    .any(|e| matches!(e, Ev::NavCommitted | Ev::NavWithinDocument));
                let maybe_download =
                    nav_started && !committed && began.is_empty() && Instant::now() < aborted_grace;
                page.nav_pending || (window_open && !created) || download_open || maybe_download
            };
            if !waiting || Instant::now() >= deadline {
                break;
            }
            waited = true;
            if let Some(reason) = self.conn().dead_reason() {
                return Err(LumenError::disconnected(reason));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::select! {
                _ = ctx.log.wait_change(left) => {}
                _ = self.shared.browser_log.wait_change(left) => {}
            }
        }
        if waited {
            after = self.probe_soft(&ctx, None).await?;
            self.flush(&ctx).await;
        }

        let mut receipt = EffectReceipt::default();
        let mut hints = Vec::new();
        if ctx.log.lock().nav_pending {
            hints.push(
                "A navigation started and is still loading: settle before judging the page."
                    .to_owned(),
            );
        }
        {
            let page = ctx.log.lock();
            for e in page.since(seq_page) {
                match e {
                    Ev::NavCommitted | Ev::NavWithinDocument => receipt.navigated = true,
                    Ev::Dialog(d) => {
                        hints.push(format!(
                            "A {} dialog appeared (\"{}\") and was {}.",
                            d.kind,
                            d.message,
                            if d.accepted { "accepted" } else { "dismissed" }
                        ));
                        receipt.dialog = Some(d.clone());
                    }
                    Ev::FileChooser(what) => hints.push(format!("{}.", capitalise(what))),
                    _ => {}
                }
            }
        }
        let (new_target, download, refused) = {
            let browser = self.shared.browser_log.lock();
            let known: Vec<String> = lock(&self.shared.pages)
                .iter()
                .map(|p| p.id.clone())
                .collect();
            let mut new_target = None;
            let mut download: Option<DownloadInfo> = None;
            let mut guid_of = None;
            // Tabs closed past the cap since the last receipt that told of
            // them (a page's timer may open them between actions).
            let from = self
                .shared
                .tabs_reported
                .swap(browser.seq(), Ordering::Relaxed);
            let refused: Vec<String> = browser
                .since(from)
                .filter_map(|e| match e {
                    Ev::TabRefused { url } => Some(url.clone()),
                    _ => None,
                })
                .collect();
            for e in browser.since(seq_browser) {
                match e {
                    Ev::TargetCreated { id, url }
                        if !known.contains(id) && new_target.is_none() =>
                    {
                        new_target = Some((id.clone(), url.clone()));
                    }
                    Ev::DownloadBegan {
                        guid,
                        url,
                        suggested_filename,
                    } if download.is_none() => {
                        guid_of = Some(guid.clone());
                        download = Some(DownloadInfo {
                            url: url.clone(),
                            suggested_filename: suggested_filename.clone(),
                            path: None,
                            completed: false,
                            failed: false,
                            error: None,
                        });
                    }
                    Ev::DownloadDone {
                        guid,
                        completed,
                        path,
                        error,
                    } if Some(guid) == guid_of.as_ref() => {
                        if let Some(d) = download.as_mut() {
                            d.completed = *completed;
                            d.path = path.clone();
                            // Chromium ends a download `completed` or
                            // `canceled` (by the user, the page, or a
                            // failed connection); anything else is still
                            // running.
                            d.failed = !*completed;
                            d.error = match (completed, error) {
                                (true, _) => None,
                                (false, Some(why)) => Some(why.clone()),
                                (false, None) => Some("it was cancelled".to_owned()),
                            };
                        }
                    }
                    _ => {}
                }
            }
            (new_target, download, refused)
        };
        if let Some(first) = refused.first() {
            hints.push(format!(
                "The page opened {} tab(s) past the limit of {} open tabs; they were closed at once (the first: {first}).",
                refused.len(),
                crate::limits::MAX_OPEN_TABS
            ));
        }
        let mut download = download;
        if let Some(d) = download.as_mut().filter(|d| d.failed)
            && self.shared.options.download_dir.is_none()
        {
            d.error = Some("downloads are not enabled in this session".into());
        }
        if let Some(d) = &download {
            hints.push(match (&d.path, d.completed) {
                (Some(p), true) => {
                    format!("A download of {} was saved to {p}.", d.suggested_filename)
                }
                _ if self.shared.options.download_dir.is_none() => format!(
                    "A download of {} was refused: downloads are not enabled.",
                    d.suggested_filename
                ),
                _ if d.failed => format!(
                    "A download of {} failed: {}.",
                    d.suggested_filename,
                    d.error.as_deref().unwrap_or("no reason given")
                ),
                _ => format!(
                    "A download of {} started but did not finish yet.",
                    d.suggested_filename
                ),
            });
        }
        receipt.download = download;

        if let Some((id, mut url)) = new_target {
            let follow = self.shared.options.follow_new_tabs;
            let mut followed = false;
            if follow {
                match self.page_ctx_for(&id, Duration::from_secs(3)).await {
                    Ok(new_ctx) => {
                        self.make_active(new_ctx);
                        followed = true;
                    }
                    Err(e) if is_fatal(&e) => return Err(e),
                    Err(e) => tracing::debug!("could not follow the new tab {id}: {e}"),
                }
            }
            // Chromium announces a popup before it has a URL (`""`): the
            // followed tab says where it went once its first navigation
            // commits, so the policy judges (and the model is told) the
            // page it shows, not an empty URL.
            if followed && (url.is_empty() || url == "about:blank") {
                match self.current_url().await {
                    Ok(now) if !now.is_empty() => url = now,
                    Ok(_) => {}
                    Err(e) if is_fatal(&e) => return Err(e),
                    Err(e) => tracing::debug!("could not read the new tab's URL: {e}"),
                }
            }
            hints.push(if followed {
                format!("The action opened a new tab ({url}); the agent now drives it.")
            } else {
                format!("The action opened a new tab ({url}).")
            });
            receipt.new_tab = Some(TabInfo {
                id,
                url,
                title: String::new(),
                followed,
            });
        }

        if let Some(b) = &before {
            receipt.url_before = Some(b.url.clone());
            receipt.target = b.target.clone();
            receipt.focus_before = b.focus.clone();
        }
        if let Some(a) = &after {
            receipt.url_after = Some(a.url.clone());
            receipt.focus = a.focus.clone();
        }
        if let (Some(b), Some(a)) = (&before, &after) {
            // A committed navigation the tracker has not seen yet still shows
            // in the URL.
            if a.url != b.url {
                receipt.navigated = true;
            }
            receipt.page_changed = Some(
                receipt.navigated
                    || a.url != b.url
                    || a.mutations != b.mutations
                    || a.changes != b.changes
                    || a.mutations < 0,
            );
        }
        // Inside a cross-origin frame our counters see nothing: "no change"
        // there is not a measurement.
        let in_opaque_frame = |e: &Option<ElementInfo>| {
            e.as_ref()
                .is_some_and(|e| matches!(e.tag.as_str(), "iframe" | "frame"))
        };
        if receipt.page_changed == Some(false)
            && (in_opaque_frame(&receipt.target) || in_opaque_frame(&receipt.focus))
        {
            receipt.page_changed = None;
        }
        receipt.pointer = *lock(&self.shared.cursor);
        if pointer && !receipt.changed_anything() && receipt.page_changed.is_some() {
            match &receipt.target {
                Some(t) if t.interactive => {}
                Some(t) => hints.push(format!(
                    "The pointer hit {}, which is not interactive, and nothing on the page changed: \
                     check the coordinates against the screenshot.",
                    describe(t)
                )),
                None => hints.push(
                    "The pointer hit no element and nothing on the page changed.".to_owned(),
                ),
            }
        }
        let mut out = ActionOutcome::ok().with_effect(receipt);
        out.hints = hints;
        Ok(out)
    }
}

//! [`CdpTab`]: the `BrowserTab` implementation on chromiumoxide.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::target::TargetId;
use lumen_core::{
    ActionOutcome, AxSnapshot, BrowserTab, ClickOptions, DownloadInfo, EffectReceipt, ElementInfo,
    ErrorCode, Image, ImageFormat, ImageScale, LumenError, Modifiers, MouseButton, Point, Result,
    Screenshot, ScreenshotOptions, SettleOptions, SettleReport, Size, TabInfo,
};
use serde::Deserialize;
use tokio::task::JoinHandle;

use crate::ax::AxRefs;
use crate::cdp::{CallError, Conn, PAGE_BUSY};
use crate::imaging;
use crate::keys::{self, KeyDef};
use crate::options::{BrowserbaseOptions, LaunchOptions, TabOptions};
use crate::process::ChromiumProcess;
use crate::remote::{self, RemoteSession};
use crate::scripts::{INIT_SCRIPT, PROBE_FN, SETTLE_PROBE};
use crate::tracker::{self, Ev, EventLog, Flusher, PageHooks};

/// How long an action's receipt waits for effects that are already under
/// way (a navigation that started, a popup that was requested, a download
/// that began) to land.
const RECEIPT_GRACE: Duration = Duration::from_secs(3);
/// Settling stops waiting for pending page timers after this long.
const TIMER_WAIT_CAP: Duration = Duration::from_millis(2000);
/// Scroll positions plus the scroll-event counter, to see a wheel land.
const SCROLL_STATE: &str = "[scrollX, scrollY, (window.__lumenAgent || {}).changes]";
/// Longest `hold_key`.
const MAX_HOLD: Duration = Duration::from_secs(10);

/// One page we drive, with its event tracker.
#[derive(Debug)]
pub(crate) struct PageCtx {
    pub(crate) page: Page,
    pub(crate) id: String,
    pub(crate) log: Arc<EventLog>,
    flusher: Flusher,
    task: JoinHandle<()>,
    pub(crate) ax_refs: Mutex<AxRefs>,
}

impl Drop for PageCtx {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug)]
struct Shared {
    conn: Arc<Conn>,
    process: Mutex<Option<ChromiumProcess>>,
    options: TabOptions,
    active: Mutex<Arc<PageCtx>>,
    pages: Mutex<Vec<Arc<PageCtx>>>,
    browser_log: Arc<EventLog>,
    browser_flusher: Flusher,
    cursor: Mutex<Option<Point>>,
    /// Keys held down by `key_down`, in the order pressed: their modifier
    /// bits apply to every mouse event until released.
    held: Mutex<Vec<keys::KeyDef>>,
    /// The viewport and DPR we last applied, for new tabs and bounds checks.
    emulation: Mutex<Option<(Size, f64)>>,
    uploads: Arc<Mutex<Vec<String>>>,
    /// Whether actions measure receipts (starts as `options.receipts`).
    receipts: AtomicBool,
    remote: Option<RemoteSession>,
    tasks: Vec<JoinHandle<()>>,
    ws_url: String,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A Chromium tab driven over CDP; implements [`BrowserTab`].
///
/// Cheap to clone (all clones drive the same tab). Created by
/// [`CdpTab::launch`] (a local Chromium owned by the tab: killed on
/// [`close`](BrowserTab::close), on drop, and when this process dies),
/// [`CdpTab::connect`] (an existing browser, by WebSocket URL or
/// `http://host:port`) or [`CdpTab::browserbase`].
///
/// Every action answers with an [`ActionOutcome`] carrying an
/// [`EffectReceipt`]: URL before and after, navigation, new tab, dialog,
/// download, the element under the pointer and the focus afterwards, and
/// whether the page changed at all.
#[derive(Debug, Clone)]
pub struct CdpTab {
    shared: Arc<Shared>,
}

/// The state of a page around an action.
#[derive(Debug, Clone, Deserialize)]
struct Probe {
    url: String,
    mutations: i64,
    changes: i64,
    focus: Option<ElementInfo>,
    target: Option<ElementInfo>,
}

#[derive(Debug, Deserialize)]
struct SettleProbe {
    stable: bool,
    pending: u32,
    #[serde(rename = "nextIn")]
    next_in: Option<f64>,
}

/// The button state of one mouse event.
#[derive(Debug, Clone, Copy)]
struct Press {
    button: Option<MouseButton>,
    /// Bit mask of the buttons held (left 1, right 2, middle 4).
    buttons: i64,
    /// Click count (0 for moves).
    count: i64,
    /// CDP modifier mask.
    modifiers: i64,
}

impl Press {
    fn new(button: Option<MouseButton>, buttons: i64, count: i64, modifiers: i64) -> Self {
        Self {
            button,
            buttons,
            count,
            modifiers,
        }
    }
}

fn is_fatal(e: &LumenError) -> bool {
    matches!(
        e.code(),
        ErrorCode::BrowserDisconnected | ErrorCode::SessionTimeout
    )
}

/// Turns a page-level failure into an `ok: false` outcome and passes fatal
/// ones through.
fn page_level(e: LumenError) -> Result<ActionOutcome> {
    if is_fatal(&e) {
        Err(e)
    } else {
        Ok(ActionOutcome::failed(e.to_string()))
    }
}

fn button_name(b: MouseButton) -> (&'static str, i64) {
    match b {
        MouseButton::Left => ("left", 1),
        MouseButton::Right => ("right", 2),
        MouseButton::Middle => ("middle", 4),
    }
}

fn describe(e: &ElementInfo) -> String {
    match (&e.role, &e.name) {
        (_, Some(name)) => format!("<{}> \"{name}\"", e.tag),
        (Some(role), None) => format!("<{}> ({role})", e.tag),
        _ => format!("<{}>", e.tag),
    }
}

impl CdpTab {
    /// Launches a local Chromium and opens a tab in it.
    ///
    /// # Errors
    /// [`LumenError::Config`] when no Chromium is found or it cannot start,
    /// [`LumenError::BrowserDisconnected`] when it dies before answering.
    pub async fn launch(options: LaunchOptions) -> Result<Self> {
        let process = ChromiumProcess::spawn(&options).await?;
        let conn = Conn::connect(&process.ws_url, options.tab.call_timeout)
            .await
            .map_err(LumenError::from)?;
        let mut exit = process.exit_watch();
        let watcher_conn = conn.clone();
        let watcher = tokio::spawn(async move {
            if let Ok(reason) = exit.wait_for(|e| e.is_some()).await {
                let reason = reason.clone().unwrap_or_default();
                watcher_conn.mark_dead(reason);
            }
        });
        Self::setup(conn, options.tab, Some(process), None, vec![watcher]).await
    }

    /// Connects to a running browser by DevTools WebSocket URL
    /// (`ws://host:port/devtools/browser/<id>`) or by `http://host:port`
    /// (resolved through `/json/version`), and opens a new tab in it.
    /// Closing the tab leaves that browser running.
    ///
    /// # Errors
    /// [`LumenError::BrowserDisconnected`] when the endpoint cannot be
    /// reached.
    pub async fn connect(url: &str, options: TabOptions) -> Result<Self> {
        let ws = remote::resolve_ws_url(url, options.call_timeout).await?;
        let conn = Conn::connect(&ws, options.call_timeout)
            .await
            .map_err(LumenError::from)?;
        Self::setup(conn, options, None, None, Vec::new()).await
    }

    /// Creates a Browserbase session (API key + project) and connects to it.
    /// Closing the tab releases the session.
    ///
    /// # Errors
    /// [`LumenError::Config`] when the API refuses the key or project,
    /// [`LumenError::BrowserDisconnected`] when it cannot be reached.
    pub async fn browserbase(options: BrowserbaseOptions) -> Result<Self> {
        let session = remote::create_browserbase_session(&options).await?;
        let conn = Conn::connect(&session.connect_url, options.tab.call_timeout)
            .await
            .map_err(LumenError::from)?;
        Self::setup(conn, options.tab, None, Some(session), Vec::new()).await
    }

    async fn setup(
        conn: Arc<Conn>,
        options: TabOptions,
        process: Option<ChromiumProcess>,
        remote: Option<RemoteSession>,
        mut tasks: Vec<JoinHandle<()>>,
    ) -> Result<Self> {
        let browser_log = EventLog::new();
        let t = conn.call_timeout;
        let (browser_task, browser_flusher) = tracker::track_browser(
            conn.clone(),
            browser_log.clone(),
            options.download_dir.clone(),
        )
        .await?;
        tasks.push(browser_task);
        let download = match &options.download_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| {
                    LumenError::config("download_dir", format!("{}: {e}", dir.display()))
                })?;
                serde_json::json!({
                    "behavior": "allow",
                    "downloadPath": dir.to_string_lossy(),
                    "eventsEnabled": true,
                })
            }
            None => serde_json::json!({ "behavior": "deny", "eventsEnabled": true }),
        };
        if let Err(e) = conn
            .browser_raw("Browser.setDownloadBehavior", download)
            .await
        {
            if let CallError::Disconnected(_) = e {
                return Err(e.into());
            }
            tracing::debug!("Browser.setDownloadBehavior failed: {e}");
        }
        let existing = conn
            .browser_raw("Target.getTargets", serde_json::json!({}))
            .await?;
        let page = conn
            .guard(
                "Target.createTarget",
                t,
                conn.browser.new_page("about:blank"),
            )
            .await?;
        // A browser we launched starts with its own blank tab: close it so
        // the tab list holds only what we (and the pages) opened.
        if process.is_some() {
            for info in existing["targetInfos"].as_array().into_iter().flatten() {
                if info["type"] == "page"
                    && let Some(id) = info["targetId"].as_str()
                {
                    let _ = conn
                        .browser_raw("Target.closeTarget", serde_json::json!({ "targetId": id }))
                        .await;
                }
            }
        }
        let ws_url = conn.browser.websocket_address().clone();
        let emulation = options
            .viewport
            .map(|size| (size, options.device_scale_factor));
        let uploads: Arc<Mutex<Vec<String>>> = Arc::default();
        let ctx = setup_page(&conn, &options, &uploads, emulation, page).await?;
        let shared = Shared {
            conn,
            process: Mutex::new(process),
            active: Mutex::new(ctx.clone()),
            pages: Mutex::new(vec![ctx]),
            browser_log,
            browser_flusher,
            cursor: Mutex::new(None),
            held: Mutex::new(Vec::new()),
            emulation: Mutex::new(emulation),
            uploads,
            receipts: AtomicBool::new(options.receipts),
            remote,
            tasks,
            ws_url,
            options,
        };
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// The browser's DevTools WebSocket URL (to connect more clients).
    pub fn websocket_url(&self) -> &str {
        &self.shared.ws_url
    }

    /// The browser process id, when this tab launched it.
    pub fn browser_pid(&self) -> Option<u32> {
        lock(&self.shared.process).as_ref().and_then(|p| p.pid())
    }

    /// The profile folder, when this tab launched the browser.
    pub fn user_data_dir(&self) -> Option<PathBuf> {
        lock(&self.shared.process)
            .as_ref()
            .map(|p| p.user_data_dir.clone())
    }

    /// The options the tab runs with.
    pub fn options(&self) -> &TabOptions {
        &self.shared.options
    }

    /// Drives `ctx`, keeping `pages` in order of last use so a closed tab
    /// hands over to the one driven before it.
    fn make_active(&self, ctx: Arc<PageCtx>) {
        let mut pages = lock(&self.shared.pages);
        pages.retain(|p| p.id != ctx.id);
        pages.push(ctx.clone());
        *lock(&self.shared.active) = ctx;
    }

    /// The page being driven. When it was closed (a popup that closed
    /// itself, a tab closed by someone else), the most recent open page
    /// takes over.
    fn active(&self) -> Arc<PageCtx> {
        let current = lock(&self.shared.active).clone();
        let destroyed = self.shared.browser_log.lock().destroyed.clone();
        if !destroyed.contains(&current.id) {
            return current;
        }
        let mut pages = lock(&self.shared.pages);
        pages.retain(|p| !destroyed.contains(&p.id));
        match pages.last() {
            // (Pages are in order of last use.)
            Some(next) => {
                tracing::debug!("tab {} closed; driving {} again", current.id, next.id);
                *lock(&self.shared.active) = next.clone();
                // Bring it to the front so it renders (screenshots, frames).
                let conn = self.shared.conn.clone();
                let id = next.id.clone();
                // (`active_tab_id` may be called outside a runtime.)
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        let _ = conn
                            .browser_raw(
                                "Target.activateTarget",
                                serde_json::json!({ "targetId": id }),
                            )
                            .await;
                    });
                }
                next.clone()
            }
            None => current,
        }
    }

    fn conn(&self) -> &Conn {
        &self.shared.conn
    }

    /// The id of the tab being driven.
    pub fn active_tab_id(&self) -> String {
        self.active().id.clone()
    }

    /// Every open page tab (`followed` marks the one being driven).
    ///
    /// # Errors
    /// Only fatal ones (`BROWSER_DISCONNECTED`).
    pub async fn tabs(&self) -> Result<Vec<TabInfo>> {
        let active = self.active_tab_id();
        let list = self
            .conn()
            .browser_raw("Target.getTargets", serde_json::json!({}))
            .await?;
        Ok(list["targetInfos"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["type"] == "page")
            .map(|t| {
                let id = t["targetId"].as_str().unwrap_or_default().to_owned();
                TabInfo {
                    followed: id == active,
                    url: t["url"].as_str().unwrap_or_default().to_owned(),
                    title: t["title"].as_str().unwrap_or_default().to_owned(),
                    id,
                }
            })
            .collect())
    }

    /// Drives another open tab (one from [`tabs`](Self::tabs)).
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for an unknown id; fatal ones otherwise.
    pub async fn switch_to_tab(&self, id: &str) -> Result<()> {
        let ctx = self.page_ctx_for(id, Duration::from_secs(3)).await?;
        self.make_active(ctx);
        let _ = self
            .conn()
            .browser_raw(
                "Target.activateTarget",
                serde_json::json!({ "targetId": id }),
            )
            .await;
        Ok(())
    }

    async fn page_ctx_for(&self, id: &str, wait: Duration) -> Result<Arc<PageCtx>> {
        if let Some(ctx) = lock(&self.shared.pages).iter().find(|p| p.id == id) {
            return Ok(ctx.clone());
        }
        let targets = self
            .conn()
            .browser_raw("Target.getTargets", serde_json::json!({}))
            .await?;
        let exists = targets["targetInfos"]
            .as_array()
            .is_some_and(|a| a.iter().any(|t| t["targetId"] == id && t["type"] == "page"));
        if !exists {
            return Err(LumenError::invalid_data(
                "tab id",
                format!("there is no open tab {id}"),
            ));
        }
        let deadline = Instant::now() + wait;
        let page = loop {
            match self
                .shared
                .conn
                .browser
                .get_page(TargetId::new(id.to_owned()))
                .await
            {
                Ok(page) => break page,
                Err(_) if Instant::now() < deadline => {
                    if let Some(reason) = self.conn().dead_reason() {
                        return Err(LumenError::disconnected(reason));
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(e) => {
                    return Err(LumenError::invalid_data(
                        "tab id",
                        format!("no tab {id} is attached: {e}"),
                    ));
                }
            }
        };
        let emulation = *lock(&self.shared.emulation);
        let ctx = setup_page(
            &self.shared.conn,
            &self.shared.options,
            &self.shared.uploads,
            emulation,
            page,
        )
        .await?;
        lock(&self.shared.pages).push(ctx.clone());
        Ok(ctx)
    }

    /// Arms files for the next file chooser a page opens. Every path must lie
    /// inside [`TabOptions::upload_dir`].
    ///
    /// # Errors
    /// [`LumenError::PolicyViolation`] for a path outside the allowed folder
    /// (or when uploads are not enabled), [`LumenError::InvalidData`] for a
    /// missing file.
    pub fn set_upload_files(&self, files: &[PathBuf]) -> Result<()> {
        let Some(dir) = &self.shared.options.upload_dir else {
            return Err(LumenError::PolicyViolation {
                reason: "uploads are not enabled: set TabOptions::upload_dir".into(),
            });
        };
        let root = dir
            .canonicalize()
            .map_err(|e| LumenError::config("upload_dir", format!("{}: {e}", dir.display())))?;
        let mut checked = Vec::new();
        for f in files {
            let full = if f.is_absolute() {
                f.clone()
            } else {
                root.join(f)
            };
            let real = full.canonicalize().map_err(|e| {
                LumenError::invalid_data("upload file", format!("{}: {e}", full.display()))
            })?;
            if !real.starts_with(&root) || !real.is_file() {
                return Err(LumenError::PolicyViolation {
                    reason: format!(
                        "{} is not a file inside the upload folder {}",
                        f.display(),
                        root.display()
                    ),
                });
            }
            checked.push(real.to_string_lossy().into_owned());
        }
        *lock(&self.shared.uploads) = checked;
        Ok(())
    }

    /// Evaluates an expression and returns its JSON value, retrying while a
    /// navigation replaces the execution context.
    async fn eval_in(&self, ctx: &PageCtx, expression: &str) -> Result<serde_json::Value> {
        let params = serde_json::json!({
            "expression": expression,
            "returnByValue": true,
            "awaitPromise": true,
        });
        let deadline = Instant::now() + self.conn().call_timeout;
        loop {
            match self
                .conn()
                .page_raw(&ctx.page, "Runtime.evaluate", params.clone())
                .await
            {
                Ok(r) => return script_value(r),
                Err(e) if e.is_context_gone() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(CallError::Protocol {
                    code: PAGE_BUSY,
                    message,
                }) => {
                    // A runaway script would wedge the tab for good: stop it.
                    let stopped = self
                        .conn()
                        .page_raw_within(
                            &ctx.page,
                            "Runtime.terminateExecution",
                            serde_json::json!({}),
                            Duration::from_secs(2),
                        )
                        .await
                        .is_ok();
                    return Err(LumenError::Script {
                        message: if stopped {
                            format!("{message}; the script was stopped")
                        } else {
                            message
                        },
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Evaluates in a child frame whose URL contains `frame_url` (same- or
    /// cross-origin). Same-origin frames run through their parent; out-of-
    /// process frames through their own target.
    ///
    /// # Errors
    /// [`LumenError::Script`] when the script throws or no frame matches.
    pub async fn evaluate_in_frame(
        &self,
        frame_url: &str,
        expression: &str,
    ) -> Result<serde_json::Value> {
        crate::frames::evaluate_in_frame(self, frame_url, expression).await
    }

    pub(crate) async fn eval_active(&self, expression: &str) -> Result<serde_json::Value> {
        let ctx = self.active();
        self.eval_in(&ctx, expression).await
    }

    pub(crate) fn conn_arc(&self) -> &Arc<Conn> {
        &self.shared.conn
    }

    pub(crate) fn active_ctx(&self) -> Arc<PageCtx> {
        self.active()
    }

    /// Takes an accessibility snapshot (`Accessibility.getFullAXTree`) of
    /// the driven tab. Refs (`@e1`, `@e2`, …) are stable per element for as
    /// long as the document lives.
    ///
    /// # Errors
    /// Fatal ones, or [`LumenError::Script`] when Chromium refuses.
    pub async fn accessibility_snapshot(&self) -> Result<AxSnapshot> {
        crate::ax::snapshot(self).await
    }

    /// The centre of an element named by a ref from the last snapshot, in
    /// viewport CSS pixels (`None` when the ref is unknown or the element has
    /// no box).
    ///
    /// # Errors
    /// Fatal ones only.
    pub async fn ref_center(&self, reference: &str) -> Result<Option<Point>> {
        crate::ax::ref_center(self, reference).await
    }

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

    async fn flush(&self, ctx: &PageCtx) {
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

    async fn mouse_event(
        &self,
        ctx: &PageCtx,
        kind: &'static str,
        at: Point,
        press: Press,
    ) -> Result<()> {
        self.mouse_events(ctx, &[(kind, at, press)]).await
    }

    /// Sends mouse events in order, without waiting for each one's
    /// acknowledgement before the next: the renderer's input queue keeps
    /// their order, and a pointer move (which Chromium delivers aligned to
    /// animation frames) is flushed by the press that follows it instead of
    /// costing a frame of its own.
    async fn mouse_events(
        &self,
        ctx: &PageCtx,
        events: &[(&'static str, Point, Press)],
    ) -> Result<()> {
        let calls = events.iter().map(|&(kind, at, press)| {
            let Press {
                button,
                buttons,
                count: click_count,
                modifiers,
            } = press;
            let name = button.map(|b| button_name(b).0).unwrap_or("none");
            let params = serde_json::json!({
                "type": kind,
                "x": at.x as f64,
                "y": at.y as f64,
                "button": name,
                "buttons": buttons,
                "clickCount": click_count,
                "modifiers": modifiers | self.held_mask(),
            });
            self.conn()
                .page_raw(&ctx.page, "Input.dispatchMouseEvent", params)
        });
        futures::future::try_join_all(calls).await?;
        if let Some(&(_, at, _)) = events.last() {
            *lock(&self.shared.cursor) = Some(at);
        }
        Ok(())
    }

    async fn move_to(&self, ctx: &PageCtx, at: Point, buttons: i64) -> Result<()> {
        let pressed = match buttons {
            0 => None,
            b if b & 1 != 0 => Some(MouseButton::Left),
            b if b & 2 != 0 => Some(MouseButton::Right),
            _ => Some(MouseButton::Middle),
        };
        self.mouse_event(ctx, "mouseMoved", at, Press::new(pressed, buttons, 0, 0))
            .await
    }

    async fn key_event(
        &self,
        ctx: &PageCtx,
        down: bool,
        key: &KeyDef,
        modifiers: i64,
        with_text: bool,
    ) -> Result<()> {
        let params = keys::key_event_params(down, key, modifiers, with_text);
        self.conn()
            .page_raw(&ctx.page, "Input.dispatchKeyEvent", params)
            .await?;
        Ok(())
    }

    /// Presses keys down in order (modifiers accumulate), returning the
    /// modifier mask held.
    async fn keys_down(&self, ctx: &PageCtx, defs: &[KeyDef]) -> Result<i64> {
        let (events, mask) = keys::chord_down(defs);
        for params in events {
            self.conn()
                .page_raw(&ctx.page, "Input.dispatchKeyEvent", params)
                .await?;
        }
        Ok(mask)
    }

    async fn keys_up(&self, ctx: &PageCtx, defs: &[KeyDef], mask: i64) -> Result<()> {
        for params in keys::chord_up(defs, mask) {
            self.conn()
                .page_raw(&ctx.page, "Input.dispatchKeyEvent", params)
                .await?;
        }
        Ok(())
    }

    /// The modifier bits of the keys held down.
    fn held_mask(&self) -> i64 {
        lock(&self.shared.held)
            .iter()
            .fold(0, |mask, k| mask | k.modifier_bit)
    }

    fn viewport_known(&self) -> Option<Size> {
        lock(&self.shared.emulation).map(|(s, _)| s)
    }

    /// One capture of the active page.
    async fn capture(&self, options: &ScreenshotOptions) -> Result<Screenshot> {
        let ctx = self.active();
        let format = options.format;
        let mut params = serde_json::json!({
            "format": match format { ImageFormat::Png => "png", ImageFormat::Jpeg => "jpeg" },
            "captureBeyondViewport": false,
            "fromSurface": true,
        });
        if format == ImageFormat::Jpeg {
            params["quality"] = options.quality.clamp(1, 100).into();
        }
        if let Some(r) = options.region {
            if r.width() == 0 || r.height() == 0 {
                return Err(LumenError::invalid_data(
                    "screenshot region",
                    "the region is empty",
                ));
            }
            params["clip"] = serde_json::json!({
                "x": r.x0, "y": r.y0, "width": r.width(), "height": r.height(),
                "scale": region_scale(r, options.max_edge, options.max_pixels),
            });
        }
        let capture = self
            .conn()
            .page_raw(&ctx.page, "Page.captureScreenshot", params);
        let (shot, viewport) = match options.region {
            Some(r) => (capture.await, Ok(Size::new(r.width(), r.height()))),
            None => {
                let known = self.viewport_known();
                match known {
                    Some(v) => (capture.await, Ok(v)),
                    None => tokio::join!(capture, self.viewport()),
                }
            }
        };
        let shot = shot?;
        let viewport = viewport?;
        let data = shot["data"].as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| LumenError::invalid_data("screenshot", e.to_string()))?;
        let mut size = imaging::dimensions(&bytes, format)
            .map_err(|e| LumenError::invalid_data("screenshot", e))?;
        let mut bytes = bytes;
        let target = imaging::fitted(size, options.max_edge, options.max_pixels);
        let cursor = if options.cursor_overlay {
            *lock(&self.shared.cursor)
        } else {
            None
        };
        if target != size || cursor.is_some() {
            let scale = ImageScale::between(viewport, target);
            let offset = options.region.map(|r| (r.x0, r.y0)).unwrap_or((0, 0));
            let dot =
                cursor.map(|p| scale.css_to_image(Point::new(p.x - offset.0, p.y - offset.1)));
            let (out, new_size) = imaging::process(&bytes, format, options.quality, target, dot)
                .map_err(|e| LumenError::invalid_data("screenshot", e))?;
            bytes = out;
            size = new_size;
        }
        Ok(Screenshot {
            image: Image::new(format, size.width, size.height, bytes),
            viewport,
            scale: ImageScale::between(viewport, size),
        })
    }

    /// Runs an action with a receipt: probe before, act, collect effects.
    async fn act<F, Fut>(&self, at: Option<Point>, pointer: bool, f: F) -> Result<ActionOutcome>
    where
        F: FnOnce(Arc<PageCtx>) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let ctx = self.active();
        if let (Some(p), Some(vp)) = (at, self.viewport_known())
            && !vp.contains(p)
        {
            return Ok(ActionOutcome::failed(format!(
                "({}, {}) is outside the {}x{} viewport; nothing was done",
                p.x, p.y, vp.width, vp.height
            )));
        }
        if !self.shared.receipts.load(Ordering::Relaxed) {
            return match f(ctx).await {
                Ok(()) => Ok(ActionOutcome::ok()),
                Err(e) => page_level(e),
            };
        }
        let seq_page = ctx.log.lock().seq();
        let seq_browser = self.shared.browser_log.lock().seq();
        let before = self.probe_soft(&ctx, at.filter(|_| pointer)).await?;
        if let Err(e) = f(ctx.clone()).await {
            return page_level(e);
        }
        self.receipt(ctx, before, seq_page, seq_browser, pointer)
            .await
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
                    .any(|e| matches!(e, Ev::TargetCreated { .. }));
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
        let (new_target, download) = {
            let browser = self.shared.browser_log.lock();
            let known: Vec<String> = lock(&self.shared.pages)
                .iter()
                .map(|p| p.id.clone())
                .collect();
            let mut new_target = None;
            let mut download: Option<DownloadInfo> = None;
            let mut guid_of = None;
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
                        });
                    }
                    Ev::DownloadDone {
                        guid,
                        completed,
                        path,
                    } if Some(guid) == guid_of.as_ref() => {
                        if let Some(d) = download.as_mut() {
                            d.completed = *completed;
                            d.path = path.clone();
                        }
                    }
                    _ => {}
                }
            }
            (new_target, download)
        };
        if let Some(d) = &download {
            hints.push(match (&d.path, d.completed) {
                (Some(p), true) => {
                    format!("A download of {} was saved to {p}.", d.suggested_filename)
                }
                _ if self.shared.options.download_dir.is_none() => format!(
                    "A download of {} was refused: downloads are not enabled.",
                    d.suggested_filename
                ),
                _ => format!(
                    "A download of {} started but did not finish yet.",
                    d.suggested_filename
                ),
            });
        }
        receipt.download = download;

        if let Some((id, url)) = new_target {
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
        let seq = ctx.log.lock().seq();
        let url_before = ctx.log.lock().url.clone();
        let url_before = if url_before.is_empty() {
            self.url().await.unwrap_or_default()
        } else {
            url_before
        };
        match f(ctx.clone()).await {
            Ok(None) => {}
            Ok(Some(problem)) => {
                return Ok(ActionOutcome::failed(problem).with_effect(EffectReceipt {
                    url_before: Some(url_before.clone()),
                    url_after: Some(url_before),
                    ..EffectReceipt::default()
                }));
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
            let settle = self.settle(&self.shared.options.settle).await?;
            if settle.timed_out {
                hints.push("The page did not fully settle; it may still be changing.".to_owned());
            }
        }
        let url_after = self.url().await?;
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
        Ok(out)
    }

    async fn history_step(&self, delta: i64) -> Result<ActionOutcome> {
        let what = if delta < 0 { "back" } else { "forward" };
        let conn = self.shared.conn.clone();
        self.navigate_with(what, |ctx| async move {
            let history = conn
                .page_raw(
                    &ctx.page,
                    "Page.getNavigationHistory",
                    serde_json::json!({}),
                )
                .await?;
            let current = history["currentIndex"].as_i64().unwrap_or(0);
            let entries = history["entries"].as_array().cloned().unwrap_or_default();
            let target = current + delta;
            let Some(entry) = usize::try_from(target).ok().and_then(|i| entries.get(i)) else {
                return Ok(Some(format!(
                    "cannot go {what}: there is no {} page in this tab's history",
                    if delta < 0 { "previous" } else { "next" }
                )));
            };
            let id = entry["id"].clone();
            conn.page_raw(
                &ctx.page,
                "Page.navigateToHistoryEntry",
                serde_json::json!({ "entryId": id }),
            )
            .await?;
            Ok(None)
        })
        .await
    }

    /// Sets the viewport to the nearest multiple of `patch_size` in each
    /// dimension (at least one patch), capped at `max_dim` (rounded down to
    /// a whole patch), keeping the current device pixel ratio, and returns
    /// the new size. Vision models address patches, so an aligned viewport
    /// avoids rounding error in their coordinates.
    ///
    /// # Errors
    /// [`LumenError::Config`] for a zero patch size; fatal ones otherwise.
    pub async fn align_viewport(&self, patch_size: u32, max_dim: u32) -> Result<Size> {
        if patch_size == 0 || max_dim < patch_size {
            return Err(LumenError::config(
                "patch_size",
                format!("patch size {patch_size} with maximum {max_dim} cannot be aligned"),
            ));
        }
        let v = self
            .eval_active("[innerWidth, innerHeight, devicePixelRatio]")
            .await?;
        let w = v[0].as_f64().unwrap_or(1280.0) as u32;
        let h = v[1].as_f64().unwrap_or(720.0) as u32;
        let dpr = v[2].as_f64().unwrap_or(1.0);
        let size = Size::new(
            align_dim(w, patch_size, max_dim),
            align_dim(h, patch_size, max_dim),
        );
        self.set_viewport(size, dpr).await?;
        Ok(size)
    }
}

/// The scale a region is rendered at: with image limits, as large as they
/// allow (a zoom shows detail the full screenshot cannot), at most 4×;
/// without, 1 (device pixels).
fn region_scale(region: lumen_core::Rect, max_edge: Option<u32>, max_pixels: Option<u64>) -> f64 {
    let long = region.width().max(region.height()).max(1) as f64;
    let area = (region.width().max(1) as f64) * (region.height().max(1) as f64);
    let by_edge = max_edge.map(|m| m as f64 / long);
    let by_area = max_pixels.map(|p| (p as f64 / area).sqrt());
    match (by_edge, by_area) {
        (None, None) => 1.0,
        (a, b) => a
            .unwrap_or(f64::MAX)
            .min(b.unwrap_or(f64::MAX))
            .clamp(1.0, 4.0),
    }
}

/// Rounds to the nearest multiple of `patch` (ties up), at least one patch,
/// at most `max` rounded down to a multiple.
pub(crate) fn align_dim(v: u32, patch: u32, max: u32) -> u32 {
    let rounded = ((v + patch / 2) / patch).max(1) * patch;
    let cap = (max / patch) * patch;
    rounded.min(cap).max(patch)
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Extracts a `Runtime.evaluate` result's value, or its exception.
pub(crate) fn script_value(r: serde_json::Value) -> Result<serde_json::Value> {
    if let Some(ex) = r.get("exceptionDetails") {
        let message = ex["exception"]["description"]
            .as_str()
            .or_else(|| ex["text"].as_str())
            .unwrap_or("the script threw")
            .to_owned();
        return Err(LumenError::Script { message });
    }
    Ok(r["result"]
        .get("value")
        .cloned()
        .unwrap_or(serde_json::Value::Null))
}

/// Prepares a page: event tracking, the init script, file chooser
/// interception and the viewport.
async fn setup_page(
    conn: &Arc<Conn>,
    options: &TabOptions,
    uploads: &Arc<Mutex<Vec<String>>>,
    emulation: Option<(Size, f64)>,
    page: Page,
) -> Result<Arc<PageCtx>> {
    let id = page.target_id().inner().clone();
    let log = EventLog::new();
    let hooks = PageHooks {
        conn: conn.clone(),
        dialogs: options.dialogs.clone(),
        uploads: uploads.clone(),
        upload_allowed: options.upload_dir.is_some(),
    };
    let (task, flusher) = tracker::track_page(page.clone(), id.clone(), log.clone(), hooks).await?;
    let ctx = Arc::new(PageCtx {
        page,
        id,
        log,
        flusher,
        task,
        ax_refs: Mutex::new(AxRefs::default()),
    });
    conn.page_raw(
        &ctx.page,
        "Page.addScriptToEvaluateOnNewDocument",
        serde_json::json!({ "source": init_script() }),
    )
    .await?;
    let _ = conn
        .page_raw(
            &ctx.page,
            "Runtime.evaluate",
            serde_json::json!({ "expression": init_script() }),
        )
        .await;
    if let Err(e) = conn
        .page_raw(
            &ctx.page,
            "Page.setInterceptFileChooserDialog",
            serde_json::json!({ "enabled": true }),
        )
        .await
        && let CallError::Disconnected(_) = e
    {
        return Err(e.into());
    }
    if let Some((size, dpr)) = emulation {
        apply_metrics(conn, &ctx.page, size, dpr).await?;
    }
    if let Ok(url) = conn
        .page_raw(
            &ctx.page,
            "Runtime.evaluate",
            serde_json::json!({ "expression": "location.href", "returnByValue": true }),
        )
        .await
        .map(|v| v["result"]["value"].as_str().unwrap_or_default().to_owned())
    {
        ctx.log.lock().url = url;
    }
    Ok(ctx)
}

/// The init script plus the probe, kept compiled in each document.
fn init_script() -> String {
    format!(
        "{INIT_SCRIPT};\ntry {{ Object.defineProperty(window.__lumenAgent, 'probe', {{ value: {PROBE_FN} }}); }} catch (e) {{}}"
    )
}

async fn apply_metrics(conn: &Conn, page: &Page, size: Size, dpr: f64) -> Result<()> {
    conn.page_raw(
        page,
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({
            "width": size.width,
            "height": size.height,
            "deviceScaleFactor": dpr,
            "mobile": false,
            "screenWidth": size.width,
            "screenHeight": size.height,
        }),
    )
    .await?;
    Ok(())
}

#[async_trait::async_trait]
impl BrowserTab for CdpTab {
    async fn screenshot(&self, options: &ScreenshotOptions) -> Result<Screenshot> {
        match self.capture(options).await {
            // A navigation that began after the last settle (a form the
            // page submits a moment after the click) detaches the page
            // from the compositor for a while: wait for the new document
            // and capture that.
            Err(LumenError::Script { message }) => {
                tracing::debug!("capture failed ({message}); settling and capturing again");
                self.settle(&self.shared.options.settle).await?;
                self.capture(options).await
            }
            other => other,
        }
    }

    async fn viewport(&self) -> Result<Size> {
        let v = self.eval_active("[innerWidth, innerHeight]").await?;
        let w = v[0].as_u64().unwrap_or(0) as u32;
        let h = v[1].as_u64().unwrap_or(0) as u32;
        Ok(Size::new(w, h))
    }

    async fn set_viewport(&self, size: Size, device_scale_factor: f64) -> Result<()> {
        if size.width == 0 || size.height == 0 || size.width > 10_000 || size.height > 10_000 {
            return Err(LumenError::config(
                "viewport",
                format!("{}x{} is not a usable viewport", size.width, size.height),
            ));
        }
        if !(device_scale_factor > 0.0 && device_scale_factor <= 8.0) {
            return Err(LumenError::config(
                "device_scale_factor",
                format!("{device_scale_factor} must be in (0, 8]"),
            ));
        }
        let ctx = self.active();
        apply_metrics(self.conn(), &ctx.page, size, device_scale_factor).await?;
        *lock(&self.shared.emulation) = Some((size, device_scale_factor));
        Ok(())
    }

    async fn url(&self) -> Result<String> {
        let v = match self.eval_active("location.href").await {
            // The document went away under a navigation: ask the new one.
            Err(LumenError::Script { .. }) => {
                self.settle(&self.shared.options.settle).await?;
                self.eval_active("location.href").await?
            }
            other => other?,
        };
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    async fn title(&self) -> Result<String> {
        let v = self.eval_active("document.title").await?;
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    fn cursor(&self) -> Option<Point> {
        *lock(&self.shared.cursor)
    }

    async fn click(&self, at: Point, options: ClickOptions) -> Result<ActionOutcome> {
        let count = options.click_count.clamp(1, 3) as i64;
        let (_, bit) = button_name(options.button);
        let mods = options.modifiers.cdp_mask();
        self.act(Some(at), true, |ctx| async move {
            let mut events = Vec::with_capacity(1 + 2 * count as usize);
            if self.cursor() != Some(at) {
                events.push(("mouseMoved", at, Press::new(None, 0, 0, 0)));
            }
            for n in 1..=count {
                let button = Some(options.button);
                events.push(("mousePressed", at, Press::new(button, bit, n, mods)));
                events.push(("mouseReleased", at, Press::new(button, 0, n, mods)));
            }
            self.mouse_events(&ctx, &events).await
        })
        .await
    }

    async fn hover(&self, at: Point) -> Result<ActionOutcome> {
        self.act(Some(at), true, |ctx| async move {
            self.move_to(&ctx, at, 0).await
        })
        .await
        .map(|mut o| {
            // Hovering over a non-interactive element is normal.
            o.hints.retain(|h| !h.starts_with("The pointer hit"));
            o
        })
    }

    async fn drag(&self, from: Point, to: Point, path: &[Point]) -> Result<ActionOutcome> {
        let vp = self.viewport_known();
        if let Some(vp) = vp
            && let Some(p) = path.iter().chain([&to]).find(|p| !vp.contains(**p))
        {
            return Ok(ActionOutcome::failed(format!(
                "drag point ({}, {}) is outside the {}x{} viewport; nothing was done",
                p.x, p.y, vp.width, vp.height
            )));
        }
        let path = path.to_vec();
        self.act(Some(from), true, |ctx| async move {
            self.move_to(&ctx, from, 0).await?;
            self.mouse_event(
                &ctx,
                "mousePressed",
                from,
                Press::new(Some(MouseButton::Left), 1, 1, 0),
            )
            .await?;
            // Without waypoints, interpolate so drag handlers see movement.
            let mut points = path;
            if points.is_empty() {
                let steps = 5;
                for i in 1..steps {
                    let f = i as f64 / steps as f64;
                    points.push(Point::new(
                        from.x + ((to.x - from.x) as f64 * f).round() as i32,
                        from.y + ((to.y - from.y) as f64 * f).round() as i32,
                    ));
                }
            }
            points.push(to);
            for p in points {
                self.move_to(&ctx, p, 1).await?;
            }
            self.mouse_event(
                &ctx,
                "mouseReleased",
                to,
                Press::new(Some(MouseButton::Left), 0, 1, 0),
            )
            .await
        })
        .await
    }

    async fn mouse_down(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome> {
        let Some(p) = at.or_else(|| self.cursor()) else {
            return Ok(ActionOutcome::failed(
                "the pointer has no position yet: give coordinates",
            ));
        };
        let (_, bit) = button_name(button);
        self.act(Some(p), true, |ctx| async move {
            if self.cursor() != Some(p) {
                self.move_to(&ctx, p, 0).await?;
            }
            self.mouse_event(&ctx, "mousePressed", p, Press::new(Some(button), bit, 1, 0))
                .await
        })
        .await
    }

    async fn mouse_up(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome> {
        let Some(p) = at.or_else(|| self.cursor()) else {
            return Ok(ActionOutcome::failed(
                "the pointer has no position yet: give coordinates",
            ));
        };
        let (_, bit) = button_name(button);
        self.act(Some(p), true, |ctx| async move {
            if self.cursor() != Some(p) {
                self.move_to(&ctx, p, bit).await?;
            }
            self.mouse_event(&ctx, "mouseReleased", p, Press::new(Some(button), 0, 1, 0))
                .await
        })
        .await
    }

    async fn scroll(
        &self,
        at: Point,
        delta_x: f64,
        delta_y: f64,
        modifiers: Modifiers,
    ) -> Result<ActionOutcome> {
        if !delta_x.is_finite() || !delta_y.is_finite() {
            return Ok(ActionOutcome::failed("the scroll amount is not a number"));
        }
        let ctx0 = self.active();
        let before = self.eval_in(&ctx0, SCROLL_STATE).await.unwrap_or_default();
        let mut outcome = self
            .act(Some(at), false, |ctx| async move {
                let params = serde_json::json!({
                    "type": "mouseWheel",
                    "x": at.x as f64,
                    "y": at.y as f64,
                    "deltaX": delta_x,
                    "deltaY": delta_y,
                    "modifiers": modifiers.cdp_mask() | self.held_mask(),
                });
                self.conn()
                    .page_raw(&ctx.page, "Input.dispatchMouseEvent", params)
                    .await?;
                *lock(&self.shared.cursor) = Some(at);
                Ok(())
            })
            .await?;
        // The wheel scrolls asynchronously (smooth scrolling off in
        // headless, but the compositor still needs a frame): wait frame by
        // frame until the position has moved and holds still. Nothing moving
        // within a few frames means nothing under the pointer can scroll
        // that way; waiting longer would only add latency.
        if outcome.ok {
            let deadline = Instant::now() + Duration::from_millis(400);
            let mut last = before.clone();
            let mut still_frames = 0;
            loop {
                let now = self
                    .eval_in(
                        &ctx0,
                        &format!(
                            "new Promise(r => requestAnimationFrame(() => r({SCROLL_STATE})))"
                        ),
                    )
                    .await
                    .unwrap_or_default();
                let moved = now != before;
                still_frames = if moved { 0 } else { still_frames + 1 };
                if (moved && now == last) || still_frames >= 3 || Instant::now() >= deadline {
                    if moved && let Some(e) = outcome.effect.as_mut() {
                        e.page_changed = Some(true);
                    }
                    break;
                }
                last = now;
            }
        }
        Ok(outcome)
    }

    async fn type_text(&self, text: &str) -> Result<ActionOutcome> {
        if text.is_empty() {
            return Ok(ActionOutcome::failed("there is no text to type"));
        }
        let per_key = self.shared.options.type_with_key_events;
        let text = text.replace("\r\n", "\n");
        let outcome = self
            .act(None, false, |ctx| async move {
                let mut first = true;
                for line in text.split('\n') {
                    if !first {
                        let enter = keys::normalize_key("Enter")
                            .map_err(|e| LumenError::Script { message: e })?;
                        self.key_event(&ctx, true, &enter, 0, true).await?;
                        self.key_event(&ctx, false, &enter, 0, false).await?;
                    }
                    first = false;
                    if line.is_empty() {
                        continue;
                    }
                    if per_key {
                        for c in line.chars() {
                            let k = keys::normalize_key(&c.to_string())
                                .map_err(|e| LumenError::Script { message: e })?;
                            self.key_event(&ctx, true, &k, 0, true).await?;
                            self.key_event(&ctx, false, &k, 0, false).await?;
                        }
                    } else {
                        self.conn()
                            .page_raw(
                                &ctx.page,
                                "Input.insertText",
                                serde_json::json!({ "text": line }),
                            )
                            .await?;
                    }
                }
                Ok(())
            })
            .await?;
        Ok(flag_typing_into_nothing(outcome))
    }

    async fn key_press(&self, keys: &[String]) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(keys) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        self.act(None, false, |ctx| async move {
            let mask = self.keys_down(&ctx, &defs).await?;
            self.keys_up(&ctx, &defs, mask).await
        })
        .await
    }

    async fn hold_key(&self, keys: &[String], duration: Duration) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(keys) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        let hold = duration.min(MAX_HOLD);
        self.act(None, false, |ctx| async move {
            let mask = self.keys_down(&ctx, &defs).await?;
            tokio::time::sleep(hold).await;
            self.keys_up(&ctx, &defs, mask).await
        })
        .await
    }

    async fn goto(&self, url: &str) -> Result<ActionOutcome> {
        let url = url.trim().to_owned();
        if url.is_empty() {
            return Ok(ActionOutcome::failed("no URL given"));
        }
        let conn = self.shared.conn.clone();
        self.navigate_with("goto", |ctx| async move {
            let r = conn
                .page_raw(
                    &ctx.page,
                    "Page.navigate",
                    serde_json::json!({ "url": url }),
                )
                .await;
            match r {
                Ok(v) => Ok(v["errorText"]
                    .as_str()
                    .filter(|e| !e.is_empty())
                    .map(|e| format!("navigation to {url} failed: {e}"))),
                Err(CallError::Protocol { message, .. }) => {
                    Ok(Some(format!("navigation to {url} failed: {message}")))
                }
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    async fn back(&self) -> Result<ActionOutcome> {
        self.history_step(-1).await
    }

    async fn forward(&self) -> Result<ActionOutcome> {
        self.history_step(1).await
    }

    async fn reload(&self) -> Result<ActionOutcome> {
        let conn = self.shared.conn.clone();
        self.navigate_with("reload", |ctx| async move {
            conn.page_raw(&ctx.page, "Page.reload", serde_json::json!({}))
                .await?;
            Ok(None)
        })
        .await
    }

    async fn settle(&self, options: &SettleOptions) -> Result<SettleReport> {
        let ctx = self.active();
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
            let probe = tokio::time::timeout(left, self.eval_in(&ctx, SETTLE_PROBE)).await;
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
            break false;
        };
        Ok(SettleReport {
            waited_ms: start.elapsed().as_millis() as u64,
            timed_out,
            navigated,
        })
    }

    async fn evaluate(&self, expression: &str) -> Result<serde_json::Value> {
        self.eval_active(expression).await
    }

    async fn key_down(&self, key: &str) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(&[key.to_owned()]) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        let mask = self.held_mask();
        let ctx = self.active();
        for def in &defs {
            let params = keys::key_event_params(true, def, mask | def.modifier_bit, false);
            self.conn()
                .page_raw(&ctx.page, "Input.dispatchKeyEvent", params)
                .await?;
        }
        lock(&self.shared.held).extend(defs);
        Ok(ActionOutcome::ok())
    }

    async fn key_up(&self, key: &str) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(&[key.to_owned()]) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        let Some(def) = defs.into_iter().next() else {
            return Ok(ActionOutcome::failed("no key given"));
        };
        let released = {
            let mut held = lock(&self.shared.held);
            held.iter()
                .position(|k| k.code == def.code)
                .map(|i| held.remove(i))
        };
        let Some(released) = released else {
            return Ok(ActionOutcome::failed(format!("{key} is not held down")));
        };
        let ctx = self.active();
        let params = keys::key_event_params(false, &released, self.held_mask(), false);
        self.conn()
            .page_raw(&ctx.page, "Input.dispatchKeyEvent", params)
            .await?;
        Ok(ActionOutcome::ok())
    }

    async fn accessibility(&self) -> Result<Option<AxSnapshot>> {
        self.accessibility_snapshot().await.map(Some)
    }

    async fn ref_point(&self, reference: &str) -> Result<Option<Point>> {
        if !crate::ax::scroll_to_ref(self, reference).await?.ok {
            return Ok(None);
        }
        crate::ax::ref_center(self, reference).await
    }

    async fn scroll_to_ref(&self, reference: &str) -> Result<ActionOutcome> {
        crate::ax::scroll_to_ref(self, reference).await
    }

    async fn fill_ref(&self, reference: &str, value: &serde_json::Value) -> Result<ActionOutcome> {
        crate::ax::fill_ref(self, reference, value).await
    }

    async fn tabs(&self) -> Result<Vec<TabInfo>> {
        CdpTab::tabs(self).await
    }

    async fn new_tab(&self) -> Result<ActionOutcome> {
        let created = self
            .conn()
            .browser_raw(
                "Target.createTarget",
                serde_json::json!({ "url": "about:blank" }),
            )
            .await?;
        let Some(id) = created["targetId"].as_str().map(str::to_owned) else {
            return Ok(ActionOutcome::failed("the browser opened no tab"));
        };
        self.switch_to_tab(&id).await?;
        let mut outcome = ActionOutcome::ok();
        outcome.effect = Some(Box::new(EffectReceipt {
            new_tab: Some(TabInfo {
                id: id.clone(),
                url: "about:blank".into(),
                title: String::new(),
                followed: true,
            }),
            ..EffectReceipt::default()
        }));
        outcome.hints.push(format!("opened tab {id}, now driven"));
        Ok(outcome)
    }

    async fn switch_tab(&self, id: &str) -> Result<ActionOutcome> {
        match self.switch_to_tab(id).await {
            Ok(()) => Ok(ActionOutcome::ok()),
            Err(e) if is_fatal(&e) => Err(e),
            Err(e) => Ok(ActionOutcome::failed(format!("no tab {id}: {e}"))),
        }
    }

    async fn close_tab(&self, id: &str) -> Result<ActionOutcome> {
        let conn = self.shared.conn.clone();
        let closed = conn
            .browser_raw("Target.closeTarget", serde_json::json!({ "targetId": id }))
            .await?;
        if closed["success"] == false {
            return Ok(ActionOutcome::failed(format!(
                "tab {id} could not be closed"
            )));
        }
        // Closing is asynchronous: wait (bounded) for the target to be gone,
        // so the tab driven before it takes over before the next action.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if self
                .shared
                .browser_log
                .lock()
                .destroyed
                .iter()
                .any(|d| d == id)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let now = self.active_tab_id();
        Ok(ActionOutcome::ok().with_hint(format!("closed tab {id}; now driving tab {now}")))
    }

    async fn close(&self) -> Result<()> {
        let conn = self.shared.conn.clone();
        let process = lock(&self.shared.process).take();
        if let Some(mut process) = process {
            // Ask politely, then make sure.
            if conn.dead_reason().is_none() {
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    conn.browser_raw("Browser.close", serde_json::json!({})),
                )
                .await;
                let _ = tokio::time::timeout(Duration::from_secs(3), process.wait_exit()).await;
            }
            process.kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), process.wait_exit()).await;
            process.remove_profile();
        } else if conn.dead_reason().is_none() {
            let id = self.active_tab_id();
            let _ = conn
                .browser_raw("Target.closeTarget", serde_json::json!({ "targetId": id }))
                .await;
            // Closing is asynchronous in Chromium: wait (bounded) until the
            // target is gone so callers see a consistent tab list.
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                let Ok(list) = conn
                    .browser_raw("Target.getTargets", serde_json::json!({}))
                    .await
                else {
                    break;
                };
                let present = list["targetInfos"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|t| t["targetId"] == id.as_str()));
                if !present {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if let Some(session) = &self.shared.remote
                && let Err(e) = remote::release_browserbase_session(session).await
            {
                tracing::warn!("releasing the Browserbase session failed: {e}");
            }
        }
        conn.mark_dead("the tab was closed");
        Ok(())
    }
}

/// Typing with nothing editable focused and no visible change is not a
/// success the model should believe.
fn flag_typing_into_nothing(mut outcome: ActionOutcome) -> ActionOutcome {
    if let Some(e) = &outcome.effect {
        let editable = e.focus.as_ref().is_some_and(|f| f.editable);
        // `page_changed == Some(false)` is only set where it was measured.
        if !editable && e.page_changed == Some(false) && !e.changed_anything() {
            outcome.hints.push(
                "Nothing editable has focus and the page did not change: click the field first."
                    .to_owned(),
            );
        }
    }
    outcome
}

impl CdpTab {
    /// Whether the connection is gone.
    pub fn is_disconnected(&self) -> bool {
        self.conn().dead_reason().is_some()
    }

    /// Turns effect receipts on or off for later actions (see
    /// [`TabOptions::receipts`]).
    pub fn set_receipts(&self, on: bool) {
        self.shared.receipts.store(on, Ordering::Relaxed);
    }

    /// The folder downloads are saved to.
    pub fn download_dir(&self) -> Option<&Path> {
        self.shared.options.download_dir.as_deref()
    }
}

impl CdpTab {
    /// Sends any CDP command to the driven tab's session and returns its
    /// raw result: the escape hatch for what this crate does not wrap (and
    /// the benchmark's raw baseline, on the same connection).
    ///
    /// # Errors
    /// [`LumenError::Script`] for a protocol error, fatal ones otherwise.
    pub async fn cdp(
        &self,
        method: &'static str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value> {
        let ctx = self.active();
        Ok(self.conn().page_raw(&ctx.page, method, params).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_dim_rounds_to_patches_and_caps() {
        assert_eq!(align_dim(1280, 28, 1344), 1288);
        assert_eq!(align_dim(720, 28, 1344), 728);
        assert_eq!(align_dim(1500, 28, 1344), 1344);
        assert_eq!(align_dim(1280, 56, 1568), 1288);
        assert_eq!(align_dim(5, 28, 1344), 28);
        assert_eq!(align_dim(2000, 100, 1050), 1000);
    }

    #[test]
    fn script_exceptions_become_script_errors() {
        let r = serde_json::json!({
            "result": {"type": "object"},
            "exceptionDetails": {"text": "Uncaught", "exception": {"description": "Error: boom"}}
        });
        match script_value(r) {
            Err(LumenError::Script { message }) => assert_eq!(message, "Error: boom"),
            other => panic!("{other:?}"),
        }
        let ok = serde_json::json!({"result": {"type": "number", "value": 3}});
        assert_eq!(script_value(ok).ok(), Some(serde_json::json!(3)));
    }
}

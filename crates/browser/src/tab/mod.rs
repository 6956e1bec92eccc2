//! [`CdpTab`]: the `BrowserTab` implementation on chromiumoxide.
//!
//! This file holds the tab's state and its public face (the
//! [`BrowserTab`] impl delegates to the files beside it); each concern has
//! a file of its own, each adding an `impl CdpTab` block:
//!
//! - `connect`: launching, connecting, preparing pages, closing;
//! - `pages`: which tab is driven, following, switching, opening, closing
//!   tabs;
//! - `evaluate`: scripts in the page and its frames, URL, title,
//!   accessibility refs, form fields, scroll offset;
//! - `input`: mouse and keyboard;
//! - `capture`: screenshots and the viewport;
//! - `receipt`: what an action changed;
//! - `navigate`: goto, back, forward, reload;
//! - `settle`: waiting for the page to be ready;
//! - `transfer`: uploads (the file chooser, and a file input named by a
//!   ref) and downloads;
//! - `pagelog`: console and network reads;
//! - `guard`: the request filter (network-layer policy);
//! - `live`: a hand-over's live view (screencast, a person's input).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chromiumoxide::Page;
use lumen_core::{
    ActionOutcome, AxSnapshot, BrowserTab, ClickOptions, ElementInfo, ErrorCode, LumenError,
    Modifiers, MouseButton, Point, Result, Screenshot, ScreenshotOptions, SettleOptions,
    SettleReport, Size, TabInfo,
    browser::{FormField, ScrollOffset},
};
use tokio::task::JoinHandle;

use crate::ax::AxRefs;
use crate::cdp::{Conn, PageSession};
use crate::chromium::ChromiumProcess;
use crate::options::TabOptions;
use crate::protocol::keys;
use crate::remote::RemoteSession;
use crate::tracker::{EventLog, Flusher};

mod capture;
pub use capture::aligned_viewport;
mod connect;
mod context;
mod evaluate;
mod guard;
mod input;
mod live;
mod mask;
mod navigate;
mod pagelog;
mod pages;
mod receipt;
mod settle;
mod transfer;

/// One page we drive, with its event tracker.
#[derive(Debug)]
pub(crate) struct PageCtx {
    pub(crate) page: Page,
    pub(crate) id: String,
    pub(crate) log: Arc<EventLog>,
    flusher: Flusher,
    task: JoinHandle<()>,
    pub(crate) ax_refs: Mutex<AxRefs>,
    /// Backend node ids of fields a secret was typed into (masked in
    /// screenshots).
    pub(crate) secret_fields: Mutex<Vec<i64>>,
    /// Console and network entries since attach, drained by reads.
    pub(crate) buffers: Arc<crate::pagelog::PageBuffers>,
    /// Navigation commands of ours in flight on this page (goto, back,
    /// forward, reload): while any is, a `beforeunload` dialog is accepted
    /// whatever the dialog policy says, so a page cannot trap the tab.
    pub(crate) leaving: Arc<std::sync::atomic::AtomicUsize>,
    /// A settle that left its last frame's check to the next screenshot
    /// or input ([`SettleOptions::stable_at_capture`]).
    pub(crate) unsettled: Mutex<Option<settle::Unsettled>>,
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
    /// Files and a dialog answer armed for what opens next.
    armed: Arc<crate::tracker::Armed>,
    /// Whether actions measure receipts (starts as `options.receipts`).
    receipts: AtomicBool,
    /// The browser log's sequence number up to which tabs closed past
    /// [`MAX_OPEN_TABS`](crate::limits::MAX_OPEN_TABS) were told in a receipt.
    tabs_reported: std::sync::atomic::AtomicU64,
    /// The browser log's sequence number when the driven page was last
    /// brought to the front: a tab opened since may have taken it.
    fronted: std::sync::atomic::AtomicU64,
    /// Whether the tab holds its context to
    /// [`MAX_OPEN_TABS`](crate::limits::MAX_OPEN_TABS): when every page in
    /// it is the tab's (a browser it launched, or a context of its own).
    tabs_capped: bool,
    remote: Option<RemoteSession>,
    /// The browser context of a tab opened by [`CdpTab::open_isolated`].
    context: Option<String>,
    /// This tab's context counted in the frame map it shares with the tabs
    /// opened from it or it from (`None` when Chromium named no context).
    seat: Option<crate::owners::Seat>,
    tasks: Vec<JoinHandle<()>>,
    ws_url: String,
    /// The request filter, once installed.
    request_guard: std::sync::OnceLock<Arc<guard::RequestGuard>>,
    /// What a person in a live view holds down.
    live: Arc<live::LiveState>,
    /// The page the last input action was sent to: a secret typed there is
    /// masked there, even when the typing made the tab follow a popup.
    input_page: Mutex<std::sync::Weak<PageCtx>>,
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
/// [`EffectReceipt`](lumen_core::EffectReceipt): URL before and after, navigation, new tab, dialog,
/// download, the element under the pointer and the focus afterwards, and
/// whether the page changed at all.
#[derive(Debug, Clone)]
pub struct CdpTab {
    shared: Arc<Shared>,
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

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CdpTab {
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

    /// Where the pointer last was.
    fn pointer(&self) -> Option<Point> {
        *lock(&self.shared.cursor)
    }

    fn conn(&self) -> &Conn {
        &self.shared.conn
    }

    /// A page we drive, as the page-level helpers below the tab take it.
    fn session<'a>(&'a self, ctx: &'a PageCtx) -> PageSession<'a> {
        PageSession {
            conn: &self.shared.conn,
            page: &ctx.page,
        }
    }

    /// Whether the connection is gone.
    pub fn is_disconnected(&self) -> bool {
        self.conn().dead_reason().is_some()
    }

    /// Whether the browser process still answers on this tab's connection
    /// (`Browser.getVersion`, within 2 s): a health check for a browser
    /// shared by several tabs, which a hung page of one does not fail.
    pub async fn browser_answers(&self) -> bool {
        self.conn().browser_alive().await
    }

    /// Turns effect receipts on or off for later actions (see
    /// [`TabOptions::receipts`]).
    pub fn set_receipts(&self, on: bool) {
        self.shared.receipts.store(on, Ordering::Relaxed);
    }

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

/// Runs one tab operation, logging it with its timing at the browser
/// surface (`LUMEN_LOG_BROWSER`); `detail` is built only when that is on.
async fn op<T>(
    name: &'static str,
    detail: impl FnOnce() -> String,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    if !tracing::enabled!(target: lumen_core::logs::BROWSER, tracing::Level::DEBUG) {
        return fut.await;
    }
    let detail = detail();
    let started = std::time::Instant::now();
    let r = fut.await;
    tracing::debug!(
        target: lumen_core::logs::BROWSER,
        op = name,
        detail = %detail,
        ms = started.elapsed().as_millis() as u64,
        ok = r.is_ok(),
        "tab {name}"
    );
    r
}

#[async_trait::async_trait]
impl BrowserTab for CdpTab {
    async fn screenshot(&self, options: &ScreenshotOptions) -> Result<Screenshot> {
        op(
            "screenshot",
            || format!("{:?} q{}", options.format, options.quality),
            async {
                let shot = self.screenshot_settled(options).await?;
                tracing::debug!(
                    target: lumen_core::logs::BROWSER,
                    width = shot.image.width,
                    height = shot.image.height,
                    bytes = shot.image.data.len(),
                    "screenshot captured"
                );
                Ok(shot)
            },
        )
        .await
    }

    async fn viewport(&self) -> Result<Size> {
        self.read_viewport().await
    }

    async fn set_viewport(&self, size: Size, device_scale_factor: f64) -> Result<()> {
        self.apply_viewport(size, device_scale_factor).await
    }

    async fn url(&self) -> Result<String> {
        self.current_url().await
    }

    async fn title(&self) -> Result<String> {
        self.current_title().await
    }

    fn cursor(&self) -> Option<Point> {
        self.pointer()
    }

    async fn click(&self, at: Point, options: ClickOptions) -> Result<ActionOutcome> {
        op(
            "click",
            || format!("({}, {}) {options:?}", at.x, at.y),
            self.click_at(at, options),
        )
        .await
    }

    async fn hover(&self, at: Point) -> Result<ActionOutcome> {
        op(
            "hover",
            || format!("({}, {})", at.x, at.y),
            self.hover_at(at),
        )
        .await
    }

    async fn drag(&self, from: Point, to: Point, path: &[Point]) -> Result<ActionOutcome> {
        op(
            "drag",
            || format!("({}, {}) → ({}, {})", from.x, from.y, to.x, to.y),
            self.drag_along(from, to, path),
        )
        .await
    }

    async fn mouse_down(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome> {
        self.press_button(at, button).await
    }

    async fn mouse_up(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome> {
        self.release_button(at, button).await
    }

    async fn scroll(
        &self,
        at: Point,
        delta_x: f64,
        delta_y: f64,
        modifiers: Modifiers,
    ) -> Result<ActionOutcome> {
        op(
            "scroll",
            || format!("({}, {}) by ({delta_x}, {delta_y})", at.x, at.y),
            self.wheel(at, delta_x, delta_y, modifiers),
        )
        .await
    }

    async fn type_text(&self, text: &str) -> Result<ActionOutcome> {
        // The text may be a secret: only its length is logged.
        op(
            "type",
            || format!("<{} chars>", text.chars().count()),
            self.type_into_focus(text),
        )
        .await
    }

    async fn key_press(&self, keys: &[String]) -> Result<ActionOutcome> {
        op("key", || keys.join("+"), self.press_chord(keys)).await
    }

    async fn hold_key(&self, keys: &[String], duration: Duration) -> Result<ActionOutcome> {
        self.hold_chord(keys, duration).await
    }

    async fn goto(&self, url: &str) -> Result<ActionOutcome> {
        op(
            "goto",
            || url.chars().take(200).collect(),
            self.open_url(url),
        )
        .await
    }

    async fn back(&self) -> Result<ActionOutcome> {
        op("back", String::new, self.history_step(-1)).await
    }

    async fn forward(&self) -> Result<ActionOutcome> {
        op("forward", String::new, self.history_step(1)).await
    }

    async fn reload(&self) -> Result<ActionOutcome> {
        op("reload", String::new, self.reload_page()).await
    }

    async fn settle(&self, options: &SettleOptions) -> Result<SettleReport> {
        self.wait_until_settled(options).await
    }

    async fn evaluate(&self, expression: &str) -> Result<serde_json::Value> {
        self.eval_active(expression).await
    }

    async fn screencast(&self, max_width: u32) -> Result<Option<lumen_core::LiveFrames>> {
        self.start_screencast(max_width).await
    }

    async fn live_input(&self, input: &lumen_core::LiveInput) -> Result<bool> {
        self.send_live_input(input).await
    }

    async fn key_down(&self, key: &str) -> Result<ActionOutcome> {
        self.hold_key_down(key).await
    }

    async fn key_up(&self, key: &str) -> Result<ActionOutcome> {
        self.release_key(key).await
    }

    async fn accessibility(&self) -> Result<Option<AxSnapshot>> {
        self.accessibility_snapshot().await.map(Some)
    }

    async fn ref_point(&self, reference: &str) -> Result<Option<Point>> {
        self.ref_point_in_view(reference).await
    }

    async fn scroll_to_ref(&self, reference: &str) -> Result<ActionOutcome> {
        let ctx = self.active();
        crate::ax::scroll_to_ref(self.session(&ctx), &ctx.ax_refs, reference).await
    }

    async fn fill_ref(&self, reference: &str, value: &serde_json::Value) -> Result<ActionOutcome> {
        let ctx = self.active();
        crate::ax::fill_ref(self.session(&ctx), &ctx.ax_refs, reference, value).await
    }

    async fn tabs(&self) -> Result<Vec<TabInfo>> {
        CdpTab::tabs(self).await
    }

    async fn mask_secret_field(&self, reference: Option<&str>) -> Result<bool> {
        self.mark_secret(reference).await
    }

    async fn form_fields(&self) -> Result<Option<Vec<FormField>>> {
        self.read_form_fields().await
    }

    async fn scroll_offset(&self) -> Result<Option<ScrollOffset>> {
        self.read_scroll_offset().await
    }

    async fn element_at(&self, at: Point) -> Result<Option<ElementInfo>> {
        self.element_at_point(at).await
    }

    async fn focused_element(&self) -> Result<Option<ElementInfo>> {
        self.focused_now().await
    }

    async fn set_scroll_offset(&self, offset: ScrollOffset) -> Result<ActionOutcome> {
        self.scroll_page_to(offset).await
    }

    async fn answer_next_dialog(&self, accept: bool, text: Option<&str>) -> Result<ActionOutcome> {
        *lock(&self.shared.armed.dialog) = Some((accept, text.map(str::to_owned)));
        let mut out = ActionOutcome::ok();
        out.hints.push(format!(
            "the next dialog will be {}",
            if accept { "accepted" } else { "dismissed" }
        ));
        Ok(out)
    }

    async fn choose_files(&self, paths: &[String]) -> Result<ActionOutcome> {
        let files: Vec<std::path::PathBuf> = paths.iter().map(std::path::PathBuf::from).collect();
        match self.set_upload_files(&files) {
            Ok(()) => {
                let mut out = ActionOutcome::ok();
                out.hints.push(format!(
                    "{} file(s) chosen for the next file chooser: click the file input",
                    files.len()
                ));
                Ok(out)
            }
            Err(e @ (LumenError::BrowserDisconnected { .. } | LumenError::Cancelled { .. })) => {
                Err(e)
            }
            Err(e) => Ok(ActionOutcome::failed(e.to_string())),
        }
    }

    async fn upload_files(
        &self,
        reference: &str,
        paths: &[String],
        document_ids: &[String],
    ) -> Result<ActionOutcome> {
        self.upload_to_ref(reference, paths, document_ids).await
    }

    async fn read_console(&self) -> Result<Option<lumen_core::BufferedLines>> {
        Ok(Some(self.console_entries().await))
    }

    async fn read_network(&self) -> Result<Option<lumen_core::BufferedLines>> {
        Ok(Some(self.network_entries().await))
    }

    async fn new_tab(&self) -> Result<ActionOutcome> {
        self.open_tab().await
    }

    async fn switch_tab(&self, id: &str) -> Result<ActionOutcome> {
        self.switch_tab_outcome(id).await
    }

    async fn close_tab(&self, id: &str) -> Result<ActionOutcome> {
        self.close_other_tab(id).await
    }

    async fn close(&self) -> Result<()> {
        self.shut_down().await
    }

    async fn install_request_filter(
        &self,
        filter: Arc<dyn lumen_core::RequestFilter>,
    ) -> Result<bool> {
        self.install_filter(filter).await
    }
}

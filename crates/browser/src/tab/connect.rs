//! Getting a tab: launching a local Chromium, connecting to a running
//! browser or a Browserbase session, preparing each page we drive (event
//! tracking, the init script, file chooser interception, the viewport),
//! and closing it all again.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::Page;
use lumen_core::{LumenError, Result, Size};
use tokio::task::JoinHandle;

use super::capture::apply_metrics;
use super::{CdpTab, PageCtx, Shared, lock};
use crate::ax::AxRefs;
use crate::cdp::{CallError, Conn};
use crate::chromium::ChromiumProcess;
use crate::options::{BrowserbaseOptions, LaunchOptions, TabOptions};
use crate::owners::{Claims, FrameOwners, Seat};
use crate::remote::{self, RemoteSession};
use crate::scripts::{INIT_SCRIPT, PROBE_FN};
use crate::tracker::{self, EventLog, PageHooks};

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
        Self::setup(conn, options.tab, Some(process), None, vec![watcher], None).await
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
        Self::setup(conn, options, None, None, Vec::new(), None).await
    }

    /// Creates a Browserbase session (API key + project) and connects to it.
    /// Closing the tab releases the session.
    ///
    /// # Errors
    /// [`LumenError::Config`] when the API refuses the key or project,
    /// [`LumenError::BrowserDisconnected`] when it cannot be reached.
    pub async fn browserbase(options: BrowserbaseOptions) -> Result<Self> {
        let session = remote::create_browserbase_session(&options).await?;
        // Billed from here until released: released if connecting or
        // setting up fails, or this future is dropped midway.
        let mut unreleased = remote::Unreleased::new(session.clone());
        let conn = Conn::connect(&session.connect_url, options.tab.call_timeout)
            .await
            .map_err(LumenError::from)?;
        let tab = Self::setup(conn, options.tab, None, Some(session), Vec::new(), None).await?;
        // The tab owns the session now: its close releases it.
        unreleased.disarm();
        Ok(tab)
    }

    pub(super) async fn setup(
        conn: Arc<Conn>,
        options: TabOptions,
        process: Option<ChromiumProcess>,
        remote: Option<RemoteSession>,
        mut tasks: Vec<JoinHandle<()>>,
        isolated: Option<(String, Arc<FrameOwners>)>,
    ) -> Result<Self> {
        let (context, owners) = match isolated {
            Some((id, owners)) => (Some(id), owners),
            None => (None, Arc::default()),
        };
        // The browser context our pages are in: an isolated tab's own, else
        // the one Chromium places our first page in (below).
        let context_id: Arc<std::sync::OnceLock<String>> = Arc::default();
        // Every page of the context is ours (a browser we launched, or a
        // context of our own), so it is held to MAX_OPEN_TABS.
        let tabs_capped = process.is_some() || context.is_some();
        if let Some(id) = &context {
            let _ = context_id.set(id.clone());
        }
        let browser_log = EventLog::new();
        let t = conn.call_timeout;
        let (browser_task, browser_flusher) = tracker::track_browser(
            conn.clone(),
            browser_log.clone(),
            options.download_dir.clone(),
            owners.clone(),
            context_id.clone(),
            tabs_capped,
        )
        .await?;
        tasks.push(browser_task);
        let mut download = match &options.download_dir {
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
        if let Some(id) = &context {
            download["browserContextId"] = serde_json::json!(id);
        }
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
                conn.browser.new_page(
                    chromiumoxide::cdp::browser_protocol::target::CreateTargetParams {
                        browser_context_id: context.clone().map(Into::into),
                        ..chromiumoxide::cdp::browser_protocol::target::CreateTargetParams::new(
                            "about:blank",
                        )
                    },
                ),
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
        let armed: Arc<crate::tracker::Armed> = Arc::default();
        if context.is_none()
            && let Some(id) = conn.context_of(page.target_id().inner()).await
        {
            let _ = context_id.set(id);
        }
        let seat = context_id
            .get()
            .map(|id| owners.seat(Arc::from(id.as_str())));
        let claims = seat.as_ref().map(Seat::claims);
        let ctx = setup_page(&conn, &options, &armed, emulation, claims, page).await?;
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
            armed,
            receipts: AtomicBool::new(options.receipts),
            tabs_reported: Default::default(),
            fronted: Default::default(),
            tabs_capped,
            remote,
            context,
            seat,
            tasks,
            ws_url,
            options,
            request_guard: std::sync::OnceLock::new(),
            live: Default::default(),
            input_page: Mutex::default(),
        };
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// Closes the tab: a browser we launched is asked to quit, then killed
    /// with its profile; otherwise only our tab is closed (and a Browserbase
    /// session released).
    pub(super) async fn shut_down(&self) -> Result<()> {
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
        } else if conn.dead_reason().is_none() && self.dispose_context().await {
            // Disposing the context closed its pages.
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
        }
        // Released through the API whether or not the connection still
        // lives: a session whose browser was lost would otherwise run on
        // (and be billed) until Browserbase times it out.
        if let Some(session) = &self.shared.remote
            && let Err(e) = remote::release_browserbase_session(session).await
        {
            tracing::warn!("releasing the Browserbase session failed: {e}");
        }
        conn.close("the tab was closed");
        Ok(())
    }
}

/// Prepares a page: event tracking, the init script, file chooser
/// interception and the viewport.
pub(super) async fn setup_page(
    conn: &Arc<Conn>,
    options: &TabOptions,
    armed: &Arc<crate::tracker::Armed>,
    emulation: Option<(Size, f64)>,
    claims: Option<Claims>,
    page: Page,
) -> Result<Arc<PageCtx>> {
    let id = page.target_id().inner().clone();
    // The main frame's id is the target's.
    if let Some(c) = &claims {
        c.claim(&id);
    }
    let log = EventLog::new();
    let buffers = Arc::new(crate::pagelog::PageBuffers::default());
    let leaving = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let hooks = PageHooks {
        conn: conn.clone(),
        dialogs: options.dialogs.clone(),
        armed: armed.clone(),
        upload_allowed: options.upload_dir.is_some(),
        buffers: buffers.clone(),
        leaving: leaving.clone(),
        claims,
    };
    let (task, flusher) = tracker::track_page(page.clone(), id.clone(), log.clone(), hooks).await?;
    let ctx = Arc::new(PageCtx {
        page,
        id,
        log,
        flusher,
        task,
        ax_refs: Mutex::new(AxRefs::default()),
        secret_fields: Mutex::new(Vec::new()),
        buffers,
        leaving,
        unsettled: Mutex::new(None),
    });
    // Browser-side messages (a failed load, a blocked request) for the
    // console buffer; the console API and exceptions come with Runtime.
    if let Err(e @ CallError::Disconnected(_)) = conn
        .page_raw(&ctx.page, "Log.enable", serde_json::json!({}))
        .await
    {
        return Err(e.into());
    }
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

//! [`PageLink`]: a lightweight CDP session on a page that already exists,
//! for short-lived processes (`lumen browser click @e3`).
//!
//! [`CdpTab`](crate::CdpTab) is built for a long run: it opens its own tab,
//! tracks every event, installs scripts and emulation, and measures a
//! receipt around each action. A one-shot command needs none of that. A
//! `PageLink` opens one WebSocket straight to the page target
//! (`ws://host:port/devtools/page/<id>`), so there is no tab to create, no
//! `Target.attachToTarget`, no domain enabled up front and no background
//! task; each method sends only the commands it needs, pipelined where the
//! order allows, and waits only for what it started (a navigation).
//!
//! This file holds the link, its calls, input, capture and navigation; its
//! snapshots with refs and what acts on them (locate, fill) are in `refs`,
//! element queries and form controls (get, is, check, select) in `elements`.
//! The socket is [`ws`](crate::ws)'s, the commands [`protocol`](crate::protocol)'s.

use std::time::{Duration, Instant};

use lumen_core::{DialogInfo, ImageFormat, LumenError, MouseButton, Point, Result, Size};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::browser_commands::browser_command;
use crate::options::DialogPolicy;
use crate::protocol::{keys, mouse, pages, runtime, screenshot, typing};
use crate::ws::Wire;

mod debug;
mod elements;
mod files;
mod frames;
mod pointer;
mod refs;

pub use debug::{LoadState, LogEntry};
pub use elements::{CheckResult, ElementQuery, ElementTarget, SelectResult};
pub use files::{DownloadResult, UploadResult};
pub use frames::SnapshotFrame;
pub use refs::{ElementSpot, FillResult, LinkedSnapshot, SavedRef};

/// How long the page may take to answer the first command of a link.
const PAGE_ANSWER: Duration = Duration::from_secs(5);

/// How long a click on a link waits for its navigation to start before it
/// counts as one that did not navigate (a link whose script only opens a
/// dialog, a navigation the page cancels). A script's router that moves
/// within the document is a navigation too: its start ends the wait.
const LINK_START: Duration = Duration::from_millis(500);

/// An expression that says whether the element at `at` is (inside) a link
/// whose click navigates this page: `a[href]` or `area[href]`, not a
/// download, not another window, not a fragment or `javascript:` URL.
fn on_link_expression(at: Point) -> String {
    format!(
        "(() => {{ const e = document.elementFromPoint({}, {}); \
         const a = e && e.closest('a[href], area[href]'); \
         if (!a || a.hasAttribute('download')) return false; \
         const t = (a.getAttribute('target') || '').toLowerCase(); \
         if (t && t !== '_self' && t !== '_top' && t !== '_parent') return false; \
         return !/^\\s*(#|javascript:)/i.test(a.getAttribute('href')); }})()",
        at.x, at.y
    )
}

/// A lightweight CDP session on one existing page target.
///
/// Made for one-shot commands: [`attach`](Self::attach) opens a single
/// WebSocket to the page and nothing else; dropping the link closes it and
/// leaves the page (and anything another client set up on it) alone. It
/// does not measure receipts or follow new tabs; use
/// [`CdpTab`](crate::CdpTab) to drive a run.
pub struct PageLink {
    wire: Mutex<Wire>,
    target_id: String,
    timeout: Duration,
    /// Whether `Page.enable` was sent (navigation and dialog events flow).
    page_events: std::sync::atomic::AtomicBool,
    /// The sessions of the out-of-process frames attached on this link, by
    /// frame id (see `frames`).
    frames: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl std::fmt::Debug for PageLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageLink")
            .field("target_id", &self.target_id)
            .finish_non_exhaustive()
    }
}

/// Resolves after the page's next frame: what was sent before it has been
/// handled and drawn. A page in a background tab draws no frames: a timer
/// ends the wait there (background timers run at most once a second).
const NEXT_FRAME: &str =
    "new Promise(r => { requestAnimationFrame(() => r(0)); setTimeout(() => r(0), 100); })";

/// Resolves once the document has loaded.
const LOADED: &str = "new Promise(r => document.readyState === 'complete' ? r(true) : \
                      window.addEventListener('load', () => r(true), { once: true }))";

impl PageLink {
    /// Opens a link to the page `target_id` of the browser whose DevTools
    /// WebSocket URL is `browser_ws_url` (`ws://host:port/devtools/browser/…`).
    /// Every later call has `call_timeout` as its deadline.
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] when the browser answers but has no such
    /// page; [`LumenError::BrowserDisconnected`] when the browser cannot be
    /// reached; [`LumenError::Config`] for a URL that is not a browser
    /// endpoint.
    pub async fn attach(
        browser_ws_url: &str,
        target_id: &str,
        call_timeout: Duration,
    ) -> Result<Self> {
        let Some((base, _)) = browser_ws_url.split_once("/devtools/browser/") else {
            return Err(LumenError::config(
                "cdp_url",
                format!("{browser_ws_url} is not a browser DevTools WebSocket URL"),
            ));
        };
        let page_url = format!("{base}/devtools/page/{target_id}");
        match Wire::open(&page_url, call_timeout).await {
            Ok(wire) => Ok(Self {
                wire: Mutex::new(wire),
                target_id: target_id.to_owned(),
                timeout: call_timeout,
                page_events: std::sync::atomic::AtomicBool::new(false),
                frames: std::sync::Mutex::default(),
            }),
            Err(e) => {
                // Tell a closed tab from a browser that is gone.
                if Wire::open(browser_ws_url, call_timeout).await.is_ok() {
                    Err(LumenError::invalid_data(
                        "tab id",
                        format!("there is no open tab {target_id}"),
                    ))
                } else {
                    Err(e)
                }
            }
        }
    }

    /// The page target's id.
    pub fn target_id(&self) -> &str {
        &self.target_id
    }

    /// Answers JavaScript dialogs by `policy` from now on (the default:
    /// [`DialogPolicy::default`]).
    pub async fn set_dialog_policy(&self, policy: DialogPolicy) {
        self.wire.lock().await.dialog_policy = policy;
    }

    /// The JavaScript dialogs answered since the last call, in order: the
    /// last 64 at most, each message cut at 1,000 characters (the page
    /// decides how many and how long).
    pub async fn dialogs(&self) -> Vec<DialogInfo> {
        std::mem::take(&mut self.wire.lock().await.dialogs).into()
    }

    /// For a link kept open between commands (the CLI session's keeper):
    /// reads what the page sent since the last call without waiting,
    /// answering any dialog that opened meanwhile by the policy (it is
    /// reported by [`dialogs`](Self::dialogs)), and forgets the events, so
    /// the next command waits only on events of its own.
    ///
    /// # Errors
    /// [`LumenError::BrowserDisconnected`] when the page closed its end
    /// (the tab or the browser is gone): nothing was sent, so the caller
    /// may attach again.
    pub async fn catch_up(&self) -> Result<()> {
        let mut wire = self.wire.lock().await;
        while wire.pump_ready("catching up").await? {}
        wire.events.clear();
        // No call is in flight while the wire is ours: a reply still here
        // belongs to one that was abandoned (its process went away).
        wire.replies.clear();
        Ok(())
    }

    /// Starts the page's events on this link (`Page.enable`, which every
    /// first command sends anyway), so that dialogs the page opens from
    /// now on are answered by the policy even while no command runs (read
    /// them with [`catch_up`](Self::catch_up)).
    ///
    /// # Errors
    /// As [`call`](Self::call); a page that does not answer `Page.enable`
    /// in time is a [`LumenError::SessionTimeout`].
    pub async fn watch(&self) -> Result<()> {
        if !self.page_events.load(std::sync::atomic::Ordering::Relaxed) {
            self.exchange(Vec::new()).await?;
        }
        Ok(())
    }

    /// Sends one CDP command to the page and returns its result.
    ///
    /// # Errors
    /// [`LumenError::Script`] when Chromium refuses the command,
    /// [`LumenError::BrowserDisconnected`] when the connection fails or no
    /// answer comes in time.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value> {
        self.exchange(vec![(method, params)])
            .await?
            .pop()
            .unwrap_or_else(|| Err(LumenError::disconnected(format!("{method}: no answer"))))
    }

    /// Sends several commands at once (Chromium runs them in order) and
    /// returns their results in order; the first refusal is the error.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn calls(&self, commands: Vec<(&str, Value)>) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(commands.len());
        let mut first_error = None;
        for answer in self.exchange(commands).await? {
            match answer {
                Ok(v) => out.push(v),
                Err(e) => {
                    first_error.get_or_insert(e);
                    out.push(Value::Null);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Sends several commands in one write and returns each one's answer;
    /// only a failed connection is an error of the whole.
    ///
    /// The first exchange on a link starts with `Page.enable`, so that
    /// navigation events flow and dialogs are seen (and answered) from the
    /// start; its answer must come within [`PAGE_ANSWER`], or the page is
    /// reported as not answering.
    async fn exchange(&self, commands: Vec<(&str, Value)>) -> Result<Vec<Result<Value>>> {
        self.exchange_in(None, commands).await
    }

    /// [`exchange`](Self::exchange) on the flattened session `session` (an
    /// out-of-process frame's; `None`: the page's).
    async fn exchange_in(
        &self,
        session: Option<&str>,
        commands: Vec<(&str, Value)>,
    ) -> Result<Vec<Result<Value>>> {
        let first = !self
            .page_events
            .swap(true, std::sync::atomic::Ordering::Relaxed);
        let mut wire = self.wire.lock().await;
        let deadline = Instant::now() + self.timeout;
        let enable = if first {
            Some(wire.feed("Page.enable", json!({})).await?)
        } else {
            None
        };
        let mut ids = Vec::with_capacity(commands.len());
        for (method, params) in commands {
            ids.push((wire.feed_in(session, method, params).await?, method));
        }
        wire.flush().await?;
        if let Some(id) = enable {
            // A page blocked by a dialog nobody saw open never answers;
            // neither does one stuck in a script. Say so early.
            let soon = deadline.min(Instant::now() + PAGE_ANSWER);
            while wire.replies.remove(&id).is_none() {
                if !wire.pump(soon, "Page.enable").await? {
                    return Err(LumenError::SessionTimeout {
                        what: "the page did not answer: a script may still be running, or a \
                               JavaScript dialog the page opened between commands may be \
                               waiting (only dialogs that open during a command are \
                               answered); reloading the page clears a dialog"
                            .into(),
                        after: PAGE_ANSWER,
                    });
                }
            }
        }
        Self::answers(&mut wire, ids, deadline).await
    }

    /// Reads the answers of commands already sent, in order.
    async fn answers(
        wire: &mut Wire,
        ids: Vec<(u64, &str)>,
        deadline: Instant,
    ) -> Result<Vec<Result<Value>>> {
        let mut out = Vec::with_capacity(ids.len());
        for (id, method) in ids {
            match wire.reply(id, method, deadline).await {
                Err(e @ LumenError::BrowserDisconnected { .. }) => return Err(e),
                answer => out.push(answer),
            }
        }
        Ok(out)
    }

    /// Evaluates an expression in the page (promises awaited) and returns
    /// its JSON value, retrying while a navigation swaps the document.
    ///
    /// # Errors
    /// [`LumenError::Script`] when it throws.
    pub async fn evaluate(&self, expression: &str) -> Result<Value> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.evaluate_once(expression).await {
                Ok(r) => return r,
                Err(LumenError::Script { message })
                    if message.contains("context") && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One evaluation, measured in the page (as `PageSession::evaluate`
    /// does); the outer error is the call's, the inner one the script's.
    async fn evaluate_once(&self, expression: &str) -> Result<Result<Value>> {
        let (method, params) = runtime::evaluate(expression);
        match runtime::guarded_value(self.call(method, params).await?) {
            Ok(runtime::Guarded::Value(v)) => return Ok(Ok(v)),
            Ok(runtime::Guarded::NotAnExpression) => {}
            Err(e) => return Ok(Err(e)),
        }
        let (method, params) = runtime::evaluate_plain(expression);
        Ok(runtime::plain_value(self.call(method, params).await?))
    }

    /// The page's URL.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn url(&self) -> Result<String> {
        Ok(self
            .evaluate("location.href")
            .await?
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// The page's title.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn title(&self) -> Result<String> {
        Ok(self
            .evaluate("document.title")
            .await?
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// The layout viewport in CSS pixels.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn viewport(&self) -> Result<Size> {
        let v = self.evaluate(runtime::VIEWPORT).await?;
        Ok(runtime::viewport_size(&v))
    }

    /// Clicks `count` times at `at` (viewport CSS pixels). When the click
    /// starts a navigation of this page, waits (up to the call deadline) for
    /// the new document to load. Returns whether it navigated.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn click(&self, at: Point, button: MouseButton, count: u32) -> Result<bool> {
        let mut commands = vec![mouse::mouse_event("mouseMoved", at, mouse::Press::NONE)];
        let count = i64::from(count.max(1));
        commands.extend(
            mouse::click_events(at, button, count, 0)
                .into_iter()
                .map(|(kind, at, press)| mouse::mouse_event(kind, at, press)),
        );
        // A round trip through the renderer after the input, which also
        // says whether the click landed on a link that navigates this page.
        commands.push((
            "Runtime.evaluate",
            json!({ "expression": on_link_expression(at), "returnByValue": true }),
        ));
        // Events the page sent before the click, read or not (a load that
        // ended between commands, on a link kept open), must not be taken
        // for the click's: a round trip first, whose answer comes after
        // all of them.
        self.call(
            "Runtime.evaluate",
            json!({ "expression": "0", "returnByValue": true }),
        )
        .await?;
        self.wire.lock().await.events.clear();
        let mut answers = self.exchange(commands).await?;
        // The barrier fails when the click's navigation already swapped
        // the document: that navigation is then in the events.
        let on_link = answers
            .pop()
            .and_then(std::result::Result::ok)
            .is_some_and(|v| v["result"]["value"] == true);
        if let Some(Err(e)) = answers.into_iter().find(Result::is_err) {
            return Err(e);
        }
        // A link's navigation can be reported after the barrier's answer
        // (the page starts it a moment later): give it a moment to start.
        let start = on_link.then_some(LINK_START);
        self.finish_navigation_within(false, start).await
    }

    /// Moves the pointer to `at`.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn hover(&self, at: Point) -> Result<()> {
        let (method, params) = mouse::mouse_event("mouseMoved", at, mouse::Press::NONE);
        self.call(method, params).await.map(drop)
    }

    /// Turns a wheel at `at` by `(dx, dy)` CSS pixels and waits (briefly)
    /// for the scroll to land; returns the page's scroll offsets before and
    /// after.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn wheel(&self, at: Point, dx: f64, dy: f64) -> Result<([f64; 2], [f64; 2])> {
        let before = self.evaluate("[scrollX, scrollY]").await?;
        let (method, params) = mouse::wheel(at, dx, dy, 0);
        self.call(method, params).await?;
        // Frame by frame until the offsets moved and held for two frames,
        // or 400 ms passed.
        let after = self
            .evaluate(&format!(
                "new Promise(r => {{ const b = [{bx}, {by}]; const t0 = performance.now(); \
                 let last = null, same = 0; const tick = () => {{ const now = [scrollX, scrollY]; \
                 const moved = now[0] !== b[0] || now[1] !== b[1]; \
                 same = last && now[0] === last[0] && now[1] === last[1] ? same + 1 : 0; last = now; \
                 if ((moved && same >= 2) || performance.now() - t0 > 400) r(now); \
                 else requestAnimationFrame(tick); }}; requestAnimationFrame(tick); }})",
                bx = before[0].as_f64().unwrap_or(0.0),
                by = before[1].as_f64().unwrap_or(0.0),
            ))
            .await?;
        let pair = |v: &Value| [v[0].as_f64().unwrap_or(0.0), v[1].as_f64().unwrap_or(0.0)];
        Ok((pair(&before), pair(&after)))
    }

    /// Types text into the focused element as a keyboard would: a key
    /// press per character (`keydown`, `keypress`, `keyup`, then the
    /// page's `beforeinput`/`input`), Enter between lines; a character no
    /// key types (`é`, an emoji) is inserted as text.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn type_text(&self, text: &str) -> Result<()> {
        let text = text.replace("\r\n", "\n");
        self.calls(typing::type_text(&text, true)?).await.map(drop)
    }

    /// Presses a key or chord (`Enter`, `Control+a`, `["Shift", "Tab"]`).
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for an unknown key name; otherwise as
    /// [`call`](Self::call).
    pub async fn press(&self, chord: &[String]) -> Result<()> {
        let defs = keys::parse_chord(chord).map_err(|e| LumenError::invalid_data("key", e))?;
        self.calls(keys::chord_commands(&defs)).await.map(drop)
    }

    /// A PNG of the viewport.
    ///
    /// # Errors
    /// As [`call`](Self::call); [`LumenError::InvalidData`] for an unreadable
    /// answer.
    pub async fn screenshot_png(&self) -> Result<Vec<u8>> {
        let (method, params) = screenshot::capture(&screenshot::Capture {
            format: ImageFormat::Png,
            quality: 100,
            clip: None,
            fast: true,
        });
        let r = self.call(method, params).await?;
        screenshot::decode(&r)
    }

    /// Opens `url` in the page and waits for it to load.
    ///
    /// # Errors
    /// [`LumenError::Script`] when the navigation fails (`net::ERR_…`);
    /// otherwise as [`call`](Self::call).
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.wire.lock().await.events.clear();
        let (method, params) = pages::navigate(url);
        let navigated = self.call(method, params).await?;
        if let Some(err) = pages::navigate_error(&navigated) {
            return Err(LumenError::Script {
                message: format!("could not open {url}: {err}"),
            });
        }
        if !pages::navigate_loads(&navigated) {
            // Same document (a fragment): nothing to load.
            return Ok(());
        }
        self.finish_navigation(true).await.map(drop)
    }

    /// Goes `delta` steps through the page's history (-1 back, 1 forward)
    /// and waits for the page to load.
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] when there is no such history entry;
    /// otherwise as [`call`](Self::call).
    pub async fn history(&self, delta: i64) -> Result<()> {
        let (method, params) = pages::history();
        let h = self.call(method, params).await?;
        let Some(entry) = pages::history_entry(&h, delta) else {
            return Err(LumenError::invalid_data(
                "history",
                if delta < 0 {
                    "there is no page to go back to"
                } else {
                    "there is no page to go forward to"
                },
            ));
        };
        self.wire.lock().await.events.clear();
        let (method, params) = pages::go_to_entry(entry);
        self.call(method, params).await?;
        self.finish_navigation(true).await.map(drop)
    }

    /// Reloads the page and waits for it to load.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn reload(&self) -> Result<()> {
        self.wire.lock().await.events.clear();
        let (method, params) = pages::reload();
        self.call(method, params).await?;
        self.finish_navigation(true).await.map(drop)
    }

    /// After a command: when a navigation of the main frame was requested
    /// (or `expected`), waits for it to commit and the new document to
    /// load, up to the call deadline. Returns whether one committed.
    async fn finish_navigation(&self, expected: bool) -> Result<bool> {
        self.finish_navigation_within(expected, None).await
    }

    /// [`finish_navigation`](Self::finish_navigation), waiting up to
    /// `start` for a navigation that has not been requested yet.
    async fn finish_navigation_within(
        &self,
        expected: bool,
        start: Option<Duration>,
    ) -> Result<bool> {
        let main = self.target_id.clone();
        let of_main = move |ev: &Value| {
            let p = &ev["params"];
            p["frameId"].as_str() == Some(main.as_str())
                || (p["frame"]["id"].as_str() == Some(main.as_str())
                    && p["frame"]["parentId"].is_null())
        };
        let deadline = Instant::now() + self.timeout;
        let is_start = |ev: &Value| {
            matches!(
                ev["method"].as_str(),
                Some(
                    "Page.frameRequestedNavigation"
                        | "Page.frameStartedNavigating"
                        | "Page.frameStartedLoading"
                )
            ) && of_main(ev)
        };
        let committed = {
            let mut wire = self.wire.lock().await;
            let requested = expected
                || wire.events.iter().any(is_start)
                || match start {
                    Some(wait) => {
                        let until = deadline.min(Instant::now() + wait);
                        wire.event(until, is_start).await?.is_some()
                    }
                    None => false,
                };
            if !requested {
                return Ok(false);
            }
            let end = wire
                .event(deadline, |ev| {
                    matches!(
                        ev["method"].as_str(),
                        Some(
                            "Page.frameNavigated"
                                | "Page.navigatedWithinDocument"
                                | "Page.frameStoppedLoading"
                        )
                    ) && of_main(ev)
                })
                .await?;
            match end {
                Some(ev) => ev["method"] == "Page.frameNavigated",
                None => false,
            }
        };
        if committed {
            self.evaluate(LOADED).await?;
        }
        Ok(committed)
    }
}

impl PageLink {
    /// Resizes the page's window so that its viewport is `size` CSS pixels
    /// (the window outlives this link, unlike an emulated viewport, which
    /// ends with the session that set it).
    ///
    /// # Errors
    /// As [`browser_command`].
    pub async fn resize_viewport(&self, browser_ws_url: &str, size: Size) -> Result<Size> {
        let mut now = self.viewport().await?;
        // The browser's own bars can change once (an info bar appears), so
        // measure again after each resize.
        for round in 0..3 {
            if now == size {
                break;
            }
            if round == 0 {
                // A page behind a popup it opened draws no frames, and its
                // viewport would not follow the window: it comes to the
                // front first.
                self.call("Page.bringToFront", json!({})).await?;
            }
            let window = browser_command(
                browser_ws_url,
                "Browser.getWindowForTarget",
                json!({ "targetId": self.target_id }),
                self.timeout,
            )
            .await?;
            let bounds = &window["bounds"];
            let grow = |have: u32, want: u32, outer: &Value| {
                outer.as_i64().unwrap_or(0) + i64::from(want) - i64::from(have)
            };
            browser_command(
                browser_ws_url,
                "Browser.setWindowBounds",
                json!({
                    "windowId": window["windowId"],
                    "bounds": {
                        "width": grow(now.width, size.width, &bounds["width"]),
                        "height": grow(now.height, size.height, &bounds["height"]),
                    },
                }),
                self.timeout,
            )
            .await?;
            // The new size reaches the page with the next frame.
            self.evaluate(NEXT_FRAME).await?;
            now = self.viewport().await?;
        }
        Ok(now)
    }
}

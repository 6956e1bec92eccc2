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

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use async_tungstenite::WebSocketStream;
use async_tungstenite::tokio::TokioAdapter;
use async_tungstenite::tungstenite::Message;
use async_tungstenite::tungstenite::protocol::WebSocketConfig;
use base64::Engine as _;
use futures::{SinkExt as _, StreamExt as _};
use lumen_core::{DialogInfo, LumenError, MouseButton, Point, Result, Size, TabInfo};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::ax::{AxRefs, AxSnapshot, walk};
use crate::keys::{self, KeyDef};
use crate::options::{DialogAction, DialogPolicy};

/// How long the page may take to answer the first command of a link.
const PAGE_ANSWER: Duration = Duration::from_secs(5);
/// Events kept for waits; older ones are dropped.
const MAX_EVENTS: usize = 512;
/// The window property holding a document's mark.
const MARK_PROPERTY: &str = "__lumenSnapshot";
/// The window property holding the document's refs: a `Map` from ref
/// number to a `WeakRef` of its element, filled by each snapshot.
const REFS_PROPERTY: &str = "__lumenRefs";

/// One WebSocket speaking CDP, read only while a call waits.
struct Wire {
    ws: WebSocketStream<TokioAdapter<tokio::net::TcpStream>>,
    next_id: u64,
    /// Replies that arrived while another call was awaited.
    replies: HashMap<u64, std::result::Result<Value, String>>,
    events: VecDeque<Value>,
    /// How JavaScript dialogs are answered (as soon as they open).
    dialog_policy: DialogPolicy,
    /// The dialogs answered so far.
    dialogs: Vec<DialogInfo>,
}

impl Wire {
    async fn open(url: &str, timeout: Duration) -> Result<Self> {
        let config = WebSocketConfig::default()
            .max_message_size(None)
            .max_frame_size(None);
        let connect = async {
            let host = url
                .strip_prefix("ws://")
                .and_then(|rest| rest.split('/').next())
                .filter(|h| !h.is_empty())
                .ok_or_else(|| format!("{url} is not a ws:// URL"))?;
            let tcp = tokio::net::TcpStream::connect(host)
                .await
                .map_err(|e| e.to_string())?;
            // Commands are small and each waits for its answer: without
            // this, Nagle's algorithm holds the second of two quick writes
            // until the first is acknowledged.
            tcp.set_nodelay(true).map_err(|e| e.to_string())?;
            async_tungstenite::tokio::client_async_with_config(url, tcp, Some(config))
                .await
                .map_err(|e| e.to_string())
        };
        let (ws, _) = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                return Err(LumenError::disconnected(format!(
                    "could not connect to {url}: {e}"
                )));
            }
            Err(_) => {
                return Err(LumenError::disconnected(format!(
                    "connecting to {url} timed out"
                )));
            }
        };
        Ok(Self {
            ws,
            next_id: 0,
            replies: HashMap::new(),
            events: VecDeque::new(),
            dialog_policy: DialogPolicy::default(),
            dialogs: Vec::new(),
        })
    }

    /// Queues a command; [`flush`](Self::flush) sends what is queued.
    async fn feed(&mut self, method: &str, params: Value) -> Result<u64> {
        self.next_id += 1;
        let id = self.next_id;
        let text = json!({ "id": id, "method": method, "params": params }).to_string();
        self.ws
            .feed(Message::text(text))
            .await
            .map_err(|e| LumenError::disconnected(format!("{method}: CDP socket failed: {e}")))?;
        Ok(id)
    }

    async fn flush(&mut self) -> Result<()> {
        self.ws
            .flush()
            .await
            .map_err(|e| LumenError::disconnected(format!("CDP socket failed: {e}")))
    }

    async fn send(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.feed(method, params).await?;
        self.flush().await?;
        Ok(id)
    }

    /// Reads one message before `deadline`; `Ok(false)` on timeout.
    async fn pump(&mut self, deadline: Instant, what: &str) -> Result<bool> {
        let left = deadline.saturating_duration_since(Instant::now());
        let next = match tokio::time::timeout(left, self.ws.next()).await {
            Err(_) => return Ok(false),
            Ok(next) => next,
        };
        let text = match next {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Close(_))) | None => {
                return Err(LumenError::disconnected(format!(
                    "{what}: the browser closed the connection (the tab or the browser is gone)"
                )));
            }
            Some(Ok(_)) => return Ok(true),
            Some(Err(e)) => {
                return Err(LumenError::disconnected(format!(
                    "{what}: CDP socket failed: {e}"
                )));
            }
        };
        let Ok(mut msg) = serde_json::from_str::<Value>(text.as_str()) else {
            return Ok(true);
        };
        if let Some(id) = msg.get("id").and_then(Value::as_u64) {
            let reply = match msg.get("error") {
                Some(err) => Err(err["message"]
                    .as_str()
                    .unwrap_or("the browser refused the command")
                    .to_owned()),
                None => Ok(msg["result"].take()),
            };
            self.replies.insert(id, reply);
        } else if msg.get("method").is_some() {
            if msg["method"] == "Page.javascriptDialogOpening" {
                self.answer_dialog(&msg["params"]).await?;
            }
            if self.events.len() >= MAX_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(msg);
        }
        Ok(true)
    }

    /// Answers a dialog that just opened, by the policy: the page is
    /// blocked until it is answered.
    async fn answer_dialog(&mut self, params: &Value) -> Result<()> {
        let kind = params["type"].as_str().unwrap_or("alert").to_owned();
        let accept = self.dialog_policy.decide(&kind) == DialogAction::Accept;
        let mut answer = json!({ "accept": accept });
        if kind == "prompt" && accept {
            let text = self
                .dialog_policy
                .prompt_text
                .clone()
                .or_else(|| params["defaultPrompt"].as_str().map(str::to_owned));
            if let Some(text) = text {
                answer["promptText"] = text.into();
            }
        }
        // Its answer is never read: the command that was waiting goes on.
        self.send("Page.handleJavaScriptDialog", answer).await?;
        self.dialogs.push(DialogInfo {
            kind,
            message: params["message"].as_str().unwrap_or_default().to_owned(),
            accepted: accept,
        });
        Ok(())
    }

    async fn reply(&mut self, id: u64, method: &str, deadline: Instant) -> Result<Value> {
        loop {
            if let Some(reply) = self.replies.remove(&id) {
                return reply.map_err(|message| LumenError::Script {
                    message: format!("{method}: {message}"),
                });
            }
            if !self.pump(deadline, method).await? {
                return Err(LumenError::disconnected(format!(
                    "{method} got no answer in time (the page may be busy or hung)"
                )));
            }
        }
    }

    /// Waits for an event `accept` takes, among those already seen and
    /// those to come; `None` at the deadline.
    async fn event(
        &mut self,
        deadline: Instant,
        mut accept: impl FnMut(&Value) -> bool,
    ) -> Result<Option<Value>> {
        loop {
            if let Some(i) = self.events.iter().position(&mut accept) {
                return Ok(self.events.remove(i));
            }
            if !self.pump(deadline, "waiting for the page").await? {
                return Ok(None);
            }
        }
    }
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
}

impl std::fmt::Debug for PageLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageLink")
            .field("target_id", &self.target_id)
            .finish_non_exhaustive()
    }
}

/// A snapshot taken through a [`PageLink`], with what a later process
/// needs to use its refs.
#[derive(Debug, Clone)]
pub struct LinkedSnapshot {
    /// The snapshot (refs `@e1`, `@e2`, … in document order).
    pub snapshot: AxSnapshot,
    /// The document's mark (see [`PageLink::snapshot`]).
    pub mark: String,
    /// Every ref number given in this document so far, with the DOM backend
    /// node id it names.
    pub refs: Vec<(u32, i64)>,
}

/// A snapshot ref as a later process knows it (from a [`LinkedSnapshot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedRef<'a> {
    /// The ref's number (`3` for `@e3`).
    pub number: u32,
    /// The DOM backend node id of its element.
    pub backend: i64,
    /// The mark of the document the ref was given in.
    pub mark: &'a str,
}

/// Where an element named by a backend node id can be acted on, or why it
/// cannot.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElementSpot {
    /// The centre of its visible part, in viewport CSS pixels; nothing
    /// covers it there.
    At(Point),
    /// The page holds another document than the one the mark was set on.
    OtherDocument,
    /// The element was removed from the page.
    Gone,
    /// The element has no box (hidden, or empty).
    NoBox,
    /// The element lies outside the viewport (its centre given).
    OffScreen(Point),
    /// Another element covers the element's centre.
    Covered {
        /// The covered point.
        at: Point,
        /// The covering element (`<div id="consent">`).
        by: String,
    },
}

/// What [`PageLink::fill`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FillResult {
    /// The field holds the new text.
    Filled,
    /// The element cannot be used (why, as for [`PageLink::locate`]);
    /// nothing was typed.
    Refused(ElementSpot),
    /// The element took no text input (the element described); nothing
    /// was typed.
    NotEditable(String),
}

/// The page-side half of [`PageLink::fill`]: the checks of `LOCATE_FN`,
/// then focus the field, select its content and replace it; on any refusal
/// focus leaves the page's elements and nothing is typed.
const FILL_FN: &str = r#"function(mark, prop, text) {
  const spot = (LOCATE).call(this, mark, prop);
  const away = () => { const a = document.activeElement; if (a && a !== document.body) a.blur(); };
  if (spot.kind !== 'at') { away(); return spot; }
  const el = this.nodeType === 1 ? this : this.parentElement;
  const tag = el.tagName.toLowerCase();
  const isText = tag === 'textarea' || (tag === 'input' && /^(text|search|email|url|tel|password|number|)$/.test(el.type));
  if (!isText && !el.isContentEditable) {
    away();
    return { kind: 'noedit', by: '<' + tag + (el.id ? ' id="' + el.id + '"' : '') + '>' };
  }
  el.focus();
  if (document.activeElement !== el && !el.contains(document.activeElement)) {
    away();
    return { kind: 'noedit', by: '<' + tag + (el.id ? ' id="' + el.id + '"' : '') + '> (it refuses focus)' };
  }
  if (isText) { el.select(); }
  else { const r = document.createRange(); r.selectNodeContents(el); const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
  // The editing command a paste or an IME commit goes through: trusted
  // beforeinput/input events, the undo stack, frameworks' value tracking.
  const typed = text === '' ? document.execCommand('delete') : document.execCommand('insertText', false, text);
  return { kind: 'filled', typed };
}"#;

/// The page-side check behind [`PageLink::locate`].
const LOCATE_FN: &str = r#"function(mark, prop) {
  if (window[prop] !== mark) return { kind: 'doc' };
  if (!this.isConnected) return { kind: 'gone' };
  const el = this.nodeType === 1 ? this : this.parentElement;
  if (!el) return { kind: 'nobox' };
  const rects = Array.from(el.getClientRects()).filter(r => r.width > 0 && r.height > 0);
  if (!rects.length) return { kind: 'nobox' };
  const vw = window.innerWidth, vh = window.innerHeight;
  const describe = (e) => {
    let s = '<' + e.tagName.toLowerCase();
    if (e.id) s += ' id="' + e.id + '"';
    else if (typeof e.className === 'string' && e.className.trim()) s += ' class="' + e.className.trim().split(/\s+/).slice(0, 2).join(' ') + '"';
    s += '>';
    const t = (e.innerText || e.getAttribute('aria-label') || '').trim().replace(/\s+/g, ' ');
    if (t) s += ' "' + (t.length > 40 ? t.slice(0, 40) + '…' : t) + '"';
    return s;
  };
  const inside = (hit) => {
    if (!hit) return false;
    if (hit === el || el.contains(hit) || hit.contains(el)) return true;
    for (let n = el; n; ) {
      const root = n.getRootNode();
      if (!root || !root.host) break;
      if (root.host === hit) return true;
      n = root.host;
    }
    return false;
  };
  for (const r of rects) {
    const x0 = Math.max(r.left, 0), x1 = Math.min(r.right, vw);
    const y0 = Math.max(r.top, 0), y1 = Math.min(r.bottom, vh);
    if (x1 - x0 < 1 || y1 - y0 < 1) continue;
    const x = Math.floor((x0 + x1) / 2), y = Math.floor((y0 + y1) / 2);
    const hit = document.elementFromPoint(x, y);
    if (inside(hit)) return { kind: 'at', x, y };
    return { kind: 'covered', x, y, by: hit ? describe(hit) : 'nothing' };
  }
  const r = rects[0];
  return { kind: 'off', x: Math.round(r.left + r.width / 2), y: Math.round(r.top + r.height / 2) };
}"#;

/// Registers elements under their ref numbers in the document that still
/// carries `mark` (`this` is the first element; `nodes` follow `nums`).
const REGISTER_FN: &str = r#"function(mark, prop, refsProp, nums, ...nodes) {
  if (window[prop] !== mark) return false;
  let refs = window[refsProp];
  if (!(refs instanceof Map)) {
    refs = new Map();
    Object.defineProperty(window, refsProp, { value: refs, configurable: true });
  }
  nums.forEach((n, i) => refs.set(n, new WeakRef(nodes[i])));
  return true;
}"#;

/// Calls `f(mark, prop, ...args)` on the element registered under ref `n`
/// (see `REGISTER_FN`), in the document that still carries `mark`.
const ON_REF_FN: &str = r#"(function(mark, prop, refsProp, n, f, args) {
  if (window[prop] !== mark) return { kind: 'doc' };
  const refs = window[refsProp];
  const held = refs instanceof Map ? refs.get(n) : undefined;
  const el = held && held.deref();
  if (!el) return { kind: 'unregistered' };
  return f.call(el, mark, prop, ...args);
})"#;

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

    /// The JavaScript dialogs answered since the last call, in order.
    pub async fn dialogs(&self) -> Vec<DialogInfo> {
        std::mem::take(&mut self.wire.lock().await.dialogs)
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
            ids.push((wire.feed(method, params).await?, method));
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
        let params = json!({
            "expression": expression,
            "returnByValue": true,
            "awaitPromise": true,
        });
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.call("Runtime.evaluate", params.clone()).await {
                Ok(r) => return crate::tab::script_value(r),
                Err(LumenError::Script { message })
                    if message.contains("context") && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e),
            }
        }
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
        let v = self.evaluate("[innerWidth, innerHeight]").await?;
        let dim = |i: usize| {
            v[i].as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0)
        };
        Ok(Size::new(dim(0), dim(1)))
    }

    fn mouse(kind: &str, at: Point, button: &str, buttons: i64, count: u32) -> Value {
        json!({
            "type": kind,
            "x": f64::from(at.x),
            "y": f64::from(at.y),
            "button": button,
            "buttons": buttons,
            "clickCount": count,
        })
    }

    /// Clicks `count` times at `at` (viewport CSS pixels). When the click
    /// starts a navigation of this page, waits (up to the call deadline) for
    /// the new document to load. Returns whether it navigated.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn click(&self, at: Point, button: MouseButton, count: u32) -> Result<bool> {
        let (name, bit) = match button {
            MouseButton::Left => ("left", 1),
            MouseButton::Right => ("right", 2),
            MouseButton::Middle => ("middle", 4),
        };
        let mut commands = vec![(
            "Input.dispatchMouseEvent",
            Self::mouse("mouseMoved", at, "none", 0, 0),
        )];
        for n in 1..=count.max(1) {
            let press = Self::mouse("mousePressed", at, name, bit, n);
            let release = Self::mouse("mouseReleased", at, name, 0, n);
            commands.push(("Input.dispatchMouseEvent", press));
            commands.push(("Input.dispatchMouseEvent", release));
        }
        // A round trip through the renderer after the input: any navigation
        // the click requested has been reported before its answer.
        commands.push((
            "Runtime.evaluate",
            json!({ "expression": "0", "returnByValue": true }),
        ));
        self.wire.lock().await.events.clear();
        let mut answers = self.exchange(commands).await?;
        // The barrier fails when the click's navigation already swapped
        // the document: that navigation is then in the events.
        answers.pop();
        if let Some(Err(e)) = answers.into_iter().find(Result::is_err) {
            return Err(e);
        }
        self.finish_navigation(false).await
    }

    /// Moves the pointer to `at`.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn hover(&self, at: Point) -> Result<()> {
        self.call(
            "Input.dispatchMouseEvent",
            Self::mouse("mouseMoved", at, "none", 0, 0),
        )
        .await
        .map(drop)
    }

    /// Turns a wheel at `at` by `(dx, dy)` CSS pixels and waits (briefly)
    /// for the scroll to land; returns the page's scroll offsets before and
    /// after.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn wheel(&self, at: Point, dx: f64, dy: f64) -> Result<([f64; 2], [f64; 2])> {
        let before = self.evaluate("[scrollX, scrollY]").await?;
        self.call(
            "Input.dispatchMouseEvent",
            json!({
                "type": "mouseWheel",
                "x": f64::from(at.x),
                "y": f64::from(at.y),
                "deltaX": dx,
                "deltaY": dy,
            }),
        )
        .await?;
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

    /// Types text into the focused element: one `Input.insertText` per
    /// line, Enter between lines.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn type_text(&self, text: &str) -> Result<()> {
        self.calls(typing(text)?).await.map(drop)
    }

    /// Presses a key or chord (`Enter`, `Control+a`, `["Shift", "Tab"]`).
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for an unknown key name; otherwise as
    /// [`call`](Self::call).
    pub async fn press(&self, chord: &[String]) -> Result<()> {
        let defs = keys::parse_chord(chord).map_err(|e| LumenError::invalid_data("key", e))?;
        self.calls(key_events(&defs)).await.map(drop)
    }

    /// Fills the text field `target` names (checked against its document
    /// mark as in [`locate`](Self::locate), and refused when hidden, off
    /// screen or covered): focuses it, selects its content and replaces it
    /// with `text` through the page's editing command (`insertText`, as a
    /// paste or an IME commit does: trusted `beforeinput`/`input` events),
    /// all in one call; `Input.insertText` takes over if the page refuses
    /// the command.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn fill(&self, target: SavedRef<'_>, text: &str) -> Result<FillResult> {
        let text = text.replace("\r\n", "\n");
        let function = FILL_FN.replace("LOCATE", LOCATE_FN);
        let v = match self
            .on_element(target, &function, vec![json!(text)], Vec::new())
            .await?
        {
            Ok(v) => v,
            Err(spot) => return Ok(FillResult::Refused(spot)),
        };
        match v["kind"].as_str().unwrap_or_default() {
            "filled" => {}
            "noedit" => {
                return Ok(FillResult::NotEditable(
                    v["by"].as_str().unwrap_or_default().to_owned(),
                ));
            }
            _ => return Ok(FillResult::Refused(spot_of(v)?)),
        }
        if v["typed"] != true {
            // The page refused the editing command: type through the input
            // pipeline instead (the content is selected, so it is replaced).
            let mut commands = typing(&text)?;
            if text.is_empty() {
                let delete = keys::normalize_key("Delete")
                    .map_err(|message| LumenError::Script { message })?;
                commands.extend(key_events(std::slice::from_ref(&delete)));
            }
            self.calls(commands).await?;
        }
        Ok(FillResult::Filled)
    }

    /// A PNG of the viewport.
    ///
    /// # Errors
    /// As [`call`](Self::call); [`LumenError::InvalidData`] for an unreadable
    /// answer.
    pub async fn screenshot_png(&self) -> Result<Vec<u8>> {
        let r = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "optimizeForSpeed": true }),
            )
            .await?;
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .map_err(|e| LumenError::invalid_data("screenshot", e.to_string()))
    }

    /// Takes an accessibility snapshot, optionally scoped to the subtrees of
    /// the elements matching the CSS selector `scope`.
    ///
    /// The document gets a mark (a window property) the first time; while
    /// the mark is still `earlier_mark`, numbering goes on from
    /// `earlier_refs`, so an element keeps its ref across snapshots and
    /// processes. A navigation loses the mark, and numbering starts over.
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for an invalid selector or one that
    /// matches nothing in the accessibility tree; otherwise as
    /// [`call`](Self::call).
    pub async fn snapshot(
        &self,
        scope: Option<&str>,
        earlier_mark: Option<&str>,
        earlier_refs: &[(u32, i64)],
    ) -> Result<LinkedSnapshot> {
        let roots = match scope {
            Some(selector) => Some(self.matching_nodes(selector).await?),
            None => None,
        };
        let fresh = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let mark_js = format!(
            "(() => {{ if (!window.{MARK_PROPERTY}) window.{MARK_PROPERTY} = {fresh:?}; \
             return [window.{MARK_PROPERTY}, location.href]; }})()"
        );
        let replies = self
            .calls(vec![
                (
                    "Runtime.evaluate",
                    json!({ "expression": mark_js, "returnByValue": true }),
                ),
                ("Accessibility.getFullAXTree", json!({})),
            ])
            .await?;
        let marked = crate::tab::script_value(replies[0].clone())?;
        let mark = marked[0].as_str().unwrap_or_default().to_owned();
        let url = marked[1].as_str().unwrap_or_default().to_owned();
        let mut refs = if earlier_mark == Some(mark.as_str()) {
            AxRefs::seeded(earlier_refs)
        } else {
            AxRefs::default()
        };
        // Numbers go on from the highest given before in this document.
        let numbered = refs.pairs().last().map_or(0, |&(n, _)| n);
        let walked = walk(&replies[1], &mut refs, roots.as_ref());
        let pairs = refs.pairs();
        if let (Some(selector), Some(roots)) = (scope, &roots)
            && walked.is_empty()
        {
            return Err(LumenError::invalid_data(
                "selector",
                format!(
                    "{} element(s) match {selector:?} but nothing in them is in the \
                     accessibility tree (hidden, or no named content)",
                    roots.len()
                ),
            ));
        }
        // Older refs were registered by the snapshot that gave them (and
        // are found through their node otherwise, see `on_element`).
        let fresh: Vec<(u32, i64)> = pairs
            .iter()
            .filter(|&&(n, _)| n > numbered)
            .copied()
            .collect();
        if !fresh.is_empty()
            && let Err(e) = self.register(&mark, &fresh).await
        {
            tracing::debug!("registering snapshot refs: {e}");
        }
        Ok(LinkedSnapshot {
            snapshot: AxSnapshot {
                url,
                nodes: walked.into_iter().map(|(n, _)| n).collect(),
            },
            mark,
            refs: pairs,
        })
    }

    /// The backend node ids of the elements matching a CSS selector.
    async fn matching_nodes(&self, selector: &str) -> Result<HashSet<i64>> {
        let quoted = serde_json::to_string(selector)
            .map_err(|e| LumenError::invalid_data("selector", e.to_string()))?;
        let list = self
            .call(
                "Runtime.evaluate",
                json!({
                    "expression": format!("Array.from(document.querySelectorAll({quoted}))"),
                    "returnByValue": false,
                }),
            )
            .await?;
        if let Some(ex) = list.get("exceptionDetails") {
            let why = ex["exception"]["description"]
                .as_str()
                .or_else(|| ex["text"].as_str())
                .unwrap_or("the selector is invalid");
            let why = why.lines().next().unwrap_or(why);
            return Err(LumenError::invalid_data(
                "selector",
                format!("{selector:?} is not a valid CSS selector ({why})"),
            ));
        }
        let Some(array) = list["result"]["objectId"].as_str() else {
            return Err(LumenError::invalid_data(
                "selector",
                format!("no element matches {selector:?}"),
            ));
        };
        let props = self
            .call(
                "Runtime.getProperties",
                json!({ "objectId": array, "ownProperties": true }),
            )
            .await?;
        let ids: Vec<String> = props["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["name"].as_str().is_some_and(|n| n.parse::<u32>().is_ok()))
            .filter_map(|p| p["value"]["objectId"].as_str().map(str::to_owned))
            .collect();
        if ids.is_empty() {
            let _ = self
                .call("Runtime.releaseObject", json!({ "objectId": array }))
                .await;
            return Err(LumenError::invalid_data(
                "selector",
                format!("no element matches {selector:?}"),
            ));
        }
        let mut commands: Vec<(&str, Value)> = ids
            .iter()
            .map(|id| ("DOM.describeNode", json!({ "objectId": id })))
            .collect();
        commands.push(("Runtime.releaseObject", json!({ "objectId": array })));
        let described = self.calls(commands).await?;
        Ok(described
            .iter()
            .filter_map(|d| d["node"]["backendNodeId"].as_i64())
            .collect())
    }

    /// Where the element `target` names can be acted on, provided its
    /// document still carries the ref's mark (from
    /// [`snapshot`](Self::snapshot)); checked in one step in the page, so a
    /// navigation can never make it point into another document.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn locate(&self, target: SavedRef<'_>) -> Result<ElementSpot> {
        match self
            .on_element(target, LOCATE_FN, Vec::new(), Vec::new())
            .await?
        {
            Ok(v) => spot_of(v),
            Err(spot) => Ok(spot),
        }
    }

    /// Runs the page function `function(mark, prop, ...args)` with `this`
    /// bound to the element `target` names and returns its value, or why
    /// the element cannot be reached (removed, or another document).
    ///
    /// The element is looked up in the page's ref registry (filled by
    /// [`snapshot`](Self::snapshot)) in one exchange, with `extra` commands
    /// sent alongside; only when the registry does not hold it (a snapshot
    /// by an older lumen, or the element was collected) is the DOM node
    /// resolved through CDP, two exchanges more.
    async fn on_element(
        &self,
        target: SavedRef<'_>,
        function: &str,
        args: Vec<Value>,
        extra: Vec<(&str, Value)>,
    ) -> Result<std::result::Result<Value, ElementSpot>> {
        let literal = |v: &Value| v.to_string();
        let expression = format!(
            "{ON_REF_FN}({}, {}, {}, {}, {function}, {})",
            literal(&json!(target.mark)),
            literal(&json!(MARK_PROPERTY)),
            literal(&json!(REFS_PROPERTY)),
            target.number,
            literal(&Value::Array(args.clone())),
        );
        let mut commands = vec![(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        )];
        commands.extend(extra);
        match self.calls(commands).await {
            Ok(r) => {
                let v = crate::tab::script_value(r[0].clone())?;
                match v["kind"].as_str() {
                    Some("doc") => return Ok(Err(ElementSpot::OtherDocument)),
                    Some("unregistered") => {}
                    _ => return Ok(Ok(v)),
                }
            }
            // A document being swapped: let the node lookup decide.
            Err(LumenError::Script { .. }) => {}
            Err(e) => return Err(e),
        }
        let object = match self.resolve(target.backend, target.mark).await? {
            Ok(object) => object,
            Err(spot) => return Ok(Err(spot)),
        };
        let mut arguments = vec![
            json!({ "value": target.mark }),
            json!({ "value": MARK_PROPERTY }),
        ];
        arguments.extend(args.into_iter().map(|value| json!({ "value": value })));
        let r = self
            .calls(vec![
                (
                    "Runtime.callFunctionOn",
                    json!({
                        "objectId": object,
                        "functionDeclaration": function,
                        "arguments": arguments,
                        "returnByValue": true,
                    }),
                ),
                ("Runtime.releaseObject", json!({ "objectId": object })),
            ])
            .await?;
        Ok(Ok(crate::tab::script_value(r[0].clone())?))
    }

    /// Puts the elements of new refs in the page's ref registry, so that a
    /// later process reaches them in one exchange (see
    /// [`on_element`](Self::on_element)). Best effort: a ref that is not
    /// registered is still found through its DOM node.
    async fn register(&self, mark: &str, refs: &[(u32, i64)]) -> Result<()> {
        const GROUP: &str = "lumen-refs";
        let resolves = refs
            .iter()
            .map(|(_, backend)| {
                (
                    "DOM.resolveNode",
                    json!({ "backendNodeId": backend, "objectGroup": GROUP }),
                )
            })
            .collect();
        // A node already gone is refused alone; the others still resolve.
        let answers = self.exchange(resolves).await?;
        let mut nums = Vec::new();
        let mut objects = Vec::new();
        for ((num, _), answer) in refs.iter().zip(&answers) {
            if let Some(id) = answer
                .as_ref()
                .ok()
                .and_then(|a| a["object"]["objectId"].as_str())
            {
                nums.push(*num);
                objects.push(id.to_owned());
            }
        }
        let Some(first) = objects.first().cloned() else {
            return Ok(());
        };
        let mut arguments = vec![
            json!({ "value": mark }),
            json!({ "value": MARK_PROPERTY }),
            json!({ "value": REFS_PROPERTY }),
            json!({ "value": nums }),
        ];
        arguments.extend(objects.iter().map(|id| json!({ "objectId": id })));
        self.calls(vec![
            (
                "Runtime.callFunctionOn",
                json!({
                    "objectId": first,
                    "functionDeclaration": REGISTER_FN,
                    "arguments": arguments,
                    "returnByValue": true,
                }),
            ),
            (
                "Runtime.releaseObjectGroup",
                json!({ "objectGroup": GROUP }),
            ),
        ])
        .await
        .map(drop)
    }

    /// A remote object for the node, or why there is none: removed, or
    /// another document altogether.
    async fn resolve(
        &self,
        backend: i64,
        mark: &str,
    ) -> Result<std::result::Result<String, ElementSpot>> {
        let resolved = self
            .call("DOM.resolveNode", json!({ "backendNodeId": backend }))
            .await;
        let object = match resolved {
            Ok(r) => r["object"]["objectId"].as_str().map(str::to_owned),
            Err(LumenError::Script { .. }) => None,
            Err(e) => return Err(e),
        };
        if let Some(object) = object {
            return Ok(Ok(object));
        }
        let now = self
            .evaluate(&format!("window.{MARK_PROPERTY} || null"))
            .await?;
        Ok(Err(if now.as_str() == Some(mark) {
            ElementSpot::Gone
        } else {
            ElementSpot::OtherDocument
        }))
    }

    /// Opens `url` in the page and waits for it to load.
    ///
    /// # Errors
    /// [`LumenError::Script`] when the navigation fails (`net::ERR_…`);
    /// otherwise as [`call`](Self::call).
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.wire.lock().await.events.clear();
        let navigated = self.call("Page.navigate", json!({ "url": url })).await?;
        if let Some(err) = navigated["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Err(LumenError::Script {
                message: format!("could not open {url}: {err}"),
            });
        }
        if navigated["loaderId"].is_null() {
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
        let h = self.call("Page.getNavigationHistory", json!({})).await?;
        let current = h["currentIndex"].as_i64().unwrap_or(0);
        let entries = h["entries"].as_array().cloned().unwrap_or_default();
        let Some(entry) = usize::try_from(current + delta)
            .ok()
            .and_then(|i| entries.get(i))
        else {
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
        self.call(
            "Page.navigateToHistoryEntry",
            json!({ "entryId": entry["id"] }),
        )
        .await?;
        self.finish_navigation(true).await.map(drop)
    }

    /// Reloads the page and waits for it to load.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn reload(&self) -> Result<()> {
        self.wire.lock().await.events.clear();
        self.call("Page.reload", json!({})).await?;
        self.finish_navigation(true).await.map(drop)
    }

    /// After a command: when a navigation of the main frame was requested
    /// (or `expected`), waits for it to commit and the new document to
    /// load, up to the call deadline. Returns whether one committed.
    async fn finish_navigation(&self, expected: bool) -> Result<bool> {
        let main = self.target_id.clone();
        let of_main = move |ev: &Value| {
            let p = &ev["params"];
            p["frameId"].as_str() == Some(main.as_str())
                || (p["frame"]["id"].as_str() == Some(main.as_str())
                    && p["frame"]["parentId"].is_null())
        };
        let deadline = Instant::now() + self.timeout;
        let committed = {
            let mut wire = self.wire.lock().await;
            let requested = expected
                || wire.events.iter().any(|ev| {
                    matches!(
                        ev["method"].as_str(),
                        Some(
                            "Page.frameRequestedNavigation"
                                | "Page.frameStartedNavigating"
                                | "Page.frameStartedLoading"
                        )
                    ) && of_main(ev)
                });
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

/// Reads the answer of `LOCATE_FN`.
fn spot_of(v: Value) -> Result<ElementSpot> {
    #[derive(Deserialize)]
    struct Spot {
        kind: String,
        #[serde(default)]
        x: f64,
        #[serde(default)]
        y: f64,
        #[serde(default)]
        by: String,
    }
    let spot: Spot = serde_json::from_value(v)
        .map_err(|e| LumenError::invalid_data("element position", e.to_string()))?;
    let at = Point::new(spot.x.round() as i32, spot.y.round() as i32);
    Ok(match spot.kind.as_str() {
        "at" => ElementSpot::At(at),
        "doc" => ElementSpot::OtherDocument,
        "gone" => ElementSpot::Gone,
        "off" => ElementSpot::OffScreen(at),
        "covered" => ElementSpot::Covered { at, by: spot.by },
        _ => ElementSpot::NoBox,
    })
}

/// The commands that type `text` into the focused element: one
/// `Input.insertText` per line, Enter between lines.
fn typing(text: &str) -> Result<Vec<(&'static str, Value)>> {
    let text = text.replace("\r\n", "\n");
    let enter = keys::normalize_key("Enter").map_err(|message| LumenError::Script { message })?;
    let mut commands = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            commands.extend(key_events(std::slice::from_ref(&enter)));
        }
        if !line.is_empty() {
            commands.push(("Input.insertText", json!({ "text": line })));
        }
    }
    Ok(commands)
}

/// Key events for a chord: modifiers accumulate on the way down and are
/// released in reverse.
fn key_events(defs: &[KeyDef]) -> Vec<(&'static str, Value)> {
    let (mut events, mask) = keys::chord_down(defs);
    events.extend(keys::chord_up(defs, mask));
    events
        .into_iter()
        .map(|p| ("Input.dispatchKeyEvent", p))
        .collect()
}

/// Sends one command to the browser itself (not to a page) over a
/// connection of its own: `Target.getTargets`, `Browser.setWindowBounds`.
///
/// # Errors
/// [`LumenError::Script`] when Chromium refuses the command,
/// [`LumenError::BrowserDisconnected`] when the browser cannot be reached.
pub async fn browser_command(
    browser_ws_url: &str,
    method: &str,
    params: Value,
    call_timeout: Duration,
) -> Result<Value> {
    let mut wire = Wire::open(browser_ws_url, call_timeout).await?;
    let deadline = Instant::now() + call_timeout;
    let id = wire.send(method, params).await?;
    wire.reply(id, method, deadline).await
}

/// The page tabs of the browser at `browser_ws_url`, in the browser's
/// order (`followed` is false for all: a link follows no tab).
///
/// # Errors
/// [`LumenError::BrowserDisconnected`] when the browser cannot be reached.
pub async fn page_tabs(browser_ws_url: &str, call_timeout: Duration) -> Result<Vec<TabInfo>> {
    let list =
        browser_command(browser_ws_url, "Target.getTargets", json!({}), call_timeout).await?;
    Ok(list["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "page")
        .map(|t| TabInfo {
            id: t["targetId"].as_str().unwrap_or_default().to_owned(),
            url: t["url"].as_str().unwrap_or_default().to_owned(),
            title: t["title"].as_str().unwrap_or_default().to_owned(),
            followed: false,
        })
        .collect())
}

/// The URL and title of the page `target_id`, as the browser knows them
/// (the committed URL, fragment and `pushState` changes included), without
/// attaching to the page.
///
/// # Errors
/// [`LumenError::InvalidData`] when the browser has no such page;
/// otherwise as [`page_tabs`].
pub async fn page_info(
    browser_ws_url: &str,
    target_id: &str,
    call_timeout: Duration,
) -> Result<(String, String)> {
    let info = browser_command(
        browser_ws_url,
        "Target.getTargetInfo",
        json!({ "targetId": target_id }),
        call_timeout,
    )
    .await
    .map_err(|e| match e {
        LumenError::Script { .. } => {
            LumenError::invalid_data("tab id", format!("there is no open tab {target_id}"))
        }
        other => other,
    })?;
    let field = |k: &str| {
        info["targetInfo"][k]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Ok((field("url"), field("title")))
}

/// Brings the page `target_id` to the front.
///
/// # Errors
/// [`LumenError::Script`] for an unknown target; otherwise as [`page_tabs`].
pub async fn activate_tab(
    browser_ws_url: &str,
    target_id: &str,
    call_timeout: Duration,
) -> Result<()> {
    browser_command(
        browser_ws_url,
        "Target.activateTarget",
        json!({ "targetId": target_id }),
        call_timeout,
    )
    .await
    .map(drop)
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
        for _ in 0..3 {
            if now == size {
                break;
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
            self.evaluate("new Promise(r => requestAnimationFrame(() => r(0)))")
                .await?;
            now = self.viewport().await?;
        }
        Ok(now)
    }
}

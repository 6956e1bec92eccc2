//! The connection: chromiumoxide's handler task, deadlines on every call and
//! the mapping of transport failures to `BrowserDisconnected`; and
//! [`PageSession`], one page on it, which is all the page-level helpers
//! below the tab (accessibility, frames) need.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chromiumoxide::error::CdpError;
use chromiumoxide::handler::{Handler, HandlerConfig};
use chromiumoxide::types::{Command, Method, MethodId};
use chromiumoxide::{Browser, Page};
use futures::StreamExt as _;
use lumen_core::LumenError;
use serde::{Serialize, Serializer};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::protocol::runtime;

/// Any CDP method, untyped: for methods the generated types lack or where
/// JSON is simpler than the builders.
#[derive(Debug, Clone)]
pub(crate) struct Raw {
    method: &'static str,
    params: serde_json::Value,
}

impl Raw {
    pub(crate) fn new(method: &'static str, params: serde_json::Value) -> Self {
        Self { method, params }
    }
}

impl Serialize for Raw {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.params.serialize(s)
    }
}

impl Method for Raw {
    fn identifier(&self) -> MethodId {
        self.method.into()
    }
}

impl Command for Raw {
    type Response = serde_json::Value;
}

/// Protocol-error code we use for calls on a tab that no longer exists.
pub(crate) const TARGET_GONE: i64 = -1;
/// Protocol-error code we use for a page that let a call run past its
/// deadline while the browser itself still answers.
pub(crate) const PAGE_BUSY: i64 = -2;

/// Why a CDP call failed.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// The connection is gone (or a call ran past its deadline).
    Disconnected(String),
    /// Chromium answered with a protocol error (page-level, not fatal).
    Protocol {
        /// The JSON-RPC error code (-32000 for most page-level failures).
        code: i64,
        /// Chromium's message.
        message: String,
    },
}

impl CallError {
    /// Whether this is the transient "no such execution context" error a
    /// navigation causes.
    pub(crate) fn is_context_gone(&self) -> bool {
        matches!(self, CallError::Protocol { code: -32000, message } if message.contains("context"))
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Disconnected(reason) => write!(f, "browser disconnected: {reason}"),
            CallError::Protocol { code, message } => write!(f, "{message} ({code})"),
        }
    }
}

impl From<CallError> for LumenError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Disconnected(reason) => LumenError::disconnected(reason),
            CallError::Protocol { message, .. } => LumenError::Script { message },
        }
    }
}

fn classify(method: &str, e: CdpError) -> CallError {
    match e {
        CdpError::Chrome(err) => CallError::Protocol {
            code: err.code,
            message: err.message,
        },
        CdpError::ChromeMessage(message) => CallError::Protocol { code: 0, message },
        CdpError::JavascriptException(details) => CallError::Protocol {
            code: 0,
            message: details.text.clone(),
        },
        CdpError::Serde(err) => CallError::Protocol {
            code: 0,
            message: format!("{method}: unreadable response: {err}"),
        },
        CdpError::NotFound | CdpError::FrameNotFound(_) => CallError::Protocol {
            code: 0,
            message: format!("{method}: target not found"),
        },
        other => CallError::Disconnected(format!("{method}: {other}")),
    }
}

/// One CDP connection with its handler task and a liveness flag.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) browser: Browser,
    dead: watch::Sender<Option<String>>,
    handler_task: JoinHandle<()>,
    pub(crate) call_timeout: Duration,
    /// Where `Fetch.requestPaused` events that chromiumoxide cannot parse
    /// go (the request guard), so no paused request is left unanswered.
    pub(crate) unparsed_pauses: UnparsedPauses,
}

/// The request guard's inbox for `Fetch.requestPaused` events the
/// generated types could not read (raw JSON messages).
pub(crate) type UnparsedPauses =
    Arc<std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<serde_json::Value>>>>;

impl Conn {
    /// Connects to a DevTools WebSocket URL and starts polling the handler.
    pub(crate) async fn connect(
        ws_url: &str,
        call_timeout: Duration,
    ) -> Result<Arc<Self>, CallError> {
        let config = HandlerConfig {
            // We report unparseable events ourselves, rate-limited.
            ignore_invalid_messages: false,
            viewport: None,
            // Our own deadline fires first; chromiumoxide's is a backstop.
            request_timeout: call_timeout + Duration::from_secs(5),
            ..HandlerConfig::default()
        };
        let connect = Browser::connect_with_config(ws_url.to_owned(), config);
        let (browser, handler) = match tokio::time::timeout(call_timeout, connect).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                return Err(CallError::Disconnected(format!(
                    "could not connect to {ws_url}: {e}"
                )));
            }
            Err(_) => {
                return Err(CallError::Disconnected(format!(
                    "connecting to {ws_url} timed out"
                )));
            }
        };
        let (dead, _) = watch::channel(None);
        let unparsed_pauses = UnparsedPauses::default();
        let handler_task =
            tokio::spawn(poll_handler(handler, dead.clone(), unparsed_pauses.clone()));
        Ok(Arc::new(Self {
            browser,
            dead,
            handler_task,
            call_timeout,
            unparsed_pauses,
        }))
    }

    /// Marks the connection dead (the process exited, or the owner closed it).
    pub(crate) fn mark_dead(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.dead.send_if_modified(|d| {
            if d.is_none() {
                *d = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Marks the connection dead and closes its WebSocket now, rather than
    /// when the last holder lets go. Chromium ends what this client had
    /// switched on: above all its `Fetch` interception, which holds the
    /// requests of every context of the browser until it answers them.
    pub(crate) fn close(&self, reason: impl Into<String>) {
        self.mark_dead(reason);
        self.handler_task.abort();
    }

    /// Why the connection is dead, if it is.
    pub(crate) fn dead_reason(&self) -> Option<String> {
        self.dead.borrow().clone()
    }

    /// Resolves when the connection dies.
    pub(crate) async fn died(&self) -> String {
        let mut rx = self.dead.subscribe();
        match rx.wait_for(|d| d.is_some()).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => "the connection was dropped".to_owned(),
        }
    }

    /// Runs a CDP future with the call deadline, failing fast once the
    /// connection is dead.
    pub(crate) async fn guard<T>(
        &self,
        method: &str,
        timeout: Duration,
        fut: impl Future<Output = Result<T, CdpError>>,
    ) -> Result<T, CallError> {
        if let Some(reason) = self.dead_reason() {
            return Err(CallError::Disconnected(reason));
        }
        tokio::select! {
            biased;
            reason = self.died() => Err(CallError::Disconnected(reason)),
            r = tokio::time::timeout(timeout, fut) => match r {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => {
                    let err = classify(method, e);
                    if let CallError::Disconnected(reason) = &err {
                        // A closed tab fails its calls the same way a dead
                        // browser does: ask the browser before giving up.
                        if self.dead_reason().is_none() && self.browser_alive().await {
                            return Err(CallError::Protocol {
                                code: TARGET_GONE,
                                message: format!("{method}: the tab is gone ({reason})"),
                            });
                        }
                        self.mark_dead(reason.clone());
                    }
                    Err(err)
                }
                Err(_) => {
                    if self.browser_alive().await {
                        return Err(CallError::Protocol {
                            code: PAGE_BUSY,
                            message: format!(
                                "{method}: the page did not answer within {:.1}s (busy or hung)",
                                timeout.as_secs_f64()
                            ),
                        });
                    }
                    let reason = format!("{method} got no answer within {:.1}s", timeout.as_secs_f64());
                    self.mark_dead(reason.clone());
                    Err(CallError::Disconnected(reason))
                }
            }
        }
    }

    /// Whether the browser itself still answers (bounded).
    pub(crate) async fn browser_alive(&self) -> bool {
        if self.dead_reason().is_some() {
            return false;
        }
        let probe = self
            .browser
            .execute(Raw::new("Browser.getVersion", serde_json::json!({})));
        matches!(
            tokio::time::timeout(Duration::from_secs(2), probe).await,
            Ok(Ok(_))
        )
    }

    /// A raw command on a page session with its own deadline.
    pub(crate) async fn page_raw_within(
        &self,
        page: &Page,
        method: &'static str,
        params: serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, CallError> {
        let started = logged_command(method, &params);
        let r = self
            .guard(method, timeout, async {
                page.execute(Raw::new(method, params))
                    .await
                    .map(|r| r.result)
            })
            .await;
        logged_response(method, r, started)
    }

    /// A raw command on a page session.
    pub(crate) async fn page_raw(
        &self,
        page: &Page,
        method: &'static str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, CallError> {
        self.page_raw_within(page, method, params, self.call_timeout)
            .await
    }

    /// The browser context Chromium places target `id` in (a page, a popup,
    /// an out-of-process frame); `None` for an id that is no target, or
    /// when the browser does not answer.
    pub(crate) async fn context_of(&self, id: &str) -> Option<String> {
        let info = self
            .browser_raw(
                "Target.getTargetInfo",
                serde_json::json!({ "targetId": id }),
            )
            .await
            .ok()?;
        info["targetInfo"]["browserContextId"]
            .as_str()
            .map(str::to_owned)
    }

    /// A raw command on the browser session.
    pub(crate) async fn browser_raw(
        &self,
        method: &'static str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, CallError> {
        let started = logged_command(method, &params);
        let r = self
            .guard(method, self.call_timeout, async {
                self.browser
                    .execute(Raw::new(method, params))
                    .await
                    .map(|r| r.result)
            })
            .await;
        logged_response(method, r, started)
    }
}

/// Logs a raw command at the CDP surface; its start, when the surface is on.
fn logged_command(method: &str, params: &serde_json::Value) -> Option<Instant> {
    crate::wirelog::on().then(|| {
        crate::wirelog::command(None, method, params);
        Instant::now()
    })
}

/// Logs the answer to a raw command logged by [`logged_command`].
fn logged_response(
    method: &str,
    r: Result<serde_json::Value, CallError>,
    started: Option<Instant>,
) -> Result<serde_json::Value, CallError> {
    if let Some(started) = started {
        let error = r.as_ref().err().map(ToString::to_string);
        crate::wirelog::response(
            None,
            method,
            r.as_ref().map_err(|_| error.as_deref().unwrap_or_default()),
            Some(started.elapsed()),
        );
    }
    r
}

/// One page session on a connection: the context page-level work needs
/// (commands to the page, evaluation, the connection for browser-level
/// commands), without the tab around it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageSession<'a> {
    /// The connection.
    pub(crate) conn: &'a Conn,
    /// The page.
    pub(crate) page: &'a Page,
}

impl PageSession<'_> {
    /// A raw command on the page.
    pub(crate) async fn call(
        &self,
        method: &'static str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, CallError> {
        self.conn.page_raw(self.page, method, params).await
    }

    /// Evaluates an expression and returns its JSON value, retrying while a
    /// navigation replaces the execution context. A page that lets the call
    /// run past its deadline gets its script stopped
    /// (`Runtime.terminateExecution`), so the tab stays usable.
    ///
    /// # Errors
    /// [`LumenError::Script`] when the script throws or was stopped; fatal
    /// ones otherwise.
    pub(crate) async fn evaluate(&self, expression: &str) -> lumen_core::Result<serde_json::Value> {
        let deadline = Instant::now() + self.conn.call_timeout;
        loop {
            match self.evaluate_once(expression).await {
                Ok(r) => return r,
                Err(e) if e.is_context_gone() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(CallError::Protocol {
                    code: PAGE_BUSY,
                    message,
                }) => {
                    // A runaway script would wedge the tab for good: stop it.
                    let stopped = self
                        .conn
                        .page_raw_within(
                            self.page,
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
}

impl PageSession<'_> {
    /// One evaluation, measured in the page ([`runtime::evaluate`]); a
    /// script of statements, which does not compile inside the measuring
    /// function, runs as it is. The outer error is the call's (to retry
    /// or to report), the inner one the script's.
    async fn evaluate_once(
        &self,
        expression: &str,
    ) -> Result<lumen_core::Result<serde_json::Value>, CallError> {
        let (method, params) = runtime::evaluate(expression);
        let answer = self.call(method, params).await?;
        match runtime::guarded_value(answer) {
            Ok(runtime::Guarded::Value(v)) => return Ok(Ok(v)),
            Ok(runtime::Guarded::NotAnExpression) => {}
            Err(e) => return Ok(Err(e)),
        }
        let (method, params) = runtime::evaluate_plain(expression);
        Ok(runtime::plain_value(self.call(method, params).await?))
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.handler_task.abort();
    }
}

/// Polls chromiumoxide's handler for as long as the connection lives. Parse
/// failures (newer Chrome events the generated types cannot read, such as
/// `Network.requestWillBeSentExtraInfo`) are counted and logged at debug
/// level with exponential back-off; transport errors mark the connection
/// dead.
async fn poll_handler(
    mut handler: Handler,
    dead: watch::Sender<Option<String>>,
    unparsed_pauses: UnparsedPauses,
) {
    static UNPARSEABLE: AtomicU64 = AtomicU64::new(0);
    let mut other_errors: u64 = 0;
    while let Some(next) = handler.next().await {
        match next {
            Ok(()) => {}
            Err(CdpError::InvalidMessage(text, _)) if text.contains("\"Fetch.requestPaused\"") => {
                // A paused request must always be answered: hand it over raw.
                let sender = unparsed_pauses
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                if let (Some(tx), Ok(v)) = (sender, serde_json::from_str(&text)) {
                    let _ = tx.send(v);
                }
            }
            Err(CdpError::InvalidMessage(_, err)) => {
                let n = UNPARSEABLE.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::debug!(
                        count = n,
                        "skipped CDP messages chromiumoxide cannot parse: {err}"
                    );
                }
            }
            Err(e @ (CdpError::Ws(_) | CdpError::Io(_) | CdpError::UnexpectedWsMessage(_))) => {
                let reason = format!("CDP socket failed: {e}");
                tracing::warn!("{reason}");
                dead.send_if_modified(|d| {
                    if d.is_none() {
                        *d = Some(reason);
                        true
                    } else {
                        false
                    }
                });
            }
            Err(e) => {
                other_errors += 1;
                if other_errors.is_power_of_two() {
                    tracing::warn!(count = other_errors, "CDP handler error: {e}");
                }
            }
        }
    }
    dead.send_if_modified(|d| {
        if d.is_none() {
            *d = Some("the CDP connection closed".to_owned());
            true
        } else {
            false
        }
    });
}

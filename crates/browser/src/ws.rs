//! A raw CDP client over one WebSocket, for [`PageLink`](crate::PageLink)
//! and the one-shot browser commands: commands are queued and written in
//! one batch, and the socket is read only while a call waits for its answer
//! (replies to other calls and events are kept for later). JavaScript
//! dialogs that open meanwhile are answered at once, by a [`DialogPolicy`],
//! because the page is blocked until they are.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use async_tungstenite::WebSocketStream;
use async_tungstenite::tokio::TokioAdapter;
use async_tungstenite::tungstenite::Message;
use async_tungstenite::tungstenite::protocol::WebSocketConfig;
use futures::{SinkExt as _, StreamExt as _};
use lumen_core::{DialogInfo, LumenError, Result};
use serde_json::{Value, json};

use crate::limits::MAX_CDP_MESSAGE_BYTES;
use crate::options::DialogPolicy;
use crate::protocol::dialogs;

/// Events kept for waits; older ones are dropped.
const MAX_EVENTS: usize = 512;

/// Dialogs kept until read; older ones are dropped. A page can open
/// dialogs in a loop while nobody reads them (a link kept between
/// commands).
const MAX_DIALOGS: usize = 64;

/// The longest dialog message kept, in characters (the page chooses it).
const MAX_DIALOG_MESSAGE: usize = 1_000;

/// One WebSocket speaking CDP, read only while a call waits.
pub(crate) struct Wire {
    ws: WebSocketStream<TokioAdapter<tokio::net::TcpStream>>,
    next_id: u64,
    /// Replies that arrived while another call was awaited.
    pub(crate) replies: HashMap<u64, std::result::Result<Value, String>>,
    /// The method of each command logged at the CDP surface and not yet
    /// answered, so its answer is logged (and elided) by method.
    logged: HashMap<u64, String>,
    /// Events seen and not yet taken (at most `MAX_EVENTS`, oldest dropped).
    pub(crate) events: VecDeque<Value>,
    /// How JavaScript dialogs are answered (as soon as they open).
    pub(crate) dialog_policy: DialogPolicy,
    /// The dialogs answered so far (at most `MAX_DIALOGS`, oldest
    /// dropped).
    pub(crate) dialogs: VecDeque<DialogInfo>,
    /// Commands whose answers nobody reads (dialog answers): their replies
    /// are dropped on arrival.
    unread: HashSet<u64>,
}

impl Wire {
    /// Connects to a `ws://` URL (with `TCP_NODELAY`) within `timeout`.
    pub(crate) async fn open(url: &str, timeout: Duration) -> Result<Self> {
        // A page can make Chromium send a message of any size (a huge
        // string, a huge tree): past the cap the socket fails, typed.
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_CDP_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_CDP_MESSAGE_BYTES));
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
            logged: HashMap::new(),
            events: VecDeque::new(),
            dialog_policy: DialogPolicy::default(),
            dialogs: VecDeque::new(),
            unread: HashSet::new(),
        })
    }

    /// Queues a command; [`flush`](Self::flush) sends what is queued.
    pub(crate) async fn feed(&mut self, method: &str, params: Value) -> Result<u64> {
        self.feed_in(None, method, params).await
    }

    /// Queues a command for the flattened session `session` (`None`: the
    /// target the socket is connected to).
    pub(crate) async fn feed_in(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<u64> {
        self.next_id += 1;
        let id = self.next_id;
        if crate::wirelog::on() {
            crate::wirelog::command(Some(id), method, &params);
            // Commands never answered (timed out) would pile up: keep a
            // bounded number.
            if self.logged.len() >= 1024 {
                self.logged.clear();
            }
            self.logged.insert(id, method.to_owned());
        }
        let text = match session {
            Some(session) => {
                json!({ "id": id, "sessionId": session, "method": method, "params": params })
            }
            None => json!({ "id": id, "method": method, "params": params }),
        }
        .to_string();
        self.ws
            .feed(Message::text(text))
            .await
            .map_err(|e| LumenError::disconnected(format!("{method}: CDP socket failed: {e}")))?;
        Ok(id)
    }

    /// Writes what [`feed`](Self::feed) queued.
    pub(crate) async fn flush(&mut self) -> Result<()> {
        self.ws
            .flush()
            .await
            .map_err(|e| LumenError::disconnected(format!("CDP socket failed: {e}")))
    }

    /// Queues a command and writes it at once.
    pub(crate) async fn send(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.feed(method, params).await?;
        self.flush().await?;
        Ok(id)
    }

    /// Queues a command for the flattened session `session` (`None`: the
    /// target the socket is connected to) and writes it at once.
    pub(crate) async fn send_in(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<u64> {
        let id = self.feed_in(session, method, params).await?;
        self.flush().await?;
        Ok(id)
    }

    /// Reads the next message, parsed (`None` for one that is not JSON
    /// text). Cancel-safe: nothing is lost when the future is dropped.
    pub(crate) async fn read(&mut self, what: &str) -> Result<Option<Value>> {
        let text = match self.ws.next().await {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Close(_))) | None => {
                return Err(LumenError::disconnected(format!(
                    "{what}: the browser closed the connection (the tab or the browser is gone)"
                )));
            }
            Some(Ok(_)) => return Ok(None),
            Some(Err(e @ async_tungstenite::tungstenite::Error::Capacity(_))) => {
                return Err(LumenError::disconnected(format!(
                    "{what}: the browser sent a message over the {} cap on one CDP message \
                     (MAX_CDP_MESSAGE_BYTES): {e}",
                    crate::limits::size(MAX_CDP_MESSAGE_BYTES)
                )));
            }
            Some(Err(e)) => {
                return Err(LumenError::disconnected(format!(
                    "{what}: CDP socket failed: {e}"
                )));
            }
        };
        Ok(serde_json::from_str::<Value>(text.as_str()).ok())
    }

    /// Reads one message before `deadline`; `Ok(false)` on timeout.
    pub(crate) async fn pump(&mut self, deadline: Instant, what: &str) -> Result<bool> {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(msg) = (match tokio::time::timeout(left, self.read(what)).await {
            Err(_) => return Ok(false),
            Ok(read) => read?,
        }) else {
            return Ok(true);
        };
        self.take(msg).await?;
        Ok(true)
    }

    /// Handles one message that has already arrived, without waiting (no
    /// timer either: a zero timeout would still park for the timer's
    /// millisecond); `Ok(false)` when none has.
    pub(crate) async fn pump_ready(&mut self, what: &str) -> Result<bool> {
        use futures::FutureExt as _;
        let Some(read) = self.read(what).now_or_never() else {
            return Ok(false);
        };
        if let Some(msg) = read? {
            self.take(msg).await?;
        }
        Ok(true)
    }

    /// Files one message read from the socket: a reply is kept for its
    /// call, an event for waits (a dialog is answered at once).
    async fn take(&mut self, mut msg: Value) -> Result<()> {
        if let Some(id) = msg.get("id").and_then(Value::as_u64) {
            let reply = match msg.get("error") {
                Some(err) => Err(err["message"]
                    .as_str()
                    .unwrap_or("the browser refused the command")
                    .to_owned()),
                None => Ok(msg["result"].take()),
            };
            if let Some(method) = self.logged.remove(&id) {
                crate::wirelog::response(
                    Some(id),
                    &method,
                    reply.as_ref().map_err(String::as_str),
                    None,
                );
            }
            if !self.unread.remove(&id) {
                self.replies.insert(id, reply);
            }
        } else if msg.get("method").is_some() {
            crate::wirelog::event(msg["method"].as_str().unwrap_or(""), &msg["params"]);
            if msg["method"] == "Page.javascriptDialogOpening" {
                self.answer_dialog(&msg["params"]).await?;
            }
            if self.events.len() >= MAX_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(msg);
        }
        Ok(())
    }

    /// Answers a dialog that just opened, by the policy: the page is
    /// blocked until it is answered.
    async fn answer_dialog(&mut self, params: &Value) -> Result<()> {
        let kind = params["type"].as_str().unwrap_or("alert").to_owned();
        let (accept, (method, answer)) =
            dialogs::answer(&self.dialog_policy, &kind, params["defaultPrompt"].as_str());
        // Its answer is never read: the command that was waiting goes on.
        let id = self.send(method, answer).await?;
        self.unread.insert(id);
        if self.dialogs.len() >= MAX_DIALOGS {
            self.dialogs.pop_front();
        }
        let message = params["message"].as_str().unwrap_or_default();
        self.dialogs.push_back(DialogInfo {
            kind,
            message: message.chars().take(MAX_DIALOG_MESSAGE).collect(),
            accepted: accept,
        });
        Ok(())
    }

    /// The answer to command `id`, reading the socket until it comes or
    /// the deadline passes (which is a disconnection: the page may be hung).
    pub(crate) async fn reply(
        &mut self,
        id: u64,
        method: &str,
        deadline: Instant,
    ) -> Result<Value> {
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
    pub(crate) async fn event(
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

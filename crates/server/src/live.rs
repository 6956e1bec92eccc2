//! The live view of a hand-over: a person watches the tab the agent drives
//! and acts in it, then presses done.
//!
//! - **Tickets.** A live view is opened with a ticket: 128 random bits,
//!   bound to one hand-over of one run, compared in constant time. The
//!   server mints one for each authenticated `POST /v1/runs/{id}/live`,
//!   valid [`TICKET_TTL`]; `lumen run --handoff` mints one per hand-over,
//!   valid while it waits, and prints its URL. One view of a hand-over is
//!   open at a time (a second socket is refused); a reload opens it again
//!   once the first has closed.
//! - **The page** ([`PAGE`], embedded in the binary): a canvas showing the
//!   frames, the pointer, wheel, keys and pasted text sent back, a note and
//!   a "done" button. It holds no data; it is served only for a live
//!   ticket, with a content security policy that keeps it to its own
//!   origin and out of frames.
//! - **The socket** (`…/live/socket?ticket=…`): the server sends
//!   `{"type":"handoff",…}` once, then `{"type":"frame","width","height",
//!   "data"}` (a base64 JPEG; width and height are the page's CSS size,
//!   the space input coordinates are in), and `{"type":"closed"}` when
//!   the hand-over ends elsewhere. The client sends [`LiveInput`]s
//!   (`mouseMove`, `mouseDown`, `mouseUp`, `wheel`, `keyDown`, `keyUp`,
//!   `text`) and finally `{"type":"done","note":"…"}`; a message that is
//!   not one of these is answered with `{"type":"error"}` and dropped.
//! - **A client that went away** gives its place back: the server pings
//!   every [`SILENCE`]/3 and closes a view that has sent nothing (not even
//!   a pong) for [`SILENCE`], or has not taken a message within
//!   [`SEND_WAIT`]. A phone that changed networks mid-hand-over leaves a
//!   connection nothing will ever close; the person's reload would be
//!   refused as a second view until it is.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use futures::{SinkExt as _, StreamExt as _};
use lumen::LiveInput;
use lumen::perception::control::RunControl;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::front_door::{FrontDoor, constant_time_eq};

/// How long a ticket the API hands out stays valid (`lumen run
/// --handoff`'s last as long as their hand-over).
pub(crate) const TICKET_TTL: Duration = Duration::from_secs(300);
/// The longest note a person may leave (the same over HTTP).
pub(crate) const MAX_NOTE_CHARS: usize = 2000;
/// The most live tickets a hand-over has at once.
const MAX_TICKETS: usize = 8;
/// The largest message a person's client may send.
const MAX_MESSAGE: usize = 64 * 1024;
/// The widest frame sent (the browser scales down to it).
const FRAME_WIDTH: u32 = 1280;
/// A view whose client has sent nothing (pongs count) for this long is
/// closed, and its place given back.
pub(crate) const SILENCE: Duration = Duration::from_secs(30);
/// The longest one message may take to leave: a client that stopped
/// reading is closed (here and on the API's `/v1/stream`).
pub(crate) const SEND_WAIT: Duration = Duration::from_secs(10);

/// The live view's page: a canvas, input capture, a note and "done".
pub(crate) const PAGE: &str = include_str!("live.html");

/// Tickets to live views, and the views open.
#[derive(Debug)]
pub(crate) struct Tickets {
    inner: Mutex<Inner>,
    /// How long a view's client may stay silent ([`SILENCE`]).
    silence: Duration,
}

impl Default for Tickets {
    fn default() -> Self {
        Self::new(SILENCE)
    }
}

#[derive(Debug, Default)]
struct Inner {
    tickets: Vec<Ticket>,
    /// `(run, hand-over)` of every view open now: one at a time each.
    viewing: Vec<(String, u64)>,
}

#[derive(Debug, Clone)]
struct Ticket {
    secret: String,
    /// The run it opens (the server's run id; `lumen run` has one run).
    run: String,
    /// The hand-over it opens.
    handoff: u64,
    /// `None`: until [`Tickets::forget`] (the hand-over ended).
    expires: Option<Instant>,
}

/// Why a ticket opens no view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Unknown, expired, or for another run.
    Unknown,
    /// Another view of the same hand-over is open.
    Busy,
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Unknown => ApiError::bad_ticket(),
            Refused::Busy => ApiError::invalid_state(
                "another live view of this hand-over is open: close it first (one person at a time)",
            ),
        }
    }
}

/// An open view: its place is given back when dropped.
#[derive(Debug)]
pub(crate) struct View {
    tickets: Arc<Tickets>,
    key: (String, u64),
}

impl Drop for View {
    fn drop(&mut self) {
        self.tickets.lock().viewing.retain(|k| *k != self.key);
    }
}

impl Tickets {
    pub(crate) fn new(silence: Duration) -> Self {
        Self {
            inner: Mutex::default(),
            silence,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new ticket to hand-over `handoff` of run `run`, valid for `ttl`
    /// (`None`: until [`forget`](Self::forget)).
    ///
    /// # Errors
    /// When the system has no randomness to give.
    pub(crate) fn mint(
        &self,
        run: &str,
        handoff: u64,
        ttl: Option<Duration>,
    ) -> std::io::Result<String> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut inner = self.lock();
        let now = Instant::now();
        inner.tickets.retain(|t| t.expires.is_none_or(|e| e > now));
        // A few per hand-over (the oldest go first), however often a
        // client asks: every lookup compares them all.
        let same = |t: &Ticket| t.run == run && t.handoff == handoff;
        if inner.tickets.iter().filter(|t| same(t)).count() >= MAX_TICKETS
            && let Some(oldest) = inner.tickets.iter().position(same)
        {
            inner.tickets.remove(oldest);
        }
        inner.tickets.push(Ticket {
            secret: secret.clone(),
            run: run.to_owned(),
            handoff,
            expires: ttl.map(|t| now + t),
        });
        Ok(secret)
    }

    /// Drops the tickets of hand-over `handoff` of run `run` (it ended).
    pub(crate) fn forget(&self, run: &str, handoff: u64) {
        self.lock()
            .tickets
            .retain(|t| !(t.run == run && t.handoff == handoff));
    }

    fn find(tickets: &[Ticket], run: &str, secret: &str) -> Option<usize> {
        let now = Instant::now();
        // Every ticket is compared, each in constant time.
        let mut found = None;
        for (i, t) in tickets.iter().enumerate() {
            let same = constant_time_eq(t.secret.as_bytes(), secret.as_bytes());
            if same && t.run == run && t.expires.is_none_or(|e| e > now) {
                found = Some(i);
            }
        }
        found
    }

    /// The hand-over a live ticket opens, without opening it.
    pub(crate) fn peek(&self, run: &str, secret: &str) -> Option<u64> {
        let inner = self.lock();
        Self::find(&inner.tickets, run, secret).map(|i| inner.tickets[i].handoff)
    }

    /// Opens the view a ticket names, one at a time per hand-over (a
    /// reload or a dropped connection opens it again once the first view
    /// has closed).
    pub(crate) fn open_view(
        self: &Arc<Self>,
        run: &str,
        secret: &str,
    ) -> Result<(u64, View), Refused> {
        let mut inner = self.lock();
        let i = Self::find(&inner.tickets, run, secret).ok_or(Refused::Unknown)?;
        let key = (run.to_owned(), inner.tickets[i].handoff);
        if inner.viewing.contains(&key) {
            return Err(Refused::Busy);
        }
        inner.viewing.push(key.clone());
        Ok((
            key.1,
            View {
                tickets: self.clone(),
                key,
            },
        ))
    }
}

/// The `?ticket=` of a live-view request.
#[derive(Debug, Deserialize)]
pub(crate) struct TicketQuery {
    #[serde(default)]
    ticket: String,
}

impl TicketQuery {
    pub(crate) fn secret(&self) -> &str {
        &self.ticket
    }
}

/// The page, for a live ticket: no caching, no referrer (the URL holds the
/// ticket), no framing, nothing loaded from elsewhere.
pub(crate) fn page_response() -> Response {
    let mut r = (StatusCode::OK, PAGE).into_response();
    let h = r.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             img-src blob: data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
             form-action 'none'",
        ),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

/// Upgrades to the live view's socket of hand-over `handoff`; `view`
/// holds its place until the socket closes.
pub(crate) fn upgrade(
    ws: WebSocketUpgrade,
    control: RunControl,
    (handoff, view): (u64, View),
) -> Response {
    ws.max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            session(socket, control, handoff, view.tickets.silence).await;
            drop(view);
        })
}

/// What the person's client sends besides input.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum Finish {
    /// The person is done; the note goes to the model.
    Done {
        #[serde(default)]
        note: Option<String>,
    },
}

/// One live-view connection: frames out, input in, until done, the
/// hand-over ends, or the client has gone quiet for `silence`.
async fn session(socket: WebSocket, control: RunControl, handoff: u64, silence: Duration) {
    let (sink, mut source) = socket.split();
    let mut sink = Outbox(sink);
    let Some(pending) = control.handoff().filter(|h| h.id == handoff) else {
        sink.send(&json!({"type": "closed"})).await;
        return;
    };
    let hello = json!({
        "type": "handoff",
        "id": pending.id,
        "reason": pending.reason,
        "trigger": pending.trigger,
    });
    if !sink.send(&hello).await {
        return;
    }
    let mut frames = match pending.tab.screencast(FRAME_WIDTH).await {
        Ok(Some(frames)) => frames,
        Ok(None) => {
            let e = json!({"type": "error", "message": "this browser cannot stream its page"});
            sink.send(&e).await;
            Box::pin(futures::stream::pending())
        }
        Err(e) => {
            let e = json!({"type": "error", "message": format!("the screencast failed: {e}")});
            sink.send(&e).await;
            Box::pin(futures::stream::pending())
        }
    };
    let closed = control.handoff_closed(handoff);
    tokio::pin!(closed);
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + silence / 3, silence / 3);
    let mut heard = Instant::now();
    loop {
        // The hand-over's end first: no input may land once the agent
        // drives again.
        tokio::select! {
            biased;
            () = &mut closed => {
                sink.send(&json!({"type": "closed"})).await;
                break;
            }
            _ = ping.tick() => {
                if heard.elapsed() >= silence {
                    tracing::debug!("live view of hand-over {handoff}: the client went quiet");
                    break;
                }
                if !sink.message(Message::Ping(Default::default())).await {
                    break;
                }
            }
            frame = frames.next() => {
                let Some(frame) = frame else {
                    // The page went away (a popup the person closed) or the
                    // browser did: input would go to a page nobody sees. A
                    // reload streams the page driven now.
                    let e = json!({"type": "error", "message": "the screencast ended: reload to see the page now driven"});
                    sink.send(&e).await;
                    break;
                };
                let data = base64::engine::general_purpose::STANDARD.encode(&frame.jpeg);
                let msg = json!({
                    "type": "frame",
                    "width": frame.css_width,
                    "height": frame.css_height,
                    "data": data,
                });
                if !sink.send(&msg).await {
                    break;
                }
            }
            msg = source.next() => {
                let Some(Ok(msg)) = msg else { break };
                heard = Instant::now();
                let Message::Text(body) = msg else { continue };
                let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                if let Ok(Finish::Done { note }) = serde_json::from_value::<Finish>(value.clone()) {
                    if note.as_ref().is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS) {
                        let e = json!({"type": "error", "message": format!("the note is longer than {MAX_NOTE_CHARS} characters")});
                        if !sink.send(&e).await {
                            break;
                        }
                        continue;
                    }
                    let finished = control.finish_handoff(Some(handoff), note);
                    let reply = match finished {
                        true => json!({"type": "finished"}),
                        false => json!({"type": "closed"}),
                    };
                    sink.send(&reply).await;
                    break;
                }
                let answer = match serde_json::from_value::<LiveInput>(value) {
                    // Sent only while the hand-over waits; its end waits for it.
                    Ok(input) => match control.live_input(handoff, pending.tab.live_input(&input)).await {
                        None => {
                            sink.send(&json!({"type": "closed"})).await;
                            break;
                        }
                        Some(Ok(true)) => None,
                        Some(Ok(false)) => Some("this browser cannot take input".to_owned()),
                        Some(Err(e)) => Some(e.to_string()),
                    },
                    Err(e) => Some(format!("not a live-view message: {e}")),
                };
                if let Some(message) = answer {
                    let e = json!({"type": "error", "message": message});
                    if !sink.send(&e).await {
                        break;
                    }
                }
            }
        }
    }
    let _ = tokio::time::timeout(SEND_WAIT, sink.0.close()).await;
}

/// The sending half of a server WebSocket (a live view's, `/v1/stream`),
/// each message bounded by [`SEND_WAIT`].
pub(crate) struct Outbox(pub(crate) futures::stream::SplitSink<WebSocket, Message>);

impl Outbox {
    /// Sends `v` as text; `false` when the client is gone or did not take
    /// it in time (the connection should end).
    pub(crate) async fn send(&mut self, v: &Value) -> bool {
        self.message(text(v)).await
    }

    /// Sends `msg`, as [`send`](Self::send).
    pub(crate) async fn message(&mut self, msg: Message) -> bool {
        matches!(
            tokio::time::timeout(SEND_WAIT, self.0.send(msg)).await,
            Ok(Ok(()))
        )
    }
}

fn text(v: &Value) -> Message {
    Message::Text(v.to_string().into())
}

/// `lumen run --handoff`'s live view: the page and its socket on
/// 127.0.0.1, for the one run of the process.
#[derive(Debug)]
pub struct LiveServer {
    addr: SocketAddr,
    tickets: Arc<Tickets>,
    task: tokio::task::JoinHandle<()>,
}

/// Connections the standalone live view holds at once (one person views a
/// hand-over; a reload or a second tab, with room to spare).
const LIVE_MAX_CONNECTIONS: usize = 16;

/// The run name a standalone live view's tickets carry.
const STANDALONE_RUN: &str = "run";

#[derive(Clone)]
struct Standalone {
    control: RunControl,
    tickets: Arc<Tickets>,
    door: Arc<FrontDoor>,
}

impl LiveServer {
    /// Serves the live view of `control`'s hand-overs on an ephemeral port
    /// of 127.0.0.1. Requests must name it (`Host`) and come from its own
    /// pages (`Origin`), as the API server's front door requires.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(control: RunControl) -> std::io::Result<Self> {
        let defaults = crate::ServeOptions::default();
        Self::start_with(
            control,
            crate::listen::Limits {
                max_connections: LIVE_MAX_CONNECTIONS,
                header_read_timeout: defaults.header_read_timeout,
                idle_timeout: defaults.idle_timeout,
            },
        )
        .await
    }

    /// As [`start`](Self::start), with these connection limits.
    async fn start_with(
        control: RunControl,
        limits: crate::listen::Limits,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let tickets = Arc::new(Tickets::default());
        let state = Standalone {
            control,
            tickets: tickets.clone(),
            // No bearer token here: the ticket is the credential.
            door: Arc::new(FrontDoor::new(addr, &[], Arc::from(""), MAX_MESSAGE)),
        };
        let app = axum::Router::new()
            .route("/live", get(standalone_page))
            .route("/live/socket", get(standalone_socket))
            .with_state(state);
        // The API server's accept loop, with its header-read and idle
        // deadlines: a client that opens a connection and sends nothing
        // (or half a header) is dropped, not held for ever. It stops when
        // the server is dropped (the task is aborted).
        let task = tokio::spawn(async move {
            let (_running, stop) = tokio::sync::watch::channel(false);
            if let Err(e) = crate::listen::serve(listener, app, limits, stop).await {
                tracing::warn!("the live view stopped: {e}");
            }
        });
        Ok(Self {
            addr,
            tickets,
            task,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A URL with a fresh ticket to the live view of hand-over `handoff`,
    /// valid until [`forget`](Self::forget) (one view open at a time; a
    /// reload opens it again).
    ///
    /// # Errors
    /// When the system has no randomness for the ticket.
    pub fn url(&self, handoff: u64) -> std::io::Result<String> {
        let ticket = self.tickets.mint(STANDALONE_RUN, handoff, None)?;
        Ok(format!("http://{}/live?ticket={ticket}", self.addr))
    }

    /// Ends the tickets of hand-over `handoff` (it is over).
    pub fn forget(&self, handoff: u64) {
        self.tickets.forget(STANDALONE_RUN, handoff);
    }
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn check_door(door: &FrontDoor, headers: &HeaderMap) -> Result<(), ApiError> {
    door.check_host(headers)
        .and_then(|()| door.check_origin(headers))
}

async fn standalone_page(
    State(s): State<Standalone>,
    headers: HeaderMap,
    Query(q): Query<TicketQuery>,
) -> Result<Response, ApiError> {
    check_door(&s.door, &headers)?;
    s.tickets
        .peek(STANDALONE_RUN, q.secret())
        .ok_or_else(ApiError::bad_ticket)?;
    Ok(page_response())
}

async fn standalone_socket(
    State(s): State<Standalone>,
    headers: HeaderMap,
    Query(q): Query<TicketQuery>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    check_door(&s.door, &headers)?;
    let view = s.tickets.open_view(STANDALONE_RUN, q.secret())?;
    Ok(upgrade(ws, s.control, view))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that sends half a request header is dropped at the
    /// header-read deadline (the live view used `axum::serve`, which has
    /// none, and held such a connection for ever).
    #[tokio::test]
    async fn a_client_that_never_finishes_its_header_is_dropped() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let limits = crate::listen::Limits {
            max_connections: 4,
            header_read_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_secs(60),
        };
        let server = LiveServer::start_with(RunControl::new(), limits)
            .await
            .unwrap();
        let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        tcp.write_all(b"GET /live HTTP/1.1\r\nHost: x")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the connection was still open after 5 s");
    }

    #[test]
    fn a_ticket_opens_one_view_of_its_run_at_a_time() {
        let t = Arc::new(Tickets::default());
        let secret = t.mint("r1", 3, Some(TICKET_TTL)).unwrap();
        assert_eq!(secret.len(), 32);
        assert_eq!(t.peek("r2", &secret), None, "another run's ticket");
        assert_eq!(t.peek("r1", "0000"), None);
        assert_eq!(t.peek("r1", ""), None);
        assert_eq!(t.peek("r1", &secret), Some(3));
        let (handoff, view) = t.open_view("r1", &secret).unwrap();
        assert_eq!(handoff, 3);
        let second = t.mint("r1", 3, Some(TICKET_TTL)).unwrap();
        assert_ne!(second, secret);
        assert_eq!(t.open_view("r1", &second).err(), Some(Refused::Busy));
        drop(view);
        assert!(
            t.open_view("r1", &secret).is_ok(),
            "a reload opens it again"
        );
        t.forget("r1", 3);
        assert_eq!(t.open_view("r1", &second).err(), Some(Refused::Unknown));
        let expired = t.mint("r1", 4, Some(Duration::ZERO)).unwrap();
        assert_eq!(t.peek("r1", &expired), None);
    }

    /// A client asking again and again keeps a few tickets, the newest.
    #[test]
    fn a_handover_keeps_only_its_newest_tickets() {
        let t = Tickets::default();
        let other = t.mint("r2", 1, Some(TICKET_TTL)).unwrap();
        let minted: Vec<String> = (0..100)
            .map(|_| t.mint("r1", 1, Some(TICKET_TTL)).unwrap())
            .collect();
        assert_eq!(t.lock().tickets.len(), MAX_TICKETS + 1);
        assert_eq!(t.peek("r1", &minted[0]), None, "the oldest went");
        assert_eq!(t.peek("r1", &minted[99]), Some(1));
        assert_eq!(t.peek("r2", &other), Some(1), "another run's stays");
    }
}

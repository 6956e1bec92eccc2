//! The HTTP API on axum: routes, the front door (Host, Origin, bearer
//! token, JSON bodies and their size; see [`crate::front_door`]), SSE and
//! WebSocket streams. Every route is listed in the OpenAPI document
//! ([`crate::openapi`]); a test fails when one is missing there.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt as _};
use lumen::{RecordedEvent, StreamEvent};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::error::ApiError;
use crate::front_door::FrontDoor;
use crate::live;
use crate::runs::{Live, RunEntry, RunManager};
use crate::store;

/// Shared state of the handlers.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub(crate) runs: Arc<RunManager>,
    pub(crate) door: Arc<FrontDoor>,
    /// One-time tickets to hand-overs' live views.
    pub(crate) tickets: Arc<live::Tickets>,
}

/// The API router (every route; authentication included).
pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/openapi.json", get(openapi))
        .route("/v1/tools", get(tools))
        .route("/v1/runs", get(list_runs).post(create_run))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/cancel", post(cancel_run))
        .route("/v1/runs/{id}/pause", post(pause_run))
        .route("/v1/runs/{id}/resume", post(resume_run))
        .route("/v1/runs/{id}/message", post(message_run))
        .route("/v1/runs/{id}/live", get(live_page).post(live_ticket))
        .route("/v1/runs/{id}/live/socket", get(live_socket))
        .route("/v1/runs/{id}/handoff/done", post(handoff_done))
        .route("/v1/runs/{id}/tasks", post(add_task))
        .route("/v1/runs/{id}/events", get(run_events))
        .route("/v1/runs/{id}/trace", get(run_trace))
        .route("/v1/runs/{id}/steps/{n}/screenshot", get(step_screenshot))
        .route("/v1/stream", get(stream_ws))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), front_door))
        .with_state(state)
}

/// `r`, ending its connection once sent: a client the front door turned
/// away keeps no connection slot open.
fn closing(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Every request, whatever its route (the WebSocket upgrade and SSE
/// included), in this order: a `Host` naming this server (421), no foreign
/// `Origin` (403), the bearer token except on `/health` (401), and for
/// POST, PUT and PATCH a JSON body (415) of at most the size limit (413),
/// read here so the handlers get it whole.
async fn front_door(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let door = &state.door;
    if let Err(e) = door
        .check_host(req.headers())
        .and_then(|()| door.check_origin(req.headers()))
    {
        return closing(e.into_response());
    }
    // A live view's page and socket carry a short-lived ticket instead (a
    // browser cannot send the bearer header on a WebSocket).
    let ticketed = req.method() == Method::GET && is_live_view(req.uri().path());
    if req.uri().path() != "/health" && !ticketed && !door.authorized(req.headers()) {
        let mut r = ApiError::unauthorized().into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return closing(r);
    }
    if matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH) {
        match json_body(req, door.max_body).await {
            Ok(req) => next.run(req).await,
            Err(e) => e.into_response(),
        }
    } else {
        next.run(req).await
    }
}

/// `/v1/runs/{id}/live` and `/v1/runs/{id}/live/socket`.
fn is_live_view(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    matches!(
        parts.as_slice(),
        ["", "v1", "runs", id, "live"] | ["", "v1", "runs", id, "live", "socket"] if !id.is_empty()
    )
}

/// Checks that the body is declared `application/json` and reads it, up to
/// `limit` bytes.
async fn json_body(req: Request, limit: usize) -> Result<Request, ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("?"));
    let is_json = content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
    });
    if !is_json {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::body_too_large(limit));
    }
    let (parts, body) = req.into_parts();
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::invalid_json(format!("the body could not be read: {e}")))?;
        if bytes.len() + chunk.len() > limit {
            return Err(ApiError::body_too_large(limit));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

/// `{"status": "ok"}` to anyone who gets through the Host and Origin
/// checks; the version, uptime and run counts only with the token.
async fn health(State(s): State<AppState>, headers: HeaderMap) -> Json<Value> {
    if s.door.authorized(&headers) {
        Json(s.runs.health())
    } else {
        Json(json!({"status": "ok"}))
    }
}

async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}

async fn tools() -> Json<Value> {
    Json(crate::tools::document())
}

async fn list_runs(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "runs": s.runs.list().await? })))
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_json(format!("the body is not valid JSON: {e}")))
}

async fn create_run(State(s): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let value = parse_json(&body)?;
    let info = s.runs.create(&value).await?;
    let location = format!("/v1/runs/{}", info.id);
    let mut r = (StatusCode::CREATED, Json(info)).into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    Ok(r)
}

async fn get_run(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(s.runs.entry(&id).await?.info()).into_response())
}

async fn cancel_run(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok((StatusCode::ACCEPTED, Json(s.runs.cancel(&id, &body).await?)).into_response())
}

async fn pause_run(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(s.runs.pause(&id).await?).into_response())
}

async fn resume_run(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(s.runs.resume(&id).await?).into_response())
}

/// A short-lived ticket (5 minutes, one view at a time) to the live view of the run's waiting hand-over.
async fn live_ticket(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let entry = s.runs.entry(&id).await?;
    if s.runs.is_remote(&id) && entry.is_active() {
        return Err(ApiError::invalid_state(format!(
            "run {id} executes on worker {}: its live view is served there",
            entry.info().worker.unwrap_or_default()
        )));
    }
    let Some(pending) = entry.control().handoff() else {
        return Err(ApiError::invalid_state(format!(
            "run {id} is not waiting for a person (status {})",
            entry.info().status.as_str()
        )));
    };
    let ticket = s
        .tickets
        .mint(&id, pending.id, Some(live::TICKET_TTL))
        .map_err(|e| ApiError::internal(format!("no ticket could be made: {e}")))?;
    Ok(Json(json!({
        "handoff": pending.id,
        "reason": pending.reason,
        "trigger": pending.trigger,
        "url": format!("/v1/runs/{id}/live?ticket={ticket}"),
        "socket": format!("/v1/runs/{id}/live/socket?ticket={ticket}"),
        "expiresInSecs": live::TICKET_TTL.as_secs(),
    }))
    .into_response())
}

async fn live_page(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<live::TicketQuery>,
) -> Result<Response, ApiError> {
    s.tickets
        .peek(&id, q.secret())
        .ok_or_else(ApiError::bad_ticket)?;
    Ok(live::page_response())
}

async fn live_socket(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<live::TicketQuery>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let view = s.tickets.open_view(&id, q.secret())?;
    let control = s.runs.entry(&id).await?.control();
    Ok(live::upgrade(ws, control, view))
}

/// The person is done (without the live view's button): the run goes on,
/// with `note` for the model.
async fn handoff_done(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok((
        StatusCode::ACCEPTED,
        Json(s.runs.handoff_done(&id, &body).await?),
    )
        .into_response())
}

async fn add_task(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok((
        StatusCode::ACCEPTED,
        Json(s.runs.add_task(&id, &body).await?),
    )
        .into_response())
}

async fn message_run(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok((
        StatusCode::ACCEPTED,
        Json(s.runs.message(&id, &body).await?),
    )
        .into_response())
}

/// The events of run `entry` after `after` (from the log), then its live
/// events, ending when its execution ends (at once for a run that is not
/// executing). Every event is delivered once, in order, the last included:
///
/// - the hub subscription is taken before anything is read, so nothing
///   published after the backlog read is missed;
/// - after the backlog, whether the run is still executing is checked, and
///   if it is not, the log is read again from the last event sent (the run
///   may have ended, and logged its last events, while the backlog was
///   read or sent);
/// - a live event ahead of the next expected `seq` (a lagging subscriber)
///   and the run's end refill from the log. The writer logs an event
///   before publishing it, so the log always has it;
/// - live-only deltas ([`StreamEvent::is_live_only`]) are not in the log:
///   a follower gets those published while it is caught up, and none
///   from a backlog.
pub(crate) fn follow(
    runs: &Arc<RunManager>,
    entry: Arc<RunEntry>,
    after: Option<u64>,
) -> mpsc::Receiver<RecordedEvent> {
    let (tx, rx) = mpsc::channel(64);
    let mut live = runs.subscribe();
    let hooks = runs.options().test_hooks.clone();
    let runs = runs.clone();
    tokio::spawn(async move {
        let id = entry.id().to_string();
        let mut last = after;
        // (A client's Last-Event-ID may be any number: no overflow.)
        let next = |last: Option<u64>| last.map_or(0, |l| l.saturating_add(1));
        'outer: loop {
            if !send_log(&runs, &id, &mut last, &tx).await {
                return;
            }
            if let Some(gate) = &hooks.follow_gate {
                if let Some(reached) = &hooks.follow_reached_gate {
                    reached.notify_one();
                }
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
            }
            if runs.is_settled(&entry).await {
                // Ended while the backlog was read or sent: the log is
                // complete and the ending saved; send what is left of it.
                let _ = send_log(&runs, &id, &mut last, &tx).await;
                return;
            }
            // With a shared queue, a run another worker executes reaches
            // this server through relayed notifications, and one executed
            // here may move to another worker: the store is read again
            // every second too, so a lost notification only delays.
            let remote = runs.db().is_shared();
            loop {
                let received = tokio::select! {
                    r = live.recv() => r,
                    _ = tokio::time::sleep(Duration::from_secs(1)), if remote => continue 'outer,
                    // The client went away: a quiet run (paused, waiting
                    // for a person) would otherwise keep this task, and
                    // its polling of a shared store, until it ends.
                    () = tx.closed() => return,
                };
                match received {
                    Ok(Live::Event { run, event }) if *run == *entry.id() => {
                        // A live-only delta repeats the seq of the logged
                        // event before it: sent when that is the last one
                        // this follower has, never refilled from the log.
                        if event.event.is_live_only() {
                            if last == Some(event.seq) && tx.send((*event).clone()).await.is_err() {
                                return;
                            }
                            continue;
                        }
                        if event.seq < next(last) {
                            continue;
                        }
                        if event.seq > next(last) {
                            continue 'outer;
                        }
                        last = Some(event.seq);
                        if tx.send((*event).clone()).await.is_err() {
                            return;
                        }
                    }
                    Ok(Live::Ended { run }) if *run == *entry.id() => {
                        if !runs.is_settled(&entry).await {
                            // Requeued (its worker stopped): it goes on
                            // elsewhere.
                            continue 'outer;
                        }
                        // Whatever is left in the log, then the end.
                        let _ = send_log(&runs, &id, &mut last, &tx).await;
                        return;
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => continue 'outer,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    rx
}

/// Sends what run `id`'s log holds after `last`, advancing `last`; false
/// when the follower is gone or the log cannot be read.
async fn send_log(
    runs: &RunManager,
    id: &str,
    last: &mut Option<u64>,
    tx: &mpsc::Sender<RecordedEvent>,
) -> bool {
    match runs.db().events(id, *last).await {
        Ok(log) => {
            for e in log.events {
                *last = Some(e.seq);
                if tx.send(e).await.is_err() {
                    return false;
                }
            }
            true
        }
        Err(e) => {
            tracing::warn!("the event log could not be read: {e}");
            false
        }
    }
}

/// The `type` tag of an event (`step_completed`…).
pub(crate) fn event_type(e: &StreamEvent) -> String {
    serde_json::to_value(e)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "event".into())
}

async fn run_events(
    State(s): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let entry = s.runs.entry(&id).await?;
    let after =
        match headers.get("last-event-id") {
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or_else(|| {
                        ApiError::invalid_field("Last-Event-ID", "must be an event id (a number)")
                    })?,
            ),
            None => match q.get("after") {
                Some(a) => Some(a.parse::<u64>().map_err(|_| {
                    ApiError::invalid_field("after", "must be an event id (a number)")
                })?),
                None => None,
            },
        };
    let rx = follow(&s.runs, entry, after);
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        let e = rx.recv().await?;
        let event = Event::default()
            .id(e.seq.to_string())
            .event(event_type(&e.event))
            .json_data(&e)
            .unwrap_or_else(|_| Event::default().comment("unserializable event"));
        Some((Ok(event), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

async fn run_trace(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let entry = s.runs.entry(&id).await?;
    let log = s.runs.events(&id).await?;
    Ok(Json(trace(&entry, &log)))
}

/// The run's report: its record and one entry per step (URL, actions with
/// what they did, blocks, usage, timings, screenshot URL), built from the
/// event log.
pub(crate) fn trace(entry: &RunEntry, log: &store::EventLog) -> Value {
    let events = &log.events;
    let mut steps: BTreeMap<u64, Value> = BTreeMap::new();
    let mut numbers = store::StepNumbers::default();
    let id = entry.id();
    for e in events {
        // Run-wide: the tasks of a run each number their steps from 0.
        let Some(n) = numbers.number(&e.event) else {
            continue;
        };
        let task_step = e.event.step().unwrap_or_default();
        let s = steps.entry(n).or_insert_with(|| {
            json!({"step": n, "taskStep": task_step, "actions": [], "blocked": [], "screenshot": Value::Null, "completed": false})
        });
        match &e.event {
            StreamEvent::StepStarted { url, .. } => s["url"] = json!(url),
            StreamEvent::Screenshot { .. } => {
                s["screenshot"] = json!(format!("/v1/runs/{id}/steps/{n}/screenshot"))
            }
            StreamEvent::Thinking { text, .. } => s["thinking"] = json!(text),
            StreamEvent::ActionResult {
                call, execution, ..
            } => {
                if let Some(a) = s["actions"].as_array_mut() {
                    a.push(json!({"call": call, "execution": execution}));
                }
            }
            StreamEvent::ActionBlocked { call, reason, .. } => {
                if let Some(a) = s["blocked"].as_array_mut() {
                    a.push(json!({"call": call, "reason": reason}));
                }
            }
            StreamEvent::StepCompleted {
                usage,
                duration_ms,
                model_ms,
                ..
            } => {
                s["completed"] = json!(true);
                s["usage"] = json!(usage);
                s["durationMs"] = json!(duration_ms);
                s["modelMs"] = json!(model_ms);
            }
            _ => {}
        }
    }
    json!({
        "run": entry.info(),
        "events": events.len(),
        "skippedLines": log.skipped,
        "steps": steps.into_values().collect::<Vec<_>>(),
    })
}

async fn step_screenshot(
    State(s): State<AppState>,
    Path((id, n)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let entry = s.runs.entry(&id).await?;
    let step: u64 = n
        .parse()
        .map_err(|_| ApiError::not_found(format!("no step {n:?}")))?;
    // `n` is the run-wide step number (the trace's `step`), mapped to its
    // file through the event log.
    let log = s.runs.events(&id).await?;
    let dir = entry.dir().clone();
    let found = crate::runs::off_thread(move || Ok(dir.screenshot(&log.events, step)))
        .await
        .map_err(|e| ApiError::internal(format!("the screenshot could not be found: {e}")))?;
    let (path, mime) =
        found.ok_or_else(|| ApiError::not_found(format!("no screenshot for step {step}")))?;
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| ApiError::internal(format!("the screenshot could not be read: {e}")))?;
    Ok(([(header::CONTENT_TYPE, mime)], Body::from(bytes)).into_response())
}

/// The largest message a `/v1/stream` client may send (a subscription is a
/// few dozen bytes; axum's default would take 64 MiB).
const MAX_STREAM_MESSAGE: usize = 64 * 1024;

async fn stream_ws(State(s): State<AppState>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(MAX_STREAM_MESSAGE)
        .max_frame_size(MAX_STREAM_MESSAGE)
        .on_upgrade(move |socket| websocket(s.runs, socket))
}

/// The most runs one `/v1/stream` connection follows at once.
const MAX_SUBSCRIPTIONS: usize = 64;

/// What a WebSocket client may send.
#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
enum ClientMessage {
    /// Events of `run_id` after `after` (all when absent), then live ones.
    Subscribe {
        run_id: String,
        #[serde(default)]
        after: Option<u64>,
    },
    /// Stop receiving `run_id`'s events.
    Unsubscribe { run_id: String },
    /// Answered with `{"type": "pong"}`.
    Ping {
        #[serde(default)]
        nonce: Option<Value>,
    },
}

/// One WebSocket connection: subscriptions to at most
/// [`MAX_SUBSCRIPTIONS`] runs, each fed by [`follow`], plus ping/pong. The
/// server pings every 20 s and closes a connection that has sent nothing
/// (not even a pong) for 60 s, or has not taken a message within
/// [`live::SEND_WAIT`]: an upgraded socket is past the listener's idle
/// limit, and a client that stopped reading would hold its slot and its
/// followers for good.
async fn websocket(runs: Arc<RunManager>, socket: WebSocket) {
    let silence = runs
        .options()
        .test_hooks
        .stream_silence
        .unwrap_or(Duration::from_secs(60));
    let (sink, mut source) = socket.split();
    let mut sink = live::Outbox(sink);
    let (out_tx, mut out_rx) = mpsc::channel::<Value>(256);
    let mut subs: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    let mut ping = tokio::time::interval(silence / 3);
    ping.tick().await;
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            msg = source.next() => {
                let Some(Ok(msg)) = msg else { break };
                heard = Instant::now();
                let text = match msg {
                    Message::Text(t) => t.to_string(),
                    Message::Close(_) => break,
                    _ => continue,
                };
                let reply = match serde_json::from_str::<ClientMessage>(&text) {
                    Ok(ClientMessage::Ping { nonce }) => json!({"type": "pong", "nonce": nonce}),
                    Ok(ClientMessage::Unsubscribe { run_id }) => {
                        if let Some(t) = subs.remove(&run_id) { t.abort(); }
                        json!({"type": "unsubscribed", "runId": run_id})
                    }
                    Ok(ClientMessage::Subscribe { run_id, .. })
                        if {
                            // Runs that ended (their follower is done) do not count.
                            subs.retain(|_, t| !t.is_finished());
                            subs.len() >= MAX_SUBSCRIPTIONS && !subs.contains_key(&run_id)
                        } =>
                    {
                        let e = ApiError::invalid_field(
                            "runId",
                            format!("a connection follows at most {MAX_SUBSCRIPTIONS} runs: unsubscribe from one first"),
                        );
                        json!({"type": "error", "runId": run_id, "error": e})
                    }
                    Ok(ClientMessage::Subscribe { run_id, after }) => match runs.entry(&run_id).await {
                        Ok(entry) => {
                            let mut rx = follow(&runs, entry, after);
                            let tx = out_tx.clone();
                            let id = run_id.clone();
                            let task = tokio::spawn(async move {
                                while let Some(e) = rx.recv().await {
                                    if tx.send(json!({"type": "event", "runId": id, "event": e})).await.is_err() {
                                        return;
                                    }
                                }
                                let _ = tx.send(json!({"type": "ended", "runId": id})).await;
                            });
                            if let Some(old) = subs.insert(run_id.clone(), task) { old.abort(); }
                            json!({"type": "subscribed", "runId": run_id})
                        }
                        Err(e) => json!({"type": "error", "runId": run_id, "error": e}),
                    },
                    Err(e) => json!({"type": "error", "error": ApiError::invalid_json(format!("not a client message: {e}"))}),
                };
                if !sink.send(&reply).await {
                    break;
                }
            }
            out = out_rx.recv() => {
                let Some(v) = out else { break };
                if !sink.send(&v).await {
                    break;
                }
            }
            _ = ping.tick() => {
                if heard.elapsed() >= silence
                    || !sink.message(Message::Ping(Bytes::from_static(b"lumen"))).await
                {
                    break;
                }
            }
        }
    }
    for (_, t) in subs {
        t.abort();
    }
}

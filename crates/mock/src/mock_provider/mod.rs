//! A mock model provider that speaks the real wire protocols over real HTTP:
//! Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and Gemini
//! `generateContent` / `streamGenerateContent`, as SSE or JSON.
//!
//! Tests script the answers (a queue per protocol), point an adapter at
//! [`MockProvider::base_url`], and afterwards read every request it made
//! ([`MockProvider::requests`]): method, path, headers (API keys removed)
//! and JSON body. Faults are scripted answers too: an error status with a
//! `Retry-After`, a connection dropped mid-stream, a malformed event, a
//! stall, or any in-stream error event.
//!
//! Every SSE event the mock sends ends with a blank line, as the SSE
//! specification requires.

pub mod conformance;
mod reply;
pub mod script;
pub mod trajectory;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use reply::{Reply, SseEvent};

/// Which protocol (endpoint) a request was for; each has its own queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// `POST /v1/messages`.
    AnthropicMessages,
    /// `POST /v1/responses`.
    OpenAiResponses,
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1beta/models/{model}:generateContent` or
    /// `:streamGenerateContent`.
    Gemini,
}

impl Route {
    /// The route a request path belongs to (query string ignored).
    pub fn of_path(path: &str) -> Option<Route> {
        let path = path.split('?').next().unwrap_or(path);
        if path.ends_with("/messages") {
            Some(Route::AnthropicMessages)
        } else if path.ends_with("/responses") {
            Some(Route::OpenAiResponses)
        } else if path.ends_with("/chat/completions") {
            Some(Route::ChatCompletions)
        } else if path.contains("/models/")
            && (path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent"))
        {
            Some(Route::Gemini)
        } else {
            None
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRequest {
    /// `POST`, usually.
    pub method: String,
    /// The path with its query string (a `key=` parameter redacted).
    pub path: String,
    /// The route it matched, if any.
    pub route: Option<Route>,
    /// Headers, lower-case names, without API keys.
    pub headers: BTreeMap<String, String>,
    /// Names of the API-key headers that were present (values dropped).
    pub key_headers: Vec<String>,
    /// The body as JSON (`Null` when it was empty or not JSON).
    pub body: serde_json::Value,
    /// Why the real API would refuse this request (see [`conformance`]);
    /// empty when it would accept it. A refused request is answered with
    /// 400 and leaves the scripted replies untouched.
    pub violations: Vec<String>,
}

/// Headers that carry API keys: recorded by name only.
const KEY_HEADERS: &[&str] = &["authorization", "x-api-key", "x-goog-api-key", "api-key"];

#[derive(Default)]
struct Shared {
    queues: Mutex<HashMap<Route, VecDeque<Reply>>>,
    requests: Mutex<Vec<ProviderRequest>>,
    checks: Mutex<Vec<Arc<conformance::Check>>>,
    /// OpenAI as public reports describe it (see
    /// [`MockProvider::refuse_unstored_item_ids`]).
    unstored_ids_refused: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("queues", &self.queues)
            .field("requests", &self.requests)
            .field("checks", &lock(&self.checks).len())
            .finish()
    }
}

/// The running mock provider. Stops when dropped.
#[derive(Debug)]
pub struct MockProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl MockProvider {
    /// Starts the mock on `127.0.0.1` at an ephemeral port. Must be called
    /// inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// Fails if no loopback port can be bound.
    pub async fn start() -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let (stop, mut stop_rx) = watch::channel(false);
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            // No graceful shutdown: a stalled stream must not keep the
            // server alive after the test is done with it.
            tokio::select! {
                result = axum::serve(listener, app) => {
                    if let Err(error) = result {
                        tracing::warn!(%error, "mock provider stopped with an error");
                    }
                }
                _ = stop_rx.wait_for(|stopped| *stopped) => {}
            }
        });
        Ok(Self {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`: the base URL to give an adapter.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues `reply` as the answer to the next request on `route`.
    pub fn push(&self, route: Route, reply: Reply) {
        lock(&self.shared.queues)
            .entry(route)
            .or_default()
            .push_back(reply);
    }

    /// How many scripted replies are still waiting on `route`.
    pub fn pending(&self, route: Route) -> usize {
        lock(&self.shared.queues)
            .get(&route)
            .map_or(0, VecDeque::len)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<ProviderRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Adds a check run on every request after the SDK schema check (rules
    /// the types cannot express, such as which thinking a model takes).
    /// Its violations are answered like the schema's: with a 400.
    pub fn add_check(
        &self,
        check: impl Fn(Route, &serde_json::Value) -> Vec<String> + Send + Sync + 'static,
    ) {
        lock(&self.shared.checks).push(Arc::new(check));
    }

    /// Answers OpenAI Responses requests as public reports say the API does
    /// with `store: false` (open-webui-developer-toolkit #715, hermes-agent
    /// #10217), where they disagree with the SDK's types: an input item
    /// that carries the `id` of an output item (`computer_call`,
    /// `function_call`, `reasoning`, `message`) is looked up among stored
    /// items and refused with 404 "Item with id … not found", and an item
    /// without its `id` is accepted although the SDK marks it required.
    pub fn refuse_unstored_item_ids(&self) {
        self.shared
            .unstored_ids_refused
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every violation of every request so far, each prefixed with the
    /// request's path: what a conformance test asserts is empty.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared.requests)
            .iter()
            .flat_map(|r| r.violations.iter().map(move |v| format!("{}: {v}", r.path)))
            .collect()
    }

    /// Stops the server and waits for it.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "mock provider task failed");
        }
    }
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The first input item of a Responses request that names an output item
/// by its `id`.
fn unstored_item_id(body: &serde_json::Value) -> Option<String> {
    body["input"].as_array()?.iter().find_map(|item| {
        let output = matches!(
            item["type"].as_str(),
            Some("computer_call" | "function_call" | "reasoning")
        ) || (item["type"] == "message" && item["role"] == "assistant");
        output
            .then(|| item["id"].as_str().map(str::to_owned))
            .flatten()
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking test thread must not hide the other tests' records.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024 * 1024)
        .await
        .unwrap_or_else(|_| Bytes::new());
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| parts.uri.path().to_owned());
    let route = Route::of_path(parts.uri.path());
    let mut headers = BTreeMap::new();
    let mut key_headers = Vec::new();
    for (name, value) in &parts.headers {
        let name = name.as_str().to_ascii_lowercase();
        if KEY_HEADERS.contains(&name.as_str()) {
            key_headers.push(name);
        } else {
            headers.insert(name, value.to_str().unwrap_or("<binary>").to_owned());
        }
    }
    let body: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
    let unstored = match (route, &body) {
        (Some(Route::OpenAiResponses), Some(body))
            if body["store"] == false
                && shared
                    .unstored_ids_refused
                    .load(std::sync::atomic::Ordering::Relaxed) =>
        {
            Some(unstored_item_id(body))
        }
        _ => None,
    };
    let violations = match (route, &body) {
        (Some(route), Some(body)) => {
            let mut found = conformance::schema_violations(route, body);
            if unstored.is_some() {
                found.retain(|v| !v.contains("missing the required field `id`"));
            }
            let checks: Vec<Arc<conformance::Check>> = lock(&shared.checks).clone();
            for check in checks {
                found.extend(check(route, body));
            }
            found
        }
        (Some(_), None) => vec!["the body is not JSON".to_owned()],
        (None, _) => Vec::new(),
    };
    lock(&shared.requests).push(ProviderRequest {
        method: parts.method.as_str().to_owned(),
        path: redact_query_key(&path_and_query),
        route,
        headers,
        key_headers,
        body: body.unwrap_or(serde_json::Value::Null),
        violations: violations.clone(),
    });
    if !violations.is_empty() {
        // What the real APIs do with a request they cannot accept.
        return Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .header("content-type", "application/json")
            .body(Body::from(
                serde_json::json!({
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": format!("mock provider: {}", violations.join("; ")),
                    },
                })
                .to_string(),
            ))
            .unwrap_or_default();
    }
    if let Some(Some(id)) = unstored {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header("content-type", "application/json")
            .body(Body::from(
                serde_json::json!({
                    "error": {
                        "message": format!(
                            "Item with id '{id}' not found. Items are not persisted when `store` \
                             is set to false. Try again with `store` set to true, or remove this \
                             item from your input."
                        ),
                        "type": "invalid_request_error",
                        "param": "input",
                        "code": null,
                    },
                })
                .to_string(),
            ))
            .unwrap_or_default();
    }
    let reply = route.and_then(|r| {
        lock(&shared.queues)
            .get_mut(&r)
            .and_then(VecDeque::pop_front)
    });
    match reply {
        Some(reply) => reply.into_response().await,
        None => Response::builder()
            .status(StatusCode::NOT_IMPLEMENTED)
            .header("content-type", "application/json")
            .body(Body::from(format!(
                r#"{{"error":{{"type":"mock_error","message":"mock provider: no scripted reply for {}"}}}}"#,
                parts.uri.path()
            )))
            .unwrap_or_default(),
    }
}

fn redact_query_key(path: &str) -> String {
    let Some((base, query)) = path.split_once('?') else {
        return path.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| {
            if pair.starts_with("key=") {
                "key=[redacted]".to_owned()
            } else {
                pair.to_owned()
            }
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

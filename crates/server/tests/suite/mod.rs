//! Shared harness: a fixture site, the mock provider, a data dir, and a
//! small HTTP client.

use std::time::Duration;

use lumen::models::{AdapterOptions, ApiKey};
use lumen_server::ServeOptions;
use lumen_test_support::FixtureServer;
use lumen_test_support::mock_provider::script::chat_turn;
use lumen_test_support::mock_provider::{MockProvider, Reply, Route};
use serde_json::{Value, json};

mod data_dir;
mod deltas;
mod deployment;
mod durability;
mod front_door;
mod handoff;
mod hardening;
mod http_api;
mod ipc;
mod isolation;
mod mcp;
mod modes;
mod options;
mod policy;
mod pool;
mod properties;
mod shared_queue;
mod streams;
mod tasks;

pub(crate) const MODEL: &str = "compatible/qwen2.5-vl";

/// The bearer token of servers started with [`Env::options`], which
/// [`Client::new`] sends.
pub(crate) const TOKEN: &str = "test-token-0123456789";

/// What the run store in a data directory holds (the server's SQLite
/// file, read beside it or after it stopped).
pub(crate) struct Stored(pub(crate) lumen_server::db::Db);

impl Stored {
    pub(crate) async fn open(data: &std::path::Path) -> Stored {
        Stored(lumen_server::db::Db::open(data, None).await.unwrap())
    }

    /// The run record as JSON.
    pub(crate) async fn record(&self, id: &str) -> Value {
        let row = self.0.run(id).await.unwrap().expect("the run is stored");
        serde_json::to_value(row.info).unwrap()
    }

    /// Replaces the run record (the server stopped).
    pub(crate) async fn set_record(&self, record: &Value) {
        let info: lumen_server::RunInfo = serde_json::from_value(record.clone()).unwrap();
        self.0.end_run(&info, None, true).await.unwrap();
    }

    pub(crate) async fn session(&self, id: &str) -> Option<String> {
        self.0.session(id).await.unwrap()
    }

    /// Replaces the session snapshot (the server stopped).
    pub(crate) async fn set_session(&self, id: &str, text: &str) {
        let done = self.0.save_session(id, "tests", text).await.unwrap();
        assert_eq!(done, lumen_server::db::Fenced::Done);
    }

    pub(crate) async fn result(&self, id: &str) -> Option<String> {
        self.0.result(id).await.unwrap()
    }

    /// The stored events, one JSON text each.
    pub(crate) async fn events_text(&self, id: &str) -> String {
        let log = self.0.events(id, None).await.unwrap();
        log.events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The server options of the tests: the mock provider at `mock_base`, the
/// test token, loopback allowed (the fixture site), one run at a time.
pub(crate) fn serve_options(data: &std::path::Path, mock_base: &str) -> ServeOptions {
    let mut o = ServeOptions::new(data);
    o.port = 0;
    o.default_model = MODEL.into();
    o.token = Some(TOKEN.into());
    // The fixture site is on loopback: the operator opts in to it.
    o.policy.allowed_private_hosts = vec!["127.0.0.1".into()];
    o.max_concurrent = 1;
    o.queue_limit = 4;
    o.adapter = AdapterOptions {
        api_key: Some(ApiKey::new("test-key")),
        base_url: Some(format!("{mock_base}/v1")),
        ..AdapterOptions::default()
    };
    o
}

pub(crate) struct Env {
    pub(crate) site: FixtureServer,
    pub(crate) mock: MockProvider,
    pub(crate) data: tempfile::TempDir,
}

impl Env {
    pub(crate) async fn new() -> Env {
        Env {
            site: FixtureServer::start().await.unwrap(),
            mock: lumen_test_support::mock_provider().await.unwrap(),
            data: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn options(&self) -> ServeOptions {
        serve_options(self.data.path(), &self.mock.base_url())
    }

    /// A click on the counter page's `#inc` button (centre 160,120 of
    /// 1280x720, in the compatible adapter's 0-1000 grid).
    pub(crate) fn click(&self) {
        let x = lumen::normalize(160.0, 1280);
        let y = lumen::normalize(120.0, 720);
        self.mock.push(
            Route::ChatCompletions,
            chat_turn(&[("c", "click", json!({"x": x, "y": y}))], None, 100),
        );
    }

    pub(crate) fn done(&self, answer: &str) {
        self.mock.push(
            Route::ChatCompletions,
            chat_turn(
                &[(
                    "d",
                    "task_complete",
                    json!({"result": answer, "status": "success"}),
                )],
                None,
                100,
            ),
        );
    }

    /// A reply that never finishes: the run stays inside this step.
    pub(crate) fn stall(&self) {
        self.mock
            .push(Route::ChatCompletions, Reply::Stall(Vec::new()));
    }

    pub(crate) fn requests(&self) -> usize {
        self.mock.requests().len()
    }

    pub(crate) fn counter(&self) -> String {
        self.site.url("counter.html")
    }
}

pub(crate) struct Client {
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
    pub(crate) token: Option<String>,
}

impl Client {
    pub(crate) fn new(addr: std::net::SocketAddr) -> Client {
        Client {
            base: format!("http://127.0.0.1:{}", addr.port()),
            http: http_client(),
            token: Some(TOKEN.into()),
        }
    }

    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.req(reqwest::Method::GET, path).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_raw(path, body.to_string()).await
    }

    pub(crate) async fn post_raw(&self, path: &str, body: String) -> (u16, Value) {
        let r = self
            .req(reqwest::Method::POST, path)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn create(&self, body: Value) -> String {
        let (status, run) = self.post("/v1/runs", body).await;
        assert_eq!(status, 201, "{run}");
        run["id"].as_str().unwrap().to_string()
    }

    pub(crate) async fn run(&self, id: &str) -> Value {
        let (status, run) = self.get(&format!("/v1/runs/{id}")).await;
        assert_eq!(status, 200, "{run}");
        run
    }

    /// Polls the run until `pred` holds (a hang guard, not a timing
    /// assertion: the limit is far above any real run).
    pub(crate) async fn wait(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let run = self.run(id).await;
            if pred(&run) {
                return run;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {id} never got to {what}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) async fn wait_status(&self, id: &str, status: &str) -> Value {
        self.wait(id, status, |r| r["status"] == status).await
    }

    /// The run's whole event log as SSE replays it: each event's data.
    pub(crate) async fn events(&self, id: &str) -> Vec<Value> {
        self.sse(id, None)
            .await
            .into_iter()
            .map(|(_, _, d)| d)
            .collect()
    }

    /// Every SSE event of the run's stream (which ends with the run's
    /// execution), as `(id, event name, data)`.
    pub(crate) async fn sse(
        &self,
        id: &str,
        last_event_id: Option<u64>,
    ) -> Vec<(u64, String, Value)> {
        let mut r = self.req(reqwest::Method::GET, &format!("/v1/runs/{id}/events"));
        if let Some(l) = last_event_id {
            r = r.header("Last-Event-ID", l.to_string());
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let text = tokio::time::timeout(Duration::from_secs(90), resp.text())
            .await
            .expect("the event stream did not end with the run")
            .unwrap();
        parse_sse(&text)
    }
}

/// A WebSocket handshake for `/v1/stream` on `addr` with extra headers
/// (`authorization`, `origin`, `host`…).
pub(crate) fn ws_request(
    addr: std::net::SocketAddr,
    headers: &[(&'static str, String)],
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let mut req = format!("ws://{addr}/v1/stream")
        .into_client_request()
        .unwrap();
    for (name, value) in headers {
        req.headers_mut().insert(*name, value.parse().unwrap());
    }
    req
}

/// A plain HTTP client. reqwest is built with `rustls-no-provider` in this
/// workspace; creating any adapter installs the provider first.
pub(crate) fn http_client() -> reqwest::Client {
    let _ = lumen::models::create_adapter(
        MODEL,
        AdapterOptions {
            api_key: Some(ApiKey::new("k")),
            base_url: Some("http://127.0.0.1:9".into()),
            ..AdapterOptions::default()
        },
    );
    reqwest::Client::new()
}

/// Parses an SSE body into `(id, event, data)`, skipping comments.
pub(crate) fn parse_sse(text: &str) -> Vec<(u64, String, Value)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let (mut id, mut event, mut data) = (None, String::new(), String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().parse::<u64>().unwrap());
            } else if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        if let Some(id) = id {
            out.push((id, event, serde_json::from_str(&data).unwrap()));
        }
    }
    out
}

/// The step numbers of the `step_completed` events in a list of events.
pub(crate) fn completed_steps(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["type"] == "step_completed")
        .map(|e| e["step"].as_u64().unwrap())
        .collect()
}

/// Checks a run's whole log: `seq` from 0 without gaps or repeats, and
/// every step started and completed exactly once, in order.
pub(crate) fn assert_every_step_once(events: &[Value], steps: u64) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e["seq"].as_u64(),
            Some(i as u64),
            "seq gap or repeat at {i}: {e}"
        );
    }
    let started: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "step_started")
        .map(|e| e["step"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (0..steps).collect();
    assert_eq!(started, expected, "steps started");
    assert_eq!(completed_steps(events), expected, "steps completed");
}

/// A raw MCP client on `lumen_server::mcp` over in-memory pipes, speaking
/// JSON-RPC lines as a real client would.
pub(crate) struct McpClient {
    input: Option<tokio::io::DuplexStream>,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::DuplexStream>>,
    service: tokio::task::JoinHandle<Result<(), lumen_server::ServeError>>,
    id: u64,
}

impl McpClient {
    /// Starts the MCP service with `options`.
    pub(crate) fn start(options: ServeOptions) -> McpClient {
        use tokio::io::AsyncBufReadExt as _;
        let (input, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, output) = tokio::io::duplex(1 << 20);
        let service = tokio::spawn(lumen_server::mcp(options, server_in, server_out));
        McpClient {
            input: Some(input),
            lines: tokio::io::BufReader::new(output).lines(),
            service,
            id: 0,
        }
    }

    async fn send(&mut self, message: &Value) {
        use tokio::io::AsyncWriteExt as _;
        let input = self.input.as_mut().expect("the client is open");
        input
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }

    /// Sends request `method` and returns its answer (the message with its
    /// id); after `initialize` it sends the `initialized` notification.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let id = self.id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(90), self.lines.next_line())
                .await
                .expect("mcp went quiet")
                .unwrap()
                .expect("mcp closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                if method == "initialize" {
                    self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                        .await;
                }
                return v;
            }
        }
    }

    /// `initialize`, as a client opens a session.
    pub(crate) async fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        )
        .await
    }

    /// Ends the input and waits up to `within` for the service to stop.
    pub(crate) async fn close(mut self, within: Duration) {
        drop(self.input.take());
        tokio::time::timeout(within, self.service)
            .await
            .expect("mcp did not stop at end of input")
            .unwrap()
            .unwrap();
    }
}

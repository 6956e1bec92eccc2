//! [`ServeOptions`]: everything the server, IPC and MCP entry points need.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use lumen::browser::{BrowserbaseOptions, LaunchOptions};
use lumen::models::AdapterOptions;
use lumen::safety::PolicyConfig;

/// The environment variable the CLI reads the bearer token from when
/// `--token` is not given.
pub const TOKEN_ENV: &str = "LUMEN_SERVER_TOKEN";

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on (`127.0.0.1` by default). Anything that is not a
    /// loopback address requires [`token`](Self::token).
    pub host: IpAddr,
    /// TCP port (`3001` by default; `0` picks a free one).
    pub port: u16,
    /// Where runs are persisted (`./lumen-data` by default).
    pub data_dir: PathBuf,
    /// Bearer token required on every request except `/health`. Mandatory
    /// off loopback; on loopback, when none is given, the server generates
    /// one at start and writes it to `<data_dir>/token` (mode 0600).
    pub token: Option<String>,
    /// Runs executing at once (each in a browser context of its own).
    pub max_concurrent: usize,
    /// Runs allowed to wait for a slot; more are refused with 429.
    pub queue_limit: usize,
    /// Model used when a request names none.
    pub default_model: String,
    /// Step budget used when a request gives none.
    pub default_max_steps: u32,
    /// The largest step budget a request may ask for.
    pub max_steps_limit: u32,
    /// The most follow-on tasks one run takes (`POST /v1/runs/{id}/tasks`,
    /// IPC `add_task`; 32 by default): each runs with a fresh step budget,
    /// so without a cap one run could be kept going, and its record
    /// growing, without end. More is 409 `task_limit` naming the cap.
    pub max_tasks_per_run: usize,
    /// The operator policy: what every run, MCP's direct tools and resumed
    /// runs may reach at most; a request's `policy` may only narrow it
    /// ([`PolicyConfig::narrowed_by`]). By default
    /// ([`PolicyConfig::operator_default`]) only `http`/`https` and no
    /// private, loopback or link-local address; the server's own port is
    /// always refused on this machine's addresses.
    pub policy: PolicyConfig,
    /// Keys and base URLs for the model adapters (the environment fills in
    /// what is missing).
    pub adapter: AdapterOptions,
    /// How local browsers are launched, when there are no
    /// `browser_endpoints`.
    pub launch: LaunchOptions,
    /// The most local Chromium processes the runs are spread over (1 by
    /// default, at least 1): each serves any number of runs at once, one
    /// browser context per run. A shared process costs a third of the
    /// memory of a process per run at the same step time (`cargo xtask
    /// bench agent`, 8 agents); a process that dies takes every run on it
    /// down, and they resume on a fresh one from their last completed step.
    /// Set it to `max_concurrent` for a process per run.
    pub browser_processes: usize,
    /// Launch the first local Chromium when the server starts instead of
    /// with the first run, which then does not wait for it (about 0.4 s
    /// here). Off by default: an idle server holds no browser. Nothing to
    /// do with `browser_endpoints`.
    pub prelaunch: bool,
    /// Remote browsers to serve runs from instead of launching Chromium
    /// here (a browserless or Selenium Grid pool, Chromium with
    /// `--remote-debugging-port`): each takes at most its `max_sessions`
    /// runs at once, failing ones cool down and the next is tried, and a
    /// run whose remote browser is lost resumes in a fresh session. Empty
    /// (the default): local Chromium.
    pub browser_endpoints: Vec<BrowserEndpoint>,
    /// How long a graceful shutdown waits for cancelled runs to persist.
    pub shutdown_grace: Duration,
    /// The run store: `None` (the default) keeps it in SQLite,
    /// `<data_dir>/lumen.db`; a `postgres://` URL keeps it in PostgreSQL,
    /// where several servers share one run queue (see `docs/deployment.md`).
    pub database_url: Option<String>,
    /// This server's name in the shared queue (who holds a run); by
    /// default the host name and the process id.
    pub worker_id: Option<String>,
    /// With a shared queue: the most runs executing at once across every
    /// worker (each worker also keeps to its `max_concurrent`).
    pub global_max_concurrent: Option<usize>,
    /// With a shared queue: how long a worker's hold on a run lasts
    /// without being renewed (it renews every third of it). A worker gone
    /// that long loses its runs to another, which resumes them from their
    /// last completed step.
    pub lease: Duration,
    /// Extra names the `Host` and `Origin` headers may give for this server
    /// (a DNS name, a reverse proxy's `name` or `name:port`); the bound
    /// address is always accepted (for loopback: `127.0.0.1`, `localhost`
    /// and `[::1]`). Anything else is refused, against DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// The largest request body accepted (1 MiB by default); more is 413.
    pub max_body_bytes: usize,
    /// Connections served at once (256 by default); more wait to be
    /// accepted.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (10 s).
    pub header_read_timeout: Duration,
    /// A connection on which nothing was read or written for this long is
    /// closed (120 s; event streams send keep-alives well within it).
    pub idle_timeout: Duration,
    /// The folder runs may upload files from (`uploadDir: true`, or a
    /// subfolder of it); `None`: a request cannot turn uploads on.
    pub upload_root: Option<PathBuf>,
    /// The folder downloads are saved under (`downloadDir: true`, or a
    /// subfolder of it, created); `None`: downloads stay refused.
    pub download_root: Option<PathBuf>,
    /// The action cache folder (`cache: true`, or a subfolder of it);
    /// `None`: a request cannot turn the cache on.
    pub cache_root: Option<PathBuf>,
    /// The workflow-memory file (`workflows: true`); `None`: a request
    /// cannot turn workflow memory on. A request never names the file.
    pub workflows_file: Option<PathBuf>,
    /// The browsers a request may attach its run to by `cdpUrl`, exactly
    /// as listed (a trailing `/` aside). Empty by default: the URL is an
    /// endpoint this machine connects to, so a client never picks one the
    /// operator has not named.
    pub allowed_cdp_urls: Vec<String>,
    /// The models a request may choose for `model`, `plannerModel` and
    /// `verifierModel`, as `provider/id` (an entry ending in `*` allows
    /// every id it begins: `anthropic/claude-haiku-*`). The default model
    /// is always allowed. Empty by default: any model the engine knows.
    pub allowed_models: Vec<String>,
    /// Whether a request may run in Browserbase (`browserbase: true`) with
    /// the operator's `BROWSERBASE_API_KEY` (off by default).
    pub allow_browserbase: bool,
    /// Fault injection for the server's own tests; inert by default, not
    /// part of the supported API.
    #[doc(hidden)]
    pub test_hooks: TestHooks,
}

/// A remote source of browsers runs can be served from.
#[derive(Debug, Clone)]
pub struct BrowserEndpoint {
    /// Where its browsers come from.
    pub source: EndpointSource,
    /// The most runs it takes at once (at least 1).
    pub max_sessions: usize,
}

/// Where a [`BrowserEndpoint`]'s browsers come from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EndpointSource {
    /// A running browser or a pool over CDP: `ws://host:port/devtools/browser/…`,
    /// `http://host:port` (resolved through `/json/version`), or a pool's
    /// WebSocket URL (browserless).
    Cdp(String),
    /// A Browserbase project: a session of its own for each run, released
    /// when the run's execution ends.
    Browserbase(Box<BrowserbaseOptions>),
}

impl BrowserEndpoint {
    /// A CDP endpoint taking `max_sessions` runs at once.
    ///
    /// # Errors
    /// A message naming what to fix: a URL that is not `ws(s)://` or
    /// `http(s)://`, or no session at all.
    pub fn new(url: impl Into<String>, max_sessions: usize) -> Result<Self, String> {
        let url = url.into().trim().to_owned();
        let scheme_ok = ["ws://", "wss://", "http://", "https://"]
            .iter()
            .any(|s| url.starts_with(s) && url.len() > s.len());
        if !scheme_ok {
            return Err(format!(
                "browser endpoint `{url}`: give a DevTools address, ws://host:port/devtools/browser/… or http://host:port"
            ));
        }
        Self::with(EndpointSource::Cdp(url), max_sessions)
    }

    /// A Browserbase project taking `max_sessions` runs at once (its plan's
    /// concurrency).
    ///
    /// # Errors
    /// A message naming what to fix: no key or project, or no session.
    pub fn browserbase(options: BrowserbaseOptions, max_sessions: usize) -> Result<Self, String> {
        if options.api_key.trim().is_empty() || options.project_id.trim().is_empty() {
            return Err("a Browserbase endpoint needs an API key and a project id".into());
        }
        Self::with(EndpointSource::Browserbase(Box::new(options)), max_sessions)
    }

    fn with(source: EndpointSource, max_sessions: usize) -> Result<Self, String> {
        let endpoint = Self {
            source,
            max_sessions,
        };
        if max_sessions == 0 {
            return Err(format!(
                "browser endpoint `{}`: it must take at least one session",
                endpoint.name()
            ));
        }
        Ok(endpoint)
    }

    /// How logs name it: its URL, or `browserbase:<project>` (never a key).
    pub fn name(&self) -> String {
        match &self.source {
            EndpointSource::Cdp(url) => url.clone(),
            EndpointSource::Browserbase(o) => format!("browserbase:{}", o.project_id),
        }
    }
}

/// Fault injection and synchronisation points for the server's tests
/// (reached only through [`ServeOptions::test_hooks`], never by a client).
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct TestHooks {
    /// Panics inside the run's task (in its event recorder, called by the
    /// loop) when step `n` starts: the server must still end the run.
    pub panic_at_step: Option<u32>,
    /// Event followers (SSE, WebSocket, IPC) wait for a permit here after
    /// sending their backlog and before going live, so a test can end the
    /// run in between.
    pub follow_gate: Option<std::sync::Arc<tokio::sync::Semaphore>>,
    /// Called by each follower when it reaches the gate.
    pub follow_reached_gate: Option<std::sync::Arc<tokio::sync::Notify>>,
    /// Executions wait for a permit here at each task boundary (a task
    /// ended, before the decision to run the next one), so a test can land
    /// a cancel or a shutdown exactly there.
    pub task_gate: Option<std::sync::Arc<tokio::sync::Semaphore>>,
    /// Notified when an execution reaches the task gate.
    pub task_gate_reached: Option<std::sync::Arc<tokio::sync::Notify>>,
    /// Executions wait for a permit here once their ending is decided
    /// (the record says how the run ended) and before it is saved, so a
    /// test can look at the run in between.
    pub ending_gate: Option<std::sync::Arc<tokio::sync::Semaphore>>,
    /// How long a live view's client may stay silent before it is closed
    /// (30 s otherwise), so a test need not wait that long.
    pub live_silence: Option<Duration>,
    /// The same for a `/v1/stream` client (60 s otherwise).
    pub stream_silence: Option<Duration>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            host: IpAddr::from([127, 0, 0, 1]),
            port: 3001,
            data_dir: PathBuf::from("lumen-data"),
            token: None,
            max_concurrent: 2,
            queue_limit: 32,
            default_model: "anthropic/claude-sonnet-4-6".into(),
            default_max_steps: 30,
            max_steps_limit: 500,
            max_tasks_per_run: 32,
            policy: PolicyConfig::operator_default(),
            adapter: AdapterOptions::default(),
            launch: LaunchOptions::default(),
            browser_processes: 1,
            prelaunch: false,
            browser_endpoints: Vec::new(),
            shutdown_grace: Duration::from_secs(20),
            database_url: None,
            worker_id: None,
            global_max_concurrent: None,
            lease: Duration::from_secs(30),
            allowed_hosts: Vec::new(),
            max_body_bytes: 1024 * 1024,
            max_connections: 256,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            upload_root: None,
            download_root: None,
            cache_root: None,
            workflows_file: None,
            allowed_cdp_urls: Vec::new(),
            allowed_models: Vec::new(),
            allow_browserbase: false,
            test_hooks: TestHooks::default(),
        }
    }
}

impl ServeOptions {
    /// Defaults with `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            ..Self::default()
        }
    }

    /// The token to require, if any; an empty token counts as none.
    pub(crate) fn effective_token(&self) -> Option<&str> {
        self.token.as_deref().filter(|t| !t.trim().is_empty())
    }
}

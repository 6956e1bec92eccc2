//! The run manager: creates, queues, executes, steers and persists runs.
//! HTTP, IPC and MCP are thin layers over it.
//!
//! Each run executes on the `lumen` facade's [`Session`] with its own
//! [`RunControl`] (created with the run, so a queued run can already be
//! cancelled, paused or given guidance); the session opens the start URL and
//! runs the mode ([`Session::run_mode`]: plan, agent, exec with retries), as
//! for the agent and the CLI. A recorder appends every event to the run's
//! log, saves screenshots as files, updates the run record and publishes the
//! event to live subscribers; the session saves its snapshot after every
//! completed step.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use lumen::browser::CdpTab;
use lumen::memory::SerializedHistory;
use lumen::perception::control::RunControl;
use lumen::perception::monitor::{Recorder, now_ms};
use lumen::safety::{PolicyConfig, PolicyDecision, PolicyErrorKind, PolicyRule, SessionPolicy};
use lumen::{
    BrowserTab, ErrorInfo, LumenError, RecordedEvent, RunMode, RunResult, RunStatus, Session,
    SessionOptions, StreamEvent,
};
use serde_json::{Map, Value, json};
use tokio::sync::{Semaphore, broadcast};
use tokio::task::JoinHandle;

use crate::error::ApiError;
use crate::options::ServeOptions;
use crate::store::{self, Mode, RunDir, RunInfo, RunState};

/// The cancel reason used by a graceful shutdown (the run becomes
/// `interrupted` and can be resumed).
pub const SERVER_SHUTDOWN: &str = "server_shutdown";
/// The reason recorded for runs found unfinished when the server starts.
pub const SERVER_RESTART: &str = "server_restart";
/// The default cancel reason.
pub const USER_CANCEL: &str = "user_explicit_cancel";

/// Something live subscribers (SSE, WebSocket, IPC) receive.
#[derive(Debug, Clone)]
pub enum Live {
    /// An event of run `run`, as logged.
    Event {
        /// The run id.
        run: Arc<str>,
        /// The event (screenshot bytes stripped: fetch them by URL).
        event: Arc<RecordedEvent>,
    },
    /// An execution of run `run` ended (its record is final until resumed).
    Ended {
        /// The run id.
        run: Arc<str>,
    },
}

/// One run known to the server.
#[derive(Debug)]
pub struct RunEntry {
    id: String,
    dir: RunDir,
    info: Mutex<RunInfo>,
    control: Mutex<RunControl>,
    task: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RunEntry {
    fn new(dir: RunDir, info: RunInfo) -> Self {
        Self {
            id: info.id.clone(),
            dir,
            info: Mutex::new(info),
            control: Mutex::new(RunControl::new()),
            task: Mutex::new(None),
        }
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The run's files.
    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    /// The record as clients see it (a queued or running run whose control
    /// is paused reports `paused`).
    pub fn info(&self) -> RunInfo {
        let mut info = lock(&self.info).clone();
        if matches!(info.status, RunState::Queued | RunState::Running) && self.control().is_paused()
        {
            info.status = RunState::Paused;
        }
        info
    }

    /// Whether an execution is queued or under way.
    pub fn is_active(&self) -> bool {
        lock(&self.info).status.is_active()
    }

    fn control(&self) -> RunControl {
        lock(&self.control).clone()
    }

    /// Changes the record and persists it atomically.
    fn update(&self, f: impl FnOnce(&mut RunInfo)) {
        let snapshot = {
            let mut info = lock(&self.info);
            f(&mut info);
            info.clone()
        };
        if let Err(e) = store::write_json(&self.dir.info(), &snapshot) {
            tracing::warn!(run = %self.id, "the run record could not be saved: {e}");
        }
    }

    /// Follows the run's progress from its events.
    fn observe(&self, event: &StreamEvent) {
        match event {
            StreamEvent::StepStarted { url, .. } => {
                lock(&self.info).last_url = Some(url.clone());
            }
            StreamEvent::ActionResult { execution, .. } => {
                if let Some(url) = execution.effect.as_ref().and_then(|e| e.url_after.clone()) {
                    lock(&self.info).last_url = Some(url);
                }
            }
            StreamEvent::StepCompleted { step, usage, .. } => {
                let (step, usage) = (*step, *usage);
                self.update(|i| {
                    i.steps_completed = i.steps_completed.max(step + 1);
                    i.usage += usage;
                });
            }
            _ => {}
        }
    }
}

/// Browsers kept for reuse between runs (at most one per slot).
#[derive(Debug)]
struct BrowserPool {
    launch: lumen::browser::LaunchOptions,
    idle: Mutex<Vec<Arc<CdpTab>>>,
}

impl BrowserPool {
    async fn take(&self) -> lumen::Result<Arc<CdpTab>> {
        let idle = lock(&self.idle).pop();
        match idle {
            Some(tab) => Ok(tab),
            None => Ok(Arc::new(CdpTab::launch(self.launch.clone()).await?)),
        }
    }

    /// Returns a browser after a run; one that cannot even show a blank
    /// page is dropped (which closes it).
    async fn give(&self, tab: Arc<CdpTab>) {
        if tab.goto("about:blank").await.is_ok_and(|o| o.ok) {
            lock(&self.idle).push(tab);
        }
    }

    async fn close_all(&self) {
        let tabs = std::mem::take(&mut *lock(&self.idle));
        for tab in tabs {
            if let Ok(tab) = Arc::try_unwrap(tab) {
                let _ = tab.close().await;
            }
        }
    }
}

/// Creates, executes, steers and persists runs.
#[derive(Debug)]
pub struct RunManager {
    options: ServeOptions,
    runs: Mutex<BTreeMap<String, Arc<RunEntry>>>,
    slots: Arc<Semaphore>,
    /// Executions queued or under way.
    active: AtomicUsize,
    running: AtomicUsize,
    hub: broadcast::Sender<Live>,
    pool: BrowserPool,
    started: Instant,
    accepting: AtomicBool,
    counter: AtomicU64,
    /// The port the HTTP server really listens on (when `port` was 0).
    listen_port: OnceLock<u16>,
}

/// A validated `POST /v1/runs` body.
#[derive(Debug, Clone)]
struct NewRun {
    instruction: String,
    start_url: Option<String>,
    model: String,
    max_steps: u32,
    mode: Mode,
    attempts: u32,
    policy: PolicyConfig,
    system_prompt: Option<String>,
}

const CREATE_FIELDS: &[&str] = &[
    "instruction",
    "startUrl",
    "model",
    "maxSteps",
    "mode",
    "attempts",
    "policy",
    "systemPrompt",
];

/// The object fields of `body`, refusing anything else and unknown fields.
fn object<'a>(body: &'a Value, known: &[&str]) -> Result<&'a Map<String, Value>, ApiError> {
    let obj = body
        .as_object()
        .ok_or_else(|| ApiError::invalid_json("the body must be a JSON object"))?;
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::unknown_field(k));
    }
    Ok(obj)
}

fn opt_string(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid_field(
            field,
            format!("`{field}` must be a string"),
        )),
    }
}

fn opt_u32(
    obj: &Map<String, Value>,
    field: &str,
    min: u32,
    max: u32,
) -> Result<Option<u32>, ApiError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (min as u64..=max as u64).contains(n))
            .map(|n| Some(n as u32))
            .ok_or_else(|| {
                ApiError::invalid_field(
                    field,
                    format!("`{field}` must be an integer from {min} to {max}"),
                )
            }),
    }
}

/// Parses an optional body of a control request (`{"reason"}`, `{"text"}`).
fn control_body(body: &[u8], known: &[&str]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_json(format!("the body is not valid JSON: {e}")))?;
    object(&value, known).cloned()
}

impl RunManager {
    /// A manager over `options.data_dir`. Runs found unfinished there (a
    /// crash or a kill) are marked `interrupted`.
    pub fn new(options: ServeOptions) -> std::io::Result<Arc<Self>> {
        std::fs::create_dir_all(options.data_dir.join("runs"))?;
        let mut runs = BTreeMap::new();
        for mut info in store::load_runs(&options.data_dir) {
            let dir = RunDir::new(&options.data_dir, &info.id);
            if info.status.is_active() {
                info.status = RunState::Interrupted;
                info.cancel_reason = Some(SERVER_RESTART.into());
                store::write_json(&dir.info(), &info)?;
            }
            runs.insert(info.id.clone(), Arc::new(RunEntry::new(dir, info)));
        }
        let (hub, _) = broadcast::channel(4096);
        Ok(Arc::new(Self {
            slots: Arc::new(Semaphore::new(options.max_concurrent.max(1))),
            pool: BrowserPool {
                launch: options.launch.clone(),
                idle: Mutex::new(Vec::new()),
            },
            options,
            runs: Mutex::new(runs),
            active: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            hub,
            started: Instant::now(),
            accepting: AtomicBool::new(true),
            counter: AtomicU64::new(0),
            listen_port: OnceLock::new(),
        }))
    }

    /// The options.
    pub fn options(&self) -> &ServeOptions {
        &self.options
    }

    /// Tells the manager the port the HTTP server really listens on (when
    /// it was started on port 0), so runs cannot reach the server itself.
    pub fn set_listen_port(&self, port: u16) {
        let _ = self.listen_port.set(port);
    }

    /// The operator policy ([`ServeOptions::policy`]) with the server's own
    /// port refused on this machine's addresses.
    pub fn operator_policy(&self) -> PolicyConfig {
        let mut policy = self.options.policy.clone();
        let ports = [Some(self.options.port), self.listen_port.get().copied()];
        for port in ports.into_iter().flatten().filter(|p| *p != 0) {
            if !policy.blocked_local_ports.contains(&port) {
                policy.blocked_local_ports.push(port);
            }
        }
        policy
    }

    /// Judges a URL a client asks the browser to open (a start URL) under
    /// `policy`, resolving its host off the async threads: 400
    /// `invalid_field` when it is not a URL or its scheme is not allowed
    /// (`file:`, `javascript:`…), 403 `policy_denied` naming `field` when
    /// the policy refuses its host (a blocked site, a private address).
    pub fn judge_url(policy: &SessionPolicy, field: &str, url: &str) -> Result<(), ApiError> {
        match blocking(|| policy.check_url_resolved(url)) {
            PolicyDecision::Allow => Ok(()),
            PolicyDecision::Deny(d)
                if matches!(
                    d.rule,
                    PolicyRule::InvalidUrl | PolicyRule::SchemeNotAllowed
                ) =>
            {
                Err(ApiError::invalid_field(field, d.reason))
            }
            PolicyDecision::Deny(d) => Err(policy_denied(field, d.reason)),
        }
    }

    /// Live events of every run.
    pub fn subscribe(&self) -> broadcast::Receiver<Live> {
        self.hub.subscribe()
    }

    /// `GET /health`.
    pub fn health(&self) -> Value {
        let active = self.active.load(Ordering::Relaxed);
        let running = self.running.load(Ordering::Relaxed);
        json!({
            "status": if self.accepting.load(Ordering::Relaxed) { "ok" } else { "shutting_down" },
            "version": env!("CARGO_PKG_VERSION"),
            "uptimeMs": self.started.elapsed().as_millis() as u64,
            "runsActive": active,
            "runsRunning": running,
            "runsQueued": active.saturating_sub(running),
            "maxConcurrent": self.options.max_concurrent.max(1),
            "queueLimit": self.options.queue_limit,
        })
    }

    /// The run `id`, or 404.
    pub fn entry(&self, id: &str) -> Result<Arc<RunEntry>, ApiError> {
        if !store::valid_run_id(id) {
            return Err(ApiError::not_found(format!("no run {id:?}")));
        }
        lock(&self.runs)
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no run {id:?}")))
    }

    /// `GET /v1/runs`: every run, newest first.
    pub fn list(&self) -> Vec<RunInfo> {
        let mut runs: Vec<RunInfo> = lock(&self.runs).values().map(|e| e.info()).collect();
        runs.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then(b.id.cmp(&a.id)));
        runs
    }

    fn validate(&self, body: &Value) -> Result<NewRun, ApiError> {
        let obj = object(body, CREATE_FIELDS)?;
        let instruction = opt_string(obj, "instruction")?
            .ok_or_else(|| ApiError::missing_field("instruction"))?;
        if instruction.trim().is_empty() {
            return Err(ApiError::invalid_field(
                "instruction",
                "`instruction` must not be empty",
            ));
        }
        let start_url = opt_string(obj, "startUrl")?;
        let model = opt_string(obj, "model")?.unwrap_or_else(|| self.options.default_model.clone());
        if let Err(e) = lumen::models::create_adapter(&model, self.options.adapter.clone()) {
            return Err(ApiError::invalid_field("model", e.to_string()));
        }
        let max_steps = opt_u32(obj, "maxSteps", 1, self.options.max_steps_limit)?
            .unwrap_or(self.options.default_max_steps);
        let mode = match opt_string(obj, "mode")?.as_deref() {
            None | Some("agent") => Mode::Agent,
            Some("plan") => Mode::Plan,
            Some("exec") => Mode::Exec,
            Some(_) => {
                return Err(ApiError::invalid_field(
                    "mode",
                    "`mode` must be \"agent\", \"plan\" or \"exec\"",
                ));
            }
        };
        let attempts = opt_u32(obj, "attempts", 1, 10)?.unwrap_or(1);
        let requested = match obj.get("policy") {
            None | Some(Value::Null) => PolicyConfig::default(),
            Some(v) => serde_json::from_value::<PolicyConfig>(v.clone())
                .map_err(|e| ApiError::invalid_field("policy", format!("invalid policy: {e}")))?,
        };
        // The run gets the operator policy, narrowed by the request's.
        let policy = self
            .operator_policy()
            .narrowed_by(&requested)
            .map_err(|e| match e.kind {
                PolicyErrorKind::Widens => policy_denied(&e.setting, e.message),
                _ => ApiError::invalid_field(&e.setting, e.message),
            })?;
        let session_policy = SessionPolicy::new(&policy)
            .map_err(|e| ApiError::invalid_field("policy", e.to_string()))?;
        if let Some(u) = &start_url {
            Self::judge_url(&session_policy, "startUrl", u)?;
        }
        Ok(NewRun {
            instruction,
            start_url,
            model,
            max_steps,
            mode,
            attempts,
            policy,
            system_prompt: opt_string(obj, "systemPrompt")?,
        })
    }

    fn new_id(&self) -> String {
        use std::hash::{BuildHasher as _, Hasher as _};
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        format!("run_{:x}_{:06x}", now_ms(), h.finish() & 0xff_ffff)
    }

    /// Reserves a place in the queue, or refuses with 429 (or 409 while
    /// shutting down).
    fn reserve(&self) -> Result<(), ApiError> {
        if !self.accepting.load(Ordering::Relaxed) {
            return Err(ApiError::invalid_state("the server is shutting down"));
        }
        let capacity = self.options.max_concurrent.max(1) + self.options.queue_limit;
        self.active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                (a < capacity).then_some(a + 1)
            })
            .map(|_| ())
            .map_err(|_| ApiError::queue_full(self.options.queue_limit))
    }

    /// `POST /v1/runs`.
    pub fn create(self: &Arc<Self>, body: &Value) -> Result<RunInfo, ApiError> {
        let new = self.validate(body)?;
        self.reserve()?;
        let id = self.new_id();
        let info = RunInfo {
            id: id.clone(),
            status: RunState::Queued,
            instruction: new.instruction,
            start_url: new.start_url,
            model: new.model,
            max_steps: new.max_steps,
            mode: new.mode,
            attempts: new.attempts,
            policy: new.policy,
            system_prompt: new.system_prompt,
            created_at_ms: now_ms(),
            started_at_ms: None,
            ended_at_ms: None,
            steps_completed: 0,
            last_url: None,
            usage: Default::default(),
            cancel_reason: None,
            result: None,
            outcome: None,
            error: None,
            pending_messages: Vec::new(),
            undelivered_messages: Vec::new(),
            resumes: 0,
        };
        let dir = RunDir::new(&self.options.data_dir, &id);
        if let Err(e) = store::write_json(&dir.info(), &info) {
            self.active.fetch_sub(1, Ordering::SeqCst);
            return Err(ApiError::internal(format!(
                "the run could not be saved: {e}"
            )));
        }
        let entry = Arc::new(RunEntry::new(dir, info.clone()));
        lock(&self.runs).insert(id, entry.clone());
        self.spawn(entry, false);
        Ok(info)
    }

    fn spawn(self: &Arc<Self>, entry: Arc<RunEntry>, resume: bool) {
        let this = self.clone();
        let task = tokio::spawn({
            let entry = entry.clone();
            async move { this.execute(entry, resume).await }
        });
        *lock(&entry.task) = Some(task);
    }

    /// `POST /v1/runs/{id}/cancel` with an optional `{"reason"}`.
    pub fn cancel(&self, id: &str, body: &[u8]) -> Result<RunInfo, ApiError> {
        let entry = self.entry(id)?;
        let obj = control_body(body, &["reason"])?;
        let reason = opt_string(&obj, "reason")?
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| USER_CANCEL.to_string());
        let status = lock(&entry.info).status;
        match status {
            s if s.is_active() => entry.control().cancel(reason),
            RunState::Interrupted => entry.update(|i| {
                i.status = RunState::Cancelled;
                i.cancel_reason = Some(reason);
                i.ended_at_ms = Some(now_ms());
                i.undelivered_messages.append(&mut i.pending_messages);
            }),
            s => {
                return Err(ApiError::invalid_state(format!(
                    "run {id} has already ended ({s:?})"
                )));
            }
        }
        Ok(entry.info())
    }

    /// `POST /v1/runs/{id}/pause`.
    pub fn pause(&self, id: &str) -> Result<RunInfo, ApiError> {
        let entry = self.entry(id)?;
        if !entry.is_active() {
            return Err(ApiError::invalid_state(format!(
                "run {id} is not queued or running"
            )));
        }
        entry.control().pause();
        Ok(entry.info())
    }

    /// `POST /v1/runs/{id}/resume`: continues a paused run, or restarts an
    /// interrupted one from its last completed step.
    pub fn resume(self: &Arc<Self>, id: &str) -> Result<RunInfo, ApiError> {
        let entry = self.entry(id)?;
        let status = lock(&entry.info).status;
        match status {
            s if s.is_active() => entry.control().resume(),
            RunState::Interrupted => {
                self.reserve()?;
                *lock(&entry.control) = RunControl::new();
                entry.update(|i| {
                    i.status = RunState::Queued;
                    i.resumes += 1;
                    i.cancel_reason = None;
                    i.ended_at_ms = None;
                    i.error = None;
                    i.outcome = None;
                    i.result = None;
                });
                self.spawn(entry.clone(), true);
            }
            s => {
                return Err(ApiError::invalid_state(format!(
                    "run {id} cannot be resumed ({s:?})"
                )));
            }
        }
        Ok(entry.info())
    }

    /// `POST /v1/runs/{id}/message` with `{"text"}`: guidance shown at the
    /// next step. An interrupted run keeps it for when it resumes; an ended
    /// run answers 409 (`run_ended`) and the message is not taken.
    pub fn message(&self, id: &str, body: &[u8]) -> Result<Value, ApiError> {
        let entry = self.entry(id)?;
        let obj = control_body(body, &["text"])?;
        let text = opt_string(&obj, "text")?.ok_or_else(|| ApiError::missing_field("text"))?;
        if text.trim().is_empty() {
            return Err(ApiError::invalid_field("text", "`text` must not be empty"));
        }
        let status = lock(&entry.info).status;
        match status {
            s if s.is_active() => {
                entry.control().inject_guidance(text);
                Ok(json!({"id": id, "delivery": "next_step"}))
            }
            RunState::Interrupted => {
                entry.update(|i| i.pending_messages.push(text));
                Ok(json!({"id": id, "delivery": "on_resume"}))
            }
            s => Err(ApiError::run_ended(format!(
                "run {id} has ended ({s:?}); the message was not delivered"
            ))),
        }
    }

    /// Stops accepting runs, cancels every active one with reason
    /// `server_shutdown` (they become `interrupted`), waits for them to
    /// persist (up to the grace period) and closes idle browsers.
    pub async fn shutdown(&self) {
        self.accepting.store(false, Ordering::SeqCst);
        let entries: Vec<Arc<RunEntry>> = lock(&self.runs).values().cloned().collect();
        let mut tasks = Vec::new();
        for e in entries {
            e.control().cancel(SERVER_SHUTDOWN);
            if let Some(t) = lock(&e.task).take() {
                tasks.push(t);
            }
        }
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(self.options.shutdown_grace, all)
            .await
            .is_err()
        {
            tracing::warn!("some runs did not stop within the shutdown grace period");
        }
        self.pool.close_all().await;
    }

    async fn execute(self: Arc<Self>, entry: Arc<RunEntry>, resume: bool) {
        let control = entry.control();
        let permit = tokio::select! {
            biased;
            _ = control.cancelled() => None,
            p = self.slots.clone().acquire_owned() => p.ok(),
        };
        let outcome = match permit {
            None => None,
            Some(permit) => {
                self.running.fetch_add(1, Ordering::SeqCst);
                entry.update(|i| {
                    i.status = RunState::Running;
                    i.started_at_ms = Some(now_ms());
                });
                let outcome = self.drive(&entry, &control, resume).await;
                self.running.fetch_sub(1, Ordering::SeqCst);
                drop(permit);
                Some(outcome)
            }
        };
        self.finish(&entry, &control, outcome);
        self.active.fetch_sub(1, Ordering::SeqCst);
        let _ = self.hub.send(Live::Ended {
            run: entry.id.as_str().into(),
        });
        if entry.info().status.is_terminal() {
            write_report(&entry).await;
        }
    }

    /// Records how an execution ended.
    fn finish(
        &self,
        entry: &RunEntry,
        control: &RunControl,
        outcome: Option<lumen::Result<RunResult>>,
    ) {
        let reason = control.cancel_reason();
        let shutdown = reason.as_deref() == Some(SERVER_SHUTDOWN);
        let leftover = control.take_guidance();
        let mut saved_result = None;
        entry.update(|i| {
            i.undelivered_messages.extend(leftover);
            match outcome {
                None => {
                    i.status = if shutdown {
                        RunState::Interrupted
                    } else {
                        RunState::Cancelled
                    };
                    i.cancel_reason = reason;
                }
                Some(Err(e)) => {
                    let cancelled = matches!(e, LumenError::Cancelled { .. }) || reason.is_some();
                    i.status = match (cancelled, shutdown) {
                        (_, true) => RunState::Interrupted,
                        (true, false) => RunState::Cancelled,
                        (false, false) => RunState::Failed,
                    };
                    i.cancel_reason = reason;
                    i.error = Some(ErrorInfo::from(&e));
                }
                Some(Ok(mut result)) => {
                    i.status = match result.status {
                        RunStatus::Cancelled if shutdown => RunState::Interrupted,
                        RunStatus::Cancelled => RunState::Cancelled,
                        RunStatus::Success => RunState::Completed,
                        RunStatus::Failure | RunStatus::MaxSteps => RunState::Failed,
                    };
                    i.steps_completed = result.steps;
                    i.usage = result.usage;
                    i.error = result.error.clone();
                    if result.status == RunStatus::Cancelled {
                        i.cancel_reason = reason;
                    } else {
                        i.result = result.result.clone();
                        i.outcome = Some(result.status);
                    }
                    result.history.clear();
                    saved_result = Some(result);
                }
            }
            if i.status != RunState::Interrupted {
                i.ended_at_ms = Some(now_ms());
            } else {
                // Undelivered guidance of an interrupted run is delivered
                // when it resumes.
                i.pending_messages.append(&mut i.undelivered_messages);
            }
        });
        if let Some(result) = saved_result
            && entry.info().status.is_terminal()
            && let Err(e) = store::write_json(&entry.dir.result(), &result)
        {
            tracing::warn!(run = %entry.id, "the result could not be saved: {e}");
        }
    }

    /// One execution: a browser from the pool, the session (fresh or from
    /// the snapshot), the run.
    async fn drive(
        self: &Arc<Self>,
        entry: &Arc<RunEntry>,
        control: &RunControl,
        resume: bool,
    ) -> lumen::Result<RunResult> {
        let snapshot = match resume && entry.dir.session().is_file() {
            true => Some(SerializedHistory::load(&entry.dir.session())?),
            false => None,
        };
        let events = entry.dir.events();
        let io = |e: std::io::Error| LumenError::config("data dir", e.to_string());
        let offset = if resume {
            store::reconcile_events(&events, snapshot.as_ref().map_or(0, |s| s.step_count))
                .map_err(io)?
        } else {
            store::write_atomic(&events, b"").map_err(io)?;
            0
        };
        let pending = {
            let mut info = lock(&entry.info);
            std::mem::take(&mut info.pending_messages)
        };
        for m in pending {
            control.inject_guidance(m);
        }
        let recorder = self.recorder(entry.clone(), offset).map_err(io)?;
        let tab = tokio::select! {
            biased;
            reason = control.cancelled() => return Err(LumenError::Cancelled { reason }),
            tab = self.pool.take() => tab?,
        };
        let result = self
            .drive_on(entry, control, tab.clone(), snapshot, recorder)
            .await;
        let lost = matches!(&result, Err(LumenError::BrowserDisconnected { .. }))
            || matches!(&result, Ok(r) if r.error.as_ref().is_some_and(|e| e.code == lumen::ErrorCode::BrowserDisconnected));
        if !lost {
            self.pool.give(tab).await;
        }
        result
    }

    async fn drive_on(
        &self,
        entry: &RunEntry,
        control: &RunControl,
        tab: Arc<CdpTab>,
        snapshot: Option<SerializedHistory>,
        recorder: Recorder,
    ) -> lumen::Result<RunResult> {
        let info = lock(&entry.info).clone();
        let adapter = lumen::models::create_adapter(&info.model, self.options.adapter.clone())?;
        // The run's policy, narrowed again under today's operator policy
        // (the operator may have tightened it since the run was created).
        let policy = self
            .operator_policy()
            .narrowed_by(&info.policy)
            .map_err(|e| LumenError::config(e.setting, e.message))?;
        let judge = SessionPolicy::new(&policy)?;
        // A resumed run goes back to where it was, if the policy allows it
        // (a blocked action's `url_after` may be the last URL seen), else to
        // its start URL, else about:blank; a fresh browser from the pool
        // already shows about:blank.
        let candidates = match &snapshot {
            Some(_) => vec![info.last_url.clone(), info.start_url.clone()],
            None => vec![info.start_url.clone()],
        };
        let mut url = None;
        for candidate in candidates.into_iter().flatten() {
            if candidate == "about:blank" {
                break;
            }
            let verdict = {
                let (judge, candidate) = (judge.clone(), candidate.clone());
                tokio::task::spawn_blocking(move || judge.check_url_resolved(&candidate))
                    .await
                    .unwrap_or_else(|e| {
                        PolicyDecision::Deny(lumen::safety::Denial {
                            rule: PolicyRule::InvalidUrl,
                            reason: format!("the URL could not be judged: {e}"),
                        })
                    })
            };
            match verdict {
                PolicyDecision::Allow => {
                    url = Some(candidate);
                    break;
                }
                PolicyDecision::Deny(d) if snapshot.is_some() => {
                    tracing::warn!(run = %entry.id, "not reopening {candidate}: {}", d.reason);
                }
                PolicyDecision::Deny(d) => {
                    return Err(LumenError::config("startUrl", d.reason));
                }
            }
        }
        let options = SessionOptions {
            max_steps: info.max_steps,
            policy,
            system_prompt: info.system_prompt.clone(),
            recorders: vec![recorder],
            ..SessionOptions::default()
        };
        let tab: Arc<dyn BrowserTab> = tab;
        let mut session = match snapshot {
            Some(s) => Session::resume(tab, adapter, options, s)?,
            None => Session::new(tab, adapter, options)?,
        };
        session.set_control(control.clone());
        session.save_after_each_step(entry.dir.session());
        let mode = match info.mode {
            Mode::Plan => RunMode::Plan,
            Mode::Agent => RunMode::Agent,
            Mode::Exec => RunMode::Exec {
                attempts: info.attempts,
            },
        };
        session
            .run_mode(&info.instruction, url.as_deref(), mode)
            .await
    }

    /// The recorder of one execution: log line, screenshot file, progress,
    /// live subscribers. Numbering continues from `offset` (a resumed run).
    fn recorder(&self, entry: Arc<RunEntry>, offset: u64) -> std::io::Result<Recorder> {
        // The run folder's log and screenshot files, as lumen-trace writes
        // them (screenshots atomically: they are served while the run goes).
        let log = lumen_trace::jsonl_recorder(&entry.dir.events(), false)?;
        std::fs::create_dir_all(entry.dir.screenshots())?;
        let shots = lumen_trace::ScreenshotFiles::new(entry.dir.dir()).atomic();
        let hub = self.hub.clone();
        let run: Arc<str> = entry.id.as_str().into();
        Ok(Arc::new(move |e: &RecordedEvent| {
            let mut e = e.clone();
            e.seq += offset;
            if let StreamEvent::Screenshot { step, screenshot } = &mut e.event {
                if let Err(err) = shots.save(*step, &screenshot.image) {
                    tracing::warn!(run = %run, "a screenshot could not be saved: {err}");
                }
                screenshot.image.data = Arc::from(Vec::new());
            }
            log(&e);
            entry.observe(&e.event);
            let _ = hub.send(Live::Event {
                run: run.clone(),
                event: Arc::new(e),
            });
        }))
    }
}

/// 403 `policy_denied`: the operator policy refuses what `field` asks.
pub(crate) fn policy_denied(field: &str, message: impl Into<String>) -> ApiError {
    ApiError {
        status: axum::http::StatusCode::FORBIDDEN,
        code: "policy_denied",
        message: message.into(),
        field: Some(field.to_string()),
    }
}

/// Runs blocking work (a DNS lookup) from synchronous code that may be on
/// an async worker: moved off it on a multi-threaded runtime, run in place
/// otherwise (a current-thread runtime has no other thread to lend).
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Draws `report.html` and `run.gif` into an ended run's folder from its
/// event log and screenshots (the layout `lumen-trace` defines, which the
/// CLI's traces follow too). Off the async threads; a failure is logged and
/// changes nothing about the run.
async fn write_report(entry: &RunEntry) {
    let dir = entry.dir.dir().to_path_buf();
    let options = lumen_trace::RenderOptions {
        pricing: Some(lumen::models::registry::cost),
        ..lumen_trace::RenderOptions::default()
    };
    let rendered = tokio::task::spawn_blocking(move || lumen_trace::render(&dir, &options)).await;
    match rendered {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(run = %entry.id, "the run report could not be written: {e}"),
        Err(e) => tracing::warn!(run = %entry.id, "the run report task failed: {e}"),
    }
}

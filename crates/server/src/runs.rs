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

use lumen::perception::control::RunControl;
use lumen::perception::monitor::now_ms;
use lumen::safety::{PolicyConfig, PolicyDecision, PolicyRule, Secrets, SessionPolicy};
use lumen::{RecordedEvent, StreamEvent};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, broadcast};
use tokio::task::JoinHandle;

use crate::ServeError;
use crate::error::ApiError;
use crate::lock::{DataDirLock, LOCK_FILE, LockError};
use crate::options::ServeOptions;
use crate::store::{self, RunDir, RunInfo, RunState};

mod execute;
mod pool;
mod tasks;
mod validate;

use pool::BrowserPool;
use validate::{control_body, opt_string};

/// The cancel reason used by a graceful shutdown (the run becomes
/// `interrupted` and can be resumed).
pub const SERVER_SHUTDOWN: &str = "server_shutdown";
/// The reason recorded for runs found unfinished when the server starts.
pub const SERVER_RESTART: &str = "server_restart";
/// The default cancel reason.
pub const USER_CANCEL: &str = "user_explicit_cancel";
/// The reasons a client may give for a cancel (the server API seed's fixed
/// set); anything else is a 400 naming them.
pub const CANCEL_REASONS: &[&str] = &[
    "user_interrupted",
    USER_CANCEL,
    "timeout",
    "sibling_error",
    SERVER_SHUTDOWN,
];

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
    /// Held while `run.json` is written, so the last write is the latest.
    saving: Mutex<()>,
    /// The request's secret values: in memory only, never persisted.
    secrets: Mutex<Option<lumen::SecretValues>>,
    /// Set (under the `info` lock) when the execution decided to end: no
    /// follow-on task is taken any more ([`tasks`]).
    tasks_closed: AtomicBool,
    /// False from the start of an execution until its ending (`run.json`,
    /// `result.json`) is on disk: a stream ends only after that, so a
    /// client that reads the files when it ends finds them.
    settled: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RunEntry {
    fn new(dir: RunDir, info: RunInfo) -> Self {
        let settled = !info.status.is_active();
        Self {
            id: info.id.clone(),
            dir,
            info: Mutex::new(info),
            control: Mutex::new(RunControl::new()),
            task: Mutex::new(None),
            saving: Mutex::new(()),
            secrets: Mutex::new(None),
            tasks_closed: AtomicBool::new(false),
            settled: AtomicBool::new(settled),
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
    /// is paused reports `paused`; a running one handed to a person,
    /// `waiting_for_human` with the hand-over).
    pub fn info(&self) -> RunInfo {
        let mut info = lock(&self.info).clone();
        info.redact(&self.redactor());
        let control = self.control();
        // Waiting for a person shows first: a pause takes effect only
        // after the hand-over.
        if info.status == RunState::Running
            && let Some(h) = control.handoff()
        {
            info.status = RunState::WaitingForHuman;
            info.handoff = Some(crate::store::HandoffInfo {
                id: h.id,
                reason: h.reason,
                trigger: h.trigger,
            });
        } else if matches!(info.status, RunState::Queued | RunState::Running) && control.is_paused()
        {
            info.status = RunState::Paused;
        }
        info
    }

    /// Whether an execution is queued or under way.
    pub fn is_active(&self) -> bool {
        lock(&self.info).status.is_active()
    }

    /// Whether the run has ended and its ending is saved: its event log
    /// and files are final until it is resumed.
    pub(crate) fn is_settled(&self) -> bool {
        !self.is_active() && self.settled.load(Ordering::SeqCst)
    }

    pub(crate) fn control(&self) -> RunControl {
        lock(&self.control).clone()
    }

    /// Writes the record as it is now (blocking: call it off the async
    /// threads). Writes are serialised and each takes the record at the
    /// time it writes, so the last one on disk is the latest.
    /// The record is redacted with the run's secret values first, as the
    /// event log is.
    fn save(&self) -> std::io::Result<()> {
        let _saving = lock(&self.saving);
        let mut snapshot = lock(&self.info).clone();
        snapshot.redact(&self.redactor());
        store::write_json(&self.dir.info(), &snapshot)
    }

    /// The run's secret values (in memory only) as a redactor; empty when
    /// it has none.
    pub(crate) fn redactor(&self) -> Secrets {
        let mut secrets = Secrets::new();
        if let Some(values) = lock(&self.secrets).as_ref() {
            for (name, value) in &values.0 {
                // Checked when the run was created.
                if let Err(e) = secrets.insert(name, value.clone()) {
                    tracing::warn!(run = %self.id, "secret {name} cannot redact: {e}");
                }
            }
        }
        secrets
    }

    /// [`save`](Self::save) on the blocking pool; a failure is logged.
    async fn persist(self: &Arc<Self>) {
        let entry = self.clone();
        if let Err(e) = off_thread(move || entry.save()).await {
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
                // Persisted by the execution's writer, off the loop.
                let mut i = lock(&self.info);
                let (before, _) = tasks::finished_totals(&i);
                i.steps_completed = i.steps_completed.max(before + *step + 1);
                i.usage += *usage;
            }
            _ => {}
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
    /// The data directory's lock, held until [`shutdown`](Self::shutdown).
    lock: Mutex<Option<DataDirLock>>,
}

impl RunManager {
    /// A manager over `options.data_dir`: creates it (0700) if missing,
    /// takes its lock (one process per data directory; see
    /// [`ServeError::DataDirInUse`]) and marks the runs found unfinished
    /// there (a crash or a kill) `interrupted`. The disk work runs off the
    /// async threads.
    pub async fn new(options: ServeOptions) -> Result<Arc<Self>, ServeError> {
        let data_dir = options.data_dir.clone();
        let prepared = tokio::task::spawn_blocking(move || Self::open_data_dir(&data_dir))
            .await
            .map_err(|e| ServeError::DataDir {
                path: options.data_dir.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let (lock, infos) = prepared.map_err(|e| match e {
            LockError::Held { path, pid } => ServeError::DataDirInUse {
                path: options.data_dir.clone(),
                lock: path,
                pid,
            },
            LockError::Io(source) => ServeError::DataDir {
                path: options.data_dir.clone(),
                source,
            },
        })?;
        let runs = infos
            .into_iter()
            .map(|info| {
                let dir = RunDir::new(&options.data_dir, &info.id);
                (info.id.clone(), Arc::new(RunEntry::new(dir, info)))
            })
            .collect();
        let (hub, _) = broadcast::channel(4096);
        Ok(Arc::new(Self {
            slots: Arc::new(Semaphore::new(options.max_concurrent.max(1))),
            pool: BrowserPool::new(options.launch.clone(), options.browser_endpoints.clone()),
            options,
            runs: Mutex::new(runs),
            active: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            hub,
            started: Instant::now(),
            accepting: AtomicBool::new(true),
            counter: AtomicU64::new(0),
            listen_port: OnceLock::new(),
            lock: Mutex::new(Some(lock)),
        }))
    }

    /// The blocking part of [`new`](Self::new).
    fn open_data_dir(data_dir: &std::path::Path) -> Result<(DataDirLock, Vec<RunInfo>), LockError> {
        if !data_dir.exists() {
            store::private_dir(data_dir).map_err(LockError::Io)?;
        }
        let lock = DataDirLock::acquire(data_dir)?;
        store::private_dir(&data_dir.join("runs")).map_err(LockError::Io)?;
        let mut infos = store::load_runs(data_dir);
        for info in &mut infos {
            let dir = RunDir::new(data_dir, &info.id);
            if let Err(e) = store::tighten(dir.dir()) {
                tracing::warn!(run = %info.id, "could not make the run folder private: {e}");
            }
            let mut changed = false;
            if info.status.is_active() {
                info.status = RunState::Interrupted;
                info.cancel_reason = Some(SERVER_RESTART.into());
                changed = true;
            }
            // Secret values are never written: a run that can still resume
            // says which it will not have.
            if !info.status.is_terminal() && info.missing_secrets != info.secret_names {
                info.missing_secrets = info.secret_names.clone();
                changed = true;
            }
            if changed {
                store::write_json(&dir.info(), &info).map_err(LockError::Io)?;
            }
        }
        Ok((lock, infos))
    }

    /// The data directory's lock file.
    pub fn lock_file(&self) -> std::path::PathBuf {
        self.options.data_dir.join(LOCK_FILE)
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
    pub async fn judge_url(policy: &SessionPolicy, field: &str, url: &str) -> Result<(), ApiError> {
        let verdict = policy.judge_resolved(url).await;
        match verdict {
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
    pub async fn create(self: &Arc<Self>, body: &Value) -> Result<RunInfo, ApiError> {
        let mut new = self.validate(body).await?;
        self.reserve()?;
        let id = self.new_id();
        // Secret values stay in memory; the record keeps their names.
        let secrets = new.options.secrets.take();
        let secret_names = secrets
            .as_ref()
            .map(|s| s.0.keys().cloned().collect())
            .unwrap_or_default();
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
            options: new.options,
            secret_names,
            missing_secrets: Vec::new(),
            tasks: Vec::new(),
            task_index: 0,
            task_results: Vec::new(),
            task_seq: 0,
            handoff: None,
        };
        let entry = Arc::new(RunEntry::new(
            RunDir::new(&self.options.data_dir, &id),
            info.clone(),
        ));
        *lock(&entry.secrets) = secrets;
        let saving = entry.clone();
        if let Err(e) = off_thread(move || saving.save()).await {
            self.active.fetch_sub(1, Ordering::SeqCst);
            return Err(ApiError::internal(format!(
                "the run could not be saved: {e}"
            )));
        }
        lock(&self.runs).insert(id, entry.clone());
        self.spawn(entry.clone(), false);
        // As clients see it: redacted with the run's secret values.
        let mut info = info;
        info.redact(&entry.redactor());
        Ok(info)
    }

    fn spawn(self: &Arc<Self>, entry: Arc<RunEntry>, resume: bool) {
        // Unsettled until the execution's ending is saved.
        entry.settled.store(false, Ordering::SeqCst);
        let this = self.clone();
        let task = tokio::spawn({
            let entry = entry.clone();
            async move { this.execute(entry, resume).await }
        });
        *lock(&entry.task) = Some(task);
    }

    /// `POST /v1/runs/{id}/cancel` with an optional `{"reason"}` (one of
    /// [`CANCEL_REASONS`], default `user_explicit_cancel`): cancels
    /// a queued, running or paused run (it ends `cancelled` at its next
    /// await point) or an interrupted one (at once). The status is checked
    /// and changed under the run's lock, so of two racing requests one
    /// wins; cancelling a run already being cancelled, or one that has
    /// ended, is 409 `invalid_state`.
    pub async fn cancel(&self, id: &str, body: &[u8]) -> Result<RunInfo, ApiError> {
        let entry = self.entry(id)?;
        let obj = control_body(body, &["reason"])?;
        let reason = opt_string(&obj, "reason")?.unwrap_or_else(|| USER_CANCEL.to_string());
        if !CANCEL_REASONS.contains(&reason.as_str()) {
            return Err(ApiError::invalid_field(
                "reason",
                format!(
                    "{reason:?} is not a cancel reason; use one of: {}",
                    CANCEL_REASONS.join(", ")
                ),
            ));
        }
        let persist = {
            let mut info = lock(&entry.info);
            match info.status {
                s if s.is_active() => {
                    let control = entry.control();
                    if let Some(r) = control.cancel_reason() {
                        return Err(ApiError::invalid_state(format!(
                            "run {id} is already being cancelled ({r})"
                        )));
                    }
                    control.cancel(reason);
                    false
                }
                RunState::Interrupted => {
                    info.status = RunState::Cancelled;
                    info.cancel_reason = Some(reason);
                    info.ended_at_ms = Some(now_ms());
                    let pending = std::mem::take(&mut info.pending_messages);
                    info.undelivered_messages.extend(pending);
                    true
                }
                s => {
                    return Err(ApiError::invalid_state(format!(
                        "run {id} has already ended ({}): there is nothing to cancel",
                        s.as_str()
                    )));
                }
            }
        };
        if persist {
            entry.persist().await;
        }
        Ok(entry.info())
    }

    /// `POST /v1/runs/{id}/pause`: pauses a queued or running run at its
    /// next step boundary. Already paused, being cancelled, or not active
    /// is 409 `invalid_state` (checked and changed under the run's lock).
    pub fn pause(&self, id: &str) -> Result<RunInfo, ApiError> {
        let entry = self.entry(id)?;
        {
            let info = lock(&entry.info);
            if !info.status.is_active() {
                return Err(ApiError::invalid_state(format!(
                    "run {id} is {}: only a queued or running run can be paused",
                    info.status.as_str()
                )));
            }
            let control = entry.control();
            if let Some(r) = control.cancel_reason() {
                return Err(ApiError::invalid_state(format!(
                    "run {id} is being cancelled ({r})"
                )));
            }
            if control.is_paused() {
                return Err(ApiError::invalid_state(format!(
                    "run {id} is already paused"
                )));
            }
            control.pause();
        }
        Ok(entry.info())
    }

    /// `POST /v1/runs/{id}/resume`: continues a paused run, or restarts an
    /// interrupted one from its last completed step. The status is checked
    /// and changed under the run's lock: of two racing resumes of an
    /// interrupted run exactly one starts it, the other gets 409
    /// `invalid_state` (the run is queued or running, not paused), as does
    /// resuming a run that is not paused or has ended.
    pub async fn resume(self: &Arc<Self>, id: &str) -> Result<RunInfo, ApiError> {
        let entry = self.entry(id)?;
        let restart = {
            let mut info = lock(&entry.info);
            match info.status {
                s if s.is_active() => {
                    let control = entry.control();
                    if !control.is_paused() {
                        return Err(ApiError::invalid_state(format!(
                            "run {id} is {}, not paused: there is nothing to resume",
                            s.as_str()
                        )));
                    }
                    control.resume();
                    false
                }
                RunState::Interrupted => {
                    self.reserve()?;
                    *lock(&entry.control) = RunControl::new();
                    entry.tasks_closed.store(false, Ordering::SeqCst);
                    info.status = RunState::Queued;
                    info.resumes += 1;
                    info.cancel_reason = None;
                    info.ended_at_ms = None;
                    info.error = None;
                    info.outcome = None;
                    info.result = None;
                    true
                }
                s => {
                    return Err(ApiError::invalid_state(format!(
                        "run {id} has ended ({}) and cannot be resumed",
                        s.as_str()
                    )));
                }
            }
        };
        if restart {
            entry.persist().await;
            self.spawn(entry.clone(), true);
        }
        Ok(entry.info())
    }

    /// `POST /v1/runs/{id}/message` with `{"text"}`: guidance shown at the
    /// next step. An interrupted run keeps it for when it resumes; an ended
    /// run answers 409 (`run_ended`) and the message is not taken.
    pub async fn message(&self, id: &str, body: &[u8]) -> Result<Value, ApiError> {
        let entry = self.entry(id)?;
        let obj = control_body(body, &["text"])?;
        let text = opt_string(&obj, "text")?.ok_or_else(|| ApiError::missing_field("text"))?;
        if text.trim().is_empty() {
            return Err(ApiError::invalid_field("text", "`text` must not be empty"));
        }
        {
            let mut info = lock(&entry.info);
            match info.status {
                s if s.is_active() => {
                    entry.control().inject_guidance(text);
                    return Ok(json!({"id": id, "delivery": "next_step"}));
                }
                RunState::Interrupted => info.pending_messages.push(text),
                s => {
                    return Err(ApiError::run_ended(format!(
                        "run {id} has ended ({}); the message was not delivered",
                        s.as_str()
                    )));
                }
            }
        }
        entry.persist().await;
        Ok(json!({"id": id, "delivery": "on_resume"}))
    }

    /// `POST /v1/runs/{id}/handoff/done` with `{"note"?, "handoff"?}`: the
    /// person is done with the hand-over the run waits on (only hand-over
    /// `handoff`, when given); the run goes on with the note. 409 when
    /// nothing waits.
    pub fn handoff_done(&self, id: &str, body: &[u8]) -> Result<RunInfo, ApiError> {
        let entry = self.entry(id)?;
        let obj = control_body(body, &["note", "handoff"])?;
        let note = opt_string(&obj, "note")?;
        if note
            .as_ref()
            .is_some_and(|n| n.chars().count() > crate::live::MAX_NOTE_CHARS)
        {
            return Err(ApiError::invalid_field(
                "note",
                format!(
                    "`note` must be at most {} characters",
                    crate::live::MAX_NOTE_CHARS
                ),
            ));
        }
        let handoff = match obj.get("handoff") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                ApiError::invalid_field("handoff", "`handoff` must be the hand-over's number")
            })?),
        };
        if !entry.control().finish_handoff(handoff, note) {
            return Err(ApiError::invalid_state(format!(
                "run {id} is not waiting for a person{}",
                handoff
                    .map(|h| format!(" in hand-over {h}"))
                    .unwrap_or_default()
            )));
        }
        Ok(entry.info())
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
        // Another process may use the data directory from now on.
        drop(lock(&self.lock).take());
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

/// Runs blocking work (file I/O, fsync) on tokio's blocking pool, never on
/// an async worker, whatever the runtime's flavour; a task that could not
/// finish (a panic in it, a runtime shutting down) is an I/O error.
pub(crate) async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(std::io::Error::other(format!(
            "a blocking task failed: {e}"
        )))
    })
}

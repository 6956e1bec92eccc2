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
use crate::db::{Db, Fenced};
use crate::error::ApiError;
use crate::lock::{DataDirLock, LOCK_FILE, LockError};
use crate::options::ServeOptions;
use crate::store::{self, RunDir, RunInfo, RunState};

mod execute;
mod pool;
mod shared;
mod steer;
mod tasks;
mod validate;
mod writer;

use crate::db::redact_url;
use pool::BrowserPool;
use shared::{LockHeld, default_worker_id, restart_fixup};

/// The cancel reason used by a graceful shutdown (the run becomes
/// `interrupted` and can be resumed).
pub const SERVER_SHUTDOWN: &str = "server_shutdown";
/// The reason recorded for runs found unfinished when the server starts.
pub const SERVER_RESTART: &str = "server_restart";
/// The reason a run stops on a worker that lost its hold on it (another
/// worker took it over).
pub const LEASE_LOST: &str = "lease_lost";
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
    /// Held while the record is written, so the last write is the latest.
    saving: tokio::sync::Mutex<()>,
    /// The store, and this server's name in it.
    db: Db,
    worker: Arc<str>,
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
    fn new(dir: RunDir, info: RunInfo, db: Db, worker: Arc<str>) -> Self {
        let settled = !info.status.is_active();
        Self {
            id: info.id.clone(),
            dir,
            info: Mutex::new(info),
            control: Mutex::new(RunControl::new()),
            task: Mutex::new(None),
            saving: tokio::sync::Mutex::new(()),
            db,
            worker,
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

    /// Writes the record as it is now. Writes are serialised and each
    /// takes the record at the time it writes, so the last one stored is
    /// the latest. The record is redacted with the run's secret values
    /// first, as the event log is. Fenced: a run another worker took over
    /// is not written, and its execution here is stopped.
    async fn save(&self) -> Result<(), crate::db::DbError> {
        let _saving = self.saving.lock().await;
        let mut snapshot = lock(&self.info).clone();
        snapshot.redact(&self.redactor());
        if self.db.save_run(&snapshot, &self.worker).await? == Fenced::Lost {
            self.lost();
        }
        Ok(())
    }

    /// Another worker took the run over: the execution here stops.
    fn lost(&self) {
        tracing::warn!(run = %self.id, "another worker holds the run now; stopping it here");
        self.control().cancel(LEASE_LOST);
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

    /// [`save`](Self::save); a failure is logged.
    async fn persist(&self) {
        if let Err(e) = self.save().await {
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
    /// The runs this server knows in memory: every run (SQLite), or the
    /// runs it holds (a shared queue: the others are read from the store).
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
    /// The data directory's lock (SQLite), held until
    /// [`shutdown`](Self::shutdown).
    lock: Mutex<Option<DataDirLock>>,
    /// The run store.
    db: Db,
    /// This server's name in the store.
    worker: Arc<str>,
    /// Wakes the claim loop (a run was queued).
    wake: tokio::sync::Notify,
    /// Held by the claim loop from a claim to the run's entry in `runs`,
    /// and by a steer from looking for the run here to adopting it: a run
    /// this server claims meanwhile would match the adoption too (it names
    /// this worker), and the steer would land on a copy that executes
    /// nowhere.
    claims: tokio::sync::Mutex<()>,
    /// Background tasks: the shared queue's (claims, leases,
    /// notifications) and the prelaunch.
    background: Mutex<Vec<JoinHandle<()>>>,
}

impl RunManager {
    /// A manager over `options.data_dir` and the run store: creates the
    /// folder (0700) if missing and opens the store (SQLite in it, or
    /// PostgreSQL at [`ServeOptions::database_url`]), applying migrations
    /// and importing the runs of a file-based data directory. With SQLite,
    /// takes the folder's lock (one process per data directory; see
    /// [`ServeError::DataDirInUse`]) and marks the runs found unfinished
    /// (a crash or a kill) `interrupted`. With PostgreSQL, joins the shared
    /// queue: runs are claimed from it, and a run whose worker stopped
    /// renewing its lease is taken over and resumed.
    pub async fn new(options: ServeOptions) -> Result<Arc<Self>, ServeError> {
        let data_dir = options.data_dir.clone();
        let dir_error = |source: std::io::Error| ServeError::DataDir {
            path: options.data_dir.clone(),
            source,
        };
        let shared = options.database_url.is_some();
        let prepared = off_thread(move || {
            // Workers sharing a database may share the folder (a shared
            // volume, which another worker's user may own): it is made if
            // missing, neither checked nor tightened, and the store, not a
            // lock file, coordinates them. A folder of one process is this
            // user's alone.
            match shared {
                false => store::own_dir(&data_dir)?,
                true if !data_dir.exists() => store::private_dir(&data_dir)?,
                true => {}
            }
            let lock = match shared {
                true => None,
                false => Some(DataDirLock::acquire(&data_dir).map_err(|e| match e {
                    LockError::Held { path, pid } => std::io::Error::other(LockHeld(path, pid)),
                    LockError::Io(e) => e,
                })?),
            };
            store::own_dir(&data_dir.join("runs"))?;
            Ok(lock)
        })
        .await;
        let lock = match prepared {
            Ok(lock) => lock,
            Err(e) => {
                return Err(
                    match e.get_ref().and_then(|i| i.downcast_ref::<LockHeld>()) {
                        Some(LockHeld(path, pid)) => ServeError::DataDirInUse {
                            path: options.data_dir.clone(),
                            lock: path.clone(),
                            pid: *pid,
                        },
                        None => dir_error(e),
                    },
                );
            }
        };
        let db = Db::open(&options.data_dir, options.database_url.as_deref())
            .await
            .map_err(|source| ServeError::Database {
                store: match &options.database_url {
                    Some(url) => redact_url(url),
                    None => options
                        .data_dir
                        .join(crate::db::SQLITE_FILE)
                        .display()
                        .to_string(),
                },
                source,
            })?;
        let store_error = |e: crate::db::DbError| ServeError::Database {
            store: "the run store".into(),
            source: e,
        };
        shared::import_files(&db, &options.data_dir)
            .await
            .map_err(store_error)?;
        let worker: Arc<str> = options
            .worker_id
            .clone()
            .unwrap_or_else(default_worker_id)
            .into();
        let mut runs = BTreeMap::new();
        if !shared {
            for row in db.runs().await.map_err(store_error)? {
                let mut info = row.info;
                let dir = RunDir::new(&options.data_dir, &info.id);
                if let Err(e) = store::tighten(dir.dir()) {
                    tracing::debug!(run = %info.id, "could not make the run folder private: {e}");
                }
                if restart_fixup(&mut info) || row.worker.is_some() {
                    let resume = info.status == RunState::Interrupted;
                    db.end_run(&info, None, resume).await.map_err(store_error)?;
                }
                let entry = RunEntry::new(dir, info, db.clone(), worker.clone());
                runs.insert(entry.id.clone(), Arc::new(entry));
            }
        }
        let (hub, _) = broadcast::channel(4096);
        let manager = Arc::new(Self {
            slots: Arc::new(Semaphore::new(options.max_concurrent.max(1))),
            pool: BrowserPool::new(
                options.launch.clone(),
                options.browser_processes,
                options.browser_endpoints.clone(),
            ),
            options,
            runs: Mutex::new(runs),
            active: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            hub,
            started: Instant::now(),
            accepting: AtomicBool::new(true),
            counter: AtomicU64::new(0),
            listen_port: OnceLock::new(),
            lock: Mutex::new(lock),
            db,
            worker,
            wake: tokio::sync::Notify::new(),
            claims: tokio::sync::Mutex::new(()),
            background: Mutex::new(Vec::new()),
        });
        if shared {
            manager.join_queue();
        }
        if manager.options.prelaunch {
            manager.prelaunch();
        }
        Ok(manager)
    }

    /// Launches the first local browser in the background
    /// ([`ServeOptions::prelaunch`]); a failure is logged, and the first
    /// run then launches one itself.
    fn prelaunch(self: &Arc<Self>) {
        let this = self.clone();
        let task = tokio::spawn(async move {
            if let Err(e) = this.pool.prelaunch().await {
                tracing::warn!("could not launch Chromium ahead of the first run: {e}");
            }
        });
        lock(&self.background).push(task);
    }

    /// The run store.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// This server's name in the run store.
    pub fn worker_id(&self) -> &str {
        &self.worker
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
            "store": if self.db.is_shared() { "postgres" } else { "sqlite" },
            "worker": &*self.worker,
        })
    }

    /// The run `id`, or 404: the entry this server holds, or (a shared
    /// queue) a view of the stored record, for reading.
    pub async fn entry(&self, id: &str) -> Result<Arc<RunEntry>, ApiError> {
        let missing = || ApiError::not_found(format!("no run {id:?}"));
        if !store::valid_run_id(id) {
            return Err(missing());
        }
        if let Some(e) = self.local(id) {
            return Ok(e);
        }
        if !self.db.is_shared() {
            return Err(missing());
        }
        let row = self.stored(id).await?;
        Ok(Arc::new(self.new_entry(row.info)))
    }

    /// The stored record of run `id` and who holds it, or 404.
    pub(crate) async fn stored(&self, id: &str) -> Result<crate::db::RunRow, ApiError> {
        self.db
            .run(id)
            .await
            .map_err(store_failed)?
            .ok_or_else(|| ApiError::not_found(format!("no run {id:?}")))
    }

    /// Every stored event of run `id`.
    pub async fn events(&self, id: &str) -> Result<store::EventLog, ApiError> {
        self.db.events(id, None).await.map_err(store_failed)
    }

    /// Whether run `id` executes on another server (a shared queue).
    pub(crate) fn is_remote(&self, id: &str) -> bool {
        self.db.is_shared() && self.local(id).is_none()
    }

    /// Whether `entry`'s run has ended and its ending is saved: as this
    /// server holds it, else as the store says.
    pub(crate) async fn is_settled(&self, entry: &RunEntry) -> bool {
        if let Some(e) = self.local(entry.id()) {
            return e.is_settled();
        }
        if !self.db.is_shared() {
            return entry.is_settled();
        }
        match self.db.run(entry.id()).await {
            Ok(Some(row)) => !row.info.status.is_active(),
            Ok(None) => true,
            Err(e) => {
                tracing::debug!(run = %entry.id(), "the run's state could not be read: {e}");
                false
            }
        }
    }

    /// The entry of run `id` this server holds in memory.
    fn local(&self, id: &str) -> Option<Arc<RunEntry>> {
        lock(&self.runs).get(id).cloned()
    }

    fn new_entry(&self, info: RunInfo) -> RunEntry {
        let dir = RunDir::new(&self.options.data_dir, &info.id);
        RunEntry::new(dir, info, self.db.clone(), self.worker.clone())
    }

    /// `GET /v1/runs`: every run, newest first (a shared queue's runs from
    /// the store, those this server holds as it sees them).
    pub async fn list(&self) -> Result<Vec<RunInfo>, ApiError> {
        let mut runs: Vec<RunInfo> = if self.db.is_shared() {
            let rows = self.db.runs().await.map_err(store_failed)?;
            rows.into_iter()
                .map(|r| match self.local(&r.info.id) {
                    Some(e) => e.info(),
                    None => r.info,
                })
                .collect()
        } else {
            lock(&self.runs).values().map(|e| e.info()).collect()
        };
        runs.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then(b.id.cmp(&a.id)));
        Ok(runs)
    }

    fn new_id(&self) -> String {
        use std::hash::{BuildHasher as _, Hasher as _};
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        format!("run_{:x}_{:06x}", now_ms(), h.finish() & 0xff_ffff)
    }

    /// Reserves a place in the queue, or refuses with 429 (or 409 while
    /// shutting down). A shared queue is full when `queue_limit` runs wait
    /// in it for a worker.
    async fn reserve(&self, shared_queue: bool) -> Result<(), ApiError> {
        if !self.accepting.load(Ordering::Relaxed) {
            return Err(ApiError::invalid_state("the server is shutting down"));
        }
        if shared_queue {
            let queued = self.db.queued().await.map_err(store_failed)?;
            if queued >= self.options.queue_limit.max(1) {
                return Err(ApiError::queue_full(self.options.queue_limit));
            }
            return Ok(());
        }
        let capacity = self.options.max_concurrent.max(1) + self.options.queue_limit;
        self.active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                (a < capacity).then_some(a + 1)
            })
            .map(|_| ())
            .map_err(|_| ApiError::queue_full(self.options.queue_limit))
    }

    /// `POST /v1/runs`. With a shared queue, a run is queued there for any
    /// worker, but one given secrets executes here: their values live in
    /// this process only.
    pub async fn create(self: &Arc<Self>, body: &Value) -> Result<RunInfo, ApiError> {
        let mut new = self.validate(body).await?;
        // Secret values stay in memory; the record keeps their names.
        let secrets = new.options.secrets.take();
        let to_queue = self.db.is_shared() && secrets.is_none();
        self.reserve(to_queue).await?;
        let id = self.new_id();
        let secret_names = secrets
            .as_ref()
            .map(|s| s.0.keys().cloned().collect())
            .unwrap_or_default();
        let info = RunInfo {
            mode: new.mode,
            attempts: new.attempts,
            policy: new.policy,
            system_prompt: new.system_prompt,
            options: new.options,
            secret_names,
            worker: (!to_queue).then(|| self.worker.to_string()),
            ..RunInfo::queued(
                id.clone(),
                new.instruction,
                new.start_url,
                new.model,
                new.max_steps,
            )
        };
        let entry = Arc::new(self.new_entry(info.clone()));
        *lock(&entry.secrets) = secrets;
        let mut stored = info.clone();
        stored.redact(&entry.redactor());
        let holder = (!to_queue).then_some(&*self.worker);
        let lease = holder.map(|_| self.lease_until());
        if let Err(e) = self.db.insert_run(&stored, holder, lease).await {
            if !to_queue {
                self.active.fetch_sub(1, Ordering::SeqCst);
            }
            return Err(ApiError::internal(format!(
                "the run could not be saved: {e}"
            )));
        }
        if to_queue {
            self.db.notify(crate::db::queue::QUEUE, &id).await;
            self.wake.notify_one();
        } else {
            lock(&self.runs).insert(id, entry.clone());
            self.spawn(entry.clone(), false, None);
        }
        Ok(stored)
    }

    /// When a hold taken now runs out.
    fn lease_until(&self) -> i64 {
        let lease = i64::try_from(self.options.lease.as_millis()).unwrap_or(i64::MAX / 2);
        crate::db::now_ms().saturating_add(lease)
    }

    fn spawn(
        self: &Arc<Self>,
        entry: Arc<RunEntry>,
        resume: bool,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
    ) {
        // Unsettled until the execution's ending is saved.
        entry.settled.store(false, Ordering::SeqCst);
        let this = self.clone();
        let task = tokio::spawn({
            let entry = entry.clone();
            async move { this.execute(entry, resume, permit).await }
        });
        *lock(&entry.task) = Some(task);
    }

    /// Stops accepting runs, cancels every active one with reason
    /// `server_shutdown` (they become `interrupted`), waits for them to
    /// persist (up to the grace period) and closes the local browsers.
    pub async fn shutdown(&self) {
        self.accepting.store(false, Ordering::SeqCst);
        for task in lock(&self.background).drain(..) {
            task.abort();
        }
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
        self.db.close().await;
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

/// 500: the run store failed (logged; the client sees the cause).
pub(crate) fn store_failed(e: crate::db::DbError) -> ApiError {
    tracing::warn!("the run store failed: {e}");
    ApiError::internal(format!("the run store failed: {e}"))
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

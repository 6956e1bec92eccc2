//! One execution of a run: a slot, a fresh browser context in a pooled
//! browser, the session, and whatever happens, an ending recorded and
//! announced.
//!
//! - **A panic inside the run's task** (the loop, a hook, the recorder) is
//!   caught at the execution's boundary: the run ends `failed` with a
//!   result naming the panic, a final `done` event is logged and sent, its
//!   slot and counters are released, its browser is dropped (never reused in
//!   an unknown state), and every follower gets the end.
//! - **Disk work is off the loop.** The recorder the loop calls only
//!   updates the run's progress in memory and hands the event to a writer
//!   on tokio's blocking pool, which saves the screenshot, appends the log
//!   line, persists the record after each step and then publishes the event
//!   to live followers (so a published event is always already in the log).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use futures::FutureExt as _;
use lumen::browser::CdpTab;
use lumen::memory::SerializedHistory;
use lumen::perception::control::RunControl;
use lumen::perception::monitor::{Recorder, now_ms};
use lumen::safety::{PolicyDecision, SessionPolicy};
use lumen::{
    BrowserTab, ErrorInfo, LumenError, RecordedEvent, RunMode, RunResult, RunStatus, Session,
    SessionOptions, StreamEvent,
};
use tokio::sync::broadcast;

use super::tasks::{self, Boundary};
use super::{Live, RunEntry, RunManager, SERVER_SHUTDOWN, lock, off_thread};
use crate::store::{self, Mode, RunState};

/// How many times one execution moves to a fresh remote browser after
/// losing its own.
const MAX_FAILOVERS: u32 = 2;

/// Whether a run ended because its browser was lost.
pub(super) fn lost_browser(result: &lumen::Result<RunResult>) -> bool {
    match result {
        Err(e) => matches!(e, LumenError::BrowserDisconnected { .. }),
        Ok(r) => r
            .error
            .as_ref()
            .is_some_and(|e| e.code == lumen::ErrorCode::BrowserDisconnected),
    }
}

/// What the recorder hands to the writer.
enum Write {
    Event(Box<RecordedEvent>),
    /// Stop (events a stray recorder clone sends later are dropped).
    End,
}

/// The writer of one execution (see the module docs).
struct Writer {
    tx: mpsc::Sender<Write>,
    task: tokio::task::JoinHandle<()>,
    /// One past the last `seq` handed to the writer.
    next_seq: Arc<AtomicU64>,
    /// While `Some`, the session's `error` and `done` events are held here
    /// instead of written: an execution on a remote browser may fail over,
    /// and then the run has not ended ([`release`](Self::release)).
    held: Arc<std::sync::Mutex<Option<Vec<RecordedEvent>>>>,
}

impl Writer {
    /// Starts the writer for `entry`'s log (already open as `log`),
    /// numbering from `offset`.
    fn start(
        entry: Arc<RunEntry>,
        log: Recorder,
        (offset, shots): (u64, BTreeMap<u32, usize>),
        hub: broadcast::Sender<Live>,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        let task =
            tokio::task::spawn_blocking(move || write_events(&entry, &log, shots, &rx, &hub));
        Writer {
            tx,
            task,
            next_seq: Arc::new(AtomicU64::new(offset)),
            held: Arc::default(),
        }
    }

    /// The recorder the session calls (on the loop's thread: no disk).
    fn recorder(&self, entry: Arc<RunEntry>, panic_at_step: Option<u32>) -> Recorder {
        let tx = std::sync::Mutex::new(self.tx.clone());
        let next_seq = self.next_seq.clone();
        let offset = next_seq.load(Ordering::SeqCst);
        let held = self.held.clone();
        Arc::new(move |e: &RecordedEvent| {
            if let StreamEvent::StepStarted { step, .. } = &e.event
                && panic_at_step == Some(*step)
            {
                injected_panic(*step);
            }
            let mut e = e.clone();
            e.seq += offset;
            next_seq.fetch_max(e.seq + 1, Ordering::SeqCst);
            if matches!(
                e.event,
                StreamEvent::Error { .. } | StreamEvent::Done { .. }
            ) && let Some(held) = lock(&held).as_mut()
            {
                held.push(e);
                return;
            }
            entry.observe(&e.event);
            let _ = lock(&tx).send(Write::Event(Box::new(e)));
        })
    }

    /// Holds the session's `error` and `done` events back from now on.
    fn hold_endings(&self) {
        lock(&self.held).get_or_insert_with(Vec::new);
    }

    /// Whether endings are held (the execution drives a remote browser).
    fn holds_endings(&self) -> bool {
        lock(&self.held).is_some()
    }

    /// Writes the held endings (`keep`: the run ended) or drops them (it
    /// fails over: it has not ended, and the resumed execution cuts the log
    /// back to its last completed step anyway).
    fn release(&self, entry: &RunEntry, keep: bool) {
        let held = lock(&self.held).take().unwrap_or_default();
        if keep {
            for e in held {
                entry.observe(&e.event);
                let _ = self.tx.send(Write::Event(Box::new(e)));
            }
        }
    }

    /// Appends an event after the session's last one.
    fn append(&self, event: StreamEvent) {
        let e = RecordedEvent {
            seq: self.next_seq.fetch_add(1, Ordering::SeqCst),
            timestamp_ms: now_ms(),
            event,
        };
        let _ = self.tx.send(Write::Event(Box::new(e)));
    }

    /// Waits until everything handed over is on disk and published.
    async fn finish(self) {
        let _ = self.tx.send(Write::End);
        if let Err(e) = self.task.await {
            tracing::warn!("the event writer failed: {e}");
        }
    }
}

/// The test hook of [`crate::TestHooks::panic_at_step`].
#[allow(clippy::panic, reason = "fault injection for the server's tests")]
fn injected_panic(step: u32) -> ! {
    panic!("injected panic at step {step} (ServeOptions::test_hooks)")
}

/// The writer's loop, on the blocking pool. Screenshots are saved under
/// lumen-trace's names ([`lumen_trace::screenshot_name`]: the loop's step,
/// then the how-manyth screenshot of that step in the whole log), counting
/// on from `shots`, the screenshots the log already holds: a follow-on task
/// (whose steps start at 0 again), resumed or not, never replaces an
/// earlier task's files, and `report.html` finds each one.
fn write_events(
    entry: &RunEntry,
    log: &Recorder,
    mut shots: BTreeMap<u32, usize>,
    rx: &mpsc::Receiver<Write>,
    hub: &broadcast::Sender<Live>,
) {
    let run: Arc<str> = entry.id.as_str().into();
    while let Ok(Write::Event(mut e)) = rx.recv() {
        if let StreamEvent::Screenshot { step, screenshot } = &mut e.event {
            let nth = shots.entry(*step).or_insert(0);
            let name =
                lumen_trace::screenshot_name(*step, *nth, screenshot.image.format.extension());
            // Counted even when the write fails, as `render` counts events.
            *nth += 1;
            if let Err(err) =
                store::write_atomic(&entry.dir.dir().join(name), &screenshot.image.data)
            {
                tracing::warn!(run = %run, "a screenshot could not be saved: {err}");
            }
            screenshot.image.data = Arc::from(Vec::new());
        }
        // The log skips live-only deltas itself; they are only published.
        log(&e);
        if matches!(e.event, StreamEvent::StepCompleted { .. })
            && let Err(err) = entry.save()
        {
            tracing::warn!(run = %run, "the run record could not be saved: {err}");
        }
        let _ = hub.send(Live::Event {
            run: run.clone(),
            event: Arc::new(*e),
        });
    }
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// How an execution ended.
// One value per run, moved once: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Ending {
    /// Cancelled before it got a slot.
    NotStarted,
    /// The session's answer.
    Ran(lumen::Result<RunResult>),
    /// The run's task panicked (the message).
    Panicked(String),
}

impl RunManager {
    pub(super) async fn execute(self: Arc<Self>, entry: Arc<RunEntry>, resume: bool) {
        let control = entry.control();
        let permit = tokio::select! {
            biased;
            _ = control.cancelled() => None,
            p = self.slots.clone().acquire_owned() => p.ok(),
        };
        let ending = match permit {
            None => Ending::NotStarted,
            Some(permit) => {
                self.running.fetch_add(1, Ordering::SeqCst);
                {
                    let mut i = lock(&entry.info);
                    i.status = RunState::Running;
                    i.started_at_ms = Some(now_ms());
                }
                entry.persist().await;
                let mut writer = None;
                let mut resume = resume;
                let mut failovers = 0;
                let driven = loop {
                    let driven =
                        AssertUnwindSafe(self.drive(&entry, &control, resume, &mut writer))
                            .catch_unwind()
                            .await;
                    // A lost remote browser from the pool: the run goes on
                    // in a fresh session, resumed from its last completed
                    // step (a run on its own endpoint has nowhere to go).
                    let fail_over = matches!(&driven, Ok(r) if lost_browser(r))
                        && writer.as_ref().is_some_and(Writer::holds_endings)
                        && failovers < MAX_FAILOVERS
                        && !control.is_cancelled()
                        && !control.is_stopped();
                    if let Some(w) = &writer {
                        w.release(&entry, !fail_over);
                    }
                    if !fail_over {
                        break driven;
                    }
                    failovers += 1;
                    tracing::warn!(run = %entry.id, failovers, "the run's browser was lost; resuming it in another session");
                    if let Some(w) = writer.take() {
                        w.finish().await;
                    }
                    resume = true;
                };
                let ending = match driven {
                    Ok(result) => Ending::Ran(result),
                    Err(payload) => {
                        let message = panic_message(payload.as_ref());
                        tracing::error!(run = %entry.id, "the run's task panicked: {message}");
                        let reason = format!("internal error: the run's task panicked: {message}");
                        if let Some(w) = &writer {
                            let i = lock(&entry.info).clone();
                            w.append(StreamEvent::Done {
                                status: RunStatus::Failure,
                                result: Some(reason.clone()),
                                steps: i.steps_completed,
                                usage: i.usage,
                                // What was spent cannot be attributed any
                                // more: the main loop's, as after a resume.
                                usage_by_source: lumen::UsageBreakdown {
                                    main: i.usage,
                                    ..Default::default()
                                },
                                cost_usd: None,
                                state: None,
                            });
                        }
                        Ending::Panicked(reason)
                    }
                };
                if let Some(w) = writer {
                    w.finish().await;
                }
                self.running.fetch_sub(1, Ordering::SeqCst);
                drop(permit);
                ending
            }
        };
        let result = self.finish(&entry, &control, ending);
        if let Some(gate) = &self.options.test_hooks.ending_gate
            && let Ok(permit) = gate.acquire().await
        {
            permit.forget();
        }
        let dir = entry.dir.clone();
        let saving = entry.clone();
        let saved = off_thread(move || {
            saving.save()?;
            if let Some(result) = result {
                // Redacted with the run's secret values, as the record is.
                let result = saving
                    .redactor()
                    .redacted_json(&result)
                    .map_err(std::io::Error::other)?;
                store::write_json(&dir.result(), &result)?;
            }
            store::tighten(dir.dir())
        })
        .await;
        if let Err(e) = saved {
            tracing::warn!(run = %entry.id, "the run's ending could not be saved: {e}");
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        entry.settled.store(true, Ordering::SeqCst);
        let _ = self.hub.send(Live::Ended {
            run: entry.id.as_str().into(),
        });
        if entry.info().status.is_terminal() {
            write_report(&entry).await;
        }
    }

    /// Records how an execution ended in memory (the caller persists it);
    /// returns the result to save when the run has ended for good.
    fn finish(&self, entry: &RunEntry, control: &RunControl, ending: Ending) -> Option<RunResult> {
        let reason = control.cancel_reason();
        let shutdown = reason.as_deref() == Some(SERVER_SHUTDOWN);
        let leftover = control.take_guidance();
        let mut saved_result = None;
        let mut i = lock(&entry.info);
        i.undelivered_messages.extend(leftover);
        match ending {
            Ending::NotStarted => {
                i.status = if shutdown {
                    RunState::Interrupted
                } else {
                    RunState::Cancelled
                };
                i.cancel_reason = reason;
            }
            Ending::Panicked(message) => {
                i.status = RunState::Failed;
                i.outcome = Some(RunStatus::Failure);
                i.result = Some(message);
            }
            Ending::Ran(Err(e)) => {
                let cancelled = matches!(e, LumenError::Cancelled { .. }) || reason.is_some();
                i.status = match (cancelled, shutdown) {
                    (_, true) => RunState::Interrupted,
                    (true, false) => RunState::Cancelled,
                    (false, false) => RunState::Failed,
                };
                i.cancel_reason = reason;
                i.error = Some(ErrorInfo::from(&e));
            }
            Ending::Ran(Ok(mut result)) => {
                i.status = match result.status {
                    RunStatus::Cancelled if shutdown => RunState::Interrupted,
                    RunStatus::Cancelled => RunState::Cancelled,
                    RunStatus::Success => RunState::Completed,
                    // The outcome says which (`budgetExceeded` for a budget).
                    RunStatus::Failure
                    | RunStatus::MaxSteps
                    | RunStatus::BudgetExceeded
                    | RunStatus::HandoffTimeout => RunState::Failed,
                };
                // Earlier tasks' steps and tokens count too (`tasks.rs`).
                let (steps, mut usage) = tasks::finished_totals(&i);
                usage += result.usage;
                i.steps_completed = steps + result.steps;
                i.usage = usage;
                i.error = result.error.clone();
                if result.status == RunStatus::Cancelled {
                    i.cancel_reason = reason;
                } else {
                    tasks::record_task(&mut i, &result);
                    i.result = result.result.clone();
                    i.outcome = Some(result.status);
                }
                result.history.clear();
                saved_result = Some(result);
            }
        }
        // Terminal runs refuse tasks by their status; an interrupted one
        // takes them again.
        entry.tasks_closed.store(false, Ordering::SeqCst);
        if i.status != RunState::Interrupted {
            i.ended_at_ms = Some(now_ms());
        } else {
            // Undelivered guidance of an interrupted run is delivered
            // when it resumes.
            let undelivered = std::mem::take(&mut i.undelivered_messages);
            i.pending_messages.extend(undelivered);
        }
        saved_result.filter(|_| i.status.is_terminal())
    }

    /// One execution: the log prepared (fresh, or cut back to the
    /// snapshot), the writer started (into `writer`, so the caller can
    /// finish it even after a panic), a browser from the pool, the session
    /// (fresh or from the snapshot), the run.
    async fn drive(
        self: &Arc<Self>,
        entry: &Arc<RunEntry>,
        control: &RunControl,
        resume: bool,
        writer: &mut Option<Writer>,
    ) -> lumen::Result<RunResult> {
        let dir = entry.dir.clone();
        let floor = lock(&entry.info).task_seq;
        let prepared = tokio::task::spawn_blocking(move || prepare(&dir, resume, floor))
            .await
            .map_err(|e| LumenError::config("data dir", e.to_string()))??;
        let Prepared {
            snapshot,
            fresh_task,
            offset,
            shots,
            log,
        } = prepared;
        let pending = std::mem::take(&mut lock(&entry.info).pending_messages);
        for m in pending {
            control.inject_guidance(m);
        }
        let w = writer.insert(Writer::start(
            entry.clone(),
            log,
            (offset, shots),
            self.hub.clone(),
        ));
        let w = &*w;
        let agent = self.run_agent_options(entry)?;
        let (source, tab_options) = match &agent.browser {
            lumen::BrowserSource::Local(l) => (None, l.tab.clone()),
            lumen::BrowserSource::Cdp { url, tab } => (Some(Ok(url.clone())), tab.clone()),
            lumen::BrowserSource::Browserbase(b) => (Some(Err(b.clone())), b.tab.clone()),
            lumen::BrowserSource::Custom(_) => {
                return Err(LumenError::config(
                    "browser",
                    "a custom tab cannot serve a run",
                ));
            }
        };
        // A browser from the pool (lent), or the run's own endpoint.
        let (browser, lent) = tokio::select! {
            biased;
            reason = control.cancelled() => return Err(LumenError::Cancelled { reason }),
            got = async {
                match source {
                    None => self.pool.take().await.map(|l| (l.browser.clone(), Some(l))),
                    Some(Ok(url)) => Ok((Arc::new(CdpTab::connect(&url, tab_options.clone()).await?), None)),
                    Some(Err(bb)) => Ok((Arc::new(CdpTab::browserbase(bb).await?), None)),
                }
            } => got?,
        };
        if let Some(endpoint) = lent.as_ref().and_then(|l| l.endpoint(&self.pool)) {
            tracing::info!(run = %entry.id, endpoint, "the run drives a remote browser");
            // Lost, it fails over: its ending is not final until then.
            w.hold_endings();
        }
        // The run's own browser context: nothing an earlier run (perhaps
        // another client's) stored is visible to it, and nothing it stores
        // outlives it. Its tab takes the run's viewport and folders.
        let tab = match browser.open_isolated_with(tab_options).await {
            Ok(tab) => Arc::new(tab),
            Err(e) => {
                if let Some(lent) = lent {
                    self.pool.give(lent, browser.is_disconnected()).await;
                }
                return Err(e);
            }
        };
        let result = self
            .drive_on(
                entry,
                control,
                tab.clone(),
                (snapshot, fresh_task),
                w,
                agent,
            )
            .await;
        // Disposes the context: its pages, cookies, storage, cache and
        // service workers. (Dropped without this, after a panic, the
        // context goes with its connection: `disposeOnDetach`.)
        let _ = tab.close().await;
        let lost = browser.is_disconnected() || lost_browser(&result);
        // Someone else's browser (the run's own endpoint): only the
        // connection is ours, and it goes with `browser`.
        drop(browser);
        if let Some(lent) = lent {
            self.pool.give(lent, lost).await;
        }
        result
    }

    /// The agent options of a persisted run: its options with the record's
    /// settled values (model, budget, mode) and the secrets kept in memory.
    fn run_agent_options(&self, entry: &RunEntry) -> lumen::Result<lumen::AgentOptions> {
        let info = lock(&entry.info).clone();
        let mut options = info.options.clone();
        options.model = Some(info.model.clone());
        options.max_steps = Some(info.max_steps);
        options.system_prompt = info.system_prompt;
        options.secrets = lock(&entry.secrets).clone();
        if options.secrets.is_none() {
            // The values were lost with a server restart (`missingSecrets`):
            // their scopes go with them, and the run goes on without them.
            options.secret_domains = None;
        }
        self.agent_options(&options).map_err(|e| {
            LumenError::config(
                e.field.clone().unwrap_or_else(|| "options".into()),
                e.message,
            )
        })
    }

    async fn drive_on(
        &self,
        entry: &Arc<RunEntry>,
        control: &RunControl,
        tab: Arc<CdpTab>,
        (snapshot, fresh_task): (Option<SerializedHistory>, bool),
        writer: &Writer,
        agent: lumen::AgentOptions,
    ) -> lumen::Result<RunResult> {
        let recorder = writer.recorder(entry.clone(), self.options.test_hooks.panic_at_step);
        let info = lock(&entry.info).clone();
        let adapter_options = agent.adapter_options();
        let adapter = lumen::models::create_adapter(&agent.model, adapter_options.clone())?;
        let planner = match &agent.planner_model {
            Some(m) => Some(lumen::models::create_adapter(m, adapter_options)?),
            None => None,
        };
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
            let verdict = judge.judge_resolved(&candidate).await;
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
            policy,
            recorders: vec![recorder],
            run_id: Some(entry.id.to_string()),
            ..agent.session
        };
        let tab: Arc<dyn BrowserTab> = tab;
        let mut session = match snapshot {
            Some(s) => Session::resume(tab, adapter, options, s)?,
            None => Session::new(tab, adapter, options)?,
        };
        session.set_control(control.clone());
        session.set_planner(planner);
        session.save_after_each_step(entry.dir.session());
        let mode = match info.mode {
            Mode::Plan => RunMode::Plan,
            Mode::Agent => RunMode::Agent,
            Mode::Exec => RunMode::Exec {
                attempts: info.attempts,
            },
        };
        if fresh_task {
            // The snapshot is the previous task's last step: the server
            // stopped between the boundary's two writes (`save_boundary`).
            session.begin_task();
        }
        let instruction = tasks::current_instruction(&info);
        let mut result = session.run_mode(&instruction, url.as_deref(), mode).await;
        // The follow-on tasks, each in the same session once the one before
        // it succeeded (`tasks.rs`). The boundary is saved first, so a run
        // interrupted in the next task resumes that task with the state.
        while let Ok(done) = &mut result {
            self.task_gate().await;
            match entry.next_task(control, done, writer.next_seq.load(Ordering::SeqCst)) {
                Boundary::End => break,
                Boundary::Next(next) => {
                    session.begin_task();
                    save_boundary(entry, &session).await;
                    result = session.run_mode(&next, None, mode).await;
                }
                Boundary::Stop => {
                    // A shutdown leaves the run resumable at the next task:
                    // the boundary is saved as if it were about to run.
                    session.begin_task();
                    save_boundary(entry, &session).await;
                    tasks::stopped_at_boundary(done);
                    break;
                }
            }
        }
        result
    }
}

impl RunManager {
    /// The test hook of [`crate::TestHooks::task_gate`].
    async fn task_gate(&self) {
        let hooks = &self.options.test_hooks;
        if let Some(gate) = &hooks.task_gate {
            if let Some(reached) = &hooks.task_gate_reached {
                reached.notify_one();
            }
            if let Ok(permit) = gate.acquire().await {
                permit.forget();
            }
        }
    }
}

/// Saves a task boundary: the record (the index on the next task and the
/// `seq` its events start at), then the session snapshot (a fresh history
/// with the task state), each written atomically ([`store::write_atomic`])
/// off the async threads. The record is the commit point: a server that
/// stops after it and before the snapshot leaves the previous task's last
/// snapshot, which [`prepare`] recognises (its last step is not among the
/// new task's events) and the resume starts the task afresh from its state;
/// one that stops before it resumes the previous task as it was.
async fn save_boundary(entry: &Arc<RunEntry>, session: &Session) {
    entry.persist().await;
    let secrets = session.secrets().clone();
    let snapshot = session.serialize(false);
    let path = entry.dir.session();
    let saved = off_thread(move || {
        let mut value = snapshot.to_value().map_err(std::io::Error::other)?;
        secrets.redact_json(&mut value);
        let bytes = serde_json::to_vec(&value).map_err(std::io::Error::other)?;
        store::write_atomic(&path, &bytes)
    })
    .await;
    if let Err(e) = saved {
        tracing::warn!(run = %entry.id, "the session snapshot could not be saved: {e}");
    }
}

/// What [`prepare`] readied for an execution.
struct Prepared {
    /// The snapshot of a resumed run.
    snapshot: Option<SerializedHistory>,
    /// The snapshot is the previous task's last one, not the running
    /// follow-on task's (see [`save_boundary`]): the task starts afresh
    /// from its state.
    fresh_task: bool,
    /// The `seq` to continue from.
    offset: u64,
    /// The screenshots of each loop step already in the log (the writer
    /// counts on from them).
    shots: BTreeMap<u32, usize>,
    /// The log's line writer.
    log: Recorder,
}

/// The blocking part of an execution's start: the snapshot of a resumed
/// run, the log cut back to it (or emptied for a fresh run), the folders,
/// and the log opened for appending.
fn prepare(dir: &store::RunDir, resume: bool, floor: u64) -> lumen::Result<Prepared> {
    let io = |e: std::io::Error| LumenError::config("data dir", e.to_string());
    let snapshot = match resume && dir.session().is_file() {
        true => Some(SerializedHistory::load(&dir.session())?),
        false => None,
    };
    let events = dir.events();
    let (offset, fresh_task, shots) = if resume {
        let steps = snapshot.as_ref().map_or(0, |s| s.step_count);
        let r = store::reconcile(&events, steps, floor).map_err(io)?;
        let kept = store::read_events(&events, None).map_err(io)?;
        // Only a follow-on task (its events start at `floor` > 0) has a
        // boundary whose snapshot can be the task before's.
        (
            r.next,
            floor > 0 && !r.found,
            store::screenshot_counts(&kept.events),
        )
    } else {
        store::write_atomic(&events, b"").map_err(io)?;
        (0, false, BTreeMap::new())
    };
    store::private_dir(&dir.screenshots()).map_err(io)?;
    // The run folder's log, as lumen-trace writes it (the file exists,
    // 0600, so appending keeps its mode).
    let log = lumen_trace::jsonl_recorder(&events, false).map_err(io)?;
    Ok(Prepared {
        snapshot,
        fresh_task,
        offset,
        shots,
        log,
    })
}

/// Draws `report.html` and `run.gif` into an ended run's folder from its
/// event log and screenshots (the layout `lumen-trace` defines, which the
/// CLI's traces follow too), then makes them private. Off the async
/// threads; a failure is logged and changes nothing about the run.
async fn write_report(entry: &RunEntry) {
    let dir = entry.dir.dir().to_path_buf();
    let options = lumen_trace::RenderOptions {
        pricing: Some(lumen::models::registry::cost),
        ..lumen_trace::RenderOptions::default()
    };
    let rendered = off_thread(move || {
        lumen_trace::render(&dir, &options).map_err(std::io::Error::other)?;
        store::tighten(&dir)
    })
    .await;
    if let Err(e) = rendered {
        tracing::warn!(run = %entry.id, "the run report could not be written: {e}");
    }
}

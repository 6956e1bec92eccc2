//! One execution of a run: a slot, a fresh browser context in a pooled
//! browser, the session, and whatever happens, an ending recorded and
//! announced.
//!
//! - **A panic inside the run's task** (the loop, a hook, the recorder) is
//!   caught at the execution's boundary: the run ends `failed` with a
//!   result naming the panic, a final `done` event is logged and sent, its
//!   slot and counters are released, its browser is dropped (never reused in
//!   an unknown state), and every follower gets the end.
//! - **Store work is off the loop.** The recorder the loop calls only
//!   updates the run's progress in memory and hands the event to a writer
//!   task, which saves the screenshot (a file), stores the events in
//!   batches, stores the session snapshot and the record after each step,
//!   and then publishes the events to live followers (so a published event
//!   is always already stored).
//! - **Exactly once for steps, at least once for actions.** A step is
//!   recorded when its snapshot is stored; a resumed execution drops the
//!   events after the snapshot's last step and does that step again, so
//!   an action executed in it may run twice. Such actions are listed in
//!   the record (`possiblyRepeated`) and told to the model.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::FutureExt as _;
use lumen::browser::CdpTab;
use lumen::memory::SerializedHistory;
use lumen::perception::control::RunControl;
use lumen::perception::monitor::now_ms;
use lumen::safety::{PolicyDecision, SessionPolicy};
use lumen::{
    BrowserTab, ErrorInfo, LumenError, RunMode, RunResult, RunStatus, Session, SessionOptions,
    StreamEvent,
};

use super::tasks::{self, Boundary};
use super::writer::{Writer, save_snapshot};
use super::{Live, RunEntry, RunManager, SERVER_SHUTDOWN, lock, off_thread};
use crate::db::queue::ENDED;
use crate::db::{Db, Fenced};
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
    pub(super) async fn execute(
        self: Arc<Self>,
        entry: Arc<RunEntry>,
        resume: bool,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
    ) {
        let control = entry.control();
        let permit = match permit {
            Some(p) => Some(p),
            None => tokio::select! {
                biased;
                _ = control.cancelled() => None,
                p = self.slots.clone().acquire_owned() => p.ok(),
            },
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
                    // A lost browser from the pool: the run goes on in a
                    // fresh session or browser, resumed from its last
                    // completed step (a run on its own endpoint has nowhere
                    // to go).
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
        if let Err(e) = self.save_ending(&entry, result).await {
            tracing::warn!(run = %entry.id, "the run's ending could not be saved: {e}");
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        entry.settled.store(true, Ordering::SeqCst);
        if self.db.is_shared() {
            // Held no more: read from the store from now on.
            lock(&self.runs).remove(&entry.id);
        }
        self.db.notify(ENDED, &entry.id).await;
        let _ = self.hub.send(Live::Ended {
            run: entry.id.as_str().into(),
        });
        let terminal = lock(&entry.info).status.is_terminal();
        if terminal {
            write_report(&entry).await;
        }
    }

    /// Stores how an execution ended: the result (once the run ended for
    /// good), then the record, letting go of the run. On a shared queue, a
    /// run interrupted by this server's shutdown goes back to the queue,
    /// for another worker to resume.
    async fn save_ending(
        &self,
        entry: &RunEntry,
        result: Option<RunResult>,
    ) -> Result<(), crate::db::DbError> {
        let _saving = entry.saving.lock().await;
        if let Some(result) = result {
            // Redacted with the run's secret values, as the record is.
            let result = entry
                .redactor()
                .redacted_json(&result)
                .map_err(|e| crate::db::DbError::Corrupt(e.to_string()))?;
            let text = serde_json::to_string(&result)
                .map_err(|e| crate::db::DbError::Corrupt(e.to_string()))?;
            self.db.save_result(&entry.id, &entry.worker, &text).await?;
        }
        let requeue = {
            let mut i = lock(&entry.info);
            i.worker = None;
            let requeue = self.db.is_shared()
                && i.status == RunState::Interrupted
                && i.cancel_reason.as_deref() == Some(SERVER_SHUTDOWN);
            if requeue {
                i.status = RunState::Queued;
                i.cancel_reason = None;
            }
            requeue
        };
        let mut info = lock(&entry.info).clone();
        info.redact(&entry.redactor());
        let resume = requeue || info.status == RunState::Interrupted;
        if self.db.end_run(&info, Some(&entry.worker), resume).await? == Fenced::Lost {
            tracing::warn!(run = %entry.id, "another worker holds the run: its ending here was not saved");
        }
        if requeue {
            self.db.notify(crate::db::queue::QUEUE, &entry.id).await;
        }
        let dir = entry.dir.dir().to_path_buf();
        off_thread(move || store::tighten(&dir))
            .await
            .map_err(|e| crate::db::DbError::Corrupt(e.to_string()))
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
        let floor = lock(&entry.info).task_seq;
        let Prepared {
            snapshot,
            fresh_task,
            offset,
            shots,
            repeated,
        } = prepare(&self.db, entry, resume, floor).await?;
        if !repeated.is_empty() {
            tracing::warn!(run = %entry.id, "resuming a step whose actions may have run: {}", repeated.join("; "));
            control.inject_guidance(format!(
                "The run was resumed in the middle of a step: these actions of that step may \
                 already have taken effect, so check the page before doing them again: {}",
                repeated.join("; ")
            ));
            lock(&entry.info).possibly_repeated.extend(repeated);
        }
        let pending = std::mem::take(&mut lock(&entry.info).pending_messages);
        for m in pending {
            control.inject_guidance(m);
        }
        let dir = entry.dir.screenshots();
        off_thread(move || store::private_dir(&dir))
            .await
            .map_err(|e| LumenError::config("data dir", e.to_string()))?;
        let w = writer.insert(Writer::start(
            entry.clone(),
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
        if let Some(lent) = &lent {
            if let Some(endpoint) = lent.endpoint(&self.pool) {
                tracing::info!(run = %entry.id, endpoint, "the run drives a remote browser");
            }
            // A pool's browser, lost, fails over to another (or, local, to
            // a fresh one): the run's ending is not final until then.
            w.hold_endings();
        }
        // The run's own browser context: nothing an earlier run (perhaps
        // another client's) stored is visible to it, and nothing it stores
        // outlives it. Its tab takes the run's viewport and folders.
        let tab = match browser.open_isolated_with(tab_options).await {
            Ok(tab) => Arc::new(tab),
            Err(e) => {
                // Lost, as far as the pool can tell: it asks the browser
                // and forgets one that does not answer (a wedged Chromium
                // keeps its connection, and would be lent again).
                if let Some(lent) = lent {
                    self.pool.give(lent, true).await;
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
        let refused = |e: crate::error::ApiError| {
            LumenError::config(
                e.field.clone().unwrap_or_else(|| "options".into()),
                e.message,
            )
        };
        // The operator's limit now (a queued run may come from a worker
        // that allowed more, or from before the limit was lowered).
        super::validate::check_step_budget(
            info.max_steps,
            info.attempts,
            self.options.max_steps_limit,
        )
        .map_err(refused)?;
        self.agent_options(&options).map_err(refused)
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
        let adapter = lumen::models::create_adapter_chain(
            &agent.model,
            &agent.fallback_models,
            adapter_options.clone(),
        )?;
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
        session.snapshot_after_each_step(writer.snapshots());
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
    match session.serialize(false).to_value() {
        Ok(mut value) => {
            secrets.redact_json(&mut value);
            save_snapshot(entry, &value).await;
        }
        Err(e) => tracing::warn!(run = %entry.id, "the session snapshot could not be taken: {e}"),
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
    /// The actions executed in the step the resumed run does again.
    repeated: Vec<String>,
}

/// An execution's start: the snapshot of a resumed run and the log cut back
/// to it ([`store::reconcile`]), or the log emptied for a fresh run.
async fn prepare(db: &Db, entry: &RunEntry, resume: bool, floor: u64) -> lumen::Result<Prepared> {
    let io = |e: crate::db::DbError| LumenError::config("run store", e.to_string());
    if !resume {
        db.clear_events(&entry.id).await.map_err(io)?;
        return Ok(Prepared {
            snapshot: None,
            fresh_task: false,
            offset: 0,
            shots: BTreeMap::new(),
            repeated: Vec::new(),
        });
    }
    let snapshot = match db.session(&entry.id).await.map_err(io)? {
        Some(text) => Some(SerializedHistory::from_json(&text)?),
        None => None,
    };
    let steps = snapshot.as_ref().map_or(0, |s| s.step_count);
    let log = db.events(&entry.id, None).await.map_err(io)?;
    let r = store::reconcile(&log.events, steps, floor);
    let (kept, cut): (Vec<_>, Vec<_>) = log.events.into_iter().partition(|e| e.seq < r.next);
    let repeated = cut
        .iter()
        .filter_map(|e| match &e.event {
            StreamEvent::ActionResult { call, .. } => {
                Some(serde_json::to_string(&call.action).unwrap_or_else(|_| call.id.clone()))
            }
            _ => None,
        })
        .collect();
    db.cut_events(&entry.id, r.next).await.map_err(io)?;
    Ok(Prepared {
        snapshot,
        // Only a follow-on task (its events start at `floor` > 0) has a
        // boundary whose snapshot can be the task before's.
        fresh_task: floor > 0 && !r.found,
        offset: r.next,
        shots: store::screenshot_counts(&kept),
        repeated,
    })
}

/// Draws `report.html` and `run.gif` into an ended run's folder from its
/// event log and screenshots (the layout `lumen-trace` defines, which the
/// CLI's traces follow too), then makes them private. Off the async
/// threads; a failure is logged and changes nothing about the run.
async fn write_report(entry: &RunEntry) {
    let dir = entry.dir.dir().to_path_buf();
    // The trace's event log, from the store.
    let log = match entry.db.events(&entry.id, None).await {
        Ok(log) => log,
        Err(e) => {
            tracing::warn!(run = %entry.id, "the run report could not be written: {e}");
            return;
        }
    };
    let options = lumen_trace::RenderOptions {
        pricing: Some(lumen::models::registry::cost),
        ..lumen_trace::RenderOptions::default()
    };
    let rendered = off_thread(move || {
        let mut lines = Vec::new();
        for e in &log.events {
            serde_json::to_writer(&mut lines, e).map_err(std::io::Error::other)?;
            lines.push(b'\n');
        }
        store::write_atomic(&dir.join(lumen_trace::EVENTS), &lines)?;
        lumen_trace::render(&dir, &options).map_err(std::io::Error::other)?;
        store::tighten(&dir)
    })
    .await;
    if let Err(e) = rendered {
        tracing::warn!(run = %entry.id, "the run report could not be written: {e}");
    }
}

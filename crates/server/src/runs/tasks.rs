//! Follow-on tasks (`POST /v1/runs/{id}/tasks`, IPC `add_task`): a run's
//! task stack, as browser-use has it. A task added to a run that has not
//! ended is queued in its record ([`RunInfo::tasks`]); when the running
//! task ends with success and the run was not cancelled, the execution
//! runs the next one in the same session and browser, with a fresh history
//! and step budget and the task state carried over
//! ([`lumen::Session::begin_task`]), in the run's mode. Any other ending
//! ends the run, and the tasks not run stay listed.
//!
//! The queue is read under the run's lock at the decision point, and the
//! decision to end closes it under the same lock, so a task is either run
//! or refused with 409 `run_ended`, never silently dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lumen::perception::control::RunControl;
use lumen::{RunResult, RunStatus, TokenUsage};
use serde_json::{Value, json};

use super::validate::{control_body, opt_string};
use super::{RunEntry, RunManager, SERVER_SHUTDOWN, lock};
use crate::error::ApiError;
use crate::store::{RunInfo, RunState, TaskResult};

/// The instruction of the task `info` is on.
pub(super) fn current_instruction(info: &RunInfo) -> String {
    match info.task_index {
        0 => info.instruction.clone(),
        n => info
            .tasks
            .get(n as usize - 1)
            .cloned()
            .unwrap_or_else(|| info.instruction.clone()),
    }
}

/// The steps and tokens of the tasks that finished before the current one.
pub(super) fn finished_totals(info: &RunInfo) -> (u32, TokenUsage) {
    let mut usage = TokenUsage::default();
    let mut steps = 0;
    for t in &info.task_results {
        steps += t.steps;
        usage += t.usage;
    }
    (steps, usage)
}

/// Records how the current task ended (on runs given follow-on tasks).
pub(super) fn record_task(info: &mut RunInfo, result: &RunResult) {
    if info.tasks.is_empty() || info.task_results.len() > info.task_index as usize {
        return;
    }
    let instruction = current_instruction(info);
    info.task_results.push(TaskResult {
        instruction,
        status: result.status,
        result: result.result.clone(),
        steps: result.steps,
        usage: result.usage,
    });
}

/// What the execution does after a task ended ([`RunEntry::next_task`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Boundary {
    /// Run this task next (the index has moved on to it).
    Next(String),
    /// A cancel or a shutdown landed between a task that succeeded and the
    /// next one: the task's outcome is recorded and the run stops there,
    /// `cancelled` (the queue closed, the tasks not run listed) or, for a
    /// shutdown, `interrupted` with the index on the next task, so a
    /// resume runs it and the rest.
    Stop,
    /// No task follows (none queued, or the task did not succeed): the run
    /// ends with this task's result, and the queue is closed.
    End,
}

impl RunEntry {
    /// The decision point after a task ended with `result`, under the
    /// run's lock (see [`Boundary`]). When the run goes on to another task
    /// (now, or after a resume) its result is recorded, the index moved on
    /// and the event `seq` it starts at noted.
    pub(super) fn next_task(
        &self,
        control: &RunControl,
        result: &RunResult,
        next_seq: u64,
    ) -> Boundary {
        let mut i = lock(&self.info);
        let next = i.tasks.get(i.task_index as usize).cloned();
        let succeeded = result.status == RunStatus::Success && result.error.is_none();
        let Some(next) = next.filter(|_| succeeded) else {
            self.tasks_closed.store(true, Ordering::SeqCst);
            return Boundary::End;
        };
        record_task(&mut i, result);
        match control.cancel_reason() {
            None => {
                i.task_index += 1;
                i.task_seq = next_seq;
                Boundary::Next(next)
            }
            // An interrupted run takes tasks again: the queue stays open.
            Some(r) if r == SERVER_SHUTDOWN => {
                i.task_index += 1;
                i.task_seq = next_seq;
                Boundary::Stop
            }
            Some(_) => {
                self.tasks_closed.store(true, Ordering::SeqCst);
                Boundary::Stop
            }
        }
    }
}

/// The result of an execution stopped at a task boundary
/// ([`Boundary::Stop`]): the task that succeeded is already in
/// `taskResults`, so what is left is a cancelled run that did nothing more
/// (its status then follows the cancel reason, as for any cancel).
pub(super) fn stopped_at_boundary(result: &mut RunResult) {
    result.status = RunStatus::Cancelled;
    result.result = None;
    result.steps = 0;
    result.usage = TokenUsage::default();
    result.usage_by_source = Default::default();
    result.cost_usd = None;
    result.error = None;
    result.history.clear();
}

impl RunManager {
    /// `POST /v1/runs/{id}/tasks` with `{"instruction"}` ([`add_task`](Self::add_task)
    /// on the server holding the run): queues a
    /// follow-on task on a queued, running, paused or interrupted run (an
    /// interrupted run runs it after resuming). Answers `{id, task,
    /// queued}`: the task's index (1 is the first follow-on) and how many
    /// tasks wait before it runs, itself included. A run that has ended, is
    /// ending, or is being cancelled answers 409 `run_ended`, and one that
    /// already has [`max_tasks_per_run`](crate::ServeOptions::max_tasks_per_run)
    /// tasks 409 `task_limit`; the task is not taken.
    pub(super) async fn add_task_here(
        &self,
        entry: &Arc<RunEntry>,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        let id = entry.id();
        let obj = control_body(body, &["instruction"])?;
        let instruction = opt_string(&obj, "instruction")?
            .ok_or_else(|| ApiError::missing_field("instruction"))?;
        if instruction.trim().is_empty() {
            return Err(ApiError::invalid_field(
                "instruction",
                "`instruction` must not be empty",
            ));
        }
        let (task, queued) = {
            let mut info = lock(&entry.info);
            let ending = entry.tasks_closed.load(Ordering::SeqCst)
                || entry
                    .control()
                    .cancel_reason()
                    .is_some_and(|r| r != SERVER_SHUTDOWN);
            let open = info.status == RunState::Interrupted || info.status.is_active();
            if !open || ending {
                let state = if open { "ending" } else { info.status.as_str() };
                return Err(ApiError::run_ended(format!(
                    "run {id} has ended ({state}); the task was not added"
                )));
            }
            let limit = self.options.max_tasks_per_run;
            if info.tasks.len() >= limit {
                return Err(ApiError::task_limit(id, limit));
            }
            info.tasks.push(instruction);
            let task = info.tasks.len();
            (task, task - info.task_index as usize)
        };
        entry.persist().await;
        Ok(json!({"id": id, "task": task, "queued": queued}))
    }
}

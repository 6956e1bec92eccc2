//! Steering a run (cancel, pause, resume, message, hand back, add a task)
//! on whichever server is asked.
//!
//! The server holding the run answers, with the same checks and the same
//! answers everywhere:
//!
//! - a run this server holds is steered here;
//! - with a shared queue, a run another worker holds is steered there: a
//!   control row is posted, its holder is notified, steers the run and
//!   answers, and the answer comes back as if given here
//!   ([`Db::post_control`](crate::db::Db::post_control));
//! - a run nobody holds (waiting in the queue, interrupted, ended) is
//!   held by this server only while it is steered: a waiting run's record
//!   changes and it stays in the queue (a pause keeps it `paused` there,
//!   unclaimed, until resumed), an interrupted run resumed goes back to
//!   the queue, and claims (under the global limit) decide where runs
//!   execute;
//! - a run whose worker stopped renewing its lease is `503
//!   worker_unavailable` until a claim has taken it over.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use std::sync::atomic::Ordering;

use lumen::perception::control::RunControl;
use lumen::perception::monitor::now_ms;

use super::validate::{control_body, opt_string};
use super::{CANCEL_REASONS, RunEntry, RunManager, USER_CANCEL, lock, store_failed};
use crate::db::queue::{CONTROL, Claimed};
use crate::error::ApiError;
use crate::store::{RunInfo, RunState};

/// How long a server waits for the holder of a run to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A steering operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Cancel,
    Pause,
    Resume,
    Message,
    HandoffDone,
    AddTask,
}

impl Op {
    const ALL: [Op; 6] = [
        Op::Cancel,
        Op::Pause,
        Op::Resume,
        Op::Message,
        Op::HandoffDone,
        Op::AddTask,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Op::Cancel => "cancel",
            Op::Pause => "pause",
            Op::Resume => "resume",
            Op::Message => "message",
            Op::HandoffDone => "handoff_done",
            Op::AddTask => "add_task",
        }
    }

    fn parse(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

fn info_value(info: RunInfo) -> Result<Value, ApiError> {
    serde_json::to_value(info).map_err(|e| ApiError::internal(e.to_string()))
}

fn info_of(v: Value) -> Result<RunInfo, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::internal(format!("an unreadable answer: {e}")))
}

/// The codes an answer from another worker may carry (`ApiError::code` is
/// a static string).
const CODES: &[&str] = &[
    "invalid_json",
    "invalid_field",
    "missing_field",
    "unknown_field",
    "not_found",
    "invalid_state",
    "run_ended",
    "task_limit",
    "queue_full",
    "policy_denied",
    "worker_unavailable",
];

/// An answer as stored in a control row.
fn encode(answer: &Result<Value, ApiError>) -> String {
    match answer {
        Ok(v) => json!({ "ok": v }),
        Err(e) => json!({ "error": {
            "status": e.status.as_u16(),
            "code": e.code,
            "message": e.message,
            "field": e.field,
        }}),
    }
    .to_string()
}

fn decode(text: &str) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ApiError::internal(format!("an unreadable answer: {e}")))?;
    if let Some(ok) = v.get("ok") {
        return Ok(ok.clone());
    }
    let e = &v["error"];
    let code = e["code"].as_str().unwrap_or("internal");
    Err(ApiError {
        status: e["status"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .and_then(|s| StatusCode::from_u16(s).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        code: CODES
            .iter()
            .find(|c| **c == code)
            .copied()
            .unwrap_or("internal"),
        message: e["message"].as_str().unwrap_or("").to_string(),
        field: e["field"].as_str().map(str::to_string),
    })
}

impl RunManager {
    /// `POST /v1/runs/{id}/cancel` with an optional `{"reason"}` (one of
    /// [`CANCEL_REASONS`](super::CANCEL_REASONS), default
    /// `user_explicit_cancel`): cancels a queued, running or paused run (it
    /// ends `cancelled` at its next await point) or an interrupted one (at
    /// once). Of two racing requests one wins; cancelling a run already
    /// being cancelled, or one that has ended, is 409 `invalid_state`.
    pub async fn cancel(self: &Arc<Self>, id: &str, body: &[u8]) -> Result<RunInfo, ApiError> {
        info_of(self.steer(id, Op::Cancel, body).await?)
    }

    /// `POST /v1/runs/{id}/pause`: pauses a queued or running run at its
    /// next step boundary. Already paused, being cancelled, or not active
    /// is 409 `invalid_state`.
    pub async fn pause(self: &Arc<Self>, id: &str) -> Result<RunInfo, ApiError> {
        info_of(self.steer(id, Op::Pause, b"").await?)
    }

    /// `POST /v1/runs/{id}/resume`: continues a paused run, or restarts an
    /// interrupted one from its last completed step. Of two racing resumes
    /// of an interrupted run exactly one starts it, the other gets 409
    /// `invalid_state`, as does resuming a run that is not paused or has
    /// ended.
    pub async fn resume(self: &Arc<Self>, id: &str) -> Result<RunInfo, ApiError> {
        info_of(self.steer(id, Op::Resume, b"").await?)
    }

    /// `POST /v1/runs/{id}/message` with `{"text"}`: guidance shown at the
    /// next step. An interrupted run keeps it for when it resumes; an ended
    /// run answers 409 (`run_ended`) and the message is not taken.
    pub async fn message(self: &Arc<Self>, id: &str, body: &[u8]) -> Result<Value, ApiError> {
        self.steer(id, Op::Message, body).await
    }

    /// `POST /v1/runs/{id}/handoff/done` with `{"note"?, "handoff"?}`: the
    /// person is done with the hand-over the run waits on (only hand-over
    /// `handoff`, when given); the run goes on with the note. 409 when
    /// nothing waits.
    pub async fn handoff_done(
        self: &Arc<Self>,
        id: &str,
        body: &[u8],
    ) -> Result<RunInfo, ApiError> {
        info_of(self.steer(id, Op::HandoffDone, body).await?)
    }

    /// `POST /v1/runs/{id}/tasks`: see [`add_task_here`](Self::add_task_here).
    pub async fn add_task(self: &Arc<Self>, id: &str, body: &[u8]) -> Result<Value, ApiError> {
        self.steer(id, Op::AddTask, body).await
    }

    /// Steers run `id` where it is held (see the module docs).
    async fn steer(self: &Arc<Self>, id: &str, op: Op, body: &[u8]) -> Result<Value, ApiError> {
        let missing = || ApiError::not_found(format!("no run {id:?}"));
        if !crate::store::valid_run_id(id) {
            return Err(missing());
        }
        if !self.db.is_shared() {
            let entry = self.local(id).ok_or_else(missing)?;
            return self.steer_here(&entry, op, body).await;
        }
        for _ in 0..3 {
            // No claim of this server lands between the look-up and the
            // adoption below (see `RunManager::claims`).
            let claims = self.claims.lock().await;
            if let Some(entry) = self.local(id) {
                drop(claims);
                return self.steer_here(&entry, op, body).await;
            }
            let row = self.stored(id).await?;
            if let Some(holder) = row.holder().filter(|h| *h != &*self.worker) {
                drop(claims);
                let holder = holder.to_string();
                return self.ask(&holder, id, op, body).await;
            }
            if row.info.status.is_active() && row.worker.is_some() {
                // Its worker stopped renewing: only a claim (under the
                // global limit) takes it over, within a poll or two.
                return Err(ApiError::worker_unavailable(format!(
                    "the worker executing run {id} stopped; another worker resumes it \
                     shortly: retry"
                )));
            }
            let lease = self.lease_until();
            let Some(claimed) = self
                .db
                .adopt(id, &self.worker, lease)
                .await
                .map_err(store_failed)?
            else {
                // Taken meanwhile: ask again who holds it.
                continue;
            };
            // Held here only while it is steered: a waiting run stays in the
            // queue (claimed under the global limit), an interrupted one
            // resumed goes back to it.
            let resume_next = claimed.resume;
            let entry = Arc::new(self.new_entry(claimed.info));
            lock(&self.runs).insert(id.to_string(), entry.clone());
            drop(claims);
            let status = lock(&entry.info).status;
            let answer = match status {
                RunState::Queued | RunState::Paused => self.steer_waiting(&entry, op, body).await,
                RunState::Interrupted if op == Op::Resume => self.requeue(&entry),
                _ => self.steer_here(&entry, op, body).await,
            };
            lock(&self.runs).remove(id);
            let mut info = lock(&entry.info).clone();
            info.worker = None;
            // Resumed from its snapshot when it next executes: requeued
            // after a stop, or an interrupted run (resumed or not).
            let resume_next = resume_next || status == RunState::Interrupted;
            match self
                .db
                .end_run(&info, Some(&self.worker), resume_next)
                .await
            {
                Ok(_) if info.status == RunState::Queued => {
                    self.db.notify(crate::db::queue::QUEUE, id).await;
                    self.wake.notify_one();
                }
                Ok(_) => {}
                Err(e) => return Err(store_failed(e)),
            }
            return answer;
        }
        Err(ApiError::invalid_state(format!(
            "run {id} keeps moving between workers; retry"
        )))
    }

    /// Steers a run waiting in the shared queue (`queued`, or `paused`
    /// there), which executes nowhere yet: its record is changed and it
    /// stays in the queue.
    async fn steer_waiting(
        self: &Arc<Self>,
        entry: &Arc<RunEntry>,
        op: Op,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        let id = entry.id();
        let answer = {
            let mut info = lock(&entry.info);
            match op {
                Op::Cancel => {
                    let reason = cancel_reason(body)?;
                    info.status = RunState::Cancelled;
                    info.cancel_reason = Some(reason);
                    info.ended_at_ms = Some(now_ms());
                    let pending = std::mem::take(&mut info.pending_messages);
                    info.undelivered_messages.extend(pending);
                    None
                }
                Op::Pause if info.status == RunState::Paused => {
                    return Err(ApiError::invalid_state(format!(
                        "run {id} is already paused"
                    )));
                }
                Op::Pause => {
                    info.status = RunState::Paused;
                    None
                }
                Op::Resume if info.status == RunState::Queued => {
                    return Err(ApiError::invalid_state(format!(
                        "run {id} is queued, not paused: there is nothing to resume"
                    )));
                }
                Op::Resume => {
                    info.status = RunState::Queued;
                    None
                }
                Op::Message => {
                    let text = message_text(body, info.pending_messages.len())?;
                    info.pending_messages.push(text);
                    Some(json!({"id": id, "delivery": "next_step"}))
                }
                Op::HandoffDone => {
                    return Err(ApiError::invalid_state(format!(
                        "run {id} is not waiting for a person"
                    )));
                }
                Op::AddTask => None,
            }
        };
        match (op, answer) {
            (Op::AddTask, _) => self.add_task_here(entry, body).await,
            (_, Some(answer)) => Ok(answer),
            (_, None) => info_value(entry.info()),
        }
    }

    /// `resume` of an interrupted run on a shared queue: back to the queue,
    /// for any worker to resume from its last completed step.
    fn requeue(&self, entry: &Arc<RunEntry>) -> Result<Value, ApiError> {
        {
            let mut info = lock(&entry.info);
            info.status = RunState::Queued;
            info.cancel_reason = None;
            info.ended_at_ms = None;
            info.error = None;
            info.outcome = None;
            info.result = None;
        }
        info_value(entry.info())
    }

    /// Takes a run this server claimed into memory; an active one starts
    /// executing here (with `permit`, a slot already taken).
    pub(super) fn adopted(
        self: &Arc<Self>,
        claimed: Claimed,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Arc<RunEntry> {
        let Claimed { mut info, resume } = claimed;
        // Secret values never leave the process that was given them.
        if !info.secret_names.is_empty() {
            info.missing_secrets = info.secret_names.clone();
        }
        let paused = info.status == RunState::Paused;
        let start = info.status.is_active();
        if start {
            info.worker = Some(self.worker.to_string());
            if resume {
                info.resumes += 1;
            }
            info.status = RunState::Queued;
        }
        let entry = Arc::new(self.new_entry(info));
        if paused {
            entry.control().pause();
        }
        lock(&self.runs).insert(entry.id.clone(), entry.clone());
        if start {
            self.active
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.spawn(entry.clone(), resume, permit);
        }
        entry
    }

    /// Steers a run this server holds.
    pub(super) async fn steer_here(
        self: &Arc<Self>,
        entry: &Arc<RunEntry>,
        op: Op,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        match op {
            Op::Cancel => info_value(self.cancel_here(entry, body).await?),
            Op::Pause => info_value(self.pause_here(entry)?),
            Op::Resume => info_value(self.resume_here(entry).await?),
            Op::Message => self.message_here(entry, body).await,
            Op::HandoffDone => info_value(self.handoff_done_here(entry, body)?),
            Op::AddTask => self.add_task_here(entry, body).await,
        }
    }

    /// Asks `holder` to steer run `id` and waits for its answer.
    async fn ask(&self, holder: &str, id: &str, op: Op, body: &[u8]) -> Result<Value, ApiError> {
        let body = String::from_utf8_lossy(body);
        let row = self
            .db
            .post_control(id, op.as_str(), &body)
            .await
            .map_err(store_failed)?;
        self.db.notify(CONTROL, holder).await;
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(answer) = self.db.take_answer(row).await.map_err(store_failed)? {
                return decode(&answer);
            }
            if tokio::time::Instant::now() >= deadline {
                if self.db.withdraw(row).await.map_err(store_failed)? {
                    return Err(ApiError::worker_unavailable(format!(
                        "worker {holder}, which holds run {id}, did not answer; retry (if it \
                         stopped, another worker takes the run over when its lease runs out)"
                    )));
                }
                continue;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Answers the control rows waiting for this server.
    pub(super) async fn answer_controls(self: &Arc<Self>) {
        let rows = match self.db.controls_for(&self.worker).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!("control requests could not be read: {e}");
                return;
            }
        };
        for c in rows {
            let answer = match (Op::parse(&c.op), self.local(&c.run)) {
                (Some(op), Some(entry)) => self.steer_here(&entry, op, c.body.as_bytes()).await,
                (None, _) => Err(ApiError::internal(format!("unknown control {:?}", c.op))),
                (_, None) => Err(ApiError::invalid_state(format!(
                    "run {} is moving to another worker; retry",
                    c.run
                ))),
            };
            if let Err(e) = self.db.answer(c.id, &encode(&answer)).await {
                tracing::warn!(run = %c.run, "a control request could not be answered: {e}");
            }
        }
    }
}

/// The operations on a run this server holds.
impl RunManager {
    /// `POST /v1/runs/{id}/cancel` with an optional `{"reason"}` (one of
    /// [`CANCEL_REASONS`], default `user_explicit_cancel`): cancels
    /// a queued, running or paused run (it ends `cancelled` at its next
    /// await point) or an interrupted one (at once). The status is checked
    /// and changed under the run's lock, so of two racing requests one
    /// wins; cancelling a run already being cancelled, or one that has
    /// ended, is 409 `invalid_state`.
    async fn cancel_here(&self, entry: &Arc<RunEntry>, body: &[u8]) -> Result<RunInfo, ApiError> {
        let id = entry.id();
        let reason = cancel_reason(body)?;
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
    fn pause_here(&self, entry: &Arc<RunEntry>) -> Result<RunInfo, ApiError> {
        let id = entry.id();
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
    async fn resume_here(self: &Arc<Self>, entry: &Arc<RunEntry>) -> Result<RunInfo, ApiError> {
        let id = entry.id();
        // A place in the queue first (a wait: no lock is held over it),
        // given back unless the run restarts.
        let interrupted = lock(&entry.info).status == RunState::Interrupted;
        if interrupted {
            self.reserve(false).await?;
        }
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
                RunState::Interrupted if interrupted => {
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
        if interrupted && !restart {
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
        if restart {
            lock(&entry.info).worker = Some(self.worker.to_string());
            entry.persist().await;
            self.spawn(entry.clone(), true, None);
        }
        Ok(entry.info())
    }

    /// `POST /v1/runs/{id}/message` with `{"text"}`: guidance shown at the
    /// next step. An interrupted run keeps it for when it resumes; an ended
    /// run answers 409 (`run_ended`) and the message is not taken.
    async fn message_here(&self, entry: &Arc<RunEntry>, body: &[u8]) -> Result<Value, ApiError> {
        let id = entry.id();
        {
            let mut info = lock(&entry.info);
            match info.status {
                s if s.is_active() => {
                    let control = entry.control();
                    let text = message_text(body, control.queued_guidance())?;
                    control.inject_guidance(text);
                    return Ok(json!({"id": id, "delivery": "next_step"}));
                }
                RunState::Interrupted => {
                    let text = message_text(body, info.pending_messages.len())?;
                    info.pending_messages.push(text);
                }
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
    fn handoff_done_here(&self, entry: &Arc<RunEntry>, body: &[u8]) -> Result<RunInfo, ApiError> {
        let id = entry.id();
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
}

/// The reason of a cancel body (`{"reason"?}`: one of [`CANCEL_REASONS`],
/// default `user_explicit_cancel`).
fn cancel_reason(body: &[u8]) -> Result<String, ApiError> {
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
    Ok(reason)
}

/// The longest guidance message, in characters: it goes into the model's
/// next prompt, and every character is paid for.
const MAX_MESSAGE_CHARS: usize = 8_000;
/// Guidance messages that may wait for a run's next step.
const MAX_WAITING_MESSAGES: usize = 16;

/// The `text` of a message request, checked: present, not blank, not over
/// [`MAX_MESSAGE_CHARS`], and room for it beside the `waiting` ones.
fn message_text(body: &[u8], waiting: usize) -> Result<String, ApiError> {
    let obj = control_body(body, &["text"])?;
    let text = opt_string(&obj, "text")?.ok_or_else(|| ApiError::missing_field("text"))?;
    if text.trim().is_empty() {
        return Err(ApiError::invalid_field("text", "`text` must not be empty"));
    }
    if text.chars().count() > MAX_MESSAGE_CHARS {
        return Err(ApiError::invalid_field(
            "text",
            format!("`text` must be at most {MAX_MESSAGE_CHARS} characters"),
        ));
    }
    if waiting >= MAX_WAITING_MESSAGES {
        return Err(ApiError::invalid_state(format!(
            "{waiting} messages already wait for the run's next step; send more once it has taken them"
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_survive_the_round_trip() {
        let ok = Ok(json!({"id": "run_1"}));
        assert_eq!(decode(&encode(&ok)).unwrap(), json!({"id": "run_1"}));
        let err = decode(&encode(&Err(ApiError::invalid_field("text", "empty")))).unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
        assert_eq!(err.code, "invalid_field");
        assert_eq!(err.field.as_deref(), Some("text"));
        let err = decode(&encode(&Err(ApiError::run_ended("over")))).unwrap_err();
        assert_eq!((err.status, err.code), (StatusCode::CONFLICT, "run_ended"));
        for op in Op::ALL {
            assert_eq!(Op::parse(op.as_str()), Some(op));
        }
    }
}

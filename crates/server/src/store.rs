//! The data directory: one folder per run with its record, event log,
//! session snapshot, result and screenshots. Every whole-file write is
//! atomic (a temporary file renamed into place); the event log is appended
//! line by line and reconciled with the snapshot when a run resumes.
//!
//! ```text
//! <data-dir>/runs/<id>/run.json        the run record (status, progress…)
//! <data-dir>/runs/<id>/events.jsonl    every event, screenshots stripped
//! <data-dir>/runs/<id>/session.json    the snapshot after the last step
//! <data-dir>/runs/<id>/result.json     the result, once the run ended
//! <data-dir>/runs/<id>/screenshots/    step-001.jpg, … (lumen-trace's names)
//! <data-dir>/runs/<id>/report.html     the report, once the run ended
//! <data-dir>/runs/<id>/run.gif         the screenshots with the actions drawn
//! ```
//!
//! The folder follows the run-folder layout of `lumen-trace`, so a server
//! run's folder reads like a `lumen run` trace.
//!
//! Paths are only ever built from a validated run id ([`valid_run_id`]) and
//! numbers, so nothing outside the data directory can be named.

use std::path::{Path, PathBuf};

use lumen::safety::{PolicyConfig, Secrets};
use lumen::{RecordedEvent, RunOptions, StreamEvent, TokenUsage};
use serde::{Deserialize, Serialize};

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for a free slot.
    Queued,
    /// Executing.
    Running,
    /// Paused at a step boundary (`/resume` continues).
    Paused,
    /// Handed to a person, waiting for them to finish (`/live` opens the
    /// live view, `/handoff/done` hands back).
    WaitingForHuman,
    /// Ended with success.
    Completed,
    /// Ended without success (failure, step budget, fatal error).
    Failed,
    /// Cancelled by a client.
    Cancelled,
    /// Stopped by a crash or a server shutdown; `/resume` continues from
    /// the last completed step.
    Interrupted,
}

impl RunState {
    /// The name clients see (`running`, `completed`…).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Paused => "paused",
            RunState::WaitingForHuman => "waiting_for_human",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::Interrupted => "interrupted",
        }
    }

    /// Whether the run has ended for good.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Cancelled
        )
    }

    /// Whether an execution is queued or under way.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            RunState::Queued | RunState::Running | RunState::Paused | RunState::WaitingForHuman
        )
    }
}

/// What a run should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The perception loop.
    Agent,
    /// Plan only: the result is the plan.
    Plan,
    /// The loop with retries (`attempts`).
    Exec,
}

/// The persisted record of a run (`run.json`), also what `GET
/// /v1/runs/{id}` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInfo {
    /// The run id.
    pub id: String,
    /// Where it stands.
    pub status: RunState,
    /// The task.
    pub instruction: String,
    /// The page opened first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_url: Option<String>,
    /// The model.
    pub model: String,
    /// The step budget.
    pub max_steps: u32,
    /// The mode.
    pub mode: Mode,
    /// Attempts in `exec` mode.
    pub attempts: u32,
    /// The safety policy.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Extra system instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Creation time, ms since the epoch.
    pub created_at_ms: u64,
    /// When the latest execution started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    /// When the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// Steps completed so far.
    pub steps_completed: u32,
    /// The page the browser was last seen on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_url: Option<String>,
    /// Tokens used so far.
    #[serde(default)]
    pub usage: TokenUsage,
    /// Why the run was cancelled or interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<String>,
    /// The answer or failure reason, once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The loop's final status (`success`, `failure`, `maxSteps`,
    /// `cancelled`), once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<lumen::RunStatus>,
    /// The fatal error, if one ended the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<lumen::ErrorInfo>,
    /// Messages accepted for an interrupted run, delivered when it resumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_messages: Vec<String>,
    /// Messages that were accepted but never reached a step because the run
    /// ended first (kept so nothing is lost silently).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undelivered_messages: Vec<String>,
    /// How many times the run was resumed after an interruption.
    #[serde(default)]
    pub resumes: u32,
    /// Every option of the run as the request gave it ([`RunOptions`], the
    /// run body without `instruction`), secret values left out.
    #[serde(default, skip_serializing_if = "is_default")]
    pub options: RunOptions,
    /// The names of the run's secrets. Their values are kept in memory
    /// only, never written: a run resumed after a server restart has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_names: Vec<String>,
    /// The secrets whose values this run no longer has: the server
    /// restarted since they were given (values are never written). A
    /// resumed run goes on without them: its secret scopes are dropped with
    /// them and a `<secret:NAME>` the model types fails (`ok: false`), so
    /// nothing is typed anywhere. To use them, give the values again in a
    /// new run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_secrets: Vec<String>,
    /// Follow-on tasks (`POST /v1/runs/{id}/tasks`), in the order given,
    /// each run after the one before it succeeded, in the same browser.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// The task running (or to run on resume): 0 the `instruction`, n
    /// `tasks[n-1]`.
    #[serde(default)]
    pub task_index: u32,
    /// The outcome of every finished task of a run given follow-on tasks,
    /// in order (`taskResults[n]` is task n's); the run's own `result` is
    /// the last one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_results: Vec<TaskResult>,
    /// The `seq` the running follow-on task's events start at: a resumed
    /// run keeps every event before it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub task_seq: u64,
    /// The hand-over a person is asked for, while the run is
    /// `waiting_for_human` (never stored: it lives as long as the wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffInfo>,
    /// The server executing the run (its worker id), while one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Actions that may have run twice: each was executed in a step that
    /// had not completed when its execution stopped (a worker died, a
    /// browser was lost), and the resumed run did that step again. Actions
    /// are executed at least once; recorded steps exactly once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub possibly_repeated: Vec<String>,
}

/// What a run waiting for a person asks of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffInfo {
    /// The hand-over's number in the run (from 1).
    pub id: u64,
    /// What the person is asked to do.
    pub reason: String,
    /// Why the run handed over (`model`, `url`, `payment`, `rejections`).
    pub trigger: lumen::HandoffTrigger,
}

impl RunInfo {
    /// A new run, `queued`, with the defaults of everything not given:
    /// what `POST /v1/runs` stores, and what a client that enqueues into
    /// the database directly (the eval's `--queue`) stores.
    pub fn queued(
        id: String,
        instruction: String,
        start_url: Option<String>,
        model: String,
        max_steps: u32,
    ) -> RunInfo {
        RunInfo {
            id,
            status: RunState::Queued,
            instruction,
            start_url,
            model,
            max_steps,
            mode: Mode::Agent,
            attempts: 1,
            policy: PolicyConfig::default(),
            system_prompt: None,
            created_at_ms: lumen::perception::monitor::now_ms(),
            started_at_ms: None,
            ended_at_ms: None,
            steps_completed: 0,
            last_url: None,
            usage: TokenUsage::default(),
            cancel_reason: None,
            result: None,
            outcome: None,
            error: None,
            pending_messages: Vec::new(),
            undelivered_messages: Vec::new(),
            resumes: 0,
            options: RunOptions::default(),
            secret_names: Vec::new(),
            missing_secrets: Vec::new(),
            tasks: Vec::new(),
            task_index: 0,
            task_results: Vec::new(),
            task_seq: 0,
            handoff: None,
            worker: None,
            possibly_repeated: Vec::new(),
        }
    }

    /// Replaces every value of `secrets` in the record's text (the
    /// instruction, system prompt, URLs, results and answers, the task
    /// list, messages, the error) with its placeholder, as the event log
    /// is redacted ([`Secrets::redact`]): what `run.json` and the API show.
    pub fn redact(&mut self, secrets: &Secrets) {
        if secrets.is_empty() {
            return;
        }
        let clean = |t: &mut String| {
            if let std::borrow::Cow::Owned(r) = secrets.redact(t) {
                *t = r;
            }
        };
        clean(&mut self.instruction);
        [
            &mut self.system_prompt,
            &mut self.start_url,
            &mut self.last_url,
            &mut self.result,
            &mut self.options.system_prompt,
            &mut self.options.start_url,
            &mut self.options.verify_url,
        ]
        .into_iter()
        .flatten()
        .for_each(clean);
        self.tasks
            .iter_mut()
            .chain(&mut self.pending_messages)
            .chain(&mut self.undelivered_messages)
            .for_each(clean);
        for t in &mut self.task_results {
            clean(&mut t.instruction);
            if let Some(r) = &mut t.result {
                clean(r);
            }
        }
        if let Some(e) = &mut self.error {
            clean(&mut e.message);
        }
    }
}

/// How one task of a run ended (see [`RunInfo::task_results`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    /// The task.
    pub instruction: String,
    /// The loop's status (`success`, `failure`, `maxSteps`…).
    pub status: lumen::RunStatus,
    /// The answer or failure reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Steps the task took.
    pub steps: u32,
    /// Tokens the task used.
    #[serde(default)]
    pub usage: TokenUsage,
}

fn is_default(o: &RunOptions) -> bool {
    *o == RunOptions::default()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether `id` is a well-formed run id (letters, digits, `-`, `_`; at most
/// 64 characters). Anything else is answered 404 before a path is built.
pub fn valid_run_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Paths of one run's files.
#[derive(Debug, Clone)]
pub struct RunDir {
    dir: PathBuf,
}

impl RunDir {
    /// The folder of run `id` under `data_dir` (the id must be valid).
    pub fn new(data_dir: &Path, id: &str) -> Self {
        Self {
            dir: data_dir.join("runs").join(id),
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// `run.json`.
    pub fn info(&self) -> PathBuf {
        self.dir.join("run.json")
    }
    /// `events.jsonl`.
    pub fn events(&self) -> PathBuf {
        self.dir.join(lumen_trace::EVENTS)
    }
    /// `session.json`.
    pub fn session(&self) -> PathBuf {
        self.dir.join(lumen_trace::SESSION)
    }
    /// `result.json`.
    pub fn result(&self) -> PathBuf {
        self.dir.join(lumen_trace::RESULT)
    }
    /// `screenshots/`.
    pub fn screenshots(&self) -> PathBuf {
        self.dir.join(lumen_trace::SCREENSHOTS)
    }
    /// The screenshot of run-wide step `n` named by the event log
    /// `events` ([`screenshot_of_step`]), with its MIME type; for a run
    /// saved before the folder followed lumen-trace's layout, its
    /// `screenshots/N.ext`.
    pub fn screenshot(&self, events: &[RecordedEvent], n: u64) -> Option<(PathBuf, &'static str)> {
        let mime = |p: &Path| match p.extension().and_then(|e| e.to_str()) {
            Some("png") => "image/png",
            _ => "image/jpeg",
        };
        if let Some(name) = screenshot_of_step(events, n) {
            let path = self.dir.join(name);
            return path.is_file().then(|| {
                let m = mime(&path);
                (path, m)
            });
        }
        ["jpg", "png"]
            .into_iter()
            .map(|ext| self.screenshots().join(format!("{n}.{ext}")))
            .find(|p| p.is_file())
            .map(|p| {
                let m = mime(&p);
                (p, m)
            })
    }
}

/// The workspace's one maker of owner-only folders and files (0700, 0600):
/// run folders hold the instructions, pages and screenshots of every client.
pub use lumen_trace::{own_dir, private_dir, private_file};

/// Tightens everything under `dir` to 0700 folders and 0600 files: what
/// other writers put in a run folder (the facade's session snapshot,
/// lumen-trace's screenshots, report and GIF) is created with the
/// process's umask. The folder itself is 0700 from the start, so nothing
/// in it was reachable by another user before this runs either.
pub fn tighten(dir: &Path) -> std::io::Result<()> {
    private_dir(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            tighten(&entry.path())?;
        } else if kind.is_file() {
            private_file(&entry.path())?;
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically (the workspace's one writer,
/// [`lumen_trace::write_atomic`]) in a private folder (created 0700 if
/// missing), then makes the file 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("a file path without a folder"))?;
    private_dir(dir)?;
    lumen_trace::write_atomic(path, bytes)?;
    private_file(path)
}

/// Writes `value` as pretty JSON, atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_atomic(path, &bytes)
}

/// Reads a JSON file.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> std::io::Result<T> {
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(std::io::Error::other)
}

/// What [`read_events`] found in an event log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventLog {
    /// The readable events with `seq` after the requested one, in order.
    pub events: Vec<RecordedEvent>,
    /// Lines that are not an event (corrupt JSON, invalid UTF-8), skipped;
    /// a last line without its newline (a write torn by a crash) included.
    /// The events after them are still read.
    pub skipped: usize,
}

/// The non-blank lines of an event log: where each ends in `bytes` (after
/// its newline), and its event when the line is a complete one.
fn log_lines(bytes: &[u8]) -> impl Iterator<Item = (usize, Option<RecordedEvent>)> {
    let mut end = 0;
    bytes
        .split_inclusive(|b| *b == b'\n')
        .filter_map(move |line| {
            end += line.len();
            let complete = line.ends_with(b"\n");
            let text = line.strip_suffix(b"\n").unwrap_or(line);
            if text.iter().all(u8::is_ascii_whitespace) {
                return None;
            }
            let event = complete
                .then(|| serde_json::from_slice::<RecordedEvent>(text).ok())
                .flatten();
            Some((end, event))
        })
}

/// Parses the bytes of an event log: the events with `seq` greater than
/// `after` (all when `None`), in order, and the number of unreadable lines
/// skipped. Never fails: a corrupt line costs only itself.
pub fn parse_events(bytes: &[u8], after: Option<u64>) -> EventLog {
    let mut log = EventLog::default();
    for (_, event) in log_lines(bytes) {
        match event {
            Some(e) if after.is_none_or(|a| e.seq > a) => log.events.push(e),
            Some(_) => {}
            None => log.skipped += 1,
        }
    }
    log
}

/// The events of a log with `seq` greater than `after` (all when `None`),
/// in order ([`parse_events`]). Unreadable lines are skipped, counted in
/// the result and logged as a warning; they never hide the events after
/// them. Blocking: call it off the async threads.
pub fn read_events(path: &Path, after: Option<u64>) -> std::io::Result<EventLog> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(EventLog::default()),
        Err(e) => return Err(e),
    };
    let log = parse_events(&bytes, after);
    if log.skipped > 0 {
        tracing::warn!(
            "{}: skipped {} unreadable line(s); the events around them were read",
            path.display(),
            log.skipped
        );
    }
    Ok(log)
}

/// What [`reconcile`] made of an event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconciled {
    /// The `seq` the resumed execution continues from (one past the last
    /// event kept).
    pub next: u64,
    /// Whether the snapshot's last step was found among the events at or
    /// after `floor` (always true for a snapshot of no step). False means
    /// the snapshot is not the running task's: its last step is one of an
    /// earlier task's (the server stopped between a task boundary's record
    /// and its snapshot).
    pub found: bool,
}

/// Where a resumed execution continues a log whose snapshot holds `steps`
/// completed steps: one past the `step_completed` of the snapshot's last
/// step. The events from there on (a step in flight when the run stopped,
/// the interrupted execution's end) are dropped, because the resumed run
/// does that step again. Events before `floor` (the start of the running
/// follow-on task, whose snapshot counts only its own steps) are always
/// kept.
pub fn reconcile(events: &[RecordedEvent], steps: u32, floor: u64) -> Reconciled {
    let (mut next, mut found) = (floor, steps == 0);
    for e in events {
        if e.seq < floor {
            next = next.max(e.seq + 1);
            continue;
        }
        if steps > 0
            && matches!(e.event, StreamEvent::StepCompleted { step, .. } if step + 1 == steps)
        {
            next = e.seq + 1;
            found = true;
        }
    }
    Reconciled { next, found }
}

/// Run-wide step numbers. The loop numbers steps from 0 in every task of a
/// run (and every `exec` attempt, and a delegated sub-task), so its `step`
/// does not name one step of a run given follow-on tasks. These number the
/// steps of a whole event log in order: a `step_started` whose step does
/// not follow the one before (a new task or attempt: step 0 again) or that
/// comes after a `run_started` continues from the last run-wide number, so
/// every step started gets its own number, and a run of one task keeps the
/// loop's numbers. The trace (`GET /v1/runs/{id}/trace`) and
/// `GET /v1/runs/{id}/steps/{n}/screenshot` use them.
#[derive(Debug, Clone, Default)]
pub struct StepNumbers {
    /// The last step started: the loop's number and the run-wide one.
    last: Option<(u32, u64)>,
    /// Run-wide number minus the loop's, in the current task.
    base: u64,
    /// A `run_started` came since the last `step_started`.
    fresh: bool,
    /// The run-wide number of each loop step started in the current task.
    started: std::collections::HashMap<u32, u64>,
}

impl StepNumbers {
    /// The run-wide step number of `event` (events in log order), or `None`
    /// when it belongs to no step.
    pub fn number(&mut self, event: &StreamEvent) -> Option<u64> {
        if matches!(event, StreamEvent::RunStarted { .. }) {
            self.fresh = true;
            self.started.clear();
            self.base = self.last.map_or(0, |(_, run)| run + 1);
            return None;
        }
        let step = event.step()?;
        if !matches!(event, StreamEvent::StepStarted { .. }) {
            return Some(
                self.started
                    .get(&step)
                    .copied()
                    .unwrap_or(self.base + u64::from(step)),
            );
        }
        let run = match self.last {
            None => u64::from(step),
            Some((last, run)) if !self.fresh && step > last => run + u64::from(step - last),
            // A new task or attempt, or a resumed one: the next number.
            Some((_, run)) => run + 1,
        };
        self.fresh = false;
        self.base = run.saturating_sub(u64::from(step));
        self.started.insert(step, run);
        self.last = Some((step, run));
        Some(run)
    }
}

/// How many screenshots of each loop step `events` hold: where a writer
/// continuing the log goes on counting, so its files are named as
/// [`lumen_trace::render`] looks for them and never replace an earlier
/// task's ([`lumen_trace::screenshot_name`]: `step`, then the how-manyth of
/// that step in the log).
pub fn screenshot_counts(events: &[RecordedEvent]) -> std::collections::BTreeMap<u32, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for e in events {
        if let StreamEvent::Screenshot { step, .. } = &e.event {
            *counts.entry(*step).or_insert(0) += 1;
        }
    }
    counts
}

/// The file (relative to the run folder) of the last screenshot of
/// run-wide step `n` ([`StepNumbers`]) in `events`, if the log has one.
pub fn screenshot_of_step(events: &[RecordedEvent], n: u64) -> Option<String> {
    let mut numbers = StepNumbers::default();
    let mut counts: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    let mut found = None;
    for e in events {
        let number = numbers.number(&e.event);
        if let StreamEvent::Screenshot { step, screenshot } = &e.event {
            let nth = counts.entry(*step).or_insert(0);
            if number == Some(n) {
                found = Some(lumen_trace::screenshot_name(
                    *step,
                    *nth,
                    screenshot.image.format.extension(),
                ));
            }
            *nth += 1;
        }
    }
    found
}

/// Every run record under `data_dir`, oldest first. Unreadable records are
/// logged and skipped (never deleted).
pub fn load_runs(data_dir: &Path) -> Vec<RunInfo> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("runs")) else {
        return Vec::new();
    };
    let mut runs: Vec<RunInfo> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(valid_run_id))
        .filter_map(|e| {
            let path = e.path().join("run.json");
            match read_json::<RunInfo>(&path) {
                Ok(info) => Some(info),
                Err(err) => {
                    tracing::warn!("skipping {}: {err}", path.display());
                    None
                }
            }
        })
        .collect();
    runs.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_cannot_name_other_folders() {
        assert!(valid_run_id("run_18c2f0a1b2-0003"));
        for bad in [
            "",
            "..",
            "../etc",
            "a/b",
            "a\\b",
            "a.b",
            "%2e%2e",
            &"x".repeat(65),
        ] {
            assert!(!valid_run_id(bad), "{bad:?} accepted");
        }
    }

    fn event(seq: u64, event: StreamEvent) -> String {
        serde_json::to_string(&RecordedEvent {
            seq,
            timestamp_ms: 1,
            event,
        })
        .unwrap()
    }

    fn completed(step: u32) -> StreamEvent {
        StreamEvent::StepCompleted {
            step,
            usage: TokenUsage::default(),
            duration_ms: 1,
            model_ms: 1,
        }
    }

    fn started(step: u32) -> StreamEvent {
        StreamEvent::StepStarted {
            step,
            url: "about:blank".into(),
        }
    }

    fn recorded(seq: u64, event: StreamEvent) -> RecordedEvent {
        RecordedEvent {
            seq,
            timestamp_ms: 1,
            event,
        }
    }

    #[test]
    fn reconcile_drops_the_step_in_flight() {
        let log = [
            recorded(0, started(0)),
            recorded(1, completed(0)),
            recorded(2, started(1)),
            recorded(3, completed(1)),
            recorded(4, started(2)),
        ];
        assert_eq!(
            reconcile(&log, 2, 0),
            Reconciled {
                next: 4,
                found: true
            }
        );
        // A log whose last step finished after the snapshot was taken
        // keeps only what the snapshot holds.
        assert_eq!(reconcile(&log, 1, 0).next, 2);
        assert_eq!(reconcile(&log, 0, 0).next, 0);
    }

    #[test]
    fn reconcile_keeps_the_finished_tasks_before_the_floor() {
        // Task 0 took steps 0 and 1; the follow-on task (from seq 4) is on
        // its own step 0, then 1.
        let log = [
            recorded(0, started(0)),
            recorded(1, completed(0)),
            recorded(2, started(1)),
            recorded(3, completed(1)),
            recorded(4, started(0)),
            recorded(5, completed(0)),
            recorded(6, started(1)),
        ];
        // The follow-on task's snapshot holds its step 0.
        assert_eq!(reconcile(&log, 1, 4).next, 6);
        // Interrupted before its first step: task 0's events stay whole.
        assert_eq!(reconcile(&log, 0, 4).next, 4);
        // A snapshot of the task before (its step 1 is before the floor).
        assert!(!reconcile(&log, 2, 4).found);
    }

    #[test]
    fn a_corrupt_line_in_the_middle_costs_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut bytes = Vec::new();
        for line in [event(0, started(0)), event(1, completed(0))] {
            bytes.extend(format!("{line}\n").as_bytes());
        }
        // A torn JSON line, then one that is not even UTF-8.
        bytes.extend(b"{\"seq\": 2, \"garb\n\xff\xfe\x00 not utf-8\n");
        for line in [event(4, started(1)), event(5, completed(1))] {
            bytes.extend(format!("{line}\n").as_bytes());
        }
        std::fs::write(&path, &bytes).unwrap();
        let log = read_events(&path, None).unwrap();
        let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            vec![0, 1, 4, 5],
            "the events after the corrupt lines survive"
        );
        assert_eq!(log.skipped, 2);
        assert_eq!(read_events(&path, Some(1)).unwrap().events.len(), 2);
    }

    #[cfg(unix)]
    #[test]
    fn store_files_and_folders_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let run = RunDir::new(dir.path(), "run_1");
        write_json(&run.info(), &serde_json::json!({"x": 1})).unwrap();
        assert_eq!(mode(run.dir()), 0o700);
        assert_eq!(mode(&dir.path().join("runs")), 0o700);
        assert_eq!(mode(&run.info()), 0o600);
        // What other writers leave with the umask is tightened.
        std::fs::create_dir_all(run.screenshots()).unwrap();
        let shot = run.screenshots().join("step-001.jpg");
        std::fs::write(&shot, b"x").unwrap();
        std::fs::set_permissions(&shot, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(run.screenshots(), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        tighten(run.dir()).unwrap();
        assert_eq!(mode(&shot), 0o600);
        assert_eq!(mode(&run.screenshots()), 0o700);
    }

    #[test]
    fn atomic_writes_replace_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/run.json");
        write_json(&path, &serde_json::json!({"x": 1})).unwrap();
        write_json(&path, &serde_json::json!({"x": 2})).unwrap();
        let v: serde_json::Value = read_json(&path).unwrap();
        assert_eq!(v["x"], 2);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn events() -> impl Strategy<Value = Vec<String>> {
            proptest::collection::vec((0u32..50, any::<bool>()), 0..12).prop_map(|steps| {
                steps
                    .into_iter()
                    .enumerate()
                    .map(|(i, (step, done))| {
                        let e = if done { completed(step) } else { started(step) };
                        event(i as u64, e)
                    })
                    .collect()
            })
        }

        /// A line that is not an event: any bytes but a newline.
        fn garbage() -> impl Strategy<Value = Vec<u8>> {
            proptest::collection::vec(
                any::<u8>().prop_filter("no newline", |b| *b != b'\n'),
                1..40,
            )
            .prop_filter("not blank", |l| !l.iter().all(u8::is_ascii_whitespace))
        }

        proptest! {
            #[test]
            fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..400), after in proptest::option::of(0u64..20)) {
                let log = parse_events(&bytes, after);
                prop_assert!(log.events.iter().all(|e| after.is_none_or(|a| e.seq > a)));
            }

            #[test]
            fn valid_lines_survive_corrupt_neighbours(
                lines in events(),
                noise in proptest::collection::vec(proptest::option::of(garbage()), 0..13),
            ) {
                let mut bytes = Vec::new();
                let mut corrupt = 0;
                for (i, line) in lines.iter().enumerate() {
                    if let Some(Some(g)) = noise.get(i) {
                        // Garbage that happens to be an event is not noise.
                        if serde_json::from_slice::<RecordedEvent>(g).is_err() {
                            bytes.extend(g);
                            bytes.push(b'\n');
                            corrupt += 1;
                        }
                    }
                    bytes.extend(line.as_bytes());
                    bytes.push(b'\n');
                }
                let log = parse_events(&bytes, None);
                let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
                prop_assert_eq!(seqs, (0..lines.len() as u64).collect::<Vec<_>>());
                prop_assert_eq!(log.skipped, corrupt);
            }
        }
    }
}

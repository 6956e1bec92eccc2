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

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use lumen::safety::PolicyConfig;
use lumen::{RecordedEvent, StreamEvent, TokenUsage};
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
            RunState::Queued | RunState::Running | RunState::Paused
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
    /// The last screenshot of `step`, if saved, with its MIME type (files
    /// are named by [`lumen_trace::screenshot_name`]).
    pub fn screenshot(&self, step: u32) -> Option<(PathBuf, &'static str)> {
        [("jpg", "image/jpeg"), ("png", "image/png")]
            .into_iter()
            .find_map(|(ext, mime)| {
                (0..)
                    .map(|nth| self.dir.join(lumen_trace::screenshot_name(step, nth, ext)))
                    .take_while(|p| p.is_file())
                    .last()
                    // A run saved before the folder followed lumen-trace's
                    // layout named its screenshots `screenshots/N.ext`.
                    .or_else(|| Some(self.screenshots().join(format!("{step}.{ext}"))))
                    .filter(|p| p.is_file())
                    .map(|p| (p, mime))
            })
    }
}

/// Writes `bytes` to `path` atomically (the workspace's one writer,
/// [`lumen_trace::write_atomic`]), creating its folder first.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("a file path without a folder"))?;
    std::fs::create_dir_all(dir)?;
    lumen_trace::write_atomic(path, bytes)
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

/// The events of a log with `seq` greater than `after` (all when `None`),
/// in order. A torn last line (a crash mid-write) is ignored.
pub fn read_events(path: &Path, after: Option<u64>) -> std::io::Result<Vec<RecordedEvent>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        let Ok(event) = serde_json::from_str::<RecordedEvent>(&line) else {
            break;
        };
        if after.is_none_or(|a| event.seq > a) {
            out.push(event);
        }
    }
    Ok(out)
}

/// Makes the event log agree with a snapshot holding `steps` completed
/// steps before a resumed execution appends to it: events after the
/// `step_completed` of the last snapshotted step (a step in flight when the
/// run stopped, the interrupted run's end) are dropped, because the resumed
/// run does that step again. Returns the number of events kept, which is
/// the `seq` the resumed execution continues from.
pub fn reconcile_events(path: &Path, steps: u32) -> std::io::Result<u64> {
    let events = read_events(path, None)?;
    let keep = if steps == 0 {
        0
    } else {
        events
            .iter()
            .rposition(
                |e| matches!(e.event, StreamEvent::StepCompleted { step, .. } if step + 1 == steps),
            )
            .map_or(0, |i| i + 1)
    };
    let mut text = String::new();
    for e in &events[..keep] {
        text.push_str(&serde_json::to_string(e).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    write_atomic(path, text.as_bytes())?;
    Ok(keep as u64)
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

    #[test]
    fn reconcile_drops_the_step_in_flight_and_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let lines = [
            event(0, started(0)),
            event(1, completed(0)),
            event(2, started(1)),
            event(3, completed(1)),
            event(4, started(2)),
        ];
        std::fs::write(&path, format!("{}\n{{\"seq\": 5, \"ty", lines.join("\n"))).unwrap();
        assert_eq!(read_events(&path, Some(2)).unwrap().len(), 2);
        assert_eq!(reconcile_events(&path, 2).unwrap(), 4);
        let kept = read_events(&path, None).unwrap();
        assert_eq!(kept.last().unwrap().event, completed(1));
        // A log whose last step finished after the snapshot was taken keeps
        // only what the snapshot holds.
        assert_eq!(reconcile_events(&path, 1).unwrap(), 2);
        assert_eq!(reconcile_events(&path, 0).unwrap(), 0);
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
}

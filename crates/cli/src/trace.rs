//! The trace folder every run writes:
//!
//! - `events.jsonl`: the recorded events, one per line, images left out;
//! - `screenshots/step-NNN.jpg`: every step's screenshot;
//! - `session.json`: the serialized session (resumable; secrets scrubbed);
//! - `result.json`: how the run ended;
//! - `report.html`: a self-contained report (opens offline);
//! - `run.gif`: the screenshots with the actions drawn on them.
//!
//! Secret values are scrubbed from every text artefact before it is
//! closed; screenshots are pictures of the page and carry no typed secret
//! in text form.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use lumen::perception::monitor::{Recorder, jsonl_recorder};
use lumen::safety::Secrets;
use lumen::{RecordedEvent, RunResult, StreamEvent};

use crate::exit::CliError;
use crate::timeline::Timeline;
use crate::{gif, report};

/// File names inside the trace folder.
pub(crate) const EVENTS: &str = "events.jsonl";
pub(crate) const REPORT: &str = "report.html";
pub(crate) const GIF: &str = "run.gif";
pub(crate) const SESSION: &str = "session.json";
pub(crate) const RESULT: &str = "result.json";
pub(crate) const SCREENSHOTS: &str = "screenshots";

#[derive(Default)]
struct Collected {
    events: Vec<RecordedEvent>,
    /// (step, file name relative to the trace folder).
    files: Vec<(u32, String)>,
    write_error: Option<String>,
}

/// Writes one run's trace folder.
pub(crate) struct Trace {
    dir: PathBuf,
    collected: Arc<Mutex<Collected>>,
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace").field("dir", &self.dir).finish()
    }
}

impl Trace {
    /// Creates `dir` (which must not hold a trace already).
    pub(crate) fn create(dir: &Path) -> Result<Self, CliError> {
        let fail = |e: std::io::Error| {
            CliError::config(format!(
                "cannot create the trace folder {}: {e}; pass a writable --trace-dir",
                dir.display()
            ))
        };
        std::fs::create_dir_all(dir.join(SCREENSHOTS)).map_err(fail)?;
        if dir.join(EVENTS).exists() {
            return Err(CliError::config(format!(
                "{} already holds a trace; pass another --trace-dir",
                dir.display()
            )));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            collected: Arc::default(),
        })
    }

    /// The folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The recorders to add to the session: the JSON-lines log (images
    /// stripped) and the collector that saves screenshots as files.
    pub(crate) fn recorders(&self) -> Result<Vec<Recorder>, CliError> {
        let log = jsonl_recorder(&self.dir.join(EVENTS), false).map_err(|e| {
            CliError::config(format!(
                "cannot write {}: {e}; pass a writable --trace-dir",
                self.dir.join(EVENTS).display()
            ))
        })?;
        let collected = self.collected.clone();
        let dir = self.dir.clone();
        let collect: Recorder = Arc::new(move |e: &RecordedEvent| {
            let mut c = collected.lock().unwrap_or_else(PoisonError::into_inner);
            if let StreamEvent::Screenshot { step, screenshot } = &e.event {
                let n = c.files.iter().filter(|(s, _)| s == step).count();
                let suffix = if n == 0 {
                    String::new()
                } else {
                    format!("-{}", n + 1)
                };
                let name = format!(
                    "{SCREENSHOTS}/step-{:03}{suffix}.{}",
                    step + 1,
                    screenshot.image.format.extension()
                );
                match std::fs::write(dir.join(&name), &*screenshot.image.data) {
                    Ok(()) => c.files.push((*step, name)),
                    Err(err) => {
                        c.write_error.get_or_insert_with(|| err.to_string());
                    }
                }
            }
            c.events.push(e.clone());
        });
        Ok(vec![log, collect])
    }

    /// Whether any event was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.collected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .is_empty()
    }

    /// Writes the report, the GIF and the result, and scrubs `secrets` from
    /// the event log. Returns the report's path.
    pub(crate) fn finish(
        &self,
        result: &RunResult,
        secrets: &Secrets,
        gif: bool,
    ) -> Result<PathBuf, CliError> {
        let io = |what: &str, e: &dyn std::fmt::Display| {
            CliError::failure(format!(
                "could not write {what} in {}: {e}",
                self.dir.display()
            ))
        };
        let (events, files, write_error) = {
            let c = self
                .collected
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            (c.events.clone(), c.files.clone(), c.write_error.clone())
        };
        if let Some(e) = write_error {
            return Err(io("a screenshot", &e));
        }
        scrub_lines(&self.dir.join(EVENTS), secrets).map_err(|e| io(EVENTS, &e))?;
        let mut summary = result.clone();
        summary.history.clear();
        let summary = secrets
            .redacted_json(&summary)
            .map_err(|e| io(RESULT, &e))?;
        let text = serde_json::to_string_pretty(&summary).map_err(|e| io(RESULT, &e))?;
        std::fs::write(self.dir.join(RESULT), text).map_err(|e| io(RESULT, &e))?;
        let timeline = Timeline::build(&events, &files);
        let html = report::render(&timeline, secrets);
        std::fs::write(self.dir.join(REPORT), html).map_err(|e| io(REPORT, &e))?;
        if gif && let Some(bytes) = gif::render(&timeline) {
            std::fs::write(self.dir.join(GIF), bytes).map_err(|e| io(GIF, &e))?;
        }
        Ok(self.dir.join(REPORT))
    }
}

/// Rewrites a JSON-lines file with every secret value replaced by its
/// placeholder (the model may have echoed page text that held one).
fn scrub_lines(path: &Path, secrets: &Secrets) -> std::io::Result<()> {
    if secrets.is_empty() || !path.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(path)?;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(mut v) => {
                secrets.redact_json(&mut v);
                out.push_str(&serde_json::to_string(&v).map_err(std::io::Error::other)?);
            }
            Err(_) => out.push_str(&secrets.redact(line)),
        }
        out.push('\n');
    }
    let tmp = path.with_extension("jsonl.tmp");
    std::fs::write(&tmp, out)?;
    std::fs::rename(tmp, path)
}

/// `./lumen-traces/<UTC timestamp>-<slug of the task>`.
pub(crate) fn default_dir(instruction: &str) -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from("lumen-traces").join(format!("{}-{}", timestamp(secs), slug(instruction)))
}

/// `20261122T151500Z` for Unix seconds (UTC; civil date from days, after
/// Howard Hinnant's algorithm).
fn timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Lower-case words of the task joined by `-`, at most 40 characters.
fn slug(text: &str) -> String {
    let mut s = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if s.len() + word.len() + 1 > 40 {
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&word.to_ascii_lowercase());
    }
    if s.is_empty() { "run".to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(0), "19700101T000000Z");
        assert_eq!(timestamp(951_782_400), "20000229T000000Z");
        assert_eq!(timestamp(1_795_000_000), "20261118T110640Z");
    }

    #[test]
    fn slugs_are_short_and_safe() {
        assert_eq!(
            slug("Fill in the form, then submit!"),
            "fill-in-the-form-then-submit"
        );
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("日本"), "run");
        assert!(slug(&"word ".repeat(40)).len() <= 40);
    }
}

//! Writing and drawing a run folder (its layout is in [`crate::layout`]).
//!
//! [`Trace`] writes such a folder while a run goes (the `lumen` binary's
//! `run` and `demo`, and the server's runs). [`render`] writes
//! `report.html` and `run.gif` for a folder written by anyone who follows
//! the layout (the eval does): it needs only `events.jsonl` and the
//! screenshots, named by [`screenshot_name`].
//!
//! Secret values are scrubbed from every text artefact before it is
//! closed; screenshots are pictures of the page and carry no typed secret
//! in text form.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use lumen_core::{RecordedEvent, Recorder, RunResult, StreamEvent, TokenUsage};
use lumen_safety::Secrets;

use crate::atomic::write_private;
use crate::layout::{EVENTS, GIF, REPORT, RESULT, SCREENSHOTS, screenshot_name};
use crate::recorder::{ScreenshotFiles, jsonl_recorder};
use crate::timeline::Timeline;
use crate::{gif, report};

/// The estimated dollar cost of `usage` on `model` (`provider/id`), `None`
/// when the model has no published price. The report shows it per step and
/// in total; `lumen_models::registry::cost` is the one price table.
pub type Pricing = fn(model: &str, usage: &TokenUsage) -> Option<f64>;

/// Why a trace could not be written or rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceError {
    /// The folder cannot be used (not writable, or it holds a trace
    /// already): nothing was recorded.
    Setup(String),
    /// Writing or reading an artefact failed.
    Io(String),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Setup(m) | TraceError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for TraceError {}

/// How [`render`] draws a folder.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// Values replaced by their placeholders in every text of the report.
    pub secrets: Secrets,
    /// Write `run.gif` as well as `report.html`.
    pub gif: bool,
    /// How the report prices tokens (`None`: no cost is shown).
    pub pricing: Option<Pricing>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            secrets: Secrets::default(),
            gif: true,
            pricing: None,
        }
    }
}

/// What [`render`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The report's path.
    pub report: PathBuf,
    /// The GIF's path; `None` when it was not asked for or no screenshot
    /// could be drawn.
    pub gif: Option<PathBuf>,
    /// Steps in the report.
    pub steps: usize,
}

/// Writes `report.html` (and `run.gif`) into `dir` from its `events.jsonl`
/// and the screenshot files [`screenshot_name`] names. Lines of the log
/// that do not parse (an event from a newer version, or the half-written
/// last line of a killed run) are skipped; a screenshot whose file is
/// missing is left out of the report. Fails only when the log cannot be
/// read or an artefact cannot be written.
pub fn render(dir: &Path, options: &RenderOptions) -> Result<Rendered, TraceError> {
    let path = dir.join(EVENTS);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| TraceError::Io(format!("cannot read {}: {e}", path.display())))?;
    let mut events = Vec::new();
    let mut files = Vec::new();
    let mut seen: Vec<(u32, usize)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(mut e) = serde_json::from_str::<RecordedEvent>(line) else {
            continue;
        };
        if let StreamEvent::Screenshot { step, screenshot } = &mut e.event {
            let nth = match seen.iter_mut().find(|(s, _)| s == step) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    seen.push((*step, 0));
                    0
                }
            };
            let name = screenshot_name(*step, nth, screenshot.image.format.extension());
            match std::fs::read(dir.join(&name)) {
                Ok(bytes) => {
                    screenshot.image.data = Arc::from(bytes);
                    files.push((*step, name));
                }
                Err(_) => continue,
            }
        }
        events.push(e);
    }
    write_artefacts(dir, &events, &files, options)
}

/// Renders the timeline of `events` into `dir`.
fn write_artefacts(
    dir: &Path,
    events: &[RecordedEvent],
    files: &[(u32, String)],
    options: &RenderOptions,
) -> Result<Rendered, TraceError> {
    let io = |what: &str, e: &dyn fmt::Display| {
        TraceError::Io(format!("could not write {what} in {}: {e}", dir.display()))
    };
    let timeline = Timeline::build(events, files);
    let html = report::render(&timeline, &options.secrets, options.pricing);
    let report = dir.join(REPORT);
    write_private(&report, html.as_bytes()).map_err(|e| io(REPORT, &e))?;
    let mut gif_path = None;
    if options.gif
        && let Some(bytes) = gif::render(&timeline)
    {
        let path = dir.join(GIF);
        write_private(&path, &bytes).map_err(|e| io(GIF, &e))?;
        gif_path = Some(path);
    }
    Ok(Rendered {
        report,
        gif: gif_path,
        steps: timeline.steps.len(),
    })
}

#[derive(Default)]
struct Collected {
    events: Vec<RecordedEvent>,
    /// (step, file name relative to the trace folder).
    files: Vec<(u32, String)>,
    write_error: Option<String>,
}

/// Writes one run's trace folder while the run goes: add
/// [`recorders`](Self::recorders) to the session, then call
/// [`finish`](Self::finish) with the result.
pub struct Trace {
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
    pub fn create(dir: &Path) -> Result<Self, TraceError> {
        let fail = |e: std::io::Error| {
            TraceError::Setup(format!(
                "cannot create the trace folder {}: {e}; pass a writable --trace-dir",
                dir.display()
            ))
        };
        crate::private_dir(dir).map_err(fail)?;
        crate::private_dir(&dir.join(SCREENSHOTS)).map_err(fail)?;
        if dir.join(EVENTS).exists() {
            return Err(TraceError::Setup(format!(
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
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The recorders to add to the session: the JSON-lines log (images
    /// stripped) and the collector that saves screenshots as files.
    pub fn recorders(&self) -> Result<Vec<Recorder>, TraceError> {
        let log = jsonl_recorder(&self.dir.join(EVENTS), false).map_err(|e| {
            TraceError::Setup(format!(
                "cannot write {}: {e}; pass a writable --trace-dir",
                self.dir.join(EVENTS).display()
            ))
        })?;
        let collected = self.collected.clone();
        let files = ScreenshotFiles::new(&self.dir);
        let collect: Recorder = Arc::new(move |e: &RecordedEvent| {
            if e.event.is_live_only() {
                return;
            }
            let mut c = collected.lock().unwrap_or_else(PoisonError::into_inner);
            if let StreamEvent::Screenshot { step, screenshot } = &e.event {
                match files.save(*step, &screenshot.image) {
                    Ok(name) => c.files.push((*step, name)),
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
    pub fn is_empty(&self) -> bool {
        self.collected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .is_empty()
    }

    /// Writes the report, the GIF (when `options.gif`) and the result, and
    /// scrubs `options.secrets` from the event log. Returns the report's
    /// path.
    pub fn finish(
        &self,
        result: &RunResult,
        options: &RenderOptions,
    ) -> Result<PathBuf, TraceError> {
        let secrets = &options.secrets;
        let io = |what: &str, e: &dyn std::fmt::Display| {
            TraceError::Io(format!(
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
        write_private(&self.dir.join(RESULT), text.as_bytes()).map_err(|e| io(RESULT, &e))?;
        let rendered = write_artefacts(&self.dir, &events, &files, options)?;
        Ok(rendered.report)
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
    write_private(path, out.as_bytes())
}

#[cfg(test)]
mod tests {
    use lumen_core::{
        Action, ActionCall, Image, ImageFormat, ImageScale, RunStatus, Screenshot, Size, TokenUsage,
    };

    use super::*;

    fn event(seq: u64, event: StreamEvent) -> RecordedEvent {
        RecordedEvent {
            seq,
            timestamp_ms: 1_795_000_000_000 + seq * 500,
            event,
        }
    }

    /// A 64×36 PNG of one colour.
    fn png() -> Vec<u8> {
        let img = image::RgbaImage::from_pixel(64, 36, image::Rgba([30, 90, 200, 255]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    fn shot(step: u32) -> StreamEvent {
        StreamEvent::Screenshot {
            step,
            screenshot: Screenshot {
                // As the event log holds it: the bytes are in the file.
                image: Image::new(ImageFormat::Png, 64, 36, Vec::new()),
                viewport: Size::new(64, 36),
                scale: ImageScale::IDENTITY,
            },
        }
    }

    /// A folder written by someone else (as `cargo xtask eval` does): the
    /// log without images and the screenshot files. `render` draws every
    /// step, embeds the pictures it finds, skips a torn last line and keeps
    /// secrets out of the report.
    #[test]
    fn render_draws_a_folder_from_its_log_and_screenshot_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(SCREENSHOTS)).unwrap();
        let click = ActionCall::new(
            "c1",
            serde_json::from_value::<Action>(
                serde_json::json!({"type": "click", "x": 10, "y": 20}),
            )
            .unwrap(),
        );
        let typed = ActionCall::new(
            "c2",
            serde_json::from_value::<Action>(
                serde_json::json!({"type": "type", "text": "hunter2-SECRET"}),
            )
            .unwrap(),
        );
        let events = [
            StreamEvent::RunStarted {
                instruction: "Log in".into(),
                model: "anthropic/claude-sonnet-4-6".into(),
                max_steps: 5,
            },
            StreamEvent::StepStarted {
                step: 0,
                url: "http://127.0.0.1/login".into(),
            },
            shot(0),
            StreamEvent::Action {
                step: 0,
                call: click,
            },
            StreamEvent::Action {
                step: 0,
                call: typed,
            },
            StreamEvent::StepStarted {
                step: 1,
                url: "http://127.0.0.1/home".into(),
            },
            // Step 2's file is missing: the step is shown without a picture.
            shot(1),
            StreamEvent::Done {
                status: RunStatus::Success,
                result: Some("logged in".into()),
                steps: 2,
                usage: TokenUsage::default(),
                usage_by_source: Default::default(),
                cost_usd: None,
                state: None,
            },
        ];
        let mut log = String::new();
        for (i, e) in events.into_iter().enumerate() {
            log.push_str(&serde_json::to_string(&event(i as u64, e)).unwrap());
            log.push('\n');
        }
        log.push_str("{\"seq\": 99, \"type\": \"step_sta");
        std::fs::write(dir.path().join(EVENTS), log).unwrap();
        std::fs::write(dir.path().join(screenshot_name(0, 0, "png")), png()).unwrap();

        let secrets = Secrets::new().with("password", "hunter2-SECRET").unwrap();
        let rendered = render(
            dir.path(),
            &RenderOptions {
                secrets,
                gif: true,
                pricing: None,
            },
        )
        .unwrap();
        assert_eq!(rendered.steps, 2);
        assert_eq!(rendered.report, dir.path().join(REPORT));
        assert_eq!(
            rendered.gif.as_deref(),
            Some(dir.path().join(GIF).as_path())
        );
        let html = std::fs::read_to_string(&rendered.report).unwrap();
        assert_eq!(html.matches("<section class=\"step").count(), 2);
        assert_eq!(html.matches("data:image/png;base64,").count(), 1);
        assert!(html.contains("logged in"));
        assert!(!html.contains("hunter2-SECRET"), "secrets stay out");
        let gif = std::fs::read(dir.path().join(GIF)).unwrap();
        assert!(gif.starts_with(b"GIF89a"));
    }

    #[test]
    fn render_needs_an_event_log_and_screenshot_names_count_from_one() {
        let dir = tempfile::tempdir().unwrap();
        let err = render(dir.path(), &RenderOptions::default()).unwrap_err();
        assert!(matches!(err, TraceError::Io(_)), "{err}");
        assert!(err.to_string().contains("events.jsonl"), "{err}");
        assert_eq!(screenshot_name(0, 0, "jpg"), "screenshots/step-001.jpg");
        assert_eq!(screenshot_name(11, 2, "png"), "screenshots/step-012-3.png");
    }
}

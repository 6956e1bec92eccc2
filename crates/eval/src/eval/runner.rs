//! One run of one task through the `lumen` facade (a `Session` on a real
//! Chromium tab), with its trace in the run-folder layout of `lumen-trace`
//! (the CLI's and the server's too): `events.jsonl` (the loop's event log,
//! images left out), `screenshots/step-NNN.jpg`, `result.json`, and
//! `report.html` and `run.gif`, rendered from those files by
//! `lumen_trace::render` once the run is over (a timed-out run too).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use lumen::browser::{CdpTab, LaunchOptions};
use lumen::{
    Image, ModelAdapter, Recorder, RunResult, RunStatus, Session, SessionOptions, StreamEvent,
};
use lumen_trace::{self as trace, RenderOptions, jsonl_recorder};

use super::report::{TaskResult, Verdict, estimate_cost};

/// What a run produced.
#[derive(Debug)]
pub(crate) struct Run {
    /// The result; `None` when the per-task timeout cut the run short.
    pub(crate) result: Option<RunResult>,
    /// Steps seen in the event log (counts a timed-out run too).
    pub(crate) steps: u32,
    pub(crate) wall_ms: u64,
    /// Time spent waiting for the model, summed over steps.
    pub(crate) model_ms: u64,
    /// The last screenshots, oldest first.
    pub(crate) screenshots: Vec<Image>,
}

impl Run {
    /// `success`, `failure`, `maxSteps`, `cancelled`, `budgetExceeded`,
    /// `handoffTimeout` or `timeout`.
    pub(crate) fn status(&self) -> String {
        match self.result.as_ref().map(|r| r.status) {
            None => "timeout".into(),
            Some(RunStatus::Success) => "success".into(),
            Some(RunStatus::Failure) => "failure".into(),
            Some(RunStatus::MaxSteps) => "maxSteps".into(),
            Some(RunStatus::Cancelled) => "cancelled".into(),
            Some(RunStatus::BudgetExceeded) => "budgetExceeded".into(),
            Some(RunStatus::HandoffTimeout) => "handoffTimeout".into(),
        }
    }

    pub(crate) fn answer(&self) -> Option<String> {
        self.result.as_ref().and_then(|r| r.result.clone())
    }

    /// The results-file record for this run.
    pub(crate) fn record(&self, head: RecordHead, verdict: Option<Verdict>) -> TaskResult {
        let usage = self.result.as_ref().map(|r| r.usage).unwrap_or_default();
        let cached = usage.cache_read_tokens + usage.cache_write_tokens;
        TaskResult {
            id: head.id,
            site: head.site,
            cost_usd: if head.scripted {
                None
            } else {
                estimate_cost(
                    &head.adapter,
                    usage.input_tokens,
                    usage.output_tokens,
                    cached,
                )
            },
            adapter: head.adapter,
            trial: head.trial,
            feedback: head.feedback,
            status: self.status(),
            answer: self.answer(),
            verdict,
            steps: self.result.as_ref().map_or(self.steps, |r| r.steps),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cached_tokens: cached,
            wall_ms: self.wall_ms,
            engine_ms: self.wall_ms.saturating_sub(self.model_ms),
            trace: head.trace,
            scripted: head.scripted,
        }
    }
}

/// The identifying part of a results record.
#[derive(Debug, Clone)]
pub(crate) struct RecordHead {
    pub(crate) id: String,
    pub(crate) site: String,
    pub(crate) adapter: String,
    pub(crate) trial: u32,
    pub(crate) feedback: bool,
    pub(crate) trace: Option<String>,
    pub(crate) scripted: bool,
}

/// A failed start (no browser, no adapter): recorded as status `error`, so
/// the eval goes on and the report shows it.
pub(crate) fn error_record(head: RecordHead, error: &anyhow::Error) -> TaskResult {
    TaskResult {
        id: head.id,
        site: head.site,
        adapter: head.adapter,
        trial: head.trial,
        feedback: head.feedback,
        status: "error".into(),
        answer: None,
        verdict: Some(Verdict {
            pass: false,
            reason: format!("{error:#}"),
        }),
        steps: 0,
        input_tokens: 0,
        output_tokens: 0,
        cached_tokens: 0,
        cost_usd: None,
        wall_ms: 0,
        engine_ms: 0,
        trace: head.trace,
        scripted: head.scripted,
    }
}

/// Launches a headless Chromium tab for one worker.
pub(crate) async fn launch(chrome: Option<&Path>) -> anyhow::Result<Arc<CdpTab>> {
    let options = LaunchOptions {
        executable: chrome.map(Path::to_path_buf),
        ..LaunchOptions::default()
    };
    let tab = CdpTab::launch(options)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("launching Chromium")?;
    Ok(Arc::new(tab))
}

/// Runs `instruction` on `tab` (already on the start page) with `adapter`,
/// writing the trace into `trace_dir`.
pub(crate) async fn run_task(
    tab: Arc<CdpTab>,
    adapter: Arc<dyn ModelAdapter>,
    instruction: &str,
    options: SessionOptions,
    timeout: Duration,
    trace_dir: &Path,
    keep_screenshots: usize,
) -> anyhow::Result<Run> {
    let shots = trace_dir.join(trace::SCREENSHOTS);
    std::fs::create_dir_all(&shots).with_context(|| format!("creating {}", shots.display()))?;
    let events = trace_dir.join(trace::EVENTS);
    // A resumed or repeated run starts its log afresh.
    let _ = std::fs::remove_file(&events);
    let log =
        jsonl_recorder(&events, false).with_context(|| format!("opening {}", events.display()))?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sink = Arc::clone(&seen);
    let files = trace::ScreenshotFiles::new(trace_dir);
    let keep = keep_screenshots.max(1);
    let watcher: Recorder = Arc::new(move |e| {
        let mut seen = sink.lock().unwrap_or_else(PoisonError::into_inner);
        match &e.event {
            StreamEvent::Screenshot { step, screenshot } => {
                let image = &screenshot.image;
                // A trace without a picture is still a trace: ignore errors.
                let _ = files.save(*step, image);
                seen.screenshots.push_back(image.clone());
                while seen.screenshots.len() > keep {
                    seen.screenshots.pop_front();
                }
            }
            StreamEvent::StepCompleted { model_ms, .. } => {
                seen.model_ms += model_ms;
                seen.steps += 1;
            }
            _ => {}
        }
    });
    let options = SessionOptions {
        recorders: vec![log, watcher],
        ..options
    };
    let mut session = Session::new(tab, adapter, options)
        .map_err(|e| anyhow::anyhow!("starting the session: {e}"))?;
    let started = Instant::now();
    let result = tokio::time::timeout(timeout, session.run(instruction))
        .await
        .ok();
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    drop(session);
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
    if let Some(result) = &result {
        let path = trace_dir.join(trace::RESULT);
        // The history (with its screenshots) is in events.jsonl already.
        let mut value = serde_json::to_value(result)?;
        if let Some(object) = value.as_object_mut() {
            object.remove("history");
        }
        let text = serde_json::to_string_pretty(&value)?;
        trace::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    // The run counts even when its report cannot be drawn; say why.
    let render = RenderOptions {
        pricing: Some(lumen::models::registry::cost),
        ..RenderOptions::default()
    };
    if let Err(e) = trace::render(trace_dir, &render) {
        println!("  warning: no report.html for {}: {e}", trace_dir.display());
    }
    Ok(Run {
        result,
        steps: seen.steps,
        wall_ms,
        model_ms: seen.model_ms,
        screenshots: seen.screenshots.into(),
    })
}

#[derive(Debug, Default)]
struct Seen {
    screenshots: VecDeque<Image>,
    model_ms: u64,
    steps: u32,
}

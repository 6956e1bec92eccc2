//! Live progress: a spinner line with the step, URL, tokens and estimated
//! cost on a terminal (indicatif), plain lines otherwise, or the event
//! stream as JSON lines with `--json` (the live reasoning and text deltas
//! included). With `--verbose` the model's reasoning and text are shown as
//! they stream in: piece by piece on plain output, line by line above the
//! spinner.

use std::io::{IsTerminal as _, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::pricing::cost;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lumen::perception::monitor::Recorder;
use lumen::safety::Secrets;
use lumen::{RecordedEvent, StreamEvent, TokenUsage};

use crate::terminal::visible;
use crate::timeline::{describe, shorten};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// A live spinner line (stdout is a terminal).
    Live,
    /// One plain line per event worth telling.
    Plain,
    /// The event stream as JSON lines.
    Json,
}

impl Style {
    /// `--json` wins; otherwise live on a terminal, plain when piped.
    pub(crate) fn pick(json: bool) -> Self {
        if json {
            Style::Json
        } else if std::io::stdout().is_terminal() {
            Style::Live
        } else {
            Style::Plain
        }
    }
}

struct State {
    model: String,
    max_steps: u32,
    usage: TokenUsage,
    bar: Option<ProgressBar>,
    /// The delta block being shown: (reasoning?, step), and the part of
    /// its current line not printed yet (spinner only).
    open: Option<(bool, u32)>,
    partial: String,
}

impl State {
    fn status(&self, step: u32, url: &str) -> String {
        let tokens = self.usage.total_input() + self.usage.output_tokens;
        let cost = cost(&self.model, &self.usage)
            .map(|c| format!(" · ~${c:.3}"))
            .unwrap_or_default();
        format!(
            "step {}/{} · {} · {tokens} tokens{cost}",
            step + 1,
            self.max_steps,
            shorten(url, 70)
        )
    }

    /// Shows a streamed piece: a label when a block starts, then the text
    /// as it comes (plain) or each finished line (above the spinner).
    fn piece(&mut self, reasoning: bool, step: u32, text: &str) {
        if self.open != Some((reasoning, step)) {
            self.end_block();
            self.open = Some((reasoning, step));
            let label = if reasoning { "thinking" } else { "says" };
            self.partial = format!("  {:>3} {label}: ", step + 1);
        }
        self.partial.push_str(&visible(text));
        match &self.bar {
            Some(bar) => {
                while let Some(at) = self.partial.find('\n') {
                    let line: String = self.partial.drain(..=at).collect();
                    bar.println(line.trim_end());
                }
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = write!(out, "{}", self.partial);
                let _ = out.flush();
                self.partial.clear();
            }
        }
    }

    /// Ends the delta block being shown, if any.
    fn end_block(&mut self) {
        if self.open.take().is_none() {
            return;
        }
        let rest = std::mem::take(&mut self.partial);
        match &self.bar {
            Some(bar) => {
                if !rest.trim().is_empty() {
                    bar.println(rest.trim_end());
                }
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{rest}");
                let _ = out.flush();
            }
        }
    }

    fn line(&self, text: &str) {
        let text = visible(text);
        let text = text.as_ref();
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
        }
    }
}

/// Shows a run's progress; cheap to clone into a recorder.
#[derive(Clone)]
pub(crate) struct Progress {
    style: Style,
    verbose: bool,
    secrets: Arc<Secrets>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("style", &self.style)
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// Progress in `style` for a run of `model`; `secrets` are scrubbed from
    /// everything shown.
    pub(crate) fn new(style: Style, model: &str, max_steps: u32, secrets: Secrets) -> Self {
        let bar = (style == Style::Live).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} {msg} {elapsed:.dim}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar.set_message("starting the browser and the model…");
            bar
        });
        Self {
            style,
            verbose: false,
            secrets: Arc::new(secrets),
            state: Arc::new(Mutex::new(State {
                model: model.to_owned(),
                max_steps,
                usage: TokenUsage::default(),
                bar,
                open: None,
                partial: String::new(),
            })),
        }
    }

    /// Shows the model's reasoning and text live (`--verbose`).
    pub(crate) fn verbose(mut self, on: bool) -> Self {
        self.verbose = on;
        self
    }

    /// A recorder that feeds this progress display.
    pub(crate) fn recorder(&self) -> Recorder {
        let me = self.clone();
        Arc::new(move |e: &RecordedEvent| me.on_event(e))
    }

    /// Prints a line above the spinner (or plainly); not in JSON mode.
    pub(crate) fn say(&self, text: &str) {
        if self.style == Style::Json {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.end_block();
        state.line(&self.secrets.redact(text));
    }

    /// Stops the spinner.
    pub(crate) fn finish(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.end_block();
        if let Some(bar) = &state.bar {
            bar.finish_and_clear();
        }
    }

    fn on_event(&self, e: &RecordedEvent) {
        if self.style == Style::Json {
            let mut e = e.clone();
            if let StreamEvent::Screenshot { screenshot, .. } = &mut e.event {
                screenshot.image.data = Arc::from(Vec::new());
            }
            if let Ok(v) = self.secrets.redacted_json(&e)
                && let Ok(line) = serde_json::to_string(&v)
            {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let r = |s: &str| self.secrets.redact(s).into_owned();
        // The bus has redacted the deltas, secrets split across pieces
        // included; a piece alone cannot be redacted again.
        match &e.event {
            StreamEvent::ReasoningDelta { step, text } if self.verbose => {
                return state.piece(true, *step, text);
            }
            StreamEvent::AssistantDelta { step, text } if self.verbose => {
                return state.piece(false, *step, text);
            }
            e if e.is_live_only() => return,
            _ => state.end_block(),
        }
        match &e.event {
            StreamEvent::RunStarted {
                instruction,
                model,
                max_steps,
            } => {
                state.max_steps = *max_steps;
                state.line(&format!(
                    "task: {} (model {model}, at most {max_steps} steps)",
                    r(&shorten(instruction, 200))
                ));
            }
            StreamEvent::StepStarted { step, url } => {
                let status = state.status(*step, &r(url));
                match &state.bar {
                    Some(bar) => bar.set_message(status),
                    None => state.line(&status),
                }
            }
            StreamEvent::Action { step, call } => {
                state.line(&format!(
                    "  {:>3} → {}",
                    step + 1,
                    r(&describe(&call.action))
                ));
            }
            StreamEvent::ActionResult {
                execution, call, ..
            } if !execution.ok => {
                state.line(&format!(
                    "      ✗ {} failed: {}",
                    r(&describe(&call.action)),
                    r(execution.error.as_deref().unwrap_or("no reason given"))
                ));
            }
            StreamEvent::ActionBlocked { call, reason, .. } => {
                state.line(&format!(
                    "      ⛔ blocked {}: {}",
                    r(&describe(&call.action)),
                    r(reason)
                ));
            }
            StreamEvent::TerminationRejected { reason, .. } => {
                state.line(&format!("      ↺ the verifier said not yet: {}", r(reason)));
            }
            StreamEvent::WaitingForHuman {
                reason,
                timeout_secs,
                ..
            } => {
                state.line(&format!(
                    "      ⏸ waiting for a person (up to {timeout_secs} s): {}",
                    r(reason)
                ));
            }
            StreamEvent::HumanDone { note, .. } => {
                state.line(&format!(
                    "      ▶ the person is done{}",
                    note.as_deref()
                        .map(|n| format!(": {}", r(n)))
                        .unwrap_or_default()
                ));
            }
            StreamEvent::Nudge { message, .. } => {
                state.line(&format!("      ! {}", r(&shorten(message, 160))));
            }
            StreamEvent::ModelNotice { notice, .. } => {
                state.line(&format!(
                    "      ⧗ {}",
                    r(&shorten(&notice.to_string(), 200))
                ));
            }
            StreamEvent::StepCompleted { step, usage, .. } => {
                state.usage += *usage;
                if let Some(bar) = &state.bar {
                    let url = bar.message();
                    let url = url.split(" · ").nth(1).unwrap_or("").to_owned();
                    bar.set_message(state.status(*step, &url));
                }
            }
            StreamEvent::Error { error } if error.code != lumen::ErrorCode::Cancelled => {
                state.line(&format!("  error: {}", r(&error.message)));
            }
            _ => {}
        }
    }

    /// Tokens and estimated cost so far, for the summary.
    pub(crate) fn totals(&self) -> String {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let u = state.usage;
        let cost = cost(&state.model, &u)
            .map(|c| format!(", about ${c:.3}"))
            .unwrap_or_default();
        format!(
            "{} input + {} output tokens{cost}",
            u.total_input(),
            u.output_tokens
        )
    }
}

//! A run as a list of steps, folded from its recorded events (what the
//! report and the GIF draw), and [`describe`], the one-line description of
//! an action that the live progress, the report and replays print.

use lumen_core::{
    Action, ActionCall, ActionExecution, RecordedEvent, RunStatus, Screenshot, StreamEvent,
    TokenUsage,
};

/// What became of one action.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Asked for, no result recorded (the run ended first).
    Pending,
    /// It ran; `execution.ok` says how it went.
    Ran(ActionExecution),
    /// A hook or the policy refused it.
    Blocked(String),
}

/// One action of a step.
#[derive(Debug, Clone)]
pub(crate) struct ActionView {
    pub(crate) call: ActionCall,
    pub(crate) outcome: Outcome,
}

impl ActionView {
    /// Whether the action was blocked or failed.
    pub(crate) fn is_problem(&self) -> bool {
        match &self.outcome {
            Outcome::Blocked(_) => true,
            Outcome::Ran(e) => !e.ok,
            Outcome::Pending => false,
        }
    }
}

/// One step of the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepView {
    /// 0-based, as recorded.
    pub(crate) step: u32,
    pub(crate) url: String,
    pub(crate) screenshot: Option<Screenshot>,
    /// The screenshot's file name in the trace folder.
    pub(crate) screenshot_file: Option<String>,
    pub(crate) thinking: Vec<String>,
    pub(crate) actions: Vec<ActionView>,
    /// Verifier rejections of a terminate.
    pub(crate) rejections: Vec<String>,
    pub(crate) nudges: Vec<String>,
    /// What the model call said before its answer: waits before retries,
    /// a switch to a fallback model.
    pub(crate) notices: Vec<String>,
    pub(crate) usage: Option<TokenUsage>,
    pub(crate) duration_ms: u64,
    pub(crate) model_ms: u64,
}

/// How the run ended.
#[derive(Debug, Clone)]
pub(crate) struct Ending {
    pub(crate) status: RunStatus,
    pub(crate) result: Option<String>,
    pub(crate) usage: TokenUsage,
}

/// The whole run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    pub(crate) instruction: String,
    pub(crate) model: String,
    pub(crate) max_steps: u32,
    pub(crate) steps: Vec<StepView>,
    pub(crate) errors: Vec<String>,
    pub(crate) ending: Option<Ending>,
    pub(crate) started_ms: Option<u64>,
    pub(crate) ended_ms: Option<u64>,
}

impl Timeline {
    /// Folds `events` (in order); `files` names each step's screenshot file.
    pub(crate) fn build(events: &[RecordedEvent], files: &[(u32, String)]) -> Self {
        let mut t = Timeline::default();
        for e in events {
            t.started_ms.get_or_insert(e.timestamp_ms);
            t.ended_ms = Some(e.timestamp_ms);
            match &e.event {
                StreamEvent::RunStarted {
                    instruction,
                    model,
                    max_steps,
                } => {
                    t.instruction.clone_from(instruction);
                    t.model.clone_from(model);
                    t.max_steps = *max_steps;
                }
                StreamEvent::StepStarted { step, url } => {
                    let file = files
                        .iter()
                        .find(|(s, _)| s == step)
                        .map(|(_, f)| f.clone());
                    t.steps.push(StepView {
                        step: *step,
                        url: url.clone(),
                        screenshot_file: file,
                        ..StepView::default()
                    });
                }
                StreamEvent::Screenshot { step, screenshot } => {
                    if let Some(s) = t.step_mut(*step)
                        && s.screenshot.is_none()
                    {
                        s.screenshot = Some(screenshot.clone());
                    }
                }
                StreamEvent::Thinking { step, text } => {
                    if let Some(s) = t.step_mut(*step) {
                        s.thinking.push(text.clone());
                    }
                }
                StreamEvent::Action { step, call } => {
                    if let Some(s) = t.step_mut(*step) {
                        s.actions.push(ActionView {
                            call: call.clone(),
                            outcome: Outcome::Pending,
                        });
                    }
                }
                StreamEvent::ActionResult {
                    step,
                    call,
                    execution,
                } => t.settle(*step, call, Outcome::Ran(execution.clone())),
                StreamEvent::ActionBlocked { step, call, reason } => {
                    t.settle(*step, call, Outcome::Blocked(reason.clone()));
                }
                StreamEvent::TerminationRejected { step, reason } => {
                    if let Some(s) = t.step_mut(*step) {
                        s.rejections.push(reason.clone());
                    }
                }
                StreamEvent::Nudge { step, message, .. } => {
                    if let Some(s) = t.step_mut(*step) {
                        s.nudges.push(message.clone());
                    }
                }
                StreamEvent::ModelNotice { step, notice } => {
                    if let Some(s) = t.step_mut(*step) {
                        s.notices.push(notice.to_string());
                    }
                }
                StreamEvent::StepCompleted {
                    step,
                    usage,
                    duration_ms,
                    model_ms,
                } => {
                    if let Some(s) = t.step_mut(*step) {
                        s.usage = Some(*usage);
                        s.duration_ms = *duration_ms;
                        s.model_ms = *model_ms;
                    }
                }
                StreamEvent::Error { error } => t.errors.push(error.message.clone()),
                StreamEvent::Done {
                    status,
                    result,
                    usage,
                    ..
                } => {
                    t.ending = Some(Ending {
                        status: *status,
                        result: result.clone(),
                        usage: *usage,
                    });
                }
                _ => {}
            }
        }
        t
    }

    fn step_mut(&mut self, step: u32) -> Option<&mut StepView> {
        self.steps.iter_mut().rev().find(|s| s.step == step)
    }

    /// Records the result of `call`: on its pending entry, or as a new
    /// entry when the `Action` event was not seen (a blocked call).
    fn settle(&mut self, step: u32, call: &ActionCall, outcome: Outcome) {
        let Some(s) = self.step_mut(step) else {
            return;
        };
        match s
            .actions
            .iter_mut()
            .find(|a| a.call.id == call.id && matches!(a.outcome, Outcome::Pending))
        {
            Some(a) => a.outcome = outcome,
            None => s.actions.push(ActionView {
                call: call.clone(),
                outcome,
            }),
        }
    }
}

/// A one-line description of an action for people (`click (12, 40)`,
/// `type "hello"`, `finish (success): …`).
pub fn describe(action: &Action) -> String {
    match action {
        Action::Click { x, y, .. } => format!("click ({x}, {y})"),
        Action::DoubleClick { x, y, .. } => format!("double-click ({x}, {y})"),
        Action::TripleClick { x, y, .. } => format!("triple-click ({x}, {y})"),
        Action::Drag {
            start_x,
            start_y,
            end_x,
            end_y,
            ..
        } => format!("drag ({start_x}, {start_y}) → ({end_x}, {end_y})"),
        Action::Hover { x, y } => format!("hover ({x}, {y})"),
        Action::Scroll {
            x,
            y,
            direction,
            amount,
            ..
        } => format!(
            "scroll {} {amount} at ({x}, {y})",
            serde_json::to_value(direction)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        ),
        Action::Type { text } => format!("type {:?}", shorten(text, 60)),
        Action::KeyPress { keys } => format!("press {}", keys.join("+")),
        Action::Wait { ms } => format!("wait {ms} ms"),
        Action::Goto { url } => format!("go to {url}"),
        Action::Back => "back".to_owned(),
        Action::Forward => "forward".to_owned(),
        Action::Terminate { status, result } => format!(
            "finish ({}): {}",
            serde_json::to_value(status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            shorten(result, 120)
        ),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
            .unwrap_or_else(|| "action".to_owned()),
    }
}

/// `text` cut to at most `max` characters, the last one an ellipsis when
/// anything was cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

//! Run results and the live event stream.

use serde::{Deserialize, Serialize};

use crate::TaskState;
use crate::action::ActionCall;
use crate::browser::Screenshot;
use crate::error::ErrorInfo;
use crate::history::SemanticStep;
use crate::outcome::ActionExecution;
use crate::usage::{TokenUsage, UsageBreakdown};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RunStatus {
    /// The model terminated with success (and the verifier, if any, agreed).
    Success,
    /// The model terminated with failure, or a fatal error ended the run.
    Failure,
    /// The step budget ran out.
    MaxSteps,
    /// The run was cancelled.
    Cancelled,
    /// A budget (`max_tokens`, `max_cost_usd` or `max_failures`) was
    /// reached; the run stopped before its next model call. The result
    /// names the budget and the figures.
    BudgetExceeded,
    /// The run handed the browser to a person and nobody finished within
    /// the handoff timeout; the result says what they were asked.
    HandoffTimeout,
}

/// The result of a run (or of a child loop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// How it ended.
    pub status: RunStatus,
    /// The answer or failure reason the model gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Steps taken.
    pub steps: u32,
    /// Full semantic history.
    #[serde(default)]
    pub history: Vec<SemanticStep>,
    /// The final task state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    /// Tokens used by every model call of the run (the total of
    /// `usage_by_source`).
    #[serde(default)]
    pub usage: TokenUsage,
    /// The same tokens by where they were spent (main loop, summaries,
    /// verifier, planner, confidence gate, sub-tasks).
    #[serde(default)]
    pub usage_by_source: UsageBreakdown,
    /// The estimated cost of `usage` in US dollars at the model registry's
    /// list prices; `None` when the price is not known (a local model, or
    /// a loop run without a price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Why `cost_usd` is absent, when the price table could say (the model
    /// is not one of the registry's rows, or its price is unconfirmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_note: Option<String>,
    /// The fatal error that ended the run, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
}

/// The loop's result; the same type as [`RunResult`].
pub type LoopResult = RunResult;

/// Something that happened during a run, in order. The event log written as
/// JSON lines is the source for traces, replays, reports and the server's
/// live streams, so every variant carries what a consumer needs without the
/// rest of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum StreamEvent {
    /// The run began.
    RunStarted {
        /// The task.
        instruction: String,
        /// The model id.
        model: String,
        /// The step budget.
        max_steps: u32,
    },
    /// A model call had something to say before its answer: a wait before
    /// a retry, or a switch to a fallback model.
    ModelNotice {
        /// The step whose call it is (the loop's current step).
        step: u32,
        /// What happened.
        notice: crate::model::ModelNotice,
    },
    /// A step began.
    StepStarted {
        /// Step index.
        step: u32,
        /// URL at its start.
        url: String,
    },
    /// The screenshot of a step (the first thing a slow consumer loses).
    Screenshot {
        /// Step index.
        step: u32,
        /// The screenshot.
        screenshot: Screenshot,
    },
    /// A piece of the model's reasoning as it streams in (live only: see
    /// [`StreamEvent::is_live_only`]). The pieces of a step, joined, are
    /// the step's reasoning; the complete text follows as
    /// [`StreamEvent::Thinking`].
    ReasoningDelta {
        /// Step index.
        step: u32,
        /// The new text.
        text: String,
    },
    /// A piece of the model's visible text (the assistant message) as it
    /// streams in (live only: see [`StreamEvent::is_live_only`]). The
    /// complete text is in the step's history.
    AssistantDelta {
        /// Step index.
        step: u32,
        /// The new text.
        text: String,
    },
    /// Reasoning text from the model (complete, once the call has ended).
    Thinking {
        /// Step index.
        step: u32,
        /// The text.
        text: String,
    },
    /// The model asked for an action (about to run).
    Action {
        /// Step index.
        step: u32,
        /// The call.
        call: ActionCall,
    },
    /// An action ran.
    ActionResult {
        /// Step index.
        step: u32,
        /// The call.
        call: ActionCall,
        /// What happened.
        execution: ActionExecution,
    },
    /// A hook or policy blocked an action.
    ActionBlocked {
        /// Step index.
        step: u32,
        /// The call.
        call: ActionCall,
        /// Why.
        reason: String,
    },
    /// The model replaced the task state.
    StateWritten {
        /// Step index.
        step: u32,
        /// The new state.
        state: TaskState,
    },
    /// A nudge was raised for the next step (repeat or stall detected).
    Nudge {
        /// Step index.
        step: u32,
        /// Severity (5, 8, 12).
        level: u32,
        /// The text shown to the model.
        message: String,
    },
    /// Tier-2 compaction ran.
    Compaction {
        /// Step index.
        step: u32,
        /// Estimated context tokens before.
        tokens_before: u64,
        /// Estimated context tokens after.
        tokens_after: u64,
    },
    /// The verifier rejected a terminate.
    TerminationRejected {
        /// Step index.
        step: u32,
        /// The verifier's reason (fed back to the model).
        reason: String,
    },
    /// A step finished.
    StepCompleted {
        /// Step index.
        step: u32,
        /// Tokens the step used.
        usage: TokenUsage,
        /// Step wall time.
        duration_ms: u64,
        /// Of which waiting for the model.
        model_ms: u64,
    },
    /// The run handed the browser to a person and waits for them (status
    /// `waiting_for_human` on the server).
    WaitingForHuman {
        /// Step index.
        step: u32,
        /// What the person is asked to do.
        reason: String,
        /// Why the run handed over.
        trigger: crate::HandoffTrigger,
        /// How long the run waits, seconds.
        timeout_secs: u64,
    },
    /// The person finished; the run goes on with a fresh screenshot.
    HumanDone {
        /// Step index.
        step: u32,
        /// The person's note for the model, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// How long the run waited, milliseconds.
        waited_ms: u64,
    },
    /// A fatal error (the run ends with `Done` right after).
    Error {
        /// What went wrong.
        error: ErrorInfo,
    },
    /// The run ended.
    Done {
        /// How.
        status: RunStatus,
        /// The answer or failure reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
        /// Steps taken.
        steps: u32,
        /// Total tokens.
        usage: TokenUsage,
        /// The tokens by source (main loop, summaries, verifier, planner,
        /// confidence gate, sub-tasks), as in [`RunResult::usage_by_source`].
        #[serde(default)]
        usage_by_source: UsageBreakdown,
        /// The estimated cost in US dollars at list prices, each source at
        /// its own model's price (absent when a model has no known price).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// Final state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<TaskState>,
    },
}

impl StreamEvent {
    /// The step the event belongs to, if any.
    pub fn step(&self) -> Option<u32> {
        match self {
            StreamEvent::StepStarted { step, .. }
            | StreamEvent::ModelNotice { step, .. }
            | StreamEvent::Screenshot { step, .. }
            | StreamEvent::Thinking { step, .. }
            | StreamEvent::ReasoningDelta { step, .. }
            | StreamEvent::AssistantDelta { step, .. }
            | StreamEvent::Action { step, .. }
            | StreamEvent::ActionResult { step, .. }
            | StreamEvent::ActionBlocked { step, .. }
            | StreamEvent::StateWritten { step, .. }
            | StreamEvent::Nudge { step, .. }
            | StreamEvent::Compaction { step, .. }
            | StreamEvent::TerminationRejected { step, .. }
            | StreamEvent::WaitingForHuman { step, .. }
            | StreamEvent::HumanDone { step, .. }
            | StreamEvent::StepCompleted { step, .. } => Some(*step),
            StreamEvent::RunStarted { .. }
            | StreamEvent::Error { .. }
            | StreamEvent::Done { .. } => None,
        }
    }

    /// Whether the event is live only: sent to subscribers as it happens
    /// (monitors, recorders, `Agent::stream`, the server's SSE, WebSocket
    /// and IPC streams, the CLI) but never written to an event log or a
    /// trace, which keep the complete text instead
    /// ([`StreamEvent::Thinking`], the step's history). These are the
    /// streamed [`ReasoningDelta`](StreamEvent::ReasoningDelta) and
    /// [`AssistantDelta`](StreamEvent::AssistantDelta) pieces: logged,
    /// they would multiply a log's size for nothing a replay needs.
    ///
    /// A live-only event carries the `seq` of the last logged event before
    /// it (it takes no number of its own), so a client resuming "after" it
    /// resumes after that event.
    pub fn is_live_only(&self) -> bool {
        matches!(
            self,
            StreamEvent::ReasoningDelta { .. } | StreamEvent::AssistantDelta { .. }
        )
    }
}

/// Receives every event as recorded (numbered and timestamped), e.g. to
/// write the event log. Called in order from the loop; must not block long.
/// Live-only events ([`StreamEvent::is_live_only`]) arrive too: a recorder
/// that persists skips them.
pub type Recorder = std::sync::Arc<dyn Fn(&RecordedEvent) + Send + Sync>;

/// A [`StreamEvent`] as logged: numbered and timestamped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedEvent {
    /// Position in the run's log, from 0, without gaps. A live-only event
    /// ([`StreamEvent::is_live_only`]) is not in the log and repeats the
    /// `seq` of the logged event before it.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The event.
    #[serde(flatten)]
    pub event: StreamEvent,
}

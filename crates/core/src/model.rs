//! The model side of the loop: what an adapter is given each step and what it
//! gives back.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;
use serde::{Deserialize, Serialize};

use crate::TaskState;
use crate::action::ActionCall;
use crate::browser::Screenshot;
use crate::error::Result;
use crate::history::{AssistantTurn, WireRecord};
use crate::usage::TokenUsage;

/// What the loop hands an adapter for one step. Borrowed: adapters build
/// their request from it and keep nothing.
#[derive(Debug, Clone, Copy)]
pub struct StepContext<'a> {
    /// Step index, from 0.
    pub step: u32,
    /// The step budget.
    pub max_steps: u32,
    /// The task as the user gave it.
    pub instruction: &'a str,
    /// The system prompt the loop assembled (task, tips, nudges, state, URL,
    /// budget). Adapters add only provider mechanics (tool descriptions).
    pub system_prompt: &'a str,
    /// The current screenshot, which is also the newest screenshot record in
    /// `wire` (adapters must not send it twice).
    pub screenshot: &'a Screenshot,
    /// The wire history, already compressed by the loop.
    pub wire: &'a [WireRecord],
    /// The current task state.
    pub state: Option<&'a TaskState>,
    /// The current URL.
    pub url: &'a str,
    /// Sampling temperature override (the confidence gate varies it).
    /// Adapters drop it for models that reject a temperature.
    pub temperature: Option<f32>,
    /// Where the pointer is, viewport CSS pixels, when it has been placed:
    /// actions that act "at the cursor" (a click without a coordinate) are
    /// resolved against it.
    pub cursor: Option<crate::coords::Point>,
}

/// A whole model answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// The turn to record in wire history (actions, ids, thinking, native
    /// replay data).
    pub turn: AssistantTurn,
    /// Tokens used.
    pub usage: TokenUsage,
    /// The provider's stop reason, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

impl ModelResponse {
    /// The decoded actions, in order.
    pub fn calls(&self) -> &[ActionCall] {
        &self.turn.calls
    }
}

/// An item of a streaming model answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelEvent {
    /// A tool call whose arguments are complete: execute it now.
    Action(ActionCall),
    /// A piece of reasoning text, for live display.
    ThinkingDelta(String),
    /// A piece of plain text, for live display.
    TextDelta(String),
    /// The answer is complete. Always the last item of a successful stream;
    /// `calls` repeats every action yielded before, in order.
    Completed(ModelResponse),
}

/// A stream of [`ModelEvent`]s. Dropping it aborts the request.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent>> + Send>>;

/// Static facts about a model, for viewport alignment and compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// The model id as the provider knows it (`claude-sonnet-4-6`).
    pub model_id: String,
    /// The provider (`anthropic`, `openai`, `google`, `compatible`).
    pub provider: String,
    /// Image patch size the viewport should be a multiple of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_size: Option<u32>,
    /// Longest image edge the model takes without downscaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_image_dimension: Option<u32>,
    /// Most pixels (width × height) the model takes without downscaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_image_pixels: Option<u64>,
    /// Whether the model can return reasoning.
    pub supports_thinking: bool,
    /// Whether the provider's own computer-use tool is used.
    pub native_computer_use: bool,
    /// Context window, tokens.
    pub context_window_tokens: u64,
    /// Whether the model is told the open tabs after each turn (the loop
    /// then records them with each screenshot).
    #[serde(default)]
    pub tab_inventory: bool,
}

/// What a model call has to say while it runs, before any answer: the user
/// would otherwise see nothing for minutes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum ModelNotice {
    /// A retryable failure (rate limit, overload, a 5xx, a timeout): the
    /// call waits `wait_ms` before attempt `attempt + 1`.
    Waiting {
        /// The provider (`anthropic`, `openai`, `google`, `compatible`).
        provider: String,
        /// The attempt that failed, from 1.
        attempt: u32,
        /// How long the call waits, milliseconds.
        wait_ms: u64,
        /// The failure, as the provider put it.
        reason: String,
    },
    /// The model failed in a way another model can help with (retired,
    /// not found, overloaded after every retry): the rest of the run uses
    /// the next fallback model.
    Fallback {
        /// The model given up, as `provider/id`.
        from: String,
        /// The model used from now on, as `provider/id`.
        to: String,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for ModelNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelNotice::Waiting {
                provider,
                attempt,
                wait_ms,
                reason,
            } => write!(
                f,
                "{provider} failed (attempt {attempt}: {reason}); waiting {:.1}s before retrying",
                *wait_ms as f64 / 1000.0
            ),
            ModelNotice::Fallback { from, to, reason } => {
                write!(f, "switched from {from} to {to}: {reason}")
            }
        }
    }
}

/// Where an adapter tells its [`ModelNotice`]s. Called on the task that
/// makes the call, so it must be quick and must not block.
#[derive(Clone)]
pub struct NoticeSink(Arc<dyn Fn(ModelNotice) + Send + Sync>);

impl NoticeSink {
    /// Wraps a callback.
    pub fn new(f: impl Fn(ModelNotice) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Tells `notice`.
    pub fn tell(&self, notice: ModelNotice) {
        (self.0)(notice);
    }
}

impl fmt::Debug for NoticeSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NoticeSink(..)")
    }
}

/// An adapter's place for the sink it is handed
/// ([`ModelAdapter::set_notices`]): empty until the loop sets one.
#[derive(Debug, Default)]
pub struct NoticeSlot(std::sync::Mutex<Option<NoticeSink>>);

impl NoticeSlot {
    /// Puts `sink` in the slot (`None` empties it).
    pub fn set(&self, sink: Option<NoticeSink>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = sink;
    }

    /// Whether a sink is set.
    pub fn is_set(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// Tells `notice` to the sink, if one is set.
    pub fn tell(&self, notice: ModelNotice) {
        let sink = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(sink) = sink {
            sink.tell(notice);
        }
    }
}

/// A model provider, as the loop sees it: a codec between wire history and
/// the provider's protocol, not a controller (it never decides when to call,
/// retry at the loop level, or compact).
///
/// Object-safe (`#[async_trait]`), stored as `Arc<dyn ModelAdapter>`.
///
/// # Contract
/// - **Coordinates**: every emitted action is in viewport CSS pixels,
///   converted once here using `ctx.screenshot`'s viewport and scale.
/// - **Ordering**: [`stream`](Self::stream) yields [`ModelEvent::Action`]s in
///   the order the provider emitted the tool calls, each as soon as its
///   arguments are complete, and ends with exactly one
///   [`ModelEvent::Completed`]. A stream that ends without it is broken and the
///   loop treats it as an error.
/// - **Malformed calls** become [`Action::Invalid`](crate::Action::Invalid),
///   never an error or a panic. A text-only answer becomes `terminate` with
///   the text.
/// - **Errors**: `Err` from `stream` (before any event) or an `Err` item means
///   a provider failure ([`LumenError::ModelApi`](crate::LumenError::ModelApi)
///   and friends); transient failures before the first byte are retried
///   inside the adapter.
/// - **Cancellation**: dropping the future or the stream aborts the HTTP
///   request; adapters hold no state between calls.
#[async_trait::async_trait]
pub trait ModelAdapter: Send + Sync {
    /// Static facts about the model.
    fn info(&self) -> &ModelInfo;

    /// Starts a streaming call for this step.
    async fn stream(&self, ctx: &StepContext<'_>) -> Result<ModelStream>;

    /// A single-shot call (planner, verifier, confidence-gate samples).
    async fn step(&self, ctx: &StepContext<'_>) -> Result<ModelResponse>;

    /// Estimates the input tokens the request for `ctx` would cost, by the
    /// provider's own image and text rules. Cheap: no I/O.
    fn estimate_tokens(&self, ctx: &StepContext<'_>) -> u64;

    /// Writes a concise summary of `wire` (tier-2 compaction), usually on a
    /// cheaper model. The state is passed for context; it is kept outside
    /// the summary by the loop.
    async fn summarize(&self, wire: &[WireRecord], state: Option<&TaskState>) -> Result<String>;

    /// [`summarize`](Self::summarize) with the tokens the call used, so a
    /// run's usage and budgets count its summaries. The default reports no
    /// usage; adapters that know it override this.
    async fn summarize_counted(
        &self,
        wire: &[WireRecord],
        state: Option<&TaskState>,
    ) -> Result<(String, TokenUsage)> {
        Ok((self.summarize(wire, state).await?, TokenUsage::default()))
    }

    /// Hands the adapter where to tell what it has to say while a call
    /// waits ([`ModelNotice`]); `None` stops telling. The loop sets it for
    /// the run. Adapters that never wait ignore it (the default).
    fn set_notices(&self, sink: Option<NoticeSink>) {
        let _ = sink;
    }
}

//! Extension points of the safety layers: hooks before actions, verifiers at
//! the end, monitors throughout.

use serde::{Deserialize, Serialize};

use crate::TaskState;
use crate::action::{ActionCall, TerminateStatus};
use crate::browser::Screenshot;
use crate::error::Result;
use crate::model::ModelInfo;
use crate::run::StreamEvent;
use crate::usage::TokenUsage;

/// Where an action is about to run.
#[derive(Debug, Clone, Copy)]
pub struct HookContext<'a> {
    /// Step index.
    pub step: u32,
    /// The current URL.
    pub url: &'a str,
    /// The task.
    pub instruction: &'a str,
}

/// A hook's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum HookDecision {
    /// Go on (the policy still applies).
    Allow,
    /// Do not run the action; the model is told `reason`.
    Deny {
        /// Why, phrased for the model.
        reason: String,
    },
}

/// Imperative check run before every action, ahead of the declarative
/// session policy (rate limits, audit logs, confirmations, provider safety
/// checks in [`ActionCall::safety_checks`]).
///
/// Object-safe (`#[async_trait]`). A hook that denies wins; hooks must not
/// block for long, since the model stream waits.
#[async_trait::async_trait]
pub trait PreActionHook: Send + Sync {
    /// Decides whether `call` may run.
    async fn check(&self, call: &ActionCall, ctx: &HookContext<'_>) -> HookDecision;
}

/// What a verifier is shown when the model asks to terminate.
#[derive(Debug, Clone, Copy)]
pub struct VerifyInput<'a> {
    /// The task.
    pub instruction: &'a str,
    /// The page as it is now.
    pub screenshot: &'a Screenshot,
    /// The current URL.
    pub url: &'a str,
    /// The claimed outcome.
    pub status: TerminateStatus,
    /// The claimed answer.
    pub result: &'a str,
    /// The task state.
    pub state: Option<&'a TaskState>,
    /// How many times a terminate was already rejected in this run.
    pub attempt: u32,
}

/// A verifier's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyResult {
    /// Whether the task is done.
    pub passed: bool,
    /// Why not (fed back to the model), or a note when it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Tokens the verification spent (a model verifier's call), counted
    /// into the run's usage as the verifier's.
    #[serde(default, skip_serializing_if = "TokenUsage::is_zero")]
    pub usage: TokenUsage,
}

impl VerifyResult {
    /// A pass.
    pub fn pass() -> Self {
        Self {
            passed: true,
            reason: None,
            usage: TokenUsage::default(),
        }
    }

    /// A rejection with a reason.
    pub fn reject(reason: impl Into<String>) -> Self {
        Self {
            passed: false,
            reason: Some(reason.into()),
            usage: TokenUsage::default(),
        }
    }

    /// The same verdict, with the tokens it cost.
    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = usage;
        self
    }
}

/// Independently confirms that a task is complete before a run may end
/// (design principle 3: terminate is a request).
///
/// Object-safe (`#[async_trait]`). `Err` is fatal only for the verification
/// itself: the loop treats a verifier error as a rejection carrying the error
/// text, so a flaky verifier cannot end a run.
#[async_trait::async_trait]
pub trait Verifier: Send + Sync {
    /// Judges the claimed completion.
    async fn verify(&self, input: &VerifyInput<'_>) -> Result<VerifyResult>;

    /// The model this verifier asks, if any, so that its tokens are priced
    /// at that model's price (a rule-based verifier spends none).
    fn model(&self) -> Option<&ModelInfo> {
        None
    }
}

/// Observes a run. Called synchronously, in order, from the loop: an
/// implementation must return quickly (queue, log, count), never block.
pub trait LoopMonitor: Send + Sync {
    /// Receives one event.
    fn on_event(&self, event: &StreamEvent);
}

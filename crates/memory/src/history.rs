//! [`HistoryManager`]: the wire history the provider sees and the semantic
//! history nobody rewrites.
//!
//! # Compression
//!
//! - **Tier 1** runs every time a screenshot is added: only the newest
//!   [`HistoryConfig::keep_recent`] screenshots keep their image; older ones
//!   become `[screenshot: step N]` markers (`image: None, compressed: true`).
//!   Because it runs on insertion, [`HistoryManager::wire`] is always exactly
//!   what must be sent: a request never carries more than `keep_recent`
//!   images (the original engine compressed after sending and so sent one
//!   more than configured).
//! - **Tier 2** ([`HistoryManager::compact_if_needed`]) asks the adapter to
//!   estimate the tokens of the request that would be sent *now* and, past
//!   `compaction_threshold × context window`, replaces the wire history with
//!   one [`WireRecord::Summary`]. The task state and the fold records live
//!   outside the wire history, so compaction never loses them.
//!
//! # Semantic history
//!
//! [`HistoryManager::record_step`] appends a [`SemanticStep`] as given, with
//! full screenshots, thinking, every action (including the accepted
//! terminate) and usage. Nothing here ever edits it.

use lumen_core::{
    ActionCall, AssistantTurn, ControlRequest, Image, LumenError, ModelAdapter, Result,
    SemanticStep, StepContext, TaskState, TerminateStatus, TokenUsage, ToolResult, WireRecord,
    WireScreenshot,
};
use serde::{Deserialize, Serialize};

use crate::serialize::SerializedHistory;

/// The default number of full screenshots kept in a request.
pub const DEFAULT_KEEP_RECENT: usize = 2;
/// The default share of the context window that triggers tier-2 compaction.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// Longest fold record kept, in characters; longer summaries are cut.
pub const MAX_FOLD_CHARS: usize = 300;

/// How history is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HistoryConfig {
    /// How many of the newest screenshots keep their image in the request
    /// (the current one included). `0` sends no image at all: only markers.
    pub keep_recent: usize,
    /// Tier-2 compaction runs when the estimated size of the next request
    /// exceeds this share of the model's context window (0–1).
    pub compaction_threshold: f64,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        Self {
            keep_recent: DEFAULT_KEEP_RECENT,
            compaction_threshold: DEFAULT_COMPACTION_THRESHOLD,
        }
    }
}

impl HistoryConfig {
    /// Checks the settings: the threshold must be a number in (0, 1].
    pub fn validate(&self) -> Result<()> {
        let t = self.compaction_threshold;
        if !(t > 0.0 && t <= 1.0) {
            return Err(LumenError::config(
                "compactionThreshold",
                format!(
                    "{t} is not a share of the context window; use a value in (0, 1], e.g. 0.8"
                ),
            ));
        }
        Ok(())
    }
}

/// A finished sub-goal the model folded away: one line that stays in every
/// later prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FoldRecord {
    /// The step at which the model folded.
    pub step: u32,
    /// The one-line summary.
    pub summary: String,
}

/// What a tier-2 compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    /// The step at which it ran.
    pub step: u32,
    /// Estimated tokens of the request before.
    pub tokens_before: u64,
    /// Estimated tokens of the request after.
    pub tokens_after: u64,
    /// How many wire records the summary replaced.
    pub records_replaced: usize,
}

/// The wire and semantic histories of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryManager {
    config: HistoryConfig,
    wire: Vec<WireRecord>,
    semantic: Vec<SemanticStep>,
    folds: Vec<FoldRecord>,
    step_count: u32,
    usage: TokenUsage,
}

impl HistoryManager {
    /// An empty history.
    pub fn new(config: HistoryConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The compression settings.
    pub fn config(&self) -> &HistoryConfig {
        &self.config
    }

    /// The wire history exactly as it must be sent: at most `keep_recent`
    /// screenshots carry an image, older ones are markers.
    pub fn wire(&self) -> &[WireRecord] {
        &self.wire
    }

    /// The semantic history, in step order.
    pub fn semantic(&self) -> &[SemanticStep] {
        &self.semantic
    }

    /// Sub-goals folded so far, oldest first.
    pub fn folds(&self) -> &[FoldRecord] {
        &self.folds
    }

    /// Steps completed (the index of the next step).
    pub fn step_count(&self) -> u32 {
        self.step_count
    }

    /// Tokens used by every model call recorded so far.
    pub fn usage(&self) -> TokenUsage {
        self.usage
    }

    /// Adds the screenshot of `step` and applies tier-1 compression, so the
    /// newest `keep_recent` screenshots keep their image.
    pub fn push_screenshot(&mut self, step: u32, image: Image, url: Option<String>) {
        self.wire.push(WireRecord::Screenshot(WireScreenshot {
            step,
            image: Some(image),
            compressed: false,
            url,
        }));
        self.compress();
    }

    /// Records a model turn. Call it before the tool results of its calls.
    pub fn push_assistant(&mut self, turn: AssistantTurn) {
        self.wire.push(WireRecord::Assistant(turn));
    }

    /// Records the answer to one tool call.
    pub fn push_tool_result(&mut self, result: ToolResult) {
        self.wire.push(WireRecord::ToolResult(result));
    }

    /// Appends any record; screenshots go through tier-1 compression.
    pub fn push(&mut self, record: WireRecord) {
        let is_screenshot = matches!(record, WireRecord::Screenshot(_));
        self.wire.push(record);
        if is_screenshot {
            self.compress();
        }
    }

    /// Tier 1: drops the image of every screenshot but the newest
    /// `keep_recent`. Returns how many images it dropped. Runs on every
    /// screenshot insertion; calling it again is harmless.
    pub fn compress(&mut self) -> usize {
        let mut kept = 0;
        let mut dropped = 0;
        for record in self.wire.iter_mut().rev() {
            let WireRecord::Screenshot(shot) = record else {
                continue;
            };
            if shot.image.is_none() {
                continue;
            }
            if kept < self.config.keep_recent {
                kept += 1;
            } else {
                shot.image = None;
                shot.compressed = true;
                dropped += 1;
            }
        }
        dropped
    }

    /// Appends a step to the semantic history, adds its usage to the total
    /// and advances the step count past it.
    pub fn record_step(&mut self, step: SemanticStep) {
        self.usage += step.usage;
        self.step_count = self.step_count.max(step.step.saturating_add(1));
        self.semantic.push(step);
    }

    /// Adds the usage of a model call that is not part of a step (a summary,
    /// a verifier or planner call).
    pub fn add_usage(&mut self, usage: TokenUsage) {
        self.usage += usage;
    }

    /// The terminate the run ended with, as recorded in the semantic history:
    /// the last terminate call that succeeded and was not blocked.
    pub fn accepted_terminate(&self) -> Option<(TerminateStatus, &str)> {
        self.semantic
            .iter()
            .rev()
            .flat_map(|s| s.actions.iter().rev())
            .find_map(|record| match &record.execution.control {
                Some(ControlRequest::Terminate { status, result })
                    if record.execution.ok && record.blocked.is_none() =>
                {
                    Some((*status, result.as_str()))
                }
                _ => None,
            })
    }

    /// Records a folded sub-goal. The summary is reduced to one line of at
    /// most [`MAX_FOLD_CHARS`] characters; an empty summary is refused with
    /// an error the model can read.
    pub fn fold(&mut self, step: u32, summary: &str) -> Result<&FoldRecord> {
        let line = summary.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            return Err(LumenError::invalid_data(
                "fold summary",
                "it is empty; say in one line what the finished sub-goal achieved",
            ));
        }
        let line = match line.char_indices().nth(MAX_FOLD_CHARS) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line,
        };
        self.folds.push(FoldRecord {
            step,
            summary: line,
        });
        Ok(&self.folds[self.folds.len() - 1])
    }

    /// The prompt block listing folded sub-goals, or `None` when there are
    /// none.
    pub fn folds_prompt(&self) -> Option<String> {
        if self.folds.is_empty() {
            return None;
        }
        let mut out = String::from("Sub-goals already completed (do not redo them):");
        for (i, f) in self.folds.iter().enumerate() {
            out.push_str(&format!("\n{}. {}", i + 1, f.summary));
        }
        Some(out)
    }

    /// Whether an estimated request of `estimated_tokens` crosses the
    /// compaction threshold of a `context_window`-token model.
    pub fn needs_compaction(&self, estimated_tokens: u64, context_window: u64) -> bool {
        context_window > 0
            && estimated_tokens as f64 > self.config.compaction_threshold * context_window as f64
    }

    /// Tier 2: estimates the tokens of the request that would be sent now
    /// (`ctx` with its `wire` replaced by this history) with
    /// [`ModelAdapter::estimate_tokens`]; past the threshold it asks the
    /// adapter for a summary and replaces the wire history with one
    /// [`WireRecord::Summary`] anchor.
    ///
    /// When the newest record is a screenshot (compaction after the current
    /// screenshot was added), it is kept after the summary so the request
    /// still shows the page. The task state is passed to the summariser for
    /// context but stays outside the summary. The summariser's usage is not
    /// known here; callers add it with [`add_usage`](Self::add_usage) if
    /// their adapter reports it.
    ///
    /// Returns `Ok(None)` when no compaction was needed. A summariser error
    /// or an empty summary leaves the history untouched.
    pub async fn compact_if_needed(
        &mut self,
        adapter: &dyn ModelAdapter,
        ctx: StepContext<'_>,
    ) -> Result<Option<Compaction>> {
        let window = adapter.info().context_window_tokens;
        let before = adapter.estimate_tokens(&StepContext {
            wire: &self.wire,
            ..ctx
        });
        if !self.needs_compaction(before, window) {
            return Ok(None);
        }
        let summary = adapter.summarize(&self.wire, ctx.state).await?;
        let summary = summary.trim();
        if summary.is_empty() {
            return Err(LumenError::invalid_data(
                "compaction summary",
                "the summariser returned no text; the history was kept",
            ));
        }
        let keep_last = match self.wire.last() {
            Some(WireRecord::Screenshot(_)) => self.wire.pop(),
            _ => None,
        };
        let records_replaced = self.wire.len();
        self.wire = vec![WireRecord::Summary {
            content: summary.to_owned(),
            compacted_at: ctx.step,
        }];
        if let Some(last) = keep_last {
            self.wire.push(last);
        }
        let after = adapter.estimate_tokens(&StepContext {
            wire: &self.wire,
            ..ctx
        });
        tracing::debug!(step = ctx.step, before, after, "tier-2 compaction");
        Ok(Some(Compaction {
            step: ctx.step,
            tokens_before: before,
            tokens_after: after,
            records_replaced,
        }))
    }

    /// A versioned snapshot of this history and `state`, for saving. The
    /// semantic history (large: it holds every screenshot) is included only
    /// when asked for.
    pub fn to_serialized(
        &self,
        state: Option<&TaskState>,
        include_semantic: bool,
    ) -> SerializedHistory {
        SerializedHistory {
            version: crate::serialize::CURRENT_VERSION,
            wire: self.wire.clone(),
            semantic: include_semantic.then(|| self.semantic.clone()),
            state: state.cloned(),
            step_count: self.step_count,
            usage: self.usage,
            folds: self.folds.clone(),
        }
    }

    /// Rebuilds a history from a snapshot, so a run can go on from its next
    /// step. Tier-1 compression is re-applied with `config` (a snapshot saved
    /// with a larger `keep_recent` still sends only `config.keep_recent`
    /// images). The snapshot's state is returned for the caller's
    /// [`StateStore`](crate::StateStore).
    pub fn resume(
        snapshot: SerializedHistory,
        config: HistoryConfig,
    ) -> (HistoryManager, Option<TaskState>) {
        let mut history = HistoryManager {
            config,
            wire: snapshot.wire,
            semantic: snapshot.semantic.unwrap_or_default(),
            folds: snapshot.folds,
            step_count: snapshot.step_count,
            usage: snapshot.usage,
        };
        history.compress();
        (history, snapshot.state)
    }

    /// The tool calls of the newest assistant turn that have no result yet,
    /// in order (a run interrupted between the turn and its results).
    pub fn unanswered_calls(&self) -> Vec<&ActionCall> {
        let Some(pos) = self
            .wire
            .iter()
            .rposition(|r| matches!(r, WireRecord::Assistant(_)))
        else {
            return Vec::new();
        };
        let WireRecord::Assistant(turn) = &self.wire[pos] else {
            return Vec::new();
        };
        let answered: Vec<&str> = self.wire[pos + 1..]
            .iter()
            .filter_map(|r| match r {
                WireRecord::ToolResult(t) => Some(t.call_id.as_str()),
                _ => None,
            })
            .collect();
        turn.calls
            .iter()
            .filter(|c| !answered.contains(&c.id.as_str()))
            .collect()
    }
}

/// The text a compressed screenshot stands for in a request:
/// `[screenshot: step N]`. Adapters render markers with it.
pub fn screenshot_marker(step: u32) -> String {
    format!("[screenshot: step {step}]")
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;

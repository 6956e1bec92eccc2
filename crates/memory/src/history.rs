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
//! - **Older screenshots shrink.** Only the newest screenshot is what the
//!   model grounds its coordinates on; the others kept by tier 1 are there
//!   to compare with, so they are sent at
//!   [`HistoryConfig::older_image_scale`] (half size by default, a quarter
//!   of the image tokens). The loop makes the reduced copy with
//!   [`shrink_image`] off the step's critical path and swaps it in with
//!   [`HistoryManager::replace_older_image`].
//! - **Old turns condense** ([`HistoryConfig::keep_turns`]): once the wire
//!   holds twice `keep_turns` model turns, the oldest `keep_turns` of them
//!   (with their results and screenshot markers) become one line each in a
//!   leading [`WireRecord::Summary`] (`step 3: click x=5 y=9 -> ok`).
//!   Condensing in blocks keeps the request prefix stable between blocks, so
//!   prompt caching still works; the semantic history keeps everything.
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

use crate::serialize::{FoldRecord, SerializedHistory};
use crate::wire_scrub::WireScrub;

/// The default number of full screenshots kept in a request.
pub const DEFAULT_KEEP_RECENT: usize = 2;
/// The default share of the context window that triggers tier-2 compaction.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// Longest fold record kept, in characters; longer summaries are cut.
pub const MAX_FOLD_CHARS: usize = 300;
/// The default scale of screenshots older than the newest one.
pub const DEFAULT_OLDER_IMAGE_SCALE: f64 = 0.5;
/// The default number of newest model turns always sent verbatim.
pub const DEFAULT_KEEP_TURNS: usize = 2;
/// Longest text kept from one condensed turn or result, in characters.
const MAX_CONDENSED_CHARS: usize = 160;

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
    /// Scale (0–1] of the screenshots kept besides the newest one: `0.5`
    /// sends them at half width and height. `1.0` keeps them full size.
    pub older_image_scale: f64,
    /// How many of the newest model turns are always sent verbatim; older
    /// ones are condensed into one summary line each, `keep_turns` at a
    /// time. `None` never condenses.
    pub keep_turns: Option<usize>,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        Self {
            keep_recent: DEFAULT_KEEP_RECENT,
            compaction_threshold: DEFAULT_COMPACTION_THRESHOLD,
            older_image_scale: DEFAULT_OLDER_IMAGE_SCALE,
            keep_turns: Some(DEFAULT_KEEP_TURNS),
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
        let s = self.older_image_scale;
        if !(s > 0.0 && s <= 1.0) {
            return Err(LumenError::config(
                "olderImageScale",
                format!("{s} is not a scale; use a value in (0, 1], e.g. 0.5 (1 keeps full size)"),
            ));
        }
        if self.keep_turns == Some(0) {
            return Err(LumenError::config(
                "keepTurns",
                "0 would send no model turn at all; use at least 1, or null to never condense",
            ));
        }
        Ok(())
    }
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
    /// Tokens the summary call used (zero when the adapter does not say);
    /// already added to this history's usage.
    pub usage: TokenUsage,
}

/// How much of a reading action's output (a page outline, the page's text)
/// stays in history once the model has answered it.
pub const OLD_OUTPUT_KEPT: usize = 2_000;

/// The wire and semantic histories of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryManager {
    config: HistoryConfig,
    scrub: WireScrub,
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

    /// Sets what every record passes on its way into the wire from now on
    /// (see [`WireScrub`]), and runs it over the records already there (a
    /// resumed history).
    pub fn set_scrub(&mut self, scrub: WireScrub) {
        for record in &mut self.wire {
            scrub.apply(record);
        }
        self.scrub = scrub;
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
        self.append(WireRecord::Screenshot(WireScreenshot {
            step,
            image: Some(image),
            compressed: false,
            url,
            tabs: Vec::new(),
        }));
        self.compress();
        self.condense();
    }

    /// Records the open tabs on the newest screenshot (for models told the
    /// tab inventory after each turn).
    pub fn set_tabs(&mut self, tabs: Vec<lumen_core::TabInfo>) {
        if let Some(record) = self
            .wire
            .iter_mut()
            .rev()
            .find(|r| matches!(r, WireRecord::Screenshot(_)))
        {
            if let WireRecord::Screenshot(shot) = record {
                shot.tabs = tabs;
            }
            self.scrub.apply(record);
        }
    }

    /// Swaps in the reduced copy of the screenshot of `step` (made with
    /// [`shrink_image`]) when that screenshot still carries an image and is
    /// no longer the newest. Returns whether it was replaced.
    pub fn replace_older_image(&mut self, step: u32, image: Image) -> bool {
        self.older_shot(step)
            .map(|shot| shot.image = Some(image))
            .is_some()
    }

    /// The screenshot of `step` while it still carries an image and is not
    /// the newest.
    fn older_shot(&mut self, step: u32) -> Option<&mut WireScreenshot> {
        let newest = self
            .wire
            .iter()
            .rposition(|r| matches!(r, WireRecord::Screenshot(_)))?;
        self.wire[..newest].iter_mut().rev().find_map(|r| match r {
            WireRecord::Screenshot(shot) if shot.step == step && shot.image.is_some() => Some(shot),
            _ => None,
        })
    }

    /// Drops the image of the screenshot of `step` (it becomes a marker)
    /// when it is not the newest: for a page that did not change, the same
    /// pixels need not be sent twice. Returns whether it was dropped.
    pub fn drop_older_image(&mut self, step: u32) -> bool {
        self.older_shot(step)
            .map(|shot| {
                shot.image = None;
                shot.compressed = true;
            })
            .is_some()
    }

    /// The one way a new record enters the wire: scrubbed, then appended.
    fn append(&mut self, mut record: WireRecord) {
        self.scrub.apply(&mut record);
        self.wire.push(record);
    }

    /// Condenses the oldest `keep_turns` model turns into the leading
    /// summary once the wire holds twice `keep_turns` of them. Cuts only at
    /// a screenshot (a step boundary), so every tool call stays with its
    /// result.
    fn condense(&mut self) {
        let Some(keep) = self.config.keep_turns.filter(|k| *k > 0) else {
            return;
        };
        let turns: Vec<usize> = self
            .wire
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, WireRecord::Assistant(_)))
            .map(|(i, _)| i)
            .collect();
        if turns.len() < 2 * keep {
            return;
        }
        // The first screenshot after the last turn to condense, before the
        // next turn.
        let Some(cut) = self.wire[turns[keep - 1]..turns[keep]]
            .iter()
            .position(|r| matches!(r, WireRecord::Screenshot(_)))
            .map(|p| p + turns[keep - 1])
        else {
            return;
        };
        let first_kept_step = match &self.wire[cut] {
            WireRecord::Screenshot(s) => s.step,
            _ => return,
        };
        let block: Vec<WireRecord> = self.wire.drain(..cut).collect();
        let mut content = String::new();
        let mut step = None;
        for record in &block {
            match record {
                WireRecord::Summary { content: c, .. } => content.push_str(c),
                WireRecord::Screenshot(s) => step = Some(s.step),
                WireRecord::Assistant(turn) => {
                    let label = step.map(|s| format!("step {}", s + 1));
                    let line = condensed_turn(label.as_deref(), turn, &block);
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&line);
                }
                _ => {}
            }
        }
        self.wire.insert(
            0,
            WireRecord::Summary {
                content,
                compacted_at: first_kept_step,
            },
        );
    }

    /// Records a model turn. Call it before the tool results of its calls.
    /// Older reading outputs keep their first [`OLD_OUTPUT_KEPT`] bytes.
    /// Images earlier results carried (zooms) have been seen by now: they
    /// are dropped, so each is paid for once.
    pub fn push_assistant(&mut self, turn: AssistantTurn) {
        for record in &mut self.wire {
            if let WireRecord::ToolResult(result) = record {
                result.image = None;
                // An old page outline or text is stale (its refs too) and
                // costs tokens every step: its head stays.
                if let Some(output) = &mut result.output
                    && output.len() > OLD_OUTPUT_KEPT
                {
                    let mut end = OLD_OUTPUT_KEPT;
                    while !output.is_char_boundary(end) {
                        end -= 1;
                    }
                    output.truncate(end);
                    output.push_str("\n… (older output cut; read again for fresh refs)");
                }
            }
        }
        self.append(WireRecord::Assistant(turn));
    }

    /// Records the answer to one tool call.
    pub fn push_tool_result(&mut self, result: ToolResult) {
        self.append(WireRecord::ToolResult(result));
    }

    /// Appends any record; screenshots go through tier-1 compression.
    pub fn push(&mut self, record: WireRecord) {
        let is_screenshot = matches!(record, WireRecord::Screenshot(_));
        self.append(record);
        if is_screenshot {
            self.compress();
            self.condense();
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
        if dropped > 0 {
            tracing::debug!(
                target: lumen_core::logs::HISTORY,
                dropped,
                kept,
                "tier-1: older screenshots compressed"
            );
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
    /// context but stays outside the summary. The summariser's usage (as
    /// [`ModelAdapter::summarize_counted`] reports it) is added to this
    /// history's usage and returned in the [`Compaction`], even when the
    /// summary turns out empty.
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
            tracing::debug!(
                target: lumen_core::logs::HISTORY,
                step = ctx.step,
                estimate = before,
                window,
                "no compaction needed"
            );
            return Ok(None);
        }
        let (summary, usage) = adapter.summarize_counted(&self.wire, ctx.state).await?;
        self.add_usage(usage);
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
        let mut record = WireRecord::Summary {
            content: summary.to_owned(),
            compacted_at: ctx.step,
        };
        self.scrub.apply(&mut record);
        self.wire = vec![record];
        if let Some(last) = keep_last {
            self.wire.push(last);
        }
        let after = adapter.estimate_tokens(&StepContext {
            wire: &self.wire,
            ..ctx
        });
        tracing::debug!(
            target: lumen_core::logs::HISTORY,
            step = ctx.step,
            before,
            after,
            window,
            records_replaced,
            "tier-2 compaction"
        );
        Ok(Some(Compaction {
            step: ctx.step,
            tokens_before: before,
            tokens_after: after,
            records_replaced,
            usage,
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
            scrub: WireScrub::default(),
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

/// One line for a condensed model turn: its text (cut short) and each call
/// with what became of it.
fn condensed_turn(label: Option<&str>, turn: &AssistantTurn, block: &[WireRecord]) -> String {
    let mut parts = Vec::new();
    if let Some(text) = turn
        .text
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        parts.push(format!("said \"{}\"", clip(text)));
    }
    for call in &turn.calls {
        let action = terse(&call.action);
        let result = block.iter().find_map(|r| match r {
            WireRecord::ToolResult(t) if t.call_id == call.id => Some(t),
            _ => None,
        });
        let outcome = match result {
            Some(t) if t.ok => "ok".to_owned(),
            Some(t) => format!("error: {}", clip(t.error.as_deref().unwrap_or("failed"))),
            None => "not run".to_owned(),
        };
        parts.push(format!("{action} -> {outcome}"));
    }
    match label {
        Some(l) => format!("{l}: {}", parts.join("; ")),
        None => parts.join("; "),
    }
}

/// An action as `click x=5 y=9`: its JSON form without the punctuation
/// that costs tokens and says nothing.
fn terse(action: &lumen_core::Action) -> String {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(action) else {
        return String::from("?");
    };
    let mut out = fields
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or("?")
        .to_owned();
    for (key, value) in fields.iter().filter(|(k, _)| *k != "type") {
        out.push_str(&format!(" {key}={value}"));
    }
    out
}

fn clip(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_CONDENSED_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// A copy of `image` scaled by `scale` (0–1], in the same format (JPEG at
/// quality 80), for screenshots kept only for comparison. CPU-bound: run it
/// off the async runtime's worker threads.
pub fn shrink_image(image: &Image, scale: f64) -> Result<Image> {
    let bad = |e: String| LumenError::invalid_data("screenshot", e);
    if !(scale > 0.0 && scale <= 1.0) {
        return Err(bad(format!("{scale} is not a scale in (0, 1]")));
    }
    let format = match image.format {
        lumen_core::ImageFormat::Png => image::ImageFormat::Png,
        lumen_core::ImageFormat::Jpeg => image::ImageFormat::Jpeg,
    };
    let decoded = image::load_from_memory_with_format(&image.data, format)
        .map_err(|e| bad(format!("cannot decode it: {e}")))?
        .into_rgb8();
    let width = ((decoded.width() as f64 * scale).round() as u32).max(1);
    let height = ((decoded.height() as f64 * scale).round() as u32).max(1);
    let small = reduce(&decoded, width, height);
    let mut out = Vec::new();
    let encoded = match image.format {
        lumen_core::ImageFormat::Png => small
            .write_with_encoder(image::codecs::png::PngEncoder::new(std::io::Cursor::new(
                &mut out,
            )))
            .map_err(|e| e.to_string()),
        lumen_core::ImageFormat::Jpeg => encode_jpeg(&small, &mut out),
    };
    encoded.map_err(|e| bad(format!("cannot encode the reduced copy: {e}")))?;
    Ok(Image::new(image.format, width, height, out))
}

/// `rgb` as a JPEG at quality 80, with `jpeg-encoder`: a step's shrink runs
/// beside a busy Chromium, and it encodes 640 × 360 in about a third of the
/// time `image`'s encoder takes.
fn encode_jpeg(rgb: &image::RgbImage, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let side = |n: u32| u16::try_from(n).map_err(|_| format!("{n} px is too large for JPEG"));
    jpeg_encoder::Encoder::new(out, 80)
        .encode(
            rgb.as_raw(),
            side(rgb.width())?,
            side(rgb.height())?,
            jpeg_encoder::ColorType::Rgb,
        )
        .map_err(|e| e.to_string())
}

/// `image` shrunk to `width` × `height`: first by the largest whole factor
/// that fits, averaging each square of pixels (the half-size copy of every
/// step is only that, well under a millisecond for a 1280 × 720 screenshot,
/// where `thumbnail` on the whole image took about ten), then by
/// `thumbnail` for what is left.
fn reduce(image: &image::RgbImage, width: u32, height: u32) -> image::RgbImage {
    let k = (image.width() / width).min(image.height() / height);
    if k < 2 {
        return image::imageops::thumbnail(image, width, height);
    }
    let (w, h) = (image.width() / k, image.height() / k);
    let src = image.as_raw();
    let stride = image.width() as usize * 3;
    // u64: a square of k × k pixels of 255 overflows u32 past k = 4104.
    let (k, area) = (k as usize, u64::from(k) * u64::from(k));
    let mut out = vec![0u8; w as usize * h as usize * 3];
    let mut sums = vec![0u64; w as usize * 3];
    for (y, row_out) in out.chunks_exact_mut(w as usize * 3).enumerate() {
        sums.fill(0);
        for dy in 0..k {
            let row = &src[(y * k + dy) * stride..][..w as usize * k * 3];
            for (x, sum) in sums.chunks_exact_mut(3).enumerate() {
                for px in row[x * k * 3..][..k * 3].chunks_exact(3) {
                    sum[0] += u64::from(px[0]);
                    sum[1] += u64::from(px[1]);
                    sum[2] += u64::from(px[2]);
                }
            }
        }
        for (o, s) in row_out.iter_mut().zip(&sums) {
            *o = ((s + area / 2) / area) as u8;
        }
    }
    let boxed = image::RgbImage::from_raw(w, h, out).unwrap_or_default();
    if (w, h) == (width, height) {
        boxed
    } else {
        image::imageops::thumbnail(&boxed, width, height)
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

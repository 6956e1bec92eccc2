//! History records: the provider-facing wire history and the never-mutated
//! semantic history.
//!
//! The wire history is a flat list of [`WireRecord`]s that every adapter
//! translates into its provider's message format. Its order is the protocol:
//!
//! ```text
//! screenshot(step 0)            -> user: [image]
//! assistant(calls a, b)         -> assistant: [tool_use a, tool_use b]
//! tool_result(a), tool_result(b), screenshot(step 1)
//!                               -> user: [result a, result b + image]
//! ```
//!
//! Tool results are appended only after the assistant turn that asked for
//! them has been recorded, even though actions execute while the model is
//! still streaming. Compression replaces old screenshot bytes with a
//! `[screenshot: step N]` marker (`image: None, compressed: true`); tier-2
//! compaction replaces everything with one [`WireRecord::Summary`].

use serde::{Deserialize, Serialize};

use crate::action::ActionCall;
use crate::image::Image;
use crate::outcome::ActionExecution;
use crate::usage::TokenUsage;

/// A block of model reasoning, kept for faithful replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingBlock {
    /// The reasoning text (may be empty when the provider only returns a
    /// redacted or encrypted form).
    pub text: String,
    /// The provider's signature or encrypted payload, which must be sent back
    /// verbatim (Anthropic `signature`, Gemini `thoughtSignature`, OpenAI
    /// `encrypted_content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Whether the block was redacted by the provider.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// A screenshot in wire history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireScreenshot {
    /// The step it was taken at.
    pub step: u32,
    /// The image; `None` once compressed away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    /// Whether tier-1 compression removed the image.
    #[serde(default)]
    pub compressed: bool,
    /// The page URL when it was taken (Gemini wants it with the image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The open tabs when it was taken, for models that are told them
    /// (Anthropic's browser toolset); empty when not recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tabs: Vec<crate::TabInfo>,
}

/// One model turn as it must be replayed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantTurn {
    /// The decoded actions with their tool-call ids, in stream order.
    pub calls: Vec<ActionCall>,
    /// Reasoning blocks, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<ThinkingBlock>,
    /// Plain text the model wrote alongside (or instead of) tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Provider-native content the adapter needs to replay the turn exactly
    /// (tool inputs as the model sent them, response ids, safety checks).
    /// Opaque to everything but the adapter that wrote it; adapters must
    /// accept its absence (a history written by another adapter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderTurn>,
}

/// Provider-native replay data attached to an [`AssistantTurn`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderTurn {
    /// The provider that wrote it (`anthropic`, `openai`, `google`,
    /// `compatible`).
    pub provider: String,
    /// Provider-specific JSON.
    pub data: serde_json::Value,
}

/// The answer to one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The tool-call id it answers.
    pub call_id: String,
    /// The action's `type` tag.
    pub action: String,
    /// Whether the action succeeded.
    pub ok: bool,
    /// The error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Hints the model should read (verifier hints, effect notes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// Provider safety checks the user acknowledged for this call (OpenAI).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acknowledged_safety_checks: Vec<serde_json::Value>,
    /// An image the action made for the model (a zoom's region), shown in
    /// the next request only: history drops it once a newer turn exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::Image>,
    /// What a reading action answered with (page outline, search matches,
    /// page text, tabs). Cut short once a newer turn exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// A download the action started (and whether it completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download: Option<crate::DownloadInfo>,
}

/// A record of the provider-facing history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WireRecord {
    /// A screenshot shown to the model.
    Screenshot(WireScreenshot),
    /// A model turn.
    Assistant(AssistantTurn),
    /// The result of one tool call.
    ToolResult(ToolResult),
    /// A tier-2 summary that replaced everything before it.
    Summary {
        /// The summary text.
        content: String,
        /// The step at which compaction ran.
        #[serde(rename = "compactedAt")]
        compacted_at: u32,
    },
}

/// One action in semantic history, with everything that happened to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionRecord {
    /// The call as decoded.
    pub call: ActionCall,
    /// What executing it did. For a blocked action this is the failure the
    /// model saw.
    pub execution: ActionExecution,
    /// Why it was blocked, when a hook or policy blocked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// One step of semantic history: full, never compressed or mutated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SemanticStep {
    /// Step index, from 0.
    pub step: u32,
    /// URL at the start of the step.
    pub url: String,
    /// The screenshot the model saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<Image>,
    /// Reasoning the model returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<ThinkingBlock>,
    /// Text the model wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Every action of the step, including an accepted terminate.
    pub actions: Vec<ActionRecord>,
    /// Tokens this step's model call(s) used.
    #[serde(default)]
    pub usage: TokenUsage,
    /// Start time, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// Whole step wall time, milliseconds.
    pub duration_ms: u64,
    /// Time spent waiting for the model, milliseconds.
    #[serde(default)]
    pub model_ms: u64,
}

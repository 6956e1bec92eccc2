//! Anthropic Messages API (`POST /v1/messages`, SSE) with the computer tool,
//! the computer toolset or the browser toolset.
//!
//! - **Tools** from the model registry: `computer_toolset_20260801` (GA, no
//!   beta; members called by name) for the 5.x generation,
//!   `computer_20251124` (beta `computer-use-2025-11-24`, zoom enabled) for
//!   Opus 4.5–4.8 and Sonnet 4.6, `computer_20250124` for older models; or
//!   `browser_toolset_20260801` when asked for (`AdapterOptions::tools`),
//!   whose successful results carry a `browser_state` block. The single
//!   tool's display size is the screenshot's size, so the model's pixels are
//!   screenshot pixels and the decoder scales them.
//! - **Thinking and sampling** from the registry: adaptive thinking with an
//!   effort, or a manual budget (at least 1,024); never a temperature.
//! - **History** is replayed in Anthropic's own format: the assistant's
//!   content blocks exactly as the model sent them (tool inputs, thinking
//!   with signatures), one `tool_result` per tool_use id (the results of a
//!   call's parts folded together, `is_error` when any failed), the newest
//!   screenshot inside the last tool result, compressed screenshots as
//!   `[screenshot: step N]` text, and a summary anchor as text.
//! - **Prompt caching**: `cache_control` breakpoints on the tools, on the
//!   fixed system text, and on the last block of the two newest user turns.
//!   The loop's per-step prompt (URL, step budget, state, nudges) changes
//!   every step, so it goes *after* the last breakpoint, as the final text
//!   block of the newest user turn; everything before it is byte-stable
//!   from one step to the next and is read from the cache.

use std::collections::BTreeMap;

use lumen_core::{
    Action, AssistantTurn, ImageScale, LumenError, ModelErrorKind, ModelEvent, ModelResponse,
    MouseButton, Result, ScrollDirection, ScrollUnit, StepContext, TerminateStatus, ThinkingBlock,
    TokenUsage, ToolResult, WireRecord,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::adapter::{Codec, HttpAdapter};
use crate::decoder::ActionDecoder;
use crate::http::{SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry::{self, ModelSpec, ThinkingStyle, ToolFamily};
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use crate::{AdapterOptions, Effort, Provider, join_url};

mod actions;
mod answer;
mod request;
pub use answer::StreamParser;
use answer::*;
use request::*;

const PROVIDER: &str = "anthropic";
const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
const DEFAULT_SUMMARY_MODEL: &str = "claude-haiku-4-5";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// The computer tool versions Lumen speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputerTool {
    /// `computer_20250124` (Claude 3.7 and Claude 4 up to 4.5, except Opus 4.5).
    V20250124,
    /// `computer_20251124` (Claude Opus 4.5 and every Claude ≥ 4.6): adds zoom.
    V20251124,
    /// `computer_toolset_20260801` (GA, no beta header): one `tools[]`
    /// entry without a name; the model calls each member (`left_click`,
    /// `type`, `scroll`…) as its own tool with the member's input.
    Toolset20260801,
    /// `browser_toolset_20260801` (GA, no beta header), in place of a
    /// computer tool: navigation, tabs, `read_page` and `find` answering
    /// with element refs, `form_input`, clicks on a coordinate or a ref,
    /// and a `browser_state` block (open tabs, tabs opened) in each
    /// successful result.
    BrowserToolset20260801,
}

impl ComputerTool {
    /// The tool version a model takes (from the [`registry`]).
    ///
    /// [`registry`]: crate::registry
    pub fn for_model(model: &str) -> Self {
        match registry::spec(Provider::Anthropic, model).tools {
            ToolFamily::AnthropicComputer(tool) => tool,
            _ => ComputerTool::V20250124,
        }
    }

    /// The tool `type`.
    pub fn tool_type(&self) -> &'static str {
        match self {
            ComputerTool::V20250124 => "computer_20250124",
            ComputerTool::V20251124 => "computer_20251124",
            ComputerTool::Toolset20260801 => "computer_toolset_20260801",
            ComputerTool::BrowserToolset20260801 => "browser_toolset_20260801",
        }
    }

    /// The beta header that enables it (none for the GA toolset).
    pub fn beta(&self) -> Option<&'static str> {
        match self {
            ComputerTool::V20250124 => Some("computer-use-2025-01-24"),
            ComputerTool::V20251124 => Some("computer-use-2025-11-24"),
            ComputerTool::Toolset20260801 | ComputerTool::BrowserToolset20260801 => None,
        }
    }

    /// Whether the model calls members by name (the toolset) rather than
    /// one `computer` tool with an `action` field.
    pub fn is_toolset(&self) -> bool {
        matches!(
            self,
            ComputerTool::Toolset20260801 | ComputerTool::BrowserToolset20260801
        )
    }
}

/// `claude-opus-4-5-20251101` → `("opus", 4, 5)`; `claude-sonnet-4-20250514`
/// → `("sonnet", 4, 0)`; also the older `claude-3-7-sonnet-…` order.
pub(crate) fn claude_version(model: &str) -> Option<(&str, u32, u32)> {
    let rest = model.strip_prefix("claude-")?;
    let parts: Vec<&str> = rest.split('-').collect();
    let small = |s: &&str| s.len() <= 2 && s.parse::<u32>().is_ok();
    let num = |s: &str| s.parse::<u32>().ok();
    match parts.as_slice() {
        [family, major, minor, ..] if !small(family) && small(major) && small(minor) => {
            Some((family, num(major)?, num(minor)?))
        }
        [family, major, ..] if !small(family) && small(major) => Some((family, num(major)?, 0)),
        [major, minor, family, ..] if small(major) && small(minor) => {
            Some((family, num(major)?, num(minor)?))
        }
        [major, family, ..] if small(major) => Some((family, num(major)?, 0)),
        _ => None,
    }
}

/// How a request asks for thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Thinking {
    /// `{type: enabled, budget_tokens}` (models before adaptive thinking).
    Budget(u32),
    /// `{type: adaptive}` with `output_config.effort`.
    Adaptive(Effort),
}

/// The Anthropic adapter: the shared HTTP adapter over [`AnthropicCodec`].
pub type AnthropicAdapter = HttpAdapter<AnthropicCodec>;

/// Anthropic's wire format: Messages requests, their stream and answers.
#[derive(Debug)]
pub struct AnthropicCodec {
    model: String,
    key: crate::http::ApiKey,
    spec: &'static ModelSpec,
    base_url: String,
    tool: ComputerTool,
    opt_ins: crate::BrowserOptIns,
    /// Which session-dependent own tools to offer.
    own: prompt::OwnTools,
    max_tokens: u32,
    thinking: Option<Thinking>,
    summary_model: String,
}

impl HttpAdapter<AnthropicCodec> {
    /// An adapter for `model` (`claude-sonnet-4-6`). Needs
    /// `options.api_key`.
    pub fn new(model: &str, options: AdapterOptions) -> Result<Self> {
        let own = prompt::OwnTools::of(&options);
        let key = options.api_key.clone().ok_or_else(|| {
            LumenError::config(
                "anthropic api key",
                "no API key: set ANTHROPIC_API_KEY or pass AdapterOptions::api_key",
            )
        })?;
        let http = options.http(PROVIDER, key.clone())?;
        let spec = registry::spec(Provider::Anthropic, model);
        let thinking = match spec.thinking {
            // Manual budgets below the API's minimum are raised to it.
            ThinkingStyle::Budget { min } => options
                .thinking_budget
                .filter(|b| *b > 0)
                .map(|b| Thinking::Budget(b.max(min))),
            // These models reject a manual budget: the budget becomes an
            // effort.
            _ => options.wanted_effort().map(Thinking::Adaptive),
        };
        let tool = match (options.tools, spec.tools) {
            (Some(crate::Tools::Browser), _) => ComputerTool::BrowserToolset20260801,
            (_, ToolFamily::AnthropicComputer(tool)) => tool,
            _ => ComputerTool::V20250124,
        };
        let mut info = spec.info(model, 28, true);
        info.tab_inventory = tool == ComputerTool::BrowserToolset20260801;
        let codec = AnthropicCodec {
            model: model.to_owned(),
            key,
            spec,
            base_url: options
                .base_url
                .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            tool,
            opt_ins: options.browser_opt_ins,
            own,
            max_tokens: options.max_tokens.unwrap_or(spec.max_output),
            thinking,
            summary_model: options
                .summary_model
                .unwrap_or_else(|| DEFAULT_SUMMARY_MODEL.to_owned()),
        };
        Ok(Self { info, http, codec })
    }

    /// The computer tool version in use.
    pub fn computer_tool(&self) -> ComputerTool {
        self.codec.tool
    }

    /// The request body for one step (public so tests can pin it).
    pub fn request_body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        self.codec.request_body(ctx, stream)
    }
}

impl AnthropicCodec {
    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut betas: Vec<&str> = self.tool.beta().into_iter().collect();
        // Adaptive thinking interleaves by itself; manual budgets need the
        // beta to think between tool calls.
        if matches!(self.thinking, Some(Thinking::Budget(_))) {
            betas.push(INTERLEAVED_THINKING_BETA);
        }
        betas.extend(self.spec.betas);
        let mut headers = vec![
            ("x-api-key", self.key.expose().to_owned()),
            ("anthropic-version", API_VERSION.to_owned()),
        ];
        if !betas.is_empty() {
            headers.push(("anthropic-beta", betas.join(",")));
        }
        headers
    }

    /// The request body for one step.
    fn request_body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        let image = ctx.screenshot.image.size();
        // The toolset carries no name and no display size: the model reads
        // the size off the screenshots. Every member, zoom included, is on.
        let computer = match self.tool {
            ComputerTool::Toolset20260801 => json!({"type": self.tool.tool_type()}),
            // The members off by default: the read-only ones on, the
            // dangerous ones as the operator chose (said either way, so a
            // change of the API's defaults changes nothing here).
            ComputerTool::BrowserToolset20260801 => json!({
                "type": self.tool.tool_type(),
                "configs": {
                    "read_console": {"enabled": true},
                    "read_network": {"enabled": true},
                    "javascript_exec": {"enabled": self.opt_ins.javascript_exec},
                    "file_upload": {"enabled": self.opt_ins.file_upload},
                },
            }),
            ComputerTool::V20250124 | ComputerTool::V20251124 => {
                let mut tool = json!({
                    "type": self.tool.tool_type(),
                    "name": "computer",
                    "display_width_px": image.width,
                    "display_height_px": image.height,
                });
                if self.tool == ComputerTool::V20251124 {
                    tool["enable_zoom"] = json!(true);
                }
                tool
            }
        };
        let mut tools = vec![computer];
        let browser = self.tool == ComputerTool::BrowserToolset20260801;
        for (name, description, schema) in prompt::own_tools(self.own) {
            // The browser toolset has its own navigation, tabs and text.
            if browser && prompt::BROWSER_TOOLSET_HAS.contains(&name) {
                continue;
            }
            tools.push(json!({"name": name, "description": description, "input_schema": schema}));
        }
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = ephemeral();
        }
        let budget = match self.thinking {
            Some(Thinking::Budget(b)) => b,
            _ => 0,
        };
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens + budget,
            "system": [{"type": "text", "text": prompt::MECHANICS, "cache_control": ephemeral()}],
            "tools": tools,
            "messages": build_messages(ctx, self.tool),
        });
        match self.thinking {
            Some(Thinking::Budget(budget)) => {
                body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
            }
            Some(Thinking::Adaptive(effort)) => {
                // Newer models omit the thinking text unless asked; the
                // live reasoning stream needs it.
                body["thinking"] = json!({"type": "adaptive", "display": "summarized"});
                body["output_config"] = json!({"effort": effort.anthropic()});
            }
            // The registry decides: Anthropic's current request types have
            // no temperature (and it never went with thinking).
            None => {
                if let Some(t) = ctx.temperature
                    && self.spec.takes_temperature(false)
                {
                    body["temperature"] = crate::temperature_json(t);
                }
            }
        }
        if stream {
            body["stream"] = json!(true);
        }
        body
    }
}

/// Anthropic tool ids match `^[a-zA-Z0-9_-]+$`.
fn safe_id(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() {
        "call".to_owned()
    } else {
        safe
    }
}

/// The API's limit for a text field of a `browser_state` block.
const STATE_FIELD_MAX: usize = 4096;

/// A `browser_state` field cut to the API's limit.
fn cap(text: &str) -> String {
    if text.len() <= STATE_FIELD_MAX {
        return text.to_owned();
    }
    let mut end = STATE_FIELD_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A text block with nothing but white space (which the API refuses).
fn is_blank_text(block: &Value) -> bool {
    block["type"] == "text" && block["text"].as_str().is_none_or(|t| t.trim().is_empty())
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

impl Codec for AnthropicCodec {
    type Parser = StreamParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn url(&self, _stream: bool) -> String {
        join_url(&self.base_url, "v1/messages")
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        AnthropicCodec::headers(self)
    }

    fn body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        self.request_body(ctx, stream)
    }

    fn parser(&self, decoder: ActionDecoder) -> StreamParser {
        StreamParser::new(decoder)
    }

    fn answer(&self, decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
        parse_message(decoder, answer)
    }

    /// Anthropic's image rule (see [`image_tokens`]).
    fn image_tokens(&self, width: u32, height: u32) -> u64 {
        image_tokens(width, height)
    }

    fn overhead_chars(&self) -> usize {
        1500
    }

    fn summary_request(&self, text: String) -> (String, Vec<(&'static str, String)>, Value) {
        let body = json!({
            "model": self.summary_model,
            "max_tokens": 1024,
            "system": prompt::SUMMARIZE,
            "messages": [{"role": "user", "content": text}],
        });
        let headers = vec![
            ("x-api-key", self.key.expose().to_owned()),
            ("anthropic-version", API_VERSION.to_owned()),
        ];
        (join_url(&self.base_url, "v1/messages"), headers, body)
    }

    fn summary_text(&self, answer: Value) -> Result<String> {
        let message: WireMessage = serde_json::from_value(answer)
            .map_err(|e| stream_error(PROVIDER, format!("unexpected summary answer: {e}")))?;
        Ok(message
            .content
            .iter()
            .filter_map(|b| match b {
                WireBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect())
    }
}

/// Tokens of one image: Anthropic scales images down to ≤1568 px on the
/// long edge (and ≈1.15 MP) before counting w×h/750.
pub fn image_tokens(width: u32, height: u32) -> u64 {
    let (mut w, mut h) = (width as f64, height as f64);
    let long = w.max(h);
    if long > 1568.0 {
        let f = 1568.0 / long;
        w *= f;
        h *= f;
    }
    let mp = w * h;
    if mp > 1_150_000.0 {
        let f = (1_150_000.0 / mp).sqrt();
        w *= f;
        h *= f;
    }
    ((w * h) / 750.0).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_version_follows_the_model() {
        for (model, tool) in [
            ("claude-opus-4-6", ComputerTool::V20251124),
            ("claude-sonnet-4-6", ComputerTool::V20251124),
            ("claude-opus-4-5-20251101", ComputerTool::V20251124),
            ("claude-sonnet-4-5-20250929", ComputerTool::V20250124),
            ("claude-haiku-4-5", ComputerTool::V20250124),
            ("claude-sonnet-4-20250514", ComputerTool::V20250124),
            ("claude-3-7-sonnet-20250219", ComputerTool::V20250124),
            ("claude-opus-4-7", ComputerTool::V20251124),
            ("claude-sonnet-5", ComputerTool::Toolset20260801),
            ("claude-opus-5", ComputerTool::Toolset20260801),
            // An unknown id gets the newest rules, not the oldest.
            ("something-else", ComputerTool::Toolset20260801),
        ] {
            assert_eq!(ComputerTool::for_model(model), tool, "{model}");
        }
    }

    #[test]
    fn the_toolset_is_one_nameless_entry_with_no_beta_header() {
        let adapter = AnthropicAdapter::new(
            "claude-sonnet-5",
            AdapterOptions {
                api_key: Some(crate::ApiKey::new("test-key-0123456789")),
                ..AdapterOptions::default()
            },
        )
        .unwrap();
        let shot = lumen_core::Screenshot {
            image: lumen_core::Image::new(lumen_core::ImageFormat::Png, 1280, 720, vec![0]),
            viewport: lumen_core::Size::new(1280, 720),
            scale: ImageScale::IDENTITY,
        };
        let ctx = StepContext {
            step: 0,
            max_steps: 5,
            instruction: "t",
            system_prompt: "",
            screenshot: &shot,
            wire: &[],
            state: None,
            url: "http://127.0.0.1/",
            temperature: Some(0.5),
            cursor: None,
        };
        let body = adapter.request_body(&ctx, true);
        assert_eq!(
            body["tools"][0],
            json!({"type": "computer_toolset_20260801"})
        );
        assert!(body.get("temperature").is_none());
        assert!(
            adapter
                .codec()
                .headers()
                .iter()
                .all(|(name, _)| *name != "anthropic-beta")
        );
    }

    #[test]
    fn image_tokens_follow_the_750_rule() {
        assert_eq!(image_tokens(1000, 750), 1000);
        // 1280x720 = 921,600 px -> 1229 tokens.
        assert_eq!(image_tokens(1280, 720), 1229);
        // Large images are scaled to 1568 on the long edge and 1.15 MP first.
        assert!(image_tokens(4000, 3000) <= 1534);
    }
}

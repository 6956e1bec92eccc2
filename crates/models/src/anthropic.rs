//! Anthropic Messages API (`POST /v1/messages`, SSE) with the computer tool.
//!
//! - **Tool version** by model: `computer_20251124` (beta
//!   `computer-use-2025-11-24`, zoom enabled) for Claude Opus 4.5 and every
//!   Claude ≥ 4.6; `computer_20250124` (beta `computer-use-2025-01-24`) for
//!   older models. The display size is the screenshot's size, so the model's
//!   pixels are screenshot pixels and the decoder scales them.
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
use crate::http::{Http, SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry::{self, ModelSpec, ThinkingStyle, ToolFamily};
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use crate::{AdapterOptions, Effort, Provider, join_url};

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
    max_tokens: u32,
    thinking: Option<Thinking>,
    summary_model: String,
}

impl HttpAdapter<AnthropicCodec> {
    /// An adapter for `model` (`claude-sonnet-4-6`). Needs
    /// `options.api_key`.
    pub fn new(model: &str, options: AdapterOptions) -> Result<Self> {
        let key = options.api_key.clone().ok_or_else(|| {
            LumenError::config(
                "anthropic api key",
                "no API key: set ANTHROPIC_API_KEY or pass AdapterOptions::api_key",
            )
        })?;
        let http = Http::new(
            PROVIDER,
            key.clone(),
            options.retry,
            options.deadlines,
            options.connect_timeout,
        )?
        .observed(options.wire_observer.clone());
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
            ComputerTool::Toolset20260801 | ComputerTool::BrowserToolset20260801 => {
                json!({"type": self.tool.tool_type()})
            }
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
        for (name, description, schema) in prompt::own_tools() {
            // The browser toolset has its own `navigate`.
            if browser && name == "navigate" {
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
                body["thinking"] = json!({"type": "adaptive"});
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

// ----- request building ------------------------------------------------------

/// Builds `messages` from wire history (see the module docs).
fn build_messages(ctx: &StepContext<'_>, tool: ComputerTool) -> Vec<Value> {
    let mut b = MessageBuilder {
        toolset: tool.is_toolset(),
        browser: tool == ComputerTool::BrowserToolset20260801,
        ..MessageBuilder::default()
    };
    // The tabs the model has been told of, to report the ones opened since.
    let mut known_tabs: Vec<String> = Vec::new();
    let scale = ctx.screenshot.scale;
    let mut saw_screenshot = false;
    for record in ctx.wire {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                b.flush_results();
                b.user_block(
                    json!({"type": "text", "text": prompt::summary_text(content, *compacted_at)}),
                );
            }
            WireRecord::Screenshot(shot) => {
                b.flush_results();
                saw_screenshot = true;
                if b.browser && !shot.tabs.is_empty() {
                    b.browser_state(&shot.tabs, &known_tabs);
                    known_tabs = shot.tabs.iter().map(|t| t.id.clone()).collect();
                }
                match &shot.image {
                    Some(img) => b.screenshot(json!({
                        "type": "image",
                        "source": {"type": "base64", "media_type": img.format.mime(), "data": img.to_base64()},
                    })),
                    None => b.marker(shot.step),
                }
            }
            WireRecord::Assistant(turn) => {
                b.flush_results();
                b.assistant(turn, scale);
            }
            WireRecord::ToolResult(r) => b.results.push(r.clone()),
            _ => {}
        }
    }
    b.flush_results();
    if !saw_screenshot {
        let img = &ctx.screenshot.image;
        b.screenshot(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": img.format.mime(), "data": img.to_base64()},
        }));
    }
    b.finish(ctx.system_prompt)
}

#[derive(Default)]
struct MessageBuilder {
    /// Whether computer actions are toolset members (named by action).
    toolset: bool,
    /// Whether the browser toolset is in use (tool results carry a
    /// `browser_state` block; other adapters' turns are told as text).
    browser: bool,
    /// Downloads the results just emitted started, by tool-use id, for the
    /// next `browser_state` block.
    downloads: Vec<(String, lumen_core::DownloadInfo)>,
    messages: Vec<Value>,
    /// tool_use ids of the last assistant turn, each with the ids of the
    /// action calls it decoded into.
    pending: Vec<(String, Vec<String>)>,
    results: Vec<ToolResult>,
}

impl MessageBuilder {
    fn push(&mut self, role: &str, block: Value) {
        match self.messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.push(block);
                }
            }
            _ => self
                .messages
                .push(json!({"role": role, "content": [block]})),
        }
    }

    fn user_block(&mut self, block: Value) {
        self.push("user", block);
    }

    /// The screenshot goes inside the tool result it follows (the computer
    /// tool's answer), else it stands alone in the user turn.
    fn screenshot(&mut self, block: Value) {
        if let Some(last) = self.messages.last_mut()
            && last["role"] == "user"
            && let Some(content) = last["content"].as_array_mut()
            && let Some(result) = content.last_mut()
            && result["type"] == "tool_result"
            && let Some(inner) = result["content"].as_array_mut()
        {
            inner.push(block);
            return;
        }
        self.user_block(block);
    }

    /// A compressed screenshot. Inside a tool result that already says
    /// what happened, its marker would add tokens and nothing else; alone
    /// in a user turn it keeps the turn from being empty.
    fn marker(&mut self, step: u32) {
        let in_result = self.messages.last().is_some_and(|last| {
            last["role"] == "user"
                && last["content"]
                    .as_array()
                    .and_then(|c| c.last())
                    .is_some_and(|r| {
                        r["type"] == "tool_result"
                            && r["content"].as_array().is_some_and(|c| !c.is_empty())
                    })
        });
        if !in_result {
            self.user_block(json!({"type": "text", "text": prompt::screenshot_marker(step)}));
        }
    }

    fn assistant(&mut self, turn: &AssistantTurn, scale: ImageScale) {
        if self.messages.is_empty() {
            self.user_block(json!({"type": "text", "text": "(the history starts here)"}));
        }
        let native = turn
            .provider
            .as_ref()
            .filter(|p| p.provider == PROVIDER)
            .and_then(|p| p.data.get("content"))
            .and_then(Value::as_array);
        let groups = prompt::call_groups(turn);
        let mut blocks: Vec<Value> = Vec::new();
        self.pending.clear();
        match native {
            Some(content) => {
                for block in content {
                    if block["type"] == "tool_use"
                        && let Some(id) = block["id"].as_str()
                    {
                        let ids = groups
                            .iter()
                            .find(|(g, _)| g == id)
                            .map_or_else(|| vec![id.to_owned()], |(_, ids)| ids.clone());
                        self.pending.push((id.to_owned(), ids));
                    }
                    // The API refuses empty text blocks; a stream can end
                    // one with nothing in it.
                    if !is_blank_text(block) {
                        blocks.push(block.clone());
                    }
                }
            }
            None => {
                for t in &turn.thinking {
                    // Only signed thinking can be replayed; unsigned text from
                    // another provider would be rejected.
                    match (&t.signature, t.redacted) {
                        (Some(sig), true) => {
                            blocks.push(json!({"type": "redacted_thinking", "data": sig}))
                        }
                        (Some(sig), false) => blocks.push(
                            json!({"type": "thinking", "thinking": t.text, "signature": sig}),
                        ),
                        (None, _) => {}
                    }
                }
                if let Some(text) = turn.text.as_ref().filter(|t| !t.trim().is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                // The browser toolset's members take other inputs than our
                // actions: another adapter's turn is told as text, and its
                // results follow as text.
                if self.browser {
                    let told: Vec<String> = turn
                        .calls
                        .iter()
                        .filter(|c| c.id != stream::TEXT_ANSWER_ID)
                        .map(|c| {
                            let action = serde_json::to_string(&c.action).unwrap_or_default();
                            format!("[action {}] {action}", c.id)
                        })
                        .collect();
                    if !told.is_empty() {
                        blocks.push(json!({"type": "text", "text": told.join("\n")}));
                    }
                }
                // Without native data each action is its own tool call (ids
                // made safe for Anthropic's id pattern), answered on its own.
                for call in turn.calls.iter().filter(|_| !self.browser) {
                    if call.id == stream::TEXT_ANSWER_ID {
                        continue;
                    }
                    let id = safe_id(&call.id);
                    let (name, input) = encode_action(&call.action, scale, self.toolset);
                    blocks
                        .push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                    self.pending.push((id, vec![call.id.clone()]));
                }
            }
        }
        if blocks.is_empty() {
            blocks.push(json!({"type": "text", "text": "(no answer)"}));
        }
        for block in blocks {
            self.push("assistant", block);
        }
    }

    /// Adds a `browser_state` block (the open tabs, exactly one active, and
    /// the tabs opened since the model last heard) to the last successful
    /// tool result of the newest user turn: at most one per result, never
    /// on an error.
    fn browser_state(&mut self, tabs: &[lumen_core::TabInfo], known: &[String]) {
        let Some(last) = self.messages.last_mut() else {
            return;
        };
        if last["role"] != "user" {
            return;
        }
        let Some(result) = last["content"].as_array_mut().and_then(|c| {
            c.iter_mut()
                .rev()
                .find(|b| b["type"] == "tool_result" && b["is_error"] != true)
        }) else {
            return;
        };
        let active = tabs.iter().position(|t| t.followed).unwrap_or(0);
        let entries: Vec<Value> = tabs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({
                    "tab_id": cap(&t.id),
                    "title": cap(&t.title),
                    "url": cap(&t.url),
                    "active": i == active,
                })
            })
            .collect();
        let mut block = json!({"type": "browser_state", "tabs": entries});
        let mut changes: Vec<Value> = tabs
            .iter()
            .filter(|t| !known.is_empty() && !known.contains(&t.id))
            .map(|t| json!({"type": "tab_opened", "tab_id": cap(&t.id)}))
            .collect();
        // A download is known by the call that started it.
        for (call, d) in std::mem::take(&mut self.downloads) {
            let id = format!("download_{}", safe_id(&call));
            changes
                .push(json!({"type": "download_started", "download_id": id, "url": cap(&d.url)}));
            if d.completed {
                let mut done =
                    json!({"type": "download_completed", "download_id": id, "url": cap(&d.url)});
                if let Some(path) = &d.path {
                    done["path"] = json!(cap(path));
                }
                changes.push(done);
            }
        }
        // An empty list of changes is never sent.
        if !changes.is_empty() {
            block["state_changes"] = json!(changes);
        }
        if let Some(content) = result["content"].as_array_mut() {
            content.push(block);
        }
    }

    /// Emits the tool results of the last assistant turn: one per tool_use
    /// id, in order; results for ids the turn did not send (a text answer's
    /// terminate) become plain text.
    fn flush_results(&mut self) {
        if self.pending.is_empty() && self.results.is_empty() {
            return;
        }
        let results = std::mem::take(&mut self.results);
        let refs: Vec<&ToolResult> = results.iter().collect();
        let pending = std::mem::take(&mut self.pending);
        self.downloads = results
            .iter()
            .filter_map(|r| r.download.clone().map(|d| (r.call_id.clone(), d)))
            .collect();
        for (id, ids) in &pending {
            let answer = prompt::answer_for(ids, &refs);
            let mut content = vec![json!({"type": "text", "text": answer.text})];
            // A zoom's region, inside the result it answers.
            for img in results
                .iter()
                .filter(|r| ids.contains(&r.call_id))
                .filter_map(|r| r.image.as_ref())
            {
                content.push(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": img.format.mime(), "data": img.to_base64()},
                }));
            }
            let mut block = json!({
                "type": "tool_result",
                "tool_use_id": id,
                "content": content,
            });
            if !answer.ok {
                block["is_error"] = json!(true);
            }
            self.user_block(block);
        }
        for r in &results {
            if pending.iter().any(|(_, ids)| ids.contains(&r.call_id)) {
                continue;
            }
            let status = match (&r.error, r.ok) {
                (_, true) => "ok".to_owned(),
                (Some(e), false) => format!("error: {e}"),
                (None, false) => "error".to_owned(),
            };
            let mut text = format!("Result of `{}`: {status}", r.action);
            for h in &r.hints {
                text.push_str(&format!("\nhint: {h}"));
            }
            self.user_block(json!({"type": "text", "text": text}));
        }
    }

    fn finish(mut self, system_prompt: &str) -> Vec<Value> {
        // Breakpoints on the last block of the two newest user turns.
        let user_turns: Vec<usize> = self
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m["role"] == "user")
            .map(|(i, _)| i)
            .collect();
        for &i in user_turns.iter().rev().take(2) {
            if let Some(block) = self.messages[i]["content"]
                .as_array_mut()
                .and_then(|c| c.last_mut())
            {
                block["cache_control"] = ephemeral();
            }
        }
        if !system_prompt.trim().is_empty() {
            self.user_block(json!({"type": "text", "text": system_prompt}));
        }
        self.messages
    }
}

/// Re-encodes one of our actions as an Anthropic tool call, for history that
/// has no native replay data (written by another adapter). Coordinates go
/// back to screenshot pixels with the current scale. With the toolset, a
/// computer action is called by its member's name, without `action`.
fn encode_action(action: &Action, scale: ImageScale, toolset: bool) -> (String, Value) {
    let (name, mut input) = encode_computer(action, scale);
    if toolset
        && name == "computer"
        && let Some(member) = input
            .as_object_mut()
            .and_then(|m| m.remove("action"))
            .and_then(|a| a.as_str().map(str::to_owned))
    {
        return (member, input);
    }
    (name.to_owned(), input)
}

/// [`encode_action`] for the single `computer` tool.
fn encode_computer(action: &Action, scale: ImageScale) -> (&'static str, Value) {
    let px = |x: i32, y: i32| {
        let (ix, iy) = scale.css_to_image(lumen_core::Point::new(x, y));
        json!([ix.round() as i64, iy.round() as i64])
    };
    let computer = |v: Value| ("computer", v);
    match action {
        Action::Click { x, y, button, .. } => computer(json!({
            "action": match button {
                MouseButton::Left => "left_click",
                MouseButton::Right => "right_click",
                MouseButton::Middle => "middle_click",
            },
            "coordinate": px(*x, *y),
        })),
        Action::DoubleClick { x, y, .. } => {
            computer(json!({"action": "double_click", "coordinate": px(*x, *y)}))
        }
        Action::TripleClick { x, y, .. } => {
            computer(json!({"action": "triple_click", "coordinate": px(*x, *y)}))
        }
        Action::Hover { x, y } => {
            computer(json!({"action": "mouse_move", "coordinate": px(*x, *y)}))
        }
        Action::Drag {
            start_x,
            start_y,
            end_x,
            end_y,
            ..
        } => computer(json!({
            "action": "left_click_drag",
            "start_coordinate": px(*start_x, *start_y),
            "coordinate": px(*end_x, *end_y),
        })),
        Action::MouseDown { .. } => computer(json!({"action": "left_mouse_down"})),
        Action::MouseUp { .. } => computer(json!({"action": "left_mouse_up"})),
        Action::Scroll {
            x,
            y,
            direction,
            amount,
            unit,
            ..
        } => {
            let clicks = match unit {
                ScrollUnit::Clicks => *amount,
                ScrollUnit::Pixels => amount / lumen_core::action::PIXELS_PER_WHEEL_CLICK,
                ScrollUnit::Pages => amount * 5.0,
            };
            computer(json!({
                "action": "scroll",
                "coordinate": px(*x, *y),
                "scroll_direction": match direction {
                    ScrollDirection::Up => "up",
                    ScrollDirection::Down => "down",
                    ScrollDirection::Left => "left",
                    ScrollDirection::Right => "right",
                },
                "scroll_amount": clicks.round().max(1.0) as i64,
            }))
        }
        Action::Type { text } => computer(json!({"action": "type", "text": text})),
        Action::KeyPress { keys } => computer(json!({"action": "key", "text": keys.join("+")})),
        Action::HoldKey { keys, duration_ms } => computer(json!({
            "action": "hold_key",
            "text": keys.join("+"),
            "duration": *duration_ms as f64 / 1000.0,
        })),
        Action::Wait { ms } => computer(json!({"action": "wait", "duration": *ms as f64 / 1000.0})),
        Action::Screenshot => computer(json!({"action": "screenshot"})),
        Action::CursorPosition => computer(json!({"action": "cursor_position"})),
        Action::Zoom { region } => {
            let (x0, y0) = scale.css_to_image(lumen_core::Point::new(region.x0, region.y0));
            let (x1, y1) = scale.css_to_image(lumen_core::Point::new(region.x1, region.y1));
            computer(
                json!({"action": "zoom", "region": [x0.round() as i64, y0.round() as i64, x1.round() as i64, y1.round() as i64]}),
            )
        }
        Action::Goto { url } => ("navigate", json!({"url": url})),
        Action::Back => computer(json!({"action": "key", "text": "alt+Left"})),
        Action::Forward => computer(json!({"action": "key", "text": "alt+Right"})),
        Action::WriteState { data } => ("update_state", json!({"data": data})),
        Action::Terminate { status, result } => (
            "task_complete",
            json!({"result": result, "status": match status {
                TerminateStatus::Success => "success",
                TerminateStatus::Failure => "failure",
            }}),
        ),
        Action::Delegate {
            instruction,
            max_steps,
        } => {
            let mut v = json!({"instruction": instruction});
            if let Some(n) = max_steps {
                v["max_steps"] = json!(n);
            }
            ("delegate", v)
        }
        Action::Fold { summary } => ("fold", json!({"summary": summary})),
        // An undecodable call is replayed as the computer call it claimed to
        // be; its tool result carries the error.
        Action::Invalid { input, .. } => (
            "computer",
            if input.is_object() {
                input.clone()
            } else {
                json!({})
            },
        ),
        _ => computer(json!({"action": "screenshot"})),
    }
}

// ----- answer parsing --------------------------------------------------------

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
        #[serde(default)]
        toolset_name: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    fn apply(&self, usage: &mut TokenUsage) {
        if let Some(v) = self.input_tokens {
            usage.input_tokens = v;
        }
        if let Some(v) = self.output_tokens {
            usage.output_tokens = v;
        }
        if let Some(v) = self.cache_creation_input_tokens {
            usage.cache_write_tokens = v;
        }
        if let Some(v) = self.cache_read_input_tokens {
            usage.cache_read_tokens = v;
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A content block being streamed.
#[derive(Debug)]
enum Open {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(String),
    Tool {
        id: String,
        name: String,
        /// `toolset_name` (`computer`, `browser`) of a toolset member.
        toolset: Option<String>,
        json: String,
    },
    /// A block type we do not act on (server tools…), kept for replay.
    Other(Value),
}

/// Anthropic's stream parser (public for `cargo xtask decode-stream`).
#[derive(Debug)]
pub struct StreamParser {
    decoder: ActionDecoder,
    turn: TurnBuilder,
    open: BTreeMap<usize, Open>,
    /// Completed blocks, in Anthropic's replay format.
    content: Vec<Value>,
    message_id: Option<String>,
    started: bool,
}

impl StreamParser {
    /// A parser decoding coordinates with `decoder`.
    pub fn new(decoder: ActionDecoder) -> Self {
        Self {
            decoder,
            turn: TurnBuilder::default(),
            open: BTreeMap::new(),
            content: Vec::new(),
            message_id: None,
            started: false,
        }
    }

    fn complete(&mut self, block: Open, out: &mut Vec<ModelEvent>) {
        match block {
            Open::Text(text) => {
                self.turn.text.push_str(&text);
                if !text.trim().is_empty() {
                    self.content.push(json!({"type": "text", "text": text}));
                }
            }
            Open::Thinking { text, signature } => {
                self.content
                    .push(json!({"type": "thinking", "thinking": text, "signature": signature}));
                self.turn.thinking.push(ThinkingBlock {
                    text,
                    signature: (!signature.is_empty()).then_some(signature),
                    redacted: false,
                });
            }
            Open::Redacted(data) => {
                self.content
                    .push(json!({"type": "redacted_thinking", "data": data}));
                self.turn.thinking.push(ThinkingBlock {
                    text: String::new(),
                    signature: Some(data),
                    redacted: true,
                });
            }
            Open::Tool {
                id,
                name,
                toolset,
                json,
            } => {
                let decode = |input: &Value| match toolset.as_deref() {
                    Some("browser") => self.decoder.anthropic_browser(&name, input),
                    _ => self.decoder.anthropic(&name, input),
                };
                let (input, actions) = if json.trim().is_empty() {
                    let input = json!({});
                    let actions = decode(&input);
                    (input, actions)
                } else {
                    match serde_json::from_str::<Value>(&json) {
                        Ok(input) => {
                            let actions = decode(&input);
                            (input, actions)
                        }
                        Err(e) => (
                            json!({}),
                            vec![ActionDecoder::unparseable(&name, &json, &e)],
                        ),
                    }
                };
                let mut block = json!({"type": "tool_use", "id": id, "name": name, "input": input});
                if let Some(toolset) = toolset {
                    block["toolset_name"] = json!(toolset);
                }
                self.content.push(block);
                self.turn.push_call(&id, actions, &[], out);
            }
            Open::Other(v) => self.content.push(v),
        }
    }

    fn finish_turn(&mut self, out: &mut Vec<ModelEvent>) -> ModelResponse {
        // Blocks the provider never closed are completed as they stand.
        let open = std::mem::take(&mut self.open);
        for (_, block) in open {
            self.complete(block, out);
        }
        let native = json!({"id": self.message_id, "content": self.content});
        let (response, extra) = self.turn.finish(PROVIDER, Some(native));
        if let Some(call) = extra {
            out.push(ModelEvent::Action(call));
        }
        response
    }
}

impl Decode for StreamParser {
    fn feed(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        let parsed: WireEvent = parse_payload(PROVIDER, event)?;
        match parsed {
            WireEvent::MessageStart { message } => {
                self.started = true;
                self.message_id = message.id;
                if let Some(u) = message.usage {
                    u.apply(&mut self.turn.usage);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let kind = content_block["type"].as_str().unwrap_or("");
                let s = |k: &str| content_block[k].as_str().unwrap_or("").to_owned();
                let block = match kind {
                    "text" => Open::Text(s("text")),
                    "thinking" => Open::Thinking {
                        text: s("thinking"),
                        signature: s("signature"),
                    },
                    "redacted_thinking" => Open::Redacted(s("data")),
                    "tool_use" => Open::Tool {
                        id: s("id"),
                        name: s("name"),
                        toolset: content_block["toolset_name"].as_str().map(str::to_owned),
                        // A complete input may come in the start block.
                        json: match &content_block["input"] {
                            Value::Object(m) if !m.is_empty() => content_block["input"].to_string(),
                            _ => String::new(),
                        },
                    },
                    _ => Open::Other(content_block),
                };
                self.open.insert(index, block);
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                let Some(block) = self.open.get_mut(&index) else {
                    return Err(stream_error(
                        PROVIDER,
                        format!("a delta for content block {index}, which was never started"),
                    ));
                };
                match (block, delta) {
                    (Open::Text(t), WireDelta::TextDelta { text }) => {
                        out.push(ModelEvent::TextDelta(text.clone()));
                        t.push_str(&text);
                    }
                    (Open::Tool { json, .. }, WireDelta::InputJsonDelta { partial_json }) => {
                        json.push_str(&partial_json)
                    }
                    (Open::Thinking { text, .. }, WireDelta::ThinkingDelta { thinking }) => {
                        out.push(ModelEvent::ThinkingDelta(thinking.clone()));
                        text.push_str(&thinking);
                    }
                    (
                        Open::Thinking { signature, .. },
                        WireDelta::SignatureDelta { signature: s },
                    ) => signature.push_str(&s),
                    // Citations and deltas of blocks we only keep for replay.
                    _ => {}
                }
            }
            WireEvent::ContentBlockStop { index } => {
                if let Some(block) = self.open.remove(&index) {
                    self.complete(block, out);
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.turn.stop_reason = delta.stop_reason;
                }
                if let Some(u) = usage {
                    u.apply(&mut self.turn.usage);
                }
            }
            WireEvent::MessageStop => return Ok(true),
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => {
                let kind = match error.kind.as_str() {
                    "overloaded_error" => ModelErrorKind::Overloaded,
                    "rate_limit_error" => ModelErrorKind::RateLimited,
                    "api_error" => ModelErrorKind::Server,
                    "invalid_request_error" => ModelErrorKind::BadRequest,
                    "authentication_error" | "permission_error" => ModelErrorKind::Auth,
                    _ => ModelErrorKind::Stream,
                };
                return Err(LumenError::ModelApi {
                    provider: PROVIDER.to_owned(),
                    status: None,
                    kind,
                    retryable: false,
                    message: format!(
                        "error event in the stream ({}): {}",
                        error.kind, error.message
                    ),
                    body: Some(event.data.clone()),
                    retry_after: None,
                });
            }
        }
        Ok(false)
    }

    fn finish(&mut self, terminal: bool, out: &mut Vec<ModelEvent>) -> Result<ModelResponse> {
        if !terminal {
            return Err(stream_error(
                PROVIDER,
                if self.started {
                    "the stream ended before `message_stop` (truncated answer)"
                } else {
                    "the stream ended before `message_start` (no answer)"
                },
            ));
        }
        Ok(self.finish_turn(out))
    }
}

/// Parses a non-streaming Messages answer.
fn parse_message(decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
    let message: WireMessage = serde_json::from_value(answer)
        .map_err(|e| stream_error(PROVIDER, format!("unexpected answer shape: {e}")))?;
    let mut parser = StreamParser::new(decoder);
    parser.message_id = message.id;
    if let Some(u) = message.usage {
        u.apply(&mut parser.turn.usage);
    }
    parser.turn.stop_reason = message.stop_reason;
    let mut out = Vec::new();
    for block in message.content {
        let open = match block {
            WireBlock::Text { text } => Open::Text(text),
            WireBlock::Thinking {
                thinking,
                signature,
            } => Open::Thinking {
                text: thinking,
                signature,
            },
            WireBlock::RedactedThinking { data } => Open::Redacted(data),
            WireBlock::ToolUse {
                id,
                name,
                input,
                toolset_name,
            } => Open::Tool {
                id,
                name,
                toolset: toolset_name,
                json: input.to_string(),
            },
            WireBlock::Other => continue,
        };
        parser.complete(open, &mut out);
    }
    Ok(parser.finish_turn(&mut out))
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

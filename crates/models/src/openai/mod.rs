//! OpenAI Responses API (`POST /v1/responses`, SSE) with a computer tool.
//!
//! - **Tools**: `computer_use_preview` (display size = screenshot size,
//!   environment `browser`; one `action` per `computer_call`) for the
//!   `computer-use-preview*` models, the current `computer` tool (an
//!   `actions` batch per call) for the others; `AdapterOptions::
//!   openai_batched_computer_tool` overrides. Our own tools are function
//!   tools next to it.
//! - **Answers**: every `computer_call` is answered by a
//!   `computer_call_output` with its `call_id`, the screenshot taken after
//!   it, and the safety checks the user acknowledged; every function call by
//!   a `function_call_output`. The outcome of a computer call (it has no
//!   text field) follows as an input text naming the call.
//! - **Safety checks**: `pending_safety_checks` are copied onto every
//!   action of the call, so a `PreActionHook` can deny it; acknowledged ones
//!   come back from `ToolResult::acknowledged_safety_checks`.
//! - **History**: full input by default (stateless, `store: false`, with
//!   reasoning items replayed from their `encrypted_content`; one without it
//!   is dropped, since a stateless request cannot refer to a stored item),
//!   or
//!   `previous_response_id` chaining when
//!   `AdapterOptions::openai_chain_responses` is set (only the new items are
//!   sent). The per-step prompt goes last, after the stable prefix, so
//!   OpenAI's automatic prompt cache hits.
//! - Images go at `detail: "original"`; reasoning models get no
//!   temperature, and `computer-use-preview` "concise" summaries.
//! - A `computer_call` has no argument deltas: its action is complete (and
//!   yielded) at `response.output_item.done`; function calls likewise.

use lumen_core::{
    Action, AssistantTurn, LumenError, ModelErrorKind, ModelEvent, ModelResponse, Result,
    SafetyCheck, StepContext, ThinkingBlock, ToolResult, WireRecord,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::adapter::{Codec, HttpAdapter};
use crate::decoder::{ActionDecoder, CoordinateSpace};
use crate::http::{SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry::{self, ModelSpec, ThinkingStyle, ToolFamily};
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use std::sync::atomic::Ordering;

use crate::{AdapterOptions, Effort, Provider, join_url};

mod actions;
mod answer;
mod request;
pub use answer::StreamParser;
use answer::*;
use request::*;

const PROVIDER: &str = "openai";
const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
const DEFAULT_SUMMARY_MODEL: &str = "gpt-5.4-mini";

/// A 1×1 PNG sent as the screenshot of a `computer_call_output` whose real
/// screenshot was compressed out of history (the item requires an image;
/// the text marker that follows says which step it stood for).
const PLACEHOLDER_PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/x8AAwMCAO+ip1sAAAAASUVORK5CYII=";

/// The OpenAI Responses adapter: the shared HTTP adapter over
/// [`OpenAiCodec`].
pub type OpenAiAdapter = HttpAdapter<OpenAiCodec>;

/// OpenAI's Responses wire format.
#[derive(Debug)]
pub struct OpenAiCodec {
    model: String,
    key: crate::http::ApiKey,
    spec: &'static ModelSpec,
    base_url: String,
    batched: bool,
    chain: bool,
    max_tokens: u32,
    /// Extra output room for reasoning (the thinking budget, when set).
    reasoning_room: u32,
    effort: Option<&'static str>,
    summary_model: String,
    /// Which session-dependent own tools to offer.
    own: prompt::OwnTools,
    /// Stateless replay: whether replayed output items keep their `id`.
    /// The SDK's types require it; public reports say the API looks such
    /// ids up among stored items and refuses them. Starts with the SDK's
    /// shape and switches once, for good, on an answer naming an id.
    item_ids: ItemIds,
}

/// How stateless requests replay output items, settled by the API's
/// answers (see [`OpenAiCodec::switch_shape`](Codec::switch_shape)).
#[derive(Debug, Default)]
struct ItemIds {
    /// Replayed items go without their `id`.
    stripped: std::sync::atomic::AtomicBool,
    /// The other shape was tried: never switch back.
    settled: std::sync::atomic::AtomicBool,
}

impl HttpAdapter<OpenAiCodec> {
    /// An adapter for `model` (`computer-use-preview`, `gpt-5.4`…). Needs
    /// `options.api_key`. The base URL includes `/v1`.
    pub fn new(model: &str, options: AdapterOptions) -> Result<Self> {
        let own = prompt::OwnTools::of(&options);
        options.computer_tools_only(PROVIDER)?;
        let key = options.api_key.clone().ok_or_else(|| {
            LumenError::config(
                "openai api key",
                "no API key: set OPENAI_API_KEY or pass AdapterOptions::api_key",
            )
        })?;
        let http = options.http(PROVIDER, key.clone())?;
        let spec = registry::spec(Provider::OpenAi, model);
        let batched = options
            .openai_batched_computer_tool
            .unwrap_or(spec.tools != ToolFamily::OpenAiComputerPreview);
        let effort = options.wanted_effort();
        let codec = OpenAiCodec {
            model: model.to_owned(),
            key,
            spec,
            base_url: options
                .base_url
                .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            batched,
            chain: options.openai_chain_responses,
            max_tokens: options.max_tokens.unwrap_or(spec.max_output),
            reasoning_room: options.thinking_budget.unwrap_or(0),
            effort: effort.map(Effort::openai),
            own,
            item_ids: ItemIds::default(),
            summary_model: options
                .summary_model
                .unwrap_or_else(|| DEFAULT_SUMMARY_MODEL.to_owned()),
        };
        Ok(Self {
            info: spec.info(model, 32, true),
            http,
            codec,
        })
    }

    /// The request body for one step (public so tests can pin it).
    pub fn request_body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        self.codec.request_body(ctx, stream)
    }
}

impl OpenAiCodec {
    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![("authorization", format!("Bearer {}", self.key.expose()))]
    }

    fn request_body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        let image = ctx.screenshot.image.size();
        let computer = if self.batched {
            json!({"type": "computer"})
        } else {
            json!({
                "type": "computer_use_preview",
                "display_width": image.width,
                "display_height": image.height,
                "environment": "browser",
            })
        };
        let mut tools = vec![computer];
        for (name, description, schema) in prompt::own_tools(self.own) {
            tools.push(json!({
                "type": "function",
                "name": name,
                "description": description,
                "parameters": schema,
                "strict": false,
            }));
        }
        let (previous, records) = if self.chain {
            chain_point(ctx.wire)
        } else {
            (None, ctx.wire)
        };
        let ids = !self.item_ids.stripped.load(Ordering::Relaxed);
        let mut input = build_input(records, ctx, self.chain, ids);
        if !ctx.system_prompt.trim().is_empty() {
            input.push(json!({"role": "user", "content": [{"type": "input_text", "text": ctx.system_prompt}]}));
        }
        let mut body = json!({
            "model": self.model,
            "instructions": prompt::MECHANICS,
            "input": input,
            "tools": tools,
            "truncation": "auto",
            // Reasoning tokens count against this limit too.
            "max_output_tokens": self.max_tokens + self.reasoning_room,
            "parallel_tool_calls": true,
        });
        if self.chain {
            body["store"] = json!(true);
            if let Some(id) = previous {
                body["previous_response_id"] = json!(id);
            }
        } else {
            body["store"] = json!(false);
            body["include"] = json!(["reasoning.encrypted_content"]);
        }
        if let Some(effort) = self.effort {
            // `computer-use-preview` documents only "concise" summaries.
            let summary = if self.batched { "auto" } else { "concise" };
            body["reasoning"] = json!({"effort": effort, "summary": summary});
        }
        // GPT-5.x reasons by default and then rejects a temperature.
        let reasoning =
            self.effort.is_some() || self.spec.thinking == ThinkingStyle::ReasoningEffort;
        if let Some(t) = ctx.temperature
            && self.spec.takes_temperature(reasoning)
        {
            body["temperature"] = crate::temperature_json(t);
        }
        // Requests of one task share a cache key, so they land where their
        // common prefix is cached.
        body["prompt_cache_key"] = json!(cache_key(&self.model, ctx.instruction));
        if self.batched {
            // Coordinates refer to the screenshot as sent: it must never be
            // recompressed in the context.
            body["image"] = json!({"context_compression": "disabled"});
        }
        if stream {
            body["stream"] = json!(true);
        }
        body
    }
}

/// Whether an API error is about a replayed item's `id`: "Item with id
/// 'rs_…' not found", or a required `id` missing.
fn names_an_item_id(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("item with id")
        || ((m.contains("required") || m.contains("missing"))
            && ["`id`", "'id'", "\"id\"", ".id"]
                .iter()
                .any(|id| m.contains(id)))
}

/// A stable `prompt_cache_key` for a task on a model (no task text in it).
fn cache_key(model: &str, instruction: &str) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (model, instruction).hash(&mut h);
    format!("lumen-{:016x}", h.finish())
}

impl Codec for OpenAiCodec {
    type Parser = StreamParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    /// A stateless request refused over a replayed item's `id` (missing,
    /// or not found among stored items) is sent once more the other way,
    /// which then holds for the adapter's life.
    fn switch_shape(&self, error: &LumenError) -> bool {
        let LumenError::ModelApi {
            status: Some(400 | 404),
            message,
            ..
        } = error
        else {
            return false;
        };
        if self.chain || !names_an_item_id(message) {
            return false;
        }
        if self.item_ids.settled.swap(true, Ordering::Relaxed) {
            return false;
        }
        let stripped = !self.item_ids.stripped.load(Ordering::Relaxed);
        self.item_ids.stripped.store(stripped, Ordering::Relaxed);
        tracing::warn!(
            target: lumen_core::logs::ADAPTER,
            model = %self.model,
            stripped,
            "the API refused replayed item ids ({message}); replaying items {} their ids from now on",
            if stripped { "without" } else { "with" }
        );
        true
    }

    fn url(&self, _stream: bool) -> String {
        join_url(&self.base_url, "responses")
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        OpenAiCodec::headers(self)
    }

    fn body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        self.request_body(ctx, stream)
    }

    fn parser(&self, decoder: ActionDecoder) -> StreamParser {
        StreamParser::new(decoder)
    }

    fn answer(&self, decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
        parse_answer(decoder, answer)
    }

    /// OpenAI's high-detail rule (see [`image_tokens`]).
    fn image_tokens(&self, width: u32, height: u32) -> u64 {
        image_tokens(width, height)
    }

    fn overhead_chars(&self) -> usize {
        1500
    }

    fn summary_request(&self, text: String) -> (String, Vec<(&'static str, String)>, Value) {
        let body = json!({
            "model": self.summary_model,
            "instructions": prompt::SUMMARIZE,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}],
            "store": false,
        });
        (join_url(&self.base_url, "responses"), self.headers(), body)
    }

    fn summary_text(&self, answer: Value) -> Result<String> {
        let response: WireResponse = serde_json::from_value(answer)
            .map_err(|e| stream_error(PROVIDER, format!("unexpected summary answer: {e}")))?;
        Ok(response
            .output
            .iter()
            .filter(|i| i["type"] == "message")
            .map(message_text)
            .collect())
    }
}

/// OpenAI's image rule for high detail: scale into 2048×2048, then the short
/// side to 768, then 170 tokens per 512-px tile plus 85.
pub fn image_tokens(width: u32, height: u32) -> u64 {
    let (mut w, mut h) = (width.max(1) as f64, height.max(1) as f64);
    let f = (2048.0 / w.max(h)).min(1.0);
    w *= f;
    h *= f;
    let f = (768.0 / w.min(h)).min(1.0);
    w *= f;
    h *= f;
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    (tiles * 170.0 + 85.0) as u64
}

//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`, SSE)
//! for Ollama, vLLM, LM Studio, OpenRouter and friends.
//!
//! There is no native computer tool: Lumen's whole action set is offered as
//! function tools with JSON Schemas, in a configurable coordinate space
//! ([`CoordinateSpace`]: the 0–1000 grid by default, or screenshot pixels).
//! Streamed tool-call deltas are assembled by `index` (the id comes with the
//! first delta only); a call is complete, and its action yielded, when the
//! next index starts or the choice finishes. `[DONE]` ends the stream; a
//! server that omits it is accepted once a `finish_reason` has arrived.
//! Usage is requested with `stream_options.include_usage`.

use lumen_core::{
    Action, AssistantTurn, ImageScale, LumenError, ModelEvent, ModelResponse, MouseButton, Result,
    ScrollDirection, ScrollUnit, Size, StepContext, TerminateStatus, ToolResult, WireRecord,
    normalize,
};
use serde_json::{Value, json};

use crate::adapter::{Codec, HttpAdapter};
use crate::decoder::{ActionDecoder, CoordinateSpace};
use crate::http::{ApiKey, SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry;
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use crate::{AdapterOptions, Effort, Provider, join_url};

mod answer;
mod request;
pub use answer::StreamParser;
use answer::*;
use request::*;

const PROVIDER: &str = "compatible";

/// The OpenAI-compatible adapter: the shared HTTP adapter over
/// [`CompatibleCodec`].
pub type CompatibleAdapter = HttpAdapter<CompatibleCodec>;

/// The Chat Completions wire format with Lumen's action set as functions.
#[derive(Debug)]
pub struct CompatibleCodec {
    model: String,
    /// The key, when the server wants one (local servers need none).
    key: Option<ApiKey>,
    base_url: String,
    space: CoordinateSpace,
    max_tokens: u32,
    effort: Option<&'static str>,
    max_images: Option<usize>,
    summary_model: String,
    /// Which session-dependent own tools to offer.
    own: prompt::OwnTools,
}

impl HttpAdapter<CompatibleCodec> {
    /// An adapter for `model` on the server at `options.base_url` (which
    /// includes `/v1`). The key is optional (local servers need none).
    pub fn new(model: &str, options: AdapterOptions) -> Result<Self> {
        let own = prompt::OwnTools::of(&options);
        options.computer_tools_only(PROVIDER)?;
        let base_url = options.base_url.clone().ok_or_else(|| {
            LumenError::config(
                "compatible base url",
                format!(
                    "`{model}` is not an anthropic/, openai/ or google/ model, so it needs the base \
                     URL of an OpenAI-compatible server: set OPENAI_BASE_URL or pass \
                     AdapterOptions::base_url (e.g. http://localhost:11434/v1)"
                ),
            )
        })?;
        let http = options.http(
            PROVIDER,
            options.api_key.clone().unwrap_or_else(|| ApiKey::new("")),
        )?;
        let spec = registry::spec(Provider::Compatible, model);
        let mut info = spec.info(model, 28, false);
        info.context_window_tokens = 128_000;
        let effort = options.wanted_effort();
        let codec = CompatibleCodec {
            model: model.to_owned(),
            key: options.api_key.clone(),
            base_url,
            space: options.coordinate_space,
            max_tokens: options.max_tokens.unwrap_or(spec.max_output),
            effort: effort.map(Effort::openai),
            max_images: options.max_images,
            own,
            summary_model: options.summary_model.unwrap_or_else(|| model.to_owned()),
        };
        Ok(Self { info, http, codec })
    }

    /// The request body for one step (public so tests can pin it).
    pub fn request_body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        self.codec.request_body(ctx, stream)
    }
}

impl CompatibleCodec {
    fn headers(&self) -> Vec<(&'static str, String)> {
        match &self.key {
            Some(key) => vec![("authorization", format!("Bearer {}", key.expose()))],
            None => Vec::new(),
        }
    }

    fn request_body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        let image = ctx.screenshot.image.size();
        let space_note = match self.space {
            CoordinateSpace::Normalized => "Coordinates are on a 0-1000 grid over the screenshot \
                 (0,0 top-left, 1000,1000 bottom-right), whatever its size."
                .to_owned(),
            CoordinateSpace::Pixels => format!(
                "Coordinates are pixels of the screenshot ({}x{}, 0,0 top-left).",
                image.width, image.height
            ),
        };
        let mut messages = vec![json!({
            "role": "system",
            "content": format!("{}\n\n{space_note}", prompt::MECHANICS),
        })];
        messages.extend(build_messages(ctx, self.space));
        if !ctx.system_prompt.trim().is_empty() {
            messages.push(json!({"role": "user", "content": ctx.system_prompt}));
        }
        // Chat templates that demand alternating roles break on two user
        // messages in a row (the step text after the screenshot): merge them.
        let mut messages = merge_user_runs(messages);
        if let Some(max) = self.max_images {
            keep_newest_images(&mut messages, max);
        }
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "tools": tools(self.space, self.own),
            "tool_choice": "auto",
            "max_tokens": self.max_tokens,
        });
        if let Some(effort) = self.effort {
            body["reasoning_effort"] = json!(effort);
        }
        if let Some(t) = ctx.temperature {
            body["temperature"] = crate::temperature_json(t);
        }
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }
}

impl Codec for CompatibleCodec {
    type Parser = StreamParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn url(&self, _stream: bool) -> String {
        join_url(&self.base_url, "chat/completions")
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        CompatibleCodec::headers(self)
    }

    fn body(&self, ctx: &StepContext<'_>, stream: bool) -> Value {
        self.request_body(ctx, stream)
    }

    fn parser(&self, decoder: ActionDecoder) -> StreamParser {
        StreamParser::with_space(decoder, self.space)
    }

    fn answer(&self, decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
        parse_answer(decoder, self.space, answer)
    }

    /// No common rule across servers: the w×h/750 estimate.
    fn image_tokens(&self, width: u32, height: u32) -> u64 {
        (width as u64 * height as u64).div_ceil(750)
    }

    fn overhead_chars(&self) -> usize {
        2500
    }

    fn summary_request(&self, text: String) -> (String, Vec<(&'static str, String)>, Value) {
        let body = json!({
            "model": self.summary_model,
            "messages": [
                {"role": "system", "content": prompt::SUMMARIZE},
                {"role": "user", "content": text},
            ],
        });
        (
            join_url(&self.base_url, "chat/completions"),
            self.headers(),
            body,
        )
    }

    fn summary_text(&self, answer: Value) -> Result<String> {
        Ok(answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned())
    }
}

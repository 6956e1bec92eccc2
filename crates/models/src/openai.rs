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
//!   reasoning items replayed from their `encrypted_content`), or
//!   `previous_response_id` chaining when
//!   `AdapterOptions::openai_chain_responses` is set (only the new items are
//!   sent). The per-step prompt goes last, after the stable prefix, so
//!   OpenAI's automatic prompt cache hits.
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
use crate::http::{Http, SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry::{self, ModelSpec, ThinkingStyle, ToolFamily};
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use crate::{AdapterOptions, Effort, Provider, join_url};

const PROVIDER: &str = "openai";
const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
const DEFAULT_SUMMARY_MODEL: &str = "gpt-5-mini";

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
}

impl HttpAdapter<OpenAiCodec> {
    /// An adapter for `model` (`computer-use-preview`, `gpt-5.4`…). Needs
    /// `options.api_key`. The base URL includes `/v1`.
    pub fn new(model: &str, options: AdapterOptions) -> Result<Self> {
        if options.tools == Some(crate::Tools::Browser) {
            return Err(LumenError::config(
                "tools",
                format!(
                    "the browser toolset is Anthropic's; {PROVIDER} drives the browser with its computer tool (use --tools computer)"
                ),
            ));
        }
        let key = options.api_key.clone().ok_or_else(|| {
            LumenError::config(
                "openai api key",
                "no API key: set OPENAI_API_KEY or pass AdapterOptions::api_key",
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
        for (name, description, schema) in prompt::own_tools() {
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
        let mut input = build_input(records, ctx, self.chain);
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
        if stream {
            body["stream"] = json!(true);
        }
        body
    }
}

impl Codec for OpenAiCodec {
    type Parser = StreamParser;

    fn provider(&self) -> &'static str {
        PROVIDER
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
        let response: WireResponse = serde_json::from_value(answer)
            .map_err(|e| stream_error(PROVIDER, format!("unexpected answer shape: {e}")))?;
        let mut parser = StreamParser::new(decoder);
        let mut out = Vec::new();
        for item in response.output.iter() {
            parser.item_done(item, &mut out);
        }
        parser.finish_response(&response, &mut out)
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

// ----- request building ------------------------------------------------------

/// With chaining: the id of the newest native response and the records
/// after it (the provider already holds everything before).
fn chain_point(wire: &[WireRecord]) -> (Option<String>, &[WireRecord]) {
    for (i, record) in wire.iter().enumerate().rev() {
        if let WireRecord::Assistant(turn) = record
            && let Some(id) = native(turn)
                .and_then(|d| d.get("id"))
                .and_then(Value::as_str)
        {
            // Keep the turn itself so its calls are answered; its items are
            // not re-sent (see `build_input`).
            return (Some(id.to_owned()), &wire[i..]);
        }
    }
    (None, wire)
}

fn native(turn: &AssistantTurn) -> Option<&Value> {
    turn.provider
        .as_ref()
        .filter(|p| p.provider == PROVIDER)
        .map(|p| &p.data)
}

/// A screenshot as an input image, at `detail: "original"`: any other
/// detail lets the server resize it, and the model's coordinates then
/// belong to an image we never saw. The loop already sized it to the
/// model's limits.
fn image_part(url: String) -> Value {
    json!({"type": "input_image", "image_url": url, "detail": "original"})
}

fn user_text(text: String) -> Value {
    json!({"role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// One provider call awaiting its answer.
struct Pending {
    call_id: String,
    computer: bool,
    ids: Vec<String>,
}

fn build_input(records: &[WireRecord], ctx: &StepContext<'_>, chain: bool) -> Vec<Value> {
    let mut input: Vec<Value> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut saw_screenshot = false;
    let chained_first = matches!(records.first(), Some(WireRecord::Assistant(t)) if native(t).and_then(|d| d.get("id")).is_some());
    for (i, record) in records.iter().enumerate() {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                flush(&mut input, &mut pending, &mut results, None);
                input.push(user_text(prompt::summary_text(content, *compacted_at)));
            }
            WireRecord::Screenshot(shot) => {
                saw_screenshot = true;
                let (url, marker) = match &shot.image {
                    Some(img) => (Some(img.to_data_url()), None),
                    None => (None, Some(prompt::screenshot_marker(shot.step))),
                };
                let answered = flush(
                    &mut input,
                    &mut pending,
                    &mut results,
                    Some((url.clone(), marker.clone())),
                );
                if !answered {
                    let mut content = Vec::new();
                    if let Some(m) = marker {
                        content.push(json!({"type": "input_text", "text": m}));
                    }
                    if let Some(u) = url {
                        content.push(image_part(u));
                    }
                    input.push(json!({"role": "user", "content": content}));
                }
            }
            WireRecord::Assistant(turn) => {
                flush(&mut input, &mut pending, &mut results, None);
                let groups = prompt::call_groups(turn);
                let skip_items = i == 0 && chained_first;
                match native(turn)
                    .and_then(|d| d.get("output"))
                    .and_then(Value::as_array)
                {
                    Some(items) => {
                        for item in items {
                            if !skip_items && let Some(item) = replayable(item, chain) {
                                input.push(item);
                            }
                            let kind = item["type"].as_str().unwrap_or("");
                            if kind == "computer_call" || kind == "function_call" {
                                let call_id = item["call_id"].as_str().unwrap_or("").to_owned();
                                let ids = groups
                                    .iter()
                                    .find(|(g, _)| *g == call_id)
                                    .map_or_else(|| vec![call_id.clone()], |(_, ids)| ids.clone());
                                pending.push(Pending {
                                    call_id,
                                    computer: kind == "computer_call",
                                    ids,
                                });
                            }
                        }
                    }
                    None => {
                        // A turn written by another adapter: its actions as
                        // our own function calls where they exist, else as
                        // assistant text; results follow as text.
                        let mut text = turn.text.clone().unwrap_or_default();
                        for call in &turn.calls {
                            if call.id == stream::TEXT_ANSWER_ID {
                                continue;
                            }
                            let action = serde_json::to_string(&call.action).unwrap_or_default();
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(&format!("[action {}] {action}", call.id));
                        }
                        if !text.is_empty() {
                            // An easy input message: its content parts may
                            // only be input parts, so the text goes plain.
                            input.push(json!({"role": "assistant", "content": text}));
                        }
                    }
                }
            }
            WireRecord::ToolResult(r) => results.push(r.clone()),
            _ => {}
        }
    }
    flush(&mut input, &mut pending, &mut results, None);
    if !saw_screenshot {
        input.push(
            json!({"role": "user", "content": [image_part(ctx.screenshot.image.to_data_url())]}),
        );
    }
    input
}

/// An output item as it may be sent back. Stateless requests (`store:
/// false`) cannot refer to stored items: a reasoning item is resolved by id
/// unless it carries its `encrypted_content`, and then fails with "Item
/// with id 'rs_…' not found". So a reasoning item without it is dropped.
/// Every other item keeps its id: the SDK's input types require it on
/// computer calls and output messages, and the API does not look it up.
fn replayable(item: &Value, chained: bool) -> Option<Value> {
    let stateless_reasoning = !chained && item["type"] == "reasoning";
    if stateless_reasoning && !item["encrypted_content"].is_string() {
        return None;
    }
    Some(item.clone())
}

/// Answers the pending calls. `shot` is the screenshot that follows them
/// (its data URL, or the marker of a compressed one);
/// computer calls carry it, and it is then not sent again. Returns whether
/// a computer call took the screenshot.
fn flush(
    input: &mut Vec<Value>,
    pending: &mut Vec<Pending>,
    results: &mut Vec<ToolResult>,
    shot: Option<(Option<String>, Option<String>)>,
) -> bool {
    if pending.is_empty() && results.is_empty() {
        return false;
    }
    let taken = std::mem::take(results);
    let refs: Vec<&ToolResult> = taken.iter().collect();
    let mut notes: Vec<String> = Vec::new();
    let mut screenshot_used = false;
    // Every computer_call_output must carry an image, but a turn has one
    // screenshot after it: the last computer call gets it, earlier ones a
    // placeholder, so the same image is never paid for twice.
    let last_computer = pending.iter().rposition(|p| p.computer);
    for (index, p) in pending.drain(..).enumerate() {
        let answer = prompt::answer_for(&p.ids, &refs);
        if p.computer {
            let (image, marker) = match &shot {
                Some(_) if Some(index) != last_computer => (
                    PLACEHOLDER_PNG.to_owned(),
                    Some(
                        "[the screenshot after this turn is on its last computer call]".to_owned(),
                    ),
                ),
                Some((Some(url), _)) => {
                    screenshot_used = true;
                    (url.clone(), None)
                }
                Some((None, marker)) => {
                    screenshot_used = true;
                    (PLACEHOLDER_PNG.to_owned(), marker.clone())
                }
                None => (
                    PLACEHOLDER_PNG.to_owned(),
                    Some("[no screenshot]".to_owned()),
                ),
            };
            // The SDK's screenshot output has no field for the page URL
            // (the API refuses unknown fields), so the URL is not sent here.
            let output = json!({
                "type": "computer_call_output",
                "call_id": p.call_id,
                "output": {"type": "computer_screenshot", "image_url": image},
                "acknowledged_safety_checks": answer.acknowledged,
            });
            input.push(output);
            let mut note = format!("Result of computer call {}: {}", p.call_id, answer.text);
            if let Some(m) = marker {
                note.push_str(&format!(" (screenshot: {m})"));
            }
            notes.push(note);
        } else {
            input.push(json!({
                "type": "function_call_output",
                "call_id": p.call_id,
                "output": answer.text,
            }));
        }
    }
    // Results for calls the turn never sent (a text answer's terminate).
    let known: Vec<&str> = input.iter().filter_map(|i| i["call_id"].as_str()).collect();
    let mut strays = Vec::new();
    for r in &taken {
        if known.contains(&crate::base_call_id(&r.call_id)) {
            continue;
        }
        let status = match (&r.error, r.ok) {
            (_, true) => "ok".to_owned(),
            (Some(e), false) => format!("error: {e}"),
            (None, false) => "error".to_owned(),
        };
        let mut note = format!("Result of `{}` ({}): {status}", r.action, r.call_id);
        for h in &r.hints {
            note.push_str(&format!("\nhint: {h}"));
        }
        strays.push(note);
    }
    notes.extend(strays);
    if !notes.is_empty() {
        input.push(user_text(notes.join("\n")));
    }
    screenshot_used
}

// ----- answer parsing --------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Vec<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    incomplete_details: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<WireInputDetails>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct WireInputDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Debug, Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    response: Option<WireResponse>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

/// OpenAI Responses' stream parser (public for `cargo xtask decode-stream`).
#[derive(Debug)]
pub struct StreamParser {
    decoder: ActionDecoder,
    turn: TurnBuilder,
    output: Vec<Value>,
    response_id: Option<String>,
    started: bool,
    /// The final response object, once `response.completed` arrived.
    pending_final: Option<WireResponse>,
}

impl StreamParser {
    /// A parser decoding coordinates with `decoder`.
    pub fn new(decoder: ActionDecoder) -> Self {
        Self {
            decoder,
            turn: TurnBuilder::default(),
            output: Vec::new(),
            response_id: None,
            started: false,
            pending_final: None,
        }
    }

    /// A complete output item: decode calls, collect text and reasoning.
    fn item_done(&mut self, item: &Value, out: &mut Vec<ModelEvent>) {
        self.output.push(item.clone());
        match item["type"].as_str().unwrap_or("") {
            "computer_call" => {
                let call_id = item["call_id"]
                    .as_str()
                    .or_else(|| item["id"].as_str())
                    .unwrap_or("computer_call")
                    .to_owned();
                let checks: Vec<SafetyCheck> = item["pending_safety_checks"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|c| SafetyCheck {
                                id: c["id"].as_str().unwrap_or("").to_owned(),
                                code: c["code"].as_str().unwrap_or("").to_owned(),
                                message: c["message"].as_str().unwrap_or("").to_owned(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let actions: Vec<Action> = match (&item["actions"], &item["action"]) {
                    (Value::Array(batch), _) if !batch.is_empty() => {
                        batch.iter().flat_map(|a| self.decoder.openai(a)).collect()
                    }
                    (_, action) if action.is_object() => self.decoder.openai(action),
                    _ => vec![Action::Invalid {
                        name: "computer".into(),
                        input: item.clone(),
                        error: "a computer_call without `action` or `actions`".into(),
                    }],
                };
                self.turn.push_call(&call_id, actions, &checks, out);
            }
            "function_call" => {
                let call_id = item["call_id"]
                    .as_str()
                    .unwrap_or("function_call")
                    .to_owned();
                let name = item["name"].as_str().unwrap_or("").to_owned();
                let raw = item["arguments"].as_str().unwrap_or("");
                let actions = if raw.trim().is_empty() {
                    self.decoder
                        .lumen_tool(&name, &json!({}), CoordinateSpace::Pixels)
                } else {
                    match serde_json::from_str::<Value>(raw) {
                        Ok(args) => self
                            .decoder
                            .lumen_tool(&name, &args, CoordinateSpace::Pixels),
                        Err(e) => vec![ActionDecoder::unparseable(&name, raw, &e)],
                    }
                };
                self.turn.push_call(&call_id, actions, &[], out);
            }
            "message" => self.turn.text.push_str(&message_text(item)),
            "reasoning" => {
                let text: String = item["summary"]
                    .as_array()
                    .map(|parts| {
                        parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n\n")
                    })
                    .unwrap_or_default();
                let encrypted = item["encrypted_content"].as_str().map(str::to_owned);
                self.turn.thinking.push(ThinkingBlock {
                    text,
                    signature: encrypted,
                    redacted: false,
                });
            }
            // Server-side tools (web search, tool search…) are kept for replay.
            _ => {}
        }
    }

    fn finish_response(
        &mut self,
        response: &WireResponse,
        out: &mut Vec<ModelEvent>,
    ) -> Result<ModelResponse> {
        if let Some(id) = &response.id {
            self.response_id = Some(id.clone());
        }
        if let Some(u) = response.usage {
            let cached = u.input_tokens_details.map_or(0, |d| d.cached_tokens);
            self.turn.usage.input_tokens = u.input_tokens.saturating_sub(cached);
            self.turn.usage.cache_read_tokens = cached;
            self.turn.usage.output_tokens = u.output_tokens;
        }
        // Items only in the final response (a non-streaming answer, or a
        // stream that skipped `output_item.done`) are taken from it.
        if self.output.is_empty() && !response.output.is_empty() {
            for item in &response.output {
                self.item_done(item, out);
            }
        }
        let status = response.status.as_deref().unwrap_or("completed");
        self.turn.stop_reason = Some(match status {
            "incomplete" => response
                .incomplete_details
                .as_ref()
                .and_then(|d| d["reason"].as_str())
                .unwrap_or("incomplete")
                .to_owned(),
            other => other.to_owned(),
        });
        let native = json!({"id": self.response_id, "output": self.output});
        let (response, extra) = self.turn.finish(PROVIDER, Some(native));
        if let Some(call) = extra {
            out.push(ModelEvent::Action(call));
        }
        Ok(response)
    }
}

fn message_text(item: &Value) -> String {
    item["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "output_text")
                .filter_map(|p| p["text"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

fn api_error(message: String, code: &str, body: &str) -> LumenError {
    let kind = match code {
        "rate_limit_exceeded" => ModelErrorKind::RateLimited,
        "server_error" => ModelErrorKind::Server,
        "context_length_exceeded" => ModelErrorKind::ContextLength,
        "insufficient_quota" | "invalid_api_key" => ModelErrorKind::Auth,
        "invalid_request_error" | "invalid_prompt" => ModelErrorKind::BadRequest,
        _ => ModelErrorKind::Stream,
    };
    LumenError::ModelApi {
        provider: PROVIDER.to_owned(),
        status: None,
        kind,
        retryable: false,
        message,
        body: Some(body.to_owned()),
        retry_after: None,
    }
}

impl Decode for StreamParser {
    fn feed(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        let parsed: WireEvent = parse_payload(PROVIDER, event)?;
        match parsed.kind.as_str() {
            "response.created" | "response.in_progress" => {
                self.started = true;
                if let Some(id) = parsed.response.and_then(|r| r.id) {
                    self.response_id = Some(id);
                }
            }
            "response.output_text.delta" => {
                if let Some(d) = parsed.delta.as_ref().and_then(Value::as_str) {
                    out.push(ModelEvent::TextDelta(d.to_owned()));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(d) = parsed.delta.as_ref().and_then(Value::as_str) {
                    out.push(ModelEvent::ThinkingDelta(d.to_owned()));
                }
            }
            "response.output_item.done" => {
                let Some(item) = parsed.item else {
                    return Err(stream_error(
                        PROVIDER,
                        "`response.output_item.done` without `item`",
                    ));
                };
                self.item_done(&item, out);
            }
            "response.completed" | "response.incomplete" => {
                let response = parsed.response.unwrap_or_default();
                self.pending_final = Some(response);
                return Ok(true);
            }
            "response.failed" => {
                let response = parsed.response.unwrap_or_default();
                let error = response.error.unwrap_or(Value::Null);
                let code = error["code"].as_str().unwrap_or("");
                return Err(api_error(
                    format!(
                        "the response failed ({code}): {}",
                        error["message"].as_str().unwrap_or("no message")
                    ),
                    code,
                    &event.data,
                ));
            }
            "error" => {
                let error = parsed.error.unwrap_or(Value::Null);
                let code = parsed
                    .code
                    .as_ref()
                    .and_then(Value::as_str)
                    .or_else(|| error["code"].as_str())
                    .or_else(|| error["type"].as_str())
                    .unwrap_or("")
                    .to_owned();
                let message = parsed
                    .message
                    .or_else(|| error["message"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "no message".into());
                return Err(api_error(
                    format!("error event in the stream ({code}): {message}"),
                    &code,
                    &event.data,
                ));
            }
            // Deltas of arguments, content parts, annotations…: the complete
            // item arrives in `output_item.done`.
            _ => {}
        }
        Ok(false)
    }

    fn finish(&mut self, terminal: bool, out: &mut Vec<ModelEvent>) -> Result<ModelResponse> {
        let Some(response) = self.pending_final.take().filter(|_| terminal) else {
            return Err(stream_error(
                PROVIDER,
                if self.started {
                    "the stream ended before `response.completed` (truncated answer)"
                } else {
                    "the stream ended before `response.created` (no answer)"
                },
            ));
        };
        self.finish_response(&response, out)
    }
}

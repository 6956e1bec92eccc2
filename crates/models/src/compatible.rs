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
use crate::http::{ApiKey, Http, SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry;
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use crate::{AdapterOptions, Effort, Provider, join_url};

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
}

impl HttpAdapter<CompatibleCodec> {
    /// An adapter for `model` on the server at `options.base_url` (which
    /// includes `/v1`). The key is optional (local servers need none).
    pub fn new(model: &str, options: AdapterOptions) -> Result<Self> {
        if options.tools == Some(crate::Tools::Browser) {
            return Err(LumenError::config(
                "tools",
                format!(
                    "the browser toolset is Anthropic's; {PROVIDER} drives the browser with its computer tool (use --tools computer)"
                ),
            ));
        }
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
        let http = Http::new(
            PROVIDER,
            options.api_key.clone().unwrap_or_else(|| ApiKey::new("")),
            options.retry,
            options.deadlines,
            options.connect_timeout,
        )?
        .observed(options.wire_observer.clone());
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
            "tools": tools(self.space),
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
        let mut parser = StreamParser::with_space(decoder, self.space);
        let mut out = Vec::new();
        let choice = &answer["choices"][0];
        let message = &choice["message"];
        if let Some(text) = message["content"].as_str() {
            parser.turn.text.push_str(text);
        }
        for reasoning in ["reasoning_content", "reasoning"] {
            if let Some(r) = message[reasoning].as_str() {
                parser.reasoning.push_str(r);
            }
        }
        if let Some(calls) = message["tool_calls"].as_array() {
            for call in calls {
                parser.calls.push(OpenCall {
                    id: call["id"].as_str().unwrap_or("").to_owned(),
                    name: call["function"]["name"].as_str().unwrap_or("").to_owned(),
                    arguments: call["function"]["arguments"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                    done: false,
                });
            }
        }
        parser.usage(&answer["usage"]);
        parser.finish_reason = choice["finish_reason"].as_str().map(str::to_owned);
        parser.finish(true, &mut out)
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

/// Lumen's action set as function tools.
fn tools(space: CoordinateSpace) -> Vec<Value> {
    let unit = match space {
        CoordinateSpace::Normalized => "0-1000 grid",
        CoordinateSpace::Pixels => "screenshot pixels",
    };
    let num = |d: &str| json!({"type": "number", "description": format!("{d} ({unit})")});
    let point = |extra: Value| {
        let mut props = json!({"x": num("x"), "y": num("y")});
        if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        props
    };
    let mut list = vec![
        (
            "click",
            "Click at a point.",
            json!({"type": "object", "properties": point(json!({"button": {"type": "string", "enum": ["left", "right", "middle"]}})), "required": ["x", "y"]}),
        ),
        (
            "double_click",
            "Double-click at a point.",
            json!({"type": "object", "properties": point(json!({})), "required": ["x", "y"]}),
        ),
        (
            "hover",
            "Move the pointer to a point.",
            json!({"type": "object", "properties": point(json!({})), "required": ["x", "y"]}),
        ),
        (
            "drag",
            "Drag from one point to another.",
            json!({"type": "object", "properties": {"start_x": num("start x"), "start_y": num("start y"), "end_x": num("end x"), "end_y": num("end y")}, "required": ["start_x", "start_y", "end_x", "end_y"]}),
        ),
        (
            "type",
            "Type text into the focused element.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        ),
        (
            "key_press",
            "Press a key chord, e.g. [\"Control\", \"a\"] or [\"Enter\"].",
            json!({"type": "object", "properties": {"keys": {"type": "array", "items": {"type": "string"}}}, "required": ["keys"]}),
        ),
        (
            "scroll",
            "Scroll with the mouse wheel at a point; amount in wheel clicks (1-20).",
            json!({"type": "object", "properties": point(json!({"direction": {"type": "string", "enum": ["up", "down", "left", "right"]}, "amount": {"type": "number", "minimum": 1, "maximum": 20}})), "required": ["x", "y", "direction"]}),
        ),
        (
            "back",
            "Go back in the tab's history.",
            json!({"type": "object", "properties": {}}),
        ),
        (
            "forward",
            "Go forward in the tab's history.",
            json!({"type": "object", "properties": {}}),
        ),
        (
            "wait",
            "Wait for the page (milliseconds, up to 60000).",
            json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 60000}}}),
        ),
        (
            "screenshot",
            "Take a fresh screenshot without acting.",
            json!({"type": "object", "properties": {}}),
        ),
    ];
    list.extend(prompt::own_tools());
    list.into_iter()
        .map(|(name, description, parameters)| {
            json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
        })
        .collect()
}

/// Encodes one of our actions as a call of our function tools (for history
/// written by another adapter).
fn encode_action(
    action: &Action,
    space: CoordinateSpace,
    scale: ImageScale,
    viewport: Size,
) -> (String, Value) {
    let (name, args) = encode_known(action, space, scale, viewport);
    match action {
        // An undecodable call is replayed as the model wrote it.
        Action::Invalid { name, input, .. } => (name.clone(), input.clone()),
        _ => (name.to_owned(), args),
    }
}

fn encode_known(
    action: &Action,
    space: CoordinateSpace,
    scale: ImageScale,
    viewport: Size,
) -> (&'static str, Value) {
    let pt = |x: i32, y: i32| -> (i64, i64) {
        match space {
            CoordinateSpace::Normalized => (
                normalize(x as f64, viewport.width) as i64,
                normalize(y as f64, viewport.height) as i64,
            ),
            CoordinateSpace::Pixels => {
                let (ix, iy) = scale.css_to_image(lumen_core::Point::new(x, y));
                (ix.round() as i64, iy.round() as i64)
            }
        }
    };
    match action {
        Action::Click { x, y, button, .. } => {
            let (x, y) = pt(*x, *y);
            let button = match button {
                MouseButton::Left => "left",
                MouseButton::Right => "right",
                MouseButton::Middle => "middle",
            };
            ("click", json!({"x": x, "y": y, "button": button}))
        }
        Action::DoubleClick { x, y, .. } | Action::TripleClick { x, y, .. } => {
            let (x, y) = pt(*x, *y);
            ("double_click", json!({"x": x, "y": y}))
        }
        Action::Hover { x, y } => {
            let (x, y) = pt(*x, *y);
            ("hover", json!({"x": x, "y": y}))
        }
        Action::Drag {
            start_x,
            start_y,
            end_x,
            end_y,
            ..
        } => {
            let (sx, sy) = pt(*start_x, *start_y);
            let (ex, ey) = pt(*end_x, *end_y);
            (
                "drag",
                json!({"start_x": sx, "start_y": sy, "end_x": ex, "end_y": ey}),
            )
        }
        Action::Scroll {
            x,
            y,
            direction,
            amount,
            unit,
            ..
        } => {
            let (x, y) = pt(*x, *y);
            let clicks = match unit {
                ScrollUnit::Clicks => *amount,
                ScrollUnit::Pixels => amount / lumen_core::action::PIXELS_PER_WHEEL_CLICK,
                ScrollUnit::Pages => amount * 5.0,
            };
            let direction = match direction {
                ScrollDirection::Up => "up",
                ScrollDirection::Down => "down",
                ScrollDirection::Left => "left",
                ScrollDirection::Right => "right",
            };
            (
                "scroll",
                json!({"x": x, "y": y, "direction": direction, "amount": clicks.round().max(1.0) as i64}),
            )
        }
        Action::Type { text } => ("type", json!({"text": text})),
        Action::KeyPress { keys } | Action::HoldKey { keys, .. } => {
            ("key_press", json!({"keys": keys}))
        }
        Action::Wait { ms } => ("wait", json!({"ms": ms})),
        Action::Goto { url } => ("navigate", json!({"url": url})),
        Action::Back => ("back", json!({})),
        Action::Forward => ("forward", json!({})),
        Action::WriteState { data } => ("update_state", json!({"data": data})),
        Action::Terminate { status, result } => (
            "task_complete",
            json!({"result": result, "status": match status {
                TerminateStatus::Success => "success",
                TerminateStatus::Failure => "failure",
            }}),
        ),
        Action::Fold { summary } => ("fold", json!({"summary": summary})),
        Action::Delegate {
            instruction,
            max_steps,
        } => (
            "delegate",
            json!({"instruction": instruction, "max_steps": max_steps}),
        ),
        _ => ("screenshot", json!({})),
    }
}

/// A message's content as a list of parts (a string becomes one text part).
fn content_parts(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(parts) => parts.clone(),
        _ => Vec::new(),
    }
}

/// Joins each run of consecutive user messages into one.
fn merge_user_runs(messages: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        match out.last_mut() {
            Some(last) if last["role"] == "user" && message["role"] == "user" => {
                let mut parts = content_parts(&last["content"]);
                parts.extend(content_parts(&message["content"]));
                last["content"] = Value::Array(parts);
            }
            _ => out.push(message),
        }
    }
    out
}

/// Keeps the newest `max` images; older ones become a text marker (servers
/// such as vLLM cap images per request).
fn keep_newest_images(messages: &mut [Value], max: usize) {
    let mut seen = 0;
    for message in messages.iter_mut().rev() {
        let Some(parts) = message["content"].as_array_mut() else {
            continue;
        };
        for part in parts.iter_mut().rev() {
            if part["type"] == "image_url" {
                seen += 1;
                if seen > max {
                    *part = json!({"type": "text", "text": "[an older screenshot, not sent]"});
                }
            }
        }
    }
}

fn build_messages(ctx: &StepContext<'_>, space: CoordinateSpace) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    // (tool_call_id, action-call ids) of the last assistant turn.
    let mut pending: Vec<(String, Vec<String>)> = Vec::new();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut saw_screenshot = false;
    let flush = |messages: &mut Vec<Value>,
                 pending: &mut Vec<(String, Vec<String>)>,
                 results: &mut Vec<ToolResult>| {
        let taken = std::mem::take(results);
        let refs: Vec<&ToolResult> = taken.iter().collect();
        let calls = std::mem::take(pending);
        for (id, ids) in &calls {
            let a = prompt::answer_for(ids, &refs);
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": a.text}));
        }
        for r in &taken {
            if calls.iter().any(|(_, ids)| ids.contains(&r.call_id)) {
                continue;
            }
            let status = match (&r.error, r.ok) {
                (_, true) => "ok".to_owned(),
                (Some(e), false) => format!("error: {e}"),
                (None, false) => "error".to_owned(),
            };
            messages.push(
                json!({"role": "user", "content": format!("Result of `{}`: {status}", r.action)}),
            );
        }
    };
    for record in ctx.wire {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                flush(&mut messages, &mut pending, &mut results);
                messages.push(json!({"role": "user", "content": prompt::summary_text(content, *compacted_at)}));
            }
            WireRecord::Screenshot(shot) => {
                flush(&mut messages, &mut pending, &mut results);
                saw_screenshot = true;
                let content = match &shot.image {
                    Some(img) => {
                        json!([{"type": "image_url", "image_url": {"url": img.to_data_url()}}])
                    }
                    None => json!(prompt::screenshot_marker(shot.step)),
                };
                messages.push(json!({"role": "user", "content": content}));
            }
            WireRecord::Assistant(turn) => {
                flush(&mut messages, &mut pending, &mut results);
                messages.push(assistant_message(turn, &mut pending, space, ctx));
            }
            WireRecord::ToolResult(r) => results.push(r.clone()),
            _ => {}
        }
    }
    flush(&mut messages, &mut pending, &mut results);
    if !saw_screenshot {
        messages.push(json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": ctx.screenshot.image.to_data_url()}}]}));
    }
    messages
}

fn assistant_message(
    turn: &AssistantTurn,
    pending: &mut Vec<(String, Vec<String>)>,
    space: CoordinateSpace,
    ctx: &StepContext<'_>,
) -> Value {
    let native = turn
        .provider
        .as_ref()
        .filter(|p| p.provider == PROVIDER)
        .and_then(|p| p.data.get("tool_calls"))
        .and_then(Value::as_array);
    let groups = prompt::call_groups(turn);
    let tool_calls: Vec<Value> = match native {
        Some(calls) => {
            for call in calls {
                let id = call["id"].as_str().unwrap_or("").to_owned();
                let ids = groups
                    .iter()
                    .find(|(g, _)| *g == id)
                    .map_or_else(|| vec![id.clone()], |(_, ids)| ids.clone());
                pending.push((id, ids));
            }
            calls.clone()
        }
        None => turn
            .calls
            .iter()
            .filter(|c| c.id != stream::TEXT_ANSWER_ID)
            .map(|c| {
                let (name, args) = encode_action(
                    &c.action,
                    space,
                    ctx.screenshot.scale,
                    ctx.screenshot.viewport,
                );
                pending.push((c.id.clone(), vec![c.id.clone()]));
                json!({"id": c.id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect(),
    };
    let mut message =
        json!({"role": "assistant", "content": turn.text.clone().unwrap_or_default()});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    message
}

// ----- answer parsing --------------------------------------------------------

#[derive(Debug)]
struct OpenCall {
    id: String,
    name: String,
    arguments: String,
    done: bool,
}

/// The Chat Completions stream parser (public for `cargo xtask
/// decode-stream`).
#[derive(Debug)]
pub struct StreamParser {
    decoder: ActionDecoder,
    space: CoordinateSpace,
    turn: TurnBuilder,
    calls: Vec<OpenCall>,
    reasoning: String,
    finish_reason: Option<String>,
    started: bool,
}

impl StreamParser {
    /// A parser decoding 0–1000 coordinates with `decoder`.
    pub fn new(decoder: ActionDecoder) -> Self {
        Self::with_space(decoder, CoordinateSpace::Normalized)
    }

    /// A parser for tools in the given coordinate space.
    pub fn with_space(decoder: ActionDecoder, space: CoordinateSpace) -> Self {
        Self {
            decoder,
            space,
            turn: TurnBuilder::default(),
            calls: Vec::new(),
            reasoning: String::new(),
            finish_reason: None,
            started: false,
        }
    }

    fn usage(&mut self, u: &Value) {
        if !u.is_object() {
            return;
        }
        let cached = u["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        self.turn.usage.input_tokens = u["prompt_tokens"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(cached);
        self.turn.usage.cache_read_tokens = cached;
        self.turn.usage.output_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
    }

    /// Completes every open call before `upto` (by position).
    fn complete_calls(&mut self, upto: usize, out: &mut Vec<ModelEvent>) {
        for i in 0..upto.min(self.calls.len()) {
            if self.calls[i].done {
                continue;
            }
            self.calls[i].done = true;
            let (id, name, raw) = {
                let c = &self.calls[i];
                let id = if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id.clone()
                };
                (id, c.name.clone(), c.arguments.clone())
            };
            self.calls[i].id = id.clone();
            let actions = if raw.trim().is_empty() {
                self.decoder.lumen_tool(&name, &json!({}), self.space)
            } else {
                match serde_json::from_str::<Value>(&raw) {
                    Ok(args) => self.decoder.lumen_tool(&name, &args, self.space),
                    Err(e) => vec![ActionDecoder::unparseable(&name, &raw, &e)],
                }
            };
            self.turn.push_call(&id, actions, &[], out);
        }
    }
}

impl Decode for StreamParser {
    fn feed(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        let v: Value = parse_payload(PROVIDER, event)?;
        if let Some(error) = v.get("error") {
            let message = error["message"]
                .as_str()
                .or_else(|| error.as_str())
                .unwrap_or("no message");
            let (kind, _) =
                crate::http::classify(error["code"].as_u64().unwrap_or(0) as u16, message);
            return Err(LumenError::ModelApi {
                provider: PROVIDER.to_owned(),
                status: None,
                kind: if error["code"].is_u64() {
                    kind
                } else {
                    lumen_core::ModelErrorKind::Stream
                },
                retryable: false,
                message: format!("error in the stream: {message}"),
                body: Some(event.data.clone()),
                retry_after: None,
            });
        }
        self.started = true;
        self.usage(&v["usage"]);
        let Some(choice) = v["choices"].as_array().and_then(|c| c.first()) else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str()
            && !text.is_empty()
        {
            out.push(ModelEvent::TextDelta(text.to_owned()));
            self.turn.text.push_str(text);
        }
        for key in ["reasoning_content", "reasoning"] {
            if let Some(r) = delta[key].as_str()
                && !r.is_empty()
            {
                out.push(ModelEvent::ThinkingDelta(r.to_owned()));
                self.reasoning.push_str(r);
            }
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for call in calls {
                let index = call["index"]
                    .as_u64()
                    .map_or(self.calls.len(), |i| i as usize);
                // A bounded index: a hostile server cannot make us allocate.
                if index > self.calls.len() || index > 512 {
                    return Err(stream_error(
                        PROVIDER,
                        format!("a tool-call delta for index {index} skips earlier calls"),
                    ));
                }
                if index == self.calls.len() {
                    // A new call starts: every earlier one is complete.
                    self.complete_calls(index, out);
                    self.calls.push(OpenCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                        done: false,
                    });
                }
                let open = &mut self.calls[index];
                if let Some(id) = call["id"].as_str()
                    && open.id.is_empty()
                {
                    open.id = id.to_owned();
                }
                if let Some(name) = call["function"]["name"].as_str() {
                    // Some servers repeat the whole name in every delta;
                    // the name is streamed once by OpenAI itself.
                    if open.name != name {
                        open.name.push_str(name);
                    }
                }
                if let Some(args) = call["function"]["arguments"].as_str() {
                    open.arguments.push_str(args);
                }
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
            self.complete_calls(self.calls.len(), out);
        }
        Ok(false)
    }

    fn finish(&mut self, terminal: bool, out: &mut Vec<ModelEvent>) -> Result<ModelResponse> {
        if !terminal && self.finish_reason.is_none() {
            return Err(stream_error(
                PROVIDER,
                if self.started {
                    "the stream ended before a finish reason or [DONE] (truncated answer)"
                } else {
                    "the stream ended before any answer"
                },
            ));
        }
        self.complete_calls(self.calls.len(), out);
        if !self.reasoning.is_empty() {
            self.turn.thinking.push(lumen_core::ThinkingBlock {
                text: std::mem::take(&mut self.reasoning),
                signature: None,
                redacted: false,
            });
        }
        self.turn.stop_reason = self.finish_reason.take();
        let tool_calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        let (response, extra) = self
            .turn
            .finish(PROVIDER, Some(json!({"tool_calls": tool_calls})));
        if let Some(call) = extra {
            out.push(ModelEvent::Action(call));
        }
        Ok(response)
    }
}

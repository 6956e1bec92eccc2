//! Google Gemini (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`)
//! with the `computerUse` tool in the browser environment.
//!
//! - Coordinates arrive on the 0–1000 grid and are denormalised against the
//!   viewport ([`crate::decoder`]).
//! - Function calls have no ids on the wire; each gets
//!   `{responseId}-{n}` (or `gemini-{n}`) so the loop can pair results.
//!   They are answered by `functionResponse` parts in call order, each
//!   carrying the page URL; the screenshot taken after the calls rides in
//!   the last response's `parts` (as the computer-use protocol wants).
//! - `safety_decision` in a call's arguments becomes a [`SafetyCheck`] on its
//!   actions; when the user acknowledged it, the function response says
//!   `safety_acknowledgement: "true"`.
//! - Thought signatures are kept on the parts they came with and replayed
//!   verbatim. Gemini 3 streams arguments (`functionCall{name,
//!   willContinue}`, then `partialArgs`, then an empty `functionCall{}`):
//!   they are assembled and the action is yielded when the call completes.
//! - The stream has no terminal event: it is complete when a candidate has
//!   a `finishReason` and the body ends.

use lumen_core::{
    AssistantTurn, LumenError, ModelErrorKind, ModelEvent, ModelResponse, Result, SafetyCheck,
    StepContext, ThinkingBlock, ToolResult, WireRecord,
};
use serde_json::{Map, Value, json};

use crate::adapter::{Codec, HttpAdapter};
use crate::decoder::ActionDecoder;
use crate::http::{Http, SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry::{self, ModelSpec, Temperature, ThinkingStyle};
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use crate::{AdapterOptions, Effort, Provider, join_url};

const PROVIDER: &str = "google";
const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
const DEFAULT_SUMMARY_MODEL: &str = "gemini-2.5-flash";

/// The Gemini adapter: the shared HTTP adapter over [`GoogleCodec`].
pub type GoogleAdapter = HttpAdapter<GoogleCodec>;

/// Gemini's `generateContent` wire format.
#[derive(Debug)]
pub struct GoogleCodec {
    model: String,
    key: crate::http::ApiKey,
    base_url: String,
    spec: &'static ModelSpec,
    max_tokens: u32,
    thinking_budget: Option<u32>,
    effort: Option<Effort>,
    summary_model: String,
}

impl HttpAdapter<GoogleCodec> {
    /// An adapter for `model` (`gemini-2.5-computer-use-preview-10-2025`).
    /// Needs `options.api_key`.
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
                "google api key",
                "no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass AdapterOptions::api_key",
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
        let spec = registry::spec(Provider::Google, model);
        let effort = options.wanted_effort();
        let codec = GoogleCodec {
            model: model.to_owned(),
            key,
            spec,
            base_url: options
                .base_url
                .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            max_tokens: options.max_tokens.unwrap_or(spec.max_output),
            effort,
            thinking_budget: options.thinking_budget,
            summary_model: options
                .summary_model
                .unwrap_or_else(|| DEFAULT_SUMMARY_MODEL.to_owned()),
        };
        Ok(Self {
            info: spec.info(model, 56, true),
            http,
            codec,
        })
    }

    /// The request body for one step (public so tests can pin it).
    pub fn request_body(&self, ctx: &StepContext<'_>) -> Value {
        self.codec.request_body(ctx)
    }
}

impl GoogleCodec {
    fn model_url(&self, model: &str, stream: bool) -> String {
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        join_url(&self.base_url, &format!("v1beta/models/{model}:{method}"))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![("x-goog-api-key", self.key.expose().to_owned())]
    }

    fn request_body(&self, ctx: &StepContext<'_>) -> Value {
        // `navigate` is one of Gemini's own computer-use functions.
        let functions: Vec<Value> = prompt::own_tools()
            .into_iter()
            .filter(|(name, _, _)| *name != "navigate")
            .map(|(name, description, schema)| {
                json!({"name": name, "description": description, "parameters": gemini_schema(&schema)})
            })
            .collect();
        let mut contents = build_contents(ctx);
        if !ctx.system_prompt.trim().is_empty() {
            push_part(&mut contents, "user", json!({"text": ctx.system_prompt}));
        }
        let mut config = json!({"maxOutputTokens": self.max_tokens});
        match self.spec.thinking {
            ThinkingStyle::GeminiBudget => {
                if let Some(budget) = self.thinking_budget {
                    config["thinkingConfig"] =
                        json!({"thinkingBudget": budget, "includeThoughts": true});
                }
            }
            // Gemini 3 takes a level; a budget alongside it is a 400.
            ThinkingStyle::GeminiLevel => {
                let mut thinking = json!({"includeThoughts": true});
                if let Some(effort) = self.effort {
                    thinking["thinkingLevel"] = json!(effort.gemini());
                }
                config["thinkingConfig"] = thinking;
            }
            _ => {}
        }
        match self.spec.temperature {
            // Gemini 3's guidance: keep 1.0; lower values make it loop.
            Temperature::Fixed(t) => config["temperature"] = crate::temperature_json(t),
            _ => {
                if let Some(t) = ctx.temperature {
                    config["temperature"] = crate::temperature_json(t);
                }
            }
        }
        json!({
            "systemInstruction": {"parts": [{"text": prompt::MECHANICS}]},
            "contents": contents,
            "tools": [
                {"computerUse": {"environment": "ENVIRONMENT_BROWSER"}},
                {"functionDeclarations": functions},
            ],
            "generationConfig": config,
        })
    }
}

impl Codec for GoogleCodec {
    type Parser = StreamParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn url(&self, stream: bool) -> String {
        self.model_url(&self.model, stream)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        GoogleCodec::headers(self)
    }

    /// Gemini's request has no `stream` field: the URL says it.
    fn body(&self, ctx: &StepContext<'_>, _stream: bool) -> Value {
        self.request_body(ctx)
    }

    fn parser(&self, decoder: ActionDecoder) -> StreamParser {
        StreamParser::new(decoder)
    }

    fn answer(&self, decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
        let mut parser = StreamParser::new(decoder);
        let mut out = Vec::new();
        parser.chunk(&answer, &mut out)?;
        parser.finish(true, &mut out)
    }

    /// Gemini's tile rule (see [`image_tokens`]).
    fn image_tokens(&self, width: u32, height: u32) -> u64 {
        image_tokens(width, height)
    }

    fn overhead_chars(&self) -> usize {
        1000
    }

    fn summary_request(&self, text: String) -> (String, Vec<(&'static str, String)>, Value) {
        let body = json!({
            "systemInstruction": {"parts": [{"text": prompt::SUMMARIZE}]},
            "contents": [{"role": "user", "parts": [{"text": text}]}],
        });
        (
            self.model_url(&self.summary_model, false),
            self.headers(),
            body,
        )
    }

    fn summary_text(&self, answer: Value) -> Result<String> {
        Ok(answer["candidates"][0]["content"]["parts"]
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p["thought"] != true)
                    .filter_map(|p| p["text"].as_str())
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// Gemini's image rule: 258 tokens when both sides are ≤384 px, else 258
/// per 768×768 tile.
pub fn image_tokens(width: u32, height: u32) -> u64 {
    if width <= 384 && height <= 384 {
        return 258;
    }
    let tiles = width.div_ceil(768).max(1) as u64 * height.div_ceil(768).max(1) as u64;
    tiles * 258
}

// ----- request building ------------------------------------------------------

/// A JSON Schema in the dialect of Gemini's `FunctionDeclaration.parameters`
/// (the SDK's `Schema`): upper-case type names, no `additionalProperties`,
/// and no OBJECT schema without `properties` (the Developer API refuses
/// both). An open object becomes a string holding a JSON object, which the
/// decoder parses.
fn gemini_schema(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let open_object = map.get("type") == Some(&json!("object"))
        && map
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty());
    if open_object {
        return json!({
            "type": "STRING",
            "description": "A JSON object, written out as text, e.g. {\"key\": \"value\"}.",
        });
    }
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "additionalProperties" => {}
            "properties" => {
                let props = value
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(k, v)| (k.clone(), gemini_schema(v)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" => {
                out.insert(key.clone(), gemini_schema(value));
            }
            // The SDK's `Schema.type` is an enum of upper-case names.
            "type" => {
                let upper = value.as_str().map(str::to_ascii_uppercase);
                out.insert(
                    key.clone(),
                    upper.map_or_else(|| value.clone(), Value::from),
                );
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

fn push_part(contents: &mut Vec<Value>, role: &str, part: Value) {
    match contents.last_mut() {
        Some(last) if last["role"] == role => {
            if let Some(parts) = last["parts"].as_array_mut() {
                parts.push(part);
            }
        }
        _ => contents.push(json!({"role": role, "parts": [part]})),
    }
}

/// A call awaiting its function response.
struct Pending {
    name: String,
    /// The call's wire id, echoed in `functionResponse.id`.
    wire_id: Option<String>,
    ids: Vec<String>,
}

fn build_contents(ctx: &StepContext<'_>) -> Vec<Value> {
    let mut contents: Vec<Value> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut saw_screenshot = false;
    let mut last_url: Option<String> = None;
    for record in ctx.wire {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                answer(
                    &mut contents,
                    &mut pending,
                    &mut results,
                    None,
                    last_url.as_deref(),
                );
                push_part(
                    &mut contents,
                    "user",
                    json!({"text": prompt::summary_text(content, *compacted_at)}),
                );
            }
            WireRecord::Screenshot(shot) => {
                saw_screenshot = true;
                if shot.url.is_some() {
                    last_url = shot.url.clone();
                }
                let image = shot.image.as_ref().map(|img| {
                    json!({"inlineData": {"mimeType": img.format.mime(), "data": img.to_base64()}})
                });
                let marker = prompt::screenshot_marker(shot.step);
                let used = answer(
                    &mut contents,
                    &mut pending,
                    &mut results,
                    Some((image.clone(), marker.clone())),
                    last_url.as_deref(),
                );
                if !used {
                    match image {
                        Some(part) => push_part(&mut contents, "user", part),
                        None => push_part(&mut contents, "user", json!({"text": marker})),
                    }
                }
            }
            WireRecord::Assistant(turn) => {
                answer(
                    &mut contents,
                    &mut pending,
                    &mut results,
                    None,
                    last_url.as_deref(),
                );
                if contents.is_empty() {
                    push_part(
                        &mut contents,
                        "user",
                        json!({"text": "(the history starts here)"}),
                    );
                }
                model_turn(&mut contents, &mut pending, turn);
            }
            WireRecord::ToolResult(r) => results.push(r.clone()),
            _ => {}
        }
    }
    answer(
        &mut contents,
        &mut pending,
        &mut results,
        None,
        last_url.as_deref(),
    );
    if !saw_screenshot {
        let img = &ctx.screenshot.image;
        push_part(
            &mut contents,
            "user",
            json!({"inlineData": {"mimeType": img.format.mime(), "data": img.to_base64()}}),
        );
    }
    contents
}

fn native(turn: &AssistantTurn) -> Option<&Vec<Value>> {
    turn.provider
        .as_ref()
        .filter(|p| p.provider == PROVIDER)
        .and_then(|p| p.data.get("parts"))
        .and_then(Value::as_array)
}

fn model_turn(contents: &mut Vec<Value>, pending: &mut Vec<Pending>, turn: &AssistantTurn) {
    match native(turn) {
        Some(parts) => {
            let ids: Vec<Value> = turn
                .provider
                .as_ref()
                .and_then(|p| p.data.get("callIds"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let groups = prompt::call_groups(turn);
            let mut n = 0;
            for part in parts {
                push_part(contents, "model", part.clone());
                if let Some(name) = part["functionCall"]["name"].as_str() {
                    let base = ids.get(n).and_then(Value::as_str).unwrap_or("").to_owned();
                    let call_ids = groups
                        .iter()
                        .find(|(g, _)| *g == base)
                        .map_or_else(|| vec![base.clone()], |(_, ids)| ids.clone());
                    pending.push(Pending {
                        name: name.to_owned(),
                        wire_id: wire_id(&part["functionCall"]),
                        ids: call_ids,
                    });
                    n += 1;
                }
            }
        }
        None => {
            // Another adapter's turn: told as text (its calls are not
            // Gemini function calls); the results follow as text.
            let mut text = turn.text.clone().unwrap_or_default();
            for call in &turn.calls {
                if call.id == stream::TEXT_ANSWER_ID {
                    continue;
                }
                if !text.is_empty() {
                    text.push('\n');
                }
                let action = serde_json::to_string(&call.action).unwrap_or_default();
                text.push_str(&format!("[action {}] {action}", call.id));
            }
            if !text.is_empty() {
                push_part(contents, "model", json!({"text": text}));
            }
        }
    }
}

/// Answers the pending calls with function responses. `shot` is the
/// screenshot that follows them (image part, or its marker when
/// compressed), attached to the last response. Returns whether it was used.
fn answer(
    contents: &mut Vec<Value>,
    pending: &mut Vec<Pending>,
    results: &mut Vec<ToolResult>,
    shot: Option<(Option<Value>, String)>,
    url: Option<&str>,
) -> bool {
    if pending.is_empty() && results.is_empty() {
        return false;
    }
    let taken = std::mem::take(results);
    let refs: Vec<&ToolResult> = taken.iter().collect();
    let calls = std::mem::take(pending);
    let count = calls.len();
    let mut used = false;
    for (i, call) in calls.iter().enumerate() {
        let a = prompt::answer_for(&call.ids, &refs);
        let mut response = Map::new();
        if let Some(url) = url {
            response.insert("url".into(), json!(url));
        }
        if a.ok {
            response.insert("result".into(), json!(a.text));
        } else {
            response.insert("error".into(), json!(a.text));
        }
        if !a.acknowledged.is_empty() {
            response.insert("safety_acknowledgement".into(), json!("true"));
        }
        let mut fr = json!({"name": call.name, "response": response});
        if let Some(id) = &call.wire_id {
            fr["id"] = json!(id);
        }
        if i + 1 == count
            && let Some((image, marker)) = &shot
        {
            used = true;
            match image {
                Some(part) => fr["parts"] = json!([part]),
                None => fr["response"]["screenshot"] = json!(marker),
            }
        }
        push_part(contents, "user", json!({"functionResponse": fr}));
    }
    let answered: Vec<&String> = calls.iter().flat_map(|c| c.ids.iter()).collect();
    for r in &taken {
        if answered.contains(&&r.call_id) {
            continue;
        }
        let status = match (&r.error, r.ok) {
            (_, true) => "ok".to_owned(),
            (Some(e), false) => format!("error: {e}"),
            (None, false) => "error".to_owned(),
        };
        let mut text = format!("Result of `{}` ({}): {status}", r.action, r.call_id);
        for h in &r.hints {
            text.push_str(&format!("\nhint: {h}"));
        }
        push_part(contents, "user", json!({"text": text}));
    }
    used
}

// ----- answer parsing --------------------------------------------------------

/// A function call being streamed (Gemini 3 partial arguments).
#[derive(Debug)]
struct Partial {
    name: String,
    /// The call's own id, when the API gave one (its function response
    /// must carry it back).
    id: Option<String>,
    args: Value,
    signature: Option<String>,
}

/// Gemini's stream parser (public for `cargo xtask decode-stream`).
#[derive(Debug)]
pub struct StreamParser {
    decoder: ActionDecoder,
    turn: TurnBuilder,
    /// Parts to replay, in order.
    parts: Vec<Value>,
    call_ids: Vec<String>,
    partial: Option<Partial>,
    response_id: Option<String>,
    finished: bool,
    started: bool,
    calls: usize,
}

impl StreamParser {
    /// A parser decoding coordinates with `decoder`.
    pub fn new(decoder: ActionDecoder) -> Self {
        Self {
            decoder,
            turn: TurnBuilder::default(),
            parts: Vec::new(),
            call_ids: Vec::new(),
            partial: None,
            response_id: None,
            finished: false,
            started: false,
            calls: 0,
        }
    }

    /// Feeds one `GenerateContentResponse`.
    fn chunk(&mut self, v: &Value, out: &mut Vec<ModelEvent>) -> Result<()> {
        if let Some(error) = v.get("error") {
            let code = error["code"].as_u64().unwrap_or(0);
            let (kind, _) =
                crate::http::classify(code as u16, error["message"].as_str().unwrap_or(""));
            return Err(LumenError::ModelApi {
                provider: PROVIDER.to_owned(),
                status: None,
                kind: if code == 0 {
                    ModelErrorKind::Stream
                } else {
                    kind
                },
                retryable: false,
                message: format!(
                    "error in the stream ({}): {}",
                    error["status"].as_str().unwrap_or("unknown"),
                    error["message"].as_str().unwrap_or("no message")
                ),
                body: Some(v.to_string()),
                retry_after: None,
            });
        }
        self.started = true;
        if let Some(id) = v["responseId"].as_str() {
            self.response_id.get_or_insert_with(|| id.to_owned());
        }
        if let Some(reason) = v["promptFeedback"]["blockReason"].as_str() {
            return Err(LumenError::ModelApi {
                provider: PROVIDER.to_owned(),
                status: None,
                kind: ModelErrorKind::BadRequest,
                retryable: false,
                message: format!("the prompt was blocked ({reason})"),
                body: Some(v.to_string()),
                retry_after: None,
            });
        }
        if let Some(u) = v.get("usageMetadata") {
            let n = |k: &str| u[k].as_u64().unwrap_or(0);
            let cached = n("cachedContentTokenCount");
            self.turn.usage.input_tokens = n("promptTokenCount").saturating_sub(cached);
            self.turn.usage.cache_read_tokens = cached;
            self.turn.usage.output_tokens = n("candidatesTokenCount") + n("thoughtsTokenCount");
        }
        let candidate = &v["candidates"][0];
        if let Some(parts) = candidate["content"]["parts"].as_array() {
            for part in parts {
                self.part(part, out);
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            self.finished = true;
            self.turn.stop_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    fn part(&mut self, part: &Value, out: &mut Vec<ModelEvent>) {
        let signature = part["thoughtSignature"].as_str().map(str::to_owned);
        if let Some(call) = part.get("functionCall") {
            self.function_call(call, signature, out);
            return;
        }
        let text = part["text"].as_str().unwrap_or("");
        if part["thought"] == true {
            if !text.is_empty() {
                out.push(ModelEvent::ThinkingDelta(text.to_owned()));
            }
            self.turn.thinking.push(ThinkingBlock {
                text: text.to_owned(),
                signature: signature.clone(),
                redacted: false,
            });
            if signature.is_some() {
                self.parts.push(part.clone());
            }
            return;
        }
        if !text.is_empty() {
            out.push(ModelEvent::TextDelta(text.to_owned()));
            self.turn.text.push_str(text);
        }
        match (signature, self.parts.last_mut()) {
            // Consecutive unsigned text merges into one part.
            (None, Some(last))
                if last.get("text").is_some()
                    && last.get("thoughtSignature").is_none()
                    && last["thought"] != true =>
            {
                let joined = format!("{}{text}", last["text"].as_str().unwrap_or(""));
                last["text"] = json!(joined);
            }
            (None, _) if text.is_empty() => {}
            (sig, _) => {
                if let Some(sig) = &sig {
                    self.turn.thinking.push(ThinkingBlock {
                        text: String::new(),
                        signature: Some(sig.clone()),
                        redacted: false,
                    });
                }
                self.parts.push(part.clone());
            }
        }
    }

    fn function_call(
        &mut self,
        call: &Value,
        signature: Option<String>,
        out: &mut Vec<ModelEvent>,
    ) {
        let name = call["name"].as_str();
        let streaming = call["willContinue"] == true;
        match (name, &mut self.partial) {
            // A new streamed call.
            (Some(name), _) if streaming => {
                if let Some(previous) = self.partial.take() {
                    self.complete(previous, out);
                }
                self.partial = Some(Partial {
                    name: name.to_owned(),
                    id: wire_id(call),
                    args: call.get("args").cloned().unwrap_or_else(|| json!({})),
                    signature,
                });
            }
            // A complete call in one part.
            (Some(name), _) => {
                if let Some(previous) = self.partial.take() {
                    self.complete(previous, out);
                }
                let partial = Partial {
                    name: name.to_owned(),
                    id: wire_id(call),
                    args: call.get("args").cloned().unwrap_or_else(|| json!({})),
                    signature,
                };
                self.complete(partial, out);
            }
            // More arguments for the open call.
            (None, Some(open)) if call.get("partialArgs").is_some() => {
                if let Some(items) = call["partialArgs"].as_array() {
                    for item in items {
                        apply_partial(&mut open.args, item);
                    }
                }
                if open.signature.is_none() {
                    open.signature = signature;
                }
                if open.id.is_none() {
                    open.id = wire_id(call);
                }
            }
            // The empty terminator of a streamed call.
            (None, Some(_)) => {
                if let Some(done) = self.partial.take() {
                    self.complete(done, out);
                }
            }
            // Arguments with no call open: malformed, reported to the model.
            (None, None) => {
                let id = self.next_id();
                let action = lumen_core::Action::Invalid {
                    name: "functionCall".into(),
                    input: call.clone(),
                    error: "a function call without a name".into(),
                };
                self.turn.push_call(&id, vec![action], &[], out);
            }
        }
    }

    fn next_id(&mut self) -> String {
        let n = self.calls;
        self.calls += 1;
        match &self.response_id {
            Some(r) => format!("{r}-{n}"),
            None => format!("gemini-{n}"),
        }
    }

    fn complete(&mut self, call: Partial, out: &mut Vec<ModelEvent>) {
        let generated = self.next_id();
        let mut part = json!({"functionCall": {"name": call.name, "args": call.args}});
        if let Some(id) = &call.id {
            part["functionCall"]["id"] = json!(id);
        }
        let id = call.id.unwrap_or(generated);
        if let Some(sig) = &call.signature {
            part["thoughtSignature"] = json!(sig);
        }
        self.parts.push(part);
        self.call_ids.push(id.clone());
        let checks: Vec<SafetyCheck> = match call.args.get("safety_decision") {
            Some(d) if d.is_object() => vec![SafetyCheck {
                id: id.clone(),
                code: d["decision"]
                    .as_str()
                    .unwrap_or("require_confirmation")
                    .to_owned(),
                message: d["explanation"].as_str().unwrap_or("").to_owned(),
            }],
            _ => Vec::new(),
        };
        let actions = self.decoder.gemini(&call.name, &call.args);
        self.turn.push_call(&id, actions, &checks, out);
    }
}

/// A function call's `id`, when it has a non-empty one.
fn wire_id(call: &Value) -> Option<String> {
    call["id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// A step of a `partialArgs` JSON path.
enum Seg {
    Key(String),
    Index(usize),
}

/// Applies one `partialArgs` item (`$.a.b[0]` paths; strings stream by
/// concatenation, other values replace).
fn apply_partial(args: &mut Value, item: &Value) {
    let Some(path) = item["jsonPath"].as_str() else {
        return;
    };
    let mut segs = Vec::new();
    for segment in path
        .trim_start_matches('$')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        let mut pieces = segment.split('[');
        if let Some(key) = pieces.next()
            && !key.is_empty()
        {
            segs.push(Seg::Key(key.to_owned()));
        }
        for index in pieces {
            match index.trim_end_matches(']').parse::<usize>() {
                // Bound the array a hostile path could make us allocate.
                Ok(i) if i < 10_000 => segs.push(Seg::Index(i)),
                _ => return,
            }
        }
    }
    set_at(args, &segs, item);
}

fn set_at(target: &mut Value, path: &[Seg], item: &Value) {
    match path.split_first() {
        None => {
            if let Some(s) = item["stringValue"].as_str() {
                let joined = format!("{}{s}", target.as_str().unwrap_or(""));
                *target = json!(joined);
            } else if let Some(v) = item.get("numberValue") {
                *target = v.clone();
            } else if let Some(v) = item.get("boolValue") {
                *target = v.clone();
            } else if item.get("nullValue").is_some() {
                *target = Value::Null;
            }
        }
        Some((Seg::Key(key), rest)) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Some(map) = target.as_object_mut() {
                set_at(map.entry(key.clone()).or_insert(Value::Null), rest, item);
            }
        }
        Some((Seg::Index(i), rest)) => {
            if !target.is_array() {
                *target = json!([]);
            }
            if let Some(a) = target.as_array_mut() {
                while a.len() <= *i {
                    a.push(Value::Null);
                }
                set_at(&mut a[*i], rest, item);
            }
        }
    }
}

impl Decode for StreamParser {
    fn feed(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        let v: Value = parse_payload(PROVIDER, event)?;
        self.chunk(&v, out)?;
        Ok(false)
    }

    fn finish(&mut self, _terminal: bool, out: &mut Vec<ModelEvent>) -> Result<ModelResponse> {
        if let Some(open) = self.partial.take() {
            if !self.finished {
                return Err(stream_error(
                    PROVIDER,
                    format!("the stream ended inside the arguments of `{}`", open.name),
                ));
            }
            self.complete(open, out);
        }
        if !self.finished {
            return Err(stream_error(
                PROVIDER,
                if self.started {
                    "the stream ended before a finish reason (truncated answer)"
                } else {
                    "the stream ended before any answer"
                },
            ));
        }
        let native = json!({
            "responseId": self.response_id,
            "parts": self.parts,
            "callIds": self.call_ids,
        });
        let (response, extra) = self.turn.finish(PROVIDER, Some(native));
        if let Some(call) = extra {
            out.push(ModelEvent::Action(call));
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_args_assemble() {
        let mut args = json!({});
        for item in [
            json!({"jsonPath": "$.text", "stringValue": "hel", "willContinue": true}),
            json!({"jsonPath": "$.text", "stringValue": "lo"}),
            json!({"jsonPath": "$.x", "numberValue": 500}),
            json!({"jsonPath": "$.press_enter", "boolValue": false}),
            json!({"jsonPath": "$.list[1].a", "stringValue": "z"}),
        ] {
            apply_partial(&mut args, &item);
        }
        assert_eq!(
            args,
            json!({"text": "hello", "x": 500, "press_enter": false, "list": [null, {"a": "z"}]})
        );
    }
}

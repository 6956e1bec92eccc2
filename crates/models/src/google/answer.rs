//! Answer parsing: the google stream (and non-streamed answers) into model events.

use super::*;
use crate::limits::{MAX_PARTIAL_ARG_PATH_DEPTH, MAX_TOOL_ARGUMENTS_BYTES};
use lumen_core::Action;

/// A function call being streamed (Gemini 3 partial arguments).
#[derive(Debug)]
pub(super) struct Partial {
    name: String,
    /// The call's own id, when the API gave one (its function response
    /// must carry it back).
    id: Option<String>,
    args: Value,
    signature: Option<String>,
    /// About how many bytes of JSON the arguments have grown to (bounded
    /// by `MAX_TOOL_ARGUMENTS_BYTES`).
    bytes: usize,
    /// Why the arguments are unusable (a path over the depth cap, or the
    /// arguments over the size cap); nothing more is applied then.
    broken: Option<Action>,
}

impl Partial {
    fn new(name: &str, call: &Value, signature: Option<String>) -> Self {
        let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
        let broken = crate::limits::check_arguments(name, &args);
        Self {
            name: name.to_owned(),
            id: wire_id(call),
            args,
            signature,
            bytes: 0,
            broken,
        }
    }

    /// Applies `partialArgs` items, until one breaks the arguments.
    fn apply(&mut self, items: &[Value]) {
        for item in items {
            if self.broken.is_some() {
                return;
            }
            match apply_partial(&mut self.args, item) {
                Ok(grown) => {
                    self.bytes = self.bytes.saturating_add(grown);
                    if self.bytes > MAX_TOOL_ARGUMENTS_BYTES {
                        self.broken = Some(crate::limits::oversized_arguments(
                            &self.name, self.bytes, "",
                        ));
                        // What was built is dropped now, not kept to the end.
                        self.args = json!({});
                    }
                }
                Err(error) => {
                    self.broken = Some(Action::Invalid {
                        name: self.name.clone(),
                        input: item["jsonPath"].clone(),
                        error,
                    });
                    self.args = json!({});
                }
            }
        }
    }
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
                self.partial = Some(Partial::new(name, call, signature));
            }
            // A complete call in one part.
            (Some(name), _) => {
                if let Some(previous) = self.partial.take() {
                    self.complete(previous, out);
                }
                let partial = Partial::new(name, call, signature);
                self.complete(partial, out);
            }
            // More arguments for the open call.
            (None, Some(open)) if call.get("partialArgs").is_some() => {
                if let Some(items) = call["partialArgs"].as_array() {
                    open.apply(items);
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
        let actions = match call.broken {
            Some(invalid) => vec![invalid],
            None => self.decoder.gemini(&call.name, &call.args),
        };
        self.turn.push_call(&id, actions, &checks, out);
    }
}

/// A function call's `id`, when it has a non-empty one.
pub(super) fn wire_id(call: &Value) -> Option<String> {
    call["id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// A step of a `partialArgs` JSON path.
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// Applies one `partialArgs` item (`$.a.b[0]` paths; strings stream by
/// concatenation, other values replace). Returns about how many bytes of
/// JSON the arguments grew by, or why the path cannot be applied (over
/// [`MAX_PARTIAL_ARG_PATH_DEPTH`] steps, or an index out of range). An
/// item without a path changes nothing.
pub(super) fn apply_partial(args: &mut Value, item: &Value) -> std::result::Result<usize, String> {
    let Some(path) = item["jsonPath"].as_str() else {
        return Ok(0);
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
                _ => {
                    return Err(format!(
                        "the partial-argument path `{}` has an index that is not a number \
                         below 10000",
                        crate::stream::truncate(path, 100)
                    ));
                }
            }
        }
        if segs.len() > MAX_PARTIAL_ARG_PATH_DEPTH {
            return Err(format!(
                "the partial-argument path `{}…` is over the cap of {} steps on a \
                 Gemini partial-argument path (MAX_PARTIAL_ARG_PATH_DEPTH)",
                crate::stream::truncate(path, 100),
                MAX_PARTIAL_ARG_PATH_DEPTH
            ));
        }
    }
    Ok(path.len() + set_at(args, &segs, item))
}

/// Sets the value at `path` (at most [`MAX_PARTIAL_ARG_PATH_DEPTH`] deep);
/// returns about how many bytes of JSON that added (a `null` padding an
/// array counts its five bytes).
pub(super) fn set_at(target: &mut Value, path: &[Seg], item: &Value) -> usize {
    match path.split_first() {
        None => {
            if let Some(s) = item["stringValue"].as_str() {
                match target {
                    Value::String(t) => t.push_str(s),
                    _ => *target = json!(s),
                }
                s.len()
            } else if let Some(v) = item.get("numberValue") {
                *target = v.clone();
                8
            } else if let Some(v) = item.get("boolValue") {
                *target = v.clone();
                5
            } else if item.get("nullValue").is_some() {
                *target = Value::Null;
                4
            } else {
                0
            }
        }
        Some((Seg::Key(key), rest)) => {
            if !target.is_object() {
                *target = json!({});
            }
            match target.as_object_mut() {
                Some(map) => set_at(map.entry(key.clone()).or_insert(Value::Null), rest, item),
                None => 0,
            }
        }
        Some((Seg::Index(i), rest)) => {
            if !target.is_array() {
                *target = json!([]);
            }
            match target.as_array_mut() {
                Some(a) => {
                    let padding = (*i + 1).saturating_sub(a.len());
                    a.resize(a.len() + padding, Value::Null);
                    padding * 5 + set_at(&mut a[*i], rest, item)
                }
                None => 0,
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

/// Parses a non-streamed answer.
pub(super) fn parse_answer(decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
    let mut parser = StreamParser::new(decoder);
    let mut out = Vec::new();
    parser.chunk(&answer, &mut out)?;
    parser.finish(true, &mut out)
}

//! Answer parsing: the compatible stream (and non-streamed answers) into model events.

use super::*;
use crate::limits::ToolArgs;

#[derive(Debug)]
pub(super) struct OpenCall {
    id: String,
    name: String,
    /// Bounded by `MAX_TOOL_ARGUMENTS_BYTES`.
    arguments: ToolArgs,
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
            let actions = match raw.get(&name) {
                Err(over_cap) => vec![over_cap],
                Ok(raw) if raw.trim().is_empty() => {
                    self.decoder.lumen_tool(&name, &json!({}), self.space)
                }
                Ok(raw) => match serde_json::from_str::<Value>(raw) {
                    Ok(args) => self.decoder.lumen_tool(&name, &args, self.space),
                    Err(e) => vec![ActionDecoder::unparseable(&name, raw, &e)],
                },
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
                        arguments: ToolArgs::default(),
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
                    open.arguments.push(args);
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
            .map(|c| {
                // A call over the cap is replayed without its arguments.
                let arguments = if c.arguments.over() { "{}" } else { c.arguments.as_str() };
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}})
            })
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

/// Parses a non-streamed answer.
pub(super) fn parse_answer(
    decoder: ActionDecoder,
    space: CoordinateSpace,
    answer: Value,
) -> Result<ModelResponse> {
    let mut parser = StreamParser::with_space(decoder, space);
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
                arguments: ToolArgs::whole(
                    call["function"]["arguments"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                ),
                done: false,
            });
        }
    }
    parser.usage(&answer["usage"]);
    parser.finish_reason = choice["finish_reason"].as_str().map(str::to_owned);
    parser.finish(true, &mut out)
}

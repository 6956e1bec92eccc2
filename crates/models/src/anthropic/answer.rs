//! Answer parsing: the anthropic stream (and non-streamed answers) into model events.

use super::*;
use crate::limits::ToolArgs;

#[derive(Debug, Deserialize)]
pub(super) struct WireMessage {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) content: Vec<WireBlock>,
    #[serde(default)]
    pub(super) stop_reason: Option<String>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireBlock {
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
pub(super) struct WireUsage {
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
pub(super) enum WireEvent {
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
pub(super) enum WireDelta {
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
pub(super) struct WireMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A content block being streamed.
#[derive(Debug)]
pub(super) enum Open {
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
        /// The input as JSON text, bounded by `MAX_TOOL_ARGUMENTS_BYTES`.
        json: ToolArgs,
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
                let (input, actions) = match json.get(&name) {
                    Err(over_cap) => (json!({}), vec![over_cap]),
                    Ok(json) if json.trim().is_empty() => {
                        let input = json!({});
                        let actions = decode(&input);
                        (input, actions)
                    }
                    Ok(json) => match serde_json::from_str::<Value>(json) {
                        Ok(input) => {
                            let actions = decode(&input);
                            (input, actions)
                        }
                        Err(e) => (json!({}), vec![ActionDecoder::unparseable(&name, json, &e)]),
                    },
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
                            Value::Object(m) if !m.is_empty() => {
                                ToolArgs::whole(content_block["input"].to_string())
                            }
                            _ => ToolArgs::default(),
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
                        json.push(&partial_json)
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
pub(super) fn parse_message(decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
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
                json: ToolArgs::whole(input.to_string()),
            },
            WireBlock::Other => continue,
        };
        parser.complete(open, &mut out);
    }
    Ok(parser.finish_turn(&mut out))
}

//! Answer parsing: the openai stream (and non-streamed answers) into model events.

use super::*;

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireResponse {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default)]
    pub(super) output: Vec<Value>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
    #[serde(default)]
    pub(super) incomplete_details: Option<Value>,
    #[serde(default)]
    pub(super) error: Option<Value>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<WireInputDetails>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(super) struct WireInputDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireEvent {
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
                let over_cap = crate::limits::check_arguments("computer", &item["actions"])
                    .or_else(|| crate::limits::check_arguments("computer", &item["action"]));
                let actions: Vec<Action> = match (&item["actions"], &item["action"]) {
                    _ if over_cap.is_some() => over_cap.into_iter().collect(),
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
                let actions = if raw.len() > crate::limits::MAX_TOOL_ARGUMENTS_BYTES {
                    vec![crate::limits::oversized_arguments(&name, raw.len(), raw)]
                } else if raw.trim().is_empty() {
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

pub(super) fn message_text(item: &Value) -> String {
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

pub(super) fn api_error(message: String, code: &str, body: &str) -> LumenError {
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

/// Parses a non-streamed answer.
pub(super) fn parse_answer(decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
    let response: WireResponse = serde_json::from_value(answer)
        .map_err(|e| stream_error(PROVIDER, format!("unexpected answer shape: {e}")))?;
    let mut parser = StreamParser::new(decoder);
    let mut out = Vec::new();
    for item in response.output.iter() {
        parser.item_done(item, &mut out);
    }
    parser.finish_response(&response, &mut out)
}

//! Builders for scripted model turns in each provider's real streaming
//! format, so tests, the demo and the offline eval can say "the model
//! clicks here, then answers" without hand-writing SSE.
//!
//! Each builder returns a [`Reply`] whose events match what the real API
//! streams for such a turn (event names, indices, terminal events and
//! usage), tool arguments split across deltas the way providers split them.

use serde_json::{Value, json};

use super::reply::{Reply, SseEvent};

/// One content block of an Anthropic assistant turn.
#[derive(Debug, Clone)]
pub enum AnthropicBlock {
    /// Plain text.
    Text(String),
    /// Extended thinking with its signature.
    Thinking {
        /// The reasoning.
        text: String,
        /// The signature the API requires back verbatim.
        signature: String,
    },
    /// A tool call (`computer` or one of ours).
    ToolUse {
        /// `toolu_…` id.
        id: String,
        /// Tool name.
        name: String,
        /// Its input.
        input: Value,
    },
    /// A call of a toolset member: the block names its toolset
    /// (`computer`, `browser`) in `toolset_name`.
    MemberUse {
        /// `toolu_…` id.
        id: String,
        /// The member (`left_click`, `read_page`…).
        name: String,
        /// The toolset.
        toolset: String,
        /// Its input.
        input: Value,
    },
}

/// Splits a string into at most `n` pieces on char boundaries (arguments
/// arrive in several deltas in real streams).
fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let size = chars.len().div_ceil(n.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// An Anthropic Messages stream (`stream: true`) for one assistant turn.
pub fn anthropic_turn(blocks: &[AnthropicBlock], input_tokens: u64) -> Reply {
    let mut ev = vec![SseEvent::typed(&json!({
        "type": "message_start",
        "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": "mock",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        }
    }))];
    let mut tool = false;
    for (index, block) in blocks.iter().enumerate() {
        let (start, deltas): (Value, Vec<Value>) = match block {
            AnthropicBlock::Text(t) => (
                json!({"type": "text", "text": ""}),
                pieces(t, 2)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect(),
            ),
            AnthropicBlock::Thinking { text, signature } => {
                let mut d: Vec<Value> = pieces(text, 2)
                    .into_iter()
                    .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                    .collect();
                d.push(json!({"type": "signature_delta", "signature": signature}));
                (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    d,
                )
            }
            AnthropicBlock::MemberUse {
                id,
                name,
                toolset,
                input,
            } => {
                tool = true;
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}, "toolset_name": toolset}),
                    pieces(&input.to_string(), 3)
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect(),
                )
            }
            AnthropicBlock::ToolUse { id, name, input } => {
                tool = true;
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    pieces(&input.to_string(), 3)
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect(),
                )
            }
        };
        ev.push(SseEvent::typed(
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for d in deltas {
            ev.push(SseEvent::typed(
                &json!({"type": "content_block_delta", "index": index, "delta": d}),
            ));
        }
        ev.push(SseEvent::typed(
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    ev.push(SseEvent::typed(&json!({
        "type": "message_delta",
        "delta": {"stop_reason": if tool { "tool_use" } else { "end_turn" }, "stop_sequence": null},
        "usage": {"output_tokens": 20}
    })));
    ev.push(SseEvent::typed(&json!({"type": "message_stop"})));
    Reply::Sse(ev)
}

/// One output item of an OpenAI Responses turn.
#[derive(Debug, Clone)]
pub enum OpenAiItem {
    /// A `computer_call` with one `action` (computer_use_preview) or an
    /// `actions` batch (the current computer tool): pass the whole object
    /// (`{"action": {...}}` or `{"actions": [...]}`) as `body`.
    ComputerCall {
        /// `call_…` id the answer must quote.
        call_id: String,
        /// `action` or `actions`, plus optional `pending_safety_checks`.
        body: Value,
    },
    /// A `function_call` to one of our tools.
    FunctionCall {
        /// `call_…` id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments (sent as a JSON string, as the API does).
        arguments: Value,
    },
    /// An assistant `message` with text.
    Message(String),
}

/// An OpenAI Responses stream for one turn.
pub fn openai_turn(items: &[OpenAiItem], input_tokens: u64) -> Reply {
    let response_id = "resp_mock";
    let mut ev = vec![SseEvent::typed(&json!({
        "type": "response.created",
        "response": {"id": response_id, "object": "response", "status": "in_progress", "output": []}
    }))];
    let mut output = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let done = match item {
            OpenAiItem::ComputerCall { call_id, body } => {
                let mut it = json!({"type": "computer_call", "id": format!("cu_{i}"), "call_id": call_id,
                                    "status": "completed", "pending_safety_checks": []});
                if let (Some(obj), Some(b)) = (it.as_object_mut(), body.as_object()) {
                    for (k, v) in b {
                        obj.insert(k.clone(), v.clone());
                    }
                }
                let mut added = it.clone();
                added["status"] = json!("in_progress");
                ev.push(SseEvent::typed(&json!({"type": "response.output_item.added", "output_index": i, "item": added})));
                it
            }
            OpenAiItem::FunctionCall {
                call_id,
                name,
                arguments,
            } => {
                let args = arguments.to_string();
                let id = format!("fc_{i}");
                ev.push(SseEvent::typed(
                    &json!({"type": "response.output_item.added", "output_index": i,
                    "item": {"type": "function_call", "id": id, "call_id": call_id, "name": name,
                             "arguments": "", "status": "in_progress"}}),
                ));
                for p in pieces(&args, 3) {
                    ev.push(SseEvent::typed(
                        &json!({"type": "response.function_call_arguments.delta",
                        "item_id": id, "output_index": i, "delta": p}),
                    ));
                }
                ev.push(SseEvent::typed(
                    &json!({"type": "response.function_call_arguments.done",
                    "item_id": id, "output_index": i, "arguments": args}),
                ));
                json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
                       "arguments": args, "status": "completed"})
            }
            OpenAiItem::Message(text) => {
                let id = format!("msg_{i}");
                ev.push(SseEvent::typed(&json!({"type": "response.output_item.added", "output_index": i,
                    "item": {"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []}})));
                for p in pieces(text, 2) {
                    ev.push(SseEvent::typed(
                        &json!({"type": "response.output_text.delta", "item_id": id,
                        "output_index": i, "content_index": 0, "delta": p}),
                    ));
                }
                json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
            }
        };
        ev.push(SseEvent::typed(
            &json!({"type": "response.output_item.done", "output_index": i, "item": done}),
        ));
        output.push(done);
    }
    ev.push(SseEvent::typed(&json!({
        "type": "response.completed",
        "response": {"id": response_id, "object": "response", "status": "completed", "output": output,
                     "usage": {"input_tokens": input_tokens, "output_tokens": 20, "total_tokens": input_tokens + 20,
                               "input_tokens_details": {"cached_tokens": 0},
                               "output_tokens_details": {"reasoning_tokens": 0}}}
    })));
    Reply::Sse(ev)
}

/// A Gemini `streamGenerateContent?alt=sse` stream for one turn: `parts`
/// are Gemini parts (`{"functionCall": {"name": …, "args": {…}}}`,
/// `{"text": …}`), sent one chunk each, the last with `finishReason`.
pub fn gemini_turn(parts: &[Value], prompt_tokens: u64) -> Reply {
    let n = parts.len();
    let ev = parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let mut chunk = json!({
                "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
                "modelVersion": "mock"
            });
            if i + 1 == n {
                chunk["candidates"][0]["finishReason"] = json!("STOP");
                chunk["usageMetadata"] = json!({"promptTokenCount": prompt_tokens, "candidatesTokenCount": 20,
                                                "totalTokenCount": prompt_tokens + 20});
            }
            SseEvent::data(&chunk)
        })
        .collect();
    Reply::Sse(ev)
}

/// An OpenAI-compatible Chat Completions stream for one turn with tool
/// calls `(id, name, arguments)` and optional text, ending with a usage
/// chunk and `[DONE]`.
pub fn chat_turn(calls: &[(&str, &str, Value)], text: Option<&str>, prompt_tokens: u64) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        SseEvent::data(
            &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut ev = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(t) = text {
        for p in pieces(t, 2) {
            ev.push(chunk(json!({"content": p}), Value::Null));
        }
    }
    for (index, (id, name, args)) in calls.iter().enumerate() {
        let args = args.to_string();
        let mut first = true;
        for p in pieces(&args, 3) {
            let call = if first {
                json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": p}})
            } else {
                json!({"index": index, "function": {"arguments": p}})
            };
            first = false;
            ev.push(chunk(json!({"tool_calls": [call]}), Value::Null));
        }
    }
    ev.push(chunk(
        json!({}),
        json!(if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }),
    ));
    ev.push(SseEvent::data(
        &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock",
        "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20,
                                 "total_tokens": prompt_tokens + 20}}),
    ));
    ev.push(SseEvent::raw("[DONE]"));
    Reply::Sse(ev)
}

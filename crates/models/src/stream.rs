//! What every adapter's stream parser shares: a state-machine trait fed one
//! SSE event at a time, the driver that turns it into a [`ModelStream`],
//! the builder that assembles the final [`ModelResponse`], and
//! [`collect_events`].

use std::collections::VecDeque;

use futures::StreamExt as _;
use lumen_core::{
    Action, ActionCall, AssistantTurn, ModelEvent, ModelResponse, ModelStream, ProviderTurn,
    Result, ThinkingBlock, TokenUsage,
};

use crate::decoder::{ActionDecoder, into_calls};
use crate::http::{SseEvent, SseStream, stream_error};

/// The id given to the terminate action synthesised from a text answer.
pub const TEXT_ANSWER_ID: &str = "text_answer";

/// A provider's stream parser: fed one SSE event at a time.
pub trait Decode: Send + 'static {
    /// Feeds one event, pushing what it completes into `out`. Returns `true`
    /// at the provider's terminal event (nothing after it is read).
    fn feed(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool>;

    /// Ends the answer. `terminal` says whether the terminal event arrived;
    /// when it did not, the parser decides whether what it has is complete
    /// (Gemini has no terminal event, only a finish reason).
    /// Actions completed only now (a text answer's terminate) go to `out`.
    fn finish(&mut self, terminal: bool, out: &mut Vec<ModelEvent>) -> Result<ModelResponse>;
}

/// Drives `decoder` over `events`: yields each event as soon as the parser
/// completes it, then exactly one `Completed`, or an error (after which the
/// stream ends).
pub(crate) fn drive<D: Decode>(events: SseStream, decoder: D) -> ModelStream {
    struct State<D> {
        events: SseStream,
        decoder: D,
        queue: VecDeque<Result<ModelEvent>>,
        done: bool,
    }
    let state = State {
        events,
        decoder,
        queue: VecDeque::new(),
        done: false,
    };
    Box::pin(futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(item) = s.queue.pop_front() {
                return Some((item, s));
            }
            if s.done {
                return None;
            }
            match s.events.next().await {
                Some(Ok(event)) => {
                    let mut out = Vec::new();
                    let fed = s.decoder.feed(&event, &mut out);
                    s.queue.extend(out.into_iter().map(Ok));
                    match fed {
                        Ok(false) => {}
                        Ok(true) => {
                            finish(&mut s.decoder, &mut s.queue, true);
                            s.done = true;
                        }
                        Err(e) => {
                            s.queue.push_back(Err(e));
                            s.done = true;
                        }
                    }
                }
                Some(Err(e)) => {
                    s.queue.push_back(Err(e));
                    s.done = true;
                }
                None => {
                    finish(&mut s.decoder, &mut s.queue, false);
                    s.done = true;
                }
            }
        }
    }))
}

fn finish<D: Decode>(decoder: &mut D, queue: &mut VecDeque<Result<ModelEvent>>, terminal: bool) {
    let mut out = Vec::new();
    let result = decoder.finish(terminal, &mut out);
    queue.extend(out.into_iter().map(Ok));
    queue.push_back(result.map(ModelEvent::Completed));
}

/// Parses a JSON event payload, as a typed stream error when it is not JSON.
pub(crate) fn parse_payload<T: serde::de::DeserializeOwned>(
    provider: &str,
    event: &SseEvent,
) -> Result<T> {
    serde_json::from_str(event.data.trim()).map_err(|e| {
        stream_error(
            provider,
            format!(
                "malformed `{}` event ({e}): {}",
                event.event,
                truncate(&event.data, 200)
            ),
        )
    })
}

pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Accumulates one assistant turn.
#[derive(Debug, Default)]
pub(crate) struct TurnBuilder {
    pub(crate) calls: Vec<ActionCall>,
    pub(crate) thinking: Vec<ThinkingBlock>,
    pub(crate) text: String,
    pub(crate) usage: TokenUsage,
    pub(crate) stop_reason: Option<String>,
}

impl TurnBuilder {
    /// Records the actions of one provider call and returns them as events.
    pub(crate) fn push_call(
        &mut self,
        base_id: &str,
        actions: Vec<Action>,
        checks: &[lumen_core::SafetyCheck],
        out: &mut Vec<ModelEvent>,
    ) {
        for call in into_calls(base_id, actions, checks) {
            out.push(ModelEvent::Action(call.clone()));
            self.calls.push(call);
        }
    }

    /// Finishes the turn. A turn without tool calls becomes one action: the
    /// text as a terminate (`refusal` as a failed one), or, when there is no
    /// usable answer, an invalid action telling the model what went wrong.
    /// That action is also returned so a streaming caller can emit it.
    pub(crate) fn finish(
        &mut self,
        provider: &str,
        native: Option<serde_json::Value>,
    ) -> (ModelResponse, Option<ActionCall>) {
        let mut extra = None;
        if self.calls.is_empty() {
            let text = self.text.trim();
            let stop = self.stop_reason.as_deref().unwrap_or("");
            let action = if is_truncation(stop) {
                Action::Invalid {
                    name: "answer".into(),
                    input: serde_json::Value::String(text.to_owned()),
                    error: format!(
                        "the answer was cut off ({stop}) before any tool call; \
                         answer more briefly or call a tool"
                    ),
                }
            } else if stop == "refusal" {
                Action::Terminate {
                    status: lumen_core::TerminateStatus::Failure,
                    result: if text.is_empty() {
                        "the model refused to continue".into()
                    } else {
                        text.to_owned()
                    },
                }
            } else if text.is_empty() {
                Action::Invalid {
                    name: "answer".into(),
                    input: serde_json::Value::Null,
                    error: "the answer held neither a tool call nor text; \
                            call a tool, or answer in text when the task is done"
                        .into(),
                }
            } else {
                ActionDecoder::text_answer(text)
            };
            let call = ActionCall::new(TEXT_ANSWER_ID, action);
            self.calls.push(call.clone());
            extra = Some(call);
        }
        let text = self.text.trim();
        let response = ModelResponse {
            turn: AssistantTurn {
                calls: std::mem::take(&mut self.calls),
                thinking: std::mem::take(&mut self.thinking),
                text: (!text.is_empty()).then(|| text.to_owned()),
                provider: native.map(|data| ProviderTurn {
                    provider: provider.to_owned(),
                    data,
                }),
            },
            usage: self.usage,
            stop_reason: self.stop_reason.take(),
        };
        (response, extra)
    }
}

fn is_truncation(stop: &str) -> bool {
    matches!(
        stop,
        "max_tokens"
            | "length"
            | "MAX_TOKENS"
            | "max_output_tokens"
            | "model_context_window_exceeded"
    )
}

/// Collects a whole stream (for `step`, tests and `decode-stream`): every
/// event in order, stopping after the first error.
pub async fn collect_events(mut stream: ModelStream) -> Vec<Result<ModelEvent>> {
    let mut out = Vec::new();
    while let Some(item) = stream.next().await {
        let failed = item.is_err();
        out.push(item);
        if failed {
            break;
        }
    }
    out
}

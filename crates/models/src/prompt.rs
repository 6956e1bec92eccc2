//! Text and tool definitions every adapter shares: our own function tools,
//! how tool results, compressed screenshots and summaries read to a model,
//! and the summarisation prompt.

use std::collections::HashMap;

use lumen_core::{AssistantTurn, TaskState, ToolResult, WireRecord};
use serde_json::{Value, json};

use crate::decoder::base_call_id;

/// Provider mechanics only: the loop's own system prompt carries the task,
/// tips, state and budget.
pub(crate) const MECHANICS: &str = "You control a web browser with tools; each user turn \
shows the current screenshot. Act with the computer tool; `navigate` opens a URL, \
`update_state` saves facts for later, `fold` closes a finished sub-goal in one line, \
`delegate` hands off a self-contained sub-task, `task_complete` finishes. Tool results say \
what each action changed or why it failed.";

/// The instruction for `summarize`.
pub(crate) const SUMMARIZE: &str = "Summarise this browser-agent run for the agent \
itself, so it can continue without the history. Keep: what the task needs, what has \
been done and found (exact values, URLs, names), what failed and why, and what is \
left to do. Plain prose, at most 200 words, no preamble.";

/// Lumen's own tools as (name, description, JSON Schema of the arguments),
/// offered next to a provider's computer tool.
pub(crate) fn own_tools() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "navigate",
            "Open an absolute URL in the current tab.",
            json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
        ),
        (
            "update_state",
            "Replace the saved task state with `data`, a JSON object of facts for later steps.",
            json!({"type": "object", "properties": {"data": {"type": "object", "additionalProperties": true}}, "required": ["data"]}),
        ),
        (
            "task_complete",
            "Finish: `result` is the answer, or why the task cannot be done.",
            json!({"type": "object", "properties": {"result": {"type": "string"}, "status": {"type": "string", "enum": ["success", "failure"]}}, "required": ["result"]}),
        ),
        (
            "fold",
            "Close a finished sub-goal with a one-line summary kept in the prompt.",
            json!({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}),
        ),
        (
            "delegate",
            "Hand a self-contained sub-task to a helper agent on this tab.",
            json!({"type": "object", "properties": {"instruction": {"type": "string"}, "max_steps": {"type": "integer", "minimum": 1}}, "required": ["instruction"]}),
        ),
    ]
}

/// The text standing in for a compressed screenshot.
pub(crate) fn screenshot_marker(step: u32) -> String {
    format!("[screenshot: step {step}]")
}

/// The text of a tier-2 summary anchor.
pub(crate) fn summary_text(content: &str, compacted_at: u32) -> String {
    format!(
        "<summary>\nSummary of the run up to step {compacted_at} (earlier history was \
         compacted):\n{content}\n</summary>"
    )
}

/// The folded answer to one provider call: every part's result, by id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallAnswer {
    pub(crate) ok: bool,
    pub(crate) text: String,
    /// OpenAI safety checks the user acknowledged.
    pub(crate) acknowledged: Vec<Value>,
}

/// Folds the results of the action calls `ids` (the parts one provider
/// call decoded into, see [`crate::decoder`]) into one answer. A part
/// without a result never ran.
pub(crate) fn answer_for(ids: &[String], results: &[&ToolResult]) -> CallAnswer {
    let expected = ids.len();
    let parts: Vec<&&ToolResult> = results
        .iter()
        .filter(|r| ids.contains(&r.call_id))
        .collect();
    if parts.is_empty() {
        return CallAnswer {
            ok: false,
            text: "error: not executed (the step ended before this call ran)".into(),
            acknowledged: Vec::new(),
        };
    }
    let mut ok = parts.iter().all(|r| r.ok);
    let mut lines = Vec::new();
    let detailed = parts.len() > 1 || expected > parts.len();
    if !detailed && ok {
        lines.push("ok".to_owned());
    }
    for r in &parts {
        if detailed || !r.ok {
            lines.push(match (&r.error, r.ok) {
                (_, true) => format!("{}: ok", r.action),
                (Some(e), false) => format!("{}: error: {e}", r.action),
                (None, false) => format!("{}: error", r.action),
            });
        }
        lines.extend(r.hints.iter().map(|h| format!("hint: {h}")));
        // What a reading action answered (page outline, matches, text).
        if let Some(output) = &r.output {
            lines.push(output.clone());
        }
    }
    if parts.len() < expected {
        ok = false;
        lines.push(format!(
            "{} of {expected} parts of this call did not run",
            expected - parts.len()
        ));
    }
    let acknowledged = parts
        .iter()
        .flat_map(|r| r.acknowledged_safety_checks.iter().cloned())
        .collect();
    CallAnswer {
        ok,
        text: lines.join("\n"),
        acknowledged,
    }
}

/// The action-call ids of each provider call of `turn`, grouped by the
/// provider's id, in call order.
pub(crate) fn call_groups(turn: &AssistantTurn) -> Vec<(String, Vec<String>)> {
    let mut order: Vec<(String, Vec<String>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for call in &turn.calls {
        let base = base_call_id(&call.id).to_owned();
        match index.get(&base) {
            Some(&i) => order[i].1.push(call.id.clone()),
            None => {
                index.insert(base.clone(), order.len());
                order.push((base, vec![call.id.clone()]));
            }
        }
    }
    order
}

/// What `summarize` sends every provider: the history as text, then the
/// task state (kept outside the summary, but useful context for it).
pub(crate) fn summary_input(wire: &[WireRecord], state: Option<&TaskState>) -> String {
    let mut text = history_as_text(wire);
    if let Some(state) = state {
        text.push_str(&format!("\nTask state: {}\n", Value::Object(state.clone())));
    }
    text
}

/// A trimmed summary answer, refused when it holds no text (compaction then keeps
/// the history as it was).
pub(crate) fn non_empty_summary(provider: &str, summary: String) -> lumen_core::Result<String> {
    if summary.is_empty() {
        return Err(crate::http::stream_error(
            provider,
            "the summary answer held no text",
        ));
    }
    Ok(summary)
}

/// A plain-text rendering of wire history for `summarize` (no images).
pub(crate) fn history_as_text(wire: &[WireRecord]) -> String {
    let mut out = String::new();
    for record in wire {
        match record {
            WireRecord::Screenshot(s) => {
                out.push_str(&format!(
                    "[screenshot: step {}{}]\n",
                    s.step,
                    s.url
                        .as_deref()
                        .map(|u| format!(" at {u}"))
                        .unwrap_or_default()
                ));
            }
            WireRecord::Assistant(turn) => {
                if let Some(text) = &turn.text {
                    out.push_str(&format!("assistant: {text}\n"));
                }
                for call in &turn.calls {
                    let action = serde_json::to_string(&call.action).unwrap_or_default();
                    out.push_str(&format!("action {}: {action}\n", call.id));
                }
            }
            WireRecord::ToolResult(r) => {
                let status = if r.ok {
                    "ok".to_owned()
                } else {
                    format!("error: {}", r.error.as_deref().unwrap_or("failed"))
                };
                out.push_str(&format!("result {}: {status}\n", r.call_id));
            }
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                out.push_str(&summary_text(content, *compacted_at));
                out.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// Characters per token for the text part of token estimates.
pub(crate) const CHARS_PER_TOKEN: u64 = 4;

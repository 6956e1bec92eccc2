//! Text and tool definitions every adapter shares: our own function tools,
//! how tool results, compressed screenshots and summaries read to a model,
//! and the summarisation prompt.

use std::collections::HashMap;

use lumen_core::action_schema::{ActionSchema, FieldKind};
use lumen_core::{AssistantTurn, TaskState, ToolResult, WireRecord};
use serde_json::{Map, Value, json};

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

/// One of our function tools: an action of the catalogue
/// ([`lumen_core::action_schema`]) under the name and argument names a
/// model sees. Its description is the catalogue's.
pub(crate) struct Offer {
    /// The tool's name (what the decoder matches).
    pub(crate) name: &'static str,
    /// The catalogue tag it decodes to.
    pub(crate) action: &'static str,
    /// The fields offered, in the catalogue's order.
    pub(crate) args: &'static [Arg],
}

/// One argument of an [`Offer`]: a catalogue field under its snake_case
/// name, with what the decoder accepts where that differs from `Action`
/// (a default that makes it optional, tighter bounds, another unit).
pub(crate) struct Arg {
    field: &'static str,
    required: Option<bool>,
    bounds: Option<(Option<i64>, Option<i64>)>,
    note: Option<&'static str>,
}

impl Arg {
    /// The field as the catalogue describes it.
    pub(crate) const fn of(field: &'static str) -> Self {
        Self {
            field,
            required: None,
            bounds: None,
            note: None,
        }
    }

    /// Optional: the decoder has a default.
    pub(crate) const fn optional(mut self) -> Self {
        self.required = Some(false);
        self
    }

    /// The decoder's bounds instead of the catalogue's.
    pub(crate) const fn bounds(mut self, min: Option<i64>, max: Option<i64>) -> Self {
        self.bounds = Some((min, max));
        self
    }

    /// Another note than the catalogue's (`""` for none).
    pub(crate) const fn note(mut self, note: &'static str) -> Self {
        self.note = Some(note);
        self
    }
}

/// An offer as `(name, description, JSON Schema of the arguments)`:
/// snake_case argument names, coordinates as numbers in `unit` (said in
/// their description), open objects with `additionalProperties`.
/// `None` when the offer names an action or field the catalogue lacks (a
/// test renders every offer, so that cannot ship).
pub(crate) fn function_tool(
    offer: &Offer,
    unit: &str,
) -> Option<(&'static str, &'static str, Value)> {
    let action = ActionSchema::find(offer.action)?;
    let mut properties = Map::new();
    let mut required = Vec::new();
    for arg in offer.args {
        let field = action.field(arg.field)?;
        let name = lumen_core::snake_case(field.name);
        let (min, max) = arg.bounds.unwrap_or((field.min, field.max));
        let note = arg.note.unwrap_or(field.description);
        let bounded = |mut schema: Value, min_key: &str, max_key: &str| {
            if let Some(min) = min {
                schema[min_key] = json!(min);
            }
            if let Some(max) = max {
                schema[max_key] = json!(max);
            }
            schema
        };
        let mut schema = match field.kind {
            FieldKind::Coordinate => {
                json!({"type": "number", "description": format!("{note} ({unit})")})
            }
            FieldKind::Integer => bounded(json!({"type": "integer"}), "minimum", "maximum"),
            FieldKind::Number => bounded(json!({"type": "number"}), "minimum", "maximum"),
            FieldKind::Keys => bounded(
                json!({"type": "array", "items": {"type": "string"}}),
                "minItems",
                "maxItems",
            ),
            FieldKind::Object => json!({"type": "object", "additionalProperties": true}),
            _ => field.json_schema(),
        };
        if !note.is_empty() && field.kind != FieldKind::Coordinate {
            schema["description"] = json!(note);
        }
        if arg.required.unwrap_or(field.required) {
            required.push(json!(name));
        }
        properties.insert(name, schema);
    }
    let mut parameters = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        parameters["required"] = Value::Array(required);
    }
    Some((offer.name, action.description, parameters))
}

/// Lumen's own tools, offered next to a provider's computer tool.
pub(crate) const OWN_TOOLS: &[Offer] = &[
    Offer {
        name: "navigate",
        action: "goto",
        args: &[Arg::of("url")],
    },
    Offer {
        name: "update_state",
        action: "writeState",
        args: &[Arg::of("data")],
    },
    Offer {
        name: "task_complete",
        action: "terminate",
        // `status` defaults to success.
        args: &[Arg::of("status").optional(), Arg::of("result")],
    },
    Offer {
        name: "fold",
        action: "fold",
        args: &[Arg::of("summary")],
    },
    Offer {
        name: "delegate",
        action: "delegate",
        args: &[Arg::of("instruction"), Arg::of("maxSteps")],
    },
    // What a computer tool cannot do: tabs and the page's text. Named as
    // the Claude browser toolset names its members, which replace them
    // there.
    Offer {
        name: "get_page_text",
        action: "pageText",
        args: &[],
    },
    Offer {
        name: "list_tabs",
        action: "listTabs",
        args: &[],
    },
    Offer {
        name: "new_tab",
        action: "newTab",
        args: &[],
    },
    Offer {
        name: "switch_tab",
        action: "switchTab",
        args: &[Arg::of("id")],
    },
    Offer {
        name: "close_tab",
        action: "closeTab",
        args: &[Arg::of("id")],
    },
    Offer {
        name: "answer_dialog",
        action: "answerDialog",
        args: &[Arg::of("accept"), Arg::of("text")],
    },
    // Offered only with an upload folder (`BrowserOptIns::file_upload`).
    Offer {
        name: CHOOSE_FILES,
        action: "chooseFiles",
        args: &[Arg::of("paths")],
    },
    // Offered only when a person can be asked (`AdapterOptions::request_human`).
    Offer {
        name: REQUEST_HUMAN,
        action: "requestHuman",
        args: &[Arg::of("reason")],
    },
];

/// The own tool that hands the browser to a person.
pub(crate) const REQUEST_HUMAN: &str = "request_human";

/// The own tool that sets files for the next file chooser.
const CHOOSE_FILES: &str = "choose_files";

/// Which of the own tools that only some sessions can use are offered: a
/// tool the session cannot carry out would only cost tokens on every
/// request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OwnTools {
    /// `request_human`: the session has someone to hand the browser to.
    pub(crate) human: bool,
    /// `choose_files`: the browser has an upload folder to choose from.
    pub(crate) uploads: bool,
}

impl OwnTools {
    /// As the adapter options say ([`AdapterOptions::request_human`],
    /// [`BrowserOptIns::file_upload`](crate::BrowserOptIns::file_upload)).
    pub(crate) fn of(options: &crate::AdapterOptions) -> Self {
        Self {
            human: options.request_human,
            uploads: options.browser_opt_ins.file_upload,
        }
    }
}

/// The own tools to offer: all of them, `request_human` and
/// `choose_files` only when `own` says the session can use them.
pub(crate) fn own_offers(own: OwnTools) -> impl Iterator<Item = &'static Offer> {
    OWN_TOOLS.iter().filter(move |o| match o.name {
        REQUEST_HUMAN => own.human,
        CHOOSE_FILES => own.uploads,
        _ => true,
    })
}

/// The own tools a toolset that has its own version of them replaces.
pub(crate) const BROWSER_TOOLSET_HAS: &[&str] = &[
    "navigate",
    "get_page_text",
    "list_tabs",
    "new_tab",
    "switch_tab",
    "close_tab",
];

/// Lumen's own tools as (name, description, JSON Schema of the arguments),
/// offered next to a provider's computer tool (as [`own_offers`] picks
/// them).
pub(crate) fn own_tools(own: OwnTools) -> Vec<(&'static str, &'static str, Value)> {
    own_offers(own)
        .filter_map(|o| function_tool(o, ""))
        .collect()
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

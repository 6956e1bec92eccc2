//! Provider-neutral scripted trajectories: say what the "model" does once
//! ([`ScriptStep`]s in viewport pixels) and get each provider's real
//! streaming answer for it ([`Wire::turn`]), with coordinates converted the
//! way that provider speaks them (screenshot pixels for Anthropic and
//! OpenAI, the 0–1000 grid for Gemini and, by default, compatible servers).
//!
//! The demo, the offline eval, the benchmarks and the end-to-end tests all
//! script runs this way, so everything between the provider's bytes and the
//! page's DOM is the real engine.

use serde_json::{Value, json};

use super::script::{
    AnthropicBlock, OpenAiItem, anthropic_turn, chat_turn, gemini_turn, openai_turn,
};
use super::{MockProvider, Reply, Route};

/// One of the four wire protocols Lumen speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    /// Anthropic Messages with the computer tool.
    Anthropic,
    /// OpenAI Responses with `computer_use_preview`.
    OpenAi,
    /// Gemini computer use.
    Google,
    /// OpenAI-compatible Chat Completions with Lumen's function tools.
    Compatible,
    /// Anthropic Messages with the GA computer toolset: each computer
    /// action is a tool call named after its member (`left_click`…).
    AnthropicToolset,
    /// Gemini computer use with the 3.5 action set (`click`, `type`,
    /// `hotkey`, `scroll` in pixels…).
    GoogleExtended,
}

impl Wire {
    /// Every protocol.
    pub const ALL: [Wire; 4] = [
        Wire::Anthropic,
        Wire::OpenAi,
        Wire::Google,
        Wire::Compatible,
    ];

    /// The newer tool dialects of two of the protocols, each driving the
    /// same adapter as its protocol.
    pub const DIALECTS: [Wire; 2] = [Wire::AnthropicToolset, Wire::GoogleExtended];

    /// Its name (`anthropic`, `openai`, `google`, `compatible`,
    /// `anthropic-toolset`, `google-3.5`).
    pub fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
            Wire::Google => "google",
            Wire::Compatible => "compatible",
            Wire::AnthropicToolset => "anthropic-toolset",
            Wire::GoogleExtended => "google-3.5",
        }
    }

    /// A model string that selects this protocol's adapter.
    pub fn model(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic/claude-sonnet-4-6",
            Wire::OpenAi => "openai/computer-use-preview",
            Wire::Google => "google/gemini-2.5-computer-use-preview-10-2025",
            Wire::Compatible => "compatible/qwen2.5-vl",
            Wire::AnthropicToolset => "anthropic/claude-sonnet-5",
            Wire::GoogleExtended => "google/gemini-3.5-flash",
        }
    }

    /// The mock route its requests arrive on.
    pub fn route(self) -> Route {
        match self {
            Wire::Anthropic | Wire::AnthropicToolset => Route::AnthropicMessages,
            Wire::OpenAi => Route::OpenAiResponses,
            Wire::Google | Wire::GoogleExtended => Route::Gemini,
            Wire::Compatible => Route::ChatCompletions,
        }
    }

    /// The base URL to give this protocol's adapter (OpenAI-style clients
    /// include `/v1`).
    pub fn base_url(self, mock: &MockProvider) -> String {
        match self {
            Wire::OpenAi | Wire::Compatible => format!("{}/v1", mock.base_url()),
            Wire::Anthropic | Wire::Google | Wire::AnthropicToolset | Wire::GoogleExtended => {
                mock.base_url()
            }
        }
    }

    /// Whether a request body answers scripted turn `turn` of a trajectory
    /// built with [`Wire::turn`]: by the call id given to its first call, or
    /// for Gemini (which has no call ids) by carrying one function response
    /// per earlier call.
    pub fn answers_turn(self, body: &str, turn: usize) -> bool {
        match self {
            Wire::Google | Wire::GoogleExtended => body.matches("functionResponse").count() > turn,
            _ => {
                body.contains(&format!("call_{turn}_0"))
                    || body.contains(&format!("toolu_{turn}_0"))
            }
        }
    }

    /// This protocol's streaming answer for one turn. `turn` numbers the
    /// call ids (`toolu_{turn}_{i}`, `call_{turn}_{i}`); `viewport` is the
    /// screenshot size the grid protocols scale against.
    pub fn turn(self, turn: usize, steps: &[ScriptStep], viewport: (u32, u32)) -> Reply {
        let grid =
            |x: i32, y: i32| json!({"x": grid_axis(x, viewport.0), "y": grid_axis(y, viewport.1)});
        match self {
            Wire::Anthropic | Wire::AnthropicToolset => {
                let toolset = self == Wire::AnthropicToolset;
                let mut blocks = Vec::new();
                for (i, s) in steps.iter().enumerate() {
                    let tool = |suffix: &str, name: &str, mut input: Value| {
                        let id = format!("toolu_{turn}_{i}{suffix}");
                        // The toolset calls each action by its member's name.
                        match input.as_object_mut() {
                            Some(map) if toolset && name == "computer" => {
                                AnthropicBlock::MemberUse {
                                    id,
                                    name: map
                                        .remove("action")
                                        .and_then(|a| a.as_str().map(str::to_owned))
                                        .unwrap_or_default(),
                                    toolset: "computer".into(),
                                    input,
                                }
                            }
                            _ => AnthropicBlock::ToolUse {
                                id,
                                name: name.to_owned(),
                                input,
                            },
                        }
                    };
                    let computer = |input: Value| tool("", "computer", input);
                    match s {
                        ScriptStep::Click(x, y) => blocks.push(computer(
                            json!({"action": "left_click", "coordinate": [x, y]}),
                        )),
                        ScriptStep::Hover(x, y) => blocks.push(computer(
                            json!({"action": "mouse_move", "coordinate": [x, y]}),
                        )),
                        ScriptStep::TypeAt(x, y, t) => {
                            blocks.push(computer(
                                json!({"action": "left_click", "coordinate": [x, y]}),
                            ));
                            blocks.push(tool(
                                "_t",
                                "computer",
                                json!({"action": "type", "text": t}),
                            ));
                        }
                        ScriptStep::Type(t) => {
                            blocks.push(computer(json!({"action": "type", "text": t})))
                        }
                        ScriptStep::Key(k) => {
                            blocks.push(computer(json!({"action": "key", "text": k})))
                        }
                        ScriptStep::ScrollDown => blocks.push(computer(json!({
                            "action": "scroll", "coordinate": [viewport.0 / 2, viewport.1 / 2],
                            "scroll_direction": "down", "scroll_amount": 5
                        }))),
                        ScriptStep::Goto(u) => blocks.push(tool("", "navigate", json!({"url": u}))),
                        ScriptStep::RequestHuman(r) => {
                            blocks.push(tool("", "request_human", json!({"reason": r})))
                        }
                        ScriptStep::Done(r) => {
                            blocks.push(tool("", "task_complete", json!({"result": r})))
                        }
                    }
                }
                anthropic_turn(&blocks, 1000)
            }
            Wire::OpenAi => {
                let mut items = Vec::new();
                for (i, s) in steps.iter().enumerate() {
                    let id = format!("call_{turn}_{i}");
                    let computer = |id: String, action: Value| OpenAiItem::ComputerCall {
                        call_id: id,
                        body: json!({"action": action}),
                    };
                    let function = |name: &str, arguments: Value| OpenAiItem::FunctionCall {
                        call_id: id.clone(),
                        name: name.into(),
                        arguments,
                    };
                    match s {
                        ScriptStep::Click(x, y) => items.push(computer(id.clone(), json!({"type": "click", "x": x, "y": y, "button": "left"}))),
                        ScriptStep::Hover(x, y) => items.push(computer(id.clone(), json!({"type": "move", "x": x, "y": y}))),
                        ScriptStep::TypeAt(x, y, t) => {
                            items.push(computer(id.clone(), json!({"type": "click", "x": x, "y": y, "button": "left"})));
                            items.push(computer(format!("{id}_t"), json!({"type": "type", "text": t})));
                        }
                        ScriptStep::Type(t) => items.push(computer(id.clone(), json!({"type": "type", "text": t}))),
                        ScriptStep::Key(k) => items.push(computer(id.clone(), json!({"type": "keypress", "keys": [k]}))),
                        ScriptStep::ScrollDown => items.push(computer(id.clone(), json!({
                            "type": "scroll", "x": viewport.0 / 2, "y": viewport.1 / 2, "scroll_x": 0, "scroll_y": 500
                        }))),
                        ScriptStep::Goto(u) => items.push(function("navigate", json!({"url": u}))),
                        ScriptStep::RequestHuman(r) => items.push(function("request_human", json!({"reason": r}))),
                        ScriptStep::Done(r) => items.push(function("task_complete", json!({"result": r}))),
                    }
                }
                openai_turn(&items, 1000)
            }
            Wire::Google => {
                let call =
                    |name: &str, args: Value| json!({"functionCall": {"name": name, "args": args}});
                let mut parts = Vec::new();
                for s in steps {
                    match s {
                        ScriptStep::Click(x, y) => parts.push(call("click_at", grid(*x, *y))),
                        ScriptStep::Hover(x, y) => parts.push(call("hover_at", grid(*x, *y))),
                        ScriptStep::TypeAt(x, y, t) => {
                            let mut args = grid(*x, *y);
                            args["text"] = json!(t);
                            args["press_enter"] = json!(false);
                            args["clear_before_typing"] = json!(false);
                            parts.push(call("type_text_at", args));
                        }
                        // Gemini has no plain "type": its only typing call
                        // types at a point; keys go through key_combination.
                        ScriptStep::Type(t) => parts.push(call("type_text_at", json!({
                            "x": 0, "y": 0, "text": t, "press_enter": false, "clear_before_typing": false
                        }))),
                        ScriptStep::Key(k) => parts.push(call("key_combination", json!({"keys": k}))),
                        ScriptStep::ScrollDown => parts.push(call("scroll_document", json!({"direction": "down"}))),
                        ScriptStep::Goto(u) => parts.push(call("navigate", json!({"url": u}))),
                        ScriptStep::RequestHuman(r) => parts.push(call("request_human", json!({"reason": r}))),
                        ScriptStep::Done(r) => parts.push(call("task_complete", json!({"result": r}))),
                    }
                }
                gemini_turn(&parts, 1000)
            }
            Wire::GoogleExtended => {
                let call =
                    |name: &str, args: Value| json!({"functionCall": {"name": name, "args": args}});
                let mut parts = Vec::new();
                for s in steps {
                    match s {
                        ScriptStep::Click(x, y) => parts.push(call("click", grid(*x, *y))),
                        ScriptStep::Hover(x, y) => parts.push(call("move", grid(*x, *y))),
                        ScriptStep::TypeAt(x, y, t) => {
                            parts.push(call("click", grid(*x, *y)));
                            parts.push(call("type", json!({"text": t})));
                        }
                        ScriptStep::Type(t) => parts.push(call("type", json!({"text": t}))),
                        ScriptStep::Key(k) => parts.push(call("press_key", json!({"key": k}))),
                        ScriptStep::ScrollDown => {
                            let mut args = grid(viewport.0 as i32 / 2, viewport.1 as i32 / 2);
                            args["direction"] = json!("down");
                            args["magnitude_in_pixels"] = json!(500);
                            parts.push(call("scroll", args));
                        }
                        ScriptStep::Goto(u) => parts.push(call("navigate", json!({"url": u}))),
                        ScriptStep::RequestHuman(r) => {
                            parts.push(call("request_human", json!({"reason": r})))
                        }
                        ScriptStep::Done(r) => {
                            parts.push(call("task_complete", json!({"result": r})))
                        }
                    }
                }
                gemini_turn(&parts, 1000)
            }
            Wire::Compatible => {
                let mut calls: Vec<(String, &str, Value)> = Vec::new();
                for (i, s) in steps.iter().enumerate() {
                    let id = format!("call_{turn}_{i}");
                    match s {
                        ScriptStep::Click(x, y) => calls.push((id, "click", grid(*x, *y))),
                        ScriptStep::Hover(x, y) => calls.push((id, "hover", grid(*x, *y))),
                        ScriptStep::TypeAt(x, y, t) => {
                            calls.push((id.clone(), "click", grid(*x, *y)));
                            calls.push((format!("{id}_t"), "type", json!({"text": t})));
                        }
                        ScriptStep::Type(t) => calls.push((id, "type", json!({"text": t}))),
                        ScriptStep::Key(k) => calls.push((id, "key_press", json!({"keys": [k]}))),
                        ScriptStep::ScrollDown => calls.push((
                            id,
                            "scroll",
                            json!({"x": 500, "y": 500, "direction": "down", "amount": 5}),
                        )),
                        ScriptStep::Goto(u) => calls.push((id, "navigate", json!({"url": u}))),
                        ScriptStep::RequestHuman(r) => {
                            calls.push((id, "request_human", json!({"reason": r})))
                        }
                        ScriptStep::Done(r) => {
                            calls.push((id, "task_complete", json!({"result": r})))
                        }
                    }
                }
                let borrowed: Vec<(&str, &str, Value)> = calls
                    .iter()
                    .map(|(a, b, c)| (a.as_str(), *b, c.clone()))
                    .collect();
                chat_turn(&borrowed, None, 1000)
            }
        }
    }
}

impl std::str::FromStr for Wire {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Wire::ALL
            .into_iter()
            .chain(Wire::DIALECTS)
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown provider `{s}`: use anthropic, openai, google, compatible, \
                     anthropic-toolset or google-3.5"
                )
            })
    }
}

/// What the scripted model does in one action, in viewport CSS pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptStep {
    /// Left click.
    Click(i32, i32),
    /// Move the pointer.
    Hover(i32, i32),
    /// Click a field and type into it.
    TypeAt(i32, i32, String),
    /// Type into whatever has focus.
    Type(String),
    /// Press a key (xdotool names for Anthropic, DOM names work too).
    Key(String),
    /// Scroll the page down.
    ScrollDown,
    /// Navigate to a URL.
    Goto(String),
    /// Finish with this answer.
    Done(String),
    /// Hand the browser to a person (`request_human`) for this reason.
    RequestHuman(String),
}

/// A pixel position as a 0–1000 grid coordinate (rounded, clamped).
fn grid_axis(px: i32, dimension: u32) -> u32 {
    if dimension == 0 {
        return 0;
    }
    ((px.max(0) as f64 / dimension as f64) * 1000.0)
        .round()
        .min(1000.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_grid_scales() {
        for w in Wire::ALL {
            assert_eq!(w.name().parse::<Wire>(), Ok(w));
        }
        assert!("gpt".parse::<Wire>().is_err());
        assert_eq!(grid_axis(640, 1280), 500);
        assert_eq!(grid_axis(-5, 1280), 0);
        assert_eq!(grid_axis(5000, 1280), 1000);
    }

    #[test]
    fn every_protocol_scripts_every_step() {
        let steps = [
            ScriptStep::Click(1, 2),
            ScriptStep::Hover(3, 4),
            ScriptStep::TypeAt(5, 6, "x".into()),
            ScriptStep::Type("y".into()),
            ScriptStep::Key("Return".into()),
            ScriptStep::ScrollDown,
            ScriptStep::Goto("http://127.0.0.1/".into()),
            ScriptStep::Done("ok".into()),
            ScriptStep::RequestHuman("a code".into()),
        ];
        for w in Wire::ALL {
            let Reply::Sse(events) = w.turn(0, &steps, (1280, 720)) else {
                panic!("{w:?}: not SSE")
            };
            let text: String = events.iter().map(|e| e.to_wire()).collect();
            assert!(text.contains("task_complete"), "{w:?}");
            assert!(text.contains("navigate"), "{w:?}");
        }
    }
}

//! The `ActionDecoder`: each provider's native tool calls →
//! [`lumen_core::Action`]s in viewport CSS pixels.
//!
//! Coordinates are converted exactly once, here:
//! - Anthropic and OpenAI answer in pixels of the screenshot they were shown
//!   (which may be downscaled or HiDPI): `p / scale` via
//!   [`Screenshot::to_viewport`](lumen_core::Screenshot::to_viewport).
//! - Gemini (and the compatible adapter by default) answer in a 0–1000 grid
//!   over the screenshot, which covers the whole viewport:
//!   [`denormalize`] against the viewport size.
//!
//! Malformed input (unknown action, missing or mistyped argument) becomes
//! [`Action::Invalid`] with a message phrased for the model; nothing here
//! panics or errors.
//!
//! # One call, several actions
//!
//! A few provider calls mean more than one of our actions (Gemini
//! `type_text_at` is click, maybe select-all + delete, type, maybe Enter;
//! OpenAI's `computer` tool sends an `actions` batch; an xdotool key string
//! may hold several chords). The decoder returns them in order and
//! [`call_ids`] names them `id`, `id#2`, `id#3`…: the first keeps the
//! provider's id, so single-action calls are unchanged. When a turn is
//! replayed, the adapter answers the provider **once per original id**,
//! folding the results of `id` and every `id#n` together ([`base_call_id`]);
//! the call failed if any part failed, and a part that never ran (the loop
//! stopped early) is reported as not executed.

use lumen_core::{
    Action, ActionCall, Modifiers, MouseButton, Point, SafetyCheck, Screenshot, ScrollDirection,
    ScrollUnit, Size, TerminateStatus, denormalize,
};
use serde_json::Value;
use std::cell::Cell;

/// Converts provider tool calls into actions for one screenshot.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionDecoder {
    pub(crate) shot: ScreenGeometry,
    /// Where the pointer is, as the actions decoded so far leave it:
    /// actions "at the cursor" resolve against it.
    pub(crate) cursor: Cell<Option<Point>>,
}

/// The geometry the decoder needs from a screenshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ScreenGeometry {
    pub(crate) viewport: Size,
    pub(crate) image: Size,
    pub(crate) scale: lumen_core::ImageScale,
}

/// Which coordinate space a function tool's numbers are in (the compatible
/// adapter lets users choose).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CoordinateSpace {
    /// Pixels of the screenshot the model was shown.
    Pixels,
    /// A 0–1000 grid over the screenshot.
    #[default]
    Normalized,
}

/// A click of `count` (1 to 3) at `p`: the action each count is.
pub(crate) fn click_n(p: Point, button: MouseButton, count: u8, modifiers: Modifiers) -> Action {
    match count {
        2 => Action::DoubleClick {
            x: p.x,
            y: p.y,
            modifiers,
        },
        3 => Action::TripleClick {
            x: p.x,
            y: p.y,
            modifiers,
        },
        _ => Action::Click {
            x: p.x,
            y: p.y,
            button,
            modifiers,
        },
    }
}

/// A straight drag from `s` to `e`.
pub(crate) fn drag(s: Point, e: Point) -> Action {
    Action::Drag {
        start_x: s.x,
        start_y: s.y,
        end_x: e.x,
        end_y: e.y,
        path: Vec::new(),
    }
}

/// `actions` with `keys` held down around them (pressed in order before,
/// released in reverse after).
pub(crate) fn held(actions: Vec<Action>, keys: Vec<String>) -> Vec<Action> {
    let mut out: Vec<Action> = keys
        .iter()
        .map(|k| Action::KeyDown { key: k.clone() })
        .collect();
    out.extend(actions);
    out.extend(keys.into_iter().rev().map(|key| Action::KeyUp { key }));
    out
}

/// `input` with `action` set to `member` (a toolset member's input read as
/// the single computer tool's).
pub(crate) fn json_with(input: &Value, member: &str) -> Value {
    let mut map = match input {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    map.insert("action".into(), Value::from(member));
    Value::Object(map)
}

/// The members of Anthropic's `computer_toolset_20260801` (the SDK's
/// `computer_member_name.py`): each is called as a tool of its own.
pub const COMPUTER_MEMBERS: &[&str] = &[
    "key",
    "hold_key",
    "type",
    "cursor_position",
    "mouse_move",
    "left_mouse_down",
    "left_mouse_up",
    "left_click",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "left_click_drag",
    "scroll",
    "wait",
    "screenshot",
    "zoom",
];

/// The most times one `key` call may repeat its chords.
pub(crate) const MAX_KEY_REPEAT: u64 = 100;

/// Gemini's default `scroll_at` magnitude (grid units).
pub const GEMINI_DEFAULT_MAGNITUDE: f64 = 800.0;

/// Milliseconds of a Gemini `wait_5_seconds`.
pub(crate) const GEMINI_WAIT_MS: u64 = 5000;

/// OpenAI's `wait` carries no duration; this is what we wait.
pub const OPENAI_WAIT_MS: u64 = 1000;

/// Where Gemini's `search` goes (its docs: the search engine's home page).
pub const SEARCH_HOME: &str = "https://www.google.com/";

impl ActionDecoder {
    /// A decoder for coordinates the model gave about `shot`.
    pub fn new(shot: &Screenshot) -> Self {
        Self {
            shot: ScreenGeometry {
                viewport: shot.viewport,
                image: shot.image.size(),
                scale: shot.scale,
            },
            cursor: Cell::new(None),
        }
    }

    /// A decoder for one step: its screenshot and where the pointer is.
    pub fn for_step(ctx: &lumen_core::StepContext<'_>) -> Self {
        let decoder = Self::new(ctx.screenshot);
        decoder.cursor.set(ctx.cursor);
        decoder
    }

    /// The pointer position after the actions decoded so far.
    pub fn cursor(&self) -> Option<Point> {
        self.cursor.get()
    }

    /// Records where `actions` leave the pointer, and returns them.
    pub(crate) fn track(&self, actions: Vec<Action>) -> Vec<Action> {
        for action in &actions {
            // A drag ends where it was released; every other pointer action
            // leaves the pointer at its point.
            let at = match action {
                Action::Drag { end_x, end_y, .. } => Some(Point::new(*end_x, *end_y)),
                other => other.point(),
            };
            if at.is_some() {
                self.cursor.set(at);
            }
        }
        actions
    }

    /// A decoder for a viewport shown to the model as an `image` of the
    /// given size (the scale is derived).
    pub fn for_screen(viewport: Size, image: Size) -> Self {
        Self {
            shot: ScreenGeometry {
                viewport,
                image,
                scale: lumen_core::ImageScale::between(viewport, image),
            },
            cursor: Cell::new(None),
        }
    }

    /// The viewport, CSS pixels.
    pub fn viewport(&self) -> Size {
        self.shot.viewport
    }

    /// The size of the image the model saw.
    pub fn image_size(&self) -> Size {
        self.shot.image
    }

    /// A point in screenshot pixels → viewport CSS pixels.
    pub fn image_point(&self, x: f64, y: f64) -> Point {
        self.shot.scale.image_to_css(x, y, self.shot.viewport)
    }

    /// A point on the 0–1000 grid → viewport CSS pixels.
    pub fn grid_point(&self, x: f64, y: f64) -> Point {
        Point::new(
            denormalize(x, self.shot.viewport.width),
            denormalize(y, self.shot.viewport.height),
        )
    }

    pub(crate) fn center(&self) -> Point {
        Point::new(
            (self.shot.viewport.width / 2) as i32,
            (self.shot.viewport.height / 2) as i32,
        )
    }

    // ----- Our own tools ---------------------------------------------------

    /// Decodes one of Lumen's own function tools:
    /// the ones every adapter adds next to the provider's computer tool, and
    /// the full action set the compatible adapter exposes.
    pub fn lumen_tool(&self, name: &str, input: &Value, space: CoordinateSpace) -> Vec<Action> {
        let args = Args::new(name, input);
        let result = (|| -> Result<Action, String> {
            let point = |kx: &str, ky: &str| -> Result<Point, String> {
                let (x, y) = (args.num(kx)?, args.num(ky)?);
                Ok(match space {
                    CoordinateSpace::Pixels => self.image_point(x, y),
                    CoordinateSpace::Normalized => self.grid_point(x, y),
                })
            };
            let button = || -> Result<MouseButton, String> {
                Ok(match args.opt_str("button")?.unwrap_or("left") {
                    "left" => MouseButton::Left,
                    "right" => MouseButton::Right,
                    "middle" => MouseButton::Middle,
                    other => return Err(format!("unknown mouse button `{other}`")),
                })
            };
            Ok(match name {
                "navigate" | "goto" => Action::Goto {
                    url: args.str("url")?.to_owned(),
                },
                "update_state" | "write_state" => {
                    // Gemini's schema dialect has no open objects, so there
                    // the object comes written out as a string.
                    let map = match args.field("data")? {
                        Value::Object(map) => map.clone(),
                        Value::String(text) => match serde_json::from_str::<Value>(text) {
                            Ok(Value::Object(map)) => map,
                            _ => return Err("`data` must be a JSON object".into()),
                        },
                        _ => return Err("`data` must be a JSON object".into()),
                    };
                    Action::WriteState { data: map }
                }
                "task_complete" | "terminate" => {
                    let status = match args.opt_str("status")?.unwrap_or("success") {
                        "success" => TerminateStatus::Success,
                        "failure" => TerminateStatus::Failure,
                        other => {
                            return Err(format!(
                                "`status` must be \"success\" or \"failure\", not `{other}`"
                            ));
                        }
                    };
                    Action::Terminate {
                        status,
                        result: args.str("result")?.to_owned(),
                    }
                }
                "fold" => Action::Fold {
                    summary: args.str("summary")?.to_owned(),
                },
                "request_human" => Action::RequestHuman {
                    reason: args.str("reason")?.to_owned(),
                },
                "get_page_text" | "page_text" => Action::PageText,
                "list_tabs" => Action::ListTabs,
                "new_tab" => Action::NewTab,
                "switch_tab" => Action::SwitchTab {
                    id: args.str("id")?.to_owned(),
                },
                "close_tab" => Action::CloseTab {
                    id: args.str("id")?.to_owned(),
                },
                "answer_dialog" => Action::AnswerDialog {
                    accept: match args.field("accept")? {
                        Value::Bool(b) => *b,
                        _ => return Err("`accept` must be true or false".into()),
                    },
                    text: args.opt_str("text")?.map(str::to_owned),
                },
                "choose_files" => Action::ChooseFiles {
                    paths: match args.field("paths")? {
                        Value::Array(items) if !items.is_empty() => items
                            .iter()
                            .map(|v| v.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                            .ok_or("`paths` must be a list of strings")?,
                        _ => return Err("`paths` must be a non-empty list of file paths".into()),
                    },
                },
                "delegate" => Action::Delegate {
                    instruction: args.str("instruction")?.to_owned(),
                    max_steps: match args.opt_num("max_steps")? {
                        Some(n) if n >= 1.0 && n <= u32::MAX as f64 => Some(n as u32),
                        Some(_) => return Err("`max_steps` must be a positive integer".into()),
                        None => None,
                    },
                },
                "click" => {
                    let p = point("x", "y")?;
                    Action::Click {
                        x: p.x,
                        y: p.y,
                        button: button()?,
                        modifiers: Modifiers::NONE,
                    }
                }
                "double_click" => {
                    let p = point("x", "y")?;
                    Action::DoubleClick {
                        x: p.x,
                        y: p.y,
                        modifiers: Modifiers::NONE,
                    }
                }
                "hover" => {
                    let p = point("x", "y")?;
                    Action::Hover { x: p.x, y: p.y }
                }
                "drag" => {
                    let s = point("start_x", "start_y")?;
                    let e = point("end_x", "end_y")?;
                    Action::Drag {
                        start_x: s.x,
                        start_y: s.y,
                        end_x: e.x,
                        end_y: e.y,
                        path: Vec::new(),
                    }
                }
                "type" => Action::Type {
                    text: args.str("text")?.to_owned(),
                },
                "key_press" => {
                    let keys = args.key_list("keys")?;
                    Action::KeyPress { keys }
                }
                "scroll" => {
                    let p = point("x", "y")?;
                    let amount = args.opt_num("amount")?.unwrap_or(3.0);
                    if amount <= 0.0 {
                        return Err("`amount` must be positive".into());
                    }
                    Action::Scroll {
                        x: p.x,
                        y: p.y,
                        direction: direction(args.str("direction")?)?,
                        amount,
                        unit: ScrollUnit::Clicks,
                        modifiers: Modifiers::NONE,
                    }
                }
                "back" => Action::Back,
                "forward" => Action::Forward,
                "screenshot" => Action::Screenshot,
                "wait" => {
                    let ms = args.opt_num("ms")?.unwrap_or(1000.0);
                    if !(0.0..=60_000.0).contains(&ms) {
                        return Err("`ms` must be between 0 and 60000".into());
                    }
                    Action::Wait { ms: ms as u64 }
                }
                other => return Err(format!("unknown tool `{other}`")),
            })
        })();
        vec![result.unwrap_or_else(|e| args.invalid(e))]
    }

    /// A text-only answer: the model is done and the text is its answer.
    pub fn text_answer(text: &str) -> Action {
        Action::Terminate {
            status: TerminateStatus::Success,
            result: text.trim().to_owned(),
        }
    }

    /// Tool-call arguments that are not valid JSON.
    pub fn unparseable(name: &str, raw: &str, error: &serde_json::Error) -> Action {
        Action::Invalid {
            name: name.to_owned(),
            input: Value::String(raw.to_owned()),
            error: format!("the arguments are not valid JSON ({error}); send a JSON object"),
        }
    }
}

/// Names the actions decoded from one provider call (see the module docs).
pub fn call_ids(base: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            if i == 0 {
                base.to_owned()
            } else {
                format!("{base}#{}", i + 1)
            }
        })
        .collect()
}

/// The provider's call id an action call belongs to (`id#3` → `id`).
pub fn base_call_id(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => id,
    }
}

/// Wraps decoded actions into calls named after `base`, all carrying the
/// provider's safety checks.
pub fn into_calls(base: &str, actions: Vec<Action>, checks: &[SafetyCheck]) -> Vec<ActionCall> {
    let ids = call_ids(base, actions.len());
    actions
        .into_iter()
        .zip(ids)
        .map(|(action, id)| ActionCall {
            id,
            action,
            safety_checks: checks.to_vec(),
        })
        .collect()
}

// ----- argument helpers ------------------------------------------------------

pub(crate) struct Args<'a> {
    pub(crate) name: &'a str,
    v: &'a Value,
}

impl<'a> Args<'a> {
    /// A non-empty array of key names.
    pub(crate) fn key_list(&self, key: &str) -> Result<Vec<String>, String> {
        let keys = self
            .array(key)?
            .iter()
            .map(|k| k.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or(format!("`{key}` must be an array of strings"))?;
        if keys.is_empty() {
            return Err(format!("`{key}` is empty"));
        }
        Ok(keys)
    }

    pub(crate) fn new(name: &'a str, v: &'a Value) -> Self {
        Self { name, v }
    }

    pub(crate) fn invalid(&self, error: impl Into<String>) -> Action {
        Action::Invalid {
            name: self.name.to_owned(),
            input: self.v.clone(),
            error: error.into(),
        }
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.v.get(key).is_some_and(|v| !v.is_null())
    }

    pub(crate) fn field(&self, key: &str) -> Result<&'a Value, String> {
        match self.v.get(key) {
            Some(v) if !v.is_null() => Ok(v),
            _ => Err(format!("missing `{key}`")),
        }
    }

    pub(crate) fn num(&self, key: &str) -> Result<f64, String> {
        as_number(self.field(key)?).ok_or_else(|| format!("`{key}` must be a number"))
    }

    pub(crate) fn opt_num(&self, key: &str) -> Result<Option<f64>, String> {
        if !self.has(key) {
            return Ok(None);
        }
        self.num(key).map(Some)
    }

    pub(crate) fn str(&self, key: &str) -> Result<&'a str, String> {
        self.field(key)?
            .as_str()
            .ok_or_else(|| format!("`{key}` must be a string"))
    }

    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, String> {
        if !self.has(key) {
            return Ok(None);
        }
        self.str(key).map(Some)
    }

    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(_) => Err(format!("`{key}` must be true or false")),
        }
    }

    pub(crate) fn array(&self, key: &str) -> Result<&'a Vec<Value>, String> {
        self.field(key)?
            .as_array()
            .ok_or_else(|| format!("`{key}` must be an array"))
    }

    pub(crate) fn opt_array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        if !self.has(key) {
            return Ok(None);
        }
        self.array(key).map(Some)
    }

    /// A `[x, y]` pair.
    pub(crate) fn pair(&self, key: &str) -> Result<(f64, f64), String> {
        let a = self
            .array(key)
            .map_err(|_| format!("`{key}` must be an [x, y] array"))?;
        match a.as_slice() {
            [x, y] => match (as_number(x), as_number(y)) {
                (Some(x), Some(y)) => Ok((x, y)),
                _ => Err(format!("`{key}` must hold two numbers")),
            },
            _ => Err(format!("`{key}` must be an [x, y] array")),
        }
    }
}

/// A finite number, also from a numeric string (models sometimes quote).
pub(crate) fn as_number(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    n.is_finite().then_some(n)
}

pub(crate) fn positive_or_one(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 1.0 }
}

pub(crate) fn seconds_to_ms(secs: f64) -> Result<u64, String> {
    if !(0.0..=600.0).contains(&secs) {
        return Err("`duration` must be between 0 and 600 seconds".into());
    }
    Ok((secs * 1000.0).round() as u64)
}

pub(crate) fn direction(s: &str) -> Result<ScrollDirection, String> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "up" => ScrollDirection::Up,
        "down" => ScrollDirection::Down,
        "left" => ScrollDirection::Left,
        "right" => ScrollDirection::Right,
        _ => {
            return Err(format!(
                "unknown scroll direction `{s}` (up, down, left, right)"
            ));
        }
    })
}

/// Splits an xdotool-style key string into chords: `ctrl+a Delete` →
/// `[["ctrl","a"], ["Delete"]]`. A lone space or `+` is a key of its own.
pub(crate) fn chords(text: &str) -> Result<Vec<Vec<String>>, String> {
    if text == " " {
        return Ok(vec![vec![" ".into()]]);
    }
    let out: Vec<Vec<String>> = text
        .split_whitespace()
        .map(split_chord)
        .collect::<Result<_, _>>()?;
    if out.is_empty() {
        return Err("`text` names no key".into());
    }
    Ok(out)
}

pub(crate) fn single_chord(text: &str) -> Result<Vec<String>, String> {
    if text == " " {
        return Ok(vec![" ".into()]);
    }
    split_chord(text.trim())
}

pub(crate) fn split_chord(chord: &str) -> Result<Vec<String>, String> {
    if chord == "+" {
        return Ok(vec!["+".into()]);
    }
    // `ctrl++` means ctrl and the plus key.
    let (body, plus) = match chord.strip_suffix("++") {
        Some(rest) => (rest, true),
        None => (chord, false),
    };
    let mut keys: Vec<String> = body
        .split('+')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();
    if plus {
        keys.push("+".into());
    }
    if keys.is_empty() {
        return Err(format!("`{chord}` names no key"));
    }
    Ok(keys)
}

/// Modifier keys from a `shift+ctrl` style string (Anthropic's `text` on
/// clicks and scrolls, OpenAI's `keys`).
pub(crate) fn modifiers_from(text: &str) -> Result<Modifiers, String> {
    let mut m = Modifiers::NONE;
    for key in text
        .split(['+', ' '])
        .map(str::trim)
        .filter(|k| !k.is_empty())
    {
        match key.to_ascii_lowercase().as_str() {
            "shift" => m.shift = true,
            "ctrl" | "control" => m.ctrl = true,
            "alt" | "option" => m.alt = true,
            "meta" | "cmd" | "command" | "super" | "win" => m.meta = true,
            other => return Err(format!("`{other}` is not a modifier key")),
        }
    }
    Ok(m)
}

#[cfg(test)]
#[path = "decoder_tests.rs"]
mod tests;

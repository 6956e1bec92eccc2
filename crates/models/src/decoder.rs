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
    Action, ActionCall, Modifiers, MouseButton, Point, Rect, SafetyCheck, Screenshot,
    ScrollDirection, ScrollUnit, Size, TerminateStatus, denormalize,
};
use serde_json::Value;
use std::cell::Cell;

/// Converts provider tool calls into actions for one screenshot.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionDecoder {
    shot: ScreenGeometry,
    /// Where the pointer is, as the actions decoded so far leave it:
    /// actions "at the cursor" resolve against it.
    cursor: Cell<Option<Point>>,
}

/// The geometry the decoder needs from a screenshot.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ScreenGeometry {
    viewport: Size,
    image: Size,
    scale: lumen_core::ImageScale,
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
fn click_n(p: Point, button: MouseButton, count: u8, modifiers: Modifiers) -> Action {
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
fn drag(s: Point, e: Point) -> Action {
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
fn held(actions: Vec<Action>, keys: Vec<String>) -> Vec<Action> {
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
fn json_with(input: &Value, member: &str) -> Value {
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
const MAX_KEY_REPEAT: u64 = 100;

/// Gemini's default `scroll_at` magnitude (grid units).
pub const GEMINI_DEFAULT_MAGNITUDE: f64 = 800.0;

/// Milliseconds of a Gemini `wait_5_seconds`.
const GEMINI_WAIT_MS: u64 = 5000;

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
    fn track(&self, actions: Vec<Action>) -> Vec<Action> {
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

    fn center(&self) -> Point {
        Point::new(
            (self.shot.viewport.width / 2) as i32,
            (self.shot.viewport.height / 2) as i32,
        )
    }

    // ----- Anthropic -------------------------------------------------------

    /// Decodes an Anthropic tool call: the `computer` tool, a member of the
    /// computer toolset (`left_click`, `scroll`…, whose input is the
    /// computer tool's without `action`), or one of ours.
    pub fn anthropic(&self, name: &str, input: &Value) -> Vec<Action> {
        match name {
            "computer" => self.anthropic_computer(input),
            member if COMPUTER_MEMBERS.contains(&member) => {
                self.anthropic_computer(&json_with(input, member))
            }
            _ => self.lumen_tool(name, input, CoordinateSpace::Pixels),
        }
    }

    /// Decodes the input of Anthropic's `computer` tool (versions
    /// `computer_20250124` and `computer_20251124`).
    pub fn anthropic_computer(&self, input: &Value) -> Vec<Action> {
        let args = Args::new("computer", input);
        let Some(action) = input.get("action").and_then(Value::as_str) else {
            return vec![args.invalid("missing the string field `action`")];
        };
        let args = Args::new(action, input);
        let result = (|| -> Result<Vec<Action>, String> {
            let point = |key: &str| -> Result<Point, String> {
                let (x, y) = args.pair(key)?;
                Ok(self.image_point(x, y))
            };
            // Since computer_20250124 clicks may omit `coordinate`: they act
            // where the pointer is.
            let at_cursor = || -> Result<Point, String> {
                if args.has("coordinate") {
                    return point("coordinate");
                }
                self.cursor.get().ok_or_else(|| {
                    "no `coordinate`, and the pointer has not been placed yet: give a \
                     coordinate"
                        .to_owned()
                })
            };
            let modifiers = || modifiers_from(args.opt_str("text")?.unwrap_or(""));
            Ok(match action {
                "screenshot" => vec![Action::Screenshot],
                "cursor_position" => vec![Action::CursorPosition],
                "left_click" | "right_click" | "middle_click" => {
                    let p = at_cursor()?;
                    let button = match action {
                        "right_click" => MouseButton::Right,
                        "middle_click" => MouseButton::Middle,
                        _ => MouseButton::Left,
                    };
                    vec![Action::Click {
                        x: p.x,
                        y: p.y,
                        button,
                        modifiers: modifiers()?,
                    }]
                }
                "double_click" => {
                    let p = at_cursor()?;
                    vec![Action::DoubleClick {
                        x: p.x,
                        y: p.y,
                        modifiers: modifiers()?,
                    }]
                }
                "triple_click" => {
                    let p = at_cursor()?;
                    vec![Action::TripleClick {
                        x: p.x,
                        y: p.y,
                        modifiers: modifiers()?,
                    }]
                }
                "mouse_move" => {
                    let p = point("coordinate")?;
                    vec![Action::Hover { x: p.x, y: p.y }]
                }
                "left_click_drag" => vec![drag(point("start_coordinate")?, point("coordinate")?)],
                "left_mouse_down" | "left_mouse_up" => {
                    let at = match args.has("coordinate") {
                        true => Some(point("coordinate")?),
                        false => None,
                    };
                    let (x, y) = (at.map(|p| p.x), at.map(|p| p.y));
                    let button = MouseButton::Left;
                    vec![if action == "left_mouse_down" {
                        Action::MouseDown { x, y, button }
                    } else {
                        Action::MouseUp { x, y, button }
                    }]
                }
                "scroll" => {
                    // Without a coordinate: at the pointer, else mid-page.
                    let p = match args.has("coordinate") {
                        true => point("coordinate")?,
                        false => self.cursor.get().unwrap_or_else(|| self.center()),
                    };
                    let direction = direction(args.str("scroll_direction")?)?;
                    let amount = args.num("scroll_amount")?;
                    if amount <= 0.0 {
                        return Err("`scroll_amount` must be a positive number of clicks".into());
                    }
                    vec![Action::Scroll {
                        x: p.x,
                        y: p.y,
                        direction,
                        amount,
                        unit: ScrollUnit::Clicks,
                        modifiers: modifiers()?,
                    }]
                }
                "type" => vec![Action::Type {
                    text: args.str("text")?.to_owned(),
                }],
                "key" => {
                    let repeat = match args.opt_num("repeat")? {
                        None => 1,
                        Some(n) if n >= 1.0 && n <= MAX_KEY_REPEAT as f64 => n as u64,
                        Some(_) => {
                            return Err(format!("`repeat` must be between 1 and {MAX_KEY_REPEAT}"));
                        }
                    };
                    let once = chords(args.str("text")?)?;
                    (0..repeat)
                        .flat_map(|_| once.iter().cloned())
                        .map(|keys| Action::KeyPress { keys })
                        .collect()
                }
                "hold_key" => {
                    let secs = args.num("duration")?;
                    let keys = single_chord(args.str("text")?)?;
                    vec![Action::HoldKey {
                        keys,
                        duration_ms: seconds_to_ms(secs)?,
                    }]
                }
                "wait" => {
                    let secs = args.opt_num("duration")?.unwrap_or(1.0);
                    vec![Action::Wait {
                        ms: seconds_to_ms(secs)?,
                    }]
                }
                "zoom" => {
                    let r = args.array("region")?;
                    if r.len() != 4 {
                        return Err("`region` must be [x0, y0, x1, y1]".into());
                    }
                    let nums = r
                        .iter()
                        .map(as_number)
                        .collect::<Option<Vec<f64>>>()
                        .ok_or("`region` must hold four numbers")?;
                    let a = self.image_point(nums[0], nums[1]);
                    let b = self.image_point(nums[2], nums[3]);
                    vec![Action::Zoom {
                        region: Rect {
                            x0: a.x.min(b.x),
                            y0: a.y.min(b.y),
                            x1: a.x.max(b.x),
                            y1: a.y.max(b.y),
                        },
                    }]
                }
                other => return Err(format!("unknown computer action `{other}`")),
            })
        })();
        self.track(result.unwrap_or_else(|e| vec![args.invalid(e)]))
    }

    /// Decodes a member of Anthropic's `browser_toolset_20260801`: targets
    /// are a coordinate (screenshot pixels) or a ref from `read_page` or
    /// `find`.
    pub fn anthropic_browser(&self, member: &str, input: &Value) -> Vec<Action> {
        let args = Args::new(member, input);
        let result = (|| -> Result<Vec<Action>, String> {
            enum Target {
                At(Point),
                Ref(String),
            }
            let target = |key: &str| -> Result<Target, String> {
                let t = args.field(key)?;
                match t.get("type").and_then(Value::as_str) {
                    Some("coordinate") => {
                        let x = t.get("x").and_then(as_number);
                        let y = t.get("y").and_then(as_number);
                        match (x, y) {
                            (Some(x), Some(y)) => Ok(Target::At(self.image_point(x, y))),
                            _ => Err(format!("`{key}` needs numeric `x` and `y`")),
                        }
                    }
                    Some("ref") => t
                        .get("ref")
                        .and_then(Value::as_str)
                        .filter(|r| !r.trim().is_empty())
                        .map(|r| Target::Ref(r.trim().to_owned()))
                        .ok_or_else(|| format!("`{key}` needs a `ref`")),
                    _ => Err(format!(
                        "`{key}` must be {{\"type\": \"coordinate\", \"x\", \"y\"}} or \
                         {{\"type\": \"ref\", \"ref\"}}"
                    )),
                }
            };
            let point = |key: &str| -> Result<Point, String> {
                match target(key)? {
                    Target::At(p) => Ok(p),
                    Target::Ref(_) => Err(format!("`{key}` must be a coordinate here")),
                }
            };
            let reference = |key: &str| -> Result<String, String> {
                match target(key)? {
                    Target::Ref(r) => Ok(r),
                    Target::At(_) => Err(format!("`{key}` must be a ref here")),
                }
            };
            let computer = |input: Value| self.anthropic_computer(&input);
            Ok(match member {
                "navigate" => match args.str("url")?.trim() {
                    "back" => vec![Action::Back],
                    "forward" => vec![Action::Forward],
                    "reload" => vec![Action::Reload],
                    url if url.contains("://") || url.starts_with("about:") => {
                        vec![Action::Goto {
                            url: url.to_owned(),
                        }]
                    }
                    host => vec![Action::Goto {
                        url: format!("https://{host}"),
                    }],
                },
                "list_tabs" => vec![Action::ListTabs],
                "new_tab" => vec![Action::NewTab],
                "switch_tab" => vec![Action::SwitchTab {
                    id: args.str("tab_id")?.to_owned(),
                }],
                "close_tab" => vec![Action::CloseTab {
                    id: args.str("tab_id")?.to_owned(),
                }],
                "read_page" => {
                    let depth = args.opt_num("depth")?;
                    vec![Action::ReadPage {
                        interactive_only: args.opt_str("filter")? == Some("interactive"),
                        root: args.opt_str("ref")?.map(str::to_owned),
                        depth: depth.map(|d| d.clamp(0.0, 1000.0) as u32),
                    }]
                }
                "get_page_text" => vec![Action::PageText],
                "find" => vec![Action::FindElements {
                    query: args.str("query")?.to_owned(),
                }],
                "form_input" => vec![Action::FormInput {
                    reference: reference("target")?,
                    value: args.field("value")?.clone(),
                }],
                "scroll_to" => vec![Action::ScrollToRef {
                    reference: reference("target")?,
                }],
                "screenshot" => vec![Action::Screenshot],
                "zoom" => computer(json_with(input, "zoom")),
                "left_click" | "right_click" | "middle_click" | "double_click" | "triple_click" => {
                    let modifiers = modifiers_from(args.opt_str("modifiers")?.unwrap_or(""))?;
                    let button = match member {
                        "right_click" => MouseButton::Right,
                        "middle_click" => MouseButton::Middle,
                        _ => MouseButton::Left,
                    };
                    let count = match member {
                        "double_click" => 2,
                        "triple_click" => 3,
                        _ => 1,
                    };
                    match target("target")? {
                        Target::Ref(reference) => vec![Action::ClickRef {
                            reference,
                            button,
                            click_count: count,
                            modifiers,
                        }],
                        Target::At(p) => vec![click_n(p, button, count, modifiers)],
                    }
                }
                "hover" => match target("target")? {
                    Target::Ref(reference) => vec![Action::HoverRef { reference }],
                    Target::At(p) => vec![Action::Hover { x: p.x, y: p.y }],
                },
                "mouse_move" => {
                    let p = point("target")?;
                    vec![Action::Hover { x: p.x, y: p.y }]
                }
                "left_click_drag" => vec![drag(point("from")?, point("target")?)],
                "left_mouse_down" | "left_mouse_up" => {
                    let p = point("target")?;
                    let (x, y, button) = (Some(p.x), Some(p.y), MouseButton::Left);
                    vec![if member == "left_mouse_down" {
                        Action::MouseDown { x, y, button }
                    } else {
                        Action::MouseUp { x, y, button }
                    }]
                }
                "scroll" => {
                    let p = point("target")?;
                    let amount = args.opt_num("scroll_amount")?.unwrap_or(3.0);
                    if !(1.0..=10.0).contains(&amount) {
                        return Err("`scroll_amount` must be between 1 and 10".into());
                    }
                    vec![Action::Scroll {
                        x: p.x,
                        y: p.y,
                        direction: direction(args.str("scroll_direction")?)?,
                        amount,
                        unit: ScrollUnit::Clicks,
                        modifiers: Modifiers::NONE,
                    }]
                }
                "type" | "key" | "hold_key" | "wait" => computer(json_with(input, member)),
                "file_upload" | "javascript_exec" | "read_console" | "read_network" => {
                    return Err(format!("`{member}` is not enabled in this session"));
                }
                other => return Err(format!("unknown browser tool `{other}`")),
            })
        })();
        self.track(result.unwrap_or_else(|e| vec![args.invalid(e)]))
    }

    // ----- OpenAI ----------------------------------------------------------

    /// Decodes one OpenAI computer action (`computer_use_preview`'s
    /// `action`, or one element of the `computer` tool's `actions`).
    pub fn openai(&self, action: &Value) -> Vec<Action> {
        let kind = action.get("type").and_then(Value::as_str).unwrap_or("");
        let args = Args::new(if kind.is_empty() { "computer" } else { kind }, action);
        let result = (|| -> Result<Vec<Action>, String> {
            let point = || -> Result<Point, String> {
                Ok(self.image_point(args.num("x")?, args.num("y")?))
            };
            // Keys held during a move or a drag: pressed before, released
            // after, in reverse.
            let held_keys = || -> Result<Vec<String>, String> {
                match args.opt_array("keys")? {
                    None => Ok(Vec::new()),
                    Some(keys) => keys
                        .iter()
                        .map(|k| {
                            k.as_str()
                                .map(str::to_owned)
                                .ok_or("`keys` must hold strings".into())
                        })
                        .collect(),
                }
            };
            let keys_modifiers = || -> Result<Modifiers, String> {
                match args.opt_array("keys")? {
                    None => Ok(Modifiers::NONE),
                    Some(keys) => {
                        let names = keys
                            .iter()
                            .map(|k| k.as_str().ok_or("`keys` must hold strings"))
                            .collect::<Result<Vec<_>, _>>()?;
                        modifiers_from(&names.join("+"))
                    }
                }
            };
            Ok(match kind {
                "click" => {
                    let p = point()?;
                    let button = args.opt_str("button")?.unwrap_or("left");
                    let button = match button {
                        "left" => MouseButton::Left,
                        "right" => MouseButton::Right,
                        "wheel" | "middle" => MouseButton::Middle,
                        // The mouse's side buttons navigate, as in a browser.
                        "back" => return Ok(vec![Action::Back]),
                        "forward" => return Ok(vec![Action::Forward]),
                        other => return Err(format!("unknown mouse button `{other}`")),
                    };
                    vec![Action::Click {
                        x: p.x,
                        y: p.y,
                        button,
                        modifiers: keys_modifiers()?,
                    }]
                }
                "double_click" => {
                    let p = point()?;
                    vec![Action::DoubleClick {
                        x: p.x,
                        y: p.y,
                        modifiers: keys_modifiers()?,
                    }]
                }
                "move" => {
                    let p = point()?;
                    held(vec![Action::Hover { x: p.x, y: p.y }], held_keys()?)
                }
                "drag" => {
                    let path = args.array("path")?;
                    let points = path
                        .iter()
                        .map(|p| {
                            // `{x, y}` objects or `[x, y]` pairs: the GA tool
                            // sends either.
                            let (x, y) = match p {
                                Value::Array(pair) if pair.len() == 2 => {
                                    (as_number(&pair[0]), as_number(&pair[1]))
                                }
                                _ => (
                                    p.get("x").and_then(as_number),
                                    p.get("y").and_then(as_number),
                                ),
                            };
                            match (x, y) {
                                (Some(x), Some(y)) => Ok(self.image_point(x, y)),
                                _ => Err("each `path` point needs numeric `x` and `y` (or an \
                                          `[x, y]` pair)"
                                    .to_owned()),
                            }
                        })
                        .collect::<Result<Vec<Point>, String>>()?;
                    let (Some(first), Some(last)) = (points.first(), points.last()) else {
                        return Err("`path` needs at least two points".into());
                    };
                    if points.len() < 2 {
                        return Err("`path` needs at least two points".into());
                    }
                    held(
                        vec![Action::Drag {
                            start_x: first.x,
                            start_y: first.y,
                            end_x: last.x,
                            end_y: last.y,
                            path: points[1..points.len() - 1].to_vec(),
                        }],
                        held_keys()?,
                    )
                }
                "scroll" => {
                    let p = point()?;
                    let dx = args.opt_num("scroll_x")?.unwrap_or(0.0);
                    let dy = args.opt_num("scroll_y")?.unwrap_or(0.0);
                    // Distances are screenshot pixels too.
                    let dx = dx / positive_or_one(self.shot.scale.x);
                    let dy = dy / positive_or_one(self.shot.scale.y);
                    let modifiers = keys_modifiers()?;
                    let mut out = Vec::new();
                    if dy != 0.0 {
                        out.push(Action::Scroll {
                            x: p.x,
                            y: p.y,
                            direction: if dy > 0.0 {
                                ScrollDirection::Down
                            } else {
                                ScrollDirection::Up
                            },
                            amount: dy.abs(),
                            unit: ScrollUnit::Pixels,
                            modifiers,
                        });
                    }
                    if dx != 0.0 {
                        out.push(Action::Scroll {
                            x: p.x,
                            y: p.y,
                            direction: if dx > 0.0 {
                                ScrollDirection::Right
                            } else {
                                ScrollDirection::Left
                            },
                            amount: dx.abs(),
                            unit: ScrollUnit::Pixels,
                            modifiers,
                        });
                    }
                    if out.is_empty() {
                        return Err("`scroll_x` and `scroll_y` are both 0".into());
                    }
                    out
                }
                "type" => vec![Action::Type {
                    text: args.str("text")?.to_owned(),
                }],
                "keypress" => {
                    let keys = args
                        .array("keys")?
                        .iter()
                        .map(|k| k.as_str().map(str::to_owned))
                        .collect::<Option<Vec<String>>>()
                        .ok_or("`keys` must be an array of strings")?;
                    if keys.is_empty() {
                        return Err("`keys` is empty".into());
                    }
                    vec![Action::KeyPress { keys }]
                }
                "wait" => vec![Action::Wait { ms: OPENAI_WAIT_MS }],
                "screenshot" => vec![Action::Screenshot],
                "" => return Err("missing the string field `type`".into()),
                other => return Err(format!("unknown computer action `{other}`")),
            })
        })();
        self.track(result.unwrap_or_else(|e| vec![args.invalid(e)]))
    }

    // ----- Gemini ----------------------------------------------------------

    /// Decodes a Gemini computer-use function call (or one of our tools).
    pub fn gemini(&self, name: &str, args_value: &Value) -> Vec<Action> {
        let args = Args::new(name, args_value);
        let result = (|| -> Result<Vec<Action>, String> {
            let point = |kx: &str, ky: &str| -> Result<Point, String> {
                Ok(self.grid_point(args.num(kx)?, args.num(ky)?))
            };
            Ok(match name {
                "open_web_browser" => vec![Action::Screenshot],
                "wait_5_seconds" => vec![Action::Wait { ms: GEMINI_WAIT_MS }],
                "go_back" => vec![Action::Back],
                "go_forward" => vec![Action::Forward],
                "search" => vec![Action::Goto {
                    url: SEARCH_HOME.to_owned(),
                }],
                "navigate" => vec![Action::Goto {
                    url: args.str("url")?.to_owned(),
                }],
                "click_at" => {
                    let p = point("x", "y")?;
                    vec![Action::Click {
                        x: p.x,
                        y: p.y,
                        button: MouseButton::Left,
                        modifiers: Modifiers::NONE,
                    }]
                }
                "hover_at" => {
                    let p = point("x", "y")?;
                    vec![Action::Hover { x: p.x, y: p.y }]
                }
                "type_text_at" => {
                    let p = point("x", "y")?;
                    let text = args.str("text")?.to_owned();
                    // Both default to true in Gemini's tool definition.
                    let press_enter = args.opt_bool("press_enter")?.unwrap_or(true);
                    let clear = args.opt_bool("clear_before_typing")?.unwrap_or(true);
                    let mut out = vec![Action::Click {
                        x: p.x,
                        y: p.y,
                        button: MouseButton::Left,
                        modifiers: Modifiers::NONE,
                    }];
                    if clear {
                        out.push(Action::KeyPress {
                            keys: vec!["Control".into(), "a".into()],
                        });
                        out.push(Action::KeyPress {
                            keys: vec!["Delete".into()],
                        });
                    }
                    out.push(Action::Type { text });
                    if press_enter {
                        out.push(Action::KeyPress {
                            keys: vec!["Enter".into()],
                        });
                    }
                    out
                }
                "key_combination" => vec![Action::KeyPress {
                    keys: single_chord(args.str("keys")?)?,
                }],
                "scroll_document" => {
                    let c = self.center();
                    vec![Action::Scroll {
                        x: c.x,
                        y: c.y,
                        direction: direction(args.str("direction")?)?,
                        amount: 1.0,
                        unit: ScrollUnit::Pages,
                        modifiers: Modifiers::NONE,
                    }]
                }
                "scroll_at" => {
                    let p = point("x", "y")?;
                    let direction = direction(args.str("direction")?)?;
                    let magnitude = args
                        .opt_num("magnitude")?
                        .unwrap_or(GEMINI_DEFAULT_MAGNITUDE);
                    if magnitude <= 0.0 {
                        return Err("`magnitude` must be positive".into());
                    }
                    // The magnitude is on the 0-1000 grid along the scroll axis.
                    let axis = match direction {
                        ScrollDirection::Up | ScrollDirection::Down => self.shot.viewport.height,
                        ScrollDirection::Left | ScrollDirection::Right => self.shot.viewport.width,
                    };
                    let amount = (magnitude.min(1000.0) / 1000.0 * axis as f64).round();
                    vec![Action::Scroll {
                        x: p.x,
                        y: p.y,
                        direction,
                        amount,
                        unit: ScrollUnit::Pixels,
                        modifiers: Modifiers::NONE,
                    }]
                }
                // ----- the Gemini 3.5 set (its names, grid coordinates) -----
                "click" | "right_click" | "middle_click" | "double_click" | "triple_click" => {
                    let (button, count) = match name {
                        "right_click" => (MouseButton::Right, 1),
                        "middle_click" => (MouseButton::Middle, 1),
                        "double_click" => (MouseButton::Left, 2),
                        "triple_click" => (MouseButton::Left, 3),
                        _ => (MouseButton::Left, 1),
                    };
                    vec![click_n(point("x", "y")?, button, count, Modifiers::NONE)]
                }
                "move" => {
                    let p = point("x", "y")?;
                    vec![Action::Hover { x: p.x, y: p.y }]
                }
                "mouse_down" | "mouse_up" => {
                    let at = match args.has("x") || args.has("y") {
                        true => Some(point("x", "y")?),
                        false => None,
                    };
                    let (x, y) = (at.map(|p| p.x), at.map(|p| p.y));
                    let button = MouseButton::Left;
                    vec![if name == "mouse_down" {
                        Action::MouseDown { x, y, button }
                    } else {
                        Action::MouseUp { x, y, button }
                    }]
                }
                // Types where the focus is; `press_enter` defaults to false.
                "type" => {
                    let mut out = vec![Action::Type {
                        text: args.str("text")?.to_owned(),
                    }];
                    if args.opt_bool("press_enter")?.unwrap_or(false) {
                        out.push(Action::KeyPress {
                            keys: vec!["Enter".into()],
                        });
                    }
                    out
                }
                "press_key" => vec![Action::KeyPress {
                    keys: single_chord(args.str("key")?)?,
                }],
                "hotkey" => {
                    let keys = match args.field("keys")? {
                        Value::Array(keys) => keys
                            .iter()
                            .map(|k| k.as_str().map(str::to_owned))
                            .collect::<Option<Vec<String>>>()
                            .ok_or("`keys` must be a list of key names")?,
                        Value::String(chord) => single_chord(chord)?,
                        _ => return Err("`keys` must be a list of key names".into()),
                    };
                    if keys.is_empty() {
                        return Err("`keys` is empty".into());
                    }
                    vec![Action::KeyPress { keys }]
                }
                "key_down" => vec![Action::KeyDown {
                    key: args.str("key")?.to_owned(),
                }],
                "key_up" => vec![Action::KeyUp {
                    key: args.str("key")?.to_owned(),
                }],
                "wait" => {
                    let secs = args.opt_num("seconds")?.unwrap_or(1.0);
                    vec![Action::Wait {
                        ms: seconds_to_ms(secs)?,
                    }]
                }
                "take_screenshot" => vec![Action::Screenshot],
                "scroll" => {
                    let p = point("x", "y")?;
                    let direction = direction(args.str("direction")?)?;
                    // The 3.5 docs name a pixel distance; Google's reference
                    // agent reads a grid `magnitude`. Both are accepted.
                    let pixels = match args.opt_num("magnitude_in_pixels")? {
                        Some(px) => px,
                        None => {
                            let grid = args
                                .opt_num("magnitude")?
                                .unwrap_or(GEMINI_DEFAULT_MAGNITUDE);
                            let axis = match direction {
                                ScrollDirection::Up | ScrollDirection::Down => {
                                    self.shot.viewport.height
                                }
                                _ => self.shot.viewport.width,
                            };
                            (grid.min(1000.0) / 1000.0 * axis as f64).round()
                        }
                    };
                    if pixels <= 0.0 {
                        return Err("the scroll magnitude must be positive".into());
                    }
                    vec![Action::Scroll {
                        x: p.x,
                        y: p.y,
                        direction,
                        amount: pixels,
                        unit: ScrollUnit::Pixels,
                        modifiers: Modifiers::NONE,
                    }]
                }
                "drag_and_drop" if args.has("start_x") => {
                    vec![drag(point("start_x", "start_y")?, point("end_x", "end_y")?)]
                }
                "drag_and_drop" => {
                    let s = point("x", "y")?;
                    let e = point("destination_x", "destination_y")?;
                    vec![Action::Drag {
                        start_x: s.x,
                        start_y: s.y,
                        end_x: e.x,
                        end_y: e.y,
                        path: Vec::new(),
                    }]
                }
                _ => return Ok(self.lumen_tool(name, args_value, CoordinateSpace::Normalized)),
            })
        })();
        self.track(result.unwrap_or_else(|e| vec![args.invalid(e)]))
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
                    let keys = args
                        .array("keys")?
                        .iter()
                        .map(|k| k.as_str().map(str::to_owned))
                        .collect::<Option<Vec<String>>>()
                        .ok_or("`keys` must be an array of strings")?;
                    if keys.is_empty() {
                        return Err("`keys` is empty".into());
                    }
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

struct Args<'a> {
    name: &'a str,
    v: &'a Value,
}

impl<'a> Args<'a> {
    fn new(name: &'a str, v: &'a Value) -> Self {
        Self { name, v }
    }

    fn invalid(&self, error: impl Into<String>) -> Action {
        Action::Invalid {
            name: self.name.to_owned(),
            input: self.v.clone(),
            error: error.into(),
        }
    }

    fn has(&self, key: &str) -> bool {
        self.v.get(key).is_some_and(|v| !v.is_null())
    }

    fn field(&self, key: &str) -> Result<&'a Value, String> {
        match self.v.get(key) {
            Some(v) if !v.is_null() => Ok(v),
            _ => Err(format!("missing `{key}`")),
        }
    }

    fn num(&self, key: &str) -> Result<f64, String> {
        as_number(self.field(key)?).ok_or_else(|| format!("`{key}` must be a number"))
    }

    fn opt_num(&self, key: &str) -> Result<Option<f64>, String> {
        if !self.has(key) {
            return Ok(None);
        }
        self.num(key).map(Some)
    }

    fn str(&self, key: &str) -> Result<&'a str, String> {
        self.field(key)?
            .as_str()
            .ok_or_else(|| format!("`{key}` must be a string"))
    }

    fn opt_str(&self, key: &str) -> Result<Option<&'a str>, String> {
        if !self.has(key) {
            return Ok(None);
        }
        self.str(key).map(Some)
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(_) => Err(format!("`{key}` must be true or false")),
        }
    }

    fn array(&self, key: &str) -> Result<&'a Vec<Value>, String> {
        self.field(key)?
            .as_array()
            .ok_or_else(|| format!("`{key}` must be an array"))
    }

    fn opt_array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        if !self.has(key) {
            return Ok(None);
        }
        self.array(key).map(Some)
    }

    /// A `[x, y]` pair.
    fn pair(&self, key: &str) -> Result<(f64, f64), String> {
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
fn as_number(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    n.is_finite().then_some(n)
}

fn positive_or_one(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 1.0 }
}

fn seconds_to_ms(secs: f64) -> Result<u64, String> {
    if !(0.0..=600.0).contains(&secs) {
        return Err("`duration` must be between 0 and 600 seconds".into());
    }
    Ok((secs * 1000.0).round() as u64)
}

fn direction(s: &str) -> Result<ScrollDirection, String> {
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
fn chords(text: &str) -> Result<Vec<Vec<String>>, String> {
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

fn single_chord(text: &str) -> Result<Vec<String>, String> {
    if text == " " {
        return Ok(vec![" ".into()]);
    }
    split_chord(text.trim())
}

fn split_chord(chord: &str) -> Result<Vec<String>, String> {
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
fn modifiers_from(text: &str) -> Result<Modifiers, String> {
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

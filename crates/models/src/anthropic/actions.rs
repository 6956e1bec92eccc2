//! Action mapping: Anthropic's computer tool, its computer toolset and its browser toolset into Lumen's actions in viewport pixels.

use lumen_core::{Action, Modifiers, MouseButton, Point, Rect, ScrollUnit};
use serde_json::Value;

use crate::decoder::*;

impl ActionDecoder {
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
                "file_upload" => {
                    let strings = |key: &str| -> Result<Vec<String>, String> {
                        args.opt_array(key)?
                            .into_iter()
                            .flatten()
                            .map(|v| {
                                v.as_str()
                                    .filter(|s| !s.trim().is_empty())
                                    .map(str::to_owned)
                                    .ok_or_else(|| format!("`{key}` must hold non-empty strings"))
                            })
                            .collect()
                    };
                    let (paths, document_ids) = (strings("paths")?, strings("document_ids")?);
                    if paths.is_empty() && document_ids.is_empty() {
                        return Err("give at least one of `paths` or `document_ids`".into());
                    }
                    vec![Action::FileUpload {
                        reference: reference("target")?,
                        paths,
                        document_ids,
                    }]
                }
                "javascript_exec" => match args.str("text")? {
                    text if text.trim().is_empty() => {
                        return Err("`text` must hold a JavaScript expression".into());
                    }
                    text => vec![Action::JavascriptExec {
                        text: text.to_owned(),
                    }],
                },
                "read_console" => vec![Action::ReadConsole],
                "read_network" => vec![Action::ReadNetwork],
                other => return Err(format!("unknown browser tool `{other}`")),
            })
        })();
        self.track(result.unwrap_or_else(|e| vec![args.invalid(e)]))
    }
}

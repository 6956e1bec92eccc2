//! Action mapping: Gemini's computer-use functions (the legacy set and the 3.5 set) into Lumen's actions in viewport pixels.

use lumen_core::{Action, Modifiers, MouseButton, Point, ScrollDirection, ScrollUnit};
use serde_json::Value;

use crate::decoder::*;

impl ActionDecoder {
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
}

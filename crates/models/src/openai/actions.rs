//! Action mapping: OpenAI's computer actions (`computer_use_preview` and the batched `computer` tool) into Lumen's actions in viewport pixels.

use lumen_core::{Action, Modifiers, MouseButton, Point, ScrollDirection, ScrollUnit};
use serde_json::Value;

use crate::decoder::*;

impl ActionDecoder {
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
                    let keys = args.key_list("keys")?;
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
}

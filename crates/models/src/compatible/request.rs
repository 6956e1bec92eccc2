//! Request building: the loop's wire history as a Chat Completions request,
//! with Lumen's action set as function tools.

use super::*;
use crate::prompt::{Arg, Offer};

/// The catalogue's pointer, keyboard and navigation actions as this
/// adapter offers them (its decoder's names, defaults and limits; see
/// `ActionDecoder::compatible`), before [`prompt::OWN_TOOLS`].
const OFFERS: &[Offer] = &[
    Offer {
        name: "click",
        action: "click",
        args: &[Arg::of("x"), Arg::of("y"), Arg::of("button")],
    },
    Offer {
        name: "double_click",
        action: "doubleClick",
        args: &[Arg::of("x"), Arg::of("y")],
    },
    Offer {
        name: "hover",
        action: "hover",
        args: &[Arg::of("x"), Arg::of("y")],
    },
    Offer {
        name: "drag",
        action: "drag",
        args: &[
            Arg::of("startX"),
            Arg::of("startY"),
            Arg::of("endX"),
            Arg::of("endY"),
        ],
    },
    Offer {
        name: "type",
        action: "type",
        // The router fills `<secret:NAME>` placeholders; the loop's prompt
        // says when there are any.
        args: &[Arg::of("text").note("")],
    },
    Offer {
        name: "key_press",
        action: "keyPress",
        args: &[Arg::of("keys").bounds(None, None)],
    },
    Offer {
        name: "scroll",
        action: "scroll",
        // Always wheel clicks here; 3 when absent.
        args: &[
            Arg::of("x"),
            Arg::of("y"),
            Arg::of("direction"),
            Arg::of("amount")
                .optional()
                .bounds(Some(1), Some(20))
                .note("How far, in wheel clicks (1-20)."),
        ],
    },
    Offer {
        name: "back",
        action: "back",
        args: &[],
    },
    Offer {
        name: "forward",
        action: "forward",
        args: &[],
    },
    Offer {
        name: "wait",
        action: "wait",
        // 1000 ms when absent.
        args: &[Arg::of("ms").optional().bounds(Some(0), Some(60_000))],
    },
    Offer {
        name: "screenshot",
        action: "screenshot",
        args: &[],
    },
];

/// Lumen's action set as function tools, rendered from the catalogue.
pub(super) fn tools(space: CoordinateSpace, own: prompt::OwnTools) -> Vec<Value> {
    let unit = match space {
        CoordinateSpace::Normalized => "0-1000 grid",
        CoordinateSpace::Pixels => "screenshot pixels",
    };
    OFFERS
        .iter()
        .chain(prompt::own_offers(own))
        .filter_map(|offer| prompt::function_tool(offer, unit))
        .map(|(name, description, parameters)| {
            json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
        })
        .collect()
}

/// Encodes one of our actions as a call of our function tools (for history
/// written by another adapter).
pub(super) fn encode_action(
    action: &Action,
    space: CoordinateSpace,
    scale: ImageScale,
    viewport: Size,
) -> (String, Value) {
    let (name, args) = encode_known(action, space, scale, viewport);
    match action {
        // An undecodable call is replayed as the model wrote it.
        Action::Invalid { name, input, .. } => (name.clone(), input.clone()),
        _ => (name.to_owned(), args),
    }
}

pub(super) fn encode_known(
    action: &Action,
    space: CoordinateSpace,
    scale: ImageScale,
    viewport: Size,
) -> (&'static str, Value) {
    let pt = |x: i32, y: i32| -> (i64, i64) {
        match space {
            CoordinateSpace::Normalized => (
                normalize(x as f64, viewport.width) as i64,
                normalize(y as f64, viewport.height) as i64,
            ),
            CoordinateSpace::Pixels => {
                let (ix, iy) = scale.css_to_image(lumen_core::Point::new(x, y));
                (ix.round() as i64, iy.round() as i64)
            }
        }
    };
    match action {
        Action::Click { x, y, button, .. } => {
            let (x, y) = pt(*x, *y);
            let button = match button {
                MouseButton::Left => "left",
                MouseButton::Right => "right",
                MouseButton::Middle => "middle",
            };
            ("click", json!({"x": x, "y": y, "button": button}))
        }
        Action::DoubleClick { x, y, .. } | Action::TripleClick { x, y, .. } => {
            let (x, y) = pt(*x, *y);
            ("double_click", json!({"x": x, "y": y}))
        }
        Action::Hover { x, y } => {
            let (x, y) = pt(*x, *y);
            ("hover", json!({"x": x, "y": y}))
        }
        Action::Drag {
            start_x,
            start_y,
            end_x,
            end_y,
            ..
        } => {
            let (sx, sy) = pt(*start_x, *start_y);
            let (ex, ey) = pt(*end_x, *end_y);
            (
                "drag",
                json!({"start_x": sx, "start_y": sy, "end_x": ex, "end_y": ey}),
            )
        }
        Action::Scroll {
            x,
            y,
            direction,
            amount,
            unit,
            ..
        } => {
            let (x, y) = pt(*x, *y);
            let clicks = match unit {
                ScrollUnit::Clicks => *amount,
                ScrollUnit::Pixels => amount / lumen_core::action::PIXELS_PER_WHEEL_CLICK,
                ScrollUnit::Pages => amount * 5.0,
            };
            let direction = match direction {
                ScrollDirection::Up => "up",
                ScrollDirection::Down => "down",
                ScrollDirection::Left => "left",
                ScrollDirection::Right => "right",
            };
            (
                "scroll",
                json!({"x": x, "y": y, "direction": direction, "amount": clicks.round().max(1.0) as i64}),
            )
        }
        Action::Type { text } => ("type", json!({"text": text})),
        Action::KeyPress { keys } | Action::HoldKey { keys, .. } => {
            ("key_press", json!({"keys": keys}))
        }
        Action::Wait { ms } => ("wait", json!({"ms": ms})),
        Action::Goto { url } => ("navigate", json!({"url": url})),
        Action::Back => ("back", json!({})),
        Action::Forward => ("forward", json!({})),
        Action::WriteState { data } => ("update_state", json!({"data": data})),
        Action::Terminate { status, result } => (
            "task_complete",
            json!({"result": result, "status": match status {
                TerminateStatus::Success => "success",
                TerminateStatus::Failure => "failure",
            }}),
        ),
        Action::Fold { summary } => ("fold", json!({"summary": summary})),
        Action::RequestHuman { reason } => ("request_human", json!({"reason": reason})),
        Action::Delegate {
            instruction,
            max_steps,
        } => (
            "delegate",
            json!({"instruction": instruction, "max_steps": max_steps}),
        ),
        _ => ("screenshot", json!({})),
    }
}

/// A message's content as a list of parts (a string becomes one text part).
pub(super) fn content_parts(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(parts) => parts.clone(),
        _ => Vec::new(),
    }
}

/// Joins each run of consecutive user messages into one.
pub(super) fn merge_user_runs(messages: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        match out.last_mut() {
            Some(last) if last["role"] == "user" && message["role"] == "user" => {
                let mut parts = content_parts(&last["content"]);
                parts.extend(content_parts(&message["content"]));
                last["content"] = Value::Array(parts);
            }
            _ => out.push(message),
        }
    }
    out
}

/// Keeps the newest `max` images; older ones become a text marker (servers
/// such as vLLM cap images per request).
pub(super) fn keep_newest_images(messages: &mut [Value], max: usize) {
    let mut seen = 0;
    for message in messages.iter_mut().rev() {
        let Some(parts) = message["content"].as_array_mut() else {
            continue;
        };
        for part in parts.iter_mut().rev() {
            if part["type"] == "image_url" {
                seen += 1;
                if seen > max {
                    *part = json!({"type": "text", "text": "[an older screenshot, not sent]"});
                }
            }
        }
    }
}

pub(super) fn build_messages(ctx: &StepContext<'_>, space: CoordinateSpace) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    // (tool_call_id, action-call ids) of the last assistant turn.
    let mut pending: Vec<(String, Vec<String>)> = Vec::new();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut saw_screenshot = false;
    let flush = |messages: &mut Vec<Value>,
                 pending: &mut Vec<(String, Vec<String>)>,
                 results: &mut Vec<ToolResult>| {
        let taken = std::mem::take(results);
        let refs: Vec<&ToolResult> = taken.iter().collect();
        let calls = std::mem::take(pending);
        for (id, ids) in &calls {
            let a = prompt::answer_for(ids, &refs);
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": a.text}));
        }
        for r in &taken {
            if calls.iter().any(|(_, ids)| ids.contains(&r.call_id)) {
                continue;
            }
            let status = match (&r.error, r.ok) {
                (_, true) => "ok".to_owned(),
                (Some(e), false) => format!("error: {e}"),
                (None, false) => "error".to_owned(),
            };
            messages.push(
                json!({"role": "user", "content": format!("Result of `{}`: {status}", r.action)}),
            );
        }
    };
    for record in ctx.wire {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                flush(&mut messages, &mut pending, &mut results);
                messages.push(json!({"role": "user", "content": prompt::summary_text(content, *compacted_at)}));
            }
            WireRecord::Screenshot(shot) => {
                flush(&mut messages, &mut pending, &mut results);
                saw_screenshot = true;
                let content = match &shot.image {
                    Some(img) => {
                        json!([{"type": "image_url", "image_url": {"url": img.to_data_url()}}])
                    }
                    None => json!(prompt::screenshot_marker(shot.step)),
                };
                messages.push(json!({"role": "user", "content": content}));
            }
            WireRecord::Assistant(turn) => {
                flush(&mut messages, &mut pending, &mut results);
                messages.push(assistant_message(turn, &mut pending, space, ctx));
            }
            WireRecord::ToolResult(r) => results.push(r.clone()),
            _ => {}
        }
    }
    flush(&mut messages, &mut pending, &mut results);
    if !saw_screenshot {
        messages.push(json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": ctx.screenshot.image.to_data_url()}}]}));
    }
    messages
}

pub(super) fn assistant_message(
    turn: &AssistantTurn,
    pending: &mut Vec<(String, Vec<String>)>,
    space: CoordinateSpace,
    ctx: &StepContext<'_>,
) -> Value {
    let native = turn
        .provider
        .as_ref()
        .filter(|p| p.provider == PROVIDER)
        .and_then(|p| p.data.get("tool_calls"))
        .and_then(Value::as_array);
    let groups = prompt::call_groups(turn);
    let tool_calls: Vec<Value> = match native {
        Some(calls) => {
            for call in calls {
                let id = call["id"].as_str().unwrap_or("").to_owned();
                let ids = groups
                    .iter()
                    .find(|(g, _)| *g == id)
                    .map_or_else(|| vec![id.clone()], |(_, ids)| ids.clone());
                pending.push((id, ids));
            }
            calls.clone()
        }
        None => turn
            .calls
            .iter()
            .filter(|c| c.id != stream::TEXT_ANSWER_ID)
            .map(|c| {
                let (name, args) = encode_action(
                    &c.action,
                    space,
                    ctx.screenshot.scale,
                    ctx.screenshot.viewport,
                );
                pending.push((c.id.clone(), vec![c.id.clone()]));
                json!({"id": c.id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect(),
    };
    let mut message =
        json!({"role": "assistant", "content": turn.text.clone().unwrap_or_default()});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value the schema accepts (at its lower bound where it has one).
    fn example(schema: &Value) -> Value {
        if let Some(choices) = schema["enum"].as_array() {
            return choices[0].clone();
        }
        match schema["type"].as_str() {
            Some("number" | "integer") => json!(schema["minimum"].as_i64().unwrap_or(0).max(1)),
            Some("string") => json!("x"),
            Some("boolean") => json!(true),
            Some("array") => json!(["Enter"]),
            _ => json!({"key": "value"}),
        }
    }

    /// `request_human` and `choose_files` are offered only to sessions
    /// that can carry them out.
    #[test]
    fn tools_a_session_cannot_use_are_not_offered() {
        let names = |own| -> Vec<String> {
            tools(CoordinateSpace::Pixels, own)
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let plain = names(prompt::OwnTools::default());
        assert!(plain.contains(&"answer_dialog".to_owned()), "{plain:?}");
        assert!(!plain.contains(&"choose_files".to_owned()), "{plain:?}");
        assert!(!plain.contains(&"request_human".to_owned()), "{plain:?}");
        let uploads = names(prompt::OwnTools {
            human: false,
            uploads: true,
        });
        assert!(uploads.contains(&"choose_files".to_owned()), "{uploads:?}");
        assert!(!uploads.contains(&"request_human".to_owned()));
        let human = names(prompt::OwnTools {
            human: true,
            uploads: false,
        });
        assert!(human.contains(&"request_human".to_owned()), "{human:?}");
        assert!(!human.contains(&"choose_files".to_owned()));
    }

    /// Every offered tool decodes to the catalogue action it renders, with
    /// all its arguments and with only the required ones.
    #[test]
    fn every_offered_tool_decodes_to_its_action() {
        let size = Size::new(1000, 1000);
        let decoder = ActionDecoder::for_screen(size, size);
        let every = prompt::OwnTools {
            human: true,
            uploads: true,
        };
        let tools = tools(CoordinateSpace::Normalized, every);
        let offers: Vec<&Offer> = OFFERS.iter().chain(prompt::OWN_TOOLS).collect();
        // An offer naming a field or action the catalogue lacks is left out.
        assert_eq!(tools.len(), offers.len());
        for (tool, offer) in tools.iter().zip(offers) {
            let f = &tool["function"];
            assert_eq!(f["name"], offer.name);
            let props = f["parameters"]["properties"].as_object().unwrap();
            let required: Vec<&str> = f["parameters"]["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for only_required in [false, true] {
                let args: serde_json::Map<String, Value> = props
                    .iter()
                    .filter(|(k, _)| !only_required || required.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), example(v)))
                    .collect();
                let args = Value::Object(args);
                let actions = decoder.lumen_tool(offer.name, &args, CoordinateSpace::Normalized);
                assert_eq!(actions.len(), 1, "{args}");
                assert_eq!(
                    actions[0].kind(),
                    offer.action,
                    "{}: {args} -> {:?}",
                    offer.name,
                    actions[0]
                );
            }
        }
    }
}

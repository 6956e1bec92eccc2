//! Request building: the loop's wire history as a openai request.

use super::*;

/// With chaining: the id of the newest native response and the records
/// after it (the provider already holds everything before).
pub(super) fn chain_point(wire: &[WireRecord]) -> (Option<String>, &[WireRecord]) {
    for (i, record) in wire.iter().enumerate().rev() {
        if let WireRecord::Assistant(turn) = record
            && let Some(id) = native(turn)
                .and_then(|d| d.get("id"))
                .and_then(Value::as_str)
        {
            // Keep the turn itself so its calls are answered; its items are
            // not re-sent (see `build_input`).
            return (Some(id.to_owned()), &wire[i..]);
        }
    }
    (None, wire)
}

pub(super) fn native(turn: &AssistantTurn) -> Option<&Value> {
    turn.provider
        .as_ref()
        .filter(|p| p.provider == PROVIDER)
        .map(|p| &p.data)
}

/// A screenshot as an input image, at `detail: "original"`: any other
/// detail lets the server resize it, and the model's coordinates then
/// belong to an image we never saw. The loop already sized it to the
/// model's limits.
pub(super) fn image_part(url: String) -> Value {
    json!({"type": "input_image", "image_url": url, "detail": "original"})
}

pub(super) fn user_text(text: String) -> Value {
    json!({"role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// One provider call awaiting its answer.
pub(super) struct Pending {
    call_id: String,
    computer: bool,
    ids: Vec<String>,
}

pub(super) fn build_input(
    records: &[WireRecord],
    ctx: &StepContext<'_>,
    chain: bool,
    ids: bool,
) -> Vec<Value> {
    let mut input: Vec<Value> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut saw_screenshot = false;
    let chained_first = matches!(records.first(), Some(WireRecord::Assistant(t)) if native(t).and_then(|d| d.get("id")).is_some());
    for (i, record) in records.iter().enumerate() {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                flush(&mut input, &mut pending, &mut results, None);
                input.push(user_text(prompt::summary_text(content, *compacted_at)));
            }
            WireRecord::Screenshot(shot) => {
                saw_screenshot = true;
                let (url, marker) = match &shot.image {
                    Some(img) => (Some(img.to_data_url()), None),
                    None => (None, Some(prompt::screenshot_marker(shot.step))),
                };
                let answered = flush(
                    &mut input,
                    &mut pending,
                    &mut results,
                    Some((url.clone(), marker.clone())),
                );
                if !answered {
                    let mut content = Vec::new();
                    if let Some(m) = marker {
                        content.push(json!({"type": "input_text", "text": m}));
                    }
                    if let Some(u) = url {
                        content.push(image_part(u));
                    }
                    input.push(json!({"role": "user", "content": content}));
                }
            }
            WireRecord::Assistant(turn) => {
                flush(&mut input, &mut pending, &mut results, None);
                let groups = prompt::call_groups(turn);
                let skip_items = i == 0 && chained_first;
                match native(turn)
                    .and_then(|d| d.get("output"))
                    .and_then(Value::as_array)
                {
                    Some(items) => {
                        for item in items {
                            if !skip_items && let Some(item) = replayable(item, chain, ids) {
                                input.push(item);
                            }
                            let kind = item["type"].as_str().unwrap_or("");
                            if kind == "computer_call" || kind == "function_call" {
                                let call_id = item["call_id"].as_str().unwrap_or("").to_owned();
                                let ids = groups
                                    .iter()
                                    .find(|(g, _)| *g == call_id)
                                    .map_or_else(|| vec![call_id.clone()], |(_, ids)| ids.clone());
                                pending.push(Pending {
                                    call_id,
                                    computer: kind == "computer_call",
                                    ids,
                                });
                            }
                        }
                    }
                    None => {
                        // A turn written by another adapter: its actions as
                        // our own function calls where they exist, else as
                        // assistant text; results follow as text.
                        let mut text = turn.text.clone().unwrap_or_default();
                        for call in &turn.calls {
                            if call.id == stream::TEXT_ANSWER_ID {
                                continue;
                            }
                            let action = serde_json::to_string(&call.action).unwrap_or_default();
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(&format!("[action {}] {action}", call.id));
                        }
                        if !text.is_empty() {
                            // An easy input message: its content parts may
                            // only be input parts, so the text goes plain.
                            input.push(json!({"role": "assistant", "content": text}));
                        }
                    }
                }
            }
            WireRecord::ToolResult(r) => results.push(r.clone()),
            _ => {}
        }
    }
    flush(&mut input, &mut pending, &mut results, None);
    if !saw_screenshot {
        input.push(
            json!({"role": "user", "content": [image_part(ctx.screenshot.image.to_data_url())]}),
        );
    }
    input
}

/// An output item as it may be sent back. Stateless requests (`store:
/// false`) cannot refer to stored items: a reasoning item is resolved by id
/// unless it carries its `encrypted_content`, and then fails with "Item
/// with id 'rs_…' not found". So a reasoning item without it is dropped.
/// Every other item keeps its id: the SDK's input types require it on
/// computer calls and output messages, and the API does not look it up.
pub(super) fn replayable(item: &Value, chained: bool, ids: bool) -> Option<Value> {
    let stateless_reasoning = !chained && item["type"] == "reasoning";
    if stateless_reasoning && !item["encrypted_content"].is_string() {
        return None;
    }
    let mut item = item.clone();
    if !chained
        && !ids
        && let Some(fields) = item.as_object_mut()
    {
        fields.remove("id");
    }
    Some(item)
}

/// Answers the pending calls. `shot` is the screenshot that follows them
/// (its data URL, or the marker of a compressed one);
/// computer calls carry it, and it is then not sent again. Returns whether
/// a computer call took the screenshot.
pub(super) fn flush(
    input: &mut Vec<Value>,
    pending: &mut Vec<Pending>,
    results: &mut Vec<ToolResult>,
    shot: Option<(Option<String>, Option<String>)>,
) -> bool {
    if pending.is_empty() && results.is_empty() {
        return false;
    }
    let taken = std::mem::take(results);
    let refs: Vec<&ToolResult> = taken.iter().collect();
    let mut notes: Vec<String> = Vec::new();
    let mut screenshot_used = false;
    // Every computer_call_output must carry an image, but a turn has one
    // screenshot after it: the last computer call gets it, earlier ones a
    // placeholder, so the same image is never paid for twice.
    let last_computer = pending.iter().rposition(|p| p.computer);
    for (index, p) in pending.drain(..).enumerate() {
        let answer = prompt::answer_for(&p.ids, &refs);
        if p.computer {
            let (image, marker) = match &shot {
                Some(_) if Some(index) != last_computer => (
                    PLACEHOLDER_PNG.to_owned(),
                    Some(
                        "[the screenshot after this turn is on its last computer call]".to_owned(),
                    ),
                ),
                Some((Some(url), _)) => {
                    screenshot_used = true;
                    (url.clone(), None)
                }
                Some((None, marker)) => {
                    screenshot_used = true;
                    (PLACEHOLDER_PNG.to_owned(), marker.clone())
                }
                None => (
                    PLACEHOLDER_PNG.to_owned(),
                    Some("[no screenshot]".to_owned()),
                ),
            };
            // The SDK's screenshot output has no field for the page URL
            // (the API refuses unknown fields), so the URL is not sent here.
            let output = json!({
                "type": "computer_call_output",
                "call_id": p.call_id,
                "output": {"type": "computer_screenshot", "image_url": image},
                "acknowledged_safety_checks": answer.acknowledged,
            });
            input.push(output);
            let mut note = format!("Result of computer call {}: {}", p.call_id, answer.text);
            if let Some(m) = marker {
                note.push_str(&format!(" (screenshot: {m})"));
            }
            notes.push(note);
        } else {
            input.push(json!({
                "type": "function_call_output",
                "call_id": p.call_id,
                "output": answer.text,
            }));
        }
    }
    // Results for calls the turn never sent (a text answer's terminate).
    let known: Vec<&str> = input.iter().filter_map(|i| i["call_id"].as_str()).collect();
    let mut strays = Vec::new();
    for r in &taken {
        if known.contains(&crate::base_call_id(&r.call_id)) {
            continue;
        }
        let status = match (&r.error, r.ok) {
            (_, true) => "ok".to_owned(),
            (Some(e), false) => format!("error: {e}"),
            (None, false) => "error".to_owned(),
        };
        let mut note = format!("Result of `{}` ({}): {status}", r.action, r.call_id);
        for h in &r.hints {
            note.push_str(&format!("\nhint: {h}"));
        }
        strays.push(note);
    }
    notes.extend(strays);
    if !notes.is_empty() {
        input.push(user_text(notes.join("\n")));
    }
    screenshot_used
}

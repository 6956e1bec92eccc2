//! Request building: the loop's wire history as a google request.

use super::*;

/// A JSON Schema in the dialect of Gemini's `FunctionDeclaration.parameters`
/// (the SDK's `Schema`): upper-case type names, no `additionalProperties`,
/// and no OBJECT schema without `properties` (the Developer API refuses
/// both). An open object becomes a string holding a JSON object, which the
/// decoder parses.
pub(super) fn gemini_schema(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let open_object = map.get("type") == Some(&json!("object"))
        && map
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty());
    if open_object {
        return json!({
            "type": "STRING",
            "description": "A JSON object, written out as text, e.g. {\"key\": \"value\"}.",
        });
    }
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "additionalProperties" => {}
            "properties" => {
                let props = value
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(k, v)| (k.clone(), gemini_schema(v)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" => {
                out.insert(key.clone(), gemini_schema(value));
            }
            // The SDK's `Schema.type` is an enum of upper-case names.
            "type" => {
                let upper = value.as_str().map(str::to_ascii_uppercase);
                out.insert(
                    key.clone(),
                    upper.map_or_else(|| value.clone(), Value::from),
                );
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

pub(super) fn push_part(contents: &mut Vec<Value>, role: &str, part: Value) {
    match contents.last_mut() {
        Some(last) if last["role"] == role => {
            if let Some(parts) = last["parts"].as_array_mut() {
                parts.push(part);
            }
        }
        _ => contents.push(json!({"role": role, "parts": [part]})),
    }
}

/// A call awaiting its function response.
pub(super) struct Pending {
    name: String,
    /// The call's wire id, echoed in `functionResponse.id`.
    wire_id: Option<String>,
    ids: Vec<String>,
}

pub(super) fn build_contents(ctx: &StepContext<'_>) -> Vec<Value> {
    let mut contents: Vec<Value> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut saw_screenshot = false;
    let mut last_url: Option<String> = None;
    for record in ctx.wire {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                answer(
                    &mut contents,
                    &mut pending,
                    &mut results,
                    None,
                    last_url.as_deref(),
                );
                push_part(
                    &mut contents,
                    "user",
                    json!({"text": prompt::summary_text(content, *compacted_at)}),
                );
            }
            WireRecord::Screenshot(shot) => {
                saw_screenshot = true;
                if shot.url.is_some() {
                    last_url = shot.url.clone();
                }
                let image = shot.image.as_ref().map(|img| {
                    json!({"inlineData": {"mimeType": img.format.mime(), "data": img.to_base64()}})
                });
                let marker = prompt::screenshot_marker(shot.step);
                let used = answer(
                    &mut contents,
                    &mut pending,
                    &mut results,
                    Some((image.clone(), marker.clone())),
                    last_url.as_deref(),
                );
                if !used {
                    match image {
                        Some(part) => push_part(&mut contents, "user", part),
                        None => push_part(&mut contents, "user", json!({"text": marker})),
                    }
                }
            }
            WireRecord::Assistant(turn) => {
                answer(
                    &mut contents,
                    &mut pending,
                    &mut results,
                    None,
                    last_url.as_deref(),
                );
                if contents.is_empty() {
                    push_part(
                        &mut contents,
                        "user",
                        json!({"text": "(the history starts here)"}),
                    );
                }
                model_turn(&mut contents, &mut pending, turn);
            }
            WireRecord::ToolResult(r) => results.push(r.clone()),
            _ => {}
        }
    }
    answer(
        &mut contents,
        &mut pending,
        &mut results,
        None,
        last_url.as_deref(),
    );
    if !saw_screenshot {
        let img = &ctx.screenshot.image;
        push_part(
            &mut contents,
            "user",
            json!({"inlineData": {"mimeType": img.format.mime(), "data": img.to_base64()}}),
        );
    }
    contents
}

pub(super) fn native(turn: &AssistantTurn) -> Option<&Vec<Value>> {
    turn.provider
        .as_ref()
        .filter(|p| p.provider == PROVIDER)
        .and_then(|p| p.data.get("parts"))
        .and_then(Value::as_array)
}

pub(super) fn model_turn(
    contents: &mut Vec<Value>,
    pending: &mut Vec<Pending>,
    turn: &AssistantTurn,
) {
    match native(turn) {
        Some(parts) => {
            let ids: Vec<Value> = turn
                .provider
                .as_ref()
                .and_then(|p| p.data.get("callIds"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let groups = prompt::call_groups(turn);
            let mut n = 0;
            for part in parts {
                push_part(contents, "model", part.clone());
                if let Some(name) = part["functionCall"]["name"].as_str() {
                    let base = ids.get(n).and_then(Value::as_str).unwrap_or("").to_owned();
                    let call_ids = groups
                        .iter()
                        .find(|(g, _)| *g == base)
                        .map_or_else(|| vec![base.clone()], |(_, ids)| ids.clone());
                    pending.push(Pending {
                        name: name.to_owned(),
                        wire_id: wire_id(&part["functionCall"]),
                        ids: call_ids,
                    });
                    n += 1;
                }
            }
        }
        None => {
            // Another adapter's turn: told as text (its calls are not
            // Gemini function calls); the results follow as text.
            let mut text = turn.text.clone().unwrap_or_default();
            for call in &turn.calls {
                if call.id == stream::TEXT_ANSWER_ID {
                    continue;
                }
                if !text.is_empty() {
                    text.push('\n');
                }
                let action = serde_json::to_string(&call.action).unwrap_or_default();
                text.push_str(&format!("[action {}] {action}", call.id));
            }
            if !text.is_empty() {
                push_part(contents, "model", json!({"text": text}));
            }
        }
    }
}

/// Answers the pending calls with function responses. `shot` is the
/// screenshot that follows them (image part, or its marker when
/// compressed), attached to the last response. Returns whether it was used.
pub(super) fn answer(
    contents: &mut Vec<Value>,
    pending: &mut Vec<Pending>,
    results: &mut Vec<ToolResult>,
    shot: Option<(Option<Value>, String)>,
    url: Option<&str>,
) -> bool {
    if pending.is_empty() && results.is_empty() {
        return false;
    }
    let taken = std::mem::take(results);
    let refs: Vec<&ToolResult> = taken.iter().collect();
    let calls = std::mem::take(pending);
    let count = calls.len();
    let mut used = false;
    for (i, call) in calls.iter().enumerate() {
        let a = prompt::answer_for(&call.ids, &refs);
        let mut response = Map::new();
        if let Some(url) = url {
            response.insert("url".into(), json!(url));
        }
        if a.ok {
            response.insert("result".into(), json!(a.text));
        } else {
            response.insert("error".into(), json!(a.text));
        }
        if !a.acknowledged.is_empty() {
            response.insert("safety_acknowledgement".into(), json!("true"));
        }
        let mut fr = json!({"name": call.name, "response": response});
        if let Some(id) = &call.wire_id {
            fr["id"] = json!(id);
        }
        if i + 1 == count
            && let Some((image, marker)) = &shot
        {
            used = true;
            match image {
                Some(part) => fr["parts"] = json!([part]),
                None => fr["response"]["screenshot"] = json!(marker),
            }
        }
        push_part(contents, "user", json!({"functionResponse": fr}));
    }
    let answered: Vec<&String> = calls.iter().flat_map(|c| c.ids.iter()).collect();
    for r in &taken {
        if answered.contains(&&r.call_id) {
            continue;
        }
        let status = match (&r.error, r.ok) {
            (_, true) => "ok".to_owned(),
            (Some(e), false) => format!("error: {e}"),
            (None, false) => "error".to_owned(),
        };
        let mut text = format!("Result of `{}` ({}): {status}", r.action, r.call_id);
        for h in &r.hints {
            text.push_str(&format!("\nhint: {h}"));
        }
        push_part(contents, "user", json!({"text": text}));
    }
    used
}

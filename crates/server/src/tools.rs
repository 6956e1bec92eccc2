//! `GET /v1/tools`: the action vocabulary as JSON Schema (one `oneOf`
//! branch per `lumen_core::Action` type, with its `type` tag). A test checks
//! that an example of every branch decodes as an `Action`.

use serde_json::{Value, json};

/// `(type tag, description, properties, required)` of every action.
fn actions() -> Vec<(&'static str, &'static str, Value, Vec<&'static str>)> {
    let int = json!({"type": "integer"});
    let modifiers = json!({"type": "object", "properties": {
        "alt": {"type": "boolean"}, "ctrl": {"type": "boolean"},
        "meta": {"type": "boolean"}, "shift": {"type": "boolean"}
    }});
    let button = json!({"type": "string", "enum": ["left", "right", "middle"]});
    let keys = json!({"type": "array", "items": {"type": "string"}, "minItems": 1});
    vec![
        (
            "click",
            "Press and release a mouse button at a viewport point (CSS pixels).",
            json!({"x": int, "y": int, "button": button, "modifiers": modifiers}),
            vec!["x", "y"],
        ),
        (
            "doubleClick",
            "Double-click at a point.",
            json!({"x": int, "y": int, "modifiers": modifiers}),
            vec!["x", "y"],
        ),
        (
            "tripleClick",
            "Triple-click at a point (selects a line or field).",
            json!({"x": int, "y": int, "modifiers": modifiers}),
            vec!["x", "y"],
        ),
        (
            "drag",
            "Press at the start, move (through `path`), release at the end.",
            json!({"startX": int, "startY": int, "endX": int, "endY": int,
                   "path": {"type": "array", "items": {"type": "object", "properties": {"x": int, "y": int}}}}),
            vec!["startX", "startY", "endX", "endY"],
        ),
        (
            "hover",
            "Move the pointer to a point.",
            json!({"x": int, "y": int}),
            vec!["x", "y"],
        ),
        (
            "mouseDown",
            "Press a mouse button (at a point, or where the pointer is).",
            json!({"x": int, "y": int, "button": button}),
            vec![],
        ),
        (
            "mouseUp",
            "Release a mouse button.",
            json!({"x": int, "y": int, "button": button}),
            vec![],
        ),
        (
            "scroll",
            "Scroll at a point by an amount in pixels, wheel clicks (100 px) or pages (87.5 % of the viewport).",
            json!({"x": int, "y": int,
                   "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                   "amount": {"type": "number"},
                   "unit": {"type": "string", "enum": ["pixels", "clicks", "pages"]},
                   "modifiers": modifiers}),
            vec!["x", "y", "direction", "amount"],
        ),
        (
            "type",
            "Type text into the focused element (`<secret:NAME>` placeholders are filled in).",
            json!({"text": {"type": "string"}}),
            vec!["text"],
        ),
        (
            "keyPress",
            "Press a key chord, e.g. [\"ctrl\", \"a\"].",
            json!({"keys": keys}),
            vec!["keys"],
        ),
        (
            "holdKey",
            "Hold a key chord down for a while.",
            json!({"keys": keys, "durationMs": int}),
            vec!["keys", "durationMs"],
        ),
        (
            "wait",
            "Do nothing for a while.",
            json!({"ms": int}),
            vec!["ms"],
        ),
        (
            "goto",
            "Open a URL.",
            json!({"url": {"type": "string"}}),
            vec!["url"],
        ),
        ("back", "Go back in history.", json!({}), vec![]),
        ("forward", "Go forward in history.", json!({}), vec![]),
        ("screenshot", "Take a fresh screenshot.", json!({}), vec![]),
        (
            "cursorPosition",
            "Report the pointer position.",
            json!({}),
            vec![],
        ),
        (
            "zoom",
            "Look closer at a region of the viewport.",
            json!({"region": {"type": "object", "properties": {"x0": int, "y0": int, "x1": int, "y1": int},
                              "required": ["x0", "y0", "x1", "y1"]}}),
            vec!["region"],
        ),
        (
            "writeState",
            "Replace the task state (a JSON object kept across steps).",
            json!({"data": {"type": "object"}}),
            vec!["data"],
        ),
        (
            "terminate",
            "End the task with success or failure and a result.",
            json!({"status": {"type": "string", "enum": ["success", "failure"]}, "result": {"type": "string"}}),
            vec!["status", "result"],
        ),
        (
            "delegate",
            "Run a sub-task in a child loop on the same tab.",
            json!({"instruction": {"type": "string"}, "maxSteps": int}),
            vec!["instruction"],
        ),
        (
            "fold",
            "Summarise the finished sub-goal so older history can be dropped.",
            json!({"summary": {"type": "string"}}),
            vec!["summary"],
        ),
    ]
}

/// The document: `{"actions": <JSON Schema>}`.
pub(crate) fn document() -> Value {
    let branches: Vec<Value> = actions()
        .into_iter()
        .map(|(tag, description, props, required)| {
            let mut properties = props.as_object().cloned().unwrap_or_default();
            properties.insert("type".into(), json!({"const": tag}));
            let mut required: Vec<&str> = required;
            required.insert(0, "type");
            json!({
                "title": tag,
                "description": description,
                "type": "object",
                "properties": properties,
                "required": required,
            })
        })
        .collect();
    json!({
        "actions": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Action",
            "description": "One thing the agent does; coordinates are integer CSS pixels of the viewport.",
            "oneOf": branches,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal value of a schema type.
    fn example(schema: &Value) -> Value {
        if let Some(e) = schema.get("enum") {
            return e[0].clone();
        }
        if let Some(c) = schema.get("const") {
            return c.clone();
        }
        match schema["type"].as_str() {
            Some("integer") => json!(3),
            Some("number") => json!(2.5),
            Some("string") => json!("x"),
            Some("boolean") => json!(true),
            Some("array") => json!([example(&schema["items"])]),
            _ => {
                let mut o = serde_json::Map::new();
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for (k, v) in props {
                        o.insert(k.clone(), example(v));
                    }
                }
                Value::Object(o)
            }
        }
    }

    #[test]
    fn every_branch_decodes_as_an_action_with_all_fields() {
        let doc = document();
        let branches = doc["actions"]["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), 22);
        for b in branches {
            let value = example(b);
            let action: lumen::Action =
                serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{value}: {e}"));
            assert!(
                !matches!(action, lumen::Action::Invalid { .. }),
                "{value} decoded as invalid"
            );
            // Every documented field survives a round trip (nothing is
            // silently ignored because of a misspelt name).
            let back = serde_json::to_value(&action).unwrap();
            for k in b["required"].as_array().unwrap() {
                assert!(back.get(k.as_str().unwrap()).is_some(), "{value}: {k} lost");
            }
        }
    }
}

//! `GET /v1/tools`: the action vocabulary as JSON Schema, rendered from
//! [`lumen_core::action_schema::CATALOGUE`] (one `oneOf` branch per
//! `lumen_core::Action` type, with its `type` tag). A test checks that an
//! example of every branch decodes as an `Action`.

use lumen::core::action_schema::{ActionSchema, CATALOGUE, FieldKind};
use serde_json::{Value, json};

/// One branch: the action's fields in `Action`'s own form, each with its
/// note, plus the `type` tag.
fn branch(action: &ActionSchema) -> Value {
    let mut schema = action.json_schema();
    for field in action.fields {
        if !field.description.is_empty() && field.kind != FieldKind::Coordinate {
            schema["properties"][field.name]["description"] = json!(field.description);
        }
    }
    schema["properties"]["type"] = json!({"const": action.tag});
    let mut required = vec![json!("type")];
    required.extend(schema["required"].as_array().cloned().unwrap_or_default());
    json!({
        "title": action.tag,
        "description": action.description,
        "type": "object",
        "properties": schema["properties"],
        "required": required,
    })
}

/// The document: `{"actions": <JSON Schema>}`.
pub(crate) fn document() -> Value {
    let branches: Vec<Value> = CATALOGUE.iter().map(branch).collect();
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
        assert_eq!(branches.len(), lumen::core::action_schema::CATALOGUE.len());
        assert_eq!(branches.len(), 30);
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

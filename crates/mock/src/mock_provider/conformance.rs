//! "Would the real API accept this request?", checked on every request the
//! mock provider receives.
//!
//! The shapes come from the providers' official SDKs, pinned (anthropic
//! 2.12.0, openai 3.57.0, google-genai 3.6.1): `sdk/extract_schemas.py`
//! turns their request types into the JSON Schemas under `sdk/schemas/`,
//! embedded here. Unknown fields, missing required fields, wrong types and
//! enum values outside the SDK's are violations, reported with the JSON path
//! of the offending value. Rules the types cannot express (adaptive-only
//! thinking, no temperature, image limits) need the model registry, which
//! lives above this crate: callers add them with
//! [`MockProvider::add_check`](super::MockProvider::add_check).
//!
//! The validator covers the JSON Schema subset the extractor emits (listed
//! in `sdk/schemas/keywords.json`): `type`, `properties`, `required`,
//! `additionalProperties`, `items`, `enum`, `const`, `anyOf` and local
//! `$ref`s. `format` is not checked.

use std::sync::OnceLock;

use serde_json::Value;

use super::Route;

/// A check run on each request body: returns the violations (empty when
/// the body is accepted).
pub type Check = dyn Fn(Route, &Value) -> Vec<String> + Send + Sync;

const ANTHROPIC: &str = include_str!("../../sdk/schemas/anthropic-messages.json");
const OPENAI_RESPONSES: &str = include_str!("../../sdk/schemas/openai-responses.json");
const OPENAI_CHAT: &str = include_str!("../../sdk/schemas/openai-chat.json");
const GEMINI: &str = include_str!("../../sdk/schemas/google-generate-content.json");

/// How deep a value may nest before the validator stops (a guard against
/// pathological bodies; real requests nest a dozen levels).
const MAX_DEPTH: usize = 64;

/// The schema of a route's request body, parsed once.
fn schema(route: Route) -> Option<&'static Value> {
    static SCHEMAS: OnceLock<[Option<Value>; 4]> = OnceLock::new();
    let all = SCHEMAS.get_or_init(|| {
        [ANTHROPIC, OPENAI_RESPONSES, OPENAI_CHAT, GEMINI].map(|s| serde_json::from_str(s).ok())
    });
    let index = match route {
        Route::AnthropicMessages => 0,
        Route::OpenAiResponses => 1,
        Route::ChatCompletions => 2,
        Route::Gemini => 3,
    };
    all[index].as_ref()
}

/// Where the SDK types come from, for messages.
fn sdk(route: Route) -> &'static str {
    match route {
        Route::AnthropicMessages => "anthropic 2.15.0",
        Route::OpenAiResponses | Route::ChatCompletions => "openai 3.57.0",
        Route::Gemini => "google-genai 3.6.1",
    }
}

/// The violations of `body` against the official SDK's request type for
/// `route`, each naming the JSON path (`$.messages[2].content[0].type`).
pub fn schema_violations(route: Route, body: &Value) -> Vec<String> {
    let Some(root) = schema(route) else {
        return vec![format!("the embedded {} schema does not parse", sdk(route))];
    };
    let mut errors = Vec::new();
    Validator { root }.check(root, body, "$", 0, &mut errors);
    errors
        .into_iter()
        .map(|e| format!("{e} (per the {} request types)", sdk(route)))
        .collect()
}

struct Validator<'a> {
    root: &'a Value,
}

impl<'a> Validator<'a> {
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let name = reference.strip_prefix("#/$defs/")?;
        self.root.get("$defs")?.get(name)
    }

    fn check(
        &self,
        schema: &'a Value,
        value: &Value,
        path: &str,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        if depth > MAX_DEPTH {
            errors.push(format!("{path}: nested deeper than {MAX_DEPTH} levels"));
            return;
        }
        let Some(map) = schema.as_object() else {
            return;
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some(target) => self.check(target, value, path, depth + 1, errors),
                None => errors.push(format!("{path}: unknown schema reference {reference}")),
            }
        }
        if let Some(options) = map.get("anyOf").and_then(Value::as_array) {
            self.any_of(options, value, path, depth, errors);
        }
        if let Some(expected) = map.get("const")
            && value != expected
        {
            errors.push(format!("{path}: must be {expected}, not {}", brief(value)));
        }
        if let Some(allowed) = map.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            errors.push(format!(
                "{path}: {} is not one of {}",
                brief(value),
                Value::Array(allowed.clone())
            ));
        }
        if let Some(kind) = map.get("type").and_then(Value::as_str)
            && !has_type(value, kind)
        {
            errors.push(format!(
                "{path}: expected {kind}, found {}",
                type_name(value)
            ));
            return;
        }
        if let Value::Object(object) = value {
            self.object(map, object, path, depth, errors);
        }
        if let (Some(items), Value::Array(array)) = (map.get("items"), value) {
            for (i, item) in array.iter().enumerate() {
                self.check(items, item, &format!("{path}[{i}]"), depth + 1, errors);
            }
        }
    }

    fn object(
        &self,
        schema: &'a serde_json::Map<String, Value>,
        object: &serde_json::Map<String, Value>,
        path: &str,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for key in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(key) {
                    errors.push(format!("{path}: missing the required field `{key}`"));
                }
            }
        }
        for (key, item) in object {
            let at = format!("{path}.{key}");
            match properties.and_then(|p| p.get(key)) {
                Some(sub) => self.check(sub, item, &at, depth + 1, errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        errors.push(format!("{at}: unknown field `{key}`"));
                    }
                    Some(extra @ Value::Object(_)) => {
                        self.check(extra, item, &at, depth + 1, errors);
                    }
                    _ => {}
                },
            }
        }
    }

    /// A value matches `anyOf` when one option accepts it. Otherwise the
    /// errors of the closest option are reported: among the options whose
    /// `type` and `type` discriminator (`{"type": {"const": …}}`) fit the
    /// value, the one with the fewest errors.
    fn any_of(
        &self,
        options: &'a [Value],
        value: &Value,
        path: &str,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        let mut best: Option<(bool, Vec<String>)> = None;
        for option in options {
            let mut found = Vec::new();
            self.check(option, value, path, depth + 1, &mut found);
            if found.is_empty() {
                return;
            }
            let fits = self.fits(option, value, depth);
            let better = match &best {
                None => true,
                Some((best_fits, b)) => {
                    (fits, std::cmp::Reverse(found.len()))
                        > (*best_fits, std::cmp::Reverse(b.len()))
                }
            };
            if better {
                best = Some((fits, found));
            }
        }
        match best {
            Some((true, found)) => errors.extend(found),
            Some((false, found)) if found.len() <= 3 => errors.extend(found),
            Some((false, found)) => errors.push(format!(
                "{path}: {} matches none of the {} allowed shapes (closest: {})",
                brief(value),
                options.len(),
                found[..3].join("; ")
            )),
            None => {}
        }
    }

    /// Whether `value` has the option's JSON type and, for objects, its
    /// `type` discriminator.
    fn fits(&self, option: &'a Value, value: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let Some(map) = option.as_object() else {
            return true;
        };
        if let Some(target) = map
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            return self.fits(target, value, depth + 1);
        }
        if let Some(kind) = map.get("type").and_then(Value::as_str)
            && !has_type(value, kind)
        {
            return false;
        }
        let tag = map
            .get("properties")
            .and_then(|p| p.get("type"))
            .and_then(|t| t.get("const"));
        match (tag, value.get("type")) {
            (Some(expected), Some(actual)) => expected == actual,
            _ => true,
        }
    }
}

fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => true,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value for a message: short values whole, long ones cut.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 60 {
        return text;
    }
    let mut end = 57;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_embedded_schema_parses() {
        for route in [
            Route::AnthropicMessages,
            Route::OpenAiResponses,
            Route::ChatCompletions,
            Route::Gemini,
        ] {
            assert!(schema(route).is_some(), "{route:?}");
        }
    }

    #[test]
    fn a_valid_anthropic_body_passes_and_each_kind_of_mistake_is_named() {
        let valid = json!({
            "model": "claude-opus-4-7",
            "max_tokens": 1024,
            "thinking": {"type": "adaptive"},
            "output_config": {"effort": "high"},
            "tools": [{"type": "computer_20251124", "name": "computer",
                       "display_width_px": 1280, "display_height_px": 720, "enable_zoom": true}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ]}],
            "stream": true,
        });
        assert_eq!(
            schema_violations(Route::AnthropicMessages, &valid),
            Vec::<String>::new()
        );

        let mut unknown = valid.clone();
        unknown["temprature"] = json!(0.5);
        let errors = schema_violations(Route::AnthropicMessages, &unknown);
        assert!(
            errors[0].contains("$.temprature: unknown field"),
            "{errors:?}"
        );

        let mut missing = valid.clone();
        missing.as_object_mut().unwrap().remove("max_tokens");
        let errors = schema_violations(Route::AnthropicMessages, &missing);
        assert!(
            errors[0].contains("missing the required field `max_tokens`"),
            "{errors:?}"
        );

        let mut budget = valid.clone();
        budget["thinking"] = json!({"type": "adaptive", "budget_tokens": 2048});
        assert!(!schema_violations(Route::AnthropicMessages, &budget).is_empty());

        let mut wrong_enum = valid;
        wrong_enum["output_config"]["effort"] = json!("extreme");
        assert!(!schema_violations(Route::AnthropicMessages, &wrong_enum).is_empty());
    }

    #[test]
    fn gemini_refuses_snake_case_and_lower_case_environments() {
        let valid = json!({
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}],
            "generationConfig": {"maxOutputTokens": 8192, "temperature": 1.0},
        });
        assert_eq!(
            schema_violations(Route::Gemini, &valid),
            Vec::<String>::new()
        );
        let mut snake = valid.clone();
        snake["generation_config"] = json!({});
        assert!(!schema_violations(Route::Gemini, &snake).is_empty());
        let mut env = valid;
        env["tools"][0]["computerUse"]["environment"] = json!("BROWSER");
        assert!(!schema_violations(Route::Gemini, &env).is_empty());
    }

    #[test]
    fn depth_is_bounded() {
        let mut deep = json!("x");
        for _ in 0..200 {
            deep = json!([deep]);
        }
        let body = json!({"contents": deep});
        // No stack overflow, and an error.
        assert!(!schema_violations(Route::Gemini, &body).is_empty());
    }
}

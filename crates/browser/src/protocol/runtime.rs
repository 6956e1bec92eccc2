//! `Runtime.evaluate`: evaluating an expression in the page and reading
//! back its value or its exception.

use lumen_core::{LumenError, Result, Size};
use serde_json::json;

use super::Command;

/// The page's layout viewport, CSS pixels, as an expression for
/// [`viewport_size`].
pub(crate) const VIEWPORT: &str = "[innerWidth, innerHeight]";

/// Evaluates `expression` in the page's main world, awaiting a promise and
/// returning the value itself (not a remote object).
pub(crate) fn evaluate(expression: &str) -> Command {
    (
        "Runtime.evaluate",
        json!({
            "expression": expression,
            "returnByValue": true,
            "awaitPromise": true,
        }),
    )
}

/// Extracts a `Runtime.evaluate` (or `Runtime.callFunctionOn`) answer's
/// value, or its exception.
///
/// # Errors
/// [`LumenError::Script`] with the exception's description when the script
/// threw.
pub(crate) fn script_value(r: serde_json::Value) -> Result<serde_json::Value> {
    if let Some(ex) = r.get("exceptionDetails") {
        let message = ex["exception"]["description"]
            .as_str()
            .or_else(|| ex["text"].as_str())
            .unwrap_or("the script threw")
            .to_owned();
        return Err(LumenError::Script { message });
    }
    Ok(r["result"]
        .get("value")
        .cloned()
        .unwrap_or(serde_json::Value::Null))
}

/// Reads the value of [`VIEWPORT`].
pub(crate) fn viewport_size(v: &serde_json::Value) -> Size {
    let dim = |i: usize| {
        v[i].as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0)
    };
    Size::new(dim(0), dim(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_exceptions_become_script_errors() {
        let r = json!({
            "result": {"type": "object"},
            "exceptionDetails": {"text": "Uncaught", "exception": {"description": "Error: boom"}}
        });
        match script_value(r) {
            Err(LumenError::Script { message }) => assert_eq!(message, "Error: boom"),
            other => panic!("{other:?}"),
        }
        let ok = json!({"result": {"type": "number", "value": 3}});
        assert_eq!(script_value(ok).ok(), Some(json!(3)));
        assert_eq!(viewport_size(&json!([1280, 720])), Size::new(1280, 720));
    }
}

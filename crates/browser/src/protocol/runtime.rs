//! `Runtime.evaluate`: evaluating an expression in the page and reading
//! back its value or its exception.

use lumen_core::{LumenError, Result, Size};
use serde_json::json;

use super::Command;
use crate::limits::MAX_EVALUATE_RESULT_BYTES;

/// The page's layout viewport, CSS pixels, as an expression for
/// [`viewport_size`].
pub(crate) const VIEWPORT: &str = "[innerWidth, innerHeight]";

/// Evaluates `expression` in the page's main world, awaiting a promise and
/// returning the value itself (not a remote object), measured in the page
/// first: a value over [`MAX_EVALUATE_RESULT_BYTES`] never crosses the
/// socket. Read the answer with [`guarded_value`].
///
/// The expression is wrapped in a function, so it must be an expression;
/// a script of statements does not compile there ([`Guarded::NotAnExpression`]),
/// and is run as it is with [`evaluate_plain`].
pub(crate) fn evaluate(expression: &str) -> Command {
    (
        "Runtime.evaluate",
        json!({
            "expression": guarded(expression),
            "returnByValue": true,
            "awaitPromise": true,
        }),
    )
}

/// Evaluates `expression` as it is (a script of statements, whose value is
/// its completion value). Its value crosses the socket whole; read it with
/// [`plain_value`], which still refuses one over the cap.
pub(crate) fn evaluate_plain(expression: &str) -> Command {
    (
        "Runtime.evaluate",
        json!({
            "expression": expression,
            "returnByValue": true,
            "awaitPromise": true,
        }),
    )
}

/// `expression` in a function that measures its value (a string by its
/// length, anything else as JSON) and returns `{v: value}`, `{over:
/// size}`, or `{threw: description}` when the expression threw (so an
/// exception of the evaluation itself can only mean the wrapped script did
/// not compile). A promise is awaited, as `awaitPromise` does.
fn guarded(expression: &str) -> String {
    format!(
        "(async () => {{\n\
         let value;\n\
         try {{\n\
         const raw = (\n{expression}\n);\n\
         value = raw instanceof Promise ? await raw : raw;\n\
         }} catch (e) {{\n\
         return {{ threw: e instanceof Error && e.stack ? String(e.stack) : String(e) }};\n\
         }}\n\
         let size = 0;\n\
         try {{ size = typeof value === 'string' ? value.length + 2 \
         : (JSON.stringify(value) || '').length; }} catch (_) {{}}\n\
         return size > {MAX_EVALUATE_RESULT_BYTES} ? {{ over: size }} : {{ v: value }};\n\
         }})()"
    )
}

/// What a guarded evaluation answered.
#[derive(Debug)]
pub(crate) enum Guarded {
    /// The value.
    Value(serde_json::Value),
    /// The expression does not compile inside the guard: it is a script of
    /// statements (or not JavaScript at all). Run it as it is with
    /// [`evaluate_plain`].
    NotAnExpression,
}

/// Reads the answer to [`evaluate`].
///
/// # Errors
/// [`LumenError::Script`] when the script threw, or when its value is over
/// [`MAX_EVALUATE_RESULT_BYTES`] (naming the cap).
pub(crate) fn guarded_value(r: serde_json::Value) -> Result<Guarded> {
    let syntax = r["exceptionDetails"]["exception"]["className"] == "SyntaxError";
    let mut v = match script_value(r) {
        Err(_) if syntax => return Ok(Guarded::NotAnExpression),
        other => other?,
    };
    if let Some(size) = v.get("over").and_then(serde_json::Value::as_u64) {
        return Err(over_cap(size as usize));
    }
    if let Some(threw) = v.get("threw") {
        return Err(LumenError::Script {
            message: threw.as_str().unwrap_or("the script threw").to_owned(),
        });
    }
    Ok(Guarded::Value(
        v.get_mut("v")
            .map_or(serde_json::Value::Null, serde_json::Value::take),
    ))
}

/// Reads the answer to [`evaluate_plain`], refusing a value over the cap
/// (measured here: it already crossed the socket).
///
/// # Errors
/// As [`guarded_value`].
pub(crate) fn plain_value(r: serde_json::Value) -> Result<serde_json::Value> {
    let v = script_value(r)?;
    match json_size_over(&v, MAX_EVALUATE_RESULT_BYTES) {
        Some(size) => Err(over_cap(size)),
        None => Ok(v),
    }
}

fn over_cap(size: usize) -> LumenError {
    LumenError::Script {
        message: format!(
            "the script's value is {size} characters of JSON, over the {} cap on an \
             evaluation's value (MAX_EVALUATE_RESULT_BYTES); return less (a slice, a count, \
             or the part you need)",
            crate::limits::size(MAX_EVALUATE_RESULT_BYTES)
        ),
    }
}

/// The size of `value` as JSON when it is over `cap` (counting stops past
/// the cap); `None` when it fits. Nothing is allocated.
fn json_size_over(value: &serde_json::Value, cap: usize) -> Option<usize> {
    struct Count(usize, usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            if self.0 > self.1 {
                return Err(std::io::Error::other("over the cap"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0, cap);
    serde_json::to_writer(&mut count, value)
        .err()
        .map(|_| count.0)
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

    #[test]
    fn guarded_answers_are_read() {
        let ok = json!({"result": {"type": "object", "value": {"v": [1, 2]}}});
        assert!(matches!(guarded_value(ok), Ok(Guarded::Value(v)) if v == json!([1, 2])));
        let undefined = json!({"result": {"type": "object", "value": {}}});
        assert!(matches!(
            guarded_value(undefined),
            Ok(Guarded::Value(serde_json::Value::Null))
        ));
        let over = json!({"result": {"type": "object", "value": {"over": 5_000_000}}});
        let Err(LumenError::Script { message }) = guarded_value(over) else {
            panic!("expected an error");
        };
        assert!(message.contains("5000000 characters"), "{message}");
        assert!(message.contains("MAX_EVALUATE_RESULT_BYTES"), "{message}");
        assert!(message.contains("4 MiB"), "{message}");
        let syntax = json!({"result": {"type": "object"}, "exceptionDetails": {"text": "Uncaught",
            "exception": {"className": "SyntaxError", "description": "SyntaxError: Unexpected token"}}});
        assert!(matches!(
            guarded_value(syntax),
            Ok(Guarded::NotAnExpression)
        ));
        let threw = json!({"result": {"type": "object", "value": {"threw": "Error: boom"}}});
        assert!(
            matches!(guarded_value(threw), Err(LumenError::Script { message }) if message == "Error: boom")
        );
        let big =
            json!({"result": {"type": "string", "value": "x".repeat(MAX_EVALUATE_RESULT_BYTES)}});
        assert!(plain_value(big).is_err());
        assert!(guarded("document.title").contains("\ndocument.title\n"));
    }
}

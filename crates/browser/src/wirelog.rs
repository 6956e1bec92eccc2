//! CDP traffic at the `lumen::cdp` log surface (`LUMEN_LOG_CDP`):
//! commands, responses and events as they cross the wire, for both
//! transports (our own [`Wire`](crate::ws); chromiumoxide's connection
//! through [`Conn`](crate::cdp)'s raw calls and the page events the
//! tracker subscribes to).
//!
//! Payloads are cut to [`MAX_SHOWN`] characters (a screenshot is a few
//! megabytes of base64). What can carry a secret or the page's private
//! data is never shown, only its length:
//! - the text of input commands (typed text, key values: a secret typed
//!   into a field goes through them);
//! - the string arguments of `Runtime.callFunctionOn` (the value `lumen
//!   browser fill` sets) and the values scripts answer with
//!   (`Runtime.evaluate`, `Runtime.callFunctionOn`: field values, storage);
//! - cookie values, set or read;
//! - an expression marked [`UNLOGGED`] (a storage restore).
//!
//! Nothing is formatted unless the surface is on.

use std::time::Duration;

use lumen_core::logs::CDP;
use serde_json::Value;

/// The most characters of a payload a line shows.
pub(crate) const MAX_SHOWN: usize = 300;

/// Starts an expression whose text must not be logged (it carries values,
/// e.g. restored storage): `Runtime.evaluate` shows only its length.
pub const UNLOGGED: &str = "/*lumen:unlogged*/";

/// Whether the surface is on (checked before formatting anything).
pub(crate) fn on() -> bool {
    tracing::enabled!(target: CDP, tracing::Level::DEBUG)
}

/// A command going out.
pub(crate) fn command(id: Option<u64>, method: &str, params: &Value) {
    if on() {
        tracing::debug!(target: CDP, id, method, params = %shown(method, params), "→ command");
    }
}

/// The answer to a command.
pub(crate) fn response(
    id: Option<u64>,
    method: &str,
    result: std::result::Result<&Value, &str>,
    took: Option<Duration>,
) {
    if !on() {
        return;
    }
    let ms = took.map(|d| d.as_millis() as u64);
    match result {
        Ok(v) => {
            let shown = cut(&private_result(method, v).unwrap_or_else(|| v.to_string()));
            tracing::debug!(target: CDP, id, method, ms, result = %shown, "← response")
        }
        Err(e) => tracing::debug!(target: CDP, id, method, ms, error = %cut(e), "← error"),
    }
}

/// An event from the browser.
pub(crate) fn event(method: &str, params: &Value) {
    if on() {
        tracing::debug!(target: CDP, method, params = %shown(method, params), "← event");
    }
}

/// `<N chars>` for a string, the length of its JSON for anything else.
fn elided(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(format!("<{} chars>", s.chars().count())),
        Value::Null | Value::Bool(_) | Value::Number(_) => v.clone(),
        other => Value::String(format!("<{} bytes>", other.to_string().len())),
    }
}

/// Every cookie's `value` in `cookies` elided.
fn elide_cookies(cookies: Option<&mut Value>) {
    for c in cookies.and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(v) = c.get_mut("value") {
            *v = elided(v);
        }
    }
}

/// A result that can carry private data, as logged; `None` for the rest.
fn private_result(method: &str, result: &Value) -> Option<String> {
    let mut r = result.clone();
    match method {
        "Runtime.evaluate" | "Runtime.callFunctionOn" => {
            let value = r.get_mut("result")?.get_mut("value")?;
            *value = elided(value);
        }
        "Network.getCookies" | "Network.getAllCookies" | "Storage.getCookies" => {
            elide_cookies(r.get_mut("cookies"));
        }
        _ => return None,
    }
    Some(r.to_string())
}

/// The parameters as logged: private values elided, the rest cut.
pub(crate) fn shown(method: &str, params: &Value) -> String {
    match method {
        "Runtime.callFunctionOn" => {
            let mut p = params.clone();
            for a in p
                .get_mut("arguments")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(v) = a.get_mut("value") {
                    *v = elided(v);
                }
            }
            return cut(&p.to_string());
        }
        "Network.setCookies" | "Storage.setCookies" => {
            let mut p = params.clone();
            elide_cookies(p.get_mut("cookies"));
            return cut(&p.to_string());
        }
        "Runtime.evaluate"
            if params["expression"]
                .as_str()
                .is_some_and(|e| e.starts_with(UNLOGGED)) =>
        {
            let mut p = params.clone();
            p["expression"] = elided(&p["expression"]);
            return cut(&p.to_string());
        }
        _ => {}
    }
    if method.starts_with("Input.") {
        let mut p = params.clone();
        if let Some(map) = p.as_object_mut() {
            for key in ["text", "unmodifiedText", "key", "code", "keyIdentifier"] {
                if let Some(v) = map.get_mut(key)
                    && let Some(s) = v.as_str()
                {
                    *v = Value::String(format!("<{} chars>", s.chars().count()));
                }
            }
            // The key codes spell the text out too.
            map.remove("windowsVirtualKeyCode");
            map.remove("nativeVirtualKeyCode");
        }
        return cut(&p.to_string());
    }
    cut(&params.to_string())
}

/// `text` cut to [`MAX_SHOWN`] characters, saying how long it was.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_SHOWN) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn typed_text_is_elided_and_big_payloads_cut() {
        let typed = shown("Input.insertText", &json!({"text": "hunter2"}));
        assert!(!typed.contains("hunter2"), "{typed}");
        assert!(typed.contains("<7 chars>"), "{typed}");
        let key = shown(
            "Input.dispatchKeyEvent",
            &json!({"type": "keyDown", "key": "h", "text": "h", "code": "KeyH",
                    "windowsVirtualKeyCode": 72}),
        );
        assert!(
            !key.contains("\"h\"") && !key.contains("72") && !key.contains("KeyH"),
            "{key}"
        );
        assert!(key.contains("keyDown"), "{key}");
        let big = shown(
            "Page.captureScreenshot",
            &json!({"data": "A".repeat(100_000)}),
        );
        assert!(big.len() < MAX_SHOWN + 40, "{}", big.len());
        assert!(big.ends_with("bytes)"), "{big}");
        let nav = shown("Page.navigate", &json!({"url": "http://127.0.0.1/"}));
        assert_eq!(nav, r#"{"url":"http://127.0.0.1/"}"#);
    }

    #[test]
    fn fill_values_cookies_storage_and_script_answers_are_elided() {
        let fill = shown(
            "Runtime.callFunctionOn",
            &json!({"functionDeclaration": "function(m, v) {}", "arguments": [{"value": 7}, {"value": "hunter2"}]}),
        );
        assert!(
            !fill.contains("hunter2") && fill.contains("<7 chars>"),
            "{fill}"
        );
        assert!(
            fill.contains("function(m, v)"),
            "the function is shown: {fill}"
        );
        let set = shown(
            "Network.setCookies",
            &json!({"cookies": [{"name": "sid", "value": "s3cr3t-cookie", "domain": "a.test"}]}),
        );
        assert!(!set.contains("s3cr3t") && set.contains("sid"), "{set}");
        let restore = shown(
            "Runtime.evaluate",
            &json!({"expression": format!("{UNLOGGED}localStorage.setItem('t', 'tok-123')")}),
        );
        assert!(!restore.contains("tok-123"), "{restore}");
        let plain = shown("Runtime.evaluate", &json!({"expression": "location.href"}));
        assert!(plain.contains("location.href"), "{plain}");
        let read = private_result(
            "Network.getAllCookies",
            &json!({"cookies": [{"name": "sid", "value": "s3cr3t-cookie"}]}),
        )
        .unwrap();
        assert!(!read.contains("s3cr3t") && read.contains("sid"), "{read}");
        let answer = private_result(
            "Runtime.evaluate",
            &json!({"result": {"type": "string", "value": "the page's text"}}),
        )
        .unwrap();
        assert!(
            !answer.contains("page's text") && answer.contains("\"type\":\"string\""),
            "{answer}"
        );
        assert_eq!(
            private_result("Page.navigate", &json!({"frameId": "F"})),
            None
        );
    }
}

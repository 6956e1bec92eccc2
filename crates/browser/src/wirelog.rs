//! CDP traffic at the `lumen::cdp` log surface (`LUMEN_LOG_CDP`):
//! commands, responses and events as they cross the wire, for both
//! transports (our own [`Wire`](crate::ws); chromiumoxide's connection
//! through [`Conn`](crate::cdp)'s raw calls and the page events the
//! tracker subscribes to).
//!
//! Payloads are cut to [`MAX_SHOWN`] characters (a screenshot is a few
//! megabytes of base64), and the text of input commands (typed text, key
//! values: a secret typed into a field goes through them) is never shown,
//! only its length. Nothing is formatted unless the surface is on.

use std::time::Duration;

use lumen_core::logs::CDP;
use serde_json::Value;

/// The most characters of a payload a line shows.
pub(crate) const MAX_SHOWN: usize = 300;

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
            tracing::debug!(target: CDP, id, method, ms, result = %cut(&v.to_string()), "← response")
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

/// The parameters as logged: input text elided, the rest cut.
pub(crate) fn shown(method: &str, params: &Value) -> String {
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
}

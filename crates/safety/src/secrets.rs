//! [`Secrets`]: values the model may use but never see.
//!
//! The model writes `<secret:NAME>` placeholders (in `type` text); the
//! router calls [`Secrets::substitute`] just before typing. Everything that
//! leaves the run — wire and semantic history, logs, traces, serialized
//! sessions, error messages — goes through [`Secrets::redact`] or
//! [`Secrets::redact_json`], which replace every value (also in its URL- and
//! form-encoded and JSON-escaped spellings, since a typed value can come
//! back in a URL) with its placeholder. `Debug` shows names only.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use lumen_core::{LumenError, Result};
use regex::Regex;
use serde::Serialize;

/// A `<secret:NAME>` placeholder.
static PLACEHOLDER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"<secret:([A-Za-z0-9_.\-]+)>").ok());

/// Why a placeholder could not be filled; the message is for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The text names a secret nobody registered.
    #[error("there is no secret named `{name}`; available: {available}")]
    Unknown {
        /// The name used.
        name: String,
        /// The placeholders that exist, comma-separated (or "none").
        available: String,
    },
}

#[derive(Clone)]
struct Entry {
    name: String,
    value: String,
}

/// Named secrets. Values are only ever given out by
/// [`substitute`](Self::substitute).
#[derive(Clone, Default)]
pub struct Secrets {
    entries: Vec<Entry>,
    /// (spelling of a value, placeholder), longest spelling first.
    redactions: Vec<(String, String)>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field(
                "names",
                &self.entries.iter().map(|e| &e.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// No secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// The placeholder the model writes for `name`.
    pub fn placeholder(name: &str) -> String {
        format!("<secret:{name}>")
    }

    /// Registers (or replaces) a secret. Names use letters, digits, `_`,
    /// `.` and `-`; values must not be empty.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) -> Result<()> {
        let name = name.into();
        let value = value.into();
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !valid {
            return Err(LumenError::config(
                "secrets",
                format!("`{name}` is not a valid secret name (letters, digits, `_`, `.`, `-`)"),
            ));
        }
        if value.is_empty() {
            // The name is safe to show; the (empty) value is not a secret.
            return Err(LumenError::config(
                "secrets",
                format!("the secret `{name}` is empty"),
            ));
        }
        self.entries.retain(|e| e.name != name);
        self.entries.push(Entry { name, value });
        self.rebuild();
        Ok(())
    }

    /// Builder form of [`insert`](Self::insert).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Result<Self> {
        self.insert(name, value)?;
        Ok(self)
    }

    fn rebuild(&mut self) {
        let mut out: Vec<(String, String)> = Vec::new();
        for e in &self.entries {
            let placeholder = Self::placeholder(&e.name);
            for spelling in spellings(&e.value) {
                if !out.iter().any(|(s, _)| *s == spelling) {
                    out.push((spelling, placeholder.clone()));
                }
            }
        }
        out.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        self.redactions = out;
    }

    /// Whether no secret is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The registered names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// The prompt line telling the model which placeholders exist, or `None`
    /// when there are none.
    pub fn prompt_block(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let list = self
            .names()
            .map(Self::placeholder)
            .collect::<Vec<_>>()
            .join(", ");
        Some(format!(
            "Secrets you can type without knowing them (write the placeholder exactly; it is filled in when typed): {list}"
        ))
    }

    /// Whether `text` holds a placeholder.
    pub fn has_placeholder(text: &str) -> bool {
        PLACEHOLDER.as_ref().is_some_and(|re| re.is_match(text))
    }

    /// Fills every placeholder in `text` with its value. Only the router
    /// calls this, right before typing; the result must never be stored.
    pub fn substitute(&self, text: &str) -> Result<String, SecretError> {
        let Some(re) = PLACEHOLDER.as_ref() else {
            return Ok(text.to_owned());
        };
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for caps in re.captures_iter(text) {
            let (Some(whole), Some(name)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            let Some(entry) = self.entries.iter().find(|e| e.name == name.as_str()) else {
                let available = if self.is_empty() {
                    "none".to_owned()
                } else {
                    self.names()
                        .map(Self::placeholder)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(SecretError::Unknown {
                    name: name.as_str().to_owned(),
                    available,
                });
            };
            out.push_str(&text[last..whole.start()]);
            out.push_str(&entry.value);
            last = whole.end();
        }
        out.push_str(&text[last..]);
        Ok(out)
    }

    /// Replaces every secret value in `text` with its placeholder.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self
            .redactions
            .iter()
            .any(|(s, _)| text.contains(s.as_str()))
        {
            return Cow::Borrowed(text);
        }
        // One pass, longest spelling first at each position, and existing
        // placeholders copied as they are: redacting twice changes nothing,
        // and a value that happens to occur inside a placeholder
        // (`secret`, `pass`) does not mangle it.
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        'scan: while let Some(c) = rest.chars().next() {
            if let Some(len) = placeholder_len(rest) {
                out.push_str(&rest[..len]);
                rest = &rest[len..];
                continue;
            }
            for (spelling, placeholder) in &self.redactions {
                if rest.starts_with(spelling.as_str()) {
                    out.push_str(placeholder);
                    rest = &rest[spelling.len()..];
                    continue 'scan;
                }
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        Cow::Owned(out)
    }

    /// Redacts every string (and object key) in a JSON value, in place.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Cow::Owned(r) = self.redact(s) {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (k, mut v) in old {
                    self.redact_json(&mut v);
                    map.insert(self.redact(&k).into_owned(), v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Serialises `value` to JSON with every secret redacted (for traces,
    /// events and saved sessions).
    pub fn redacted_json<T: Serialize + ?Sized>(&self, value: &T) -> Result<serde_json::Value> {
        let mut v = serde_json::to_value(value).map_err(|e| {
            LumenError::invalid_data("value to redact", format!("cannot serialise: {e}"))
        })?;
        self.redact_json(&mut v);
        Ok(v)
    }

    /// The names of secrets whose value (in any spelling) appears in `text`:
    /// empty when `text` is clean. For audits and tests.
    pub fn leaks(&self, text: &str) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| {
                spellings(&e.value)
                    .iter()
                    .any(|s| text.contains(s.as_str()))
            })
            .map(|e| e.name.as_str())
            .collect()
    }
}

/// The length of the `<secret:NAME>` placeholder `text` starts with, if it
/// starts with one.
fn placeholder_len(text: &str) -> Option<usize> {
    let body = text.strip_prefix("<secret:")?;
    let name_len = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || "_.-".contains(c)))
        .unwrap_or(body.len());
    (name_len > 0 && body[name_len..].starts_with('>')).then_some("<secret:".len() + name_len + 1)
}

/// The ways a value can be written back to us: as is, percent-encoded (URL
/// component), form-encoded (`+` for spaces) and JSON-escaped.
fn spellings(value: &str) -> Vec<String> {
    let mut out = vec![value.to_owned()];
    let mut push = |s: String| {
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    };
    push(percent_encode(value));
    push(url::form_urlencoded::byte_serialize(value.as_bytes()).collect());
    if let Ok(json) = serde_json::to_string(value) {
        push(json[1..json.len() - 1].to_owned());
    }
    out
}

/// Percent-encodes everything but the URL-unreserved characters, as
/// `encodeURIComponent` does (it also keeps `!'()*`).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumen_core::{Action, ActionCall, WireRecord};
    use serde_json::json;

    fn secrets() -> Secrets {
        Secrets::new()
            .with("password", "p@ss word\"!")
            .unwrap()
            .with("email", "alice@example.test")
            .unwrap()
    }

    #[test]
    fn placeholders_are_filled_only_on_substitution() {
        let s = secrets();
        assert_eq!(
            s.substitute("<secret:email> / <secret:password>").unwrap(),
            "alice@example.test / p@ss word\"!"
        );
        assert_eq!(s.substitute("no placeholders").unwrap(), "no placeholders");
        let err = s.substitute("<secret:pin>").unwrap_err();
        assert_eq!(
            err.to_string(),
            "there is no secret named `pin`; available: <secret:password>, <secret:email>"
        );
        assert!(Secrets::has_placeholder("x <secret:a.b-c_1> y"));
        assert!(!Secrets::has_placeholder("<secret:>"));
    }

    #[test]
    fn redaction_covers_raw_encoded_and_escaped_spellings() {
        let s = secrets();
        let table = [
            (
                "typed p@ss word\"! into the box",
                "typed <secret:password> into the box",
            ),
            (
                "https://a.test/login?pw=p%40ss%20word%22!&u=alice%40example.test",
                "https://a.test/login?pw=<secret:password>&u=<secret:email>",
            ),
            ("pw=p%40ss+word%22%21", "pw=<secret:password>"),
            (
                r#"{"text":"p@ss word\"!"}"#,
                r#"{"text":"<secret:password>"}"#,
            ),
            ("nothing here", "nothing here"),
        ];
        for (input, expected) in table {
            assert_eq!(s.redact(input), expected, "{input}");
            assert!(s.leaks(&s.redact(input)).is_empty(), "{input}");
        }
        assert!(matches!(s.redact("clean"), Cow::Borrowed(_)));
    }

    #[test]
    fn longer_values_are_redacted_before_their_substrings() {
        let s = Secrets::new()
            .with("short", "abc")
            .unwrap()
            .with("long", "abcdef")
            .unwrap();
        assert_eq!(s.redact("abcdef abc"), "<secret:long> <secret:short>");
    }

    #[test]
    fn redaction_is_idempotent_and_leaves_placeholders_intact() {
        let s = Secrets::new()
            .with("password", "secret")
            .unwrap()
            .with("pin", "pass")
            .unwrap();
        let once = s.redact("my secret pass, <secret:password> and <secret:pin>");
        assert_eq!(
            once,
            "my <secret:password> <secret:pin>, <secret:password> and <secret:pin>"
        );
        assert_eq!(s.redact(&once), once);
        // A value that starts right before a placeholder is still caught.
        assert_eq!(s.redact("pass<secret:pin>"), "<secret:pin><secret:pin>");
    }

    #[test]
    fn json_redaction_reaches_nested_strings_and_keys() {
        let s = secrets();
        let record = WireRecord::Assistant(lumen_core::AssistantTurn {
            calls: vec![ActionCall::new(
                "c1",
                Action::Type {
                    text: "alice@example.test".into(),
                },
            )],
            text: Some("I typed p@ss word\"! for you".into()),
            ..Default::default()
        });
        let v = s.redacted_json(&record).unwrap();
        let text = v.to_string();
        assert!(s.leaks(&text).is_empty(), "{text}");
        assert!(text.contains("<secret:email>"));
        let mut keyed = json!({"alice@example.test": [1, {"x": "p@ss word\"!"}]});
        s.redact_json(&mut keyed);
        assert_eq!(
            keyed,
            json!({"<secret:email>": [1, {"x": "<secret:password>"}]})
        );
    }

    #[test]
    fn debug_and_errors_never_show_values() {
        let s = secrets();
        let debug = format!("{s:?}");
        assert!(debug.contains("password") && debug.contains("email"));
        assert!(s.leaks(&debug).is_empty(), "{debug}");
        let err = Secrets::new().with("x", "").unwrap_err();
        assert_eq!(err.code(), lumen_core::ErrorCode::ConfigError);
        assert!(Secrets::new().with("bad name", "v").is_err());
        assert!(
            s.leaks(&s.substitute("<secret:nope>").unwrap_err().to_string())
                .is_empty()
        );
    }

    #[test]
    fn the_prompt_lists_placeholders_not_values() {
        let s = secrets();
        let block = s.prompt_block().unwrap();
        assert!(block.contains("<secret:password>, <secret:email>"));
        assert!(s.leaks(&block).is_empty());
        assert_eq!(Secrets::new().prompt_block(), None);
    }

    #[test]
    fn replacing_a_secret_forgets_the_old_value() {
        let mut s = secrets();
        s.insert("email", "bob@example.test").unwrap();
        assert_eq!(s.substitute("<secret:email>").unwrap(), "bob@example.test");
        assert_eq!(s.redact("alice@example.test"), "alice@example.test");
        assert_eq!(s.names().collect::<Vec<_>>(), vec!["password", "email"]);
    }
}

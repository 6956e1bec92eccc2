//! [`Secrets`]: values the model may use but never see.
//!
//! The model writes `<secret:NAME>` placeholders (in `type` text); the
//! router calls [`Secrets::substitute`] just before typing. Everything that
//! leaves the run — wire and semantic history, logs, traces, serialized
//! sessions, error messages — goes through [`Secrets::redact`] or
//! [`Secrets::redact_json`], which replace every value (also in its URL- and
//! form-encoded and JSON-escaped spellings, since a typed value can come
//! back in a URL) with its placeholder. `Debug` shows names only.
//!
//! A secret can be scoped to domains ([`Secrets::scope`]): it is then typed
//! only while the page is on one of them, so a page that lures the model
//! elsewhere cannot collect it. Redaction covers every secret everywhere.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use lumen_core::{LumenError, Result};
use regex::Regex;
use serde::Serialize;

use crate::pattern::{DomainPattern, host_of, parse_url};

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
    /// The secret is scoped to other domains than the page's.
    #[error(
        "the secret `{name}` may only be typed on {domains}, and this page is on {page}: \
         go to one of those sites first"
    )]
    OutOfScope {
        /// The name used.
        name: String,
        /// Its domains, comma-separated.
        domains: String,
        /// The page's host (or the URL's scheme when it has no host).
        page: String,
    },
}

#[derive(Clone)]
struct Entry {
    name: String,
    value: String,
    /// Where it may be typed; empty means anywhere.
    domains: Vec<DomainPattern>,
    /// Scoped to anywhere on purpose (`*`): no default scope applies.
    anywhere: bool,
}

/// The most secrets one set holds: each is looked for in everything the
/// run records, and a request is untrusted.
pub const MAX_SECRETS: usize = 64;
/// The longest secret name, in characters (names reach the model's prompt).
pub const MAX_SECRET_NAME: usize = 64;
/// The longest secret value, in bytes.
pub const MAX_SECRET_VALUE: usize = 4096;

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
    /// `.` and `-` (at most [`MAX_SECRET_NAME`]); values must not be empty
    /// (nor over [`MAX_SECRET_VALUE`] bytes); a set holds at most
    /// [`MAX_SECRETS`].
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) -> Result<()> {
        let name = name.into();
        let value = value.into();
        let valid = !name.is_empty()
            && name.chars().count() <= MAX_SECRET_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !valid {
            return Err(LumenError::config(
                "secrets",
                format!(
                    "`{}` is not a valid secret name (letters, digits, `_`, `.`, `-`; at most \
                     {MAX_SECRET_NAME})",
                    name.chars().take(MAX_SECRET_NAME).collect::<String>()
                ),
            ));
        }
        if value.is_empty() {
            // The name is safe to show; the (empty) value is not a secret.
            return Err(LumenError::config(
                "secrets",
                format!("the secret `{name}` is empty"),
            ));
        }
        if value.len() > MAX_SECRET_VALUE {
            return Err(LumenError::config(
                "secrets",
                format!("the secret `{name}` is longer than {MAX_SECRET_VALUE} bytes"),
            ));
        }
        let replaces = self.entries.iter().any(|e| e.name == name);
        if !replaces && self.entries.len() >= MAX_SECRETS {
            return Err(LumenError::config(
                "secrets",
                format!("more than {MAX_SECRETS} secrets: give only the ones the task needs"),
            ));
        }
        self.entries.retain(|e| e.name != name);
        self.entries.push(Entry {
            name,
            value,
            domains: Vec::new(),
            anywhere: false,
        });
        self.rebuild();
        Ok(())
    }

    /// Restricts where the secret `name` is typed to pages on `domains`
    /// (patterns as in the policy: `example.com` covers its subdomains).
    /// Filling its placeholder anywhere else fails with
    /// [`SecretError::OutOfScope`].
    ///
    /// `["*"]` scopes it to anywhere on purpose:
    /// [`scope_rest_to`](Self::scope_rest_to) then leaves it so.
    pub fn scope<S: AsRef<str>>(&mut self, name: &str, domains: &[S]) -> Result<()> {
        let anywhere = domains.len() == 1 && domains[0].as_ref().trim() == "*";
        let patterns = domains
            .iter()
            .filter(|_| !anywhere)
            .map(|d| DomainPattern::parse(d.as_ref()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| LumenError::config("secrets", format!("secret `{name}`: {e}")))?;
        if patterns.is_empty() && !anywhere {
            return Err(LumenError::config(
                "secrets",
                format!("secret `{name}`: give at least one domain to scope it to"),
            ));
        }
        let Some(entry) = self.entries.iter_mut().find(|e| e.name == name) else {
            return Err(LumenError::config(
                "secrets",
                format!("cannot scope `{name}`: there is no secret by that name"),
            ));
        };
        entry.domains = patterns;
        entry.anywhere = anywhere;
        Ok(())
    }

    /// Scopes every secret not scoped yet (and not to anywhere, `*`) to the
    /// site of `start_url`: its host, a leading `www.` dropped, subdomains
    /// included. A run's secrets are typed where its task starts unless
    /// the operator widens them, so a page that lures the model elsewhere
    /// (or injects a login form of its own) cannot collect them. A start
    /// URL without a host scopes nothing.
    pub fn scope_rest_to(&mut self, start_url: &str) {
        let Some(host) = parse_url(start_url).as_ref().and_then(host_of) else {
            return;
        };
        let site = match &host {
            url::Host::Domain(d) => d.strip_prefix("www.").unwrap_or(d).to_owned(),
            other => other.to_string(),
        };
        let Ok(pattern) = DomainPattern::parse(&site) else {
            return;
        };
        for entry in &mut self.entries {
            if entry.domains.is_empty() && !entry.anywhere {
                entry.domains = vec![pattern.clone()];
            }
        }
    }

    /// Builder form of [`scope`](Self::scope).
    pub fn scoped<S: AsRef<str>>(mut self, name: &str, domains: &[S]) -> Result<Self> {
        self.scope(name, domains)?;
        Ok(self)
    }

    /// The domains `name` is scoped to (empty: anywhere).
    pub fn domains(&self, name: &str) -> Vec<&str> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.domains.iter().map(DomainPattern::as_str).collect())
            .unwrap_or_default()
    }

    /// Builder form of [`insert`](Self::insert).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Result<Self> {
        self.insert(name, value)?;
        Ok(self)
    }

    fn rebuild(&mut self) {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for e in &self.entries {
            let placeholder = Self::placeholder(&e.name);
            for spelling in spellings(&e.value) {
                if seen.insert(spelling.clone()) {
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

    /// Fills every placeholder in `text` with its value, for typing into a
    /// page at `page_url`. Only the router calls this, right before typing;
    /// the result must never be stored. A secret scoped to other domains
    /// (or any scoped secret when the page has no host) is refused.
    pub fn substitute(&self, text: &str, page_url: &str) -> Result<String, SecretError> {
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
            entry.check_scope(page_url)?;
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

    /// [`redact`](Self::redact) for text a logger cut short: where
    /// `marker` follows (the cut, e.g. `… (`), the beginning of a secret
    /// left just before it (two bytes or more) is replaced too, so a cut
    /// through a secret shows none of it.
    pub fn redact_cut<'a>(&self, text: &'a str, marker: &str) -> Cow<'a, str> {
        let redacted = self.redact(text);
        if marker.is_empty() || self.is_empty() || !redacted.contains(marker) {
            return redacted;
        }
        let mut out = String::with_capacity(redacted.len());
        let mut rest: &str = &redacted;
        while let Some(i) = rest.find(marker) {
            out.push_str(&self.without_secret_tail(&rest[..i]));
            out.push_str(marker);
            rest = &rest[i + marker.len()..];
        }
        out.push_str(rest);
        Cow::Owned(out)
    }

    /// `text` with a secret's beginning at its very end replaced by the
    /// secret's placeholder (the longest such beginning).
    fn without_secret_tail(&self, text: &str) -> String {
        let mut best: Option<(usize, &str)> = None;
        for (spelling, placeholder) in &self.redactions {
            for k in (2..spelling.len()).rev() {
                if spelling.is_char_boundary(k)
                    && text.ends_with(&spelling[..k])
                    && best.is_none_or(|(b, _)| k > b)
                {
                    best = Some((k, placeholder));
                    break;
                }
            }
        }
        match best {
            Some((k, placeholder)) => format!("{}{placeholder}", &text[..text.len() - k]),
            None => text.to_owned(),
        }
    }

    /// Redacts text that arrives in pieces (a model's streamed reply), so a
    /// secret split across two pieces is still caught. `pending` holds
    /// what earlier calls held back (start with an empty string): `piece`
    /// is appended to it, and the part that can no longer grow into a
    /// secret is taken out and returned redacted. Held back is at most a
    /// tail shorter than the longest spelling of a secret (or a secret or
    /// placeholder that reaches into that tail); with `last` nothing is.
    /// Joined, the returned texts are the redaction of the joined pieces.
    pub fn redact_piece(&self, pending: &mut String, piece: &str, last: bool) -> String {
        pending.push_str(piece);
        let longest = self.redactions.first().map_or(0, |(s, _)| s.len());
        let mut cut = match last {
            true => pending.len(),
            false => pending.len().saturating_sub(longest.saturating_sub(1)),
        };
        while !pending.is_char_boundary(cut) {
            cut -= 1;
        }
        // Move the cut before anything the full redaction would replace
        // or keep whole across it, until nothing straddles it.
        while let Some(start) = self.straddling(pending, cut) {
            cut = start;
        }
        let out = self.redact(&pending[..cut]).into_owned();
        pending.drain(..cut);
        out
    }

    /// The earliest start of a secret spelling or a placeholder in `text`
    /// that begins before `cut` and ends after it.
    fn straddling(&self, text: &str, cut: usize) -> Option<usize> {
        let spans = self
            .redactions
            .iter()
            .flat_map(|(s, _)| {
                (cut.saturating_sub(s.len())..cut)
                    .filter(|&i| text.is_char_boundary(i) && text[i..].starts_with(s.as_str()))
                    .map(|i| (i, i + s.len()))
            })
            .chain(
                text[..cut]
                    .match_indices("<secret:")
                    .filter_map(|(i, _)| placeholder_len(&text[i..]).map(|n| (i, i + n))),
            );
        spans
            .filter(|&(start, end)| start < cut && end > cut)
            .map(|(start, _)| start)
            .min()
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

    /// `value` with every secret redacted, through its JSON form (every
    /// string, however deeply nested). Clean values come back untouched.
    ///
    /// # Errors
    /// The value unchanged when it cannot make the round trip; the caller
    /// must then not let it out.
    pub fn redact_serde<T>(&self, value: T) -> std::result::Result<T, T>
    where
        T: Serialize + serde::de::DeserializeOwned,
    {
        if self.is_empty() {
            return Ok(value);
        }
        let Ok(mut json) = serde_json::to_value(&value) else {
            return Err(value);
        };
        let before = json.clone();
        self.redact_json(&mut json);
        if json == before {
            return Ok(value);
        }
        serde_json::from_value(json).map_err(|_| value)
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

impl Entry {
    fn check_scope(&self, page_url: &str) -> Result<(), SecretError> {
        if self.domains.is_empty() {
            return Ok(());
        }
        let url = parse_url(page_url);
        let host = url.as_ref().and_then(host_of);
        let allowed = url
            .as_ref()
            .is_some_and(|u| matches!(u.scheme(), "http" | "https"))
            && host
                .as_ref()
                .is_some_and(|h| self.domains.iter().any(|d| d.matches(h)));
        if allowed {
            return Ok(());
        }
        let page = match (&host, &url) {
            (Some(h), _) => h.to_string(),
            (None, Some(u)) => format!("a `{}:` page", u.scheme()),
            (None, None) => "an unknown page".to_owned(),
        };
        Err(SecretError::OutOfScope {
            name: self.name.clone(),
            domains: self
                .domains
                .iter()
                .map(DomainPattern::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            page,
        })
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
mod cut_tests {
    use super::*;

    #[test]
    fn a_cut_through_a_secret_shows_none_of_it() {
        let s = Secrets::new().with("PW", "hunter2-Zq9v7").unwrap();
        let cut = "params={\"text\":\"hunter2-Z… (5000 bytes)";
        let r = s.redact_cut(cut, "… (");
        assert!(!r.contains("hunter2"), "{r}");
        assert!(r.contains("<secret:PW>… (5000 bytes)"), "{r}");
        // Whole secrets as before; text without the marker or a secret's
        // beginning is left alone.
        assert_eq!(s.redact_cut("x hunter2-Zq9v7 y", "… ("), "x <secret:PW> y");
        assert_eq!(s.redact_cut("plain… (9 bytes)", "… ("), "plain… (9 bytes)");
        assert_eq!(
            s.redact_cut("ends in h… (9 bytes)", "… ("),
            "ends in h… (9 bytes)"
        );
    }
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

    /// A request is untrusted: how many secrets, and how long, is bounded,
    /// and a refused one leaves the set as it was.
    #[test]
    fn a_set_holds_a_bounded_number_of_bounded_secrets() {
        let mut s = Secrets::new();
        for i in 0..MAX_SECRETS {
            s.insert(format!("s{i}"), format!("value-{i}")).unwrap();
        }
        let e = s.insert("one-more", "x").unwrap_err().to_string();
        assert!(e.contains("more than 64 secrets"), "{e}");
        s.insert("s3", "replaced").unwrap();
        assert_eq!(
            s.names().count(),
            MAX_SECRETS,
            "a replacement is no new one"
        );
        assert_eq!(s.redact("replaced value-3"), "<secret:s3> value-3");
        let e = Secrets::new()
            .insert("big", "v".repeat(MAX_SECRET_VALUE + 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("longer than 4096 bytes"), "{e}");
        assert!(Secrets::new().insert("n".repeat(65), "v").is_err());
        assert!(Secrets::new().insert("n".repeat(64), "v").is_ok());
    }

    #[test]
    fn placeholders_are_filled_only_on_substitution() {
        let s = secrets();
        assert_eq!(
            s.substitute("<secret:email> / <secret:password>", "about:blank")
                .unwrap(),
            "alice@example.test / p@ss word\"!"
        );
        assert_eq!(
            s.substitute("no placeholders", "about:blank").unwrap(),
            "no placeholders"
        );
        let err = s.substitute("<secret:pin>", "about:blank").unwrap_err();
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
    fn a_secret_split_across_pieces_is_redacted() {
        let s = Secrets::new().with("pw", "hunter2-long").unwrap();
        // Every way of cutting the text into two or three pieces.
        let text = "a hunter2-long b <secret:pw> hunter2-longhunter2-long c";
        let expected = s.redact(text).into_owned();
        let bounds: Vec<usize> = (0..=text.len()).collect();
        for &i in &bounds {
            for &j in bounds.iter().filter(|&&j| j >= i) {
                let mut pending = String::new();
                let mut out = String::new();
                for (k, piece) in [&text[..i], &text[i..j], &text[j..]].iter().enumerate() {
                    let shown = s.redact_piece(&mut pending, piece, k == 2);
                    assert!(s.leaks(&shown).is_empty(), "{i},{j}: {shown}");
                    assert!(!shown.contains("hunter"), "{i},{j}: {shown:?}");
                    out.push_str(&shown);
                }
                assert!(pending.is_empty());
                assert_eq!(out, expected, "cut at {i} and {j}");
            }
        }
        // Without a cut that could split a secret, nothing is held back
        // past the longest spelling.
        let mut pending = String::new();
        let shown = s.redact_piece(&mut pending, "plain text that goes out", false);
        assert_eq!(
            shown.len() + pending.len(),
            "plain text that goes out".len()
        );
        assert!(pending.len() < "hunter2-long".len());
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
            s.leaks(
                &s.substitute("<secret:nope>", "about:blank")
                    .unwrap_err()
                    .to_string()
            )
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
    fn unscoped_secrets_take_the_start_sites_scope_unless_widened() {
        let mut s = Secrets::new()
            .with("a", "value-a")
            .unwrap()
            .with("b", "value-b")
            .unwrap()
            .with("c", "value-c")
            .unwrap()
            .scoped("b", &["other.example"])
            .unwrap()
            .scoped("c", &["*"])
            .unwrap();
        s.scope_rest_to("https://www.shop.example/login");
        assert_eq!(s.domains("a"), ["shop.example"]);
        assert_eq!(s.domains("b"), ["other.example"], "an explicit scope stays");
        assert!(s.domains("c").is_empty(), "`*` is anywhere");
        assert!(
            s.substitute("<secret:a>", "https://pay.shop.example/")
                .is_ok()
        );
        assert!(s.substitute("<secret:a>", "https://evil.test/").is_err());
        assert!(s.substitute("<secret:c>", "https://evil.test/").is_ok());
        // A start page without a host scopes nothing.
        let mut t = Secrets::new().with("a", "value-a").unwrap();
        t.scope_rest_to("about:blank");
        assert!(t.domains("a").is_empty());
    }

    #[test]
    fn a_scoped_secret_is_typed_only_on_its_domains() {
        let s = secrets()
            .scoped("password", &["shop.example", "*.pay.example"])
            .unwrap();
        // (page, may type)
        let table = [
            ("https://shop.example/login", true),
            ("https://www.shop.example/login", true),
            ("https://checkout.pay.example/", true),
            ("http://SHOP.example./x", true),
            ("https://shop.example.evil.test/login", false),
            ("https://evilshop.example/", false),
            ("https://shop.example@evil.test/", false),
            ("file:///shop.example/login.html", false),
            ("data:text/html,shop.example", false),
            ("about:blank", false),
            ("not a url", false),
        ];
        for (page, ok) in table {
            let got = s.substitute("<secret:password>", page);
            assert_eq!(got.is_ok(), ok, "{page}: {got:?}");
            if let Err(e) = got {
                let msg = e.to_string();
                assert!(msg.contains("shop.example, *.pay.example"), "{msg}");
                assert!(s.leaks(&msg).is_empty(), "{msg}");
            }
        }
        // Unscoped secrets go anywhere; redaction ignores scope.
        assert!(s.substitute("<secret:email>", "about:blank").is_ok());
        assert_eq!(s.redact("p@ss word\"!"), "<secret:password>");
        assert_eq!(s.domains("password"), vec!["shop.example", "*.pay.example"]);
        // Bad scopes are configuration errors naming what to fix.
        let mut bad = secrets();
        let e = bad
            .scope("password", &["https://shop.example/"])
            .unwrap_err();
        assert!(e.to_string().contains("without scheme"), "{e}");
        assert!(bad.scope("nobody", &["a.test"]).is_err());
        assert!(bad.scope::<&str>("password", &[]).is_err());
    }

    #[test]
    fn replacing_a_secret_forgets_the_old_value() {
        let mut s = secrets();
        s.insert("email", "bob@example.test").unwrap();
        assert_eq!(
            s.substitute("<secret:email>", "about:blank").unwrap(),
            "bob@example.test"
        );
        assert_eq!(s.redact("alice@example.test"), "alice@example.test");
        assert_eq!(s.names().collect::<Vec<_>>(), vec!["password", "email"]);
    }
}

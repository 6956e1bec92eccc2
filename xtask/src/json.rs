//! A small JSON reader, enough for `cargo metadata`: xtask stays on clap and
//! anyhow, so `cargo xtask tidy` needs no serde_json.
//!
//! It parses all of RFC 8259 (objects, arrays, strings with every escape,
//! surrogate pairs included, numbers, `true`, `false`, `null`) into a
//! [`Value`] tree, and rejects anything else with the byte offset of the
//! problem. Numbers are kept as their source text: tidy never reads one.
//! The accessors mirror serde_json's (`get`, `as_str`, `as_array`).

use anyhow::{Context as _, bail};

/// A parsed JSON value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    /// The number as written (validated, not converted).
    Number(String),
    String(String),
    Array(Vec<Value>),
    /// Members in source order; [`Value::get`] finds the first with a key.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object; `None` for other values.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Parses one JSON document (surrounding whitespace allowed).
pub(crate) fn parse(text: &str) -> anyhow::Result<Value> {
    let mut reader = Reader {
        bytes: text.as_bytes(),
        pos: 0,
    };
    let value = reader.value(0)?;
    reader.skip_whitespace();
    if reader.pos != reader.bytes.len() {
        bail!(
            "unexpected data after the JSON value at byte {}",
            reader.pos
        );
    }
    Ok(value)
}

/// Nesting deeper than this is refused rather than overflowing the stack.
const MAX_DEPTH: usize = 128;

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> anyhow::Result<()> {
        if self.peek() != Some(byte) {
            bail!("expected `{}` at byte {}", char::from(byte), self.pos);
        }
        self.pos += 1;
        Ok(())
    }

    fn value(&mut self, depth: usize) -> anyhow::Result<Value> {
        if depth > MAX_DEPTH {
            bail!(
                "JSON nested deeper than {MAX_DEPTH} levels at byte {}",
                self.pos
            );
        }
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(other) => bail!(
                "unexpected `{}` at byte {}",
                char::from(other).escape_default(),
                self.pos
            ),
            None => bail!("unexpected end of JSON"),
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> anyhow::Result<Value> {
        if !self.bytes[self.pos..].starts_with(word.as_bytes()) {
            bail!("invalid literal at byte {} (expected `{word}`)", self.pos);
        }
        self.pos += word.len();
        Ok(value)
    }

    fn object(&mut self, depth: usize) -> anyhow::Result<Value> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_whitespace();
            let key = self.string()?;
            self.skip_whitespace();
            self.expect(b':')?;
            members.push((key, self.value(depth + 1)?));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(members));
                }
                _ => bail!("expected `,` or `}}` at byte {}", self.pos),
            }
        }
    }

    fn array(&mut self, depth: usize) -> anyhow::Result<Value> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => bail!("expected `,` or `]` at byte {}", self.pos),
            }
        }
    }

    fn number(&mut self) -> anyhow::Result<Value> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => bail!("invalid number at byte {start}"),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.required_digits(start)?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.required_digits(start)?;
        }
        // Only ASCII was consumed, so this slice is valid UTF-8.
        let text = std::str::from_utf8(&self.bytes[start..self.pos])
            .with_context(|| format!("invalid number at byte {start}"))?;
        Ok(Value::Number(text.to_owned()))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn required_digits(&mut self, start: usize) -> anyhow::Result<()> {
        let before = self.pos;
        self.digits();
        if self.pos == before {
            bail!("invalid number at byte {start}");
        }
        Ok(())
    }

    fn string(&mut self) -> anyhow::Result<String> {
        let start = self.pos;
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            // Copy the run of plain bytes up to the next quote or escape.
            let run_start = self.pos;
            while let Some(byte) = self.peek() {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let run = std::str::from_utf8(&self.bytes[run_start..self.pos])
                .with_context(|| format!("invalid UTF-8 in the string at byte {start}"))?;
            out.push_str(run);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    out.push(self.escape()?);
                }
                Some(_) => bail!("control character in the string at byte {}", self.pos),
                None => bail!("unterminated string starting at byte {start}"),
            }
        }
    }

    /// The character of the escape after a backslash.
    fn escape(&mut self) -> anyhow::Result<char> {
        let at = self.pos;
        let Some(byte) = self.peek() else {
            bail!("unterminated escape at byte {at}");
        };
        self.pos += 1;
        Ok(match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&high) {
                    // A high surrogate must be followed by `\u` and a low one.
                    if !self.bytes[self.pos..].starts_with(b"\\u") {
                        bail!("unpaired surrogate at byte {at}");
                    }
                    self.pos += 2;
                    let low = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&low) {
                        bail!("unpaired surrogate at byte {at}");
                    }
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    high
                };
                char::from_u32(code).with_context(|| format!("unpaired surrogate at byte {at}"))?
            }
            _ => bail!("invalid escape at byte {at}"),
        })
    }

    fn hex4(&mut self) -> anyhow::Result<u32> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .with_context(|| format!("invalid \\u escape at byte {}", self.pos))?;
        self.pos += 4;
        u32::from_str_radix(digits, 16).context("invalid \\u escape")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::String(text.to_owned())
    }

    #[test]
    fn parses_every_kind_of_value() {
        let value = parse(
            r#" {"a": [1, -2.5e+3, 0, true, false, null], "b": {"c": "d"}, "e": [], "f": {}} "#,
        )
        .unwrap();
        assert_eq!(
            value,
            Value::Object(vec![
                (
                    "a".into(),
                    Value::Array(vec![
                        Value::Number("1".into()),
                        Value::Number("-2.5e+3".into()),
                        Value::Number("0".into()),
                        Value::Bool(true),
                        Value::Bool(false),
                        Value::Null,
                    ])
                ),
                ("b".into(), Value::Object(vec![("c".into(), s("d"))])),
                ("e".into(), Value::Array(vec![])),
                ("f".into(), Value::Object(vec![])),
            ])
        );
        assert_eq!(value.get("b").and_then(|b| b.get("c")), Some(&s("d")));
        assert_eq!(
            value.get("a").and_then(Value::as_array).map(Vec::len),
            Some(6)
        );
        assert_eq!(value.get("missing"), None);
        assert_eq!(s("x").get("x"), None);
        assert_eq!(Value::Null.as_str(), None);
        assert_eq!(Value::Null.as_array(), None);
    }

    #[test]
    fn decodes_escapes_and_keeps_utf8() {
        let value =
            parse(r#""q\" b\\ s\/ \b\f\n\r\t \u00e9 \ud83d\ude00 é — /ws/crates""#).unwrap();
        assert_eq!(
            value.as_str(),
            Some("q\" b\\ s/ \u{8}\u{c}\n\r\t é 😀 é — /ws/crates")
        );
    }

    #[test]
    fn rejects_malformed_documents() {
        for bad in [
            "",
            "   ",
            "{",
            "[1,]",
            "[1 2]",
            r#"{"a" 1}"#,
            r#"{"a": 1,}"#,
            r#"{a: 1}"#,
            "tru",
            "nul",
            "01",
            "1.",
            "-",
            "1e",
            r#""open"#,
            "\"tab\there\"",
            r#""\x""#,
            r#""\u12""#,
            r#""\ud83d""#,
            r#""\ud83d\u0041""#,
            r#""\ude00""#,
            "{} {}",
            "[1] x",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn errors_say_where() {
        let err = parse(r#"{"a": [1, 2,, 3]}"#).unwrap_err().to_string();
        assert_eq!(err, "unexpected `,` at byte 12");
        let err = parse(r#"{"a": "b"} x"#).unwrap_err().to_string();
        assert_eq!(err, "unexpected data after the JSON value at byte 11");
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(
            parse(&deep)
                .unwrap_err()
                .to_string()
                .contains("nested deeper")
        );
        let fine = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(&fine).is_ok());
    }
}

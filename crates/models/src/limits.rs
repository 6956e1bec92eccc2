//! Input bounds: the most a provider's answer may make this crate hold.
//!
//! A model server is untrusted input (a compromised proxy, a buggy local
//! server, a hostile "OpenAI-compatible" endpoint). Whatever it sends, an
//! adapter keeps bounded memory and bounded recursion: going over a cap is
//! a typed outcome, never an abort or an out-of-memory. Each cap is
//! generous for real use (tens of times what a real answer needs) and is
//! named, with its value, in the message of what happens over it:
//!
//! | cap | value | over it |
//! |---|---|---|
//! | [`MAX_SSE_EVENT_BYTES`] | 8 MiB | the stream ends with a `ModelApi` error of kind `Stream` |
//! | [`MAX_STREAMED_ANSWER_BYTES`] | 64 MiB | the stream ends with a `ModelApi` error of kind `Stream` |
//! | [`MAX_JSON_ANSWER_BYTES`] | 16 MiB | the non-streamed call fails with a `ModelApi` error of kind `Stream` |
//! | [`MAX_ERROR_BODY_BYTES`] | 64 KiB | the rest of an error answer's body is not read |
//! | [`MAX_TOOL_ARGUMENTS_BYTES`] | 1 MiB | that call becomes an `Action::Invalid` the model reads as `ok: false` |
//! | [`MAX_PARTIAL_ARG_PATH_DEPTH`] | 32 | that Gemini call becomes an `Action::Invalid` |
//!
//! A tool call over its cap is the model's mistake to correct (say, typing
//! a whole document at once), so it is reported to the model like any
//! other bad call and the stream goes on; a stream that breaks SSE framing
//! is the server's fault, so the call fails.

use lumen_core::Action;
use serde_json::Value;

/// The most bytes one server-sent event may take, from the end of the
/// previous event to the blank line that ends it (all its lines, fields
/// and comments). A real event is a few KiB: a screenshot is never sent
/// back, and a tool call's arguments have their own, smaller cap.
pub const MAX_SSE_EVENT_BYTES: usize = 8 << 20;

/// The most bytes a streamed answer may take in all (every event, pings
/// included). It bounds what endless text or thinking deltas can make an
/// adapter hold; a real answer is a few KiB to a few hundred KiB.
pub const MAX_STREAMED_ANSWER_BYTES: usize = 64 << 20;

/// The most bytes a non-streamed answer (planner, verifier, summaries)
/// may take.
pub const MAX_JSON_ANSWER_BYTES: usize = 16 << 20;

/// The most bytes of an error answer's body read for its message; the rest
/// is left unread.
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// The most bytes one tool call's arguments may take, streamed or whole
/// (as JSON text). Real calls take well under a KiB; a `type` action with
/// a long text is the largest legitimate case.
pub const MAX_TOOL_ARGUMENTS_BYTES: usize = 1 << 20;

/// The most steps (keys and indices) a Gemini `partialArgs` JSON path may
/// have. Real paths have two or three; the cap bounds the recursion that
/// applies a path (and the nesting of the value it builds).
pub const MAX_PARTIAL_ARG_PATH_DEPTH: usize = 32;

/// A size for messages: `8 MiB`, `64 KiB`, or bytes.
pub(crate) fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// The failed call a tool call over [`MAX_TOOL_ARGUMENTS_BYTES`] becomes.
/// `bytes` is how much arrived (at least; counting stops past the cap).
/// Only the start of the arguments is kept, for the record.
pub(crate) fn oversized_arguments(name: &str, bytes: usize, head: &str) -> Action {
    let mut end = head.len().min(200);
    while !head.is_char_boundary(end) {
        end -= 1;
    }
    Action::Invalid {
        name: name.to_owned(),
        input: Value::String(format!("{}…", &head[..end])),
        error: format!(
            "the arguments of `{name}` are {bytes} bytes, over the {} cap on a tool \
             call's arguments (MAX_TOOL_ARGUMENTS_BYTES); send shorter arguments \
             (type long text in several parts)",
            size(MAX_TOOL_ARGUMENTS_BYTES)
        ),
    }
}

/// A tool call's arguments as they stream in: kept while under
/// [`MAX_TOOL_ARGUMENTS_BYTES`], only counted past it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolArgs {
    text: String,
    total: usize,
}

impl ToolArgs {
    /// Arguments that arrived whole.
    pub(crate) fn whole(text: String) -> Self {
        let mut args = Self::default();
        args.push_owned(text);
        args
    }

    /// Appends a delta.
    pub(crate) fn push(&mut self, piece: &str) {
        self.total = self.total.saturating_add(piece.len());
        if self.total <= MAX_TOOL_ARGUMENTS_BYTES {
            self.text.push_str(piece);
        }
    }

    fn push_owned(&mut self, piece: String) {
        if self.text.is_empty() && piece.len() <= MAX_TOOL_ARGUMENTS_BYTES {
            self.total = piece.len();
            self.text = piece;
        } else {
            self.push(&piece);
        }
    }

    /// The arguments, or the failed call they make when over the cap.
    pub(crate) fn get(&self, name: &str) -> Result<&str, Action> {
        if self.total > MAX_TOOL_ARGUMENTS_BYTES {
            Err(oversized_arguments(name, self.total, &self.text))
        } else {
            Ok(&self.text)
        }
    }

    /// What is kept (the arguments, or their start when over the cap).
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the arguments went over the cap.
    pub(crate) fn over(&self) -> bool {
        self.total > MAX_TOOL_ARGUMENTS_BYTES
    }
}

/// The size of `value` as JSON text when it is over
/// [`MAX_TOOL_ARGUMENTS_BYTES`] (counting stops soon past the cap, so the
/// size is a lower bound); `None` when it fits. Nothing is allocated.
pub(crate) fn json_over_cap(value: &Value) -> Option<usize> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            if self.0 > MAX_TOOL_ARGUMENTS_BYTES {
                return Err(std::io::Error::other("over the cap"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => None,
        Err(_) => Some(count.0),
    }
}

/// The failed call `value` makes when it is over the arguments cap.
pub(crate) fn check_arguments(name: &str, value: &Value) -> Option<Action> {
    let bytes = json_over_cap(value)?;
    let head = match value {
        Value::String(s) => s.clone(),
        _ => String::new(),
    };
    Some(oversized_arguments(name, bytes, &head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(size(MAX_SSE_EVENT_BYTES), "8 MiB");
        assert_eq!(size(MAX_ERROR_BODY_BYTES), "64 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[test]
    fn streamed_arguments_stop_growing_at_the_cap() {
        let mut args = ToolArgs::default();
        let piece = "x".repeat(64 << 10);
        for _ in 0..40 {
            args.push(&piece);
        }
        assert!(args.over());
        assert!(args.as_str().len() <= MAX_TOOL_ARGUMENTS_BYTES);
        let Err(Action::Invalid { error, .. }) = args.get("type") else {
            panic!("expected an invalid call");
        };
        assert!(error.contains("2621440 bytes"), "{error}");
        assert!(error.contains("MAX_TOOL_ARGUMENTS_BYTES"), "{error}");
        assert!(error.contains("1 MiB"), "{error}");
        assert_eq!(ToolArgs::whole("{}".into()).get("x"), Ok("{}"));
    }

    #[test]
    fn whole_values_are_measured_without_serialising_them() {
        assert_eq!(json_over_cap(&serde_json::json!({"text": "hi"})), None);
        let big = serde_json::json!({"text": "y".repeat(MAX_TOOL_ARGUMENTS_BYTES)});
        assert!(json_over_cap(&big).is_some_and(|n| n > MAX_TOOL_ARGUMENTS_BYTES));
        assert!(check_arguments("type", &big).is_some());
    }
}

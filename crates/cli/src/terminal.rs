//! The one sanitiser for every terminal print of text a page or a model
//! chose: the final answer, the model's thinking and text (`-v`), URLs,
//! key names in errors, the hand-over reason, page text and console lines
//! (`lumen browser get text`, `console`). An escape sequence there could
//! write the clipboard (OSC 52), forge a hyperlink (OSC 8), clear the
//! screen or retitle the window; a bidi override could make a line read
//! otherwise than it is. Each such character is shown as a visible escape
//! (`\x1b`, `\u{202e}`) instead of being sent to the terminal; newlines
//! and tabs stay. `lumen browser --raw` prints page text byte for byte,
//! for a user who wants it.
//!
//! JSON output (`--json`) needs none of this: JSON escapes control
//! characters itself.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character but newline and tab, and every
/// bidi control, replaced by a visible escape.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !hidden(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal would act on `c` rather than show it.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_sent() {
        for (raw, shown) in [
            // OSC 52: write the clipboard.
            ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),
            // OSC 8: a hyperlink whose text lies about its target.
            (
                "\x1b]8;;https://evil.test\x1b\\bank.test\x1b]8;;\x1b\\",
                "\\x1b]8;;https://evil.test\\x1b\\bank.test\\x1b]8;;\\x1b\\",
            ),
            // Clear the screen; C1 CSI; a carriage return over the line.
            ("\x1b[2J\u{9b}2Jok\rno", "\\x1b[2J\\x9b2Jok\\x0dno"),
            // A bidi override.
            ("file\u{202e}gpj.exe", "file\\u{202e}gpj.exe"),
            ("DEL\x7f", "DEL\\x7f"),
        ] {
            assert_eq!(visible(raw), shown, "{raw:?}");
        }
    }

    #[test]
    fn plain_text_lines_and_tabs_are_untouched() {
        let text = "Price: 12 €\n\tline two — ünïcode";
        assert!(matches!(visible(text), Cow::Borrowed(_)));
    }
}

//! Typing text into the focused element: line by line, with a real Enter
//! between lines.

use lumen_core::{LumenError, Result};
use serde_json::json;

use super::Command;
use super::keys::{self, KeyDef};

/// The commands that type `text` into the focused element. A CRLF counts as
/// one line break; each line goes in as one `Input.insertText`, or with
/// `per_key` as one key press per character (`keydown`, `keypress`,
/// `keyup`, as a keyboard sends them; a character no key types, such as
/// `é` or an emoji, is inserted as text); between lines Enter is pressed.
///
/// # Errors
/// [`LumenError::Script`] when a character has no key (never for text
/// inserted whole).
pub(crate) fn type_text(text: &str, per_key: bool) -> Result<Vec<Command>> {
    let text = text.replace("\r\n", "\n");
    let enter = key("Enter")?;
    let mut commands = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            commands.extend(keys::chord_commands(std::slice::from_ref(&enter)));
        }
        if line.is_empty() {
            continue;
        }
        if per_key {
            // Characters no key of a US layout types (accents, other
            // scripts, emoji) go in as text, as an IME would commit them.
            let mut keyless = String::new();
            for c in line.chars() {
                let k = key(&c.to_string())?;
                if k.code.is_empty() {
                    keyless.push(c);
                    continue;
                }
                if !keyless.is_empty() {
                    let text = std::mem::take(&mut keyless);
                    commands.push(("Input.insertText", json!({ "text": text })));
                }
                commands.extend(keys::chord_commands(std::slice::from_ref(&k)));
            }
            if !keyless.is_empty() {
                commands.push(("Input.insertText", json!({ "text": keyless })));
            }
        } else {
            commands.push(("Input.insertText", json!({ "text": line })));
        }
    }
    Ok(commands)
}

/// A key by name, a failure to name one being a script error.
pub(crate) fn key(name: &str) -> Result<KeyDef> {
    keys::normalize_key(name).map_err(|message| LumenError::Script { message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_inserted_with_enter_between() {
        let commands = type_text("ab\r\n\nc", false).unwrap();
        let methods: Vec<&str> = commands.iter().map(|c| c.0).collect();
        assert_eq!(
            methods,
            [
                "Input.insertText",
                "Input.dispatchKeyEvent",
                "Input.dispatchKeyEvent",
                "Input.dispatchKeyEvent",
                "Input.dispatchKeyEvent",
                "Input.insertText",
            ]
        );
        assert_eq!(commands[1].1["key"], "Enter");
        assert_eq!(commands[1].1["type"], "keyDown");
        assert_eq!(commands[2].1["type"], "keyUp");
        assert_eq!(commands[5].1["text"], "c");
    }

    #[test]
    fn characters_without_a_key_are_inserted_between_key_presses() {
        let commands = type_text("a\u{e9}\u{1F600}b", true).unwrap();
        let methods: Vec<&str> = commands.iter().map(|c| c.0).collect();
        assert_eq!(
            methods,
            [
                "Input.dispatchKeyEvent",
                "Input.dispatchKeyEvent",
                "Input.insertText",
                "Input.dispatchKeyEvent",
                "Input.dispatchKeyEvent",
            ]
        );
        assert_eq!(commands[2].1["text"], "\u{e9}\u{1F600}");
    }

    #[test]
    fn per_key_typing_presses_each_character() {
        let commands = type_text("Hi", true).unwrap();
        assert_eq!(commands.len(), 4);
        assert_eq!(commands[0].1["text"], "H");
        assert_eq!(commands[2].1["key"], "i");
        assert_eq!(commands[3].1["type"], "keyUp");
    }
}

//! One key-name normaliser for every provider's spelling.
//!
//! Accepts xdotool/X11 keysyms (`Return`, `Page_Down`, `Prior`, `super`,
//! `KP_Enter`), DOM/Playwright names (`Enter`, `PageDown`, `ArrowUp`, `Meta`)
//! in any case, single characters, and `+`-joined chords (`ctrl+shift+t`).
//! The result is what `Input.dispatchKeyEvent` needs: DOM `key` and `code`,
//! the Windows virtual key code, the text the key types and the modifier bit
//! it holds; and from it the key events of one key or a chord.

/// A key ready to be sent with `Input.dispatchKeyEvent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDef {
    /// DOM `key` (`Enter`, `a`, `ArrowUp`).
    pub key: String,
    /// DOM `code` (`Enter`, `KeyA`, `ArrowUp`).
    pub code: String,
    /// Windows virtual key code.
    pub key_code: i64,
    /// Text the key types, if any.
    pub text: Option<String>,
    /// 3 for keypad keys, 1 for left modifiers, else 0.
    pub location: i64,
    /// CDP modifier bit when this key is a modifier (Alt=1, Ctrl=2, Meta=4,
    /// Shift=8).
    pub modifier_bit: i64,
}

/// The `Input.dispatchKeyEvent` parameters of one key going down or up.
/// The key types its text only when `with_text` (no Ctrl/Alt/Meta held).
pub(crate) fn key_event_params(
    down: bool,
    key: &KeyDef,
    modifiers: i64,
    with_text: bool,
) -> serde_json::Value {
    let text = key.text.as_deref().filter(|_| with_text && down);
    let kind = match (down, text.is_some()) {
        (false, _) => "keyUp",
        (true, true) => "keyDown",
        (true, false) => "rawKeyDown",
    };
    let mut params = serde_json::json!({
        "type": kind,
        "key": key.key,
        "code": key.code,
        "windowsVirtualKeyCode": key.key_code,
        "nativeVirtualKeyCode": key.key_code,
        "modifiers": modifiers,
        "location": key.location,
    });
    if let Some(t) = text {
        params["text"] = t.into();
        params["unmodifiedText"] = t.into();
    }
    params
}

/// The key-down events of a chord, in order: modifiers accumulate, text is
/// typed only without Ctrl/Alt/Meta held, and Shift upper-cases letters.
/// Returns them with the modifier mask left held.
pub(crate) fn chord_down(defs: &[KeyDef]) -> (Vec<serde_json::Value>, i64) {
    let mut out = Vec::with_capacity(defs.len());
    let mut mask = 0;
    for k in defs {
        mask |= k.modifier_bit;
        let text_allowed = mask & (1 | 2 | 4) == 0;
        let mut k = k.clone();
        if mask & 8 != 0 && k.key.chars().count() == 1 {
            k.key = k.key.to_uppercase();
            k.text = k.text.map(|t| t.to_uppercase());
        }
        out.push(key_event_params(true, &k, mask, text_allowed));
    }
    (out, mask)
}

/// The key-up events releasing a chord pressed with [`chord_down`], in
/// reverse order.
pub(crate) fn chord_up(defs: &[KeyDef], mut mask: i64) -> Vec<serde_json::Value> {
    defs.iter()
        .rev()
        .map(|k| {
            mask &= !k.modifier_bit;
            key_event_params(false, k, mask, false)
        })
        .collect()
}

/// The `Input.dispatchKeyEvent` commands pressing a chord and releasing
/// it: modifiers accumulate on the way down and are released in reverse.
pub(crate) fn chord_commands(defs: &[KeyDef]) -> Vec<super::Command> {
    let (mut events, mask) = chord_down(defs);
    events.extend(chord_up(defs, mask));
    events
        .into_iter()
        .map(|p| ("Input.dispatchKeyEvent", p))
        .collect()
}

impl KeyDef {
    fn named(key: &str, code: &str, key_code: i64) -> Self {
        Self {
            key: key.to_owned(),
            code: code.to_owned(),
            key_code,
            text: None,
            location: 0,
            modifier_bit: 0,
        }
    }

    fn with_text(mut self, text: &str) -> Self {
        self.text = Some(text.to_owned());
        self
    }

    fn modifier(key: &str, code: &str, key_code: i64, bit: i64) -> Self {
        Self {
            location: 1,
            modifier_bit: bit,
            ..Self::named(key, code, key_code)
        }
    }

    fn keypad(mut self) -> Self {
        self.location = 3;
        self
    }
}

/// Normalises one key name. An unknown name is an `Err` naming it, phrased
/// for the model.
pub fn normalize_key(name: &str) -> Result<KeyDef, String> {
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Ok(char_key(c));
    }
    let folded: String = name
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    named_key(&folded).ok_or_else(|| {
        format!(
            "unknown key `{name}`: use a DOM key name (Enter, Tab, Escape, ArrowDown, PageDown, \
             Backspace, F5), a modifier (ctrl, shift, alt, meta) or a single character"
        )
    })
}

/// Parses a chord: each entry may itself be `+`-joined (`["ctrl+a"]` equals
/// `["ctrl", "a"]`; a lone `+` is the plus key).
pub fn parse_chord(keys: &[String]) -> Result<Vec<KeyDef>, String> {
    let mut out = Vec::new();
    for entry in keys {
        for part in split_plus(entry.trim()) {
            out.push(normalize_key(&part)?);
        }
    }
    if out.is_empty() {
        return Err("no key given: name at least one key".to_owned());
    }
    Ok(out)
}

fn split_plus(s: &str) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    if s == "+" {
        return vec!["+".to_owned()];
    }
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut pending_plus = false;
    for c in s.chars() {
        if c == '+' {
            if current.is_empty() {
                // "ctrl++": an empty segment is the plus key itself.
                if pending_plus {
                    parts.push("+".to_owned());
                    pending_plus = false;
                } else {
                    pending_plus = true;
                }
            } else {
                parts.push(std::mem::take(&mut current));
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        parts.push(current);
    } else if pending_plus || s.ends_with('+') {
        parts.push("+".to_owned());
    }
    parts
}

fn char_key(c: char) -> KeyDef {
    let text = c.to_string();
    let (code, key_code) = match c {
        'a'..='z' => (
            format!("Key{}", c.to_ascii_uppercase()),
            c.to_ascii_uppercase() as i64,
        ),
        'A'..='Z' => (format!("Key{c}"), c as i64),
        '0'..='9' => (format!("Digit{c}"), c as i64),
        ' ' => ("Space".to_owned(), 32),
        '\n' | '\r' => return KeyDef::named("Enter", "Enter", 13).with_text("\r"),
        '\t' => return KeyDef::named("Tab", "Tab", 9),
        _ => match punctuation(c) {
            Some((code, vk)) => (code.to_owned(), vk),
            None => (String::new(), 0),
        },
    };
    KeyDef {
        key: text.clone(),
        code,
        key_code,
        text: Some(text),
        location: 0,
        modifier_bit: 0,
    }
}

/// US-layout codes and virtual key codes for ASCII punctuation.
fn punctuation(c: char) -> Option<(&'static str, i64)> {
    Some(match c {
        '-' | '_' => ("Minus", 189),
        '=' | '+' => ("Equal", 187),
        ',' | '<' => ("Comma", 188),
        '.' | '>' => ("Period", 190),
        '/' | '?' => ("Slash", 191),
        '\\' | '|' => ("Backslash", 220),
        ';' | ':' => ("Semicolon", 186),
        '\'' | '"' => ("Quote", 222),
        '`' | '~' => ("Backquote", 192),
        '[' | '{' => ("BracketLeft", 219),
        ']' | '}' => ("BracketRight", 221),
        '!' => ("Digit1", 49),
        '@' => ("Digit2", 50),
        '#' => ("Digit3", 51),
        '$' => ("Digit4", 52),
        '%' => ("Digit5", 53),
        '^' => ("Digit6", 54),
        '&' => ("Digit7", 55),
        '*' => ("Digit8", 56),
        '(' => ("Digit9", 57),
        ')' => ("Digit0", 48),
        _ => return None,
    })
}

/// X11 keysym names of printable characters.
fn keysym_char(name: &str) -> Option<char> {
    Some(match name {
        "minus" => '-',
        "equal" => '=',
        "plus" => '+',
        "comma" => ',',
        "period" => '.',
        "slash" => '/',
        "backslash" => '\\',
        "semicolon" => ';',
        "colon" => ':',
        "apostrophe" | "quoteright" => '\'',
        "quotedbl" => '"',
        "grave" | "quoteleft" => '`',
        "asciitilde" => '~',
        "bracketleft" => '[',
        "bracketright" => ']',
        "braceleft" => '{',
        "braceright" => '}',
        "bar" => '|',
        "exclam" => '!',
        "at" => '@',
        "numbersign" => '#',
        "dollar" => '$',
        "percent" => '%',
        "asciicircum" => '^',
        "ampersand" => '&',
        "asterisk" => '*',
        "parenleft" => '(',
        "parenright" => ')',
        "underscore" => '_',
        "question" => '?',
        "less" => '<',
        "greater" => '>',
        _ => return None,
    })
}

fn named_key(n: &str) -> Option<KeyDef> {
    if let Some(c) = keysym_char(n) {
        return Some(char_key(c));
    }
    // Function keys F1–F24.
    if let Some(num) = n.strip_prefix('f').and_then(|d| d.parse::<i64>().ok())
        && (1..=24).contains(&num)
    {
        let name = format!("F{num}");
        return Some(KeyDef::named(&name, &name, 111 + num));
    }
    // Keypad digits: KP_0 .. KP_9.
    if let Some(d) = n.strip_prefix("kp").and_then(|d| d.parse::<u8>().ok())
        && d <= 9
    {
        let digit = d.to_string();
        return Some(
            KeyDef::named(&digit, &format!("Numpad{d}"), 96 + d as i64)
                .with_text(&digit)
                .keypad(),
        );
    }
    Some(match n {
        "enter" | "return" => KeyDef::named("Enter", "Enter", 13).with_text("\r"),
        "kpenter" | "numpadenter" => KeyDef::named("Enter", "NumpadEnter", 13)
            .with_text("\r")
            .keypad(),
        "tab" | "kptab" => KeyDef::named("Tab", "Tab", 9),
        "isolefttab" | "lefttab" | "backtab" => KeyDef::named("Tab", "Tab", 9),
        "backspace" | "bksp" => KeyDef::named("Backspace", "Backspace", 8),
        "delete" | "del" | "kpdelete" => KeyDef::named("Delete", "Delete", 46),
        "escape" | "esc" => KeyDef::named("Escape", "Escape", 27),
        "space" | "spacebar" | "kpspace" => KeyDef::named(" ", "Space", 32).with_text(" "),
        "arrowup" | "up" | "kpup" => KeyDef::named("ArrowUp", "ArrowUp", 38),
        "arrowdown" | "down" | "kpdown" => KeyDef::named("ArrowDown", "ArrowDown", 40),
        "arrowleft" | "left" | "kpleft" => KeyDef::named("ArrowLeft", "ArrowLeft", 37),
        "arrowright" | "right" | "kpright" => KeyDef::named("ArrowRight", "ArrowRight", 39),
        "pageup" | "prior" | "pgup" | "kpprior" | "kppageup" => {
            KeyDef::named("PageUp", "PageUp", 33)
        }
        "pagedown" | "next" | "pgdn" | "kpnext" | "kppagedown" => {
            KeyDef::named("PageDown", "PageDown", 34)
        }
        "home" | "kphome" => KeyDef::named("Home", "Home", 36),
        "end" | "kpend" => KeyDef::named("End", "End", 35),
        "insert" | "ins" | "kpinsert" => KeyDef::named("Insert", "Insert", 45),
        "capslock" => KeyDef::named("CapsLock", "CapsLock", 20),
        "numlock" => KeyDef::named("NumLock", "NumLock", 144),
        "scrolllock" => KeyDef::named("ScrollLock", "ScrollLock", 145),
        "printscreen" | "print" | "sysreq" => KeyDef::named("PrintScreen", "PrintScreen", 44),
        "pause" | "break" => KeyDef::named("Pause", "Pause", 19),
        "contextmenu" | "menu" | "apps" => KeyDef::named("ContextMenu", "ContextMenu", 93),
        "kpadd" => char_key('+').keypad(),
        "kpsubtract" => char_key('-').keypad(),
        "kpmultiply" => char_key('*').keypad(),
        "kpdivide" => char_key('/').keypad(),
        "kpdecimal" => char_key('.').keypad(),
        "shift" | "shiftl" | "lshift" | "shiftleft" => {
            KeyDef::modifier("Shift", "ShiftLeft", 16, 8)
        }
        "shiftr" | "rshift" | "shiftright" => KeyDef {
            location: 2,
            ..KeyDef::modifier("Shift", "ShiftRight", 16, 8)
        },
        "control" | "ctrl" | "ctl" | "controll" | "ctrll" | "lctrl" | "controlleft" => {
            KeyDef::modifier("Control", "ControlLeft", 17, 2)
        }
        "controlr" | "ctrlr" | "rctrl" | "controlright" => KeyDef {
            location: 2,
            ..KeyDef::modifier("Control", "ControlRight", 17, 2)
        },
        "alt" | "altl" | "lalt" | "altleft" | "option" | "opt" | "metal" | "mod1" => {
            KeyDef::modifier("Alt", "AltLeft", 18, 1)
        }
        "altr" | "ralt" | "altright" | "altgr" | "isolevel3shift" => KeyDef {
            location: 2,
            ..KeyDef::modifier("Alt", "AltRight", 18, 1)
        },
        "meta" | "super" | "superl" | "lsuper" | "cmd" | "command" | "win" | "windows" | "os"
        | "hyper" | "hyperl" | "mod4" | "metaleft" | "osleft" => {
            KeyDef::modifier("Meta", "MetaLeft", 91, 4)
        }
        "superr" | "rsuper" | "metaright" | "osright" | "hyperr" => KeyDef {
            location: 2,
            ..KeyDef::modifier("Meta", "MetaRight", 92, 4)
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> String {
        normalize_key(name).map(|k| k.key).unwrap_or_else(|e| e)
    }

    #[test]
    fn x11_dom_and_case_variants_agree() {
        for (names, want) in [
            (
                &["Return", "Enter", "RETURN", "enter", "KP_Enter"][..],
                "Enter",
            ),
            (
                &["Page_Down", "PageDown", "Next", "pagedown", "page-down"][..],
                "PageDown",
            ),
            (&["Prior", "Page_Up", "PageUp"][..], "PageUp"),
            (&["Up", "ArrowUp", "arrowup"][..], "ArrowUp"),
            (&["super", "Super_L", "Meta", "cmd", "Win"][..], "Meta"),
            (&["ctrl", "Control_L", "CONTROL"][..], "Control"),
            (&["BackSpace", "Backspace"][..], "Backspace"),
            (&["Escape", "Esc"][..], "Escape"),
            (&["space", "Space"][..], " "),
            (&["minus"][..], "-"),
            (&["F5", "f5"][..], "F5"),
        ] {
            for n in names {
                assert_eq!(key(n), want, "{n}");
            }
        }
        assert_eq!(normalize_key("KP_Enter").map(|k| k.location), Ok(3));
        assert_eq!(
            normalize_key("Return").map(|k| k.text),
            Ok(Some("\r".into()))
        );
    }

    #[test]
    fn single_characters_keep_their_case() {
        let a = normalize_key("a").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (a.key.as_str(), a.code.as_str(), a.key_code),
            ("a", "KeyA", 65)
        );
        let big = normalize_key("A").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(big.key, "A");
        assert_eq!(normalize_key("7").map(|k| k.code), Ok("Digit7".into()));
    }

    #[test]
    fn chords_split_on_plus() {
        let keys = |v: &[&str]| {
            parse_chord(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map(|ks| ks.into_iter().map(|k| k.key).collect::<Vec<_>>())
        };
        assert_eq!(keys(&["ctrl+a"]), Ok(vec!["Control".into(), "a".into()]));
        assert_eq!(keys(&["ctrl", "a"]), Ok(vec!["Control".into(), "a".into()]));
        assert_eq!(
            keys(&["Control+Shift+T"]),
            Ok(vec!["Control".into(), "Shift".into(), "T".into()])
        );
        assert_eq!(keys(&["+"]), Ok(vec!["+".into()]));
        assert_eq!(keys(&["ctrl++"]), Ok(vec!["Control".into(), "+".into()]));
        assert!(keys(&[]).is_err());
    }

    #[test]
    fn unknown_keys_are_named_in_the_error() {
        let err = parse_chord(&["ctrl".into(), "Hyperdrive".into()]).err();
        assert!(err.is_some_and(|e| e.contains("`Hyperdrive`")));
    }

    use proptest::prelude::*;

    /// Names the parser knows, in several spellings, plus characters.
    fn known_name() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(vec![
                "Enter",
                "Return",
                "KP_Enter",
                "Tab",
                "Escape",
                "esc",
                "Backspace",
                "Delete",
                "space",
                "ArrowUp",
                "Page_Down",
                "Prior",
                "Home",
                "End",
                "F5",
                "F24",
                "KP_7",
                "ctrl",
                "Control_R",
                "shift",
                "Shift_R",
                "alt",
                "AltGr",
                "meta",
                "super",
                "cmd",
                "minus",
                "plus",
                "at",
                "CapsLock",
                "ContextMenu",
            ])
            .prop_map(str::to_owned),
            any::<char>().prop_map(|c| c.to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Any strings at all: a chord or an error that says what to fix,
        /// never a panic.
        #[test]
        fn any_strings_parse_or_name_the_problem(keys in proptest::collection::vec(".{0,12}", 0..4)) {
            match parse_chord(&keys) {
                Ok(defs) => prop_assert!(!defs.is_empty()),
                Err(e) => prop_assert!(
                    e.starts_with("unknown key `") || e.starts_with("no key given"),
                    "{}", e
                ),
            }
        }

        /// A chord written with its keys' DOM names, joined by `+`, parses
        /// back to the same keys (right-hand modifiers and keypad keys share
        /// their DOM name with another key, so they are left out).
        #[test]
        fn a_chord_written_with_dom_names_parses_back(names in proptest::collection::vec(known_name(), 1..4)) {
            let Ok(defs) = parse_chord(&names) else {
                return Ok(());
            };
            if defs.iter().any(|d| d.location > 1) {
                return Ok(());
            }
            for def in &defs {
                prop_assert_eq!(normalize_key(&def.key), Ok(def.clone()));
            }
            // Whitespace keys are trimmed off a chord's ends, so a chord
            // names them by their key names.
            let rendered: Vec<String> = defs
                .iter()
                .map(|d| match d.key.as_str() {
                    " " => "Space".to_owned(),
                    k if k.trim().is_empty() => d.code.clone(),
                    k => k.to_owned(),
                })
                .collect();
            prop_assert_eq!(parse_chord(&[rendered.join("+")]), Ok(defs));
        }
    }
}

//! Handing a run to a person: when it happens ([`HandoffPolicy`]), what a
//! live view streams ([`LiveFrame`]) and what a person sends back into the
//! page ([`LiveInput`]).
//!
//! The run pauses with status `waiting_for_human` while a person acts in
//! the very tab the agent drives; the loop waits (bounded by
//! [`HandoffPolicy::timeout_secs`]) and resumes with a fresh screenshot and
//! the person's note. Which tab implementations can stream and take input
//! is up to them: [`BrowserTab::screencast`](crate::BrowserTab::screencast)
//! and [`BrowserTab::live_input`](crate::BrowserTab::live_input) default to
//! "cannot".

use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::MouseButton;

/// The longest a run may wait for a person: it holds a browser meanwhile.
pub const MAX_TIMEOUT_SECS: u64 = 86_400;

/// When a run hands the browser to a person, and how long it waits.
///
/// Present on a session, it offers the model the `request_human` tool; its
/// triggers hand over without the model asking. Absent, nobody can be
/// asked and the tool is not offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HandoffPolicy {
    /// How long to wait for a person before the run ends with status
    /// `handoffTimeout`, seconds (default 600, at most a day).
    pub timeout_secs: u64,
    /// Hand over when a step starts on a URL matching one of these
    /// patterns (`*` matches any run of characters, e.g.
    /// `*://*/login*`), once per URL.
    pub urls: Vec<String>,
    /// Hand over instead of a click, or an Enter key, on a page with a
    /// payment field (card number, security code, expiry: `autocomplete`
    /// `cc-*` or a field named like one): the person submits the payment.
    pub before_payment: bool,
    /// Hand over once the verifier has rejected this many `terminate`s in
    /// the run (0: never).
    pub after_rejections: u32,
}

impl Default for HandoffPolicy {
    fn default() -> Self {
        Self {
            timeout_secs: 600,
            urls: Vec::new(),
            before_payment: false,
            after_rejections: 0,
        }
    }
}

impl HandoffPolicy {
    /// Checks the policy, naming what to fix.
    ///
    /// # Errors
    /// A message for a zero timeout, or a URL pattern that is empty.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_TIMEOUT_SECS).contains(&self.timeout_secs) {
            return Err(format!(
                "handoff.timeoutSecs must be between 1 and {MAX_TIMEOUT_SECS} (a day)"
            ));
        }
        if self.urls.iter().any(|u| u.trim().is_empty()) {
            return Err("handoff.urls holds an empty pattern".into());
        }
        Ok(())
    }

    /// The first URL pattern `url` matches.
    pub fn matching_url(&self, url: &str) -> Option<&str> {
        self.urls
            .iter()
            .map(String::as_str)
            .find(|p| glob_matches(p.trim(), url))
    }
}

/// Why a run was handed to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HandoffTrigger {
    /// The model called `request_human`.
    Model,
    /// A step started on a URL the policy names.
    Url,
    /// The model was about to submit a payment form.
    Payment,
    /// The verifier kept rejecting the answer.
    Rejections,
}

/// One screencast frame of a live view.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveFrame {
    /// The JPEG bytes.
    pub jpeg: Vec<u8>,
    /// The page's width in CSS pixels the frame shows (input coordinates
    /// are in this space, whatever the frame's pixel size).
    pub css_width: u32,
    /// The page's height in CSS pixels.
    pub css_height: u32,
}

/// A stream of live frames; dropping it stops the screencast.
pub type LiveFrames = Pin<Box<dyn futures_core::Stream<Item = LiveFrame> + Send>>;

/// Input a person sends into the page through a live view, viewport CSS
/// pixels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum LiveInput {
    /// The pointer moved.
    MouseMove {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
    },
    /// A button went down.
    MouseDown {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
        /// Which button (default left).
        #[serde(default)]
        button: MouseButton,
    },
    /// A button came up.
    MouseUp {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
        /// Which button (default left).
        #[serde(default)]
        button: MouseButton,
    },
    /// The wheel turned.
    Wheel {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
        /// Horizontal delta, CSS pixels.
        #[serde(default)]
        dx: f64,
        /// Vertical delta, CSS pixels.
        #[serde(default)]
        dy: f64,
    },
    /// A key went down (DOM key names: `Enter`, `Backspace`, `a`…).
    KeyDown {
        /// The key.
        key: String,
    },
    /// A key came up.
    KeyUp {
        /// The key.
        key: String,
    },
    /// Text to insert where the focus is (typed or pasted).
    Text {
        /// The text.
        text: String,
    },
}

impl LiveInput {
    /// Rejects coordinates that are not finite numbers and oversized text,
    /// naming the problem.
    ///
    /// # Errors
    /// A message for the person's client.
    pub fn validate(&self) -> Result<(), String> {
        const MAX_TEXT: usize = 10_000;
        let finite = |v: &[f64]| v.iter().all(|n| n.is_finite() && n.abs() < 1e6);
        let ok = match self {
            LiveInput::MouseMove { x, y }
            | LiveInput::MouseDown { x, y, .. }
            | LiveInput::MouseUp { x, y, .. } => finite(&[*x, *y]),
            LiveInput::Wheel { x, y, dx, dy } => finite(&[*x, *y, *dx, *dy]),
            LiveInput::KeyDown { key } | LiveInput::KeyUp { key } => {
                !key.is_empty() && key.chars().count() <= 32
            }
            LiveInput::Text { text } => text.len() <= MAX_TEXT,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("input out of range: {self:?}"))
        }
    }
}

/// `*` matches any run of characters (including none); everything else
/// matches itself.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_patterns_match_with_stars() {
        let p = HandoffPolicy {
            urls: vec!["*://*/login*".into(), "https://pay.example/checkout".into()],
            ..HandoffPolicy::default()
        };
        assert_eq!(
            p.matching_url("http://127.0.0.1:8080/login?next=/"),
            Some("*://*/login*")
        );
        assert_eq!(
            p.matching_url("https://pay.example/checkout"),
            Some("https://pay.example/checkout")
        );
        assert_eq!(p.matching_url("https://pay.example/checkout/2"), None);
        assert_eq!(p.matching_url("https://example.com/"), None);
        assert!(glob_matches("a*b*c", "abc"));
        assert!(glob_matches("a*b*c", "a-b-b-c"));
        assert!(!glob_matches("a*b*c", "a-c"));
        assert!(!glob_matches("ab*ba", "aba"));
        assert!(glob_matches("*", ""));
    }

    #[test]
    fn bad_policies_and_inputs_are_refused_with_a_reason() {
        let zero = HandoffPolicy {
            timeout_secs: 0,
            ..HandoffPolicy::default()
        };
        assert!(zero.validate().unwrap_err().contains("timeoutSecs"));
        let empty = HandoffPolicy {
            urls: vec![" ".into()],
            ..HandoffPolicy::default()
        };
        assert!(empty.validate().is_err());
        assert!(
            serde_json::from_str::<HandoffPolicy>(r#"{"timeout":5}"#).is_err(),
            "a misspelt key is an error, not a silent default"
        );

        let input: LiveInput =
            serde_json::from_str(r#"{"type":"mouseDown","x":10.5,"y":20}"#).unwrap();
        assert_eq!(
            input,
            LiveInput::MouseDown {
                x: 10.5,
                y: 20.0,
                button: MouseButton::Left
            }
        );
        assert!(input.validate().is_ok());
        let far = LiveInput::MouseMove { x: 1e9, y: 0.0 };
        assert!(far.validate().is_err());
        assert!(
            LiveInput::KeyDown { key: String::new() }
                .validate()
                .is_err()
        );
        assert!(serde_json::from_str::<LiveInput>(r#"{"type":"eval","js":"1"}"#).is_err());
    }
}

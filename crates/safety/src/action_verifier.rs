//! [`ActionVerifier`]: cheap checks after each action, read from its
//! [`EffectReceipt`] (no model call, no extra browser round trip).
//!
//! | action | check | on failure |
//! |---|---|---|
//! | click, double, triple | hit an interactive element, or changed something | hint |
//! | type | the focused element accepts text | `ok: false` |
//! | goto | the page ended on the host asked for (`www.` ignored) | hint |
//!
//! A receipt field that is `None` was not observed, so its check is skipped:
//! the verifier never invents a failure from missing data. Actions that
//! already failed are left alone.

use lumen_core::{Action, ActionExecution, EffectReceipt, ElementInfo};

use crate::pattern::{host_of, parse_url, same_site};

/// What the checks found for one action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionCheck {
    /// The action did not do what was asked: the execution must become
    /// `ok: false` with this message.
    pub failure: Option<String>,
    /// Advice for the model; the action still counts as done.
    pub hints: Vec<String>,
}

/// The post-action heuristics. Stateless.
#[derive(Debug, Clone, Copy, Default)]
pub struct ActionVerifier;

impl ActionVerifier {
    /// A verifier.
    pub fn new() -> Self {
        Self
    }

    /// Checks `action` against what its execution reports.
    pub fn check(&self, action: &Action, execution: &ActionExecution) -> ActionCheck {
        let mut out = ActionCheck::default();
        let Some(effect) = execution.effect.as_deref() else {
            return out;
        };
        if !execution.ok {
            return out;
        }
        match action {
            Action::Click { x, y, .. }
            | Action::DoubleClick { x, y, .. }
            | Action::TripleClick { x, y, .. } => {
                if let Some(hint) = click_hint(*x, *y, effect) {
                    out.hints.push(hint);
                }
            }
            Action::Type { .. } => {
                if let Some(focus) = &effect.focus
                    && !focus.editable
                {
                    out.failure = Some(format!(
                        "nothing was typed: the focused element is {}, which does not take text. Click the input field first, then type",
                        describe(focus)
                    ));
                }
            }
            Action::Goto { url } => {
                if let (Some(want), Some(got)) = (
                    parse_url(url).as_ref().and_then(host_of),
                    effect
                        .url_after
                        .as_deref()
                        .and_then(parse_url)
                        .as_ref()
                        .and_then(host_of),
                ) && !same_site(&want, &got)
                {
                    out.hints.push(format!(
                        "you asked for {want} but the page ended on {got} (a redirect or a block); check that this is the page you need"
                    ));
                }
            }
            _ => {}
        }
        out
    }

    /// Runs [`check`](Self::check) and applies it: a failure makes the
    /// execution `ok: false` with the message, hints are appended.
    pub fn apply(&self, action: &Action, execution: &mut ActionExecution) -> ActionCheck {
        let check = self.check(action, execution);
        if let Some(failure) = &check.failure {
            execution.ok = false;
            execution.error = Some(failure.clone());
        }
        execution.hints.extend(check.hints.iter().cloned());
        check
    }
}

fn click_hint(x: i32, y: i32, effect: &EffectReceipt) -> Option<String> {
    if effect.changed_anything() {
        return None;
    }
    match &effect.target {
        Some(t) if !t.interactive => Some(format!(
            "the click at ({x}, {y}) landed on {}, which is not interactive, and nothing changed; aim at the control itself",
            describe(t)
        )),
        Some(t) if effect.page_changed == Some(false) => Some(format!(
            "the click at ({x}, {y}) hit {} but nothing visibly changed; it may be disabled or need a moment",
            describe(t)
        )),
        Some(_) => None,
        None if effect.page_changed == Some(false) => Some(format!(
            "the click at ({x}, {y}) changed nothing visible; check that it hit the intended element"
        )),
        None => None,
    }
}

fn describe(e: &ElementInfo) -> String {
    let role = e
        .role
        .as_deref()
        .filter(|r| *r != e.tag)
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    match e.name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => format!("a <{}>{role} \"{name}\"", e.tag),
        None => format!("a <{}>{role}", e.tag),
    }
}

#[cfg(test)]
mod tests {
    use lumen_core::{Modifiers, MouseButton};
    use pretty_assertions::assert_eq;

    use super::*;

    fn el(tag: &str, interactive: bool, editable: bool) -> ElementInfo {
        ElementInfo {
            tag: tag.into(),
            role: None,
            name: Some(format!("the {tag}")),
            interactive,
            editable,
            frame_url: None,
            context: None,
        }
    }

    fn done(effect: EffectReceipt) -> ActionExecution {
        ActionExecution {
            ok: true,
            effect: Some(Box::new(effect)),
            ..ActionExecution::default()
        }
    }

    fn click() -> Action {
        Action::Click {
            x: 10,
            y: 20,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE,
        }
    }

    #[test]
    fn click_table() {
        // (receipt, expects a hint)
        let table: Vec<(EffectReceipt, bool)> = vec![
            // A div, nothing changed: hint.
            (
                EffectReceipt {
                    target: Some(el("div", false, false)),
                    page_changed: Some(false),
                    ..EffectReceipt::default()
                },
                true,
            ),
            // A div, change not measured, nothing else observed: still a
            // non-interactive target with no observed effect.
            (
                EffectReceipt {
                    target: Some(el("div", false, false)),
                    ..EffectReceipt::default()
                },
                true,
            ),
            // A div that changed the page (a click handler): fine.
            (
                EffectReceipt {
                    target: Some(el("div", false, false)),
                    page_changed: Some(true),
                    ..EffectReceipt::default()
                },
                false,
            ),
            // A button, nothing changed: hint.
            (
                EffectReceipt {
                    target: Some(el("button", true, false)),
                    page_changed: Some(false),
                    ..EffectReceipt::default()
                },
                true,
            ),
            // A link that navigated: fine.
            (
                EffectReceipt {
                    target: Some(el("a", true, false)),
                    url_before: Some("https://a.test/".into()),
                    url_after: Some("https://a.test/next".into()),
                    navigated: true,
                    ..EffectReceipt::default()
                },
                false,
            ),
            // A button, change not measured: no evidence either way.
            (
                EffectReceipt {
                    target: Some(el("button", true, false)),
                    ..EffectReceipt::default()
                },
                false,
            ),
            // No target observed, nothing changed: hint.
            (
                EffectReceipt {
                    page_changed: Some(false),
                    ..EffectReceipt::default()
                },
                true,
            ),
            // Nothing observed at all.
            (EffectReceipt::default(), false),
        ];
        let v = ActionVerifier::new();
        for (i, (effect, hint)) in table.into_iter().enumerate() {
            let check = v.check(&click(), &done(effect));
            assert_eq!(check.failure, None, "case {i}");
            assert_eq!(check.hints.len(), usize::from(hint), "case {i}: {check:?}");
            if hint {
                assert!(
                    check.hints[0].starts_with("the click at (10, 20)"),
                    "{check:?}"
                );
            }
        }
    }

    #[test]
    fn typing_into_nothing_is_a_failure() {
        let v = ActionVerifier::new();
        let typing = Action::Type {
            text: "hello".into(),
        };
        let mut body = done(EffectReceipt {
            focus: Some(ElementInfo {
                tag: "body".into(),
                ..ElementInfo::default()
            }),
            ..EffectReceipt::default()
        });
        let check = v.apply(&typing, &mut body);
        assert!(!body.ok);
        assert_eq!(body.error, check.failure);
        assert!(
            body.error
                .unwrap()
                .starts_with("nothing was typed: the focused element is a <body>")
        );

        let mut input = done(EffectReceipt {
            focus: Some(el("input", true, true)),
            ..EffectReceipt::default()
        });
        v.apply(&typing, &mut input);
        assert!(input.ok);
        // Focus not observed: no verdict.
        let mut unknown = done(EffectReceipt::default());
        v.apply(&typing, &mut unknown);
        assert!(unknown.ok);
    }

    #[test]
    fn goto_must_end_on_the_host_asked_for() {
        let v = ActionVerifier::new();
        let goto = Action::Goto {
            url: "https://shop.test/item".into(),
        };
        let table = [
            ("https://www.shop.test/item", false),
            ("https://shop.test/login?next=item", false),
            ("https://accounts.other.test/", true),
        ];
        for (after, hint) in table {
            let mut e = done(EffectReceipt {
                url_after: Some(after.into()),
                navigated: true,
                ..EffectReceipt::default()
            });
            let check = v.apply(&goto, &mut e);
            assert!(e.ok);
            assert_eq!(e.hints.len(), usize::from(hint), "{after}");
            assert_eq!(check.hints, e.hints);
            if hint {
                assert!(e.hints[0].contains("accounts.other.test"));
            }
        }
    }

    #[test]
    fn failed_or_unobserved_actions_are_left_alone() {
        let v = ActionVerifier::new();
        let mut failed = ActionExecution::failed("click outside the viewport");
        failed.effect = Some(Box::new(EffectReceipt {
            page_changed: Some(false),
            ..EffectReceipt::default()
        }));
        let before = failed.clone();
        v.apply(&click(), &mut failed);
        assert_eq!(failed, before);
        let mut bare = ActionExecution::ok();
        v.apply(&Action::Type { text: "x".into() }, &mut bare);
        assert_eq!(bare, ActionExecution::ok());
    }
}

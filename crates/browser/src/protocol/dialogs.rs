//! Answering JavaScript dialogs: `Page.handleJavaScriptDialog` as a
//! [`DialogPolicy`] decides.

use serde_json::json;

use super::Command;
use crate::options::{DialogAction, DialogPolicy};

/// Whether a dialog of `kind` (`alert`, `confirm`, `prompt`,
/// `beforeunload`) is accepted under `policy`, and the command answering
/// it: an accepted prompt gets the policy's text, else the page's default.
pub(crate) fn answer(
    policy: &DialogPolicy,
    kind: &str,
    default_prompt: Option<&str>,
) -> (bool, Command) {
    let accept = policy.decide(kind) == DialogAction::Accept;
    let mut params = json!({ "accept": accept });
    if kind == "prompt" && accept {
        let text = policy
            .prompt_text
            .clone()
            .or_else(|| default_prompt.map(str::to_owned));
        if let Some(text) = text {
            params["promptText"] = text.into();
        }
    }
    (accept, ("Page.handleJavaScriptDialog", params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_accepts_alerts_and_dismisses_the_rest() {
        let policy = DialogPolicy::default();
        let (accept, (method, params)) = answer(&policy, "alert", None);
        assert!(accept);
        assert_eq!(method, "Page.handleJavaScriptDialog");
        assert_eq!(params, json!({ "accept": true }));
        let (accept, _) = answer(&policy, "confirm", None);
        assert!(!accept);
    }
}

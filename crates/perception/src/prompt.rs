//! The system prompt, assembled fresh for every step.
//!
//! Order (most stable first, so providers can cache the prefix): our base
//! rules, the user's own instructions, the plan, completed sub-goals (folds),
//! site tips, a suggested workflow, the pending nudge, guidance from the
//! user, then the task itself and the per-step facts: state, URL, step
//! budget, and an urgency line when few steps remain.

use std::fmt::Write as _;

use lumen_core::TaskState;

/// Our base rules for browsing agents. Short on purpose: every token here is
/// paid on every step. They name no tools: each adapter describes its own
/// tools (and their names) in its provider's format.
pub const BASE_RULES: &str = "\
Coordinates are pixels of the newest screenshot; an older, smaller one is only for comparison.
- Finish as soon as the answer is visible; if the task cannot be done, finish with failure and \
say why.
- Prefer opening known URLs directly. Dismiss cookie banners and pop-ups first.
- Click an input before typing; check each form action on the next screenshot.
- Never invent an answer you have not seen.";

/// Everything the prompt is built from for one step.
#[derive(Debug, Clone, Copy, Default)]
pub struct PromptParts<'a> {
    /// The task.
    pub instruction: &'a str,
    /// Extra system instructions from the caller.
    pub user_prompt: Option<&'a str>,
    /// A plan from the planner pass.
    pub plan: Option<&'a str>,
    /// Folded sub-goals, oldest first.
    pub folds: &'a [String],
    /// Site-specific tips for the current URL.
    pub site_tips: &'a [String],
    /// A suggested workflow: its name and steps.
    pub workflow: Option<(&'a str, &'a [String])>,
    /// The pending nudge text.
    pub nudge: Option<&'a str>,
    /// Guidance the user sent during the run.
    pub guidance: &'a [String],
    /// A notice of ours for this step (e.g. after a backtrack). Never page
    /// text: what the page says goes in the user turn, quoted.
    pub notice: Option<&'a str>,
    /// The task state.
    pub state: Option<&'a TaskState>,
    /// The current URL.
    pub url: &'a str,
    /// Step index, from 0.
    pub step: u32,
    /// The step budget.
    pub max_steps: u32,
}

/// Characters of the current URL shown in the system prompt.
pub const MAX_URL_CHARS: usize = 300;

/// Steps left at or below which the urgency line appears: 3, or 10 % of the
/// budget when that is more.
pub fn urgency_threshold(max_steps: u32) -> u32 {
    (max_steps / 10).max(3)
}

/// Builds the system prompt for one step.
pub fn build_system_prompt(p: &PromptParts<'_>) -> String {
    let mut out = String::with_capacity(2048);
    out.push_str(BASE_RULES);
    let mut section = |title: &str, body: &str| {
        if !body.trim().is_empty() {
            let _ = write!(out, "\n\n{title}\n{}", body.trim_end());
        }
    };
    section("INSTRUCTIONS FROM THE USER:", p.user_prompt.unwrap_or(""));
    section("PLAN:", p.plan.unwrap_or(""));
    section("COMPLETED SUB-GOALS:", &numbered(p.folds));
    section("TIPS FOR THIS SITE:", &bulleted(p.site_tips));
    if let Some((name, steps)) = p.workflow {
        section(
            &format!("A WORKFLOW THAT WORKED BEFORE ({name}):"),
            &numbered(steps),
        );
    }
    section("ATTENTION:", p.nudge.unwrap_or(""));
    section(
        "MESSAGES FROM THE USER DURING THE RUN:",
        &bulleted(p.guidance),
    );
    section("NOTICE:", p.notice.unwrap_or(""));
    section("TASK:", p.instruction);
    if let Some(state) = p.state.filter(|s| !s.is_empty()) {
        section(
            "STATE:",
            &serde_json::Value::Object(state.clone()).to_string(),
        );
    }
    let remaining = p.max_steps.saturating_sub(p.step);
    // The URL is the one page-chosen text left here: capped.
    let url = match p.url.char_indices().nth(MAX_URL_CHARS) {
        Some((cut, _)) => format!("{}…", &p.url[..cut]),
        None => p.url.to_owned(),
    };
    let _ = write!(
        out,
        "\n\nCurrent URL: {}\nStep {} of {}.",
        url,
        p.step + 1,
        p.max_steps
    );
    if remaining <= urgency_threshold(p.max_steps) {
        let _ = write!(
            out,
            "\nURGENT: only {remaining} step(s) left. Terminate now with the best answer you have if you cannot finish."
        );
    }
    out
}

fn numbered(items: &[String]) -> String {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}\n", i + 1))
        .collect()
}

fn bulleted(items: &[String]) -> String {
    items.iter().map(|s| format!("- {s}\n")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sections_appear_in_order_and_empty_ones_are_left_out() {
        let folds = vec!["Logged in".to_string()];
        let tips = vec!["Use the search box".to_string()];
        let steps = vec!["Open search".to_string(), "Type the title".to_string()];
        let guidance = vec!["Prefer paperbacks".to_string()];
        let mut state = TaskState::new();
        state.insert("cheapest".into(), json!("£3.49"));
        let p = PromptParts {
            instruction: "Find the cheapest book",
            user_prompt: Some("Be brief."),
            plan: Some("1. search 2. sort"),
            folds: &folds,
            site_tips: &tips,
            workflow: Some(("book search", &steps)),
            nudge: Some("You repeated yourself."),
            guidance: &guidance,
            notice: None,
            state: Some(&state),
            url: "http://127.0.0.1/books",
            step: 2,
            max_steps: 30,
        };
        let s = build_system_prompt(&p);
        let order = [
            "INSTRUCTIONS FROM THE USER:\nBe brief.",
            "PLAN:",
            "COMPLETED SUB-GOALS:\n1. Logged in",
            "TIPS FOR THIS SITE:\n- Use the search box",
            "A WORKFLOW THAT WORKED BEFORE (book search):\n1. Open search\n2. Type the title",
            "ATTENTION:\nYou repeated yourself.",
            "MESSAGES FROM THE USER DURING THE RUN:\n- Prefer paperbacks",
            "TASK:\nFind the cheapest book",
            "STATE:\n{\"cheapest\":\"£3.49\"}",
            "Current URL: http://127.0.0.1/books\nStep 3 of 30.",
        ];
        let mut at = 0;
        for part in order {
            let i = s[at..]
                .find(part)
                .unwrap_or_else(|| panic!("missing or out of order: {part}\n{s}"));
            at += i + part.len();
        }
        assert!(!s.contains("NOTICE"), "empty sections are omitted");
        assert!(!s.contains("URGENT"));
    }

    #[test]
    fn urgency_appears_near_the_limit() {
        assert_eq!(urgency_threshold(20), 3);
        assert_eq!(urgency_threshold(50), 5);
        let p = |step| PromptParts {
            instruction: "t",
            url: "u",
            step,
            max_steps: 20,
            ..PromptParts::default()
        };
        assert!(!build_system_prompt(&p(16)).contains("URGENT"));
        let s = build_system_prompt(&p(17));
        assert!(s.contains("URGENT: only 3 step(s) left"), "{s}");
        assert!(build_system_prompt(&p(19)).contains("only 1 step(s) left"));
    }
}

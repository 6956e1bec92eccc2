//! Variables of `lumen replay`: `{{name}}` placeholders written into a
//! trace, and values the model typed that also appear in the recorded task
//! (task "Search for Paris hotels", typed "Paris"), which become variables
//! `v1`, `v2`… in the order they were first typed (a whole word or phrase
//! of the task, ASCII case ignored; the same value typed again is the same
//! variable). `--var name=value` replaces either; a variable not set keeps
//! its recorded value.
//!
//! `<secret:NAME>` placeholders are never variables: typed text holding one
//! is left exactly as recorded (the router fills it at type time).

use lumen::{Action, ActionCall};
use serde_json::{Value, json};

use crate::exit::CliError;

/// A variable the replay knows about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Variable {
    pub(super) name: String,
    /// The recorded value (`None` for a `{{name}}` placeholder).
    pub(super) recorded: Option<String>,
    /// The 1-based steps that type it (detected variables).
    pub(super) steps: Vec<u32>,
    /// The value `--var` gave it.
    pub(super) set: Option<String>,
}

impl Variable {
    /// What the replay types for it, if anything replaces the placeholder.
    fn value(&self) -> Option<&str> {
        self.set.as_deref().or(self.recorded.as_deref())
    }

    pub(super) fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "source": if self.recorded.is_some() { "task" } else { "placeholder" },
            "recorded": self.recorded,
            "steps": self.steps,
            "value": self.value(),
        })
    }

    /// One line of the human listing.
    pub(super) fn describe(&self) -> String {
        let what = match &self.recorded {
            Some(recorded) => format!(
                "{recorded:?} (from the task, typed at step {})",
                self.steps
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "a {{placeholder}} in the trace".to_owned(),
        };
        match &self.set {
            Some(set) => format!("{} = {what} → {set:?}", self.name),
            None => format!("{} = {what}", self.name),
        }
    }
}

/// The variables of a trace. Rewrites every detected value in `actions`
/// (one list per step, with its 1-based step number) into its `{{vN}}`
/// placeholder, then applies the `--var` specs; a spec naming no variable
/// is a configuration error.
pub(super) fn detect(
    instruction: &str,
    actions: &mut [(u32, &mut Vec<ActionCall>)],
    start_url: &str,
    specs: &[String],
) -> Result<Vec<Variable>, CliError> {
    let mut vars: Vec<Variable> = Vec::new();
    for (step, calls) in actions.iter_mut() {
        for call in calls.iter_mut() {
            let Action::Type { text } = &mut call.action else {
                continue;
            };
            let value = text.trim();
            if text.contains("<secret:")
                || text.contains("{{")
                || !value.chars().any(char::is_alphanumeric)
                || words(instruction, value).is_empty()
            {
                continue;
            }
            let at = vars
                .iter()
                .position(|v| {
                    v.recorded
                        .as_deref()
                        .is_some_and(|r| r.eq_ignore_ascii_case(value))
                })
                .unwrap_or_else(|| {
                    vars.push(Variable {
                        name: format!("v{}", vars.len() + 1),
                        recorded: Some(value.to_owned()),
                        steps: Vec::new(),
                        set: None,
                    });
                    vars.len() - 1
                });
            let var = &mut vars[at];
            if var.steps.last() != Some(step) {
                var.steps.push(*step);
            }
            *text = text.replacen(value, &format!("{{{{{}}}}}", var.name), 1);
        }
    }
    // Placeholders written into the trace by hand.
    let mut texts = vec![start_url.to_owned()];
    for (_, calls) in actions.iter() {
        for call in calls.iter() {
            match &call.action {
                Action::Type { text } if !text.contains("<secret:") => texts.push(text.clone()),
                Action::Goto { url } => texts.push(url.clone()),
                _ => {}
            }
        }
    }
    for text in &texts {
        for name in placeholders(text) {
            if !vars.iter().any(|v| v.name == name) {
                vars.push(Variable {
                    name: name.to_owned(),
                    recorded: None,
                    steps: Vec::new(),
                    set: None,
                });
            }
        }
    }
    for (name, value) in parse_vars(specs)? {
        let Some(var) = vars.iter_mut().find(|v| v.name == name) else {
            let known: Vec<String> = vars.iter().map(|v| v.name.clone()).collect();
            return Err(CliError::config(format!(
                "--var {name}: the trace has no variable {name:?} ({}); \
                 `lumen replay <trace> --json` lists them",
                if known.is_empty() {
                    "it has none".to_owned()
                } else {
                    format!("it has {}", known.join(", "))
                }
            )));
        };
        var.set = Some(value);
    }
    Ok(vars)
}

/// The task as replayed: each detected value set by `--var` replaced.
pub(super) fn instruction(instruction: &str, vars: &[Variable]) -> String {
    let mut out = instruction.to_owned();
    for v in vars {
        if let (Some(recorded), Some(set)) = (&v.recorded, &v.set) {
            for (start, end) in words(&out.clone(), recorded).into_iter().rev() {
                out.replace_range(start..end, set);
            }
        }
    }
    out
}

/// The byte ranges where `needle` appears in `hay` as whole words (ASCII
/// case ignored): not run into a letter or digit on either side.
fn words(hay: &str, needle: &str) -> Vec<(usize, usize)> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.is_empty() || n.len() > h.len() {
        return Vec::new();
    }
    (0..=h.len() - n.len())
        .filter(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
        .filter(|&i| {
            let before = hay[..i].chars().next_back();
            let after = hay[i + n.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
        .map(|i| (i, i + n.len()))
        .collect()
}

/// The names of the `{{name}}` placeholders in `text`.
fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        let name = &after[..close];
        if is_name(name) {
            out.push(name);
        }
        rest = &after[close + 2..];
    }
    out
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
}

fn parse_vars(specs: &[String]) -> Result<Vec<(String, String)>, CliError> {
    specs
        .iter()
        .map(|spec| {
            spec.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.to_owned()))
                .filter(|(k, _)| is_name(k))
                .ok_or_else(|| {
                    CliError::config(format!(
                        "--var {spec:?} must look like name=value (a name of letters, digits, \
                         `_`, `-` or `.`)"
                    ))
                })
        })
        .collect()
}

/// Replaces every `{{name}}` in `text` whose variable has a value, in one
/// pass: a value holding `{{…}}` is typed as it is.
pub(super) fn substitute(text: &str, vars: &[Variable]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let value = after.find("}}").and_then(|close| {
            let name = &after[..close];
            vars.iter()
                .find(|v| v.name == name)
                .and_then(Variable::value)
                .map(|value| (value, close))
        });
        match value {
            Some((value, close)) => {
                out.push_str(value);
                rest = &after[close + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `action` with its typed text and URL filled in.
pub(super) fn substitute_action(action: &Action, vars: &[Variable]) -> Action {
    match action {
        Action::Type { text } if !text.contains("<secret:") => Action::Type {
            text: substitute(text, vars),
        },
        Action::Goto { url } => Action::Goto {
            url: substitute(url, vars),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> ActionCall {
        ActionCall::new("t", Action::Type { text: text.into() })
    }

    fn detect_in(
        task: &str,
        steps: &mut [Vec<ActionCall>],
        specs: &[&str],
    ) -> Result<Vec<Variable>, CliError> {
        let mut refs: Vec<(u32, &mut Vec<ActionCall>)> = steps
            .iter_mut()
            .enumerate()
            .map(|(i, s)| (u32::try_from(i).unwrap() + 1, s))
            .collect();
        let specs: Vec<String> = specs.iter().map(|s| (*s).to_owned()).collect();
        detect(task, &mut refs, "https://x.test/", &specs)
    }

    fn text_of(call: &ActionCall) -> &str {
        match &call.action {
            Action::Type { text } => text,
            _ => "",
        }
    }

    #[test]
    fn a_typed_value_from_the_task_becomes_a_variable() {
        let mut steps = vec![
            vec![typed("Paris\n")],
            vec![typed("2 adults")],
            vec![typed("paris")],
        ];
        let vars = detect_in(
            "Search for Paris hotels for 2 adults",
            &mut steps,
            &["v1=Rome"],
        )
        .unwrap();
        assert_eq!(vars.len(), 2, "{vars:?}");
        assert_eq!(
            (vars[0].name.as_str(), vars[0].recorded.as_deref()),
            ("v1", Some("Paris"))
        );
        assert_eq!(vars[0].steps, vec![1, 3]);
        assert_eq!(text_of(&steps[0][0]), "{{v1}}\n");
        assert_eq!(
            substitute(text_of(&steps[0][0]), &vars),
            "Rome\n",
            "the newline around the value stays"
        );
        // Unset, a variable types what was recorded.
        assert_eq!(substitute(text_of(&steps[1][0]), &vars), "2 adults");
        // Typed in another case, it is the same variable.
        assert_eq!(substitute(text_of(&steps[2][0]), &vars), "Rome");
        assert_eq!(
            instruction("Search for Paris hotels for 2 adults", &vars),
            "Search for Rome hotels for 2 adults"
        );
    }

    #[test]
    fn the_same_value_typed_twice_is_one_variable() {
        let mut steps = vec![vec![typed("Kyoto")], vec![typed("Kyoto")]];
        let vars = detect_in("Book Kyoto", &mut steps, &[]).unwrap();
        assert_eq!(vars.len(), 1);
        assert_eq!(vars[0].steps, vec![1, 2]);
    }

    #[test]
    fn secrets_parts_of_words_and_values_not_in_the_task_are_not_variables() {
        let mut steps = vec![vec![
            typed("<secret:pw>"),
            typed("Par"),
            typed("hello"),
            typed("  "),
            typed("!"),
        ]];
        let vars = detect_in("Log in with <secret:pw> and search Paris!", &mut steps, &[]).unwrap();
        assert!(vars.is_empty(), "{vars:?}");
        assert_eq!(text_of(&steps[0][0]), "<secret:pw>");
        assert_eq!(
            substitute_action(&steps[0][0].action, &vars),
            steps[0][0].action
        );
    }

    #[test]
    fn placeholders_keep_working_and_an_unknown_name_is_an_error() {
        let mut steps = vec![vec![
            typed("{{email}}"),
            ActionCall::new(
                "g",
                Action::Goto {
                    url: "https://x.test/item/{{id}}?q={{nope}}".into(),
                },
            ),
        ]];
        let vars = detect_in("Sign up", &mut steps, &["email=bob@example.com", "id=7"]).unwrap();
        assert_eq!(
            substitute_action(&steps[0][0].action, &vars),
            Action::Type {
                text: "bob@example.com".into()
            }
        );
        assert_eq!(
            substitute_action(&steps[0][1].action, &vars),
            Action::Goto {
                url: "https://x.test/item/7?q={{nope}}".into()
            }
        );
        let err = detect_in("Sign up", &mut steps, &["city=Rome"]).unwrap_err();
        assert!(err.message.contains("email, id, nope"), "{}", err.message);
        assert!(detect_in("x", &mut steps, &["novalue"]).is_err());
        assert!(detect_in("x", &mut steps, &["=x"]).is_err());
    }

    #[test]
    fn a_value_holding_braces_is_typed_as_it_is() {
        let mut steps = vec![vec![typed("Oslo")], vec![typed("Bergen")]];
        let vars = detect_in("Oslo to Bergen", &mut steps, &["v1={{v2}}"]).unwrap();
        assert_eq!(substitute(text_of(&steps[0][0]), &vars), "{{v2}}");
    }
}

//! `lumen browser check|uncheck|select|get|is|find`: the element commands.
//! Each names an element by a snapshot ref (`@e3`) or a CSS selector (its
//! first match) and reads or sets it in one call inside the page (`check`
//! adds a real click, and a read of the new state, only when the state
//! must change).

use clap::Subcommand;
use lumen::LumenError;
use lumen::browser::{CheckResult, ElementQuery, ElementTarget, PageLink, SelectResult};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{State, fail, refusal, saved_ref};
use crate::exit::CliError;

/// `lumen browser get …`.
#[derive(Debug, Subcommand, Serialize, Deserialize)]
pub(super) enum Get {
    /// The element's rendered text.
    Text { target: String },
    /// A form field's value.
    Value { target: String },
    /// An attribute's value (`null` when absent).
    Attribute { name: String, target: String },
    /// The element's box in viewport CSS pixels: x y width height.
    Box { target: String },
    /// The page's title.
    Title,
    /// The page's URL.
    Url,
}

/// `lumen browser is …`.
#[derive(Debug, Subcommand, Serialize, Deserialize)]
pub(super) enum Is {
    /// Whether the element has a box on screen and is not hidden.
    Visible { target: String },
    /// Whether the element is not disabled.
    Enabled { target: String },
    /// Whether the checkbox, radio button or switch is checked.
    Checked { target: String },
}

/// `lumen browser find …`.
#[derive(Debug, Subcommand, Serialize, Deserialize)]
pub(super) enum Find {
    /// Elements of this ARIA role (`button`, `link`, `textbox`…).
    Role {
        role: String,
        /// Only those whose accessible name contains this (any case).
        #[arg(long)]
        name: Option<String>,
    },
    /// Elements whose accessible name contains this text (any case).
    Text { text: String },
    /// Form fields whose label (accessible name) contains this (any case).
    Label { label: String },
}

/// The element a command names: `@eN` from the last snapshot, or a CSS
/// selector.
pub(super) fn element<'a>(
    state: &'a State,
    target: &'a str,
) -> Result<ElementTarget<'a>, CliError> {
    if target.trim().is_empty() {
        return Err(CliError::config(
            "name an element: a ref like @e3 from `lumen browser snapshot`, or a CSS selector",
        ));
    }
    if target.starts_with('@') {
        return Ok(ElementTarget::Ref(saved_ref(state, target)?));
    }
    Ok(ElementTarget::Selector(target))
}

/// A selector that is invalid or matches nothing, an element that has no
/// value: exit code 1, with the page's reason.
pub(super) fn element_error(e: LumenError) -> CliError {
    match e {
        LumenError::InvalidData { .. } => CliError::failure(e.to_string()),
        other => fail(other),
    }
}

/// Reads `what` from `target`.
async fn read(
    link: &PageLink,
    state: &State,
    target: &str,
    what: &ElementQuery,
) -> Result<Value, CliError> {
    link.query(element(state, target)?, what)
        .await
        .map_err(element_error)?
        .map_err(|spot| refusal(target, spot))
}

/// A value as a line of text: strings as they are, `null` as nothing.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `get`, except `title` and `url` (answered without attaching).
pub(super) async fn get(
    link: &PageLink,
    state: &State,
    what: &Get,
) -> Result<(Value, String), CliError> {
    Ok(match what {
        Get::Text { target } => {
            let v = read(link, state, target, &ElementQuery::Text).await?;
            (json!({ "text": v }), shown(&v))
        }
        Get::Value { target } => {
            let v = read(link, state, target, &ElementQuery::Value).await?;
            (json!({ "value": v }), shown(&v))
        }
        Get::Attribute { name, target } => {
            let v = read(link, state, target, &ElementQuery::Attribute(name.clone())).await?;
            (json!({ "attribute": name, "value": v }), shown(&v))
        }
        Get::Box { target } => {
            let v = read(link, state, target, &ElementQuery::Box).await?;
            if v.is_null() {
                return Err(CliError::failure(format!(
                    "{target} has no box (hidden, or not rendered)"
                )));
            }
            let n = |k: &str| v[k].as_f64().unwrap_or(0.0);
            (
                json!({ "box": v }),
                format!("{} {} {} {}", n("x"), n("y"), n("width"), n("height")),
            )
        }
        Get::Title | Get::Url => (Value::Null, String::new()),
    })
}

/// `is visible|enabled|checked`: prints `true` or `false` (exit code 0
/// either way).
pub(super) async fn is(
    link: &PageLink,
    state: &State,
    what: &Is,
) -> Result<(Value, String), CliError> {
    let (key, target, query) = match what {
        Is::Visible { target } => ("visible", target, ElementQuery::Visible),
        Is::Enabled { target } => ("enabled", target, ElementQuery::Enabled),
        Is::Checked { target } => ("checked", target, ElementQuery::Checked),
    };
    let v = read(link, state, target, &query).await?;
    let b = v.as_bool().unwrap_or(false);
    Ok((json!({ key: b }), b.to_string()))
}

/// `check` (`want` true) and `uncheck`.
pub(super) async fn check(
    link: &PageLink,
    state: &State,
    target: &str,
    want: bool,
) -> Result<(Value, String), CliError> {
    let word = if want { "checked" } else { "unchecked" };
    let changed = match link
        .set_checked(element(state, target)?, want)
        .await
        .map_err(element_error)?
    {
        CheckResult::Changed => true,
        CheckResult::Unchanged => false,
        CheckResult::Refused(spot) => return Err(refusal(target, spot)),
        CheckResult::NotCheckable(what) => {
            return Err(CliError::failure(format!(
                "{target} is {what}, which is no checkbox, radio button or switch"
            )));
        }
        CheckResult::RadioUncheck => {
            return Err(CliError::failure(format!(
                "{target} is a radio button, which cannot be unchecked; check another one of \
                 its group"
            )));
        }
        CheckResult::Unmoved => {
            return Err(CliError::failure(format!(
                "{target} was clicked but is still not {word} (disabled, or the page undid it)"
            )));
        }
        other => return Err(CliError::failure(format!("{target}: {other:?}"))),
    };
    let text = if changed {
        "ok".to_owned()
    } else {
        format!("ok (already {word})")
    };
    Ok((
        json!({ "ok": true, "checked": want, "changed": changed }),
        text,
    ))
}

/// `select <target> <value>…`.
pub(super) async fn select(
    link: &PageLink,
    state: &State,
    target: &str,
    values: &[String],
) -> Result<(Value, String), CliError> {
    let result = link
        .select_options(element(state, target)?, values)
        .await
        .map_err(element_error)?
        .map_err(|spot| refusal(target, spot))?;
    match result {
        SelectResult::Selected(values) => Ok((
            json!({ "ok": true, "values": values }),
            format!("ok ({})", values.join(", ")),
        )),
        SelectResult::NotSelect(what) => Err(CliError::failure(format!(
            "{target} is {what}, not a <select>; for a custom list, click its options"
        ))),
        SelectResult::Disabled => Err(CliError::failure(format!("{target} is disabled"))),
        SelectResult::NotMultiple => Err(CliError::failure(format!(
            "{target} takes one choice; give one value"
        ))),
        SelectResult::NoOption { wanted, available } => Err(CliError::failure(format!(
            "{target} has no option {wanted:?} (by value or label); its options: {}",
            available
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        other => Err(CliError::failure(format!("{target}: {other:?}"))),
    }
}

/// The roles `find label` looks among: the form fields.
const FIELDS: &[&str] = &[
    "textbox",
    "searchbox",
    "combobox",
    "listbox",
    "checkbox",
    "radio",
    "switch",
    "slider",
    "spinbutton",
];

/// `find`: the nodes of a fresh snapshot (`snap`, whose refs are saved)
/// that match; none is a failure.
pub(super) fn find(
    snap: &lumen::browser::AxSnapshot,
    how: &Find,
) -> Result<(Value, String), CliError> {
    let has = |hay: &str, needle: &str| hay.to_lowercase().contains(&needle.to_lowercase());
    let (matches, what): (Vec<_>, String) = match how {
        Find::Role { role, name } => (
            snap.nodes
                .iter()
                .filter(|n| n.role.eq_ignore_ascii_case(role))
                .filter(|n| name.as_deref().is_none_or(|want| has(&n.name, want)))
                .collect(),
            match name {
                Some(name) => format!("role {role} named {name:?}"),
                None => format!("role {role}"),
            },
        ),
        Find::Text { text } => (
            snap.nodes
                .iter()
                .filter(|n| !n.name.is_empty() && has(&n.name, text))
                .collect(),
            format!("the text {text:?}"),
        ),
        Find::Label { label } => (
            snap.nodes
                .iter()
                .filter(|n| FIELDS.contains(&n.role.as_str()) && has(&n.name, label))
                .collect(),
            format!("a field labelled {label:?}"),
        ),
    };
    if matches.is_empty() {
        return Err(CliError::failure(format!(
            "nothing on the page has {what}; `lumen browser snapshot` shows what there is"
        )));
    }
    let text = matches
        .iter()
        .map(|n| n.line(n.depth))
        .collect::<Vec<_>>()
        .join("\n");
    Ok((json!({ "count": matches.len(), "matches": matches }), text))
}

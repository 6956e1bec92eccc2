//! [`PageLink`]'s element queries and form controls for one-shot commands
//! (`lumen browser get text @e3`, `is checked '#subscribe'`, `check @e7`,
//! `select @e4 fr`): an element named either by a snapshot ref (checked
//! against its document mark, as [`PageLink::locate`] does) or by a CSS
//! selector (its first match), read or set in one call inside the page.

use lumen_core::{LumenError, MouseButton, Result};
use serde_json::{Value, json};

use super::PageLink;
use super::refs::{ElementSpot, LOCATE_FN, SavedRef, spot_of};

/// An element a command names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementTarget<'a> {
    /// A snapshot ref, as the last snapshot saved it.
    Ref(SavedRef<'a>),
    /// A CSS selector; its first match in document order.
    Selector(&'a str),
}

/// What [`PageLink::query`] reads from an element.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElementQuery {
    /// Its rendered text (`innerText`; a field's value is not its text).
    Text,
    /// A form control's value (`input`, `textarea`, `select`).
    Value,
    /// An attribute (`null` when absent).
    Attribute(String),
    /// Its bounding box in viewport CSS pixels (`null` when it has none).
    Box,
    /// Whether it has a box and is not `visibility: hidden`.
    Visible,
    /// Whether it is not disabled (itself, a disabled fieldset or
    /// `aria-disabled`).
    Enabled,
    /// Whether it is checked (a checkbox, radio or `aria-checked`).
    Checked,
}

/// What [`PageLink::set_checked`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CheckResult {
    /// It was clicked and is now as asked.
    Changed,
    /// It already was as asked; nothing was clicked.
    Unchanged,
    /// It cannot be clicked (why, as for [`PageLink::locate`]).
    Refused(ElementSpot),
    /// It is no checkbox, radio or switch (the element described).
    NotCheckable(String),
    /// A radio button cannot be unchecked by clicking it.
    RadioUncheck,
    /// It was clicked, but the page kept its state (a handler undid it, or
    /// it is disabled).
    Unmoved,
}

/// What [`PageLink::select_options`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SelectResult {
    /// These options (their values) are now the selected ones.
    Selected(Vec<String>),
    /// It is no `<select>` (the element described).
    NotSelect(String),
    /// It is disabled.
    Disabled,
    /// No option has this value or label; the options it has (labels).
    NoOption {
        /// The value asked for.
        wanted: String,
        /// The labels of the options there are.
        available: Vec<String>,
    },
    /// Several values for a single-choice `<select>`.
    NotMultiple,
}

/// Page-side helpers shared by the functions below.
const HELPERS: &str = r#"
  const el = this.nodeType === 1 ? this : this.parentElement;
  const describe = (e) => '<' + e.tagName.toLowerCase() + (e.id ? ' id="' + e.id + '"' : '') + (e.type && e.tagName === 'INPUT' ? ' type="' + e.type + '"' : '') + '>';
  const checkable = (e) => (e.tagName === 'INPUT' && (e.type === 'checkbox' || e.type === 'radio')) || ['checkbox', 'radio', 'switch', 'menuitemcheckbox', 'menuitemradio'].includes(e.getAttribute('role'));
  const checked = (e) => e.tagName === 'INPUT' && (e.type === 'checkbox' || e.type === 'radio') ? e.checked : e.getAttribute('aria-checked') === 'true';
"#;

/// Reads one [`ElementQuery`] (`what`, `name`) from `this`.
const QUERY_FN: &str = r#"function(mark, prop, what, name) {
  HELPERS
  if (!el) return { kind: 'value', value: null };
  const box = () => { const r = el.getBoundingClientRect(); return r.width || r.height || el.getClientRects().length ? { x: r.x, y: r.y, width: r.width, height: r.height } : null; };
  let value;
  switch (what) {
    case 'text': value = el.innerText !== undefined ? el.innerText : el.textContent; break;
    case 'value':
      if (!('value' in el) || el.tagName === 'BUTTON' || el.tagName === 'LI' || el.tagName === 'OPTION') return { kind: 'novalue', by: describe(el) };
      value = el.value; break;
    case 'attribute': value = el.getAttribute(name); break;
    case 'box': value = box(); break;
    case 'visible': value = el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden' && (box() || { width: 0 }).width * (box() || { height: 0 }).height > 0; break;
    case 'enabled': value = !(el.matches(':disabled') || el.closest('[aria-disabled=true]')); break;
    case 'checked':
      if (!checkable(el)) return { kind: 'nocheck', by: describe(el) };
      value = checked(el); break;
  }
  return { kind: 'value', value: value === undefined ? null : value };
}"#;

/// Before `check`/`uncheck`: the element's state, and where to click it
/// when it must change (its label's box when the input itself has none, as
/// styled checkboxes hide theirs).
const CHECK_FN: &str = r#"function(mark, prop, want) {
  HELPERS
  if (!el || !checkable(el)) return { kind: 'nocheck', by: el ? describe(el) : 'a text node' };
  if (checked(el) === want) return { kind: 'same' };
  if (!want && (el.type === 'radio' || el.getAttribute('role') === 'radio')) return { kind: 'radio' };
  let spot = (LOCATE).call(el, mark, prop);
  if (spot.kind === 'nobox' && el.labels && el.labels.length) spot = (LOCATE).call(el.labels[0], mark, prop);
  return spot;
}"#;

/// `select`: picks options by value, else by label, and tells the page as
/// a person's choice would (`input`, then `change`, both bubbling).
const SELECT_FN: &str = r#"function(mark, prop, values) {
  HELPERS
  if (!el || el.tagName !== 'SELECT') return { kind: 'noselect', by: el ? describe(el) : 'a text node' };
  if (el.disabled) return { kind: 'disabled' };
  if (values.length > 1 && !el.multiple) return { kind: 'single' };
  const opts = Array.from(el.options);
  const label = (o) => (o.label || o.textContent).trim();
  const picked = [];
  for (const v of values) {
    const o = opts.find(o => o.value === v) || opts.find(o => label(o) === v.trim()) || opts.find(o => label(o).toLowerCase() === v.trim().toLowerCase());
    if (!o) return { kind: 'nooption', wanted: v, available: opts.map(label) };
    picked.push(o);
  }
  opts.forEach(o => { o.selected = picked.includes(o); });
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return { kind: 'selected', values: picked.map(o => o.value) };
}"#;

/// Runs `f(mark, prop, ...args)` on the first element matching `sel`, with
/// a mark check that always passes (a selector is looked up now, in the
/// document there is).
const ON_SELECTOR_FN: &str = r#"(function(sel, f, args) {
  let el;
  try { el = document.querySelector(sel); } catch (e) { return { kind: 'badselector', why: String(e.message || e) }; }
  if (!el) return { kind: 'nomatch' };
  return f.call(el, undefined, '__lumenNoSuchProperty', ...args);
})"#;

fn function(body: &str) -> String {
    body.replace("HELPERS", HELPERS)
        .replace("LOCATE", LOCATE_FN)
}

impl PageLink {
    /// Runs the page function `function(mark, prop, ...args)` with `this`
    /// bound to the element `target` names and returns its value, or why
    /// the element cannot be reached (removed, or another document).
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for a selector that is invalid or
    /// matches nothing; otherwise as [`call`](Self::call).
    pub async fn on_target(
        &self,
        target: ElementTarget<'_>,
        function: &str,
        args: Vec<Value>,
    ) -> Result<std::result::Result<Value, ElementSpot>> {
        let selector = match target {
            ElementTarget::Ref(r) => return self.on_element(r, function, args, Vec::new()).await,
            ElementTarget::Selector(s) => s,
        };
        let expression = format!(
            "{ON_SELECTOR_FN}({}, {function}, {})",
            json!(selector),
            Value::Array(args)
        );
        let v = self.evaluate(&expression).await?;
        match v["kind"].as_str() {
            Some("badselector") => Err(LumenError::invalid_data(
                "selector",
                format!(
                    "{selector:?} is not a valid CSS selector ({})",
                    v["why"].as_str().unwrap_or("")
                ),
            )),
            Some("nomatch") => Err(LumenError::invalid_data(
                "selector",
                format!("no element matches {selector:?}"),
            )),
            _ => Ok(Ok(v)),
        }
    }

    /// Reads `what` from the element `target` names: a string, number,
    /// boolean, box object or `null`.
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for a selector that matches nothing, a
    /// value asked of an element that has none, or checked asked of one
    /// that is no checkbox; otherwise as [`on_target`](Self::on_target).
    pub async fn query(
        &self,
        target: ElementTarget<'_>,
        what: &ElementQuery,
    ) -> Result<std::result::Result<Value, ElementSpot>> {
        let (kind, name) = match what {
            ElementQuery::Text => ("text", ""),
            ElementQuery::Value => ("value", ""),
            ElementQuery::Attribute(name) => ("attribute", name.as_str()),
            ElementQuery::Box => ("box", ""),
            ElementQuery::Visible => ("visible", ""),
            ElementQuery::Enabled => ("enabled", ""),
            ElementQuery::Checked => ("checked", ""),
        };
        let v = match self
            .on_target(target, &function(QUERY_FN), vec![json!(kind), json!(name)])
            .await?
        {
            Ok(v) => v,
            Err(spot) => return Ok(Err(spot)),
        };
        match v["kind"].as_str() {
            Some("novalue") => Err(LumenError::invalid_data(
                "element",
                format!("{} has no value", v["by"].as_str().unwrap_or("it")),
            )),
            Some("nocheck") => Err(LumenError::invalid_data(
                "element",
                format!(
                    "{} is no checkbox, radio button or switch",
                    v["by"].as_str().unwrap_or("it")
                ),
            )),
            _ => Ok(Ok(v["value"].clone())),
        }
    }

    /// Checks (`want` true) or unchecks the checkbox, radio button or
    /// switch `target` names: a real click at its centre (or its label's,
    /// when the input has no box) only when its state differs, refused as
    /// [`locate`](Self::locate) refuses; then reads the state again.
    ///
    /// # Errors
    /// As [`on_target`](Self::on_target).
    pub async fn set_checked(&self, target: ElementTarget<'_>, want: bool) -> Result<CheckResult> {
        let v = match self
            .on_target(target, &function(CHECK_FN), vec![json!(want)])
            .await?
        {
            Ok(v) => v,
            Err(spot) => return Ok(CheckResult::Refused(spot)),
        };
        match v["kind"].as_str() {
            Some("same") => return Ok(CheckResult::Unchanged),
            Some("radio") => return Ok(CheckResult::RadioUncheck),
            Some("nocheck") => {
                return Ok(CheckResult::NotCheckable(
                    v["by"].as_str().unwrap_or_default().to_owned(),
                ));
            }
            _ => {}
        }
        let at = match spot_of(v)? {
            ElementSpot::At(at) => at,
            spot => return Ok(CheckResult::Refused(spot)),
        };
        self.click(at, MouseButton::Left, 1).await?;
        let now = self.query(target, &ElementQuery::Checked).await?;
        Ok(match now {
            Ok(Value::Bool(b)) if b == want => CheckResult::Changed,
            Ok(_) => CheckResult::Unmoved,
            Err(spot) => CheckResult::Refused(spot),
        })
    }

    /// Selects the options of the `<select>` `target` names whose values
    /// (else labels) are `values`, and fires `input` and `change` as a
    /// person's choice does.
    ///
    /// # Errors
    /// As [`on_target`](Self::on_target).
    pub async fn select_options(
        &self,
        target: ElementTarget<'_>,
        values: &[String],
    ) -> Result<std::result::Result<SelectResult, ElementSpot>> {
        let v = match self
            .on_target(target, &function(SELECT_FN), vec![json!(values)])
            .await?
        {
            Ok(v) => v,
            Err(spot) => return Ok(Err(spot)),
        };
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        };
        Ok(Ok(match v["kind"].as_str() {
            Some("selected") => SelectResult::Selected(strings(&v["values"])),
            Some("noselect") => {
                SelectResult::NotSelect(v["by"].as_str().unwrap_or_default().to_owned())
            }
            Some("disabled") => SelectResult::Disabled,
            Some("single") => SelectResult::NotMultiple,
            Some("nooption") => SelectResult::NoOption {
                wanted: v["wanted"].as_str().unwrap_or_default().to_owned(),
                available: strings(&v["available"]),
            },
            _ => {
                return Err(LumenError::invalid_data(
                    "select",
                    format!("unexpected answer {v}"),
                ));
            }
        }))
    }

    /// How many elements match `selector` and have a box on screen (for
    /// `wait selector`).
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for an invalid selector; otherwise as
    /// [`call`](Self::call).
    pub async fn visible_matches(&self, selector: &str) -> Result<usize> {
        let expression = format!(
            "(() => {{ let all; try {{ all = document.querySelectorAll({}); }} catch (e) {{ \
             return {{ bad: String(e.message || e) }}; }} return {{ n: Array.from(all).filter(e \
             => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden')\
             .length }}; }})()",
            json!(selector)
        );
        let v = self.evaluate(&expression).await?;
        if let Some(why) = v["bad"].as_str() {
            return Err(LumenError::invalid_data(
                "selector",
                format!("{selector:?} is not a valid CSS selector ({why})"),
            ));
        }
        Ok(v["n"].as_u64().unwrap_or(0) as usize)
    }
}

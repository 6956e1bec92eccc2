//! The action vocabulary described as data: one [`ActionSchema`] per
//! [`Action`](crate::Action) type a client or model may be offered, with its
//! `type` tag, a one-line description and its fields.
//!
//! Every surface that describes actions renders from [`CATALOGUE`]: the
//! server's `GET /v1/tools` document (canonical form: camelCase names,
//! integer CSS pixels, see [`ActionSchema::json_schema`]) and the function
//! tools the model adapters offer (their own wire names and coordinate
//! units, projected from these entries). Tests decode an
//! [`ActionSchema::example`] of every entry as an `Action` and check that
//! each field survives the round trip and that no field of the variant is
//! left undescribed, so the catalogue cannot drift from `Action` silently.
//!
//! Descriptions are written for both readers (API clients and models), so
//! they name no coordinate unit: each rendering states its own.

use serde_json::{Map, Value, json};

/// One action type: its tag, what it does, and its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionSchema {
    /// The serde `type` tag, e.g. `"doubleClick"`.
    pub tag: &'static str,
    /// One line saying what the action does.
    pub description: &'static str,
    /// The fields besides `type`, in a stable order.
    pub fields: &'static [FieldSchema],
}

/// One field of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSchema {
    /// The field's name in `Action`'s JSON (camelCase), e.g. `"startX"`.
    pub name: &'static str,
    /// What kind of value it holds.
    pub kind: FieldKind,
    /// Whether an action without it fails to decode.
    pub required: bool,
    /// Inclusive lower bound: of the value for numbers, of the item count
    /// for key lists.
    pub min: Option<i64>,
    /// Inclusive upper bound, like `min`.
    pub max: Option<i64>,
    /// A short note on the field, or empty. For a coordinate, the name of
    /// the coordinate (`"start x"`); renderings add the unit.
    pub description: &'static str,
}

/// The kind of value a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A horizontal or vertical position (integer CSS pixels in `Action`).
    Coordinate,
    /// A whole number.
    Integer,
    /// A number with a fraction.
    Number,
    /// A string (text, a URL, a summary…).
    Text,
    /// A key chord: a list of key names.
    Keys,
    /// A mouse button: one of [`FieldKind::BUTTONS`].
    Button,
    /// A scroll direction: one of [`FieldKind::DIRECTIONS`].
    Direction,
    /// A scroll unit: one of [`FieldKind::SCROLL_UNITS`].
    ScrollUnit,
    /// How a run ended: one of [`FieldKind::STATUSES`].
    Status,
    /// Modifier keys held: an object of four booleans.
    Modifiers,
    /// A rectangle of the viewport: `{x0, y0, x1, y1}` coordinates.
    Region,
    /// Waypoints: a list of `{x, y}` coordinates.
    Path,
    /// Any JSON object.
    Object,
    /// `true` or `false`.
    Flag,
    /// A list of strings.
    Texts,
}

impl FieldKind {
    /// [`MouseButton`](crate::MouseButton) names, the default first.
    pub const BUTTONS: &'static [&'static str] = &["left", "right", "middle"];
    /// [`ScrollDirection`](crate::ScrollDirection) names.
    pub const DIRECTIONS: &'static [&'static str] = &["up", "down", "left", "right"];
    /// [`ScrollUnit`](crate::ScrollUnit) names, the default first.
    pub const SCROLL_UNITS: &'static [&'static str] = &["pixels", "clicks", "pages"];
    /// [`TerminateStatus`](crate::TerminateStatus) names.
    pub const STATUSES: &'static [&'static str] = &["success", "failure"];
    /// [`Modifiers`](crate::Modifiers) flags.
    pub const MODIFIERS: &'static [&'static str] = &["alt", "ctrl", "meta", "shift"];

    /// The names a value may take, for the kinds that are a choice of names.
    pub fn choices(self) -> Option<&'static [&'static str]> {
        match self {
            FieldKind::Button => Some(Self::BUTTONS),
            FieldKind::Direction => Some(Self::DIRECTIONS),
            FieldKind::ScrollUnit => Some(Self::SCROLL_UNITS),
            FieldKind::Status => Some(Self::STATUSES),
            _ => None,
        }
    }
}

impl FieldSchema {
    /// A required field without bounds or note.
    pub const fn new(name: &'static str, kind: FieldKind) -> Self {
        Self {
            name,
            kind,
            required: true,
            min: None,
            max: None,
            description: "",
        }
    }

    /// The same field, optional.
    pub const fn optional(mut self) -> Self {
        self.required = false;
        self
    }

    /// The same field with a lower bound.
    pub const fn at_least(mut self, min: i64) -> Self {
        self.min = Some(min);
        self
    }

    /// The same field with a note.
    pub const fn note(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    /// The field's JSON Schema in `Action`'s own form (integer CSS-pixel
    /// coordinates; notes are not rendered).
    pub fn json_schema(&self) -> Value {
        let int = json!({"type": "integer"});
        let bounded = |mut schema: Value, min_key: &str, max_key: &str| {
            if let Some(min) = self.min {
                schema[min_key] = json!(min);
            }
            if let Some(max) = self.max {
                schema[max_key] = json!(max);
            }
            schema
        };
        match self.kind {
            FieldKind::Coordinate => int,
            FieldKind::Integer => bounded(int, "minimum", "maximum"),
            FieldKind::Number => bounded(json!({"type": "number"}), "minimum", "maximum"),
            FieldKind::Text => json!({"type": "string"}),
            FieldKind::Keys => bounded(
                json!({"type": "array", "items": {"type": "string"}}),
                "minItems",
                "maxItems",
            ),
            FieldKind::Button
            | FieldKind::Direction
            | FieldKind::ScrollUnit
            | FieldKind::Status => {
                json!({"type": "string", "enum": self.kind.choices().unwrap_or_default()})
            }
            FieldKind::Modifiers => {
                let flags: Map<String, Value> = FieldKind::MODIFIERS
                    .iter()
                    .map(|m| ((*m).to_owned(), json!({"type": "boolean"})))
                    .collect();
                json!({"type": "object", "properties": flags})
            }
            FieldKind::Region => json!({
                "type": "object",
                "properties": {"x0": int, "y0": int, "x1": int, "y1": int},
                "required": ["x0", "y0", "x1", "y1"],
            }),
            FieldKind::Path => json!({
                "type": "array",
                "items": {"type": "object", "properties": {"x": int, "y": int}},
            }),
            FieldKind::Object => json!({"type": "object"}),
            FieldKind::Flag => json!({"type": "boolean"}),
            FieldKind::Texts => bounded(
                json!({"type": "array", "items": {"type": "string"}}),
                "minItems",
                "maxItems",
            ),
        }
    }

    /// A valid value of the field that is not its default (so it survives
    /// serialization, which omits defaults).
    pub fn example(&self) -> Value {
        let number = self.min.unwrap_or(0).max(2);
        match self.kind {
            FieldKind::Coordinate => json!(3),
            FieldKind::Integer => json!(self.max.map_or(number, |max| number.min(max))),
            FieldKind::Number => json!(number as f64 + 0.5),
            FieldKind::Text => json!("x"),
            FieldKind::Keys => json!(["ctrl", "a"]),
            FieldKind::Button
            | FieldKind::Direction
            | FieldKind::ScrollUnit
            | FieldKind::Status => {
                let choices = self.kind.choices().unwrap_or_default();
                json!(choices.get(1).or(choices.first()))
            }
            FieldKind::Modifiers => {
                let flags: Map<String, Value> = FieldKind::MODIFIERS
                    .iter()
                    .map(|m| ((*m).to_owned(), json!(true)))
                    .collect();
                Value::Object(flags)
            }
            FieldKind::Region => json!({"x0": 1, "y0": 2, "x1": 30, "y1": 40}),
            FieldKind::Path => json!([{"x": 5, "y": 6}]),
            FieldKind::Object => json!({"key": "value"}),
            FieldKind::Flag => json!(true),
            FieldKind::Texts => json!(["a.txt"]),
        }
    }
}

impl ActionSchema {
    /// The entry for a tag, if the catalogue has one.
    pub fn find(tag: &str) -> Option<&'static ActionSchema> {
        CATALOGUE.iter().find(|a| a.tag == tag)
    }

    /// The field called `name` (camelCase), if the action has one.
    pub fn field(&self, name: &str) -> Option<&'static FieldSchema> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// `{"type": "object", "properties": …, "required": […]}` of the
    /// fields in `Action`'s own form (without the `type` tag).
    pub fn json_schema(&self) -> Value {
        let properties: Map<String, Value> = self
            .fields
            .iter()
            .map(|f| (f.name.to_owned(), f.json_schema()))
            .collect();
        let required: Vec<&str> = self
            .fields
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect();
        json!({"type": "object", "properties": properties, "required": required})
    }

    /// An example of the action with every field set (to a non-default
    /// value), tag included: `{"type": "click", "x": 3, …}`.
    pub fn example(&self) -> Value {
        let mut value: Map<String, Value> = self
            .fields
            .iter()
            .map(|f| (f.name.to_owned(), f.example()))
            .collect();
        value.insert("type".into(), json!(self.tag));
        Value::Object(value)
    }
}

use FieldKind as K;

const fn field(name: &'static str, kind: FieldKind) -> FieldSchema {
    FieldSchema::new(name, kind)
}

const X: FieldSchema = field("x", K::Coordinate).note("x");
const Y: FieldSchema = field("y", K::Coordinate).note("y");
const MODIFIERS: FieldSchema = field("modifiers", K::Modifiers)
    .optional()
    .note("Modifier keys held.");
const BUTTON: FieldSchema = field("button", K::Button)
    .optional()
    .note("Which button (default left).");
const KEYS: FieldSchema = field("keys", K::Keys).at_least(1);

/// Every action type a client or model may be offered, in the order
/// `GET /v1/tools` lists them. The browser-toolset actions (refs, tabs,
/// page text) are not here: only Claude's browser toolset emits them.
pub const CATALOGUE: &[ActionSchema] = &[
    ActionSchema {
        tag: "click",
        description: "Press and release a mouse button at a point.",
        fields: &[X, Y, BUTTON, MODIFIERS],
    },
    ActionSchema {
        tag: "doubleClick",
        description: "Double-click at a point.",
        fields: &[X, Y, MODIFIERS],
    },
    ActionSchema {
        tag: "tripleClick",
        description: "Triple-click at a point (selects a line or field).",
        fields: &[X, Y, MODIFIERS],
    },
    ActionSchema {
        tag: "drag",
        description: "Drag from one point to another: press at the start, move, release at the end.",
        fields: &[
            field("startX", K::Coordinate).note("start x"),
            field("startY", K::Coordinate).note("start y"),
            field("endX", K::Coordinate).note("end x"),
            field("endY", K::Coordinate).note("end y"),
            field("path", K::Path)
                .optional()
                .note("Points to pass through between start and end."),
        ],
    },
    ActionSchema {
        tag: "hover",
        description: "Move the pointer to a point.",
        fields: &[X, Y],
    },
    ActionSchema {
        tag: "mouseDown",
        description: "Press a mouse button (at a point, or where the pointer is).",
        fields: &[X.optional(), Y.optional(), BUTTON],
    },
    ActionSchema {
        tag: "mouseUp",
        description: "Release a mouse button (at a point, or where the pointer is).",
        fields: &[X.optional(), Y.optional(), BUTTON],
    },
    ActionSchema {
        tag: "scroll",
        description: "Scroll with the mouse wheel at a point.",
        fields: &[
            X,
            Y,
            field("direction", K::Direction),
            field("amount", K::Number).note("How far, in `unit`s."),
            field("unit", K::ScrollUnit).optional().note(
                "pixels (the default), wheel clicks (100 px each) or pages (87.5 % of the viewport).",
            ),
            MODIFIERS,
        ],
    },
    ActionSchema {
        tag: "type",
        description: "Type text into the focused element.",
        fields: &[field("text", K::Text).note("`<secret:NAME>` placeholders are filled in.")],
    },
    ActionSchema {
        tag: "keyPress",
        description: "Press a key chord, e.g. [\"Control\", \"a\"] or [\"Enter\"].",
        fields: &[KEYS],
    },
    ActionSchema {
        tag: "holdKey",
        description: "Hold a key chord down for a while, then release it.",
        fields: &[
            KEYS,
            field("durationMs", K::Integer)
                .at_least(0)
                .note("Milliseconds."),
        ],
    },
    ActionSchema {
        tag: "wait",
        description: "Wait for the page.",
        fields: &[field("ms", K::Integer).at_least(0).note("Milliseconds.")],
    },
    ActionSchema {
        tag: "goto",
        description: "Open an absolute URL in the current tab.",
        fields: &[field("url", K::Text)],
    },
    ActionSchema {
        tag: "back",
        description: "Go back in the tab's history.",
        fields: &[],
    },
    ActionSchema {
        tag: "forward",
        description: "Go forward in the tab's history.",
        fields: &[],
    },
    ActionSchema {
        tag: "screenshot",
        description: "Take a fresh screenshot without acting.",
        fields: &[],
    },
    ActionSchema {
        tag: "cursorPosition",
        description: "Report where the pointer is.",
        fields: &[],
    },
    ActionSchema {
        tag: "zoom",
        description: "Look closer: a screenshot of a region at higher resolution.",
        fields: &[field("region", K::Region)],
    },
    ActionSchema {
        tag: "writeState",
        description: "Replace the saved task state with `data`, a JSON object of facts for later steps.",
        fields: &[field("data", K::Object)],
    },
    ActionSchema {
        tag: "terminate",
        description: "Finish: `result` is the answer, or why the task cannot be done.",
        fields: &[field("status", K::Status), field("result", K::Text)],
    },
    ActionSchema {
        tag: "delegate",
        description: "Hand a self-contained sub-task to a helper agent on this tab.",
        fields: &[
            field("instruction", K::Text),
            field("maxSteps", K::Integer)
                .optional()
                .at_least(1)
                .note("Its step budget (the loop's default when absent)."),
        ],
    },
    ActionSchema {
        tag: "fold",
        description: "Close a finished sub-goal with a one-line summary kept in the prompt.",
        fields: &[field("summary", K::Text)],
    },
    ActionSchema {
        tag: "pageText",
        description: "Read the text of the page (capped), for what the screenshot does not show.",
        fields: &[],
    },
    ActionSchema {
        tag: "listTabs",
        description: "List the open tabs: id, title and URL, the one in use marked.",
        fields: &[],
    },
    ActionSchema {
        tag: "newTab",
        description: "Open a new blank tab and use it.",
        fields: &[],
    },
    ActionSchema {
        tag: "switchTab",
        description: "Use another open tab.",
        fields: &[field("id", K::Text).note("The tab's id, from the tab list.")],
    },
    ActionSchema {
        tag: "closeTab",
        description: "Close an open tab.",
        fields: &[field("id", K::Text).note("The tab's id, from the tab list.")],
    },
    ActionSchema {
        tag: "answerDialog",
        description: "Answer the next dialog the page opens (alert, confirm, prompt, leave page): \
                      give the answer first, then do what opens it.",
        fields: &[
            field("accept", K::Flag).note("OK (true) or Cancel (false)."),
            field("text", K::Text)
                .optional()
                .note("What to type into a prompt."),
        ],
    },
    ActionSchema {
        tag: "chooseFiles",
        description: "Choose the files for the next file chooser (from the upload folder), \
                      then click the file input.",
        fields: &[field("paths", K::Texts)
            .at_least(1)
            .note("File paths inside the upload folder.")],
    },
    ActionSchema {
        tag: "requestHuman",
        description: "Hand the browser to a person for what only they can do (a one-time code, \
                      a CAPTCHA, confirming a payment); the run waits until they are done.",
        fields: &[field("reason", K::Text).note("What the person should do, and why.")],
    },
];

/// A camelCase name in snake_case (`startX` → `start_x`). Our JSON names
/// are camelCase (the catalogue's fields, the run options); a provider's
/// function arguments and the CLI's TOML config spell them in snake_case.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Action;

    /// Whether `GET /v1/tools` offers the variant. Exhaustive on purpose: a
    /// new variant does not compile until someone decides.
    fn catalogued(action: &Action) -> bool {
        match action {
            Action::Click { .. }
            | Action::DoubleClick { .. }
            | Action::TripleClick { .. }
            | Action::Drag { .. }
            | Action::Hover { .. }
            | Action::MouseDown { .. }
            | Action::MouseUp { .. }
            | Action::Scroll { .. }
            | Action::Type { .. }
            | Action::KeyPress { .. }
            | Action::HoldKey { .. }
            | Action::Wait { .. }
            | Action::Goto { .. }
            | Action::Back
            | Action::Forward
            | Action::Screenshot
            | Action::CursorPosition
            | Action::Zoom { .. }
            | Action::WriteState { .. }
            | Action::Terminate { .. }
            | Action::Delegate { .. }
            | Action::Fold { .. }
            | Action::PageText
            | Action::ListTabs
            | Action::NewTab
            | Action::SwitchTab { .. }
            | Action::CloseTab { .. }
            | Action::AnswerDialog { .. }
            | Action::ChooseFiles { .. }
            | Action::RequestHuman { .. } => true,
            Action::KeyDown { .. }
            | Action::KeyUp { .. }
            | Action::ReadPage { .. }
            | Action::FindElements { .. }
            | Action::FormInput { .. }
            | Action::ScrollToRef { .. }
            | Action::ClickRef { .. }
            | Action::HoverRef { .. }
            | Action::Reload
            | Action::FileUpload { .. }
            | Action::JavascriptExec { .. }
            | Action::ReadConsole
            | Action::ReadNetwork
            | Action::Invalid { .. } => false,
        }
    }

    #[test]
    fn every_entry_decodes_as_its_action_with_exactly_its_fields() {
        for entry in CATALOGUE {
            let value = entry.example();
            let action: Action =
                serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{value}: {e}"));
            assert!(catalogued(&action), "{value} decoded as {action:?}");
            assert_eq!(action.kind(), entry.tag, "{value}");
            // Nothing misspelt (silently ignored), nothing undescribed.
            let back = serde_json::to_value(&action).unwrap();
            assert_eq!(back, value, "{}: fields differ", entry.tag);
        }
    }

    #[test]
    fn a_required_field_left_out_fails_to_decode() {
        for entry in CATALOGUE {
            for f in entry.fields.iter().filter(|f| f.required) {
                let mut value = entry.example();
                value.as_object_mut().unwrap().remove(f.name);
                let decoded = serde_json::from_value::<Action>(value);
                assert!(decoded.is_err(), "{}.{} is not required", entry.tag, f.name);
            }
            for f in entry.fields.iter().filter(|f| !f.required) {
                let mut value = entry.example();
                value.as_object_mut().unwrap().remove(f.name);
                serde_json::from_value::<Action>(value)
                    .unwrap_or_else(|e| panic!("{}.{} is required: {e}", entry.tag, f.name));
            }
        }
    }

    #[test]
    fn the_catalogue_holds_every_action_the_server_advertises_once() {
        // The first 22 kinds in declaration order, then page text and the
        // tab actions (ref actions come from toolsets).
        let tags: Vec<&str> = CATALOGUE.iter().map(|a| a.tag).collect();
        assert_eq!(&tags[..22], &Action::KINDS[..22]);
        assert_eq!(Action::KINDS[21], "fold");
        assert_eq!(
            &tags[22..],
            [
                "pageText",
                "listTabs",
                "newTab",
                "switchTab",
                "closeTab",
                "answerDialog",
                "chooseFiles",
                "requestHuman"
            ]
        );
        assert_eq!(ActionSchema::find("scroll").unwrap().tag, "scroll");
        assert!(ActionSchema::find("readPage").is_none());
    }

    #[test]
    fn choices_match_the_enums() {
        use crate::{
            MouseButton as B, ScrollDirection as D, ScrollUnit as U, TerminateStatus as S,
        };
        fn names<T: serde::Serialize>(values: &[T]) -> Vec<Value> {
            values
                .iter()
                .map(|v| serde_json::to_value(v).unwrap())
                .collect()
        }
        assert_eq!(names(&[B::Left, B::Right, B::Middle]), FieldKind::BUTTONS);
        assert_eq!(names(&[B::default()])[0], FieldKind::BUTTONS[0]);
        assert_eq!(
            names(&[D::Up, D::Down, D::Left, D::Right]),
            FieldKind::DIRECTIONS
        );
        assert_eq!(
            names(&[U::Pixels, U::Clicks, U::Pages]),
            FieldKind::SCROLL_UNITS
        );
        assert_eq!(names(&[U::default()])[0], FieldKind::SCROLL_UNITS[0]);
        assert_eq!(names(&[S::Success, S::Failure]), FieldKind::STATUSES);
        let all = crate::Modifiers {
            alt: true,
            ctrl: true,
            meta: true,
            shift: true,
        };
        let flags: Vec<String> = names(&[all])[0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(flags, FieldKind::MODIFIERS);
    }

    #[test]
    fn scroll_unit_note_matches_the_constants() {
        let note = ActionSchema::find("scroll")
            .unwrap()
            .field("unit")
            .unwrap()
            .description;
        let clicks = format!("{} px", crate::action::PIXELS_PER_WHEEL_CLICK);
        let pages = format!("{} %", crate::action::PAGE_FRACTION * 100.0);
        assert!(note.contains(&clicks) && note.contains(&pages), "{note}");
    }
}

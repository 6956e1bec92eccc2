//! The actions a model can ask for.
//!
//! [`Action`] is the one vocabulary every layer speaks: decoders produce it,
//! the router executes it, history records it. Its JSON shape is a stable
//! public contract (`{"type": "click", "x": 10, "y": 20}`): tag `type`,
//! camelCase names, optional fields omitted when empty.
//!
//! Coordinates are viewport CSS pixels (see [`crate::coords`]). Every action a
//! provider's computer-use tool can emit maps onto a real variant; input that
//! cannot be decoded becomes [`Action::Invalid`], which the router answers
//! with `ok: false` so the model learns what was wrong. Nothing is silently
//! turned into a no-op.

use serde::{Deserialize, Serialize};

use crate::TaskState;
use crate::coords::{Point, Rect, Size};

/// A mouse button.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    /// The primary button.
    #[default]
    Left,
    /// The secondary (context-menu) button.
    Right,
    /// The middle (wheel) button.
    Middle,
}

impl MouseButton {
    fn is_left(&self) -> bool {
        *self == MouseButton::Left
    }
}

/// Keyboard modifiers held during a pointer action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Modifiers {
    /// Alt / Option.
    #[serde(skip_serializing_if = "is_false")]
    pub alt: bool,
    /// Control.
    #[serde(skip_serializing_if = "is_false")]
    pub ctrl: bool,
    /// Meta / Command / Super.
    #[serde(skip_serializing_if = "is_false")]
    pub meta: bool,
    /// Shift.
    #[serde(skip_serializing_if = "is_false")]
    pub shift: bool,
}

impl Modifiers {
    /// No modifier held.
    pub const NONE: Modifiers = Modifiers {
        alt: false,
        ctrl: false,
        meta: false,
        shift: false,
    };

    /// Whether no modifier is held.
    pub fn is_empty(&self) -> bool {
        *self == Self::NONE
    }

    /// The CDP bit mask (Alt=1, Ctrl=2, Meta=4, Shift=8).
    pub fn cdp_mask(&self) -> i64 {
        (self.alt as i64)
            | (self.ctrl as i64) << 1
            | (self.meta as i64) << 2
            | (self.shift as i64) << 3
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A scroll direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScrollDirection {
    /// Towards the top of the page (negative y delta).
    Up,
    /// Towards the bottom of the page (positive y delta).
    Down,
    /// Towards the left (negative x delta).
    Left,
    /// Towards the right (positive x delta).
    Right,
}

/// The unit of a scroll amount.
///
/// Providers count scrolling differently; the decoder keeps the provider's
/// unit and [`Action::scroll_delta`] turns it into pixels in one documented
/// place:
/// - [`ScrollUnit::Pixels`]: CSS pixels (OpenAI's `scroll_x`/`scroll_y`).
/// - [`ScrollUnit::Clicks`]: mouse-wheel notches of [`PIXELS_PER_WHEEL_CLICK`]
///   CSS pixels each (Anthropic's `scroll_amount`).
/// - [`ScrollUnit::Pages`]: [`PAGE_FRACTION`] of the viewport along the scroll
///   axis, so consecutive pages overlap slightly (Google's `scroll_document`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScrollUnit {
    /// CSS pixels.
    #[default]
    Pixels,
    /// Mouse-wheel notches.
    Clicks,
    /// Viewport pages.
    Pages,
}

/// CSS pixels per mouse-wheel notch ([`ScrollUnit::Clicks`]).
pub const PIXELS_PER_WHEEL_CLICK: f64 = 100.0;
/// Share of the viewport one [`ScrollUnit::Pages`] step scrolls.
pub const PAGE_FRACTION: f64 = 0.875;

/// How a run ended, as the model claims it in `terminate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminateStatus {
    /// The task is done; `result` holds the answer.
    Success,
    /// The task cannot be done; `result` says why.
    Failure,
}

/// One thing the model asks the agent to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Action {
    /// Press and release a mouse button at a point.
    Click {
        /// Horizontal position, viewport CSS pixels.
        x: i32,
        /// Vertical position, viewport CSS pixels.
        y: i32,
        /// Which button (default left).
        #[serde(default, skip_serializing_if = "MouseButton::is_left")]
        button: MouseButton,
        /// Modifier keys held during the click.
        #[serde(default, skip_serializing_if = "Modifiers::is_empty")]
        modifiers: Modifiers,
    },
    /// Two left clicks in quick succession (click count 2).
    DoubleClick {
        /// Horizontal position.
        x: i32,
        /// Vertical position.
        y: i32,
        /// Modifier keys held.
        #[serde(default, skip_serializing_if = "Modifiers::is_empty")]
        modifiers: Modifiers,
    },
    /// Three left clicks (click count 3), e.g. to select a line.
    TripleClick {
        /// Horizontal position.
        x: i32,
        /// Vertical position.
        y: i32,
        /// Modifier keys held.
        #[serde(default, skip_serializing_if = "Modifiers::is_empty")]
        modifiers: Modifiers,
    },
    /// Press at the start, move through `path`, release at the end.
    Drag {
        /// Start x.
        start_x: i32,
        /// Start y.
        start_y: i32,
        /// End x.
        end_x: i32,
        /// End y.
        end_y: i32,
        /// Intermediate waypoints between start and end (OpenAI sends a path).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        path: Vec<Point>,
    },
    /// Move the pointer to a point without pressing.
    Hover {
        /// Horizontal position.
        x: i32,
        /// Vertical position.
        y: i32,
    },
    /// Press a mouse button (at a point, or where the pointer is).
    MouseDown {
        /// Horizontal position; `None` means the current pointer position.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        x: Option<i32>,
        /// Vertical position; `None` means the current pointer position.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        y: Option<i32>,
        /// Which button.
        #[serde(default, skip_serializing_if = "MouseButton::is_left")]
        button: MouseButton,
    },
    /// Release a mouse button (at a point, or where the pointer is).
    MouseUp {
        /// Horizontal position; `None` means the current pointer position.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        x: Option<i32>,
        /// Vertical position; `None` means the current pointer position.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        y: Option<i32>,
        /// Which button.
        #[serde(default, skip_serializing_if = "MouseButton::is_left")]
        button: MouseButton,
    },
    /// Scroll with the wheel at a point.
    Scroll {
        /// Horizontal position of the wheel event.
        x: i32,
        /// Vertical position of the wheel event.
        y: i32,
        /// Direction.
        direction: ScrollDirection,
        /// Amount, in `unit`s.
        amount: f64,
        /// Unit of `amount` (default pixels).
        #[serde(default)]
        unit: ScrollUnit,
        /// Modifier keys held (e.g. shift to scroll sideways, ctrl to zoom).
        #[serde(default, skip_serializing_if = "Modifiers::is_empty")]
        modifiers: Modifiers,
    },
    /// Type text into whatever has focus.
    Type {
        /// The text; may hold `<secret:NAME>` placeholders the router fills.
        text: String,
    },
    /// Press a key chord: keys go down in order and come up in reverse.
    ///
    /// Names may be xdotool/X11 (`Return`, `Page_Down`), DOM/Playwright
    /// (`Enter`, `PageDown`) or single characters; the browser layer
    /// normalises them and answers an unknown name with `ok: false`.
    KeyPress {
        /// The chord, e.g. `["ctrl", "a"]`.
        keys: Vec<String>,
    },
    /// Press a key and keep it down (a modifier held for later clicks,
    /// drags and scrolls) until a [`Action::KeyUp`] of the same key.
    KeyDown {
        /// The key (`Shift`, `Control`, `a`…).
        key: String,
    },
    /// Release a key held by [`Action::KeyDown`].
    KeyUp {
        /// The key.
        key: String,
    },
    /// Hold a key chord down for a while, then release it.
    HoldKey {
        /// The chord.
        keys: Vec<String>,
        /// How long to hold, milliseconds.
        duration_ms: u64,
    },
    /// Do nothing for a while (let the page work).
    Wait {
        /// Milliseconds.
        ms: u64,
    },
    /// Navigate the tab to a URL.
    Goto {
        /// Absolute URL.
        url: String,
    },
    /// Go back in the tab's history.
    Back,
    /// Go forward in the tab's history.
    Forward,
    /// Ask for a fresh screenshot without acting.
    Screenshot,
    /// Ask where the pointer is.
    CursorPosition,
    /// Look closer: a screenshot of a region at higher resolution.
    Zoom {
        /// The region, viewport CSS pixels.
        region: Rect,
    },
    /// Replace the task state (structured memory that survives compaction).
    WriteState {
        /// The new state; always a JSON object.
        data: TaskState,
    },
    /// Ask to end the run. A configured verifier may reject it.
    Terminate {
        /// Claimed outcome.
        status: TerminateStatus,
        /// The answer, or why the task failed.
        result: String,
    },
    /// Hand a sub-task to a child loop on the same tab.
    Delegate {
        /// What the child must do.
        instruction: String,
        /// Step budget of the child (the loop's default when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_steps: Option<u32>,
    },
    /// Collapse a finished sub-goal into a one-line summary kept in the prompt.
    Fold {
        /// What was achieved.
        summary: String,
    },
    /// Read the page's accessibility tree as text, each element with a ref
    /// (`@e7`) that later actions can name.
    ReadPage {
        /// Only elements a person acts on (buttons, links, fields…).
        #[serde(default, skip_serializing_if = "is_false")]
        interactive_only: bool,
        /// Only the subtree under this ref.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        root: Option<String>,
        /// How deep to go (default: all).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        depth: Option<u32>,
    },
    /// Find elements matching a description ("the email field"), answered
    /// with their refs, best first, without a model call.
    FindElements {
        /// What to look for.
        query: String,
    },
    /// Read the page's visible text.
    PageText,
    /// Set the form control a ref names: text for a field, an option's
    /// value or label for a select, `true`/`false` for a checkbox or radio.
    FormInput {
        /// The ref (`@e7`).
        reference: String,
        /// The value.
        value: serde_json::Value,
    },
    /// Scroll the element a ref names into view.
    ScrollToRef {
        /// The ref.
        reference: String,
    },
    /// Click the element a ref names (scrolled into view first).
    ClickRef {
        /// The ref.
        reference: String,
        /// Which button (default left).
        #[serde(default, skip_serializing_if = "MouseButton::is_left")]
        button: MouseButton,
        /// 1 for a click, 2 for a double click, 3 for a triple click.
        click_count: u8,
        /// Modifier keys held.
        #[serde(default, skip_serializing_if = "Modifiers::is_empty")]
        modifiers: Modifiers,
    },
    /// Move the pointer onto the element a ref names.
    HoverRef {
        /// The ref.
        reference: String,
    },
    /// Reload the page.
    Reload,
    /// List the open tabs.
    ListTabs,
    /// Open a new blank tab and drive it.
    NewTab,
    /// Drive another open tab.
    SwitchTab {
        /// Its id (from [`Action::ListTabs`] or a tab-opened report).
        id: String,
    },
    /// Close an open tab.
    CloseTab {
        /// Its id.
        id: String,
    },
    /// Answer the next JavaScript dialog the page opens (dialogs are
    /// answered the moment they open, so the answer is given first):
    /// accept or dismiss, with `text` for a prompt.
    AnswerDialog {
        /// Press OK (`true`) or Cancel.
        accept: bool,
        /// The text typed into a prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// Choose the files the next file chooser gets (clicking a file input
    /// opens it). Only files inside the operator's upload folder.
    ChooseFiles {
        /// Paths inside the upload folder (relative to it, or absolute).
        paths: Vec<String>,
    },
    /// Set the files of the file input a ref names. Only files inside the
    /// operator's upload folder are read (`TabOptions::upload_dir` for the
    /// CDP tab); anything else is refused.
    FileUpload {
        /// The ref (`@e7`) of an `<input type=file>`.
        reference: String,
        /// Paths of files in the upload folder (relative to it, or absolute
        /// but inside it).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        paths: Vec<String>,
        /// Files staged in the upload folder, by plain file name.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        document_ids: Vec<String>,
    },
    /// Evaluate a JavaScript expression in the page and answer with its
    /// value. Off unless the session policy allows page JavaScript from the
    /// model (`allowModelJavascript`).
    JavascriptExec {
        /// The expression (no `return`; the last expression's value is the
        /// answer; promises are awaited).
        text: String,
    },
    /// Read the console messages (logs, warnings, errors, uncaught
    /// exceptions) the page wrote since the last read.
    ReadConsole,
    /// Read the network requests the page made since the last read.
    ReadNetwork,
    /// Hand the browser to a person (a one-time code, a CAPTCHA, a payment
    /// to confirm): the run waits, status `waiting_for_human`, until they
    /// press done, then goes on with a fresh screenshot and their note.
    RequestHuman {
        /// What the person should do, and why the agent cannot.
        reason: String,
    },
    /// A tool call that could not be decoded. Executing it fails with
    /// `error`, which the model sees; nothing touches the browser.
    Invalid {
        /// The tool or action name the model used.
        name: String,
        /// The arguments as received (a string when they were not JSON).
        #[serde(default)]
        input: serde_json::Value,
        /// What is wrong, phrased for the model.
        error: String,
    },
}

/// Broad families of actions, used by repeat detection and policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ActionCategory {
    /// Changes something: clicks, typing, navigation, state writes, terminate.
    Productive,
    /// Moves around without changing anything: scroll, hover, wait.
    Passive,
    /// Only observes: screenshot, cursor position, zoom.
    Observe,
}

impl Action {
    /// Every `type` tag ([`Action::kind`]), in declaration order: what a
    /// policy's `allowedActions` may name.
    pub const KINDS: &'static [&'static str] = &[
        "click",
        "doubleClick",
        "tripleClick",
        "drag",
        "hover",
        "mouseDown",
        "mouseUp",
        "scroll",
        "type",
        "keyPress",
        "holdKey",
        "wait",
        "goto",
        "back",
        "forward",
        "screenshot",
        "cursorPosition",
        "zoom",
        "writeState",
        "terminate",
        "delegate",
        "fold",
        "keyDown",
        "keyUp",
        "readPage",
        "findElements",
        "pageText",
        "formInput",
        "scrollToRef",
        "clickRef",
        "hoverRef",
        "reload",
        "listTabs",
        "newTab",
        "switchTab",
        "closeTab",
        "answerDialog",
        "chooseFiles",
        "fileUpload",
        "javascriptExec",
        "readConsole",
        "readNetwork",
        "requestHuman",
        "invalid",
    ];

    /// The `type` tag, e.g. `"doubleClick"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Click { .. } => "click",
            Action::DoubleClick { .. } => "doubleClick",
            Action::TripleClick { .. } => "tripleClick",
            Action::Drag { .. } => "drag",
            Action::Hover { .. } => "hover",
            Action::MouseDown { .. } => "mouseDown",
            Action::MouseUp { .. } => "mouseUp",
            Action::Scroll { .. } => "scroll",
            Action::Type { .. } => "type",
            Action::KeyPress { .. } => "keyPress",
            Action::HoldKey { .. } => "holdKey",
            Action::Wait { .. } => "wait",
            Action::Goto { .. } => "goto",
            Action::Back => "back",
            Action::Forward => "forward",
            Action::Screenshot => "screenshot",
            Action::CursorPosition => "cursorPosition",
            Action::Zoom { .. } => "zoom",
            Action::WriteState { .. } => "writeState",
            Action::Terminate { .. } => "terminate",
            Action::Delegate { .. } => "delegate",
            Action::Fold { .. } => "fold",
            Action::KeyDown { .. } => "keyDown",
            Action::KeyUp { .. } => "keyUp",
            Action::ReadPage { .. } => "readPage",
            Action::FindElements { .. } => "findElements",
            Action::PageText => "pageText",
            Action::FormInput { .. } => "formInput",
            Action::ScrollToRef { .. } => "scrollToRef",
            Action::ClickRef { .. } => "clickRef",
            Action::HoverRef { .. } => "hoverRef",
            Action::Reload => "reload",
            Action::ListTabs => "listTabs",
            Action::NewTab => "newTab",
            Action::SwitchTab { .. } => "switchTab",
            Action::CloseTab { .. } => "closeTab",
            Action::AnswerDialog { .. } => "answerDialog",
            Action::ChooseFiles { .. } => "chooseFiles",
            Action::FileUpload { .. } => "fileUpload",
            Action::JavascriptExec { .. } => "javascriptExec",
            Action::ReadConsole => "readConsole",
            Action::ReadNetwork => "readNetwork",
            Action::RequestHuman { .. } => "requestHuman",
            Action::Invalid { .. } => "invalid",
        }
    }

    /// The loop's own request, for a control action (terminate, delegate,
    /// fold, screenshot, writeState, requestHuman); `None` for every action a browser
    /// carries out. Told apart here, once: the router only sees browser
    /// actions.
    pub fn control(&self) -> Option<crate::ControlRequest> {
        use crate::ControlRequest as C;
        Some(match self {
            Action::Terminate { status, result } => C::Terminate {
                status: *status,
                result: result.clone(),
            },
            Action::Delegate {
                instruction,
                max_steps,
            } => C::Delegate {
                instruction: instruction.clone(),
                max_steps: *max_steps,
            },
            Action::Fold { summary } => C::Fold {
                summary: summary.clone(),
            },
            Action::Screenshot => C::Screenshot,
            Action::WriteState { data } => C::WriteState { data: data.clone() },
            Action::RequestHuman { reason } => C::RequestHuman {
                reason: reason.clone(),
            },
            _ => return None,
        })
    }

    /// The family this action belongs to.
    pub fn category(&self) -> ActionCategory {
        match self {
            Action::Scroll { .. }
            | Action::Hover { .. }
            | Action::Wait { .. }
            | Action::ScrollToRef { .. }
            | Action::HoverRef { .. } => ActionCategory::Passive,
            Action::Screenshot
            | Action::CursorPosition
            | Action::Zoom { .. }
            | Action::ReadPage { .. }
            | Action::FindElements { .. }
            | Action::PageText
            | Action::ListTabs
            | Action::ReadConsole
            | Action::ReadNetwork
            | Action::Invalid { .. } => ActionCategory::Observe,
            _ => ActionCategory::Productive,
        }
    }

    /// Whether executing this action needs the browser. Control actions
    /// (state writes, terminate, delegate, fold, screenshot requests) and
    /// invalid calls are handled by the router alone.
    pub fn touches_browser(&self) -> bool {
        !matches!(
            self,
            Action::WriteState { .. }
                | Action::Terminate { .. }
                | Action::Delegate { .. }
                | Action::Fold { .. }
                | Action::Screenshot
                | Action::CursorPosition
                | Action::RequestHuman { .. }
                | Action::Invalid { .. }
        )
    }

    /// The main point the action targets, if it has one.
    pub fn point(&self) -> Option<Point> {
        match *self {
            Action::Click { x, y, .. }
            | Action::DoubleClick { x, y, .. }
            | Action::TripleClick { x, y, .. }
            | Action::Hover { x, y }
            | Action::Scroll { x, y, .. } => Some(Point::new(x, y)),
            Action::Drag {
                start_x, start_y, ..
            } => Some(Point::new(start_x, start_y)),
            Action::MouseDown {
                x: Some(x),
                y: Some(y),
                ..
            }
            | Action::MouseUp {
                x: Some(x),
                y: Some(y),
                ..
            } => Some(Point::new(x, y)),
            _ => None,
        }
    }

    /// The wheel delta of a scroll in CSS pixels `(dx, dy)` for a viewport of
    /// `viewport` size (needed for [`ScrollUnit::Pages`]); `None` for other
    /// actions. Negative, NaN or infinite amounts scroll nothing.
    pub fn scroll_delta(&self, viewport: Size) -> Option<(f64, f64)> {
        let Action::Scroll {
            direction,
            amount,
            unit,
            ..
        } = *self
        else {
            return None;
        };
        let amount = if amount.is_finite() && amount > 0.0 {
            amount
        } else {
            0.0
        };
        let axis_len = match direction {
            ScrollDirection::Up | ScrollDirection::Down => viewport.height,
            ScrollDirection::Left | ScrollDirection::Right => viewport.width,
        } as f64;
        let px = match unit {
            ScrollUnit::Pixels => amount,
            ScrollUnit::Clicks => amount * PIXELS_PER_WHEEL_CLICK,
            ScrollUnit::Pages => amount * axis_len * PAGE_FRACTION,
        };
        Some(match direction {
            ScrollDirection::Up => (0.0, -px),
            ScrollDirection::Down => (0.0, px),
            ScrollDirection::Left => (-px, 0.0),
            ScrollDirection::Right => (px, 0.0),
        })
    }
}

/// A safety check a provider attached to a tool call (OpenAI
/// `pending_safety_checks`, Gemini `safety_decision`). The loop surfaces it to
/// the [`PreActionHook`](crate::PreActionHook); executing the call counts as
/// acknowledging it, and the adapter says so in the tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SafetyCheck {
    /// The provider's id for the check (synthesised when it has none).
    pub id: String,
    /// A machine-readable code (`malicious_instructions`,
    /// `require_confirmation`).
    pub code: String,
    /// The provider's explanation.
    pub message: String,
}

/// An action together with the provider's id for the tool call that carried
/// it, so its result can be answered by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionCall {
    /// The provider's tool-call id (`toolu_…`, `call_…`); adapters synthesise
    /// a stable id where the provider has none (Gemini, text answers).
    pub id: String,
    /// The decoded action.
    pub action: Action,
    /// Safety checks the provider attached; a hook decides whether to go on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub safety_checks: Vec<SafetyCheck>,
}

impl ActionCall {
    /// A call with no safety checks.
    pub fn new(id: impl Into<String>, action: Action) -> Self {
        Self {
            id: id.into(),
            action,
            safety_checks: Vec::new(),
        }
    }
}

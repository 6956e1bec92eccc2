//! What happened when an action ran.
//!
//! Action failures are data, not errors (design principle 2): a tab answers
//! every action with an [`ActionOutcome`], the router with an
//! [`ActionExecution`], and the model reads `ok: false` plus the message as a
//! tool result. Only fatal conditions (the browser went away) are
//! [`LumenError`](crate::LumenError)s.

use serde::{Deserialize, Serialize};

use crate::action::TerminateStatus;
use crate::coords::Point;

/// A description of a DOM element, as the browser layer reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementInfo {
    /// Lower-case tag name (`button`, `input`).
    pub tag: String,
    /// ARIA role, explicit or implicit, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Accessible name or visible label, trimmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the element (or an ancestor) reacts to clicks: links, buttons,
    /// form controls, elements with click handlers or `role=button`.
    #[serde(default)]
    pub interactive: bool,
    /// Whether text can be typed into it (inputs, textareas, contenteditable).
    #[serde(default)]
    pub editable: bool,
    /// Whether it lives in a child frame, with that frame's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_url: Option<String>,
    /// The visible text of the table row, list item or article it sits
    /// in (cut to 80 characters), when it sits in one: what tells apart
    /// identical controls on different rows (each row's "Delete").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// A JavaScript dialog that opened during an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DialogInfo {
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    pub kind: String,
    /// The dialog's message.
    pub message: String,
    /// Whether the dialog policy accepted (true) or dismissed (false) it.
    pub accepted: bool,
}

/// A download that started during an action, and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadInfo {
    /// Where it came from.
    pub url: String,
    /// The file name the page suggested.
    pub suggested_filename: String,
    /// Where it was saved, once complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Whether it completed within the settle window.
    pub completed: bool,
    /// Whether it failed or was cancelled (a download neither completed nor
    /// failed is still running).
    #[serde(default, skip_serializing_if = "is_false")]
    pub failed: bool,
    /// Why it failed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A tab that an action opened (popup, `target=_blank`, `window.open`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabInfo {
    /// The browser's id for the tab.
    pub id: String,
    /// Its URL when last seen.
    pub url: String,
    /// Its title when last seen (empty when unknown).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Whether the agent now drives this tab.
    pub followed: bool,
}

/// What an action changed, so nobody has to guess: the browser layer fills
/// what it observed, `None` meaning "not observed", not "did not happen".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectReceipt {
    /// URL before the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_before: Option<String>,
    /// URL after the action settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_after: Option<String>,
    /// Whether a navigation committed in the tab.
    #[serde(default)]
    pub navigated: bool,
    /// A tab the action opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tab: Option<TabInfo>,
    /// A dialog the action raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogInfo>,
    /// A download the action started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download: Option<DownloadInfo>,
    /// The element under the pointer for pointer actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ElementInfo>,
    /// The focused element after the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<ElementInfo>,
    /// The focused element before the action: where typing went (a page
    /// may move the focus as keys arrive). Absent when nothing but the page
    /// had it, or it was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus_before: Option<ElementInfo>,
    /// Whether the page visibly changed (DOM mutations, scroll, focus);
    /// `None` when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_changed: Option<bool>,
    /// Pointer position after the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<Point>,
    /// Requests the session's [`RequestFilter`](crate::RequestFilter)
    /// refused while the action ran (oldest first, at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_requests: Vec<crate::request_filter::BlockedRequest>,
}

impl EffectReceipt {
    /// Whether the receipt shows the action had any observable effect.
    pub fn changed_anything(&self) -> bool {
        self.navigated
            || self.new_tab.is_some()
            || self.dialog.is_some()
            || self.download.is_some()
            || self.page_changed == Some(true)
            || (self.url_before.is_some() && self.url_before != self.url_after)
    }
}

/// What a [`BrowserTab`](crate::BrowserTab) reports for one action.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionOutcome {
    /// Whether the action did what it was asked to.
    pub ok: bool,
    /// Why not, phrased for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Advice that does not make the action a failure ("the click hit no
    /// interactive element").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// What changed (boxed: receipts are large and often absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Box<EffectReceipt>>,
}

impl ActionOutcome {
    /// A success with no receipt.
    pub fn ok() -> Self {
        Self {
            ok: true,
            ..Self::default()
        }
    }

    /// A failure with a message for the model.
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            ok: false,
            error: Some(error.into()),
            ..Self::default()
        }
    }

    /// Attaches an effect receipt.
    pub fn with_effect(mut self, effect: EffectReceipt) -> Self {
        self.effect = Some(Box::new(effect));
        self
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
}

/// A request from the router to the loop that an action carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum ControlRequest {
    /// The model asked to end the run (subject to the verifier).
    Terminate {
        /// Claimed outcome.
        status: TerminateStatus,
        /// Answer or reason.
        result: String,
    },
    /// The model asked for a child loop.
    Delegate {
        /// The sub-task.
        instruction: String,
        /// Its step budget.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_steps: Option<u32>,
    },
    /// The model asked for a fresh screenshot (answered by the next step).
    Screenshot,
    /// The model folded a finished sub-goal.
    Fold {
        /// The one-line record.
        summary: String,
    },
    /// The model replaced the task state.
    WriteState {
        /// The new state.
        data: crate::TaskState,
    },
    /// The model asked for a person to take over the browser.
    RequestHuman {
        /// What the person should do.
        reason: String,
    },
}

/// What the router reports for one action: the tab's outcome plus what the
/// loop must do next.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionExecution {
    /// Whether the action succeeded.
    pub ok: bool,
    /// Why not, phrased for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Soft advice for the model (action verifier, effect receipt).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// What changed in the browser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Box<EffectReceipt>>,
    /// What the loop must do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlRequest>,
    /// Wall time of the execution including settling, milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
    /// An image the action made for the model: a zoom's region, captured
    /// at full resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::Image>,
    /// What an action that reads answers with (the page's outline, the
    /// matches of a search, the page's text, the tab list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl ActionExecution {
    /// A success with no control request.
    pub fn ok() -> Self {
        Self {
            ok: true,
            ..Self::default()
        }
    }

    /// A failure with a message for the model.
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            ok: false,
            error: Some(error.into()),
            ..Self::default()
        }
    }

    /// A success that carries a control request.
    pub fn control(control: ControlRequest) -> Self {
        Self {
            ok: true,
            control: Some(control),
            ..Self::default()
        }
    }

    /// Whether the model asked to terminate.
    pub fn is_terminate(&self) -> bool {
        matches!(self.control, Some(ControlRequest::Terminate { .. }))
    }
}

impl From<ActionOutcome> for ActionExecution {
    fn from(o: ActionOutcome) -> Self {
        Self {
            ok: o.ok,
            error: o.error,
            hints: o.hints,
            effect: o.effect,
            control: None,
            duration_ms: 0,
            image: None,
            output: None,
        }
    }
}

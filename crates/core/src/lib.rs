//! Lumen's shared contracts: the types and traits every other crate is written
//! against, so the browser, model, memory, safety and loop layers can change
//! independently.
//!
//! - [`Action`] and [`ActionCall`]: what a model asks for, in viewport CSS
//!   pixels ([`coords`] documents units, rounding and the 0–1000 grid);
//!   [`action_schema`] describes the actions offered to clients and models.
//! - [`ActionOutcome`] (a tab's answer), [`ActionExecution`] (the router's),
//!   and the [`EffectReceipt`] saying what actually changed.
//! - [`WireRecord`] (provider-facing history) and [`SemanticStep`] (the full,
//!   never-compressed record).
//! - [`StepContext`], [`ModelResponse`], [`ModelEvent`], [`TokenUsage`],
//!   [`RunResult`], [`StreamEvent`].
//! - The traits: [`BrowserTab`], [`ModelAdapter`], [`PreActionHook`],
//!   [`Verifier`], [`LoopMonitor`]; object-safe via `async-trait`, each with its
//!   contract in its docs.
//! - [`LumenError`]: fatal errors only. A failed action is data.
//!
//! The JSON shapes of these types are a stable public contract: serialized
//! sessions, traces and the server API use them. Snapshot tests pin them.
//!
//! This crate does no I/O and may depend only on serde, serde_json,
//! thiserror, async-trait, futures-core and base64 (`cargo xtask tidy`
//! enforces that it never pulls in tokio, reqwest, chromiumoxide, axum or
//! image).
//!
//! # Example
//! ```
//! use lumen_core::{Action, MouseButton, Modifiers, coords::denormalize};
//!
//! // A Gemini-style 0-1000 click decoded against a 1280x720 viewport.
//! let click = Action::Click {
//!     x: denormalize(500.0, 1280),
//!     y: denormalize(250.0, 720),
//!     button: MouseButton::Left,
//!     modifiers: Modifiers::NONE,
//! };
//! let json = serde_json::to_string(&click)?;
//! assert_eq!(json, r#"{"type":"click","x":640,"y":180}"#);
//! # Ok::<(), serde_json::Error>(())
//! ```

#![deny(missing_docs)]

pub mod action;
pub mod action_schema;
pub mod browser;
pub mod coords;
pub mod date;
pub mod error;
pub mod handoff;
pub mod history;
pub mod hooks;
pub mod image;
pub mod logs;
pub mod model;
pub mod outcome;
pub mod page;
pub mod request_filter;
pub mod run;
pub mod usage;

pub use action::{
    Action, ActionCall, ActionCategory, Modifiers, MouseButton, SafetyCheck, ScrollDirection,
    ScrollUnit, TerminateStatus,
};
pub use action_schema::{ActionSchema, CATALOGUE, FieldKind, FieldSchema, snake_case};
pub use browser::{
    BrowserTab, BufferedLines, ClickOptions, FormField, Screenshot, ScreenshotOptions,
    ScrollOffset, SettleOptions, SettleReport,
};
pub use coords::{ImageScale, Point, Rect, Size, ViewportSize, denormalize, normalize};
pub use date::Date;
pub use error::{ErrorCode, ErrorInfo, LumenError, ModelErrorKind, Result};
pub use handoff::{HandoffPolicy, HandoffTrigger, LiveFrame, LiveFrames, LiveInput};
pub use history::{
    ActionRecord, AssistantTurn, ProviderTurn, SemanticStep, ThinkingBlock, ToolResult, WireRecord,
    WireScreenshot,
};
pub use hooks::{
    HookContext, HookDecision, LoopMonitor, PreActionHook, Verifier, VerifyInput, VerifyResult,
};
pub use image::{Image, ImageFormat};
pub use model::{
    ModelAdapter, ModelEvent, ModelInfo, ModelNotice, ModelResponse, ModelStream, NoticeSink,
    NoticeSlot, StepContext,
};
pub use outcome::{
    ActionExecution, ActionOutcome, ControlRequest, DialogInfo, DownloadInfo, EffectReceipt,
    ElementInfo, TabInfo,
};
pub use page::{AxNode, AxSnapshot};
pub use request_filter::{BlockKind, BlockedRequest, RequestFilter, RequestVerdict};
pub use run::{LoopResult, RecordedEvent, Recorder, RunResult, RunStatus, StreamEvent};
pub use usage::{TokenUsage, UsageBreakdown};

/// Structured task memory written by the model (`writeState`): always a JSON
/// object, re-injected into every step and kept through compaction.
pub type TaskState = serde_json::Map<String, serde_json::Value>;

#[cfg(test)]
mod tests;

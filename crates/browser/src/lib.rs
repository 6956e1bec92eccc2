//! The CDP layer of Lumen: launches or connects to Chromium and implements
//! [`lumen_core::BrowserTab`] on `chromiumoxide`, as [`CdpTab`].
//!
//! - **Connect**: [`CdpTab::launch`] spawns a local Chromium (preferring
//!   `chromium-headless-shell` for headless runs) that dies with its owner;
//!   [`CdpTab::connect`] attaches to a running browser by WebSocket URL or
//!   `http://host:port`; [`CdpTab::browserbase`] creates a Browserbase
//!   session.
//! - **One-shot commands**: [`PageLink::attach`] opens a single WebSocket
//!   to a page that already exists (no new tab, no domains enabled up
//!   front, no background task) for short-lived processes such as
//!   `lumen browser click @e3`; [`page_tabs`], [`activate_tab`] and
//!   [`browser_command`] talk to the browser itself the same way.
//! - **Never hang**: chromiumoxide's handler is polled by a task this crate
//!   owns; every CDP call has a deadline; a dead socket or a crashed browser
//!   turns into [`LumenError::BrowserDisconnected`](lumen_core::LumenError)
//!   at once.
//! - **Never lie**: every action returns an
//!   [`ActionOutcome`](lumen_core::ActionOutcome) whose
//!   [`EffectReceipt`](lumen_core::EffectReceipt) says what changed: URL,
//!   navigation, new tab, dialog, download, the element under the pointer,
//!   the focus afterwards. A click on dead space that changed nothing says
//!   so.
//! - **Settle, don't sleep**: [`BrowserTab::settle`](lumen_core::BrowserTab::settle)
//!   waits for the navigation to commit, the network to go quiet, short page
//!   timers to fire and the layout to hold still over two frames, and
//!   returns at once on a page that is already settled.
//!
//! May depend on: `lumen-core`, `chromiumoxide`, `tokio`, `image`, and for
//! its edges `async-tungstenite` (the raw WebSocket of `PageLink`),
//! `reqwest` (Browserbase sessions) and `rustix` (signals to a process
//! group). Must never be
//! named by `lumen-perception`, `lumen-memory` or `lumen-safety`: they see the
//! browser only through the `BrowserTab` trait, so another backend can replace
//! this crate without touching them.
//!
//! # Example
//! ```no_run
//! use lumen_browser::{CdpTab, LaunchOptions};
//! use lumen_core::{BrowserTab, ClickOptions, Point, ScreenshotOptions};
//!
//! # async fn run() -> lumen_core::Result<()> {
//! let tab = CdpTab::launch(LaunchOptions::default()).await?;
//! tab.goto("http://127.0.0.1:8080/form.html").await?;
//! let shot = tab.screenshot(&ScreenshotOptions::default()).await?;
//! let outcome = tab.click(shot.to_viewport(640.0, 360.0), ClickOptions::default()).await?;
//! println!("{:?}", outcome.effect);
//! tab.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Crate features
//! - `native-tls`: HTTPS for the Browserbase API (off by default).

#![deny(missing_docs)]

pub mod annotate;
mod ax;
mod browser_commands;
mod cdp;
pub mod chromium;
mod event_link;
mod frames;
mod imaging;
pub mod limits;
mod options;
mod owners;
mod page_link;
mod pagelog;
mod protocol;
mod remote;
mod scripts;
mod starting;
mod tab;
mod tracker;
mod wirelog;
mod ws;

pub use ax::{AxNode, AxSnapshot};
pub use browser_commands::{activate_tab, browser_command, page_info, page_tabs};
pub use event_link::{EventLink, Incoming};
pub use options::{BrowserbaseOptions, DialogAction, DialogPolicy, LaunchOptions, TabOptions};
pub use page_link::{
    CheckResult, DownloadResult, ElementQuery, ElementSpot, ElementTarget, FillResult,
    LinkedSnapshot, LoadState, LogEntry, PageLink, SavedRef, SelectResult, SnapshotFrame,
    UploadResult,
};
pub use protocol::keys::{KeyDef, normalize_key, parse_chord};
pub use starting::StartingTab;
pub use tab::{CdpTab, aligned_viewport};
pub use wirelog::UNLOGGED;

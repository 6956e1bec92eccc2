//! The CDP layer of Lumen: launches or connects to Chromium and implements
//! [`lumen_core::BrowserTab`] on `chromiumoxide`.
//!
//! May depend on: `lumen-core`, `chromiumoxide`, `tokio`, `image`. Must never be
//! named by `lumen-loop`, `lumen-memory` or `lumen-safety`: they see the
//! browser only through the `BrowserTab` trait, so another backend can replace
//! this crate without touching them.
//!
//! Status: the implementation lands with the browser issue; this crate is a
//! placeholder so the workspace graph and its rules exist from the start.

//! The owned Chromium process lives in [`crate::chromium`] with the rest of
//! locating and launching; this path keeps the tab's
//! `crate::process::ChromiumProcess` import working until it names the new
//! one.

pub(crate) use crate::chromium::ChromiumProcess;

//! Where Chromium comes from, how it starts and how it ends: the one
//! locator and launcher of the workspace (the CLI, xtask and the test
//! support use it too).
//!
//! - **Locating**: [`locate`] looks at `LUMEN_CHROME`, `CHROME_PATH`,
//!   `/usr/bin/chromium`, then `chromium`, `chromium-browser` and
//!   `google-chrome` on `PATH`; [`locate_preferring_headless_shell`] tries
//!   Debian's `chromium-headless-shell` after the variables;
//!   [`locate_headless_shell`] finds only the shell. A variable naming no
//!   executable is an error, an empty one counts as unset, and
//!   [`ChromiumNotFound`] lists what was looked at and how to fix it.
//! - **An owned launch**: [`CdpTab::launch`](crate::CdpTab::launch) starts
//!   a Chromium that dies with its owner (closed, dropped, or the owner
//!   killed), configured by [`LaunchOptions`](crate::LaunchOptions).
//! - **A detached launch**: [`DetachedChromium::spawn`] starts a Chromium in
//!   its own process group that outlives the process that started it (what
//!   `lumen browser open` needs) and reads its DevTools URL.
//! - **Ending**: [`end_process_group`] (TERM, then KILL after a grace
//!   period), [`kill_process_group`] and [`process_group_alive`] send
//!   signals through `rustix`; nothing runs `kill` as a subprocess. A
//!   killed Chromium leaves its single-instance socket folder in the
//!   temporary directory; [`remove_socket_folder`] deletes it (the owned
//!   launch and [`DetachedChromium::kill`] do so themselves).
//!
//! # Example
//! ```no_run
//! use std::time::Duration;
//!
//! use lumen_browser::chromium::{self, DetachedChromium, DetachedOptions};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! println!("Chromium: {}", chromium::locate()?.display());
//!
//! let mut browser = DetachedChromium::spawn(&DetachedOptions::new("/tmp/profile"))?;
//! let ws_url = browser.devtools_url(Duration::from_secs(20)).await?;
//! let pid = browser.detach();
//! // … later, from any process:
//! chromium::end_process_group(pid, Duration::from_secs(5))?;
//! chromium::remove_socket_folder("/tmp/profile".as_ref());
//! # let _ = ws_url;
//! # Ok(())
//! # }
//! ```

mod detached;
mod group;
mod launch;
mod locate;
mod sandbox;

pub use detached::{DetachedChromium, DetachedOptions};
pub use group::{
    ProcessIdentity, end_process_group, kill_process_group, process_group_alive, process_identity,
};
pub use launch::remove_socket_folder;
pub(crate) use launch::{ChromiumProcess, check_executable};
pub use locate::{
    ChromiumNotFound, is_headless_shell, locate, locate_headless_shell,
    locate_preferring_headless_shell,
};
pub use sandbox::sandbox_unavailable;

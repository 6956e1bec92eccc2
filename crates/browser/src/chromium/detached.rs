//! A Chromium that outlives the process that started it, as
//! `lumen browser open` needs: one command starts it, later commands
//! reattach, `lumen browser close` ends it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lumen_core::{LumenError, Size};

use super::group::end_process_group;
use super::launch::{devtools_url, log_no_sandbox, prepare_profile, remove_socket_folder};
use super::locate::locate;

/// The flags of every detached launch.
const DETACHED_FLAGS: &[&str] = &[
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    // No "unsupported command-line flag" bar over the page.
    "--test-type",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    // `window.open()` outside a click (a page opening a popup on load or
    // on input) works, as in every other launch: the session lists the
    // new tab and `tab N` switches to it.
    "--disable-popup-blocking",
    "--remote-debugging-port=0",
];

/// How often [`DetachedChromium::devtools_url`] looks at the port file.
const POLL: Duration = Duration::from_millis(5);

/// How to start a [`DetachedChromium`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachedOptions {
    /// The binary (`None`: [`locate`]).
    pub executable: Option<PathBuf>,
    /// Run without a window (Chromium's own `--headless`).
    pub headless: bool,
    /// The profile folder, created if missing. It is the caller's: the
    /// browser outlives this process, so nothing here deletes it.
    pub user_data_dir: PathBuf,
    /// The window size (`--window-size`).
    pub window: Size,
    /// Pass `--no-sandbox` (as [`LaunchOptions::no_sandbox`](crate::LaunchOptions::no_sandbox)).
    pub no_sandbox: bool,
    /// Extra command-line flags.
    pub args: Vec<String>,
}

impl DetachedOptions {
    /// Headless, with a 1280×720 window, the located binary and no extra
    /// flags, keeping its profile in `user_data_dir`.
    pub fn new(user_data_dir: impl Into<PathBuf>) -> Self {
        Self {
            executable: None,
            headless: true,
            user_data_dir: user_data_dir.into(),
            window: Size::new(1280, 720),
            no_sandbox: super::sandbox_unavailable().is_some(),
            args: Vec::new(),
        }
    }
}

/// A Chromium started in its own process group, so that it outlives this
/// process and a Ctrl-C in its terminal.
///
/// Dropping this value leaves the browser running (that is the point); end
/// it with [`kill`](Self::kill), or later, from any process, with
/// [`end_process_group`] on its [`pid`](Self::pid).
#[derive(Debug)]
pub struct DetachedChromium {
    child: Child,
    executable: PathBuf,
    port_file: PathBuf,
}

impl DetachedChromium {
    /// Starts Chromium on `about:blank` with `--remote-debugging-port=0`,
    /// its standard streams closed.
    ///
    /// # Errors
    ///
    /// [`LumenError::Config`] when no binary is found (see [`locate`]), the
    /// profile folder cannot be created, or the binary cannot be started.
    pub fn spawn(options: &DetachedOptions) -> Result<Self, LumenError> {
        let executable = match &options.executable {
            Some(path) => path.clone(),
            None => locate()?,
        };
        let profile = &options.user_data_dir;
        let port_file = prepare_profile(profile)?;

        let mut cmd = Command::new(&executable);
        if options.headless {
            cmd.arg("--headless");
        }
        if options.no_sandbox {
            log_no_sandbox();
            cmd.arg("--no-sandbox");
        }
        cmd.args(DETACHED_FLAGS)
            .arg(format!(
                "--window-size={},{}",
                options.window.width, options.window.height
            ))
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(&options.args)
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().map_err(|e| {
            LumenError::config(
                "chromium",
                format!("cannot start {}: {e}", executable.display()),
            )
        })?;
        Ok(Self {
            child,
            executable,
            port_file,
        })
    }

    /// The browser's process id, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The binary that was started.
    pub fn executable(&self) -> &Path {
        &self.executable
    }

    /// Waits for Chromium to write `DevToolsActivePort` in its profile and
    /// returns its browser WebSocket URL (`ws://127.0.0.1:PORT/devtools/browser/…`).
    ///
    /// # Errors
    ///
    /// [`LumenError::BrowserDisconnected`] if Chromium exits first, and
    /// [`LumenError::SessionTimeout`] after `timeout`.
    pub async fn devtools_url(&mut self, timeout: Duration) -> Result<String, LumenError> {
        let start = Instant::now();
        loop {
            if let Ok(text) = tokio::fs::read_to_string(&self.port_file).await
                && let Some(url) = devtools_url(&text)
            {
                return Ok(url);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LumenError::disconnected(format!(
                    "Chromium exited ({status}) before opening its DevTools port ({})",
                    self.executable.display()
                )));
            }
            if start.elapsed() > timeout {
                return Err(LumenError::SessionTimeout {
                    what: format!("Chromium's DevTools port ({})", self.executable.display()),
                    after: timeout,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// [`spawn`](Self::spawn), then [`devtools_url`](Self::devtools_url);
    /// a Chromium killed by a signal while it starts (a crash, seen as
    /// `SIGSEGV` now and then on a loaded machine) is started once more.
    /// On an error nothing is left running.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn) and [`devtools_url`](Self::devtools_url).
    pub async fn spawn_ready(
        options: &DetachedOptions,
        timeout: Duration,
    ) -> Result<(Self, String), LumenError> {
        let mut retried = false;
        loop {
            let mut browser = Self::spawn(options)?;
            match browser.devtools_url(timeout).await {
                Ok(url) => return Ok((browser, url)),
                Err(e) if !retried && browser.died_by_signal() => {
                    tracing::warn!("Chromium crashed while starting ({e}); starting it once more");
                    retried = true;
                    browser.kill(Duration::ZERO);
                }
                Err(e) => {
                    browser.kill(Duration::from_secs(1));
                    return Err(e);
                }
            }
        }
    }

    /// Whether the browser has exited because of a signal.
    fn died_by_signal(&mut self) -> bool {
        use std::os::unix::process::ExitStatusExt as _;
        matches!(self.child.try_wait(), Ok(Some(status)) if status.signal().is_some())
    }

    /// Ends the browser's whole process group ([`end_process_group`]:
    /// `SIGTERM`, then `SIGKILL` after `grace`), reaps it and, if it had
    /// to be killed, deletes the socket folder it left
    /// ([`remove_socket_folder`]). Blocks for up to `grace`.
    pub fn kill(mut self, grace: Duration) {
        if let Err(e) = end_process_group(self.pid(), grace) {
            tracing::debug!("ending Chromium's process group {}: {e}", self.pid());
        }
        let _ = self.child.try_wait();
        if let Some(profile) = self.port_file.parent() {
            remove_socket_folder(profile);
        }
    }

    /// Lets the browser go and returns its pid (its process group id), to
    /// be recorded for a later [`end_process_group`].
    pub fn detach(self) -> u32 {
        self.pid()
    }
}

//! Options for launching, connecting and driving tabs.

use std::path::PathBuf;
use std::time::Duration;

use lumen_core::{SettleOptions, Size};

/// What to do with a JavaScript dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogAction {
    /// Press OK.
    Accept,
    /// Press Cancel (for an alert, the same as closing it).
    Dismiss,
}

/// How JavaScript dialogs are answered. They are always answered at once so
/// they can never wedge the session; the outcome reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialogPolicy {
    /// `alert()`.
    pub alert: DialogAction,
    /// `confirm()`.
    pub confirm: DialogAction,
    /// `prompt()`.
    pub prompt: DialogAction,
    /// The "leave site?" dialog.
    pub beforeunload: DialogAction,
    /// Text entered into accepted prompts (`None`: the prompt's default).
    pub prompt_text: Option<String>,
}

impl Default for DialogPolicy {
    /// Accept alerts (they carry information, not a choice); dismiss the
    /// rest (the cautious answer to a question nobody asked the model).
    fn default() -> Self {
        Self {
            alert: DialogAction::Accept,
            confirm: DialogAction::Dismiss,
            prompt: DialogAction::Dismiss,
            beforeunload: DialogAction::Dismiss,
            prompt_text: None,
        }
    }
}

impl DialogPolicy {
    /// Accept every dialog.
    pub fn accept_all() -> Self {
        Self {
            alert: DialogAction::Accept,
            confirm: DialogAction::Accept,
            prompt: DialogAction::Accept,
            beforeunload: DialogAction::Accept,
            prompt_text: None,
        }
    }

    pub(crate) fn decide(&self, kind: &str) -> DialogAction {
        match kind {
            "alert" => self.alert,
            "confirm" => self.confirm,
            "prompt" => self.prompt,
            "beforeunload" => self.beforeunload,
            _ => DialogAction::Dismiss,
        }
    }
}

/// How tabs behave: viewport, deadlines, dialogs, downloads, uploads,
/// receipts.
#[derive(Debug, Clone)]
pub struct TabOptions {
    /// The viewport applied to every tab with `Emulation.setDeviceMetricsOverride`
    /// (`None`: leave the browser's own size).
    pub viewport: Option<Size>,
    /// Device pixel ratio used with `viewport`.
    pub device_scale_factor: f64,
    /// Deadline of each CDP call; a call without an answer by then means the
    /// browser is gone (`BROWSER_DISCONNECTED`).
    pub call_timeout: Duration,
    /// Longest wait for a navigation (goto, back, forward, reload).
    pub navigation_timeout: Duration,
    /// How dialogs are answered.
    pub dialogs: DialogPolicy,
    /// Where downloads are saved (`None`: downloads are refused).
    pub download_dir: Option<PathBuf>,
    /// Files offered to a file chooser must lie inside this folder (`None`:
    /// file choosers are never answered).
    pub upload_dir: Option<PathBuf>,
    /// Measure an effect receipt for every action (two extra
    /// `Runtime.evaluate` round trips of well under a millisecond each).
    pub receipts: bool,
    /// Switch to a tab an action opened (popup, `target=_blank`).
    pub follow_new_tabs: bool,
    /// Settling used inside `goto`, `back`, `forward` and `reload`.
    pub settle: SettleOptions,
    /// Type as a keyboard does, a key event per character (`keydown`,
    /// `keypress`, `keyup`: pages that listen for keys see them), with
    /// `Input.insertText` only for characters no key types (default);
    /// `false` inserts each line as one `Input.insertText` (one call, no
    /// key events).
    pub type_with_key_events: bool,
}

impl Default for TabOptions {
    fn default() -> Self {
        Self {
            viewport: Some(Size::new(1280, 720)),
            device_scale_factor: 1.0,
            call_timeout: Duration::from_secs(15),
            navigation_timeout: Duration::from_secs(30),
            dialogs: DialogPolicy::default(),
            download_dir: None,
            upload_dir: None,
            receipts: true,
            follow_new_tabs: true,
            settle: SettleOptions::default(),
            type_with_key_events: true,
        }
    }
}

/// How to launch a local Chromium.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// The binary (`None`: `LUMEN_CHROME`, `CHROME_PATH`, then
    /// `chromium-headless-shell` when headless, then `/usr/bin/chromium` and
    /// `PATH`).
    pub executable: Option<PathBuf>,
    /// Run without a window (the default).
    pub headless: bool,
    /// When headless, use Debian's `chromium-headless-shell` if installed:
    /// it starts 2–3× faster, uses about half the memory and gives the exact
    /// window size.
    pub prefer_headless_shell: bool,
    /// Pass `--no-sandbox`. The default keeps Chromium's sandbox on and
    /// turns it off only where it cannot start
    /// ([`chromium::sandbox_unavailable`](crate::chromium::sandbox_unavailable):
    /// running as root, or no unprivileged user namespaces); a launch
    /// without the sandbox says why in the log.
    pub no_sandbox: bool,
    /// Extra command-line flags.
    pub args: Vec<String>,
    /// The profile folder (`None`: a fresh temporary one, deleted on close).
    pub user_data_dir: Option<PathBuf>,
    /// The window size (`--window-size`).
    pub window: Size,
    /// Longest wait for Chromium's DevTools port.
    pub launch_timeout: Duration,
    /// How tabs behave.
    pub tab: TabOptions,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        Self {
            executable: None,
            headless: true,
            prefer_headless_shell: true,
            no_sandbox: crate::chromium::sandbox_unavailable().is_some(),
            args: Vec::new(),
            user_data_dir: None,
            window: Size::new(1280, 720),
            launch_timeout: Duration::from_secs(20),
            tab: TabOptions::default(),
        }
    }
}

/// A Browserbase account to create a session with.
#[derive(Clone)]
pub struct BrowserbaseOptions {
    /// The API key (`X-BB-API-Key`).
    pub api_key: String,
    /// The project id.
    pub project_id: String,
    /// The API base URL (default `https://api.browserbase.com`).
    pub api_base: String,
    /// How tabs behave.
    pub tab: TabOptions,
}

impl BrowserbaseOptions {
    /// Options for a project, with the public API endpoint.
    pub fn new(api_key: impl Into<String>, project_id: impl Into<String>) -> Self {
        Self {
            api_key: api_key.into(),
            project_id: project_id.into(),
            api_base: "https://api.browserbase.com".to_owned(),
            tab: TabOptions::default(),
        }
    }
}

impl std::fmt::Debug for BrowserbaseOptions {
    // The key never reaches logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserbaseOptions")
            .field("api_key", &"<redacted>")
            .field("project_id", &self.project_id)
            .field("api_base", &self.api_base)
            .field("tab", &self.tab)
            .finish()
    }
}

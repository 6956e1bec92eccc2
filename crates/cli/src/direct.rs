//! `lumen browser …`: direct control of a background Chromium, agent-browser
//! style. `open` starts a detached Chromium for a named session, writes its
//! DevTools endpoint and page id to a state file, and starts the session's
//! keeper (`direct/keeper/`), which keeps one WebSocket straight to that
//! page ([`PageLink`]: no new tab, no setup beyond the calls each command
//! makes). A page command ([`BrowserCommand::warm`]) is sent to the keeper
//! over its Unix socket and runs there on that link; any other command, and
//! a page command the keeper cannot take, attaches its own link to the
//! page.
//!
//! Snapshot refs (`@e3`) survive between commands: `snapshot` stores each
//! ref's DOM backend node id and marks the document; a later command that
//! uses a ref finds the element by its node and checks, in one call inside
//! the page, that the mark is still there (a navigation loses it) and what
//! sits on top of the element, and fails with "run snapshot again" (or
//! names what covers it) otherwise — it never clicks whatever now sits
//! where the element used to be.
//!
//! What must outlive a command's WebSocket — emulation, extra headers,
//! offline mode, network routes, the request log — is held by the keeper
//! too, from the first `set` or `network` command on; `close` ends it with
//! the browser.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use lumen::browser::chromium::{self, DetachedChromium, DetachedOptions};
use lumen::browser::{
    AxSnapshot, DialogAction, DialogPolicy, ElementSpot, FillResult, PageLink, SavedRef,
};
use lumen::{DialogInfo, LumenError, MouseButton, Point};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::exit::CliError;

mod annotate;
mod batch;
mod debug;
mod elements;
mod emulate;
mod files;
mod keeper;
mod launch;
mod network;
mod socket;
mod storage;
mod warm;

/// `lumen browser`.
#[derive(Debug, Args)]
pub(crate) struct BrowserArgs {
    /// The session name; each has its own Chromium.
    #[arg(long, global = true, default_value = "default")]
    session: String,
    /// Machine-readable output (one JSON value).
    #[arg(long, global = true)]
    json: bool,
    /// Print what the page chose (its text, console lines, titles) byte for
    /// byte, escape sequences included; by default they are shown as
    /// visible escapes (`\x1b`) so a page cannot drive the terminal.
    #[arg(long, global = true)]
    raw: bool,
    /// Show the window (for `open` when it starts a browser).
    #[arg(long, global = true)]
    headed: bool,
    /// How JavaScript dialogs that open during the command are answered
    /// (default: alerts accepted, confirm, prompt and leave-page dialogs
    /// dismissed). Each one is reported.
    #[arg(long, global = true, value_enum)]
    dialog: Option<DialogAnswer>,
    /// Keep the browser's profile (cookies, storage, cache) in this folder,
    /// across `close` and `open`, instead of a throwaway one (for `open`
    /// when it starts a browser; never deleted).
    #[arg(long, global = true)]
    profile: Option<PathBuf>,
    /// Send the browser's traffic through this proxy: `http://host:port`,
    /// `socks5://host:port` (for `open` when it starts a browser; no
    /// credentials in the URL).
    #[arg(long, global = true)]
    proxy: Option<String>,
    /// Hosts that bypass `--proxy` (Chromium's list: `*.internal;10.0.0.0/8`;
    /// `<-loopback>` sends localhost through the proxy too).
    #[arg(long, global = true)]
    proxy_bypass: Option<String>,
    #[command(subcommand)]
    command: BrowserCommand,
}

/// `--dialog`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, Serialize, Deserialize)]
enum DialogAnswer {
    /// Press OK (a prompt gets its default text).
    Accept,
    /// Press Cancel.
    Dismiss,
}

/// The direct commands. Serialized for the session's keeper, which runs
/// the [warm](BrowserCommand::warm) ones on its open link to the page.
#[derive(Debug, Subcommand, Serialize, Deserialize)]
enum BrowserCommand {
    /// Open a URL, starting the session's browser if needed.
    Open { url: String },
    /// Close the session's browser.
    Close,
    /// Click at `x y` or on a snapshot ref (`@e3`).
    Click { target: Vec<String> },
    /// Double-click at `x y` or on a ref.
    Dblclick { target: Vec<String> },
    /// Move the pointer to `x y` or onto a ref.
    Hover { target: Vec<String> },
    /// Type text into the focused element (`type TEXT`), or into an
    /// element (`type EL TEXT`: a ref `@e3` or a CSS selector; focused,
    /// the caret at the end of its content, nothing cleared).
    Type {
        /// `TEXT`, or `EL TEXT`.
        #[arg(num_args = 1..=2, required = true, value_names = ["EL", "TEXT"])]
        words: Vec<String>,
    },
    /// Click a ref's field, select its content and type text.
    Fill { target: String, text: String },
    /// Press a key or chord (`Enter`, `Control+a`).
    Press { key: String },
    /// Scroll the page: `up`, `down`, `left` or `right`, by px (default
    /// one screen less a little).
    Scroll { direction: String, px: Option<f64> },
    /// Scroll an element (`@e3` or a CSS selector) into view: the page and
    /// every scrolled container around it. Commands acting on a ref do
    /// this by themselves when they need to.
    #[command(alias = "scrollinto")]
    Scrollintoview { target: String },
    /// Drag from SRC to DST (each a ref like `@e3` or `x y`): press,
    /// move in steps, release. Works for HTML5 drag and drop and for
    /// pages that follow the mouse.
    Drag {
        /// `SRC DST`.
        #[arg(num_args = 2..=4, required = true, value_names = ["SRC", "DST"], allow_negative_numbers = true)]
        from_to: Vec<String>,
    },
    /// Drive the mouse by hand: `move X Y`, `down [BUTTON]`, `up [BUTTON]`,
    /// `wheel DY [DX]`.
    #[command(subcommand)]
    Mouse(Mouse),
    /// The accessibility tree with refs.
    Snapshot {
        /// Interactive elements only.
        #[arg(short = 'i')]
        interactive: bool,
        /// Compact: leave out unnamed structural nodes.
        #[arg(short = 'c')]
        compact: bool,
        /// Only nodes this deep or shallower.
        #[arg(short = 'd')]
        depth: Option<u32>,
        /// Only the subtrees of the elements matching this CSS selector.
        #[arg(short = 's')]
        scope: Option<String>,
    },
    /// Scope later snapshots to a frame: `frame @e3` (an `Iframe` from
    /// `snapshot`), `frame main` for the whole page again. Refs of every
    /// frame work whatever the scope.
    Frame { target: String },
    /// Snapshots show the whole page again (`frame main`).
    Mainframe,
    /// List the open tabs.
    Tabs,
    /// Drive tab number N (from `tabs`).
    Tab { index: usize },
    /// Block or mock requests by URL pattern, list the requests pages made.
    #[command(subcommand)]
    #[serde(skip)]
    Network(network::Network),
    /// Emulate a device, viewport, user agent, position, offline mode,
    /// extra headers or colour scheme (kept until `close`).
    #[command(subcommand)]
    #[serde(skip)]
    Set(emulate::Set),
    /// The session's keeper process (started by `open`, `set` and `network`).
    #[command(name = "keeper-internal", hide = true)]
    Keeper,
    /// Check a checkbox, radio button or switch (`@e3` or a CSS selector):
    /// a click, only when it is not checked yet.
    Check { target: String },
    /// Uncheck a checkbox or switch: a click, only when it is checked.
    Uncheck { target: String },
    /// Choose the options of a `<select>` by value or label.
    Select {
        target: String,
        #[arg(required = true)]
        values: Vec<String>,
    },
    /// Read an element's text, value, attribute or box, or the page's title
    /// or URL.
    #[command(subcommand)]
    Get(elements::Get),
    /// Whether an element is visible, enabled or checked (`true`/`false`).
    #[command(subcommand)]
    Is(elements::Is),
    /// The refs of the elements with a role, text or label (takes a
    /// snapshot).
    #[command(subcommand)]
    Find(elements::Find),
    /// Wait for a time (`wait 500`), an element (`wait selector CSS`, or
    /// `wait CSS`), text (`wait text T`) or a URL (`wait url PART`).
    Wait {
        /// `MS`, `CSS`, or `selector|text|url VALUE`.
        what: Vec<String>,
        /// Wait until the page shows this text.
        #[arg(long)]
        text: Option<String>,
        /// Wait until the URL contains this.
        #[arg(long)]
        url: Option<String>,
        /// Give up after this many milliseconds (at most a day).
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_MS))]
        timeout: u64,
        /// Wait until the page reaches this load state: `load`,
        /// `domcontentloaded` or `networkidle` (also `wait load STATE`).
        #[arg(long)]
        load: Option<String>,
    },
    /// Set the files of an `<input type=file>` (`@e3` or a CSS selector).
    Upload {
        target: String,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Click an element that starts a download, wait until it is saved and
    /// print its path.
    Download {
        target: String,
        /// Where to save it (default: the current folder).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Give up after this many milliseconds (at most a day).
        #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_MS))]
        timeout: u64,
    },
    /// What the page logged to its console (its current document).
    Console {
        /// Show these, then only newer ones from now on.
        #[arg(long)]
        clear: bool,
    },
    /// The page's uncaught exceptions (its current document).
    Errors {
        /// Show these, then only newer ones from now on.
        #[arg(long)]
        clear: bool,
    },
    /// Print the page to a PDF (default `page.pdf`; headless sessions only).
    Pdf { path: Option<PathBuf> },
    /// Cookies of the page: `get` (default), `set NAME=VALUE`, `clear`.
    Cookies {
        action: Option<String>,
        pair: Option<String>,
    },
    /// Save or load the browser's cookies and the page's local and session
    /// storage to or from a JSON file (written readable by you only).
    State { action: String, file: PathBuf },
    /// Save a screenshot (PNG; default `screenshot.png`).
    Screenshot {
        path: Option<PathBuf>,
        /// Draw the interactive elements' refs (`e3`) and boxes on it.
        #[arg(long)]
        annotate: bool,
    },
    /// Evaluate JavaScript in the page and print the result.
    Eval { js: String },
    /// Print the URL.
    Url,
    /// Print the title.
    Title,
    /// Go back.
    Back,
    /// Go forward.
    Forward,
    /// Reload.
    Reload,
    /// Run commands from stdin, one a line (`click @e3`, `fill @e4 "Ada"`),
    /// in order in this one process; the first failure stops the batch.
    Batch,
}

/// `lumen browser mouse …`.
#[derive(Debug, Subcommand, Serialize, Deserialize)]
enum Mouse {
    /// Move the pointer to `X Y` (CSS pixels of the viewport), with the
    /// buttons held down so far (a drag by hand).
    Move {
        #[arg(allow_negative_numbers = true)]
        x: i32,
        #[arg(allow_negative_numbers = true)]
        y: i32,
    },
    /// Press a button (`left`, `right`, `middle`; default left) where the
    /// pointer is.
    Down { button: Option<String> },
    /// Release a button where the pointer is.
    Up { button: Option<String> },
    /// Turn the wheel where the pointer is, by CSS pixels (positive: down
    /// and right).
    Wheel {
        #[arg(allow_negative_numbers = true)]
        dy: f64,
        #[arg(allow_negative_numbers = true)]
        dx: Option<f64>,
    },
}

/// What the state file remembers about a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    pid: u32,
    /// The browser's start time (clock ticks after boot), so a pid reused
    /// by another program is never signalled; absent in older state files.
    #[serde(default)]
    started: Option<u64>,
    ws_url: String,
    profile: PathBuf,
    /// The page target being driven.
    target: String,
    /// The newest console message `console --clear` hid (its timestamp).
    #[serde(default)]
    console_seen: Option<f64>,
    /// The newest exception `errors --clear` hid (its timestamp).
    #[serde(default)]
    errors_seen: Option<f64>,
    /// The refs of the current document, from the last snapshot.
    #[serde(default)]
    refs: Option<SavedRefs>,
    /// The emulation the keeper applies (`set`).
    #[serde(default)]
    emulation: emulate::Emulation,
    /// The routes the keeper serves (`network route`).
    #[serde(default)]
    routes: Vec<network::Route>,
    /// The session's keeper process, once started.
    #[serde(default)]
    keeper: Option<keeper::KeeperProc>,
    /// The profile is the user's (`--profile`): never deleted.
    #[serde(default)]
    persistent_profile: bool,
    /// Where `mouse` left the pointer (CSS pixels of the viewport).
    #[serde(default)]
    pointer: [i32; 2],
    /// The buttons `mouse down` holds (left 1, right 2, middle 4).
    #[serde(default)]
    buttons: i64,
    /// The frame (`Iframe` ref) snapshots are scoped to (`frame`).
    #[serde(default)]
    frame: Option<String>,
}

/// A document's mark and every ref given in it: (number, DOM backend node
/// id).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedRefs {
    mark: String,
    nodes: Vec<(u32, i64)>,
    /// The frames the snapshots went into (a node of one has its number
    /// in its key, see `lumen_browser::SnapshotFrame`).
    #[serde(default)]
    frames: Vec<lumen::browser::SnapshotFrame>,
}

/// The longest `--timeout` a command takes (a day, in milliseconds): a
/// deadline further out would overflow the clock.
const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// The deadline of each CDP call (and of the load after a navigation).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

fn state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LUMEN_STATE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")));
    match base {
        Some(base) => base.join("lumen").join("browser"),
        // No home: a folder of this user's own in the temporary directory
        // (a shared one would be the first user's, closed to the others),
        // one level deep, so that checking its owner covers every part a
        // stranger could have made first.
        None => std::env::temp_dir().join(format!(
            "lumen-{}-browser",
            rustix::process::geteuid().as_raw()
        )),
    }
}

/// The longest path a Unix socket may have (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = if cfg!(target_os = "linux") { 107 } else { 103 };

fn state_path(session: &str) -> Result<PathBuf, CliError> {
    if session.is_empty()
        || !session
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(CliError::config(
            "--session names may use letters, digits, - and _ only",
        ));
    }
    // Checked before anything is started: the keeper's socket must fit.
    let socket = keeper::dir(session).join("sock");
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(CliError::config(format!(
            "the session's socket would be {} ({len} bytes, over the {MAX_SOCKET_PATH} a Unix \
             socket path may have): use a shorter --session name, or set LUMEN_STATE_DIR to a \
             shorter folder",
            socket.display()
        )));
    }
    Ok(state_dir().join(format!("{session}.json")))
}

fn load(session: &str) -> Result<Option<State>, CliError> {
    let path = state_path(session)?;
    // The state names the browser commands drive and the profile `close`
    // deletes: a file another user made, or one in a folder of another
    // user's, is never taken.
    let foreign = |part: &std::path::Path| {
        CliError::config(format!(
            "{} belongs to another user, or others may write to it: it is not this \
             session's; remove it, or set LUMEN_STATE_DIR to a folder of your own",
            part.display()
        ))
    };
    if let Some(dir) = path.parent()
        && let Ok(meta) = std::fs::symlink_metadata(dir)
        && !keeper::mine(&meta)
    {
        return Err(foreign(dir));
    }
    if let Ok(meta) = std::fs::symlink_metadata(&path)
        && !keeper::owned_by_me(&meta)
    {
        return Err(foreign(&path));
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(serde_json::from_str(&text).ok()),
        Err(_) => Ok(None),
    }
}

fn save(session: &str, state: &State) -> Result<(), CliError> {
    let path = state_path(session)?;
    let fail = |e: &dyn std::fmt::Display| {
        CliError::failure(format!("cannot write {}: {e}", path.display()))
    };
    // The state holds the DevTools endpoint, extra headers (tokens) and
    // mock bodies: the folder is the user's alone (0700), the file 0600.
    if let Some(dir) = path.parent() {
        keeper::private_dir(dir)?;
    }
    let text = serde_json::to_string(state).map_err(|e| fail(&e))?;
    lumen_trace::write_atomic(&path, text.as_bytes()).map_err(|e| fail(&e))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(|e| fail(&e))
}

/// How long a command waits for another command of its session to be done
/// with the session's state (starting the keeper and applying settings take
/// up to 20 s each).
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// The sessions whose lock this process holds, with their locked files.
static HELD: std::sync::Mutex<Vec<(String, std::fs::File)>> = std::sync::Mutex::new(Vec::new());

/// A session's lock: an exclusive `flock` on `<session>.lock` in the
/// private state folder, held while a command reads, changes and writes
/// the session's state, and while it starts the session's keeper, so two
/// commands never start two keepers or lose each other's changes. The
/// kernel releases it when the process ends in any way, so a killed
/// command never leaves the session locked. The file itself stays (empty):
/// removing it while another command waits on it would let a third lock a
/// new file beside it. Taking it again in the process that holds it (a
/// nested call) is a no-op.
#[must_use = "the lock is released when dropped"]
struct SessionLock {
    /// The session, for the guard that took the lock (a nested one has
    /// none).
    session: Option<String>,
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            // Closing the file releases the lock.
            held().retain(|(name, _)| *name != session);
        }
    }
}

fn held() -> std::sync::MutexGuard<'static, Vec<(String, std::fs::File)>> {
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One try at the session's lock: `None` while another process holds it.
fn try_lock(session: &str) -> Result<Option<SessionLock>, CliError> {
    if held().iter().any(|(name, _)| name == session) {
        return Ok(Some(SessionLock { session: None }));
    }
    let path = state_path(session)?.with_extension("lock");
    if let Some(dir) = path.parent() {
        keeper::private_dir(dir)?;
    }
    let fail = |e: &dyn std::fmt::Display| {
        CliError::failure(format!("cannot lock {}: {e}", path.display()))
    };
    let file = {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| fail(&e))?
    };
    match file.try_lock() {
        Ok(()) => {
            held().push((session.to_owned(), file));
            Ok(Some(SessionLock {
                session: Some(session.to_owned()),
            }))
        }
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(fail(&e)),
    }
}

/// What to say when the lock stayed taken for [`LOCK_WAIT`].
fn lock_timeout(session: &str) -> CliError {
    CliError::failure(format!(
        "another `lumen browser` command of session {session:?} has been changing its state \
         for over {} s; wait for it to finish (or end it) and run this command again",
        LOCK_WAIT.as_secs()
    ))
}

/// Takes the session's lock, waiting up to [`LOCK_WAIT`] for another
/// command to release it.
async fn lock(session: &str) -> Result<SessionLock, CliError> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        if let Some(lock) = try_lock(session)? {
            return Ok(lock);
        }
        if Instant::now() > deadline {
            return Err(lock_timeout(session));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`lock`] for the few synchronous paths (cleaning up after a browser
/// that is gone).
fn lock_blocking(session: &str) -> Result<SessionLock, CliError> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        if let Some(lock) = try_lock(session)? {
            return Ok(lock);
        }
        if Instant::now() > deadline {
            return Err(lock_timeout(session));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Saves what a page command changes — the tab it drives, that tab's refs,
/// the console and error marks — into the session's current state, under
/// the session's lock: the rest (emulation, routes, the keeper) may have
/// been changed by another command since this one read the state, and is
/// kept. Nothing is saved when the session was closed or its browser
/// replaced meanwhile.
async fn save_page(session: &str, state: &State) -> Result<(), CliError> {
    save_page_read_on(session, state, &state.target).await
}

/// [`save_page`] for a command that read the page of tab `read_on` (and
/// may have switched the session to `state.target`, as `tab` does).
async fn save_page_read_on(session: &str, state: &State, read_on: &str) -> Result<(), CliError> {
    let _lock = lock(session).await?;
    let Some(mut now) = load(session)? else {
        return Ok(());
    };
    if now.ws_url != state.ws_url {
        return Ok(());
    }
    // Another command switched tabs meanwhile: the refs and counters
    // read here are of the tab it left.
    if now.target != read_on {
        return Ok(());
    }
    now.target.clone_from(&state.target);
    now.refs.clone_from(&state.refs);
    now.console_seen = state.console_seen;
    now.errors_seen = state.errors_seen;
    now.pointer = state.pointer;
    now.buttons = state.buttons;
    now.frame.clone_from(&state.frame);
    save(session, &now)
}

fn forget(session: &str, state: Option<&State>) {
    keeper::end(session, state);
    if let Ok(path) = state_path(session) {
        let _ = std::fs::remove_file(path);
    }
    // Only the throwaway profile this session's `open` made, whatever the
    // state file says.
    if let Some(s) = state.filter(|s| !s.persistent_profile)
        && s.profile == state_dir().join(format!("{session}-profile"))
    {
        let _ = std::fs::remove_dir_all(&s.profile);
    }
}

impl BrowserArgs {
    /// The global flags as words, for the lines of a batch.
    fn global_flags(&self) -> Vec<String> {
        let mut out = vec!["--session".to_owned(), self.session.clone()];
        if self.json {
            out.push("--json".into());
        }
        if self.headed {
            out.push("--headed".into());
        }
        if let Some(answer) = self.dialog {
            out.push("--dialog".into());
            out.push(
                match answer {
                    DialogAnswer::Accept => "accept",
                    DialogAnswer::Dismiss => "dismiss",
                }
                .into(),
            );
        }
        launch::global_flags(self, &mut out);
        out
    }
}

/// Runs one direct command; returns the exit code.
/// Runs one `lumen browser` command. With `--json`, a failure is also one
/// JSON object on stdout (see [`print_error`]); the exit code is kept.
pub(crate) async fn run(args: BrowserArgs) -> Result<u8, CliError> {
    let json = args.json;
    match run_command(args).await {
        Err(e) if json => {
            print_error(&e);
            Err(e)
        }
        other => other,
    }
}

/// A failed command's answer on stdout for `--json`:
/// `{"ok": false, "success": false, "error": {"code", "exit", "message"}}`
/// (`code` is `usage` for exit 2, else `failed`; agent-browser's clients
/// read `success` and `error`).
pub(crate) fn print_error(e: &CliError) {
    let code = if e.code == crate::exit::CONFIG {
        "usage"
    } else {
        "failed"
    };
    let value = json!({
        "ok": false,
        "success": false,
        "error": {"code": code, "exit": e.code, "message": e.message},
    });
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

async fn run_command(args: BrowserArgs) -> Result<u8, CliError> {
    let session = args.session.clone();
    if let BrowserCommand::Batch = args.command {
        return batch::run(&args).await;
    }
    if let BrowserCommand::Close = args.command {
        let _lock = lock(&session).await?;
        let state = load(&session)?;
        if let Some(s) = &state {
            launch::close_gracefully(s).await;
            end(s);
        }
        forget(&session, state.as_ref());
        return print(
            &args,
            json!({"closed": state.is_some()}),
            "closed".to_owned(),
        );
    }
    // Routes and emulation are the keeper's (direct/keeper/): no page link.
    match &args.command {
        BrowserCommand::Network(cmd) => {
            let (value, text) = network::run(&session, cmd).await?;
            return print(&args, value, text);
        }
        BrowserCommand::Set(cmd) => {
            let (value, text) = emulate::run(&session, cmd).await?;
            return print(&args, value, text);
        }
        BrowserCommand::Keeper => return keeper::serve(&session).await,
        _ => {}
    }
    if let BrowserCommand::Open { url } = &args.command {
        // Attaching to the session's browser or starting one, and saving
        // it, is one change of the state.
        let guard = lock(&session).await?;
        let (link, mut state, fresh) = match attach(&session).await {
            Ok((link, state)) => {
                launch::note_running(&args);
                (link, state, false)
            }
            Err(e) => match load(&session)?.filter(browser_runs) {
                // Still running: its other pages and its logins are kept.
                // For a closed page the session gets a new one; a browser
                // that did not answer is reported, not replaced.
                Some(old) => match retarget(old).await {
                    Some((link, state)) => {
                        launch::note_running(&args);
                        (link, state, false)
                    }
                    None => return Err(e),
                },
                None => {
                    let (link, state) = start(&session, &args).await?;
                    (link, state, true)
                }
            },
        };
        state.refs = None;
        save(&session, &state)?;
        // The keeper keeps a link to the page open for the commands that
        // follow (direct/keeper/); without one they attach themselves.
        if let Err(e) = keeper::ensure(&session, &mut state).await {
            tracing::debug!("starting the session's keeper: {}", e.message);
        }
        drop(guard);
        link.goto(url).await.map_err(fail)?;
        if fresh && !args.headed {
            // New headless keeps room for bars it does not draw: grow the
            // window until the page itself is 1280x720 (a window size,
            // unlike an emulated viewport, outlives this process).
            if let Err(e) = link
                .resize_viewport(&state.ws_url, lumen::Size::new(1280, 720))
                .await
            {
                tracing::debug!("resizing the window: {e}");
            }
        }
        let now = link.url().await.unwrap_or_default();
        return print(&args, json!({"url": now}), now);
    }
    if let BrowserCommand::Url
    | BrowserCommand::Title
    | BrowserCommand::Get(elements::Get::Url | elements::Get::Title) = args.command
    {
        // The browser knows both: no need to attach to the page at all.
        let state = opened(&session)?;
        let (url, title) = lumen::browser::page_info(&state.ws_url, &state.target, CALL_TIMEOUT)
            .await
            .map_err(|e| unreachable_session(&session, &state, e))?;
        return match args.command {
            BrowserCommand::Url | BrowserCommand::Get(elements::Get::Url) => {
                print(&args, json!({"url": url}), url)
            }
            _ => print(&args, json!({"title": title}), title),
        };
    }
    if args.command.warm()
        && let Some(outcome) = warm::run_warm(&session, &args.command, args.dialog).await
    {
        return finish(&args, outcome);
    }
    let (link, mut state) = attach(&session).await?;
    let outcome = on_link(&args, &link, &mut state, &session).await;
    finish(&args, outcome)
}

/// What a command on the page came to: its output (JSON and text) or its
/// error, and the JavaScript dialogs answered meanwhile. The keeper sends
/// it back over its socket for the command's own process to print.
#[derive(Debug, Serialize, Deserialize)]
struct PageOutcome {
    answer: Result<(Value, String), CliError>,
    dialogs: Vec<DialogInfo>,
    /// A file the command made (a screenshot), written by the command's
    /// own process: in its folder, with its rights, to what its path
    /// means there (`/dev/stdout`, a pipe), never by the keeper.
    file: Option<FileOut>,
}

/// A file to write: its path as given and its bytes.
#[derive(Debug, Serialize, Deserialize)]
struct FileOut {
    path: PathBuf,
    #[serde(with = "base64_bytes")]
    bytes: Vec<u8>,
}

/// Bytes as one base64 string in JSON (not an array of numbers).
mod base64_bytes {
    use base64::Engine as _;

    pub(super) fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// Runs a command on `link` under `--dialog`'s policy, then puts the
/// default policy back (the keeper's link outlives the command).
async fn on_link(
    args: &BrowserArgs,
    link: &PageLink,
    state: &mut State,
    session: &str,
) -> PageOutcome {
    if let Some(answer) = args.dialog {
        let action = match answer {
            DialogAnswer::Accept => DialogAction::Accept,
            DialogAnswer::Dismiss => DialogAction::Dismiss,
        };
        link.set_dialog_policy(DialogPolicy {
            alert: action,
            confirm: action,
            prompt: action,
            beforeunload: action,
            prompt_text: None,
        })
        .await;
    }
    let mut file = None;
    let answer = on_page(args, link, state, session, &mut file).await;
    if args.dialog.is_some() {
        link.set_dialog_policy(DialogPolicy::default()).await;
    }
    PageOutcome {
        answer,
        dialogs: link.dialogs().await,
        file,
    }
}

/// Prints a command's outcome: its output on stdout, the dialogs it met on
/// stderr (or in its JSON).
fn finish(args: &BrowserArgs, outcome: PageOutcome) -> Result<u8, CliError> {
    let PageOutcome {
        answer,
        dialogs,
        file,
    } = outcome;
    let answer = match (answer, file) {
        (Ok(out), Some(file)) => std::fs::write(&file.path, &file.bytes)
            .map(|()| out)
            .map_err(|e| CliError::failure(format!("cannot write {}: {e}", file.path.display()))),
        (answer, _) => answer,
    };
    match answer {
        Ok((mut value, text)) => {
            if args.json
                && !dialogs.is_empty()
                && let Some(object) = value.as_object_mut()
            {
                object.insert("dialogs".into(), json!(dialogs));
                print(args, value, text)?;
            } else {
                print(args, value, text)?;
                report_dialogs(args, &dialogs);
            }
            Ok(crate::exit::SUCCESS)
        }
        Err(e) => {
            report_dialogs(args, &dialogs);
            Err(e)
        }
    }
}

impl BrowserCommand {
    /// Whether the session's keeper may run this command on the link it
    /// keeps open to the page: commands that act on or read the page, and
    /// a plain screenshot (written relative to the caller's folder). Not
    /// those that start or close a browser, switch tabs, change what the
    /// keeper itself applies, or read and write other files.
    fn warm(&self) -> bool {
        matches!(
            self,
            Self::Screenshot {
                annotate: false,
                ..
            } | Self::Click { .. }
                | Self::Dblclick { .. }
                | Self::Hover { .. }
                | Self::Type { .. }
                | Self::Fill { .. }
                | Self::Press { .. }
                | Self::Scroll { .. }
                | Self::Scrollintoview { .. }
                | Self::Drag { .. }
                | Self::Mouse(_)
                | Self::Snapshot { .. }
                | Self::Frame { .. }
                | Self::Mainframe
                | Self::Check { .. }
                | Self::Uncheck { .. }
                | Self::Select { .. }
                | Self::Get(_)
                | Self::Is(_)
                | Self::Find(_)
                | Self::Wait { .. }
                | Self::Console { .. }
                | Self::Errors { .. }
                | Self::Eval { .. }
                | Self::Cookies { .. }
                | Self::Back
                | Self::Forward
                | Self::Reload
        )
    }
}

/// Runs a command on the session's page; returns its JSON and text output.
async fn on_page(
    args: &BrowserArgs,
    link: &PageLink,
    state: &mut State,
    session: &str,
    file: &mut Option<FileOut>,
) -> Result<(Value, String), CliError> {
    match &args.command {
        BrowserCommand::Click { target } | BrowserCommand::Dblclick { target } => {
            let (at, scrolled) = point(link, state, target).await?;
            let count = if matches!(args.command, BrowserCommand::Dblclick { .. }) {
                2
            } else {
                1
            };
            let navigated = link
                .click(at, MouseButton::Left, count)
                .await
                .map_err(fail)?;
            let text = if navigated {
                format!("ok (now at {})", link.url().await.map_err(fail)?)
            } else {
                "ok".to_owned()
            };
            Ok((
                json!({"ok": true, "x": at.x, "y": at.y, "navigated": navigated, "scrolled": scrolled}),
                scrolled_note(text, scrolled),
            ))
        }
        BrowserCommand::Hover { target } => {
            let (at, scrolled) = point(link, state, target).await?;
            link.hover(at).await.map_err(fail)?;
            Ok((
                json!({"ok": true, "x": at.x, "y": at.y, "scrolled": scrolled}),
                scrolled_note("ok".to_owned(), scrolled),
            ))
        }
        BrowserCommand::Scrollintoview { target } => {
            let element = elements::element(state, target)?;
            let moved = link
                .scroll_into_view(element)
                .await
                .map_err(elements::element_error)?
                .map_err(|spot| refusal(target, spot))?;
            let text = if moved {
                format!("scrolled {target} into view")
            } else {
                format!("{target} was in view already")
            };
            Ok((json!({"ok": true, "scrolled": moved}), text))
        }
        BrowserCommand::Drag { from_to } => {
            let (from, to) = drag_points(link, state, from_to).await?;
            let html5 = link.drag(from, to).await.map_err(fail)?;
            state.pointer = [to.x, to.y];
            save_page(session, state).await?;
            Ok((
                json!({"ok": true, "from": [from.x, from.y], "to": [to.x, to.y], "dragAndDrop": html5}),
                format!("dragged from {}, {} to {}, {}", from.x, from.y, to.x, to.y),
            ))
        }
        BrowserCommand::Mouse(m) => {
            let v = mouse(link, state, session, m).await?;
            Ok((v, "ok".to_owned()))
        }
        BrowserCommand::Type { words } => {
            let (target, text) = match words.as_slice() {
                [text] => (None, text),
                [target, text] => (Some(target), text),
                _ => return Err(CliError::config("usage: lumen browser type [EL] TEXT")),
            };
            if text.is_empty() {
                return Err(CliError::config("there is no text to type"));
            }
            let Some(target) = target else {
                link.type_text(text).await.map_err(fail)?;
                return Ok((json!({"ok": true}), "ok".to_owned()));
            };
            let element = elements::element(state, target)?;
            match link
                .type_into(element, text)
                .await
                .map_err(elements::element_error)?
            {
                FillResult::Filled { scrolled } => Ok((
                    json!({"ok": true, "scrolled": scrolled}),
                    scrolled_note("ok".to_owned(), scrolled),
                )),
                FillResult::Refused(spot) => Err(refusal(target, spot)),
                FillResult::NotEditable(what) => Err(not_editable(target, &what)),
                other => Err(CliError::failure(format!("{target}: {other:?}"))),
            }
        }
        BrowserCommand::Fill { target, text } => {
            let saved = saved_ref(state, target)?;
            match link.fill(saved, text).await.map_err(fail)? {
                FillResult::Filled { scrolled } => Ok((
                    json!({"ok": true, "scrolled": scrolled}),
                    scrolled_note("ok".to_owned(), scrolled),
                )),
                FillResult::Refused(spot) => Err(refusal(target, spot)),
                FillResult::NotEditable(what) => Err(not_editable(target, &what)),
                other => Err(CliError::failure(format!("{target}: {other:?}"))),
            }
        }
        BrowserCommand::Press { key } => {
            let keys: Vec<String> = if key == "+" {
                vec![key.clone()]
            } else {
                key.split('+').map(str::to_owned).collect()
            };
            link.press(&keys).await.map_err(|e| match e {
                LumenError::InvalidData { .. } => CliError::config(e.to_string()),
                other => fail(other),
            })?;
            Ok((json!({"ok": true}), "ok".to_owned()))
        }
        BrowserCommand::Scroll { direction, px } => {
            let size = link.viewport().await.map_err(fail)?;
            let page = f64::from(size.height) * 0.8;
            let amount = px.unwrap_or(page);
            let (dx, dy) = match direction.as_str() {
                "up" => (0.0, -amount),
                "down" => (0.0, amount),
                "left" => (-amount, 0.0),
                "right" => (amount, 0.0),
                other => {
                    return Err(CliError::config(format!(
                        "unknown direction {other:?}; use up, down, left or right"
                    )));
                }
            };
            let center = Point::new(size.width as i32 / 2, size.height as i32 / 2);
            let (before, after) = link.wheel(center, dx, dy).await.map_err(fail)?;
            if before == after {
                return Err(CliError::failure(format!(
                    "nothing scrolled: the page is already at its {direction} edge, or nothing \
                     under the viewport centre scrolls"
                )));
            }
            Ok((
                json!({"ok": true, "scrollX": after[0], "scrollY": after[1]}),
                format!("scrolled to {}, {}", after[0], after[1]),
            ))
        }
        BrowserCommand::Snapshot {
            interactive,
            compact,
            depth,
            scope,
        } => {
            let mut taken = snapshot(link, state, session, scope.as_deref()).await?;
            if let Some(frame) = state.frame.clone() {
                match frame_subtree(&taken, &frame) {
                    Some(inside) => taken = inside,
                    None => {
                        eprintln!(
                            "note: frame {frame} is no longer on the page; showing the whole page \
                             (`lumen browser frame @eN` scopes again)"
                        );
                        state.frame = None;
                        save_page(session, state).await?;
                    }
                }
            }
            let snap = filter(taken, *interactive, *compact, *depth);
            let text = snap.to_text();
            Ok((serde_json::to_value(&snap).unwrap_or(Value::Null), text))
        }
        BrowserCommand::Mainframe => main_frame(state, session).await,
        BrowserCommand::Frame { target } if target == "main" => main_frame(state, session).await,
        BrowserCommand::Frame { target } => {
            let taken = snapshot(link, state, session, None).await?;
            let Some(node) = taken.nodes.iter().find(|n| n.reference == *target) else {
                return Err(stale(target, "it is not in the page's snapshot"));
            };
            if node.role != "Iframe" {
                return Err(CliError::failure(format!(
                    "{target} is a {}, not a frame; pick an `Iframe` from `lumen browser \
                     snapshot`",
                    node.role
                )));
            }
            let name = node.name.clone();
            state.frame = Some(target.clone());
            save_page(session, state).await?;
            Ok((
                json!({"ok": true, "frame": target, "name": name}),
                format!("snapshots now show frame {target} {name:?}"),
            ))
        }
        BrowserCommand::Screenshot {
            path,
            annotate: false,
        } => {
            let path = path
                .clone()
                .unwrap_or_else(|| PathBuf::from("screenshot.png"));
            let png = link.screenshot_png().await.map_err(fail)?;
            let shown = path.display().to_string();
            *file = Some(FileOut { path, bytes: png });
            Ok((json!({"path": shown}), shown))
        }
        BrowserCommand::Eval { js } => {
            let v = link.evaluate(js).await.map_err(fail)?;
            let text = match &v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Ok((v, text))
        }
        BrowserCommand::Back | BrowserCommand::Forward | BrowserCommand::Reload => {
            match args.command {
                BrowserCommand::Back => link.history(-1).await,
                BrowserCommand::Forward => link.history(1).await,
                _ => link.reload().await,
            }
            .map_err(|e| match e {
                LumenError::InvalidData { .. } => CliError::failure(e.to_string()),
                other => fail(other),
            })?;
            let now = link.url().await.map_err(fail)?;
            Ok((
                json!({"ok": true, "url": now}),
                format!("ok (now at {now})"),
            ))
        }
        BrowserCommand::Tabs => {
            let tabs = lumen::browser::page_tabs(&state.ws_url, CALL_TIMEOUT)
                .await
                .map_err(fail)?;
            let lines: Vec<String> = tabs
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let mark = if t.id == state.target { "*" } else { " " };
                    format!("{mark} {i}: {}", t.url)
                })
                .collect();
            let value: Vec<Value> = tabs
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"index": i, "url": t.url, "current": t.id == state.target}))
                .collect();
            Ok((Value::Array(value), lines.join("\n")))
        }
        BrowserCommand::Tab { index } => {
            let tabs = lumen::browser::page_tabs(&state.ws_url, CALL_TIMEOUT)
                .await
                .map_err(fail)?;
            let Some(t) = tabs.get(*index) else {
                return Err(CliError::config(format!(
                    "there is no tab {index}; `lumen browser tabs` lists {} tab(s)",
                    tabs.len()
                )));
            };
            lumen::browser::activate_tab(&state.ws_url, &t.id, CALL_TIMEOUT)
                .await
                .map_err(fail)?;
            let read_on = std::mem::replace(&mut state.target, t.id.clone());
            state.refs = None;
            state.frame = None;
            save_page_read_on(session, state, &read_on).await?;
            Ok((json!({"index": index, "url": t.url}), t.url.clone()))
        }
        BrowserCommand::Wait {
            what,
            text,
            url,
            timeout,
            load,
        } => {
            debug::wait(
                link,
                what,
                text.clone(),
                url.clone(),
                load.as_deref(),
                *timeout,
            )
            .await
        }
        // Files, debugging output, storage, annotated screenshots.
        BrowserCommand::Upload { target, files } => files::upload(link, state, target, files).await,
        BrowserCommand::Download {
            target,
            dir,
            timeout,
        } => files::download(link, state, target, dir.as_deref(), *timeout).await,
        BrowserCommand::Pdf { path } => files::pdf(link, path.as_deref()).await,
        BrowserCommand::Console { clear } => debug::log(link, state, session, false, *clear).await,
        BrowserCommand::Errors { clear } => debug::log(link, state, session, true, *clear).await,
        BrowserCommand::State { action, file } => storage::state(link, action, file).await,
        BrowserCommand::Screenshot {
            path,
            annotate: true,
        } => {
            let path = path
                .clone()
                .unwrap_or_else(|| PathBuf::from("screenshot.png"));
            annotate::screenshot(link, state, session, &path).await
        }
        BrowserCommand::Check { target } => elements::check(link, state, target, true).await,
        BrowserCommand::Uncheck { target } => elements::check(link, state, target, false).await,
        BrowserCommand::Select { target, values } => {
            elements::select(link, state, target, values).await
        }
        BrowserCommand::Get(what) => elements::get(link, state, what).await,
        BrowserCommand::Is(what) => elements::is(link, state, what).await,
        BrowserCommand::Find(how) => {
            let snap = snapshot(link, state, session, None).await?;
            elements::find(&snap, how)
        }
        BrowserCommand::Cookies { action, pair } => match action.as_deref().unwrap_or("get") {
            "get" => {
                let v = link
                    .call("Network.getCookies", json!({}))
                    .await
                    .map_err(fail)?;
                let cookies = v["cookies"].clone();
                let lines: Vec<String> = cookies
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        format!(
                            "{}={} ({})",
                            c["name"].as_str().unwrap_or(""),
                            c["value"].as_str().unwrap_or(""),
                            c["domain"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                Ok((cookies, lines.join("\n")))
            }
            "set" => {
                let Some((name, value)) = pair.as_deref().and_then(|p| p.split_once('=')) else {
                    return Err(CliError::config(
                        "usage: lumen browser cookies set NAME=VALUE",
                    ));
                };
                let url = link.url().await.map_err(fail)?;
                link.call(
                    "Network.setCookies",
                    json!({"cookies": [{"name": name, "value": value, "url": url}]}),
                )
                .await
                .map_err(fail)?;
                Ok((json!({"ok": true}), "ok".to_owned()))
            }
            "clear" => {
                link.call("Network.clearBrowserCookies", json!({}))
                    .await
                    .map_err(fail)?;
                Ok((json!({"ok": true}), "ok".to_owned()))
            }
            other => Err(CliError::config(format!(
                "unknown cookies action {other:?}; use get, set NAME=VALUE or clear"
            ))),
        },
        BrowserCommand::Open { .. }
        | BrowserCommand::Close
        | BrowserCommand::Url
        | BrowserCommand::Title
        | BrowserCommand::Batch => Ok((Value::Null, String::new())),
        BrowserCommand::Network(_) | BrowserCommand::Set(_) | BrowserCommand::Keeper => {
            Ok((Value::Null, String::new()))
        }
    }
}

/// Takes a snapshot (scoped to a CSS selector's subtrees) and saves its
/// refs, numbered on from the document's earlier ones.
async fn snapshot(
    link: &PageLink,
    state: &mut State,
    session: &str,
    scope: Option<&str>,
) -> Result<AxSnapshot, CliError> {
    let (mark, earlier, frames) = match &state.refs {
        Some(r) => (
            Some(r.mark.as_str()),
            r.nodes.as_slice(),
            r.frames.as_slice(),
        ),
        None => (None, &[][..], &[][..]),
    };
    let taken = link
        .snapshot(scope, mark, earlier, frames)
        .await
        .map_err(|e| match e {
            LumenError::InvalidData { .. } => CliError::failure(e.to_string()),
            other => fail(other),
        })?;
    // A frame scope names a ref of the document it was set in.
    if mark != Some(taken.mark.as_str()) {
        state.frame = None;
    }
    state.refs = Some(SavedRefs {
        mark: taken.mark,
        nodes: taken.refs,
        frames: taken.frames,
    });
    save_page(session, state).await?;
    Ok(taken.snapshot)
}

/// `wait`: a time, then until every condition holds (an element matching a
/// selector with a box, text on the page, a URL containing a string),
/// polled every 50 ms up to `timeout` ms.
async fn wait(
    link: &PageLink,
    what: &[String],
    mut text: Option<String>,
    mut url: Option<String>,
    timeout: u64,
) -> Result<(Value, String), CliError> {
    let mut selector = None;
    match what {
        [] => {}
        [ms] if ms.parse::<u64>().is_ok() => {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(0))).await;
        }
        [kind, value] if kind == "selector" => selector = Some(value.clone()),
        [kind, value] if kind == "text" => text = Some(value.clone()),
        [kind, value] if kind == "url" => url = Some(value.clone()),
        [css] if !matches!(css.as_str(), "selector" | "text" | "url") => {
            selector = Some(css.clone());
        }
        _ => {
            return Err(CliError::config(
                "usage: lumen browser wait MS | CSS | selector CSS | text TEXT | url PART \
                 [--timeout MS]",
            ));
        }
    }
    let deadline = Instant::now() + Duration::from_millis(timeout);
    loop {
        let selector_ok = match &selector {
            Some(css) => {
                link.visible_matches(css).await.map_err(|e| match e {
                    LumenError::InvalidData { .. } => CliError::failure(e.to_string()),
                    other => fail(other),
                })? > 0
            }
            None => true,
        };
        let text_ok = match &text {
            Some(t) => link
                .evaluate(&format!(
                    "(document.body ? document.body.innerText : '').includes({})",
                    json!(t)
                ))
                .await
                .map_err(fail)?
                .as_bool()
                .unwrap_or(false),
            None => true,
        };
        let url_ok = match &url {
            Some(u) => link.url().await.map_err(fail)?.contains(u.as_str()),
            None => true,
        };
        if selector_ok && text_ok && url_ok {
            break;
        }
        if Instant::now() > deadline {
            return Err(CliError::failure(format!(
                "gave up after {timeout} ms waiting for {}",
                [
                    selector
                        .as_ref()
                        .map(|s| format!("an element matching {s:?} to show")),
                    text.as_ref().map(|t| format!("the text {t:?}")),
                    url.as_ref().map(|u| format!("a URL containing {u:?}")),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((json!({"ok": true}), "ok".to_owned()))
}

fn fail(e: LumenError) -> CliError {
    CliError::failure(e.to_string())
}

/// Tells of the JavaScript dialogs a command met (and how they were
/// answered) on stderr, where they do not mix with the command's output.
fn report_dialogs(args: &BrowserArgs, dialogs: &[DialogInfo]) {
    let mut err = std::io::stderr().lock();
    for d in dialogs {
        let _ = if args.json {
            writeln!(err, "{}", json!({ "dialog": d }))
        } else {
            writeln!(
                err,
                "note: a JavaScript {} opened ({:?}) and was {}",
                d.kind,
                d.message,
                if d.accepted { "accepted" } else { "dismissed" }
            )
        };
    }
}

fn print(args: &BrowserArgs, value: Value, text: String) -> Result<u8, CliError> {
    let mut out = std::io::stdout().lock();
    let _ = if args.json {
        writeln!(out, "{value}")
    } else if args.raw {
        writeln!(out, "{}", text.trim_end())
    } else {
        writeln!(out, "{}", crate::terminal::visible(text.trim_end()))
    };
    let _ = out.flush();
    Ok(crate::exit::SUCCESS)
}

/// `mainframe`, `frame main`: snapshots show the whole page again.
async fn main_frame(state: &mut State, session: &str) -> Result<(Value, String), CliError> {
    state.frame = None;
    save_page(session, state).await?;
    Ok((json!({"ok": true, "frame": null}), "main frame".to_owned()))
}

/// The part of a snapshot inside frame `reference` (an `Iframe` node),
/// its document at depth 0; `None` when the page has no such frame.
fn frame_subtree(snap: &AxSnapshot, reference: &str) -> Option<AxSnapshot> {
    let at = snap
        .nodes
        .iter()
        .position(|n| n.reference == reference && n.role == "Iframe")?;
    let base = snap.nodes[at].depth + 1;
    let nodes = snap.nodes[at + 1..]
        .iter()
        .take_while(|n| n.depth >= base)
        .map(|n| lumen::browser::AxNode {
            depth: n.depth - base,
            ..n.clone()
        })
        .collect();
    Some(AxSnapshot {
        url: snap.url.clone(),
        nodes,
    })
}

/// Interactive-only keeps the roles a person can act on; compact drops
/// unnamed structure; depth cuts the tree.
fn filter(
    mut snap: AxSnapshot,
    interactive: bool,
    compact: bool,
    depth: Option<u32>,
) -> AxSnapshot {
    if let Some(d) = depth {
        snap.nodes.retain(|n| n.depth <= d);
    }
    if compact {
        snap.nodes
            .retain(|n| !n.name.is_empty() || n.value.is_some() || n.focusable);
    }
    const ROLES: &[&str] = &[
        "button",
        "link",
        "textbox",
        "searchbox",
        "checkbox",
        "radio",
        "combobox",
        "listbox",
        "menuitem",
        "option",
        "slider",
        "spinbutton",
        "switch",
        "tab",
    ];
    if interactive {
        snap.nodes.retain(|n| ROLES.contains(&n.role.as_str()));
        for n in &mut snap.nodes {
            n.depth = 0;
        }
    }
    snap
}

/// `x y` or `@eN` → a viewport point, and whether the ref's element was
/// scrolled into view for it; a ref is checked against the saved snapshot
/// first.
async fn point(
    link: &PageLink,
    state: &State,
    target: &[String],
) -> Result<(Point, bool), CliError> {
    match target {
        [x, y] => Ok((xy(x, y)?, false)),
        [r] if r.starts_with('@') => ref_point(link, state, r).await,
        _ => Err(CliError::config(
            "expected `x y` or a ref like @e3 from `lumen browser snapshot`",
        )),
    }
}

/// `x y` as whole CSS pixels.
fn xy(x: &str, y: &str) -> Result<Point, CliError> {
    match (x.parse::<i32>(), y.parse::<i32>()) {
        (Ok(x), Ok(y)) => Ok(Point::new(x, y)),
        _ => Err(CliError::config(format!(
            "expected `x y` (whole CSS pixels) or a ref like @e3, not `{x} {y}`"
        ))),
    }
}

/// Where a ref's element can be clicked, scrolled into view first when it
/// lies outside the viewport or a scrolled container cuts it off (and
/// whether it was). The element is found by its DOM node (saved with the
/// snapshot) in the same document only: the check and the geometry happen
/// in one step in the page, so a navigation can never turn an old ref into
/// a click on the new page.
async fn ref_point(
    link: &PageLink,
    state: &State,
    reference: &str,
) -> Result<(Point, bool), CliError> {
    match link
        .locate_in_view(saved_ref(state, reference)?)
        .await
        .map_err(fail)?
    {
        (ElementSpot::At(p), scrolled) => Ok((p, scrolled)),
        (spot, _) => Err(refusal(reference, spot)),
    }
}

/// A command's answer, saying when its element was scrolled into view.
fn scrolled_note(text: String, scrolled: bool) -> String {
    if scrolled {
        format!("{text} (scrolled into view first)")
    } else {
        text
    }
}

/// `drag SRC DST`: each a ref or `x y`.
async fn drag_points(
    link: &PageLink,
    state: &State,
    words: &[String],
) -> Result<(Point, Point), CliError> {
    let usage = || {
        CliError::config(
            "usage: lumen browser drag SRC DST, each a ref like @e3 or `x y` \
             (`drag @e3 @e7`, `drag 10 20 300 400`, `drag @e3 300 400`)",
        )
    };
    let (first, rest) = match words {
        [r, rest @ ..] if r.starts_with('@') => (&words[..1], rest),
        [_, _, rest @ ..] => (&words[..2], rest),
        _ => return Err(usage()),
    };
    if !matches!(rest.len(), 1 | 2) || (rest.len() == 1 && !rest[0].starts_with('@')) {
        return Err(usage());
    }
    let (from, _) = point(link, state, first).await?;
    let (to, _) = point(link, state, rest).await?;
    Ok((from, to))
}

/// `mouse move X Y | down [BUTTON] | up [BUTTON] | wheel DY [DX]`. Where
/// the pointer is and which buttons it holds outlive the command (in the
/// session's state), so a drag by hand can take several commands.
async fn mouse(
    link: &PageLink,
    state: &mut State,
    session: &str,
    m: &Mouse,
) -> Result<Value, CliError> {
    let button = |b: &Option<String>| match b.as_deref().unwrap_or("left") {
        "left" => Ok(MouseButton::Left),
        "right" => Ok(MouseButton::Right),
        "middle" => Ok(MouseButton::Middle),
        other => Err(CliError::config(format!(
            "unknown button {other:?}; use left, right or middle"
        ))),
    };
    let at = Point::new(state.pointer[0], state.pointer[1]);
    let value = match m {
        Mouse::Move { x, y } => {
            let to = Point::new(*x, *y);
            link.mouse_move(to, state.buttons).await.map_err(fail)?;
            state.pointer = [to.x, to.y];
            json!({"ok": true, "x": to.x, "y": to.y, "buttons": state.buttons})
        }
        Mouse::Down { button: b } | Mouse::Up { button: b } => {
            let down = matches!(m, Mouse::Down { .. });
            let buttons = link
                .mouse_button(at, button(b)?, down, state.buttons)
                .await
                .map_err(fail)?;
            state.buttons = buttons;
            json!({"ok": true, "x": at.x, "y": at.y, "buttons": buttons})
        }
        Mouse::Wheel { dy, dx } => {
            let (_, after) = link.wheel(at, dx.unwrap_or(0.0), *dy).await.map_err(fail)?;
            return Ok(json!({"ok": true, "scrollX": after[0], "scrollY": after[1]}));
        }
    };
    save_page(session, state).await?;
    Ok(value)
}

fn stale(reference: &str, why: &str) -> CliError {
    CliError::failure(format!(
        "{reference} is stale ({why}); run `lumen browser snapshot` again and use the new ref"
    ))
}

/// A ref as the last snapshot saved it.
fn saved_ref<'a>(state: &'a State, reference: &str) -> Result<SavedRef<'a>, CliError> {
    let number = reference
        .strip_prefix("@e")
        .and_then(|n| n.parse::<u32>().ok())
        .ok_or_else(|| CliError::config(format!("{reference} is not a ref like @e3")))?;
    let Some(saved) = &state.refs else {
        return Err(stale(
            reference,
            "no snapshot was taken since the page was opened",
        ));
    };
    match saved.nodes.iter().find(|(n, _)| *n == number) {
        Some(&(_, backend)) => Ok(SavedRef {
            number,
            backend,
            mark: saved.mark.as_str(),
            frames: &saved.frames,
        }),
        None => Err(stale(reference, "it is not in the last snapshot")),
    }
}

/// `fill` or `type` on an element that takes no text (`what` describes it).
fn not_editable(target: &str, what: &str) -> CliError {
    CliError::failure(format!(
        "{target} is {what}, which takes no text; pick a textbox from `lumen browser snapshot -i`"
    ))
}

/// Why a ref's element cannot be acted on, phrased with what to do.
fn refusal(reference: &str, spot: ElementSpot) -> CliError {
    match spot {
        ElementSpot::OtherDocument => stale(reference, "the page has navigated since the snapshot"),
        ElementSpot::Gone => stale(reference, "its element was removed from the page"),
        ElementSpot::NoBox => CliError::failure(format!(
            "{reference} has no box on screen (hidden, or empty); it cannot be used"
        )),
        ElementSpot::OffScreen(p) => CliError::failure(format!(
            "{reference} is outside the viewport (its centre is at {}, {}) even after scrolling \
             it into view: the page scrolls it away; scroll by hand (`lumen browser scroll down`)",
            p.x, p.y
        )),
        ElementSpot::Covered { at, by } => CliError::failure(format!(
            "{reference} is covered by {by} at ({}, {}): close or move that element first",
            at.x, at.y
        )),
        other => CliError::failure(format!("{reference}: {other:?}")),
    }
}

/// The session's saved state, or how to open one.
fn opened(session: &str) -> Result<State, CliError> {
    load(session)?.ok_or_else(|| {
        CliError::config(format!(
            "no browser session {session:?} is open; run `lumen browser open <url>` first"
        ))
    })
}

/// What to say when the session's page cannot be reached: its tab was
/// closed, its browser did not answer in time (the session is kept), or
/// its browser is gone (then the stale state is removed).
fn unreachable_session(session: &str, state: &State, e: LumenError) -> CliError {
    match e {
        LumenError::InvalidData { .. } => CliError::failure(format!(
            "the page of session {session:?} was closed; run `lumen browser open <url>` again"
        )),
        // A busy or stopped browser is no lost one: ending it would throw
        // away its pages, and its profile with the logins in it.
        _ if browser_runs(state) => CliError::failure(format!(
            "the browser of session {session:?} did not answer ({e}); it is still running, so \
             the session is kept: try again, or end it with `lumen browser close`"
        )),
        _ => {
            // Only while the state still names that browser: a command
            // may have opened a new one meanwhile.
            if let Ok(_lock) = lock_blocking(session)
                && load(session)
                    .ok()
                    .flatten()
                    .is_some_and(|now| now.ws_url == state.ws_url)
            {
                end(state);
                forget(session, Some(state));
            }
            CliError::config(format!(
                "the browser of session {session:?} is gone (stale state removed); run \
                 `lumen browser open <url>` again"
            ))
        }
    }
}

/// Reattaches to the session's page: one WebSocket to the page itself.
async fn attach(session: &str) -> Result<(PageLink, State), CliError> {
    let state = opened(session)?;
    // A browser that is gone is not dialled: another process may listen on
    // its old port by now.
    if !browser_runs(&state) {
        let gone = LumenError::disconnected("the browser process is gone");
        return Err(unreachable_session(session, &state, gone));
    }
    match PageLink::attach(&state.ws_url, &state.target, CALL_TIMEOUT).await {
        Ok(link) => Ok((link, state)),
        Err(e) => Err(unreachable_session(session, &state, e)),
    }
}

/// Gives the session a new page in its running browser when its own page
/// was closed (the browser's other pages are left as they are); `None`
/// when the browser did not answer or the page is still there (busy).
async fn retarget(mut state: State) -> Option<(PageLink, State)> {
    let tabs = lumen::browser::page_tabs(&state.ws_url, CALL_TIMEOUT)
        .await
        .ok()?;
    if tabs.iter().any(|t| t.id == state.target) {
        return None;
    }
    let created = lumen::browser::browser_command(
        &state.ws_url,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        CALL_TIMEOUT,
    )
    .await
    .ok()?;
    state.target = created["targetId"].as_str()?.to_owned();
    state.refs = None;
    let link = PageLink::attach(&state.ws_url, &state.target, CALL_TIMEOUT)
        .await
        .ok()?;
    Some((link, state))
}

/// Starts a detached Chromium for the session and links to its first page.
async fn start(session: &str, args: &BrowserArgs) -> Result<(PageLink, State), CliError> {
    if let Some(old) = load(session)? {
        end(&old);
        forget(session, Some(&old));
    }
    let exe = chromium::locate().map_err(|e| CliError::config(e.to_string()))?;
    let flags = launch::proxy_flags(args)?;
    let persistent_profile = args.profile.is_some();
    let profile = match &args.profile {
        Some(dir) => launch::profile_dir(dir)?,
        None => {
            let profile = state_dir().join(format!("{session}-profile"));
            let _ = std::fs::remove_dir_all(&profile);
            std::fs::create_dir_all(&profile).map_err(|e| {
                CliError::failure(format!("cannot create {}: {e}", profile.display()))
            })?;
            profile
        }
    };
    let options = DetachedOptions {
        executable: Some(exe),
        headless: !args.headed,
        args: flags,
        ..DetachedOptions::new(&profile)
    };
    let (browser, ws_url) =
        match DetachedChromium::spawn_ready(&options, Duration::from_secs(20)).await {
            Ok(ready) => ready,
            Err(LumenError::Config { message, .. }) => return Err(CliError::config(message)),
            Err(e) => {
                if !persistent_profile {
                    let _ = std::fs::remove_dir_all(&profile);
                }
                return Err(CliError::failure(format!(
                    "Chromium started but never opened its DevTools port: {e}"
                )));
            }
        };
    let started = async {
        // The page Chromium opens itself is the session's page.
        let deadline = Instant::now() + Duration::from_secs(20);
        let target = loop {
            let tabs = lumen::browser::page_tabs(&ws_url, CALL_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            if let Some(t) = tabs.first() {
                break t.id.clone();
            }
            if Instant::now() > deadline {
                return Err("Chromium started but opened no page".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let link = PageLink::attach(&ws_url, &target, CALL_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        Ok((link, ws_url.clone(), target))
    };
    let (link, ws_url, target) = match started.await {
        Ok(parts) => parts,
        Err(why) => {
            browser.kill(END_GRACE);
            if !persistent_profile {
                let _ = std::fs::remove_dir_all(&profile);
            }
            return Err(CliError::failure(why));
        }
    };
    let pid = browser.detach();
    let state = State {
        pid,
        started: chromium::process_identity(pid).map(|id| id.start_time),
        ws_url,
        profile,
        target,
        console_seen: None,
        errors_seen: None,
        refs: None,
        emulation: emulate::Emulation::default(),
        routes: Vec::new(),
        keeper: None,
        persistent_profile,
        pointer: [0, 0],
        buttons: 0,
        frame: None,
    };
    save(session, &state)?;
    Ok((link, state))
}

/// How long a session's Chromium gets to quit after `SIGTERM` before it is
/// killed.
const END_GRACE: Duration = Duration::from_secs(5);

/// Ends the session's Chromium (its whole process group): `SIGTERM`, then
/// `SIGKILL` if it is still there after [`END_GRACE`]. Only when the saved
/// pid is still that browser ([`is_our_browser`]): a pid the system gave to
/// another program since is left alone.
fn end(state: &State) {
    let identity = chromium::process_identity(state.pid);
    if !is_our_browser(state, identity.as_ref()) {
        tracing::debug!(
            "process {} is no longer the session's browser; not signalling it",
            state.pid
        );
        return;
    }
    if let Err(e) = chromium::end_process_group(state.pid, END_GRACE) {
        tracing::debug!("ending the browser's process group {}: {e}", state.pid);
    }
    chromium::remove_socket_folder(&state.profile);
}

/// Whether the session's browser still runs: a live process group behind
/// `state.pid`, and that pid still the session's browser.
fn browser_runs(state: &State) -> bool {
    chromium::process_group_alive(state.pid)
        && is_our_browser(state, chromium::process_identity(state.pid).as_ref())
}

/// Whether the process now behind `state.pid` (its `identity`, `None` when
/// there is none) is the session's Chromium: it was started with the
/// session's profile and, when the start time was saved, at that time.
/// Where identities cannot be read (no `/proc`), the saved pid is trusted.
fn is_our_browser(state: &State, identity: Option<&chromium::ProcessIdentity>) -> bool {
    if cfg!(not(target_os = "linux")) {
        return true;
    }
    let Some(id) = identity else {
        return false;
    };
    let profile = format!("--user-data-dir={}", state.profile.display());
    id.cmdline.contains(&profile) && state.started.is_none_or(|t| t == id.start_time)
}

//! The session's keeper: a small background process that keeps a link to
//! the driven page open for the page commands, and holds what CDP keeps
//! only for as long as a CDP session stays attached — emulation overrides,
//! extra headers, offline mode, `Fetch` interception — and the request log.
//!
//! `open` starts it (`lumen browser keeper-internal`, hidden), detached in
//! its own process group; `set` and `network` start it too when it is not
//! running. A page command ([`BrowserCommand::warm`](super::BrowserCommand::warm):
//! click, fill, get…) sends itself, parsed, over the keeper's socket; the
//! keeper runs it in a task of its own on the one
//! [`PageLink`](lumen::browser::PageLink) it keeps to the session's page
//! (attached within a second of its start, again when `tab` switched pages
//! or the page went away) and sends back the output (both sides:
//! `warm.rs`; the socket's framing and peer checks: `socket.rs`). A
//! command that finds the link taken by another (a long `wait`) or no
//! keeper at all runs in its own process, on a link of its own; one whose
//! process goes away before its answer (the caller keeps its end of the
//! socket open until then) is dropped.
//!
//! Settings: plain commands attach to the page, act and leave, and
//! anything they set up would vanish with their WebSocket. So `set` and
//! `network` do not set anything up themselves: they write the settings to
//! the session's state file (atomically) and ask the keeper to apply them,
//! holding the session's lock (`super::lock`) from reading the state to
//! the keeper's answer, so two commands never start two keepers or lose
//! each other's settings; a setting the browser refuses is taken back out
//! of the state file ([`apply`]). From the first such command on (or from
//! its start, when the state file has settings), the keeper:
//!
//! - holds one browser-level WebSocket ([`EventLink`]) and auto-attaches
//!   (flattened) to every page, existing and new (new tabs wait for the
//!   debugger until their settings are applied, so their first request is
//!   already routed and emulated);
//! - applies the state file's [`Emulation`](super::emulate::Emulation) and
//!   routes to each page, answers `Fetch.requestPaused` by the routes
//!   (fail, fulfil, or let through), and records requests.
//!
//! It listens on a Unix socket in a private folder (`<session>.keeper/`,
//! mode 0700; the socket 0600; a peer of another uid is dropped). The
//! socket carries no settings, only four questions: `ping`, `reload`
//! (re-read the state file and apply it; answered once Chromium has
//! confirmed every command), `requests`, and `run` (a warm command, with
//! the caller's absolute folder for relative paths; anything else is
//! refused). It applies nothing but the state file, which only the
//! session's owner writes, and runs for a peer only what the peer could
//! run itself. It exits by itself when the browser closes its WebSocket,
//! when the state file no longer names its browser (checked every second),
//! and is ended by
//! `close` (it is checked to be this session's keeper, by command line and
//! start time, before it is signalled). It holds an exclusive lock on
//! `lock` in its folder, its pid inside, by which a keeper the state file
//! does not name (its start was interrupted) is found and ended.

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lumen::browser::chromium;
use lumen::browser::{EventLink, Incoming, PageLink};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixListener;

use super::network::RouteAction;
use super::socket::{Asked, exchange, read_question};
use super::{State, emulate, warm};
use crate::exit::CliError;

/// The hidden subcommand the keeper runs as.
pub(super) const SUBCOMMAND: &str = "keeper-internal";
/// Set to the session's name for the keeper; without it the hidden
/// subcommand refuses to run (it is no command for people or batches).
const ENV: &str = "LUMEN_KEEPER_SESSION";
/// How many requests the log keeps (the oldest go first).
const MAX_LOGGED: usize = 1000;
/// Characters kept of a logged URL (a `data:` URL can be megabytes), as
/// the tabs' console and network buffers keep of a line.
const MAX_URL: usize = 1000;
/// How long the keeper may take to start, and to answer.
pub(super) const ANSWER: Duration = Duration::from_secs(20);

/// How long the keeper waits for the browser to take its settings: under
/// [`ANSWER`], so a slow browser is reported by the keeper rather than
/// taken for a keeper that hangs (which the caller would restart).
const SETTLE: Duration = Duration::from_secs(15);
/// How often the keeper reads what its open page link received while no
/// command runs (and answers dialogs that opened meanwhile).
const CATCH_UP: Duration = Duration::from_secs(1);

/// The keeper process, as the state file remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct KeeperProc {
    pid: u32,
    started: Option<u64>,
}

/// The keeper's private folder: its socket and its log.
pub(super) fn dir(session: &str) -> PathBuf {
    super::state_dir().join(format!("{session}.keeper"))
}

/// Saves `state` (the session's settings with one change) and has the
/// session's keeper apply it (starting the keeper if needed). Only a
/// change the browser took stays saved: when it refuses one, or the
/// keeper cannot apply it, the settings as they were (`before`) are saved
/// again and re-applied, so a refused setting is neither kept nor applied
/// again by a later command. The caller holds the session's lock.
pub(super) async fn apply(
    session: &str,
    state: &mut State,
    before: &State,
) -> Result<(), CliError> {
    super::save(session, state)?;
    let refused = match ask(session, state, json!({"op": "reload"})).await {
        Ok(answer) if answer["ok"] == true => return Ok(()),
        Ok(answer) => CliError::failure(format!(
            "the browser refused a setting: {}; the session keeps its earlier settings",
            answer["error"].as_str().unwrap_or("no reason given")
        )),
        Err(e) => e,
    };
    if let Some(restored) = restore(session, before) {
        *state = restored;
        // Undo what the browser did take of the refused change (a keeper
        // that is not running applies the restored file when it starts).
        if state.keeper.is_some_and(|k| is_ours(session, k))
            && let Err(e) = exchange(session, &json!({"op": "reload"})).await
        {
            tracing::debug!("re-applying the earlier settings: {e}");
        }
    }
    Err(refused)
}

/// Saves the settings of `before` again, with the keeper the state file
/// names now; `None` (nothing saved) when the session was closed or its
/// browser replaced meanwhile.
fn restore(session: &str, before: &State) -> Option<State> {
    let now = super::load(session).ok().flatten()?;
    if now.ws_url != before.ws_url {
        return None;
    }
    let mut restored = before.clone();
    restored.keeper = now.keeper;
    match super::save(session, &restored) {
        Ok(()) => Some(restored),
        Err(e) => {
            tracing::debug!("restoring the earlier settings: {}", e.message);
            None
        }
    }
}

/// Sends one question to the session's keeper (starting it if needed) and
/// returns its answer.
pub(super) async fn ask(
    session: &str,
    state: &mut State,
    question: Value,
) -> Result<Value, CliError> {
    let mut fresh = false;
    if !state.keeper.is_some_and(|k| is_ours(session, k)) {
        start(session, state).await?;
        fresh = true;
    }
    match exchange(session, &question).await {
        Ok(answer) if answer["stale"] != true => Ok(answer),
        Ok(_) | Err(_) if !fresh => {
            // A keeper that is there but does not answer, or keeps another
            // browser than the state file names, is replaced.
            end(session, Some(state));
            start(session, state).await?;
            exchange(session, &question)
                .await
                .map_err(|e| CliError::failure(format!("the session's keeper: {e}")))
        }
        Err(e) => Err(CliError::failure(format!("the session's keeper: {e}"))),
        Ok(answer) => Err(CliError::failure(format!(
            "the session's keeper: {}",
            answer["error"]
                .as_str()
                .unwrap_or("it keeps another browser")
        ))),
    }
}

/// Starts the session's keeper unless it is running. The caller holds the
/// session's lock.
pub(super) async fn ensure(session: &str, state: &mut State) -> Result<(), CliError> {
    if state.keeper.is_some_and(|k| is_ours(session, k)) {
        return Ok(());
    }
    start(session, state).await
}

/// Whether the saved keeper process is still this session's keeper.
fn is_ours(session: &str, k: KeeperProc) -> bool {
    let Some(id) = chromium::process_identity(k.pid) else {
        return cfg!(not(target_os = "linux"));
    };
    id.cmdline.contains(SUBCOMMAND)
        && id.cmdline.contains(&format!("--session {session} "))
        && k.started.is_none_or(|t| t == id.start_time)
}

/// Starts the keeper, waits until it answers, and records it.
async fn start(session: &str, state: &mut State) -> Result<(), CliError> {
    // A browser that is gone is said so (and its state removed), rather
    // than a keeper failing to start.
    if let Err(e) = lumen::browser::page_tabs(&state.ws_url, super::CALL_TIMEOUT).await {
        return Err(super::unreachable_session(session, state, e));
    }
    let dir = dir(session);
    private_dir(&dir)?;
    end_unrecorded(session);
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failure(format!("cannot find the lumen binary: {e}")))?;
    let log_path = dir.join("log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", log_path.display())))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["browser", "--session", session, SUBCOMMAND])
        .env(ENV, session)
        .env("LUMEN_STATE_DIR", super::state_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::failure(format!("cannot start the session's keeper: {e}")))?;
    let deadline = Instant::now() + ANSWER;
    let pid = loop {
        // Only the process just started counts: another that answers on
        // the socket (one whose start was interrupted) is not recorded.
        if let Ok(answer) = exchange(session, &json!({"op": "ping"})).await
            && answer["pid"].as_u64() == Some(u64::from(child.id()))
        {
            break child.id();
        }
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(CliError::failure(format!(
                "the session's keeper stopped at start ({status}): {}",
                said.trim()
            )));
        }
        if Instant::now() > deadline {
            let _ = chromium::end_process_group(child.id(), Duration::from_secs(1));
            return Err(CliError::failure(
                "the session's keeper did not start in time",
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    state.keeper = Some(KeeperProc {
        pid,
        started: chromium::process_identity(pid).map(|id| id.start_time),
    });
    super::save(session, state)
}

/// The file a running keeper holds an exclusive lock on, its pid inside.
fn lock_path(session: &str) -> PathBuf {
    dir(session).join("lock")
}

/// Takes the session's keeper lock, for as long as the returned file is
/// open (the keeper's life), and writes this process's id into it.
fn hold_lock(session: &str) -> Result<std::fs::File, CliError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = lock_path(session);
    let fail = |e: String| CliError::failure(format!("the keeper's lock {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| fail(e.to_string()))?;
    file.try_lock()
        .map_err(|_| fail("another keeper of this session holds it".into()))?;
    file.set_len(0)
        .and_then(|()| write!(file, "{}", std::process::id()))
        .map_err(|e| fail(e.to_string()))?;
    Ok(file)
}

/// Ends a keeper that still runs although the state file does not name it:
/// one whose start was interrupted (the command that started it stopped
/// before recording it). Found by the lock it holds, it would otherwise
/// follow the page beside the next keeper, both answering its dialogs and
/// both handling its routes. The caller holds the session's lock.
fn end_unrecorded(session: &str) {
    let path = lock_path(session);
    let Ok(file) = std::fs::File::open(&path) else {
        return;
    };
    if file.try_lock_shared().is_ok() {
        // Nobody holds it: no keeper runs.
        return;
    }
    // A keeper that has just taken the lock writes its pid a moment later.
    let deadline = Instant::now() + Duration::from_millis(500);
    let pid = loop {
        let pid = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if pid.is_some() || Instant::now() > deadline {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(pid) = pid
        && is_ours(session, KeeperProc { pid, started: None })
    {
        tracing::debug!("ending the unrecorded keeper {pid}");
        if let Err(e) = chromium::end_process_group(pid, Duration::from_secs(2)) {
            tracing::debug!("ending the unrecorded keeper {pid}: {e}");
        }
    }
}

/// Ends the session's keeper, if it is still there, and removes its folder.
pub(super) fn end(session: &str, state: Option<&State>) {
    if let Some(k) = state.and_then(|s| s.keeper)
        && is_ours(session, k)
        && let Err(e) = chromium::end_process_group(k.pid, Duration::from_secs(2))
    {
        tracing::debug!("ending the keeper {}: {e}", k.pid);
    }
    // Found by its lock, which goes with the folder.
    end_unrecorded(session);
    let _ = std::fs::remove_dir_all(dir(session));
}

/// Creates `dir` readable by its owner only (and makes it so if it exists).
pub(super) fn private_dir(dir: &std::path::Path) -> Result<(), CliError> {
    let fail =
        |e: std::io::Error| CliError::failure(format!("cannot create {}: {e}", dir.display()));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(fail)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)
}

/// `url` cut to [`MAX_URL`] characters, saying so (`… (cut)`).
fn cut_url(url: &str) -> String {
    match url.char_indices().nth(MAX_URL) {
        None => url.to_owned(),
        Some((end, _)) => format!("{}… (cut)", &url[..end]),
    }
}

/// One recorded request.
#[derive(Debug, Clone, Serialize)]
struct Logged {
    #[serde(skip)]
    id: String,
    url: String,
    method: String,
    #[serde(rename = "type")]
    kind: String,
    status: Option<u64>,
    failed: Option<String>,
    routed: Option<&'static str>,
}

/// The keeper's state.
struct Keeper {
    link: EventLink,
    session: String,
    ws_url: String,
    settings: State,
    /// Flattened session id → page target id.
    pages: HashMap<String, String>,
    log: VecDeque<Logged>,
    /// How the routes handled requests the log has not seen yet.
    routed: HashMap<String, &'static str>,
    /// Set when the keeper should exit.
    stop: bool,
    /// Whether it follows the pages (auto-attach, the network log, routes
    /// and emulation): from the first `set` or `network` command on, or
    /// at start when the state file has settings. Until then it only
    /// serves warm commands and watches for the browser's end.
    active: bool,
    warm: warm::WarmLink,
}

/// The keeper's main: `lumen browser keeper-internal`.
pub(super) async fn serve(session: &str) -> Result<u8, CliError> {
    if std::env::var(ENV).ok().as_deref() != Some(session) {
        return Err(CliError::config(format!(
            "`{SUBCOMMAND}` is started by `lumen browser` itself, not by hand"
        )));
    }
    let settings = super::opened(session)?;
    let dir = dir(session);
    private_dir(&dir)?;
    let _lock = hold_lock(session)?;
    let link = EventLink::connect(&settings.ws_url, super::CALL_TIMEOUT)
        .await
        .map_err(super::fail)?;
    let active = settings.emulation != emulate::Emulation::default() || !settings.routes.is_empty();
    let mut k = Keeper {
        link,
        session: session.to_owned(),
        ws_url: settings.ws_url.clone(),
        settings,
        pages: HashMap::new(),
        log: VecDeque::new(),
        routed: HashMap::new(),
        stop: false,
        active: false,
        warm: warm::WarmLink::default(),
    };
    if active {
        k.activate().await.map_err(CliError::failure)?;
    }

    let sock = dir.join("sock");
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock)
        .map_err(|e| CliError::failure(format!("cannot listen on {}: {e}", sock.display())))?;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| CliError::failure(format!("cannot protect {}: {e}", sock.display())))?;
    let uid = rustix::process::geteuid().as_raw();
    // Questions are read in tasks of their own: a client that connects and
    // says nothing must not hold up the browser's events.
    let (asked_tx, mut asked) = tokio::sync::mpsc::channel::<Asked>(16);
    let mut catch_up = tokio::time::interval(CATCH_UP);
    catch_up.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !k.stop {
        tokio::select! {
            _ = catch_up.tick() => k.catch_up().await,
            incoming = k.link.next() => match incoming {
                Ok(Incoming::Event { session, method, params }) => {
                    if k.on_event(session, &method, params).await.is_err() {
                        break;
                    }
                }
                Ok(Incoming::Reply { .. }) => {}
                // The browser is gone: so is the keeper.
                Err(_) => break,
            },
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let peer = stream.peer_cred().ok().map(|c| c.uid());
                    if peer == Some(uid) {
                        tokio::spawn(read_question(stream, asked_tx.clone()));
                    }
                }
            }
            Some(question) = asked.recv() => k.client(question).await,
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&sock);
    Ok(crate::exit::SUCCESS)
}

impl Keeper {
    /// Answers one client: one JSON line in, one out.
    async fn client(&mut self, asked: Asked) {
        let Asked {
            question,
            read,
            mut write,
        } = asked;
        let answer = match question["op"].as_str() {
            Some("ping") => json!({"ok": true, "pid": std::process::id()}),
            Some("run") => return self.run(question, read, write),
            Some("reload") => match self.activate().await {
                Ok(()) => json!({"ok": true, "pages": self.pages.len()}),
                // `stale`: this keeper is on its way out.
                Err(why) => json!({"ok": false, "error": why, "stale": self.stop}),
            },
            Some("requests") => {
                // The log starts with the first `network` command.
                let started = if self.active {
                    Ok(())
                } else {
                    self.activate().await
                };
                match started {
                    Ok(()) => {
                        let list: Vec<&Logged> = self.log.iter().collect();
                        let answer = json!({"ok": true, "requests": list});
                        if question["clear"] == true {
                            self.log.clear();
                        }
                        answer
                    }
                    Err(why) => json!({"ok": false, "error": why}),
                }
            }
            _ => json!({"ok": false, "error": "unknown question"}),
        };
        tokio::spawn(async move {
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                write.write_all(format!("{answer}\n").as_bytes()),
            )
            .await;
        });
    }

    /// Starts following the pages (once), then applies the state file.
    async fn activate(&mut self) -> Result<(), String> {
        if !self.active {
            let id = self
                .link
                .send(
                    None,
                    "Target.setAutoAttach",
                    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                )
                .await
                .map_err(|e| e.to_string())?;
            self.settle(vec![(id, "Target.setAutoAttach", None)])
                .await?;
            self.active = true;
        }
        self.reload().await
    }

    /// Takes a warm command: runs it on the shared page link in a task of
    /// its own, so that the keeper goes on answering the browser's events
    /// (a paused request the command's navigation waits on) meanwhile. A
    /// command that finds the link taken is passed back to its process,
    /// which then runs it itself, beside the other. A command whose
    /// process goes away (Ctrl-C on a long `wait`) is dropped, as it would
    /// have ended with its own link: the link is free again at once.
    fn run(
        &mut self,
        question: Value,
        mut read: tokio::net::unix::OwnedReadHalf,
        mut write: tokio::net::unix::OwnedWriteHalf,
    ) {
        let Ok(mut slot) = self.warm.clone().try_lock_owned() else {
            tokio::spawn(async move {
                let busy = json!({"ok": false, "error": "busy with another command"});
                let _ = write.write_all(format!("{busy}\n").as_bytes()).await;
            });
            return;
        };
        let (session, ws_url) = (self.session.clone(), self.ws_url.clone());
        tokio::spawn(async move {
            // The caller sends nothing after its question: the read ends
            // only when it is gone.
            let mut byte = [0u8; 1];
            let answer = tokio::select! {
                answer = warm::run_on_link(&session, &ws_url, &mut slot, &question) => answer,
                _ = read.read(&mut byte) => {
                    // Dropped half-way: its `--dialog` answer must not
                    // outlive it.
                    if let Some(link) = slot.as_ref() {
                        link.set_dialog_policy(lumen::browser::DialogPolicy::default()).await;
                    }
                    return;
                }
            };
            drop(slot);
            let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
        });
    }

    /// Once a second: exits when the state file no longer names this
    /// keeper's browser (the session was closed, or its state removed:
    /// nothing can reach the keeper's work any more); reads what the
    /// shared link received while no command ran (the page's events, and
    /// dialogs to answer) and forgets a link whose page is gone.
    async fn catch_up(&mut self) {
        let state = match super::load(&self.session) {
            Ok(Some(s)) if s.ws_url == self.ws_url => s,
            _ => {
                self.stop = true;
                return;
            }
        };
        // A command holds the link: it reads the page itself.
        let Ok(mut slot) = self.warm.clone().try_lock_owned() else {
            return;
        };
        if let Some(link) = slot.as_ref()
            && (link.target_id() != state.target || link.catch_up().await.is_err())
        {
            *slot = None;
        }
        if slot.is_none() {
            // Dialogs are answered between commands too, from the first
            // second after `open`: the keeper links to the driven page,
            // in a task of its own (a page that does not answer must not
            // hold up the browser's events).
            let ws_url = self.ws_url.clone();
            tokio::spawn(async move {
                if let Ok(link) =
                    PageLink::attach(&ws_url, &state.target, super::CALL_TIMEOUT).await
                    && link.watch().await.is_ok()
                {
                    *slot = Some(link);
                }
            });
        }
    }

    /// Re-reads the state file and applies it to the browser and every
    /// page; `Err` names what the browser refused.
    async fn reload(&mut self) -> Result<(), String> {
        let state = match super::load(&self.session) {
            Ok(Some(s)) if s.ws_url == self.ws_url => s,
            _ => {
                self.stop = true;
                return Err("the session was closed or restarted".to_owned());
            }
        };
        self.settings = state;
        let mut sent = Vec::new();
        for (method, params) in emulate::browser_commands(&self.settings.emulation) {
            let id = self
                .link
                .send(None, method, params)
                .await
                .map_err(|e| e.to_string())?;
            sent.push((id, method, None));
        }
        let sessions: Vec<String> = self.pages.keys().cloned().collect();
        for sid in sessions {
            for (method, params) in self.page_setup() {
                let id = self
                    .link
                    .send(Some(&sid), method, params)
                    .await
                    .map_err(|e| e.to_string())?;
                sent.push((id, method, Some(sid.clone())));
            }
        }
        self.settle(sent).await
    }

    /// What each page gets: the network log, the routes, the emulation.
    fn page_setup(&self) -> Vec<(&'static str, Value)> {
        let mut out = vec![("Network.enable", json!({}))];
        out.push(if self.settings.routes.is_empty() {
            ("Fetch.disable", json!({}))
        } else {
            let patterns: Vec<Value> = self
                .settings
                .routes
                .iter()
                .map(|r| json!({"urlPattern": r.cdp_pattern(), "requestStage": "Request"}))
                .collect();
            ("Fetch.enable", json!({"patterns": patterns}))
        });
        out.extend(emulate::page_commands(&self.settings.emulation));
        out
    }

    /// Waits for the replies to `sent` (handling events meanwhile); `Err`
    /// names the commands the browser refused, for pages still open.
    async fn settle(
        &mut self,
        sent: Vec<(u64, &'static str, Option<String>)>,
    ) -> Result<(), String> {
        let mut waiting: HashMap<u64, (&'static str, Option<String>)> =
            sent.into_iter().map(|(id, m, s)| (id, (m, s))).collect();
        let mut refused = Vec::new();
        let deadline = Instant::now() + SETTLE;
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.link.next()).await {
                Err(_) => return Err("the browser did not answer in time".to_owned()),
                Ok(Err(e)) => {
                    self.stop = true;
                    return Err(e.to_string());
                }
                Ok(Ok(Incoming::Reply { id, result })) => {
                    if let Some((method, sid)) = waiting.remove(&id)
                        && let Err(why) = result
                    {
                        refused.push((method, sid, why));
                    }
                }
                Ok(Ok(Incoming::Event {
                    session,
                    method,
                    params,
                })) => {
                    if let Err(e) = self.on_event(session, &method, params).await {
                        self.stop = true;
                        return Err(e.to_string());
                    }
                }
            }
        }
        let refused: Vec<String> = refused
            .into_iter()
            // A page that closed meanwhile refuses everything: no matter.
            .filter(|(_, sid, _)| sid.as_ref().is_none_or(|s| self.pages.contains_key(s)))
            .map(|(m, _, why)| format!("{m}: {why}"))
            .collect();
        if refused.is_empty() {
            Ok(())
        } else {
            Err(refused.join("; "))
        }
    }

    /// Handles one event; `Err` only when the socket fails.
    async fn on_event(
        &mut self,
        session: Option<String>,
        method: &str,
        params: Value,
    ) -> lumen::Result<()> {
        let str_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        match method {
            "Target.attachedToTarget" => {
                let sid = str_of(&params["sessionId"]);
                if params["targetInfo"]["type"] == "page" {
                    self.pages
                        .insert(sid.clone(), str_of(&params["targetInfo"]["targetId"]));
                    for (m, p) in self.page_setup() {
                        self.link.send(Some(&sid), m, p).await?;
                    }
                }
                if params["waitingForDebugger"] == true {
                    self.link
                        .send(Some(&sid), "Runtime.runIfWaitingForDebugger", json!({}))
                        .await?;
                }
            }
            "Target.detachedFromTarget" => {
                self.pages.remove(&str_of(&params["sessionId"]));
            }
            "Fetch.requestPaused" => self.route(session, &params).await?,
            "Network.requestWillBeSent" => {
                let id = str_of(&params["requestId"]);
                if self.log.len() >= MAX_LOGGED {
                    self.log.pop_front();
                }
                let routed = self.routed.remove(&id);
                self.log.push_back(Logged {
                    url: cut_url(params["request"]["url"].as_str().unwrap_or_default()),
                    method: str_of(&params["request"]["method"]),
                    kind: str_of(&params["type"]),
                    status: None,
                    failed: None,
                    routed,
                    id,
                });
            }
            "Network.responseReceived" => {
                let id = str_of(&params["requestId"]);
                if let Some(entry) = self.log.iter_mut().rev().find(|l| l.id == id) {
                    entry.status = params["response"]["status"].as_u64();
                }
            }
            "Network.loadingFailed" => {
                let id = str_of(&params["requestId"]);
                if let Some(entry) = self.log.iter_mut().rev().find(|l| l.id == id) {
                    entry.failed = Some(str_of(&params["errorText"]));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Answers a paused request by the routes (the last added that matches
    /// wins), or lets it through.
    async fn route(&mut self, session: Option<String>, params: &Value) -> lumen::Result<()> {
        let request_id = params["requestId"].clone();
        let url = params["request"]["url"].as_str().unwrap_or_default();
        let rule = self.settings.routes.iter().rev().find(|r| r.matches(url));
        let (method, args, how) = match rule.map(|r| &r.action) {
            Some(RouteAction::Abort) => (
                "Fetch.failRequest",
                json!({"requestId": request_id, "errorReason": "BlockedByClient"}),
                Some("blocked"),
            ),
            Some(RouteAction::Mock {
                status,
                content_type,
                body,
            }) => (
                "Fetch.fulfillRequest",
                json!({
                    "requestId": request_id,
                    "responseCode": status,
                    "responseHeaders": [
                        {"name": "Content-Type", "value": content_type},
                        {"name": "Cache-Control", "value": "no-store"},
                    ],
                    "body": body,
                }),
                Some("mocked"),
            ),
            None => (
                "Fetch.continueRequest",
                json!({"requestId": request_id}),
                None,
            ),
        };
        if let (Some(how), Some(network_id)) = (how, params["networkId"].as_str()) {
            match self.log.iter_mut().rev().find(|l| l.id == network_id) {
                Some(entry) => entry.routed = Some(how),
                None => {
                    if self.routed.len() > MAX_LOGGED {
                        self.routed.clear();
                    }
                    self.routed.insert(network_id.to_owned(), how);
                }
            }
        }
        self.link.send(session.as_deref(), method, args).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_urls_are_cut_with_a_marker() {
        let short = "http://h/a";
        assert_eq!(cut_url(short), short);
        let exact = "é".repeat(MAX_URL);
        assert_eq!(cut_url(&exact), exact);
        let long = format!("data:text/plain,{}", "é".repeat(5 * MAX_URL));
        let cut = cut_url(&long);
        assert!(cut.ends_with("… (cut)"), "{cut}");
        assert_eq!(cut.chars().count(), MAX_URL + "… (cut)".chars().count());
        assert!(long.starts_with(cut.trim_end_matches("… (cut)")));
    }
}

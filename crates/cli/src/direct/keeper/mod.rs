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
use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use lumen::browser::{EventLink, Incoming, PageLink};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixListener;

use super::network::RouteAction;
use super::socket::{Asked, read_question};
use super::{State, emulate, warm};
use crate::exit::CliError;

mod life;

use life::hold_lock;
pub(super) use life::{KeeperProc, apply, ask, dir, end, ensure, mine, owned_by_me, private_dir};

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

/// How long the keeper waits for the browser to take its settings, and
/// at start for the browser's link and its settings together: under
/// [`ANSWER`], so a slow browser is reported by the keeper rather than
/// taken for a keeper that hangs (which the caller would restart).
const SETTLE: Duration = Duration::from_secs(15);
/// How often the keeper reads what its open page link received while no
/// command runs (and answers dialogs that opened meanwhile).
const CATCH_UP: Duration = Duration::from_secs(1);

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
    // Connecting and taking the settings share one budget: their caller
    // waits ANSWER for the keeper, no more.
    let deadline = Instant::now() + SETTLE;
    let link = EventLink::connect(&settings.ws_url, SETTLE)
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
        k.activate(deadline).await.map_err(CliError::failure)?;
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
            Some("reload") => match self.activate(Instant::now() + SETTLE).await {
                Ok(()) => json!({"ok": true, "pages": self.pages.len()}),
                // `stale`: this keeper is on its way out.
                Err(why) => json!({"ok": false, "error": why, "stale": self.stop}),
            },
            Some("requests") => {
                // The log starts with the first `network` command.
                let started = if self.active {
                    Ok(())
                } else {
                    self.activate(Instant::now() + SETTLE).await
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

    /// Starts following the pages (once), then applies the state file,
    /// all by `deadline` (at most [`SETTLE`] away), so the keeper answers
    /// before its caller gives up.
    async fn activate(&mut self, deadline: Instant) -> Result<(), String> {
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
            self.settle(vec![(id, "Target.setAutoAttach", None)], deadline)
                .await?;
            self.active = true;
        }
        self.reload(deadline).await
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
    /// page, by `deadline`; `Err` names what the browser refused.
    async fn reload(&mut self, deadline: Instant) -> Result<(), String> {
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
        self.settle(sent, deadline).await
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

    /// Waits until `deadline` for the replies to `sent` (handling events
    /// meanwhile); `Err` names the commands the browser refused, for pages
    /// still open.
    async fn settle(
        &mut self,
        sent: Vec<(u64, &'static str, Option<String>)>,
        deadline: Instant,
    ) -> Result<(), String> {
        let mut waiting: HashMap<u64, (&'static str, Option<String>)> =
            sent.into_iter().map(|(id, m, s)| (id, (m, s))).collect();
        let mut refused = Vec::new();
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

//! `lumen browser …`: direct control of a background Chromium, agent-browser
//! style. `open` starts a detached Chromium for a named session and writes
//! its DevTools endpoint and page id to a state file; every later command
//! reattaches over CDP (no daemon of our own) and drives that page.
//!
//! Snapshot refs (`@e3`) survive between commands: `snapshot` stores each
//! ref's role and name and marks the document; a later command that uses a
//! ref checks the mark (a navigation loses it) and that the ref still names
//! the same element, and fails with "run snapshot again" otherwise — it
//! never clicks whatever now sits where the element used to be.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use lumen::browser::{AxSnapshot, CdpTab, TabOptions};
use lumen::{BrowserTab, ClickOptions, ImageFormat, Point, ScreenshotOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::exit::CliError;

/// `lumen browser`.
#[derive(Debug, Args)]
pub(crate) struct BrowserArgs {
    /// The session name; each has its own Chromium.
    #[arg(long, global = true, default_value = "default")]
    session: String,
    /// Machine-readable output (one JSON value).
    #[arg(long, global = true)]
    json: bool,
    /// Show the window (for `open` when it starts a browser).
    #[arg(long, global = true)]
    headed: bool,
    #[command(subcommand)]
    command: BrowserCommand,
}

/// The direct commands.
#[derive(Debug, Subcommand)]
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
    /// Type text into the focused element.
    Type { text: String },
    /// Click a ref's field, select its content and type text.
    Fill { target: String, text: String },
    /// Press a key or chord (`Enter`, `Control+a`).
    Press { key: String },
    /// Scroll the page: `up`, `down`, `left` or `right`, by px (default
    /// one screen less a little).
    Scroll { direction: String, px: Option<f64> },
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
    },
    /// List the open tabs.
    Tabs,
    /// Drive tab number N (from `tabs`).
    Tab { index: usize },
    /// Wait for a time (ms), for text on the page, or for the URL to contain
    /// a string.
    Wait {
        /// Milliseconds to wait.
        ms: Option<u64>,
        /// Wait until the page shows this text.
        #[arg(long)]
        text: Option<String>,
        /// Wait until the URL contains this.
        #[arg(long)]
        url: Option<String>,
        /// Give up after this many milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout: u64,
    },
    /// Cookies of the page: `get` (default), `set NAME=VALUE`, `clear`.
    Cookies {
        action: Option<String>,
        pair: Option<String>,
    },
    /// Save or load the browser's cookies to or from a JSON file.
    State { action: String, file: PathBuf },
    /// Save a screenshot (PNG; default `screenshot.png`).
    Screenshot { path: Option<PathBuf> },
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
}

/// What the state file remembers about a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    pid: u32,
    ws_url: String,
    profile: PathBuf,
    target: String,
    /// The last snapshot: its document mark and (ref, role, name).
    #[serde(default)]
    snapshot: Option<SavedSnapshot>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedSnapshot {
    mark: String,
    refs: Vec<(String, String, String)>,
}

fn state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LUMEN_STATE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("lumen").join("browser")
}

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
    Ok(state_dir().join(format!("{session}.json")))
}

fn load(session: &str) -> Result<Option<State>, CliError> {
    let path = state_path(session)?;
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
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
    }
    let text = serde_json::to_string_pretty(state).map_err(|e| fail(&e))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| fail(&e))?;
    std::fs::rename(&tmp, &path).map_err(|e| fail(&e))
}

fn forget(session: &str, state: Option<&State>) {
    if let Ok(path) = state_path(session) {
        let _ = std::fs::remove_file(path);
    }
    if let Some(s) = state {
        let _ = std::fs::remove_dir_all(&s.profile);
    }
}

/// Runs one direct command; returns the exit code.
pub(crate) async fn run(args: BrowserArgs) -> Result<u8, CliError> {
    let session = args.session.clone();
    if let BrowserCommand::Close = args.command {
        let state = load(&session)?;
        if let Some(s) = &state {
            kill(s.pid);
        }
        forget(&session, state.as_ref());
        return print(
            &args,
            json!({"closed": state.is_some()}),
            "closed".to_owned(),
        );
    }
    if let BrowserCommand::Open { url } = &args.command {
        let (tab, mut state) = match attach(&session).await {
            Ok(pair) => pair,
            Err(_) => start(&session, args.headed).await?,
        };
        let outcome = tab
            .goto(url)
            .await
            .map_err(|e| CliError::failure(e.to_string()))?;
        state.snapshot = None;
        save(&session, &state)?;
        if !outcome.ok {
            return Err(CliError::failure(format!(
                "could not open {url}: {}",
                outcome.error.unwrap_or_default()
            )));
        }
        let now = tab.url().await.unwrap_or_default();
        return print(&args, json!({"url": now}), now);
    }
    let (tab, mut state) = attach(&session).await?;
    let fail = |e: lumen::LumenError| CliError::failure(e.to_string());
    let outcome_text = |o: lumen::ActionOutcome| -> Result<String, CliError> {
        if o.ok {
            Ok("ok".to_owned())
        } else {
            Err(CliError::failure(
                o.error.unwrap_or_else(|| "failed".to_owned()),
            ))
        }
    };
    match &args.command {
        BrowserCommand::Click { target } | BrowserCommand::Dblclick { target } => {
            let at = point(&tab, &state, target).await?;
            let options = ClickOptions {
                click_count: if matches!(args.command, BrowserCommand::Dblclick { .. }) {
                    2
                } else {
                    1
                },
                ..ClickOptions::default()
            };
            let text = outcome_text(tab.click(at, options).await.map_err(fail)?)?;
            print(&args, json!({"ok": true, "x": at.x, "y": at.y}), text)
        }
        BrowserCommand::Hover { target } => {
            let at = point(&tab, &state, target).await?;
            let text = outcome_text(tab.hover(at).await.map_err(fail)?)?;
            print(&args, json!({"ok": true}), text)
        }
        BrowserCommand::Type { text } => {
            let t = outcome_text(tab.type_text(text).await.map_err(fail)?)?;
            print(&args, json!({"ok": true}), t)
        }
        BrowserCommand::Fill { target, text } => {
            let at = point(&tab, &state, std::slice::from_ref(target)).await?;
            outcome_text(tab.click(at, ClickOptions::default()).await.map_err(fail)?)?;
            tab.evaluate(
                "(() => { const e = document.activeElement; if (e && 'select' in e) e.select(); })()",
            )
            .await
            .map_err(fail)?;
            let t = outcome_text(tab.type_text(text).await.map_err(fail)?)?;
            print(&args, json!({"ok": true}), t)
        }
        BrowserCommand::Press { key } => {
            let keys: Vec<String> = key.split('+').map(str::to_owned).collect();
            let t = outcome_text(tab.key_press(&keys).await.map_err(fail)?)?;
            print(&args, json!({"ok": true}), t)
        }
        BrowserCommand::Scroll { direction, px } => {
            let size = tab.viewport().await.map_err(fail)?;
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
            let o = tab
                .scroll(center, dx, dy, lumen::Modifiers::NONE)
                .await
                .map_err(fail)?;
            let t = outcome_text(o)?;
            print(&args, json!({"ok": true}), t)
        }
        BrowserCommand::Snapshot {
            interactive,
            compact,
            depth,
        } => {
            let snap = tab.accessibility_snapshot().await.map_err(fail)?;
            let mark = format!(
                "{:x}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0)
            );
            tab.evaluate(&format!("window.__lumenSnapshot = {mark:?}"))
                .await
                .map_err(fail)?;
            let snap = filter(snap, *interactive, *compact, *depth);
            state.snapshot = Some(SavedSnapshot {
                mark,
                refs: snap
                    .nodes
                    .iter()
                    .map(|n| (n.reference.clone(), n.role.clone(), n.name.clone()))
                    .collect(),
            });
            save(&session, &state)?;
            let text = snap.to_text();
            print(
                &args,
                serde_json::to_value(&snap).unwrap_or(Value::Null),
                text,
            )
        }
        BrowserCommand::Screenshot { path } => {
            let path = path
                .clone()
                .unwrap_or_else(|| PathBuf::from("screenshot.png"));
            let shot = tab
                .screenshot(&ScreenshotOptions {
                    format: ImageFormat::Png,
                    ..ScreenshotOptions::default()
                })
                .await
                .map_err(fail)?;
            std::fs::write(&path, &*shot.image.data)
                .map_err(|e| CliError::failure(format!("cannot write {}: {e}", path.display())))?;
            let shown = path.display().to_string();
            print(&args, json!({"path": shown}), shown)
        }
        BrowserCommand::Eval { js } => {
            let v = tab.evaluate(js).await.map_err(fail)?;
            let text = match &v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            print(&args, v, text)
        }
        BrowserCommand::Url => {
            let u = tab.url().await.map_err(fail)?;
            print(&args, json!({"url": u}), u)
        }
        BrowserCommand::Title => {
            let t = tab.title().await.map_err(fail)?;
            print(&args, json!({"title": t}), t)
        }
        BrowserCommand::Back | BrowserCommand::Forward | BrowserCommand::Reload => {
            let o = match args.command {
                BrowserCommand::Back => tab.back().await,
                BrowserCommand::Forward => tab.forward().await,
                _ => tab.reload().await,
            }
            .map_err(fail)?;
            let t = outcome_text(o)?;
            print(&args, json!({"ok": true}), t)
        }
        BrowserCommand::Tabs => {
            let tabs = tab.tabs().await.map_err(fail)?;
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
            print(&args, Value::Array(value), lines.join("\n"))
        }
        BrowserCommand::Tab { index } => {
            let tabs = tab.tabs().await.map_err(fail)?;
            let Some(t) = tabs.get(*index) else {
                return Err(CliError::config(format!(
                    "there is no tab {index}; `lumen browser tabs` lists {} tab(s)",
                    tabs.len()
                )));
            };
            tab.switch_to_tab(&t.id).await.map_err(fail)?;
            state.target = t.id.clone();
            state.snapshot = None;
            save(&session, &state)?;
            print(&args, json!({"index": index, "url": t.url}), t.url.clone())
        }
        BrowserCommand::Wait {
            ms,
            text,
            url,
            timeout,
        } => {
            if let Some(ms) = ms {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
            }
            let deadline = Instant::now() + Duration::from_millis(*timeout);
            loop {
                let text_ok = match text {
                    Some(t) => tab
                        .evaluate(&format!(
                            "(document.body ? document.body.innerText : '').includes({t:?})"
                        ))
                        .await
                        .map_err(fail)?
                        .as_bool()
                        .unwrap_or(false),
                    None => true,
                };
                let url_ok = match url {
                    Some(u) => tab.url().await.map_err(fail)?.contains(u.as_str()),
                    None => true,
                };
                if text_ok && url_ok {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(CliError::failure(format!(
                        "gave up after {timeout} ms waiting for {}",
                        [
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
            print(&args, json!({"ok": true}), "ok".to_owned())
        }
        BrowserCommand::Cookies { action, pair } => match action.as_deref().unwrap_or("get") {
            "get" => {
                let v = tab
                    .cdp("Network.getCookies", json!({}))
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
                print(&args, cookies, lines.join("\n"))
            }
            "set" => {
                let Some((name, value)) = pair.as_deref().and_then(|p| p.split_once('=')) else {
                    return Err(CliError::config(
                        "usage: lumen browser cookies set NAME=VALUE",
                    ));
                };
                let url = tab.url().await.map_err(fail)?;
                tab.cdp(
                    "Network.setCookies",
                    json!({"cookies": [{"name": name, "value": value, "url": url}]}),
                )
                .await
                .map_err(fail)?;
                print(&args, json!({"ok": true}), "ok".to_owned())
            }
            "clear" => {
                tab.cdp("Network.clearBrowserCookies", json!({}))
                    .await
                    .map_err(fail)?;
                print(&args, json!({"ok": true}), "ok".to_owned())
            }
            other => Err(CliError::config(format!(
                "unknown cookies action {other:?}; use get, set NAME=VALUE or clear"
            ))),
        },
        BrowserCommand::State { action, file } => match action.as_str() {
            "save" => {
                let v = tab
                    .cdp("Network.getAllCookies", json!({}))
                    .await
                    .map_err(fail)?;
                let body = json!({"cookies": v["cookies"]});
                std::fs::write(file, body.to_string()).map_err(|e| {
                    CliError::failure(format!("cannot write {}: {e}", file.display()))
                })?;
                let shown = file.display().to_string();
                print(&args, json!({"saved": shown}), shown)
            }
            "load" => {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    CliError::config(format!("cannot read {}: {e}", file.display()))
                })?;
                let v: Value = serde_json::from_str(&text).map_err(|e| {
                    CliError::config(format!("{} is not a saved state: {e}", file.display()))
                })?;
                let cookies: Vec<Value> = v["cookies"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let mut c = c.clone();
                        if let Some(o) = c.as_object_mut() {
                            // Read-only fields of a saved cookie.
                            for k in ["size", "session", "priority", "sourceScheme", "sourcePort"] {
                                o.remove(k);
                            }
                        }
                        c
                    })
                    .collect();
                tab.cdp("Network.setCookies", json!({"cookies": cookies}))
                    .await
                    .map_err(fail)?;
                print(
                    &args,
                    json!({"loaded": cookies.len()}),
                    format!("loaded {} cookies", cookies.len()),
                )
            }
            other => Err(CliError::config(format!(
                "unknown state action {other:?}; use save FILE or load FILE"
            ))),
        },
        BrowserCommand::Open { .. } | BrowserCommand::Close => Ok(crate::exit::SUCCESS),
    }
}

fn print(args: &BrowserArgs, value: Value, text: String) -> Result<u8, CliError> {
    let mut out = std::io::stdout().lock();
    let _ = if args.json {
        writeln!(out, "{value}")
    } else {
        writeln!(out, "{}", text.trim_end())
    };
    let _ = out.flush();
    Ok(crate::exit::SUCCESS)
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

/// `x y` or `@eN` → a viewport point; a ref is checked against the saved
/// snapshot first.
async fn point(tab: &CdpTab, state: &State, target: &[String]) -> Result<Point, CliError> {
    match target {
        [x, y] => match (x.parse::<i32>(), y.parse::<i32>()) {
            (Ok(x), Ok(y)) => Ok(Point::new(x, y)),
            _ => Err(CliError::config(
                "expected `x y` (whole CSS pixels) or a ref like @e3",
            )),
        },
        [r] if r.starts_with('@') => ref_point(tab, state, r).await,
        _ => Err(CliError::config(
            "expected `x y` or a ref like @e3 from `lumen browser snapshot`",
        )),
    }
}

async fn ref_point(tab: &CdpTab, state: &State, reference: &str) -> Result<Point, CliError> {
    let stale = |why: &str| {
        CliError::failure(format!(
            "{reference} is stale ({why}); run `lumen browser snapshot` again and use the new ref"
        ))
    };
    let Some(saved) = &state.snapshot else {
        return Err(stale("no snapshot was taken since the page was opened"));
    };
    let Some((_, role, name)) = saved.refs.iter().find(|(r, _, _)| r == reference) else {
        return Err(stale("it is not in the last snapshot"));
    };
    let mark = tab
        .evaluate("window.__lumenSnapshot || null")
        .await
        .map_err(|e| CliError::failure(e.to_string()))?;
    if mark.as_str() != Some(saved.mark.as_str()) {
        return Err(stale("the page has navigated since the snapshot"));
    }
    // This process has no ref table yet: a fresh snapshot numbers the same
    // document again; the ref must still name the same element.
    let snap = tab
        .accessibility_snapshot()
        .await
        .map_err(|e| CliError::failure(e.to_string()))?;
    let same = snap
        .nodes
        .iter()
        .any(|n| n.reference == reference && &n.role == role && &n.name == name);
    if !same {
        return Err(stale("the page changed and it names another element now"));
    }
    match tab.ref_center(reference).await {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(CliError::failure(format!(
            "{reference} ({role} {name:?}) has no box on screen: scroll it into view first"
        ))),
        Err(e) => Err(CliError::failure(e.to_string())),
    }
}

/// Reattaches to the session's page.
async fn attach(session: &str) -> Result<(CdpTab, State), CliError> {
    let Some(state) = load(session)? else {
        return Err(CliError::config(format!(
            "no browser session {session:?} is open; run `lumen browser open <url>` first"
        )));
    };
    let tab = match CdpTab::connect(&state.ws_url, TabOptions::default()).await {
        Ok(tab) => tab,
        Err(_) => {
            kill(state.pid);
            forget(session, Some(&state));
            return Err(CliError::config(format!(
                "the browser of session {session:?} is gone (stale state removed); run \
                 `lumen browser open <url>` again"
            )));
        }
    };
    let fresh = tab.active_tab_id();
    let switched = tab.switch_to_tab(&state.target).await;
    close_target(&tab, &fresh).await;
    if switched.is_err() {
        return Err(CliError::failure(format!(
            "the page of session {session:?} was closed; run `lumen browser open <url>` again"
        )));
    }
    Ok((tab, state))
}

/// Closes the page `id` (the tab `connect` opened for this process).
async fn close_target(tab: &CdpTab, id: &str) {
    if let Err(e) = tab
        .cdp("Target.closeTarget", json!({ "targetId": id }))
        .await
    {
        tracing::debug!("closing tab {id}: {e}");
        return;
    }
    // Closing is asynchronous; wait (briefly) until the list agrees.
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match tab.tabs().await {
            Ok(tabs) if tabs.iter().any(|t| t.id == id) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            _ => return,
        }
    }
}

/// Starts a detached Chromium for the session and attaches to it.
async fn start(session: &str, headed: bool) -> Result<(CdpTab, State), CliError> {
    if let Some(old) = load(session)? {
        kill(old.pid);
        forget(session, Some(&old));
    }
    let exe = chromium().ok_or_else(|| {
        CliError::config(
            "no Chromium found; install it (Debian/Ubuntu: `apt-get install chromium`) or set \
             LUMEN_CHROMIUM to its path",
        )
    })?;
    let profile = state_dir().join(format!("{session}-profile"));
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile)
        .map_err(|e| CliError::failure(format!("cannot create {}: {e}", profile.display())))?;
    let mut cmd = std::process::Command::new(&exe);
    if !headed {
        cmd.arg("--headless");
    }
    cmd.args([
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--remote-debugging-port=0",
        "--window-size=1280,720",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg("about:blank")
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    // Its own process group: it outlives this command and a Ctrl-C here.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd
        .spawn()
        .map_err(|e| CliError::config(format!("cannot start {}: {e}", exe.display())))?;
    let pid = child.id();
    drop(child);
    let ws_url = match endpoint(&profile).await {
        Some(ws) => ws,
        None => {
            kill(pid);
            return Err(CliError::failure(
                "Chromium started but never opened its DevTools port",
            ));
        }
    };
    let tab = CdpTab::connect(&ws_url, TabOptions::default())
        .await
        .map_err(|e| CliError::failure(e.to_string()))?;
    let target = tab.active_tab_id();
    // The blank page Chromium opened itself is not needed.
    if let Ok(tabs) = tab.tabs().await {
        for t in tabs.iter().filter(|t| t.id != target) {
            close_target(&tab, &t.id).await;
        }
    }
    let state = State {
        pid,
        ws_url,
        profile,
        target,
        snapshot: None,
    };
    save(session, &state)?;
    Ok((tab, state))
}

/// Reads `DevToolsActivePort` (port, then path) once Chromium writes it.
async fn endpoint(profile: &Path) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(profile.join("DevToolsActivePort")) {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                return Some(format!("ws://127.0.0.1:{}{}", port.trim(), path.trim()));
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    None
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LUMEN_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Ends the session's Chromium (its whole process group) and waits up to
/// five seconds for it to go, then forces it.
fn kill(pid: u32) {
    let signal = |sig: &str| {
        let _ = std::process::Command::new("kill")
            .args([sig, "--", &format!("-{pid}")])
            .stderr(std::process::Stdio::null())
            .status();
    };
    signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_alive(pid) {
        if Instant::now() > deadline {
            signal("-KILL");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether any live (non-zombie) process is in process group `pgid`.
fn group_alive(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.first().is_some_and(|s| *s != "Z" && *s != "X")
            && fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
    })
}

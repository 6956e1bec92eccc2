//! `lumen browser …`: one process per command, reattaching to a background
//! Chromium through the session's state file.

use std::path::Path;
use std::process::Output;

use lumen_test_support::FixtureServer;
use serde_json::Value;

use super::harness::{code, lumen, text};

pub(super) struct Session {
    pub(super) site: FixtureServer,
    pub(super) state: tempfile::TempDir,
}

impl Drop for Session {
    /// A test that fails half-way leaves no browser or keeper behind (its
    /// state folder, and with it `close`'s way to them, goes next).
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.state.path()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if let (Some(session), Some("json")) = (
                path.file_stem().and_then(|s| s.to_str()),
                path.extension().and_then(|e| e.to_str()),
            ) {
                let _ = std::process::Command::new(env!("CARGO_BIN_EXE_lumen"))
                    .env("LUMEN_STATE_DIR", self.state.path())
                    .args(["browser", "--session", session, "close"])
                    .output();
            }
        }
    }
}

impl Session {
    pub(super) async fn new() -> Session {
        Session {
            site: FixtureServer::start().await.unwrap(),
            state: tempfile::tempdir().unwrap(),
        }
    }

    /// `lumen browser ARGS` for this session, in its state folder, not
    /// started yet.
    pub(super) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = lumen(self.state.path());
        cmd.env("LUMEN_STATE_DIR", self.state.path())
            .arg("browser")
            .args(args);
        cmd
    }

    pub(super) async fn cmd(&self, args: &[&str]) -> Output {
        self.command(args).output().await.unwrap()
    }

    /// Has the page open an alert on its own, between two commands, waits
    /// long enough for the keeper to answer it (it reads the page once a
    /// second), and returns the output of the next command, `eval 1 + 1`.
    pub(super) async fn alert_between_commands(&self, message: &str) -> Output {
        self.eval(&format!("setTimeout(() => alert({message:?}), 50); 0"))
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        self.cmd(&["eval", "1 + 1"]).await
    }

    /// Runs a command that must succeed; returns its stdout, trimmed.
    pub(super) async fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args).await;
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim().to_owned()
    }

    pub(super) async fn eval(&self, js: &str) -> Value {
        serde_json::from_str(&self.ok(&["--json", "eval", js]).await).unwrap()
    }

    /// The ref of the first snapshot node with this role whose name
    /// contains `name`.
    pub(super) async fn find(&self, role: &str, name: &str) -> String {
        let snap: Value =
            serde_json::from_str(&self.ok(&["--json", "snapshot", "-i"]).await).unwrap();
        snap["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["role"] == role && n["name"].as_str().unwrap_or("").contains(name))
            .unwrap_or_else(|| panic!("no {role} {name:?} in {snap}"))["ref"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The pid of the session's keeper (started by `open`), from the state
    /// file.
    pub(super) fn keeper_pid(&self) -> Option<u32> {
        let saved = std::fs::read_to_string(self.state.path().join("default.json")).ok()?;
        let v: Value = serde_json::from_str(&saved).ok()?;
        u32::try_from(v["keeper"]["pid"].as_u64()?).ok()
    }

    /// Kills the session's keeper and waits until it is gone: later
    /// commands attach to the page themselves.
    pub(super) async fn kill_keeper(&self) {
        let pid = self.keeper_pid().expect("open started a keeper");
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while super::harness::alive(pid) {
            assert!(std::time::Instant::now() < deadline, "the keeper lives on");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    pub(super) fn profile_processes(&self) -> usize {
        let needle = self.state.path().to_string_lossy().into_owned();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                    .unwrap_or(false)
            })
            .filter(|e| {
                std::fs::read_to_string(e.path().join("stat"))
                    .map(|s| {
                        !s.rsplit(')')
                            .next()
                            .unwrap_or("")
                            .trim_start()
                            .starts_with('Z')
                    })
                    .unwrap_or(false)
            })
            .count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_commands_drive_a_form_across_processes() {
    let s = Session::new().await;
    let url = s.ok(&["open", &s.site.url("form.html")]).await;
    assert!(url.ends_with("/form.html"), "{url}");
    assert_eq!(s.ok(&["title"]).await, "Lumen fixtures: form");
    assert!(s.ok(&["url"]).await.ends_with("/form.html"));

    let name = s.find("textbox", "Name").await;
    s.ok(&["fill", &name, "Ada Lovelace"]).await;
    assert_eq!(
        s.eval("document.querySelector('#name').value").await,
        "Ada Lovelace"
    );
    s.ok(&["press", "Tab"]).await;
    s.ok(&["type", "ada@example.com"]).await;
    assert_eq!(
        s.eval("document.querySelector('#email').value").await,
        "ada@example.com"
    );

    let shot = s.state.path().join("form.png");
    s.ok(&["screenshot", shot.to_str().unwrap()]).await;
    assert!(std::fs::read(&shot).unwrap().starts_with(b"\x89PNG"));

    let at = s
        .eval("(() => { const r = document.querySelector('#submit').getBoundingClientRect(); return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; })()")
        .await;
    s.ok(&["click", &at[0].to_string(), &at[1].to_string()])
        .await;
    assert_eq!(s.eval("window.lumen.submitCount").await, 1);
    assert_eq!(s.eval("window.lumen.submitted.name").await, "Ada Lovelace");

    s.ok(&["close"]).await;
    assert_eq!(s.profile_processes(), 0, "close ends the browser");
    let out = s.cmd(&["url"]).await;
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("lumen browser open"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_from_before_a_navigation_fails_instead_of_clicking_the_new_page() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("links/page1.html")]).await;
    let next = s.find("link", "Next").await;
    s.ok(&["click", &next]).await;
    assert!(s.ok(&["url"]).await.ends_with("/page2.html"));

    // Page 2 has its own "Next" link, maybe where page 1's was: the old ref
    // must not click it.
    let out = s.cmd(&["click", &next]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains("navigated") && stderr.contains("run `lumen browser snapshot` again"),
        "{stderr}"
    );
    assert!(
        s.ok(&["url"]).await.ends_with("/page2.html"),
        "nothing was clicked"
    );

    s.ok(&["back"]).await;
    assert!(s.ok(&["url"]).await.ends_with("/page1.html"));
    s.ok(&["forward"]).await;
    assert!(s.ok(&["url"]).await.ends_with("/page2.html"));
    s.ok(&["reload"]).await;
    let hover_target = s.find("link", "Next").await;
    s.ok(&["hover", &hover_target]).await;
    s.ok(&["dblclick", "5", "5"]).await;
    s.ok(&["close"]).await;
    assert_eq!(s.profile_processes(), 0);
}

#[tokio::test]
async fn commands_without_an_open_session_say_how_to_open_one() {
    let state = tempfile::tempdir().unwrap();
    let out = lumen(Path::new(state.path()))
        .env("LUMEN_STATE_DIR", state.path())
        .args(["browser", "--session", "nope", "click", "@e1"])
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("no browser session \"nope\""),
        "{}",
        text(&out.stderr)
    );

    // A name whose keeper socket could not exist is refused before any
    // browser starts, with what to shorten.
    let long = "s".repeat(120);
    let out = lumen(Path::new(state.path()))
        .env("LUMEN_STATE_DIR", state.path())
        .args(["browser", "--session", &long, "open", "about:blank"])
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("shorter --session name") && err.contains("LUMEN_STATE_DIR"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
}

/// A session file another user planted (as one could in a shared
/// temporary folder), or one in a folder others may write to, is never
/// taken: it names the browser commands would drive and the profile
/// `close` would delete.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_file_another_user_could_have_made_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    let victim_profile = root.path().join("precious");
    std::fs::create_dir(&victim_profile).unwrap();
    let state = root.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let planted = serde_json::json!({
        "ws_url": "ws://127.0.0.1:9/devtools/browser/x",
        "pid": 1,
        "profile": victim_profile,
        "target": "t",
    });
    let file = state.join("default.json");
    std::fs::write(&file, planted.to_string()).unwrap();
    let run = |args: &'static [&'static str]| {
        let state = state.clone();
        async move {
            lumen(&state)
                .env("LUMEN_STATE_DIR", &state)
                .args(args)
                .output()
                .await
                .unwrap()
        }
    };
    // Another user's file (root may give it away; that is who runs here).
    std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
    let out = run(&["browser", "close"]).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("belongs to another user"),
        "{}",
        text(&out.stderr)
    );
    // A file others may write to.
    std::os::unix::fs::chown(&file, Some(0), None).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = run(&["browser", "url"]).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("others may write"),
        "{}",
        text(&out.stderr)
    );
    // A folder of another user's.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&state, Some(65534), None).unwrap();
    let out = run(&["browser", "url"]).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    std::os::unix::fs::chown(&state, Some(0), None).unwrap();
    // The user's own folder, made group-writable by a umask, is fine (and
    // made private once written to).
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o770)).unwrap();
    std::fs::remove_file(&file).unwrap();
    let out = run(&["browser", "url"]).await;
    assert!(
        text(&out.stderr).contains("no browser session"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        victim_profile.exists(),
        "nothing of the planted state was acted on"
    );
}

/// One request to the browser's DevTools HTTP endpoint (`/json/...`).
async fn devtools_http(ws_url: &str, method: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let host = ws_url
        .trim_start_matches("ws://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut sock = tokio::net::TcpStream::connect(&host).await.unwrap();
    let request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    sock.write_all(request.as_bytes()).await.unwrap();
    // The answer's head is all that is needed (the endpoint may keep the
    // connection open).
    let mut answer = vec![0u8; 16 * 1024];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), sock.read(&mut answer))
        .await
        .expect("DevTools did not answer")
        .unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

/// The session's page closed by something else (the person, another
/// tool) while its browser runs: `open` goes on in another page of that
/// browser instead of replacing the browser and its other pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_after_the_sessions_page_closed_keeps_its_browser() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let saved = || -> Value {
        serde_json::from_str(&std::fs::read_to_string(s.state.path().join("default.json")).unwrap())
            .unwrap()
    };
    let before = saved();
    let ws = before["ws_url"].as_str().unwrap();
    let opened = devtools_http(ws, "PUT", "/json/new?about:blank").await;
    assert!(opened.starts_with("HTTP/1.1 200"), "{opened}");
    let target = before["target"].as_str().unwrap();
    let closed = devtools_http(ws, "GET", &format!("/json/close/{target}")).await;
    assert!(closed.starts_with("HTTP/1.1 200"), "{closed}");

    let url = s.site.url("counter.html");
    s.ok(&["open", &url]).await;
    let after = saved();
    assert_eq!(after["pid"], before["pid"], "the browser was replaced");
    assert_ne!(after["target"], before["target"]);
    assert_eq!(s.ok(&["url"]).await, url);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_waits_cookies_and_saved_state() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("popup.html")]).await;
    // A target=_blank link opens a second tab; the session stays on its own.
    s.ok(&["click", "150", "174"]).await;
    s.ok(&["wait", "--url", "popup.html"]).await;
    let tabs: Value = serde_json::from_str(&s.ok(&["--json", "tabs"]).await).unwrap();
    let tabs = tabs.as_array().unwrap();
    assert_eq!(tabs.len(), 2, "{tabs:?}");
    let other = tabs
        .iter()
        .find(|t| t["url"].as_str().unwrap().ends_with("/page3.html"))
        .unwrap();
    let index = other["index"].to_string();
    s.ok(&["tab", &index]).await;
    assert!(
        s.ok(&["url"]).await.ends_with("/page3.html"),
        "the session follows `tab`"
    );
    s.ok(&["wait", "--text", "Page 3"]).await;
    let out = s
        .cmd(&["wait", "--url", "nowhere", "--timeout", "300"])
        .await;
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains("gave up after 300 ms"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(code(&s.cmd(&["tab", "9"]).await), 2);

    s.ok(&["open", &s.site.url("scroll.html")]).await;
    s.ok(&["scroll", "down", "600"]).await;
    let y = s.eval("window.scrollY").await.as_f64().unwrap();
    assert!(y > 300.0, "scrolled to {y}");
    s.ok(&["scroll", "up"]).await;
    assert!(s.eval("window.scrollY").await.as_f64().unwrap() < y);

    let full = s.ok(&["snapshot"]).await.lines().count();
    let shallow = s.ok(&["snapshot", "-c", "-d", "1"]).await.lines().count();
    assert!(shallow < full, "{shallow} < {full}");

    s.ok(&["cookies", "set", "flavour=rye"]).await;
    assert!(s.ok(&["cookies"]).await.contains("flavour=rye"));
    let saved = s.state.path().join("state.json");
    s.ok(&["state", "save", saved.to_str().unwrap()]).await;
    s.ok(&["cookies", "clear"]).await;
    assert!(!s.ok(&["cookies", "get"]).await.contains("flavour"));
    s.ok(&["state", "load", saved.to_str().unwrap()]).await;
    assert!(s.ok(&["cookies"]).await.contains("flavour=rye"));
    s.ok(&["close"]).await;
    assert_eq!(s.profile_processes(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_snapshot_lists_only_the_matching_subtrees_and_its_refs_work() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let full: Value = serde_json::from_str(&s.ok(&["--json", "snapshot"]).await).unwrap();
    let scoped: Value =
        serde_json::from_str(&s.ok(&["--json", "snapshot", "-s", "fieldset"]).await).unwrap();
    let nodes = scoped["nodes"].as_array().unwrap();
    let shown: Vec<(&str, &str)> = nodes
        .iter()
        .map(|n| {
            (
                n["role"].as_str().unwrap(),
                n["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(shown[0], ("group", "Preferred contact"), "{shown:?}");
    assert_eq!(nodes[0]["depth"], 0, "depth counts from the scope's root");
    for radio in ["Email", "Phone", "Post"] {
        assert!(shown.contains(&("radio", radio)), "{shown:?}");
    }
    assert!(
        !shown
            .iter()
            .any(|(role, _)| *role == "textbox" || *role == "heading"),
        "nothing outside the fieldset: {shown:?}"
    );
    // A ref means the same element in a scoped and a full snapshot.
    let phone = nodes.iter().find(|n| n["name"] == "Phone").unwrap()["ref"].clone();
    let in_full = full["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["role"] == "radio" && n["name"] == "Phone")
        .unwrap()["ref"]
        .clone();
    assert_eq!(phone, in_full);
    s.ok(&["click", phone.as_str().unwrap()]).await;
    assert_eq!(
        s.eval("document.querySelector('#contact-phone').checked")
            .await,
        true
    );

    // Several matches: each subtree, in document order.
    let rows = s.ok(&["snapshot", "-i", "-s", "#name, #submit"]).await;
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), 2, "{rows}");
    assert!(lines[0].contains("textbox \"Name\""), "{rows}");
    assert!(lines[1].contains("button \"Submit\""), "{rows}");

    for (selector, says) in [
        ("#nowhere", "no element matches \"#nowhere\""),
        ("[[", "is not a valid CSS selector"),
        ("script", "nothing in them is in the accessibility tree"),
    ] {
        let out = s.cmd(&["snapshot", "-s", selector]).await;
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 1, "{selector}: {stderr}");
        assert!(stderr.contains(says), "{selector}: {stderr}");
    }
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_under_another_element_names_it_and_clicks_nothing() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let name = s.find("textbox", "Name").await;
    s.eval(
        "document.body.insertAdjacentHTML('beforeend', \
         '<div id=\"cover\" style=\"position:fixed;inset:0;z-index:9\"></div>')",
    )
    .await;
    let out = s.cmd(&["fill", &name, "Ada"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("{name} is covered by <div id=\"cover\">")),
        "{stderr}"
    );
    assert_eq!(s.eval("document.querySelector('#name').value").await, "");
    assert_eq!(s.eval("window.lumen.lastFocus").await, Value::Null);
    assert_eq!(s.eval("window.lumen.submitted").await, Value::Null);

    // Removed from the page: stale, not a click elsewhere.
    s.eval("document.querySelector('#cover').remove(); document.querySelector('#name').remove()")
        .await;
    let out = s.cmd(&["click", &name]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains("removed from the page") && stderr.contains("snapshot` again"),
        "{stderr}"
    );
    // A ref this document never had.
    let out = s.cmd(&["click", "@e999"]).await;
    assert!(text(&out.stderr).contains("not in the last snapshot"));

    // `fill` on something that takes no text types nothing and says so.
    let subscribe = s.find("checkbox", "Subscribe").await;
    let out = s.cmd(&["fill", &subscribe, "yes"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{subscribe} is <input id=\"subscribe\">, which takes no text"
        )),
        "{stderr}"
    );
    // Several lines into a textarea: Enter between them.
    let message = s.find("textbox", "Message").await;
    s.ok(&["fill", &message, "one\ntwo"]).await;
    assert_eq!(
        s.eval("document.querySelector('#message').value").await,
        "one\ntwo"
    );
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refs_are_found_through_the_page_registry_and_through_their_node_without_it() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let name = s.find("textbox", "Name").await;
    let registered = || s.eval("window.__lumenRefs instanceof Map ? window.__lumenRefs.size : 0");
    let before = registered().await.as_u64().unwrap();
    assert!(before >= 10, "the snapshot registers its refs: {before}");

    // A later snapshot of the same document keeps the refs and registers
    // only the new one.
    s.eval(
        "document.body.insertAdjacentHTML('beforeend', '<button id=\"late\" \
         onclick=\"window.lateClicks = (window.lateClicks || 0) + 1\">Late</button>')",
    )
    .await;
    let late = s.find("button", "Late").await;
    assert_eq!(s.find("textbox", "Name").await, name);
    assert_eq!(registered().await.as_u64().unwrap(), before + 1);

    // Point the saved refs at DOM nodes that do not exist: the registry
    // alone now finds the elements.
    let state_file = s.state.path().join("default.json");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
    for pair in state["refs"]["nodes"].as_array_mut().unwrap() {
        pair[1] = Value::from(987_654_321);
    }
    std::fs::write(&state_file, state.to_string()).unwrap();
    s.ok(&["fill", &name, "Ada"]).await;
    assert_eq!(s.eval("document.querySelector('#name').value").await, "Ada");
    s.ok(&["click", &late]).await;
    assert_eq!(s.eval("window.lateClicks").await, 1);

    // Without the registry (a snapshot by an older lumen), the saved node
    // is what counts: here it is gone, and the ref is refused as stale.
    s.eval("delete window.__lumenRefs").await;
    let out = s.cmd(&["click", &late]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(stderr.contains("removed from the page"), "{stderr}");
    assert_eq!(s.eval("window.lateClicks").await, 1);

    // A fresh snapshot saves the real nodes again; they work without the
    // registry too.
    let late = s.find("button", "Late").await;
    s.eval("delete window.__lumenRefs").await;
    s.ok(&["click", &late]).await;
    assert_eq!(s.eval("window.lateClicks").await, 2);
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_are_answered_and_reported_and_a_blocked_page_is_named() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("dialogs.html")]).await;

    // An alert during a command is accepted at once and told of.
    let out = s.cmd(&["click", "140", "104"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(
        stderr.contains(
            "a JavaScript alert opened (\"Hello from the Lumen alert\") and was accepted"
        ),
        "{stderr}"
    );
    assert_eq!(s.eval("window.lumen.alertClosed").await, 1);

    // A confirm is dismissed by default, accepted with --dialog accept; in
    // JSON the answer carries it.
    s.ok(&["click", "140", "169"]).await;
    assert_eq!(s.eval("window.lumen.confirmResult").await, false);
    let out = s
        .cmd(&["--json", "--dialog", "accept", "click", "140", "169"])
        .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let answer: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(answer["dialogs"][0]["kind"], "confirm");
    assert_eq!(answer["dialogs"][0]["accepted"], true);
    assert_eq!(s.eval("window.lumen.confirmResult").await, true);
    // `eval` of a prompt returns what the accepted prompt gave.
    let v = s
        .ok(&["--dialog", "accept", "eval", "prompt('Your name?', 'Ada')"])
        .await;
    assert_eq!(v, "Ada");

    // A dialog the page opens between commands is answered by the
    // session's keeper, which keeps a link to the page, and the next
    // command tells of it.
    let out = s.alert_between_commands("opened between commands").await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(
        stderr.contains("alert opened (\"opened between commands\") and was accepted"),
        "{stderr}"
    );

    // Without a keeper, a dialog the page opens between commands blocks it
    // where no command can see it: the next command says so within
    // seconds instead of hanging, and a reload clears it.
    s.kill_keeper().await;
    s.eval("setTimeout(() => alert('opened later'), 50); 0")
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let out = s.cmd(&["eval", "1 + 1"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains("the page did not answer") && stderr.contains("reloading the page"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(12));
    s.ok(&["reload"]).await;
    assert_eq!(s.ok(&["eval", "1 + 1"]).await, "2");
    s.ok(&["close"]).await;
}

/// A session whose browser died and whose pid the system gave to another
/// program: `close` must not signal that program's process group.
#[tokio::test]
async fn close_never_signals_a_process_that_reused_the_browsers_pid() {
    let state = tempfile::tempdir().unwrap();
    // Another program, leading its own process group, as Chromium did.
    let mut other = std::process::Command::new("sleep");
    other.arg("30");
    std::os::unix::process::CommandExt::process_group(&mut other, 0);
    let mut other = other.spawn().unwrap();
    let saved = serde_json::json!({
        "pid": other.id(),
        "started": 1,
        "ws_url": "ws://127.0.0.1:9/devtools/browser/x",
        "profile": state.path().join("reused-profile"),
        "target": "T",
    });
    std::fs::write(
        state.path().join("reused.json"),
        serde_json::to_string(&saved).unwrap(),
    )
    .unwrap();
    let out = lumen(Path::new(state.path()))
        .env("LUMEN_STATE_DIR", state.path())
        .args(["browser", "--session", "reused", "close"])
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        other.try_wait().unwrap().is_none(),
        "the other program is still running"
    );
    other.kill().unwrap();
    let _ = other.wait();
}

/// A browser that does not answer in time (stopped here; on a loaded
/// machine, busy) is not a gone one: the command fails and says so, and
/// the session, its browser and its profile are kept for the next command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_that_does_not_answer_in_time_is_kept_with_its_session() {
    let s = Session::new().await;
    let url = s.site.url("form.html");
    s.ok(&["open", &url]).await;
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(s.state.path().join("default.json")).unwrap(),
    )
    .unwrap();
    let group = format!("-{}", saved["pid"].as_u64().unwrap());
    let profile = std::path::PathBuf::from(saved["profile"].as_str().unwrap());
    let signal = |name: &str| {
        std::process::Command::new("kill")
            .args([name, "--", &group])
            .status()
            .unwrap()
            .success()
    };
    assert!(signal("-STOP"));
    let out = s.cmd(&["url"]).await;
    assert!(signal("-CONT"));
    assert_ne!(code(&out), 0);
    let err = text(&out.stderr);
    assert!(
        err.contains("did not answer") && err.contains("kept"),
        "{err}"
    );
    assert!(profile.exists(), "the profile was deleted");
    assert_eq!(s.ok(&["url"]).await, url);
}

//! The `lumen browser` keeper and the session's state on real Chromium:
//! `open` starts the keeper and warm commands run in it (falling back to
//! their own link when it is busy or gone); concurrent first
//! `set`/`network` commands start one keeper and lose
//! none of each other's settings, a setting the browser refuses is not
//! kept, and the request log cuts long URLs.

use std::path::Path;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

use super::direct::Session;
use super::harness::{alive, code, text};

/// The session's state file.
fn state(s: &Session) -> Value {
    let path = s.state.path().join("default.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The live keeper processes of sessions kept in `state_dir`.
fn keepers(state_dir: &Path) -> Vec<u32> {
    let wanted = format!("LUMEN_STATE_DIR={}", state_dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("keeper-internal")
                && environ
                    .split(|b| *b == 0)
                    .any(|var| var == wanted.as_bytes())
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// What a page's `fetch` of `url` ended with: `ok STATUS` or `err`.
fn fetch(url: &str) -> String {
    format!("fetch({url:?}).then(r => 'ok ' + r.status, () => 'err')")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_commands_start_one_keeper_and_keep_every_setting() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    // `open` starts the keeper; without it, later commands start one.
    assert_eq!(keepers(s.state.path()).len(), 1);
    s.kill_keeper().await;
    assert!(keepers(s.state.path()).is_empty());

    // Three first commands at once: each needs the keeper, none finds one.
    let (viewport, geo, route) = tokio::join!(
        s.cmd(&["set", "viewport", "800", "600"]),
        s.cmd(&["set", "geo", "10", "20"]),
        s.cmd(&["network", "route", "/data/sample.txt", "--abort"]),
    );
    for out in [&viewport, &geo, &route] {
        assert_eq!(code(out), 0, "{}", text(&out.stderr));
    }
    let running = keepers(s.state.path());
    assert_eq!(running.len(), 1, "keepers: {running:?}");
    let saved = state(&s);
    assert_eq!(saved["keeper"]["pid"].as_u64(), Some(u64::from(running[0])));
    // No command's change was lost to another's write.
    assert_eq!(saved["emulation"]["viewport"]["width"], 800, "{saved}");
    assert_eq!(saved["emulation"]["geo"], serde_json::json!([10.0, 20.0]));
    assert_eq!(saved["routes"][0]["pattern"], "/data/sample.txt", "{saved}");
    // And the browser has them all.
    assert_eq!(s.eval("innerWidth").await, 800);
    assert_eq!(s.eval(&fetch("/data/sample.txt")).await, "err");

    s.ok(&["close"]).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !keepers(s.state.path()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "a keeper outlived close"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A TCP proxy in front of the browser's DevTools port that passes
/// everything through, but renames `from` to `to` (as long) in each
/// WebSocket frame a client sends: the browser itself then refuses that
/// command, as it refuses a value it cannot take.
async fn renaming_proxy(upstream: u16, from: &'static [u8], to: &'static [u8]) -> u16 {
    assert_eq!(from.len(), to.len());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                });
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                // The HTTP upgrade request goes through as it is.
                let head_end = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match client_read.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                if server_write.write_all(&buf[..head_end]).await.is_err() {
                    return;
                }
                buf.drain(..head_end);
                loop {
                    while let Some(frame) = take_frame(&mut buf) {
                        let frame = rename(frame, from, to);
                        if server_write.write_all(&frame).await.is_err() {
                            return;
                        }
                    }
                    match client_read.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    port
}

/// The first whole WebSocket frame in `buf`, taken out of it.
fn take_frame(buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    if buf.len() < 2 {
        return None;
    }
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into().unwrap()), 10),
        126 | 127 => return None,
        n => (u64::from(n), 2),
    };
    if masked {
        at += 4;
    }
    let total = at + usize::try_from(len).unwrap();
    (buf.len() >= total).then(|| buf.drain(..total).collect())
}

/// `frame` with `from` renamed to `to` in its (masked) payload.
fn rename(mut frame: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = match frame[1] & 0x7f {
        126 => 4,
        127 => 10,
        _ => 2,
    };
    if frame[1] & 0x80 == 0 {
        return frame;
    }
    let key: [u8; 4] = frame[at..at + 4].try_into().unwrap();
    let payload = &mut frame[at + 4..];
    let flip = |p: &mut [u8]| {
        for (i, b) in p.iter_mut().enumerate() {
            *b ^= key[i % 4];
        }
    };
    flip(payload);
    let mut i = 0;
    while i + from.len() <= payload.len() {
        if &payload[i..i + from.len()] == from {
            payload[i..i + from.len()].copy_from_slice(to);
        }
        i += 1;
    }
    flip(payload);
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_the_browser_refuses_is_not_kept() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    // The session's commands reach the browser through a proxy that makes
    // it refuse the geolocation override.
    let path = s.state.path().join("default.json");
    let mut saved = state(&s);
    let ws = saved["ws_url"].as_str().unwrap().to_owned();
    let port: u16 = ws
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no local port in {ws}"));
    let proxy = renaming_proxy(
        port,
        b"Emulation.setGeolocationOverride",
        b"Emulation.setGeolocationOverridX",
    )
    .await;
    saved["ws_url"] = ws
        .replace(&format!(":{port}/"), &format!(":{proxy}/"))
        .into();
    std::fs::write(&path, saved.to_string()).unwrap();

    s.ok(&["set", "viewport", "800", "600"]).await;
    let keeper = state(&s)["keeper"]["pid"].as_u64().unwrap();
    let out = s.cmd(&["set", "geo", "10", "20"]).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("refused") && err.contains("setGeolocationOverridX"),
        "{err}"
    );
    // The refused setting is not saved; the earlier ones are.
    let after = state(&s);
    assert!(after["emulation"]["geo"].is_null(), "{after}");
    assert_eq!(after["emulation"]["viewport"]["width"], 800, "{after}");
    assert_eq!(after["keeper"]["pid"].as_u64(), Some(keeper));
    // So later settings are not refused for it.
    s.ok(&["set", "media", "dark"]).await;
    assert!(state(&s)["emulation"]["geo"].is_null());
    assert_eq!(s.eval("innerWidth").await, 800);
    assert_eq!(
        s.eval("matchMedia('(prefers-color-scheme: dark)').matches")
            .await,
        true
    );
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_log_cuts_long_urls() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    s.ok(&["network", "requests", "--clear"]).await;
    let long = format!("/data/sample.txt?q={}", "a".repeat(5000));
    let fetched = s.eval(&fetch(&long)).await;
    assert_eq!(fetched, "ok 200");
    let out = s
        .ok(&["--json", "network", "requests", "--filter", "sample.txt"])
        .await;
    let v: Value = serde_json::from_str(&out).unwrap();
    let url = v["requests"][0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("not logged: {v}"));
    assert!(url.ends_with("… (cut)"), "{url}");
    assert_eq!(url.chars().count(), 1000 + "… (cut)".chars().count());
    assert!(
        url.starts_with(&s.site.url("data/sample.txt?q=aaa")),
        "{url}"
    );
    s.ok(&["close"]).await;
}

/// Whether a DevTools client is attached to the session's page between
/// commands, asked over a browser connection of the test's own.
async fn page_attached(s: &Session) -> bool {
    use futures::{SinkExt as _, StreamExt as _};
    let saved = state(s);
    let (mut ws, _) = tokio_tungstenite::connect_async(saved["ws_url"].as_str().unwrap())
        .await
        .unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        r#"{"id":1,"method":"Target.getTargets"}"#,
    ))
    .await
    .unwrap();
    while let Some(Ok(msg)) = ws.next().await {
        let Ok(v) = serde_json::from_str::<Value>(msg.to_text().unwrap_or("")) else {
            continue;
        };
        if v["id"] == 1 {
            return v["result"]["targetInfos"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["targetId"] == saved["target"])
                .unwrap_or_else(|| panic!("no session page in {v}"))["attached"]
                == true;
        }
    }
    panic!("the browser did not answer Target.getTargets");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_commands_run_in_the_keeper_and_a_busy_one_is_not_waited_for() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let name = s.find("textbox", "Name").await;
    s.ok(&["fill", &name, "Ada"]).await;
    assert_eq!(s.ok(&["get", "value", &name]).await, "Ada");
    // The keeper `open` started holds the page's link between commands.
    assert!(page_attached(&s).await, "no link kept to the page");
    // A screenshot it takes lands in the caller's folder, not its own.
    let elsewhere = s.state.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = super::harness::lumen(&elsewhere)
        .env("LUMEN_STATE_DIR", s.state.path())
        .args(["browser", "screenshot", "shot.png"])
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "shot.png");
    let png = std::fs::read(elsewhere.join("shot.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    assert!(!s.state.path().join("shot.png").exists());
    // A path means what it means to the caller: its own stdout here.
    let out = s.cmd(&["screenshot", "/dev/stdout"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        out.stdout.starts_with(b"\x89PNG"),
        "no PNG on the caller's stdout"
    );

    // A command that finds the keeper's link taken (a long wait) runs on
    // a link of its own, beside it, instead of queueing behind it.
    let mut wait = s
        .command(&["wait", "--text", "never on the page", "--timeout", "8000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    s.ok(&["fill", &name, "Grace"]).await;
    assert_eq!(s.ok(&["get", "value", &name]).await, "Grace");
    assert!(
        wait.try_wait().unwrap().is_none(),
        "the wait ended before the commands that came after it"
    );
    let out = wait.wait_with_output().await.unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("gave up after 8000 ms"));

    // Without a keeper, commands attach themselves and leave nothing
    // attached; the next `open` starts a keeper again.
    s.kill_keeper().await;
    s.ok(&["fill", &name, "Lin"]).await;
    assert_eq!(s.ok(&["get", "value", &name]).await, "Lin");
    assert!(!page_attached(&s).await, "a link outlived its command");
    s.ok(&["open", &s.site.url("form.html")]).await;
    assert!(s.keeper_pid().is_some_and(alive), "open started no keeper");
    s.ok(&["close"]).await;
}

/// The keeper's socket runs page commands for the session's owner, and no
/// others: not `open`, `close` or a file command, and nothing it cannot
/// read as a command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_runs_only_page_commands() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let sock = s.state.path().join("default.keeper").join("sock");
    let ask = |question: String| {
        let sock = sock.clone();
        async move {
            let mut stream = tokio::net::UnixStream::connect(sock).await.unwrap();
            stream
                .write_all(format!("{question}\n").as_bytes())
                .await
                .unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            serde_json::from_str::<Value>(&answer).unwrap()
        }
    };
    let shot = s.state.path().join("shot.png");
    for command in [
        serde_json::json!("Close"),
        serde_json::json!({"Open": {"url": "http://127.0.0.1:9/"}}),
        serde_json::json!({"Screenshot": {"path": shot, "annotate": true}}),
        serde_json::json!({"State": {"action": "save", "file": shot}}),
        serde_json::json!({"Click": {"target": "not a list"}}),
        serde_json::json!("Keeper"),
    ] {
        let answer = ask(serde_json::json!({"op": "run", "command": command}).to_string()).await;
        assert_eq!(answer["ok"], false, "{command}: {answer}");
        assert_eq!(answer["error"], "not a command the keeper runs");
    }
    assert!(!shot.exists());
    // A page command is run and answered as its own process would print.
    let eval = serde_json::json!({"Eval": {"js": "6 * 7"}});
    let answer = ask(serde_json::json!({"op": "run", "command": eval}).to_string()).await;
    assert_eq!(answer["outcome"]["answer"]["Ok"][0], 42, "{answer}");
    // A file it makes comes back for the caller to write: the keeper
    // writes nothing itself.
    let screenshot = serde_json::json!({"Screenshot": {"path": shot, "annotate": false}});
    let answer = ask(serde_json::json!({"op": "run", "command": screenshot}).to_string()).await;
    assert_eq!(
        answer["outcome"]["file"]["path"],
        serde_json::json!(shot),
        "{answer}"
    );
    assert!(
        answer["outcome"]["file"]["bytes"]
            .as_str()
            .is_some_and(|b| b.starts_with("iVBOR")),
        "the PNG, in base64"
    );
    assert!(!shot.exists(), "the keeper wrote the file itself");
    assert_eq!(s.ok(&["url"]).await, s.site.url("form.html"));
    s.ok(&["close"]).await;
}

/// A keeper whose session's state file is gone (removed by hand, or with
/// its folder) exits: nothing can reach it any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_exits_when_the_state_file_is_gone() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let keeper = s.keeper_pid().expect("open started a keeper");
    let path = s.state.path().join("default.json");
    let saved = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(keeper) {
        assert!(
            std::time::Instant::now() < deadline,
            "the keeper outlived its state"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Put it back, so that `close` ends the browser.
    std::fs::write(&path, saved).unwrap();
    s.ok(&["close"]).await;
}

/// A keeper the state file does not name (its start was interrupted before
/// it was recorded) is ended when the next keeper starts: both would follow
/// the page, answering its dialogs and handling its routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_keeper_is_ended_when_the_next_one_starts() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let first = s.keeper_pid().expect("open started a keeper");
    // Forgotten, as by a start interrupted before it was recorded: it runs
    // on, since the state file still names its browser.
    let path = s.state.path().join("default.json");
    let mut saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    saved.as_object_mut().unwrap().remove("keeper");
    std::fs::write(&path, saved.to_string()).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(alive(first), "the unrecorded keeper runs on by itself");

    s.ok(&["set", "media", "light"]).await;
    let second = s.keeper_pid().expect("a keeper was started");
    assert_ne!(first, second);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(first) {
        assert!(
            std::time::Instant::now() < deadline,
            "the unrecorded keeper still runs beside the new one"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(alive(second));
    s.ok(&["close"]).await;
    assert!(!alive(second));
}

/// A command whose process goes away (Ctrl-C on a long `wait`) is dropped
/// by the keeper, as it would have ended with a link of its own: the link
/// is free again, and a dialog the page opens next is answered between
/// commands and told of by the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_process_is_gone_is_dropped() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let mut wait = s
        .command(&["wait", "--text", "never on the page", "--timeout", "60000"])
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    wait.kill().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let out = s.alert_between_commands("after the wait").await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(
        stderr.contains("alert opened (\"after the wait\") and was accepted"),
        "the keeper was still busy with a command nobody waits for: {stderr}"
    );
    s.ok(&["close"]).await;
}

/// A dialog the page opens right after `open`, before any other command,
/// is answered by the keeper: the next command finds the page answering
/// and reports the dialog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialog_before_any_command_is_answered_by_the_keeper() {
    let s = Session::new().await;
    let page =
        "data:text/html,<title>d</title><script>setTimeout(() => alert('early'), 1200)</script>";
    s.ok(&["open", page]).await;
    tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
    let out = s.cmd(&["eval", "1 + 1"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "2");
    assert!(text(&out.stderr).contains("early"), "{}", text(&out.stderr));
    s.ok(&["close"]).await;
}

/// An answer cut off half-way (the keeper ended while writing it) is the
/// command's error: the command may have run, so it is not run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_answer_is_an_error_and_the_command_is_not_run_again() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    s.kill_keeper().await;
    let sock = s.state.path().join("default.keeper").join("sock");
    let _ = std::fs::remove_file(&sock);
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let fake = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        tokio::io::BufReader::new(read)
            .read_line(&mut line)
            .await
            .unwrap();
        write
            .write_all(br#"{"ok": true, "outcome": {"answ"#)
            .await
            .unwrap();
        line
    });
    let out = s
        .cmd(&["eval", "window.runs = (window.runs || 0) + 1"])
        .await;
    let question = fake.await.unwrap();
    assert!(question.contains("window.runs"), "{question}");
    assert_ne!(code(&out), 0, "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("may or may not have run"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_file(&sock);
    assert_eq!(s.ok(&["eval", "window.runs || 0"]).await, "0");
    s.ok(&["close"]).await;
}

/// Clients that connect and say nothing do not hold up the keeper: each
/// would have stopped it for 5 seconds, so sixteen of them would outlast a
/// page command's wait for its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_clients_do_not_hold_up_the_keeper() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let sock = s.state.path().join("default.keeper").join("sock");
    let mut silent = Vec::new();
    for _ in 0..16 {
        silent.push(tokio::net::UnixStream::connect(&sock).await.unwrap());
    }
    assert_eq!(s.ok(&["eval", "1 + 1"]).await, "2");
    assert!(
        page_attached(&s).await,
        "the keeper did not run the command"
    );
    drop(silent);
    s.ok(&["close"]).await;
}

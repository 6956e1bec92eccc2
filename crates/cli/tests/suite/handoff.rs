//! `lumen run --handoff`: the run waits for a person, prints a one-time
//! live-view URL on 127.0.0.1, and goes on when the person presses done
//! there; nobody coming ends it with exit 7.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio_tungstenite::tungstenite::Message;

use super::harness::{Env, code, done, events, request_human, text};

const LINK: &str = "live view (this hand-over only): ";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_live_view_lets_a_person_finish_and_the_run_goes_on() {
    let env = Env::new().await;
    env.script(vec![
        request_human(0, "Enter the one-time code"),
        done(1, "Signed in", "success"),
    ]);
    let mut child = env
        .run_command(
            "handoff/otp.html",
            &["--handoff", "--handoff-timeout", "60"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(90), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix(LINK) {
                return url.to_owned();
            }
        }
        panic!("no live-view link printed");
    })
    .await
    .expect("no hand-over within 90 s");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let socket = url
        .replacen("http://", "ws://", 1)
        .replacen("/live?", "/live/socket?", 1);
    let (mut ws, _) = tokio_tungstenite::connect_async(socket.as_str())
        .await
        .unwrap();
    let hello = loop {
        let Some(Ok(Message::Text(t))) = ws.next().await else {
            panic!("the live view closed")
        };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["type"] != "frame" {
            break v;
        }
    };
    assert_eq!(hello["type"], "handoff", "{hello}");
    assert_eq!(hello["reason"], "Enter the one-time code");
    // One person at a time: a second view is refused while this one is open.
    assert!(
        tokio_tungstenite::connect_async(socket.as_str())
            .await
            .is_err()
    );
    ws.send(Message::Text(
        json!({"type": "done", "note": "all yours"})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code(&out), 0, "stdout: {}", text(&out.stdout));
    let kinds: Vec<String> = events(&env.trace())
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .filter(|t| t.contains("human"))
        .collect();
    assert_eq!(kinds, ["waiting_for_human", "human_done"]);
    assert!(
        env.mock.requests()[1]
            .body
            .to_string()
            .contains("all yours"),
        "the note reaches the model"
    );
    assert!(
        env.mock.violations().is_empty(),
        "{:?}",
        env.mock.violations()
    );
}

#[tokio::test]
async fn a_handoff_nobody_takes_exits_7() {
    let env = Env::new().await;
    env.script(vec![request_human(0, "Solve the CAPTCHA")]);
    let out = env
        .run("handoff/otp.html", &["--handoff", "--handoff-timeout", "1"])
        .await;
    assert_eq!(code(&out), 7, "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("nobody took over in time"), "{stdout}");
    assert!(text(&out.stderr).contains(LINK), "the link was printed");
}

#[tokio::test]
async fn handoff_settings_need_handoff() {
    let env = Env::new().await;
    let out = env
        .run("handoff/otp.html", &["--handoff-timeout", "5"])
        .await;
    assert_eq!(code(&out), 2, "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--handoff"));
}

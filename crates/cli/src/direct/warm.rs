//! Page commands in the session's keeper ([`BrowserCommand::warm`]): the
//! side of the command's own process ([`run_warm`]), which sends the
//! command over the keeper's socket and prints what comes back, and the
//! keeper's side ([`run_on_link`]), which runs it on the one link to the
//! page it keeps open. The keeper itself (its socket, its settings and its
//! lifetime) is `keeper.rs`.

use std::time::Duration;

use lumen::browser::PageLink;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use super::socket::{MAX_QUESTION, connect};
use super::{BrowserArgs, BrowserCommand, DialogAnswer, PageOutcome};
use crate::exit::CliError;

/// The link to the driven page that warm commands share: `None` before the
/// first, and after the page it led to went away.
pub(super) type WarmLink = std::sync::Arc<tokio::sync::Mutex<Option<PageLink>>>;

/// Runs a warm command (see [`BrowserCommand::warm`]) in the session's
/// keeper, on the link it keeps open to the page.
///
/// `None` when the command is the caller's to run: there is no keeper to
/// ask, or the keeper passes it back (another command holds its link, or
/// it cannot reach the page). Once the keeper has taken the command, a
/// failure to hear back is the command's error and nothing is run again:
/// the command may have acted.
pub(super) async fn run_warm(
    session: &str,
    command: &BrowserCommand,
    dialog: Option<DialogAnswer>,
) -> Option<PageOutcome> {
    let question = json!({"op": "run", "command": command, "dialog": dialog}).to_string();
    if question.len() >= MAX_QUESTION {
        return None;
    }
    let mut stream = connect(session).await.ok()?;
    stream
        .write_all(format!("{question}\n").as_bytes())
        .await
        .ok()?;
    let lost = |why: &str| PageOutcome {
        answer: Err(CliError::failure(format!(
            "the session's keeper {why}; the command may or may not have run"
        ))),
        dialogs: Vec::new(),
        file: None,
    };
    let mut line = String::new();
    let mut reader = BufReader::new(stream);
    let read = reader.read_line(&mut line);
    match tokio::time::timeout(warm_deadline(command), read).await {
        Err(_) => return Some(lost("did not answer in time")),
        // A line cut off is a keeper that ended while answering: the
        // command may have run.
        Ok(Err(_)) | Ok(Ok(0)) => return Some(lost("ended during the command")),
        Ok(Ok(_)) if !line.ends_with('\n') => return Some(lost("ended during the command")),
        Ok(Ok(_)) => {}
    }
    let Ok(answer) = serde_json::from_str::<Value>(&line) else {
        return Some(lost("answered in a form this lumen does not read"));
    };
    // Only an explicit refusal hands the command back to its process.
    if answer["ok"] == false {
        tracing::debug!("the keeper passed the command back: {answer}");
        return None;
    }
    Some(
        serde_json::from_value(answer["outcome"].clone())
            .unwrap_or_else(|_| lost("answered in a form this lumen does not read")),
    )
}

/// How long a warm command's process waits for the keeper: the longest
/// the command itself may take, and then some. A `wait` sleeps its `MS`,
/// then may wait `--timeout` for a load state and again for its conditions.
fn warm_deadline(command: &BrowserCommand) -> Duration {
    let own = match command {
        BrowserCommand::Wait { what, timeout, .. } => {
            let sleep = match what.as_slice() {
                [ms] => ms.parse::<u64>().unwrap_or(0),
                _ => 0,
            };
            Duration::from_millis(sleep.saturating_add(timeout.saturating_mul(2)))
        }
        _ => Duration::ZERO,
    };
    own.saturating_add(4 * super::CALL_TIMEOUT)
}

/// Runs one warm command on the shared link `slot` (attaching it first, or
/// again when the driven tab changed or its page went away) and returns
/// the keeper's answer: `{"ok": true, "outcome": …}`, or `ok: false` for a
/// command its process should run itself.
pub(super) async fn run_on_link(
    session: &str,
    ws_url: &str,
    slot: &mut Option<PageLink>,
    question: &Value,
) -> Value {
    let pass = |why: &str| json!({"ok": false, "error": why});
    let command = match serde_json::from_value::<BrowserCommand>(question["command"].clone()) {
        Ok(c) if c.warm() => c,
        _ => return pass("not a command the keeper runs"),
    };
    let Ok(dialog) = serde_json::from_value::<Option<DialogAnswer>>(question["dialog"].clone())
    else {
        return pass("not a dialog answer");
    };
    let mut state = match super::load(session) {
        Ok(Some(s)) if s.ws_url == ws_url => s,
        _ => return pass("the session was closed or restarted"),
    };
    if let Some(link) = slot.as_ref()
        && (link.target_id() != state.target || link.catch_up().await.is_err())
    {
        *slot = None;
    }
    if slot.is_none() {
        match PageLink::attach(ws_url, &state.target, super::CALL_TIMEOUT).await {
            Ok(link) => *slot = Some(link),
            // The command's own process says what is wrong.
            Err(_) => return pass("cannot reach the page"),
        }
    }
    let Some(link) = slot.as_ref() else {
        return pass("cannot reach the page");
    };
    let args = BrowserArgs {
        session: session.to_owned(),
        json: false,
        raw: false,
        headed: false,
        dialog,
        profile: None,
        proxy: None,
        proxy_bypass: None,
        command,
    };
    let outcome = super::on_link(&args, link, &mut state, session).await;
    json!({"ok": true, "outcome": outcome})
}

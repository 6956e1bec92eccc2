//! The session keeper's socket: one JSON line each way. The caller's side
//! connects only to a socket served by this user and asks one question
//! ([`connect`], [`exchange`]); the keeper's side reads one question per
//! connection, in a task of its own ([`read_question`]). What the
//! questions mean is `keeper.rs` (settings, the request log) and `warm.rs`
//! (page commands).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;

use super::keeper::{ANSWER, dir};

/// The longest question the keeper reads (a warm command carries the text
/// it fills or evaluates); a longer command runs in its own process.
pub(super) const MAX_QUESTION: usize = 1 << 20;

/// Connects to the session's keeper: only to a socket whose other end runs
/// as this user (a socket someone else put in a shared state folder would
/// receive what we type and answer for the page).
pub(super) async fn connect(session: &str) -> std::io::Result<UnixStream> {
    let stream = UnixStream::connect(dir(session).join("sock")).await?;
    if stream.peer_cred()?.uid() != rustix::process::geteuid().as_raw() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the session's socket is served by another user",
        ));
    }
    Ok(stream)
}

/// One question and its answer over the keeper's socket.
pub(super) async fn exchange(session: &str, question: &Value) -> Result<Value, String> {
    let talk = async {
        let mut stream = connect(session)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        stream
            .write_all(format!("{question}\n").as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        BufReader::new(stream)
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?;
        serde_json::from_str::<Value>(&line).map_err(|_| "no answer".to_owned())
    };
    tokio::time::timeout(ANSWER, talk)
        .await
        .map_err(|_| "it did not answer in time".to_owned())?
}

/// A question read off the keeper's socket, with the connection to answer
/// on (a `run` also watches its read half for the caller going away).
pub(super) struct Asked {
    pub(super) question: Value,
    pub(super) read: tokio::net::unix::OwnedReadHalf,
    pub(super) write: tokio::net::unix::OwnedWriteHalf,
}

/// Reads one question (one JSON line, at most [`MAX_QUESTION`] bytes,
/// within 5 seconds) and hands it to the keeper's loop; a client that
/// says nothing in time is dropped.
pub(super) async fn read_question(stream: UnixStream, asked: tokio::sync::mpsc::Sender<Asked>) {
    let (read, write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(MAX_QUESTION as u64));
    let got = tokio::time::timeout(Duration::from_secs(5), reader.read_line(&mut line)).await;
    if !matches!(got, Ok(Ok(n)) if n > 0) {
        return;
    }
    let question = serde_json::from_str(&line).unwrap_or(Value::Null);
    let read = reader.into_inner().into_inner();
    let _ = asked
        .send(Asked {
            question,
            read,
            write,
        })
        .await;
}

//! `lumen ipc`: the run API as JSON lines, for embedding Lumen from any
//! language through a child process's stdin and stdout.
//!
//! Each input line is one request, `{"id": <any>, "method": "...",
//! "params": {...}}`; each is answered by one line, `{"id", "result"}` or
//! `{"id", "error": {"code", "message", "field"?}}` (the HTTP API's codes).
//! Events of subscribed runs arrive as `{"event": {...}, "runId": "..."}`
//! lines, interleaved; `{"ended": true, "runId"}` follows a run's last
//! event.
//!
//! | method | params | result |
//! |---|---|---|
//! | `health` | | as `GET /health` |
//! | `tools` | | as `GET /v1/tools` |
//! | `create` | as `POST /v1/runs`, plus `subscribe: bool` | the run |
//! | `list` | | `{"runs": [...]}` |
//! | `get` | `{runId}` | the run |
//! | `cancel` | `{runId, reason?}` | the run |
//! | `pause` / `resume` | `{runId}` | the run |
//! | `message` | `{runId, text}` | `{delivery}` |
//! | `add_task` | `{runId, instruction}` | `{id, task, queued}`, as `POST /v1/runs/{id}/tasks` |
//! | `handoff_done` | `{runId, note?, handoff?}` | the run, as `POST /v1/runs/{id}/handoff/done` (the live view itself needs `lumen serve`) |
//! | `subscribe` | `{runId, after?}` | `{"subscribed": runId}` |
//! | `trace` | `{runId}` | as `GET /v1/runs/{id}/trace` |
//! | `shutdown` | | `{}`, then runs are interrupted and the process ends |
//!
//! At end of input the service shuts down like `shutdown` does: active runs
//! are cancelled with reason `server_shutdown` and persisted as
//! `interrupted`. A line longer than `ServeOptions::max_body_bytes` is
//! read to its end without being kept and answered with an error, as the
//! HTTP API answers a body over the limit.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite,
    AsyncWriteExt as _, BufReader,
};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::runs::RunManager;
use crate::{ServeError, ServeOptions};

/// Runs the JSON-lines protocol on `input`/`output` until end of input or a
/// `shutdown` request, then shuts down gracefully.
pub async fn ipc<R, W>(options: ServeOptions, input: R, output: W) -> Result<(), ServeError>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max_line = options.max_body_bytes;
    let runs = RunManager::new(options).await?;
    let (tx, mut rx) = mpsc::channel::<Value>(256);
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(v) = rx.recv().await {
            let mut line = v.to_string();
            line.push('\n');
            if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let mut input = BufReader::new(input);
    let mut buf = Vec::new();
    while let Some(read) = next_line(&mut input, max_line, &mut buf).await? {
        let (id, reply) = match read {
            Line::TooLong => (
                Value::Null,
                Some(Err(ApiError::invalid_json(format!(
                    "a request line is longer than {max_line} bytes"
                )))),
            ),
            Line::Read if buf.trim_ascii().is_empty() => continue,
            Line::Read => request(&runs, &tx, &buf).await,
        };
        let Some(reply) = reply else { break };
        let line = match reply {
            Ok(result) => json!({"id": id, "result": result}),
            Err(e) => json!({"id": id, "error": e}),
        };
        if tx.send(line).await.is_err() {
            break;
        }
    }
    runs.shutdown().await;
    drop(tx);
    let _ = writer.await;
    Ok(())
}

/// What [`next_line`] read.
enum Line {
    /// A line, in the buffer (without its newline).
    Read,
    /// A line over the limit, read to its end and dropped.
    TooLong,
}

/// Reads the next line of `input` into `buf`, keeping at most `max` bytes
/// of it; `None` at end of input.
async fn next_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    max: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Line>> {
    buf.clear();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    if (&mut *input).take(limit).read_until(b'\n', buf).await? == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(Line::Read));
    }
    if buf.len() <= max {
        // The last line, without a newline.
        return Ok(Some(Line::Read));
    }
    // Over the limit: the rest of the line is read in pieces and dropped.
    loop {
        buf.clear();
        let n = (&mut *input).take(64 * 1024).read_until(b'\n', buf).await?;
        if n == 0 || buf.last() == Some(&b'\n') {
            buf.clear();
            return Ok(Some(Line::TooLong));
        }
    }
}

/// Answers one request line: its id and its reply, or `None` for the reply
/// to `shutdown` (sent here; the service then ends).
async fn request(
    runs: &Arc<RunManager>,
    tx: &mpsc::Sender<Value>,
    line: &[u8],
) -> (Value, Option<Result<Value, ApiError>>) {
    match serde_json::from_slice::<Value>(line) {
        Ok(req) => {
            let id = req.get("id").cloned().unwrap_or(Value::Null);
            let method = req.get("method").and_then(Value::as_str).unwrap_or("");
            if method == "shutdown" {
                let _ = tx.send(json!({"id": id, "result": {}})).await;
                return (id, None);
            }
            let params = req.get("params").cloned().unwrap_or_else(|| json!({}));
            (id, Some(handle(runs, tx, method, &params).await))
        }
        Err(e) => (
            Value::Null,
            Some(Err(ApiError::invalid_json(format!(
                "not a JSON request: {e}"
            )))),
        ),
    }
}

fn run_id(params: &Value) -> Result<String, ApiError> {
    params
        .get("runId")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ApiError::missing_field("runId"))
}

/// `params` without `runId`, as a body for the control operations.
fn body_without_id(params: &Value) -> Vec<u8> {
    let mut m: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
    m.remove("runId");
    serde_json::to_vec(&m).unwrap_or_default()
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(e.to_string()))
}

async fn subscribe(
    runs: &Arc<RunManager>,
    tx: &mpsc::Sender<Value>,
    id: &str,
    after: Option<u64>,
) -> Result<(), ApiError> {
    let entry = runs.entry(id).await?;
    let mut rx = crate::http::follow(runs, entry, after);
    let tx = tx.clone();
    let id = id.to_string();
    tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if tx.send(json!({"event": e, "runId": id})).await.is_err() {
                return;
            }
        }
        let _ = tx.send(json!({"ended": true, "runId": id})).await;
    });
    Ok(())
}

async fn handle(
    runs: &Arc<RunManager>,
    tx: &mpsc::Sender<Value>,
    method: &str,
    params: &Value,
) -> Result<Value, ApiError> {
    match method {
        "health" => Ok(runs.health()),
        "tools" => Ok(crate::tools::document()),
        "create" => {
            let mut body = params.clone();
            let follow = body
                .as_object_mut()
                .and_then(|m| m.remove("subscribe"))
                .is_some_and(|v| v == Value::Bool(true));
            let info = runs.create(&body).await?;
            if follow {
                subscribe(runs, tx, &info.id, None).await?;
            }
            to_value(info)
        }
        "list" => Ok(json!({"runs": runs.list().await?})),
        "get" => to_value(runs.entry(&run_id(params)?).await?.info()),
        "cancel" => to_value(
            runs.cancel(&run_id(params)?, &body_without_id(params))
                .await?,
        ),
        "pause" => to_value(runs.pause(&run_id(params)?).await?),
        "resume" => to_value(runs.resume(&run_id(params)?).await?),
        "message" => {
            runs.message(&run_id(params)?, &body_without_id(params))
                .await
        }
        "handoff_done" => to_value(
            runs.handoff_done(&run_id(params)?, &body_without_id(params))
                .await?,
        ),
        "add_task" => {
            runs.add_task(&run_id(params)?, &body_without_id(params))
                .await
        }
        "subscribe" => {
            let id = run_id(params)?;
            let after = params.get("after").and_then(Value::as_u64);
            subscribe(runs, tx, &id, after).await?;
            Ok(json!({"subscribed": id}))
        }
        "trace" => {
            let entry = runs.entry(&run_id(params)?).await?;
            let log = runs.events(entry.id()).await?;
            Ok(crate::http::trace(&entry, &log))
        }
        other => Err(ApiError::invalid_field(
            "method",
            format!("unknown method {other:?}"),
        )),
    }
}

/// `lumen ipc`: [`ipc`] on this process's stdin and stdout. Nothing else may
/// write to stdout meanwhile (logs go to stderr).
pub async fn ipc_stdio(options: ServeOptions) -> Result<(), ServeError> {
    ipc(options, tokio::io::stdin(), tokio::io::stdout()).await
}

//! A stand-in for the Browserbase API (tests only).

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A stand-in for api.browserbase.com on 127.0.0.1: answers session creation
/// with the real response shape, pointing `connectUrl` at a local Chromium,
/// and records what it was sent (`"<request line>\n<body>"` each). Only
/// the key `bb_live_test` is accepted. Returns the API base URL.
///
/// # Errors
/// When no port can be bound on 127.0.0.1.
pub async fn browserbase_stub(
    connect_url: String,
) -> std::io::Result<(String, tokio::sync::mpsc::UnboundedReceiver<String>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            let connect_url = connect_url.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read headers, then the body by Content-Length.
                let (head, body_start) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break (String::from_utf8_lossy(&buf[..i]).into_owned(), i + 4);
                    }
                };
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < body_start + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = String::from_utf8_lossy(&buf[body_start..]).into_owned();
                let request_line = head.lines().next().unwrap_or_default().to_owned();
                let key_ok = head
                    .lines()
                    .any(|l| l.eq_ignore_ascii_case("x-bb-api-key: bb_live_test"));
                let _ = tx.send(format!("{request_line}\n{body}"));
                let (status, reply) = if !key_ok {
                    (
                        "401 Unauthorized",
                        r#"{"statusCode":401,"error":"Unauthorized","message":"Invalid API key"}"#
                            .to_owned(),
                    )
                } else if request_line.starts_with("POST /v1/sessions ") {
                    (
                        "201 Created",
                        serde_json::json!({
                            "id": "sess_0123456789",
                            "createdAt": "2026-01-01T00:00:00.000Z",
                            "updatedAt": "2026-01-01T00:00:00.000Z",
                            "projectId": "proj_test",
                            "startedAt": "2026-01-01T00:00:00.000Z",
                            "endedAt": null,
                            "expiresAt": "2026-01-01T06:00:00.000Z",
                            "status": "RUNNING",
                            "proxyBytes": 0,
                            "keepAlive": false,
                            "region": "us-west-2",
                            "contextId": null,
                            "connectUrl": connect_url,
                            "seleniumRemoteUrl": "http://connect.browserbase.com/webdriver",
                            "signingKey": "signing-key",
                        })
                        .to_string(),
                    )
                } else {
                    (
                        "200 OK",
                        serde_json::json!({"id": "sess_0123456789", "status": "COMPLETED"})
                            .to_string(),
                    )
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    Ok((format!("http://{addr}"), rx))
}

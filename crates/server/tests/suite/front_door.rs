//! The front door on the real server: a page on another origin, in the
//! agent's own Chromium, cannot start a run; foreign Host and Origin
//! headers are refused on plain routes, SSE and the WebSocket upgrade;
//! bodies must be JSON and small; the token is always required, generated
//! when none is given; slow and idle connections are closed and their
//! number capped.

use std::net::SocketAddr;
use std::time::Duration;

use lumen_server::Server;
use lumen_test_support::FixtureServer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{Client, Env, TOKEN, ws_request};

/// Sends `request` as is on a fresh connection and returns the status and
/// the JSON body of the answer.
async fn raw(addr: SocketAddr, request: &str) -> (u16, Value) {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), sock.read_to_end(&mut answer))
        .await
        .expect("the server did not answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer}"));
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn get(path: &str, host: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n{extra}Connection: close\r\n\r\n"
    )
}

/// The page an attacker controls, on another origin than the server: it
/// tries to start a run every way a page can without the server's
/// cooperation, then reports what happened to its own origin.
fn attack_page(server: SocketAddr) -> String {
    let base = format!("http://127.0.0.1:{}", server.port());
    format!(
        r#"<!doctype html><html><head><title>Cheap flights</title></head><body>
<h1>Cheap flights</h1>
<iframe name="sink" style="display:none"></iframe>
<form id="csrf" method="POST" action="{base}/v1/runs" enctype="text/plain" target="sink">
<input type="hidden" name='{{"instruction":"csrf form","x":"' value='"}}'>
</form>
<script>
(async () => {{
  const base = "{base}";
  const body = JSON.stringify({{instruction: "exfiltrate the user's mail", maxSteps: 1}});
  const tries = [
    ["plain", {{method: "POST", mode: "no-cors", body}}],
    ["text", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}}],
    ["json", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "application/json"}}, body}}],
    ["bearer", {{method: "POST", mode: "no-cors", headers: {{"Authorization": "Bearer {TOKEN}"}}, body}}],
    ["cors", {{method: "POST", mode: "cors", headers: {{"Content-Type": "application/json", "Authorization": "Bearer {TOKEN}"}}, body}}],
  ];
  const log = {{}};
  for (const [name, init] of tries) {{
    try {{ await fetch(base + "/v1/runs", init); log[name] = "answered"; }}
    catch (e) {{ log[name] = "refused"; }}
  }}
  await new Promise((done) => {{
    const sink = document.querySelector("iframe");
    sink.addEventListener("load", () => done(), {{once: true}});
    setTimeout(done, 5000);
    document.getElementById("csrf").submit();
  }});
  log.form = "submitted";
  await fetch("/attack-done?" + new URLSearchParams(log).toString());
}})();
</script></body></html>"#
    )
}

#[tokio::test]
async fn a_page_on_another_origin_in_the_agents_own_chromium_cannot_start_a_run() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let pages = tempfile::tempdir().unwrap();
    std::fs::write(
        pages.path().join("attack.html"),
        attack_page(server.local_addr()),
    )
    .unwrap();
    let evil = FixtureServer::start_at(pages.path()).await.unwrap();
    assert_ne!(evil.port(), server.local_addr().port());

    // The agent visits the page and stays on it (the model never answers).
    env.stall();
    let own = c
        .create(json!({"instruction": "Find a cheap flight", "startUrl": evil.url("attack.html"), "maxSteps": 3}))
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let report = loop {
        let done = evil
            .requests()
            .into_iter()
            .find(|r| r.path == "/attack-done");
        if let Some(r) = done {
            break r.query.unwrap_or_default();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the page never finished its attempts: {:?}",
            evil.requests()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let report: Value = report
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into();
    // The run's browser refuses every request to the server's own port
    // before it is sent (the operator policy at the network layer), so
    // not one attempt reaches the server; the front door would refuse
    // them too (the other tests here send them straight to it).
    for name in ["plain", "text", "json", "bearer", "cors"] {
        assert_eq!(report[name], "refused", "{name}: {report}");
    }
    assert_eq!(report["form"], "submitted", "{report}");

    let (status, list) = c.get("/v1/runs").await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, vec![own.as_str()], "only the agent's own run: {list}");
    server.shutdown().await;
}

#[tokio::test]
async fn foreign_host_and_origin_headers_are_refused_on_every_route() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let addr = server.local_addr();
    let port = addr.port();
    let c = Client::new(addr);
    let id = c
        .create(json!({"instruction": "Wait", "startUrl": env.counter(), "maxSteps": 1}))
        .await;
    c.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    c.wait(&id, "an end", |r| r["status"] == "cancelled").await;
    let events = format!("/v1/runs/{id}/events");

    // The server's own names are accepted, with or without the port.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "localhost".to_string(),
    ] {
        assert_eq!(
            raw(addr, &get("/v1/runs", &host, "")).await.0,
            200,
            "{host}"
        );
    }
    assert_eq!(
        raw(addr, &get(&events, &format!("localhost:{port}"), ""))
            .await
            .0,
        200
    );
    let own = format!("Origin: http://localhost:{port}\r\n");
    assert_eq!(raw(addr, &get("/v1/runs", "localhost", &own)).await.0, 200);

    // A rebound DNS name, another port, or no Host at all: 421.
    for host in [
        format!("attacker.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "127.0.0.1.nip.io".to_string(),
    ] {
        for path in ["/v1/runs", "/health", events.as_str(), "/v1/stream"] {
            let (status, err) = raw(addr, &get(path, &host, "")).await;
            assert_eq!(
                (status, err["error"]["code"].as_str()),
                (421, Some("misdirected_host")),
                "{host} {path}"
            );
            assert!(
                err["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("127.0.0.1:{port}")),
                "{err}"
            );
        }
    }
    let (status, _) = raw(
        addr,
        "GET /v1/runs HTTP/1.0\r\nAuthorization: Bearer x\r\n\r\n",
    )
    .await;
    assert_eq!(status, 421, "no Host");

    // A foreign Origin: 403 on plain routes, SSE, the WebSocket upgrade
    // and /health, even with the token.
    for origin in [
        "http://attacker.example".to_string(),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        "null".to_string(),
        format!("http://attacker.example:{port}"),
    ] {
        let header = format!("Origin: {origin}\r\n");
        for path in ["/v1/runs", "/health", events.as_str(), "/openapi.json"] {
            let (status, err) = raw(addr, &get(path, &format!("127.0.0.1:{port}"), &header)).await;
            assert_eq!(
                (status, err["error"]["code"].as_str()),
                (403, Some("forbidden_origin")),
                "{origin} {path}"
            );
        }
        let r = c
            .http
            .post(format!("{}/v1/runs", c.base))
            .bearer_auth(TOKEN)
            .header("origin", &origin)
            .json(&json!({"instruction": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{origin}");
        let ws = tokio_tungstenite::connect_async(ws_request(
            addr,
            &[
                ("authorization", format!("Bearer {TOKEN}")),
                ("origin", origin.clone()),
            ],
        ))
        .await;
        match ws {
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
                assert_eq!(r.status().as_u16(), 403, "{origin}")
            }
            other => panic!("a WebSocket from {origin} was not refused: {other:?}"),
        }
    }

    // The WebSocket with a foreign Host, then with everything right.
    let ws = tokio_tungstenite::connect_async(ws_request(
        addr,
        &[
            ("authorization", format!("Bearer {TOKEN}")),
            ("host", format!("attacker.example:{port}")),
        ],
    ))
    .await;
    match ws {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status().as_u16(), 421)
        }
        other => panic!("a WebSocket to a foreign Host was not refused: {other:?}"),
    }
    let ws = tokio_tungstenite::connect_async(ws_request(
        addr,
        &[
            ("authorization", format!("Bearer {TOKEN}")),
            ("origin", format!("http://127.0.0.1:{port}")),
        ],
    ))
    .await;
    assert!(ws.is_ok(), "the server's own origin: {ws:?}");
    drop(ws);
    let ws = tokio_tungstenite::connect_async(ws_request(addr, &[])).await;
    match ws {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status().as_u16(), 401)
        }
        other => panic!("a WebSocket without the token was accepted: {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn bodies_must_be_json_and_small_and_the_token_is_checked() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let mut c = Client::new(server.local_addr());
    let url = format!("{}/v1/runs", c.base);
    let body = json!({"instruction": "x", "startUrl": env.counter(), "maxSteps": 1}).to_string();

    // Not declared JSON: 415, whatever the body.
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonx"),
        None,
    ] {
        let mut r = c.http.post(&url).bearer_auth(TOKEN).body(body.clone());
        if let Some(ct) = content_type {
            r = r.header("content-type", ct);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let err: Value = r.json().await.unwrap();
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (415, Some("unsupported_media_type")),
            "{content_type:?}"
        );
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains("application/json"),
            "{err}"
        );
    }
    // Bodiless control requests need it too.
    let r = c
        .http
        .post(format!("{}/v1/runs/run_x/pause", c.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);

    // Too large: 413, declared or streamed (chunked).
    let huge = format!("{{\"instruction\": \"{}\"}}", "a".repeat(1024 * 1024 + 1));
    let (status, err) = c.post_raw("/v1/runs", huge.clone()).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (413, Some("body_too_large"))
    );
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = huge
        .into_bytes()
        .chunks(64 * 1024)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let r = c
        .http
        .post(&url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);

    // The token: missing or wrong is 401; the scheme in any case works.
    for token in [None, Some("wrong"), Some("test-token-012345678")] {
        c.token = token.map(str::to_string);
        let (status, err) = c.get("/v1/runs").await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (401, Some("unauthorized")),
            "{token:?}"
        );
        assert_eq!(c.post("/v1/runs", json!({"instruction": "x"})).await.0, 401);
    }
    let (status, health) = c.get("/health").await;
    assert_eq!(status, 200);
    assert_eq!(
        health,
        json!({"status": "ok"}),
        "health tells a stranger nothing"
    );
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = c
            .http
            .get(&url)
            .header("authorization", format!("{scheme} {TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{scheme}");
    }
    let r = c
        .http
        .post(&url)
        .header("authorization", format!("bearer {TOKEN}"))
        .header("content-type", "Application/JSON; charset=utf-8")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    c.token = Some(TOKEN.into());
    let (_, health) = c.get("/health").await;
    assert!(health["version"].is_string(), "{health}");
    server.shutdown().await;
}

#[tokio::test]
async fn without_a_token_the_server_generates_one_in_a_private_file() {
    let env = Env::new().await;
    let mut options = env.options();
    options.token = None;
    let server = Server::start(options.clone()).await.unwrap();
    let file = server.token_file().expect("a token file").to_path_buf();
    assert_eq!(file, env.data.path().join("token"));
    let saved = std::fs::read_to_string(&file).unwrap();
    let token = saved.trim();
    assert_eq!(token, server.token());
    assert_eq!(token.len(), 64);
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let mut c = Client::new(server.local_addr());
    c.token = None;
    assert_eq!(c.get("/v1/runs").await.0, 401);
    c.token = Some(token.to_string());
    assert_eq!(c.get("/v1/runs").await.0, 200);
    let first = token.to_string();
    server.shutdown().await;

    // A new start, a new token; a given token removes the stale file.
    let server = Server::start(options.clone()).await.unwrap();
    assert_ne!(server.token(), first);
    server.shutdown().await;
    options.token = Some(TOKEN.into());
    let server = Server::start(options).await.unwrap();
    assert!(server.token_file().is_none());
    assert!(!file.exists(), "a stale token file is removed");
    server.shutdown().await;
}

#[tokio::test]
async fn slow_and_idle_connections_are_closed_and_their_number_capped() {
    let env = Env::new().await;
    let mut options = env.options();
    options.header_read_timeout = Duration::from_millis(300);
    options.idle_timeout = Duration::from_secs(60);
    let server = Server::start(options).await.unwrap();
    let addr = server.local_addr();
    // Half a request line, then nothing: closed by the header timeout.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buf))
        .await
        .expect("a slow header was not cut off")
        .ok();
    server.shutdown().await;

    let mut options = env.options();
    options.idle_timeout = Duration::from_millis(300);
    options.max_connections = 1;
    let server = Server::start(options).await.unwrap();
    let addr = server.local_addr();
    let c = Client::new(addr);
    // One silent connection holds the only slot: another client waits...
    let mut quiet = tokio::net::TcpStream::connect(addr).await.unwrap();
    let waiting = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let status = c.get("/v1/runs").await.0;
        (status, started.elapsed())
    });
    // ...until the idle timeout closes the silent one.
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), quiet.read_to_end(&mut buf))
        .await
        .expect("an idle connection was not closed")
        .ok();
    let (status, waited) = waiting.await.unwrap();
    assert_eq!(status, 200);
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    server.shutdown().await;
}

/// A client the front door turns away keeps no connection: asked to keep
/// it alive, it is closed after the refusal all the same (so clients
/// without the token cannot hold every connection slot), while an
/// authorized keep-alive connection stays open.
#[tokio::test]
async fn a_refused_request_ends_its_connection() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let addr = server.local_addr();
    let host = format!("127.0.0.1:{}", addr.port());
    for request in [
        // No token.
        format!("GET /v1/runs HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n\r\n"),
        // A foreign Host (DNS rebinding).
        format!(
            "GET /v1/runs HTTP/1.1\r\nHost: attacker.example:{}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: keep-alive\r\n\r\n",
            addr.port()
        ),
    ] {
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut answer))
            .await
            .expect("the refused connection was kept open")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 401") || answer.starts_with("HTTP/1.1 421"),
            "{answer}"
        );
    }
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let ok = format!(
        "GET /health HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: keep-alive\r\n\r\n"
    );
    sock.write_all(ok.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = sock.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let mut more = [0u8; 1];
    assert!(
        tokio::time::timeout(Duration::from_millis(500), sock.read(&mut more))
            .await
            .is_err(),
        "an authorized keep-alive connection stays open"
    );
    server.shutdown().await;
}

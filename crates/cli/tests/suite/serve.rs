//! `lumen serve`, `ipc` and `mcp` are wired to lumen-server: the binary
//! serves HTTP on the port it is given and refuses to expose itself without
//! a token. (The server's own suite covers the API in depth.)

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn lumen() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lumen"));
    cmd.env_remove(lumen_server::TOKEN_ENV).kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn serving_off_loopback_without_a_token_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = lumen()
        .args(["serve", "--host", "0.0.0.0", "--port", "0", "--data-dir"])
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.to_lowercase().contains("token"), "{stderr}");
}

#[tokio::test]
async fn serve_answers_health_on_the_given_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let mut child = lumen()
        .args(["serve", "--port", &port.to_string(), "--data-dir"])
        .arg(dir.path())
        .spawn()
        .unwrap();
    let mut answer = String::new();
    for _ in 0..200 {
        if let Ok(mut sock) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            sock.write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            sock.read_to_string(&mut answer).await.unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"status\""), "{answer}");
}

#[tokio::test]
async fn a_browser_endpoint_that_cannot_work_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            &["--browser-endpoint", "127.0.0.1:9222"][..],
            "http://host:port",
        ),
        (
            &[
                "--browser-endpoint",
                "http://127.0.0.1:9222",
                "--endpoint-sessions",
                "0",
            ][..],
            "at least one",
        ),
        (&["--endpoint-sessions", "2"][..], "--browser-endpoint"),
        (&["--browserbase-sessions", "2"][..], "BROWSERBASE_API_KEY"),
    ] {
        let out = lumen()
            .env_remove("BROWSERBASE_API_KEY")
            .env_remove("BROWSERBASE_PROJECT_ID")
            .args(["serve", "--port", "0", "--data-dir"])
            .arg(dir.path())
            .args(args)
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

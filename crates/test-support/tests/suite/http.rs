//! A minimal HTTP/1.1 client over a plain `TcpStream`.
//!
//! Hand-written rather than `reqwest` because the traversal tests must send
//! request targets such as `/../x` byte for byte; URL parsers normalize those
//! away before they reach the wire.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

/// A parsed response.
#[derive(Debug)]
pub(crate) struct HttpResponse {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl HttpResponse {
    /// The first header called `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `GET target` sent to `addr`, with `Host: host`.
pub(crate) async fn get(
    addr: impl ToSocketAddrs,
    host: &str,
    target: &str,
) -> io::Result<HttpResponse> {
    request(addr, "GET", host, target).await
}

/// Sends one request with `Connection: close` and reads the whole answer.
pub(crate) async fn request(
    addr: impl ToSocketAddrs,
    method: &str,
    host: &str,
    target: &str,
) -> io::Result<HttpResponse> {
    let mut stream = TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    parse(&raw)
}

fn parse(raw: &[u8]) -> io::Result<HttpResponse> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| invalid("head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or_else(|| invalid("no status line"))?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if let Some(length) = headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse::<usize>().ok())
    {
        body.truncate(length);
    }
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

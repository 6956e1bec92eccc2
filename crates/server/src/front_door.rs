//! The HTTP front door: which `Host` and `Origin` headers name this server,
//! the bearer token, and the generated token's file. The middleware that
//! applies it is in [`crate::http`]; `docs/security.md` says what each
//! check protects.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::{HeaderMap, header};

use crate::error::ApiError;

/// The name of the generated token's file in the data directory.
pub(crate) const TOKEN_FILE: &str = "token";

/// What a request must show to get in.
#[derive(Debug, Clone)]
pub(crate) struct FrontDoor {
    /// The bound port.
    port: u16,
    /// Host names (lower case, IPv6 in brackets) that name the bound
    /// address.
    names: Vec<String>,
    /// Bound to an unspecified address (`0.0.0.0`, `::`): any IP literal
    /// names it (a DNS name does not, unless allowed).
    any_ip: bool,
    /// The operator's extra names: `(name, port)`, any port when `None`.
    extra: Vec<(String, Option<u16>)>,
    /// The bearer token.
    token: Arc<str>,
    /// The largest body accepted.
    pub(crate) max_body: usize,
}

impl FrontDoor {
    pub(crate) fn new(
        addr: SocketAddr,
        allowed_hosts: &[String],
        token: Arc<str>,
        max_body: usize,
    ) -> Self {
        let ip = addr.ip();
        let names = if ip.is_loopback() {
            vec!["127.0.0.1".into(), "localhost".into(), "[::1]".into()]
        } else if ip.is_unspecified() {
            vec!["localhost".into()]
        } else {
            vec![ip_name(ip)]
        };
        let extra = allowed_hosts
            .iter()
            .filter_map(|h| split_authority(&h.trim().to_ascii_lowercase()))
            .collect();
        Self {
            port: addr.port(),
            names,
            any_ip: ip.is_unspecified(),
            extra,
            token,
            max_body,
        }
    }

    /// The bearer token.
    #[cfg(test)]
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    fn name_is_ours(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name) || (self.any_ip && parse_ip(name).is_some())
    }

    fn extra_allows(&self, name: &str, port: Option<u16>) -> bool {
        self.extra
            .iter()
            .any(|(n, p)| n == name && (p.is_none() || *p == port))
    }

    /// Whether `Host: <value>` names this server: one of its names with its
    /// port (or no port), or a name the operator allowed.
    pub(crate) fn host_allowed(&self, value: &str) -> bool {
        let Some((name, port)) = split_authority(&value.trim().to_ascii_lowercase()) else {
            return false;
        };
        self.extra_allows(&name, port)
            || (self.name_is_ours(&name) && port.is_none_or(|p| p == self.port))
    }

    /// Whether `Origin: <value>` is this server itself: `http(s)://` one of
    /// its names with exactly its port, or a name the operator allowed.
    /// `null` (sandboxed frames, `file:` pages) is foreign. Bound to every
    /// address, an IP literal is ours only as the request's own `host`
    /// (the page was loaded from it): another IP with our port number is
    /// another machine's page.
    pub(crate) fn origin_allowed(&self, value: &str, host: Option<&str>) -> bool {
        let value = value.trim().to_ascii_lowercase();
        let (rest, default_port) = if let Some(r) = value.strip_prefix("http://") {
            (r, 80)
        } else if let Some(r) = value.strip_prefix("https://") {
            (r, 443)
        } else {
            return false;
        };
        let Some((name, port)) = split_authority(rest) else {
            return false;
        };
        let port = port.unwrap_or(default_port);
        if self.extra_allows(&name, Some(port)) {
            return true;
        }
        if port != self.port {
            return false;
        }
        if self.names.contains(&name) {
            return true;
        }
        self.any_ip
            && parse_ip(&name).is_some()
            && host
                .and_then(|h| split_authority(&h.trim().to_ascii_lowercase()))
                .is_some_and(|(h, _)| h == name)
    }

    /// What the `Host` header may be, for error messages.
    pub(crate) fn allowed_hosts_text(&self) -> String {
        let mut out: Vec<String> = self
            .names
            .iter()
            .map(|n| format!("`{n}:{}`", self.port))
            .collect();
        if self.any_ip {
            out.push(format!(
                "any IP address of this machine with port {}",
                self.port
            ));
        }
        for (n, p) in &self.extra {
            out.push(match p {
                Some(p) => format!("`{n}:{p}`"),
                None => format!("`{n}`"),
            });
        }
        out.join(", ")
    }

    /// Checks the `Host` header (required: HTTP/1.1 always sends it).
    pub(crate) fn check_host(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = headers.get(header::HOST).map(|v| v.to_str().unwrap_or("?"));
        match host {
            Some(h) if self.host_allowed(h) => Ok(()),
            other => Err(ApiError::misdirected_host(
                other.unwrap_or("(none)"),
                &self.allowed_hosts_text(),
            )),
        }
    }

    /// Checks the `Origin` header: absent, or this server's own.
    pub(crate) fn check_origin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let mut values = headers.get_all(header::ORIGIN).iter().peekable();
        if values.peek().is_none() {
            return Ok(());
        }
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        for v in values {
            let text = v.to_str().unwrap_or("?");
            if !self.origin_allowed(text, host) {
                return Err(ApiError::forbidden_origin(text));
            }
        }
        Ok(())
    }

    /// Whether the request carries `Authorization: Bearer <token>` (the
    /// scheme in any case), compared in constant time.
    pub(crate) fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let value = value.trim();
        let Some((scheme, given)) = value.split_once(|c: char| c.is_ascii_whitespace()) else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer")
            && constant_time_eq(given.trim().as_bytes(), self.token.as_bytes())
    }
}

/// An IP address as it appears in a `Host` header.
fn ip_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        },
    }
}

/// An IP literal (`1.2.3.4` or `[::1]`).
fn parse_ip(name: &str) -> Option<IpAddr> {
    if let Some(inner) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    name.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// `name[:port]` (IPv6 in brackets) → `(name, port)`; `None` when it is
/// not an authority (a path, user info, a bad port, an empty name).
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    if authority.is_empty()
        || authority
            .chars()
            .any(|c| matches!(c, '/' | '@' | '?' | '#' | ' ' | '\\'))
    {
        return None;
    }
    let (name, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (name, rest) = authority.split_at(end + 1);
        match rest {
            "" => (name, None),
            r => (name, Some(r.strip_prefix(':')?)),
        }
    } else {
        match authority.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (authority, None),
        }
    };
    if name.is_empty() || name == "[]" {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name.to_string(), port))
}

/// Compares two byte strings in time that depends only on their lengths.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

/// A fresh token: 32 random bytes from the operating system, in hex.
pub(crate) fn generate_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| std::io::Error::other(format!("no randomness for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes the generated token to `<data_dir>/token`, readable by its owner
/// only (a temporary file created 0600, synced, then renamed over any old
/// one).
pub(crate) fn write_token_file(data_dir: &Path, token: &str) -> std::io::Result<PathBuf> {
    use std::io::Write as _;
    let path = data_dir.join(TOKEN_FILE);
    let tmp = data_dir.join(format!(".{TOKEN_FILE}.{}.tmp", std::process::id()));
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        open.mode(0o600);
    }
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut file = open.open(&tmp)?;
        file.write_all(token.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map(|()| path)
}

/// Removes a token file left by an earlier start that generated one, so no
/// client reads a stale token when the operator gives one.
pub(crate) fn remove_token_file(data_dir: &Path) {
    let _ = std::fs::remove_file(data_dir.join(TOKEN_FILE));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn door(addr: &str, extra: &[&str]) -> FrontDoor {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        FrontDoor::new(addr.parse().unwrap(), &extra, Arc::from("tok"), 1024)
    }

    #[test]
    fn token_comparison_is_exact() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn a_loopback_server_answers_to_loopback_names_on_its_port() {
        let d = door("127.0.0.1:3001", &[]);
        for ok in [
            "127.0.0.1:3001",
            "localhost:3001",
            "LOCALHOST:3001",
            "[::1]:3001",
            "localhost",
        ] {
            assert!(d.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example:3001",
            "127.0.0.1:3002",
            "localhost.:3001",
            "127.0.0.2:3001",
            "user@localhost:3001",
            "localhost:3001/x",
            "",
            ":3001",
            "[::1",
            "localhost:99999",
        ] {
            assert!(!d.host_allowed(bad), "{bad}");
        }
        assert!(d.origin_allowed("http://localhost:3001", None));
        assert!(d.origin_allowed("http://[::1]:3001", None));
        for bad in [
            "null",
            "http://localhost",
            "http://localhost:3002",
            "http://evil.example:3001",
            "file://",
            "chrome-extension://abc",
            "https://localhost",
        ] {
            assert!(!d.origin_allowed(bad, None), "{bad}");
        }
    }

    #[test]
    fn other_bound_addresses_and_allowed_names() {
        let d = door("10.0.0.5:80", &["api.example.com", "proxy.example:8443"]);
        assert!(d.host_allowed("10.0.0.5"));
        assert!(d.host_allowed("10.0.0.5:80"));
        assert!(!d.host_allowed("localhost:80"));
        assert!(d.host_allowed("api.example.com:9999"));
        assert!(d.host_allowed("proxy.example:8443"));
        assert!(!d.host_allowed("proxy.example:8444"));
        assert!(d.origin_allowed("http://10.0.0.5", None));
        assert!(d.origin_allowed("https://proxy.example:8443", None));
        assert!(!d.origin_allowed("https://proxy.example", None));
        let any = door("0.0.0.0:3001", &[]);
        assert!(any.host_allowed("192.168.1.9:3001"));
        assert!(any.host_allowed("[fe80::1]:3001"));
        assert!(!any.host_allowed("rebound.example:3001"));
        assert!(!any.origin_allowed("http://rebound.example:3001", None));
        // Bound to every address: our port on another IP is another
        // machine's page, unless it is the address this request came to.
        let to = Some("192.168.1.9:3001");
        assert!(any.origin_allowed("http://192.168.1.9:3001", to));
        assert!(!any.origin_allowed("http://203.0.113.5:3001", to));
        assert!(!any.origin_allowed("http://203.0.113.5:3001", None));
        assert!(any.origin_allowed("http://localhost:3001", to));
        let v6 = door("[::1]:4000", &[]);
        assert!(v6.host_allowed("[::1]:4000"));
        assert!(v6.host_allowed("127.0.0.1:4000"));
    }

    #[test]
    fn bearer_is_matched_in_any_case() {
        let d = door("127.0.0.1:1", &[]);
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            d.authorized(&h)
        };
        assert!(with("Bearer tok"));
        assert!(with("bearer tok"));
        assert!(with("BEARER  tok "));
        assert!(!with("Basic tok"));
        assert!(!with("Bearer tok2"));
        assert!(!with("Bearertok"));
        assert!(!with("tok"));
        assert!(!d.authorized(&HeaderMap::new()));
        assert_eq!(d.token(), "tok");
    }

    #[test]
    fn tokens_are_random_hex_and_their_file_is_private() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let dir = tempfile::tempdir().unwrap();
        let path = write_token_file(dir.path(), &a).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), a);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        remove_token_file(dir.path());
        assert!(!path.exists());
    }
}

//! Domain patterns (`example.com`, `*.example.com`) and reading hosts out of
//! URLs the way a browser does.

use std::fmt;

use url::{Host, Url};

/// A domain pattern of a [`SessionPolicy`](crate::SessionPolicy).
///
/// `example.com` and `*.example.com` both match `example.com` itself and
/// every subdomain (`www.example.com`, `a.b.example.com`), never
/// `badexample.com`. A bare domain covers its subdomains on purpose: a block
/// on `facebook.com` must not be escaped through `m.facebook.com`. To allow
/// only one subdomain, name it (`docs.example.com`). IP addresses match
/// exactly. Ports, paths and schemes are not part of a domain pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct DomainPattern {
    raw: String,
    host: Host<String>,
}

impl DomainPattern {
    /// Parses a pattern; the error says what is wrong with it.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let raw = pattern.trim();
        let body = raw.strip_prefix("*.").unwrap_or(raw);
        if body.is_empty() {
            return Err(format!("`{raw}` names no domain"));
        }
        if body.contains(['/', ':', '*', '@', '?', '#']) && !body.starts_with('[') {
            return Err(format!(
                "`{raw}` is not a domain pattern: write a host such as `example.com` or `*.example.com`, without scheme, port or path"
            ));
        }
        let host = Host::parse(body.trim_end_matches('.'))
            .map_err(|e| format!("`{raw}` is not a valid host: {e}"))?;
        if raw.starts_with("*.") && !matches!(host, Host::Domain(_)) {
            return Err(format!(
                "`{raw}`: a wildcard needs a domain name, not an address"
            ));
        }
        Ok(Self {
            raw: raw.to_owned(),
            host,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Whether every host `other` matches is matched by this pattern too
    /// (`example.com` covers `docs.example.com` and `*.example.com`).
    pub fn covers(&self, other: &DomainPattern) -> bool {
        self.matches(&other.host)
    }

    /// Whether `host` (as the URL parser returned it) falls under this
    /// pattern.
    pub fn matches(&self, host: &Host<String>) -> bool {
        match (&self.host, host) {
            (Host::Domain(p), Host::Domain(h)) => {
                let h = h.trim_end_matches('.');
                h == p
                    || (h.len() > p.len()
                        && h.ends_with(p.as_str())
                        && h.as_bytes()[h.len() - p.len() - 1] == b'.')
            }
            (p, h) => p == h,
        }
    }
}

impl fmt::Debug for DomainPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DomainPattern({})", self.raw)
    }
}

impl fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// Parses an absolute URL as the browser would.
pub(crate) fn parse_url(url: &str) -> Option<Url> {
    Url::parse(url.trim()).ok()
}

/// The host of a URL with any trailing dot removed and `www.` kept, for
/// display.
pub(crate) fn host_of(url: &Url) -> Option<Host<String>> {
    url.host().map(|h| match h {
        Host::Domain(d) => Host::Domain(d.trim_end_matches('.').to_owned()),
        Host::Ipv4(a) => Host::Ipv4(a),
        Host::Ipv6(a) => Host::Ipv6(a),
    })
}

/// Whether two hosts are the same site for the purpose of a goto check:
/// equal once a leading `www.` is ignored.
pub(crate) fn same_site(a: &Host<String>, b: &Host<String>) -> bool {
    match (a, b) {
        (Host::Domain(a), Host::Domain(b)) => {
            a.strip_prefix("www.").unwrap_or(a) == b.strip_prefix("www.").unwrap_or(b)
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(url: &str) -> Host<String> {
        host_of(&parse_url(url).unwrap()).unwrap()
    }

    #[test]
    fn domain_pattern_table() {
        // (pattern, url, matches)
        let table: &[(&str, &str, bool)] = &[
            ("example.com", "https://example.com/", true),
            ("example.com", "https://www.example.com/a", true),
            ("example.com", "https://a.b.example.com/", true),
            ("example.com", "https://badexample.com/", false),
            ("example.com", "https://example.com.evil.net/", false),
            ("example.com", "https://EXAMPLE.com./", true),
            ("*.example.com", "https://example.com/", true),
            ("*.example.com", "https://shop.example.com/", true),
            ("*.example.com", "https://example.org/", false),
            ("docs.example.com", "https://example.com/", false),
            ("docs.example.com", "https://docs.example.com/x", true),
            ("127.0.0.1", "http://127.0.0.1:8080/", true),
            ("127.0.0.1", "http://127.0.0.2/", false),
            ("[::1]", "http://[::1]:80/", true),
            ("bücher.de", "https://xn--bcher-kva.de/", true),
            // The userinfo trick: the host is what follows the `@`.
            ("example.com", "https://example.com@evil.net/", false),
            ("evil.net", "https://example.com@evil.net/", true),
            // Backslashes are slashes to a browser.
            ("evil.net", "https:\\\\evil.net\\path", true),
        ];
        for (pattern, url, expected) in table {
            let p = DomainPattern::parse(pattern).unwrap();
            assert_eq!(p.matches(&host(url)), *expected, "{pattern} vs {url}");
        }
    }

    #[test]
    fn bad_patterns_are_refused_with_a_reason() {
        for bad in [
            "",
            "*.",
            "https://example.com",
            "example.com/path",
            "ex ample.com",
            "*.10.0.0.1",
            "a:80",
        ] {
            let err = DomainPattern::parse(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
    }

    #[test]
    fn same_site_ignores_www_only() {
        assert!(same_site(
            &host("https://www.a.com"),
            &host("https://a.com")
        ));
        assert!(!same_site(
            &host("https://shop.a.com"),
            &host("https://a.com")
        ));
    }
}

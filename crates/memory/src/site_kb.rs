//! [`SiteKB`]: site tips injected into the prompt when the current URL
//! matches a known site.
//!
//! A rule's `domain` is a host, optionally with a path prefix:
//!
//! | pattern | matches | does not match |
//! |---|---|---|
//! | `booking.com`, `*.booking.com` | `booking.com`, `www.booking.com` | `notbooking.com` |
//! | `google.com/travel` | `www.google.com/travel/flights` | `www.google.com/maps`, `google.com/travelling` |
//!
//! Tips for a site apply to its subdomains; a path prefix matches whole
//! path segments. A scheme in front (`https://`) is ignored. The default
//! knowledge base ([`SiteKB::default_kb`]) covers the WebVoyager sites and is
//! shipped in the crate as JSON.

use std::path::Path;

use lumen_core::{LumenError, Result};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::fsutil;

const DEFAULT_KB: &str = include_str!("../data/default-site-kb.json");

/// Tips for one site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteRule {
    /// Host with optional path prefix: `*.booking.com`, `google.com/travel`.
    pub domain: String,
    /// The tips, one sentence or two each.
    pub rules: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SitePattern {
    host: String,
    path: Option<String>,
}

impl SitePattern {
    fn parse(raw: &str) -> Result<Self, String> {
        let s = raw.trim();
        let s = s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))
            .unwrap_or(s);
        let s = s.strip_prefix("*.").unwrap_or(s);
        let (host, path) = match s.find('/') {
            Some(i) => (&s[..i], Some(&s[i..])),
            None => (s, None),
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let valid_host = !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        if !valid_host {
            return Err(format!(
                "`{raw}` is not a site pattern: write a host, optionally with a path, such as `*.booking.com` or `google.com/travel`"
            ));
        }
        let path = path
            .map(|p| p.trim_end_matches('/').to_owned())
            .filter(|p| !p.is_empty());
        Ok(Self { host, path })
    }

    fn matches(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.trim_end_matches('.');
        let host_ok = host == self.host
            || (host.len() > self.host.len()
                && host.ends_with(self.host.as_str())
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.');
        if !host_ok {
            return false;
        }
        match &self.path {
            None => true,
            Some(prefix) => {
                let path = url.path();
                path == prefix
                    || (path.starts_with(prefix.as_str())
                        && path.as_bytes().get(prefix.len()) == Some(&b'/'))
            }
        }
    }

    /// Longer paths, then longer hosts, are more specific.
    fn specificity(&self) -> (usize, usize) {
        (self.path.as_ref().map_or(0, String::len), self.host.len())
    }
}

/// Site tips, matched on the current URL.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteKB {
    entries: Vec<(SitePattern, SiteRule)>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum KbFile {
    List(Vec<SiteRule>),
    Wrapped { sites: Vec<SiteRule> },
}

impl SiteKB {
    /// An empty knowledge base.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A knowledge base of inline rules; a bad pattern is a
    /// [`LumenError::Config`].
    pub fn new(rules: impl IntoIterator<Item = SiteRule>) -> Result<Self> {
        let mut kb = Self::default();
        for rule in rules {
            kb.add_rule(rule)?;
        }
        Ok(kb)
    }

    /// The knowledge base shipped with Lumen, covering the WebVoyager sites
    /// (Google Flights, Allrecipes, BBC News, Coursera, Amazon, Wolfram
    /// Alpha, Cambridge Dictionary, Hugging Face, Google Maps, GitHub,
    /// Booking, ESPN, Google Search, Apple, arXiv).
    pub fn default_kb() -> Self {
        // The bundled file is checked by a test; should it ever be broken,
        // run without tips rather than fail.
        Self::from_json(DEFAULT_KB).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the bundled site knowledge base is unreadable");
            Self::default()
        })
    }

    /// Reads rules from JSON: an array of `{"domain", "rules"}` objects, or
    /// an object holding that array under `sites`.
    pub fn from_json(text: &str) -> Result<Self> {
        let file: KbFile = serde_json::from_str(text).map_err(|e| {
            LumenError::invalid_data(
                "site knowledge base",
                format!("expected a list of {{\"domain\", \"rules\"}} objects: {e}"),
            )
        })?;
        let rules = match file {
            KbFile::List(r) | KbFile::Wrapped { sites: r } => r,
        };
        Self::new(rules)
    }

    /// Reads rules from a JSON file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = fsutil::read_required(path, "site knowledge base")?;
        Self::from_json(&text).map_err(|e| match e {
            LumenError::InvalidData { message, .. } => {
                LumenError::invalid_data(format!("site knowledge base {}", path.display()), message)
            }
            other => other,
        })
    }

    /// Adds a rule after the existing ones.
    pub fn add_rule(&mut self, rule: SiteRule) -> Result<()> {
        let pattern =
            SitePattern::parse(&rule.domain).map_err(|e| LumenError::config("siteKB", e))?;
        self.entries.push((pattern, rule));
        Ok(())
    }

    /// Adds every rule of `other` after these.
    pub fn extend(&mut self, other: SiteKB) {
        self.entries.extend(other.entries);
    }

    /// All rules, in insertion order.
    pub fn rules(&self) -> impl Iterator<Item = &SiteRule> {
        self.entries.iter().map(|(_, r)| r)
    }

    /// The tips for `url`: most specific pattern first, duplicates removed.
    /// Empty for URLs without a host or that match nothing.
    pub fn tips_for(&self, url: &str) -> Vec<&str> {
        let Ok(url) = Url::parse(url.trim()) else {
            return Vec::new();
        };
        let mut matched: Vec<&(SitePattern, SiteRule)> = self
            .entries
            .iter()
            .filter(|(p, _)| p.matches(&url))
            .collect();
        matched.sort_by_key(|(p, _)| std::cmp::Reverse(p.specificity()));
        let mut tips: Vec<&str> = Vec::new();
        for (_, rule) in matched {
            for tip in &rule.rules {
                if !tips.contains(&tip.as_str()) {
                    tips.push(tip);
                }
            }
        }
        tips
    }

    /// The prompt block for `url`, or `None` when no tip applies.
    pub fn prompt_block(&self, url: &str) -> Option<String> {
        let tips = self.tips_for(url);
        if tips.is_empty() {
            return None;
        }
        let mut out = String::from("Tips for this site:");
        for tip in tips {
            out.push_str("\n- ");
            out.push_str(tip);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn rule(domain: &str, tip: &str) -> SiteRule {
        SiteRule {
            domain: domain.into(),
            rules: vec![tip.into()],
        }
    }

    #[test]
    fn matching_table() {
        let kb = SiteKB::new([
            rule("*.booking.com", "booking"),
            rule("google.com/travel", "flights"),
            rule("google.com/maps", "maps"),
            rule("https://github.com/", "github"),
            rule("127.0.0.1/forms", "local forms"),
        ])
        .unwrap();
        // (url, expected tips)
        let table: &[(&str, &[&str])] = &[
            (
                "https://www.booking.com/searchresults.html?ss=Paris",
                &["booking"],
            ),
            ("https://booking.com/", &["booking"]),
            ("https://secure.account.booking.com/x", &["booking"]),
            ("https://notbooking.com/", &[]),
            ("https://booking.com.evil.test/", &[]),
            ("https://www.google.com/travel/flights?q=x", &["flights"]),
            ("https://www.google.com/travel", &["flights"]),
            ("https://www.google.com/travelling", &[]),
            ("https://www.google.com/maps/place/Paris", &["maps"]),
            ("https://www.google.com/", &[]),
            ("https://GITHUB.com/rust-lang/rust", &["github"]),
            ("http://127.0.0.1:4173/forms/a.html", &["local forms"]),
            ("http://127.0.0.1:4173/other", &[]),
            ("about:blank", &[]),
            ("not a url", &[]),
        ];
        for (url, expected) in table {
            assert_eq!(kb.tips_for(url), expected.to_vec(), "{url}");
        }
    }

    #[test]
    fn specific_patterns_come_first_and_duplicates_are_dropped() {
        let kb = SiteKB::new([
            SiteRule {
                domain: "example.com".into(),
                rules: vec!["general".into(), "shared".into()],
            },
            SiteRule {
                domain: "example.com/shop/cart".into(),
                rules: vec!["cart".into(), "shared".into()],
            },
            rule("shop.example.com", "subdomain"),
        ])
        .unwrap();
        assert_eq!(
            kb.tips_for("https://shop.example.com/shop/cart/1"),
            vec!["cart", "shared", "subdomain", "general"]
        );
        let block = kb.prompt_block("https://example.com/").unwrap();
        assert_eq!(block, "Tips for this site:\n- general\n- shared");
        assert_eq!(kb.prompt_block("https://other.test/"), None);
    }

    #[test]
    fn bad_patterns_and_files_are_clear_errors() {
        for bad in ["", "*.", "/path/only", "exa mple.com", "a..b"] {
            let err = SiteKB::new([rule(bad, "x")]).unwrap_err();
            assert_eq!(err.code(), lumen_core::ErrorCode::ConfigError, "{bad}");
        }
        let err = SiteKB::from_json("{\"domain\": 1}").unwrap_err();
        assert_eq!(err.code(), lumen_core::ErrorCode::InvalidData);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kb.json");
        std::fs::write(&path, "[{\"domain\": \"a.test\"}]").unwrap();
        let err = SiteKB::load(&path).unwrap_err();
        assert!(err.to_string().contains("kb.json"), "{err}");
    }

    #[test]
    fn rules_load_from_a_file_in_either_shape() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("list.json");
        std::fs::write(&list, r#"[{"domain": "a.test", "rules": ["one"]}]"#).unwrap();
        let wrapped = dir.path().join("wrapped.json");
        std::fs::write(
            &wrapped,
            r#"{"sites": [{"domain": "a.test", "rules": ["one"]}]}"#,
        )
        .unwrap();
        for path in [list, wrapped] {
            let kb = SiteKB::load(&path).unwrap();
            assert_eq!(kb.tips_for("https://www.a.test/"), vec!["one"]);
        }
    }

    #[test]
    fn the_default_kb_covers_every_webvoyager_site() {
        let bundled: Vec<SiteRule> = serde_json::from_str(DEFAULT_KB).unwrap();
        let kb = SiteKB::default_kb();
        assert_eq!(kb.rules().count(), bundled.len());
        let sites = [
            "https://www.google.com/travel/flights",
            "https://www.allrecipes.com/",
            "https://www.bbc.com/news",
            "https://www.coursera.org/",
            "https://www.amazon.com/",
            "https://www.wolframalpha.com/",
            "https://dictionary.cambridge.org/",
            "https://huggingface.co/",
            "https://www.google.com/maps/",
            "https://github.com/",
            "https://www.booking.com/",
            "https://www.espn.com/",
            "https://www.google.com/search?q=rust",
            "https://www.apple.com/",
            "https://arxiv.org/",
        ];
        for url in sites {
            let tips = kb.tips_for(url);
            assert!(!tips.is_empty(), "no tips for {url}");
            assert!(tips.iter().all(|t| !t.trim().is_empty()));
        }
        // Flights tips do not leak onto Maps and the other way round.
        let flights = kb.tips_for("https://www.google.com/travel/flights");
        let maps = kb.tips_for("https://www.google.com/maps/");
        assert!(flights.iter().all(|t| !maps.contains(t)));
    }
}

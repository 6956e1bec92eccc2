//! `lumen browser network …`: block or mock requests by URL pattern and
//! list the requests the session's pages made.
//!
//! Routes live in the session's state file and are served by the session's
//! keeper ([`super::keeper`]) through CDP's `Fetch` interception, which
//! only lasts as long as the CDP session that enabled it. The request log
//! is the keeper's too: it records from the moment the keeper starts (the
//! first `network` or `set` command of a session).
//!
//! A pattern with `*` is a glob over the whole URL (`*` matches any run of
//! characters, `/` included): `http://127.0.0.1:*/api/*`. A pattern without
//! `*` matches every URL that contains it: `/api/data.json`. When several
//! routes match, the one added last wins.

use std::path::PathBuf;

use base64::Engine as _;
use clap::Subcommand;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::keeper;
use crate::exit::CliError;

/// The largest mock body (it is kept in the state file).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// `network`.
#[derive(Debug, Subcommand)]
pub(super) enum Network {
    /// Block (`--abort`) or answer (`--body`/`--body-file`) the requests
    /// whose URL matches a pattern.
    Route {
        /// A URL part, or a glob with `*` over the whole URL.
        pattern: String,
        /// Fail matching requests (as blocked by the client).
        #[arg(long, conflicts_with_all = ["body", "body_file"])]
        abort: bool,
        /// Answer with this text.
        #[arg(long, conflicts_with = "body_file")]
        body: Option<String>,
        /// Answer with this file's bytes.
        #[arg(long)]
        body_file: Option<PathBuf>,
        /// The mock's HTTP status.
        #[arg(long, default_value_t = 200)]
        status: u16,
        /// The mock's `Content-Type` (default `text/plain; charset=utf-8`).
        #[arg(long)]
        content_type: Option<String>,
    },
    /// Remove the route with this pattern, or every route.
    Unroute { pattern: Option<String> },
    /// The requests the session's pages made since the keeper started.
    Requests {
        /// Only requests whose URL contains this.
        #[arg(long)]
        filter: Option<String>,
        /// Forget the recorded requests (after listing them).
        #[arg(long)]
        clear: bool,
    },
}

/// One route, as the state file keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Route {
    pub(super) pattern: String,
    #[serde(flatten)]
    pub(super) action: RouteAction,
}

/// What a route does to a matching request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub(super) enum RouteAction {
    /// Fail it, as blocked by the client.
    Abort,
    /// Answer it without the network.
    Mock {
        status: u16,
        content_type: String,
        /// The body, base64.
        body: String,
    },
}

impl Route {
    /// Whether `url` matches the pattern (see the module doc).
    pub(super) fn matches(&self, url: &str) -> bool {
        if self.pattern.contains('*') {
            glob(&self.pattern, url)
        } else {
            url.contains(&self.pattern)
        }
    }

    /// The pattern as a CDP `Fetch.RequestPattern.urlPattern` (`*` and `?`
    /// are wildcards there, `\` escapes), so that only requests a route may
    /// match are paused at all.
    pub(super) fn cdp_pattern(&self) -> String {
        let mut out = String::new();
        if !self.pattern.contains('*') {
            out.push('*');
        }
        for c in self.pattern.chars() {
            if c == '?' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        if !self.pattern.contains('*') {
            out.push('*');
        }
        out
    }

    fn describe(&self) -> String {
        match &self.action {
            RouteAction::Abort => format!("{} -> abort", self.pattern),
            RouteAction::Mock {
                status,
                content_type,
                body,
            } => format!(
                "{} -> {status} {content_type} ({} bytes)",
                self.pattern,
                base64::engine::general_purpose::STANDARD
                    .decode(body)
                    .map(|b| b.len())
                    .unwrap_or(0)
            ),
        }
    }
}

/// Whether `text` matches `pattern` whole, `*` matching any run of
/// characters (the classic two-pointer wildcard match: linear space, no
/// recursion, so no pattern can blow up the stack).
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Runs one `network` command; returns the JSON and text to print.
pub(super) async fn run(session: &str, cmd: &Network) -> Result<(Value, String), CliError> {
    // Reading, changing and saving the routes, and starting the keeper,
    // is one change of the session's state.
    let _lock = super::lock(session).await?;
    let mut state = super::opened(session)?;
    let earlier = state.clone();
    match cmd {
        Network::Route {
            pattern,
            abort,
            body,
            body_file,
            status,
            content_type,
        } => {
            if pattern.is_empty() {
                return Err(CliError::config("the route's URL pattern is empty"));
            }
            let action = if *abort {
                RouteAction::Abort
            } else {
                let bytes = match (body, body_file) {
                    (Some(text), _) => text.clone().into_bytes(),
                    (None, Some(file)) => std::fs::read(file).map_err(|e| {
                        CliError::config(format!("cannot read {}: {e}", file.display()))
                    })?,
                    (None, None) => {
                        return Err(CliError::config(
                            "say what the route does: --abort, or --body TEXT / --body-file FILE \
                             (with --status and --content-type)",
                        ));
                    }
                };
                if bytes.len() > MAX_BODY {
                    return Err(CliError::config(format!(
                        "the mock body is {} bytes; the limit is {MAX_BODY}",
                        bytes.len()
                    )));
                }
                if !(100..=599).contains(status) {
                    return Err(CliError::config(format!(
                        "--status {status} is not an HTTP status (100 to 599)"
                    )));
                }
                let content_type = content_type
                    .clone()
                    .unwrap_or_else(|| "text/plain; charset=utf-8".to_owned());
                if content_type.chars().any(char::is_control) {
                    return Err(CliError::config("--content-type holds a control character"));
                }
                RouteAction::Mock {
                    status: *status,
                    content_type,
                    body: base64::engine::general_purpose::STANDARD.encode(bytes),
                }
            };
            let route = Route {
                pattern: pattern.clone(),
                action,
            };
            state.routes.retain(|r| r.pattern != *pattern);
            state.routes.push(route.clone());
            keeper::apply(session, &mut state, &earlier).await?;
            Ok((
                json!({"ok": true, "routes": routes_json(&state.routes)}),
                format!("ok: {}", route.describe()),
            ))
        }
        Network::Unroute { pattern } => {
            let before = state.routes.len();
            match pattern {
                Some(p) => state.routes.retain(|r| r.pattern != *p),
                None => state.routes.clear(),
            }
            let removed = before - state.routes.len();
            if let Some(p) = pattern
                && removed == 0
            {
                return Err(CliError::config(format!(
                    "there is no route {p:?}; routes: {}",
                    if state.routes.is_empty() {
                        "none".to_owned()
                    } else {
                        state
                            .routes
                            .iter()
                            .map(|r| format!("{:?}", r.pattern))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                )));
            }
            keeper::apply(session, &mut state, &earlier).await?;
            Ok((
                json!({"ok": true, "removed": removed, "routes": routes_json(&state.routes)}),
                format!("removed {removed} route(s)"),
            ))
        }
        Network::Requests { filter, clear } => {
            let answer = keeper::ask(
                session,
                &mut state,
                json!({"op": "requests", "clear": clear}),
            )
            .await?;
            let mut list: Vec<Value> = answer["requests"].as_array().cloned().unwrap_or_default();
            if let Some(part) = filter {
                list.retain(|r| r["url"].as_str().unwrap_or("").contains(part.as_str()));
            }
            let text = list
                .iter()
                .map(|r| {
                    let outcome = match (&r["status"], &r["failed"]) {
                        (Value::Number(n), _) => n.to_string(),
                        (_, Value::String(why)) => format!("failed {why}"),
                        _ => "pending".to_owned(),
                    };
                    let routed = r["routed"]
                        .as_str()
                        .map(|how| format!(" [{how}]"))
                        .unwrap_or_default();
                    format!(
                        "{} {} {} ({}){routed}",
                        r["method"].as_str().unwrap_or("?"),
                        outcome,
                        r["url"].as_str().unwrap_or(""),
                        r["type"].as_str().unwrap_or("other"),
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            let text = if list.is_empty() {
                "no requests recorded".to_owned()
            } else {
                text
            };
            Ok((json!({"requests": list}), text))
        }
    }
}

fn routes_json(routes: &[Route]) -> Vec<Value> {
    routes
        .iter()
        .map(|r| match &r.action {
            RouteAction::Abort => json!({"pattern": r.pattern, "action": "abort"}),
            RouteAction::Mock {
                status,
                content_type,
                ..
            } => json!({"pattern": r.pattern, "action": "mock", "status": status,
                        "contentType": content_type}),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(pattern: &str) -> Route {
        Route {
            pattern: pattern.into(),
            action: RouteAction::Abort,
        }
    }

    #[test]
    fn patterns_match_as_documented() {
        assert!(route("/api/").matches("http://h/api/x"));
        assert!(!route("/api/").matches("http://h/apix"));
        assert!(route("http://h/*.json").matches("http://h/a/b.json"));
        assert!(!route("http://h/*.json").matches("http://h/a/b.json?x"));
        assert!(route("*").matches("anything"));
        assert!(!route("*a*b*c*d*e*f*").matches(&"a".repeat(2000)));
    }

    #[test]
    fn cdp_patterns_escape_its_wildcards() {
        assert_eq!(route("/a?b").cdp_pattern(), "*/a\\?b*");
        assert_eq!(route("http://h/*").cdp_pattern(), "http://h/*");
    }
}

//! [`SessionPolicy`]: the declarative rules of a session — which sites,
//! which URL schemes and which kinds of action are allowed — judged before
//! every action and again after it, on what the action really did.
//!
//! A policy is immutable once built: it has no setters and no interior
//! mutability, so nothing a page shows or the model writes can loosen it.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;

use lumen_core::{Action, ActionExecution, EffectReceipt, LumenError, Result};
use serde::{Deserialize, Serialize};
use url::{Host, Url};

use crate::address;
use crate::pattern::{DomainPattern, host_of, parse_url};

/// The `type` tags of every [`Action`], for validating `allowedActions`.
pub const ACTION_TYPES: &[&str] = Action::KINDS;

/// The schemes every policy allows.
pub const DEFAULT_SCHEMES: &[&str] = &["http", "https"];

/// A policy as written by the user (JSON, CLI flags, code).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Sites the agent may visit ([`DomainPattern`]s). Empty: any site not
    /// blocked.
    pub allowed_domains: Vec<String>,
    /// Sites the agent must never reach; a block wins over an allow.
    pub blocked_domains: Vec<String>,
    /// Browser actions the agent may use, by `type` tag. `None`: all.
    /// Actions that never touch the browser (`terminate`, `writeState`,
    /// `fold`, `delegate`, `screenshot`, `cursorPosition`) are always
    /// allowed, so a restricted run can still finish.
    pub allowed_actions: Option<Vec<String>>,
    /// URL schemes allowed on top of `http` and `https` (`file`, `data`,
    /// `chrome`…). `about:blank` is always allowed; it shows nothing.
    pub allowed_schemes: Vec<String>,
    /// Refuse URLs whose host is, or resolves to, a private, loopback or
    /// link-local address (10/8, 172.16/12, 192.168/16, 127/8, 169.254/16,
    /// ::1, fc00::/7, fe80::/10, IPv4 inside IPv6…) and `localhost` names.
    /// Off by default (`lumen run` opens local pages); the operator policy
    /// of `lumen serve`, `mcp` and `ipc` turns it on.
    pub block_private_network: bool,
    /// Hosts exempt from `blockPrivateNetwork` ([`DomainPattern`]s, matched
    /// on the URL's host as written: `127.0.0.1`, `localhost`,
    /// `*.intranet.example`).
    pub allowed_private_hosts: Vec<String>,
    /// Ports refused on this machine's addresses (loopback, `0.0.0.0`)
    /// whatever else allows them: the server's own port.
    pub blocked_local_ports: Vec<u16>,
    /// Let the model run JavaScript of its own in the page (the browser
    /// toolset's `javascript_exec`, the `javascriptExec` action). Off by
    /// default: a script can read and change anything the page can, send
    /// it anywhere the page can reach and act without the screenshot
    /// showing it. `None` (not said) is off for an operator policy; in a
    /// request narrowed under one it keeps the operator's choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_model_javascript: Option<bool>,
}

/// Which rule a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum PolicyRule {
    /// The kind of action is not in `allowedActions`.
    ActionNotAllowed,
    /// The URL's scheme is not allowed.
    SchemeNotAllowed,
    /// The host matches `blockedDomains`.
    DomainBlocked,
    /// `allowedDomains` is set and the host matches none of it.
    DomainNotAllowed,
    /// The URL could not be parsed as an absolute URL.
    InvalidUrl,
    /// The tab is on a page the policy forbids; only leaving it is allowed.
    OnForbiddenPage,
    /// The host is, or resolves to, a private, loopback or link-local
    /// address (`blockPrivateNetwork`), or it is this machine's port in
    /// `blockedLocalPorts`.
    PrivateNetwork,
    /// The model asked to run page JavaScript and `allowModelJavascript`
    /// is off.
    ModelJavascript,
}

/// Why the policy refused something; `reason` is written for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Denial {
    /// The rule that refused.
    pub rule: PolicyRule,
    /// What was refused and what to do instead.
    pub reason: String,
}

/// A policy verdict before an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum PolicyDecision {
    /// The action may run.
    Allow,
    /// It may not.
    Deny(Denial),
}

impl PolicyDecision {
    /// Whether the action may run.
    pub fn is_allowed(&self) -> bool {
        matches!(self, PolicyDecision::Allow)
    }

    /// The denial, if any.
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            PolicyDecision::Allow => None,
            PolicyDecision::Deny(d) => Some(d),
        }
    }
}

/// What the loop must do to undo a forbidden effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Remedy {
    /// The tab itself reached a forbidden page: go back in its history (or
    /// to the last allowed URL when there is no history).
    NavigateBack,
    /// The action opened a tab on a forbidden page: close that tab.
    CloseTab {
        /// The browser's id for the tab.
        tab_id: String,
    },
}

/// A forbidden effect found after an action (a click, key press, redirect
/// or popup that landed somewhere the policy forbids).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// Where the action led.
    pub url: String,
    /// The rule it broke.
    pub rule: PolicyRule,
    /// Why it is forbidden, for the model.
    pub reason: String,
    /// What the loop must do about it.
    pub remedy: Remedy,
}

impl Violation {
    /// The message the model reads once the remedy was carried out.
    pub fn feedback(&self) -> String {
        let undone = match &self.remedy {
            Remedy::NavigateBack => "the tab was taken back",
            Remedy::CloseTab { .. } => "the new tab was closed",
        };
        format!("Blocked after the action: {} ({undone}).", self.reason)
    }

    /// Marks `execution` as blocked: `ok: false` with every violation's
    /// feedback as the error. Call it after carrying out the remedies.
    pub fn apply_all(violations: &[Violation], execution: &mut ActionExecution) {
        if violations.is_empty() {
            return;
        }
        execution.ok = false;
        let text = violations
            .iter()
            .map(Violation::feedback)
            .collect::<Vec<_>>()
            .join(" ");
        execution.error = Some(match execution.error.take() {
            Some(previous) => format!("{previous} {text}"),
            None => text,
        });
    }
}

/// The session's declarative rules. Build one with [`SessionPolicy::new`];
/// it cannot be changed afterwards.
#[derive(Clone)]
pub struct SessionPolicy {
    allowed: Vec<DomainPattern>,
    blocked: Vec<DomainPattern>,
    actions: Option<BTreeSet<String>>,
    schemes: BTreeSet<String>,
    block_private: bool,
    private_allowed: Vec<DomainPattern>,
    local_ports: BTreeSet<u16>,
    model_javascript: bool,
}

impl fmt::Debug for SessionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionPolicy")
            .field("allowed", &self.allowed)
            .field("blocked", &self.blocked)
            .field("actions", &self.actions)
            .field("schemes", &self.schemes)
            .field("block_private", &self.block_private)
            .field("private_allowed", &self.private_allowed)
            .field("local_ports", &self.local_ports)
            .field("model_javascript", &self.model_javascript)
            .finish()
    }
}

impl Default for SessionPolicy {
    /// Any site over http or https, any action.
    fn default() -> Self {
        Self {
            allowed: Vec::new(),
            blocked: Vec::new(),
            actions: None,
            schemes: DEFAULT_SCHEMES.iter().map(|s| (*s).to_owned()).collect(),
            block_private: false,
            private_allowed: Vec::new(),
            local_ports: BTreeSet::new(),
            model_javascript: false,
        }
    }
}

impl SessionPolicy {
    /// Builds a policy, refusing unknown action names, bad domain patterns
    /// and bad schemes with a [`LumenError::Config`] naming the setting.
    pub fn new(config: &PolicyConfig) -> Result<Self> {
        let patterns = |list: &[String], setting: &str| {
            list.iter()
                .map(|p| DomainPattern::parse(p).map_err(|e| LumenError::config(setting, e)))
                .collect::<Result<Vec<_>>>()
        };
        let allowed = patterns(&config.allowed_domains, "policy.allowedDomains")?;
        let blocked = patterns(&config.blocked_domains, "policy.blockedDomains")?;
        let actions = match &config.allowed_actions {
            None => None,
            Some(list) => {
                let mut set = BTreeSet::new();
                for name in list {
                    let name = name.trim();
                    if !ACTION_TYPES.contains(&name) {
                        return Err(LumenError::config(
                            "policy.allowedActions",
                            format!(
                                "unknown action type `{name}`; known types: {}",
                                ACTION_TYPES.join(", ")
                            ),
                        ));
                    }
                    set.insert(name.to_owned());
                }
                Some(set)
            }
        };
        let mut schemes: BTreeSet<String> =
            DEFAULT_SCHEMES.iter().map(|s| (*s).to_owned()).collect();
        for s in &config.allowed_schemes {
            schemes.insert(
                normalize_scheme(s).map_err(|e| LumenError::config("policy.allowedSchemes", e))?,
            );
        }
        let private_allowed =
            patterns(&config.allowed_private_hosts, "policy.allowedPrivateHosts")?;
        Ok(Self {
            allowed,
            blocked,
            actions,
            schemes,
            block_private: config.block_private_network,
            private_allowed,
            local_ports: config.blocked_local_ports.iter().copied().collect(),
            model_javascript: config.allow_model_javascript == Some(true),
        })
    }

    /// Judges a URL the agent is about to open or has landed on.
    pub fn check_url(&self, url: &str) -> PolicyDecision {
        match self.url_denial(url) {
            None => PolicyDecision::Allow,
            Some(d) => PolicyDecision::Deny(d),
        }
    }

    fn url_denial(&self, raw: &str) -> Option<Denial> {
        let deny = |rule, reason: String| Some(Denial { rule, reason });
        let Some(url) = parse_url(raw) else {
            return deny(
                PolicyRule::InvalidUrl,
                format!(
                    "`{raw}` is not an absolute URL; write it in full, e.g. https://example.com/"
                ),
            );
        };
        if is_blank(&url) {
            return None;
        }
        let scheme = url.scheme();
        if !self.schemes.contains(scheme) {
            return deny(
                PolicyRule::SchemeNotAllowed,
                format!(
                    "{scheme}: URLs are not allowed in this session (allowed: {}); use a web address",
                    self.schemes
                        .iter()
                        .map(|s| format!("{s}:"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        // Hostless URLs (file:, data:) reach here only when their scheme was
        // explicitly allowed; domain rules cannot apply to them.
        let host = host_of(&url)?;
        if let Some(p) = self.blocked.iter().find(|p| p.matches(&host)) {
            return deny(
                PolicyRule::DomainBlocked,
                format!("{host} is blocked in this session (rule `{p}`); stay on other sites"),
            );
        }
        if !self.allowed.is_empty() && !self.allowed.iter().any(|p| p.matches(&host)) {
            return deny(
                PolicyRule::DomainNotAllowed,
                format!(
                    "{host} is outside the sites this session allows ({})",
                    self.allowed
                        .iter()
                        .map(DomainPattern::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        self.address_denial(&url, &host)
    }

    /// The private-network and local-port rules on the URL's host as
    /// written (an IP literal or a `localhost` name); no resolution.
    fn address_denial(&self, url: &Url, host: &Host<String>) -> Option<Denial> {
        let ip = match host {
            Host::Ipv4(a) => Some(IpAddr::V4(*a)),
            Host::Ipv6(a) => Some(IpAddr::V6(*a)),
            Host::Domain(_) => None,
        };
        let port = url.port_or_known_default();
        let local = match (ip, host) {
            (Some(ip), _) => address::is_local(ip),
            (None, Host::Domain(d)) => address::is_localhost_name(d),
            _ => false,
        };
        if local
            && let Some(port) = port
            && self.local_ports.contains(&port)
        {
            return Some(local_port_denial(host, port));
        }
        if !self.private_checked(host) {
            return None;
        }
        let range = match (ip, host) {
            (Some(ip), _) => address::private_range(ip),
            (None, Host::Domain(d)) if address::is_localhost_name(d) => {
                Some("loopback (localhost)")
            }
            _ => None,
        };
        range.map(|range| private_denial(host, range))
    }

    /// Whether the private-network rule applies to `host`.
    fn private_checked(&self, host: &Host<String>) -> bool {
        self.block_private && !self.private_allowed.iter().any(|p| p.matches(host))
    }

    /// Judges a URL like [`check_url`](Self::check_url), then, when the
    /// private-network or local-port rules apply to its host name, resolves
    /// it and judges every address it resolves to: a name that resolves to
    /// a private address is refused, and so is a name that cannot be
    /// resolved while `blockPrivateNetwork` applies to it.
    ///
    /// Blocking (the system resolver): call it off the async threads, or
    /// use [`judge_resolved`](Self::judge_resolved).
    pub fn check_url_resolved(&self, raw: &str) -> PolicyDecision {
        self.check_url_resolved_with(raw, |host, port| {
            Ok(address::resolve(host, port)?
                .into_iter()
                .map(|a| a.ip())
                .collect())
        })
    }

    /// [`check_url_resolved`](Self::check_url_resolved) on a blocking
    /// thread, for async callers. A resolution that cannot run is a
    /// refusal.
    pub async fn judge_resolved(&self, raw: &str) -> PolicyDecision {
        let (policy, target) = (self.clone(), raw.to_owned());
        tokio::task::spawn_blocking(move || policy.check_url_resolved(&target))
            .await
            .unwrap_or_else(|e| {
                PolicyDecision::Deny(Denial {
                    rule: PolicyRule::InvalidUrl,
                    reason: format!("the URL could not be judged: {e}"),
                })
            })
    }

    /// Judges an action before it runs, on the page at `current_url`.
    ///
    /// - A browser action whose kind is not allowed is refused.
    /// - `javascriptExec` is refused unless `allowModelJavascript` is on.
    /// - `goto` is judged on its target URL.
    /// - While the tab is on a forbidden page, only leaving it (`goto`,
    ///   `back`), waiting and the actions that never touch the browser are
    ///   allowed.
    pub fn check_action(&self, action: &Action, current_url: &str) -> PolicyDecision {
        let kind = action.kind();
        if action.touches_browser()
            && let Some(allowed) = &self.actions
            && !allowed.contains(kind)
        {
            return PolicyDecision::Deny(Denial {
                rule: PolicyRule::ActionNotAllowed,
                reason: format!(
                    "the `{kind}` action is not allowed in this session; allowed actions: {}",
                    allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        if matches!(action, Action::JavascriptExec { .. }) && !self.model_javascript {
            return PolicyDecision::Deny(Denial {
                rule: PolicyRule::ModelJavascript,
                reason: "running JavaScript from the model is off in this session; the operator \
                         turns it on with the policy setting `allowModelJavascript` (`lumen run \
                         --allow-model-javascript`). Use the page's own controls instead"
                    .into(),
            });
        }
        match action {
            Action::Goto { url } => self.check_url(&with_default_scheme(url)),
            Action::Back | Action::Wait { .. } => PolicyDecision::Allow,
            a if !a.touches_browser() => PolicyDecision::Allow,
            _ => {
                // An unreadable or empty current URL tells nothing; the
                // after-action check still judges where the action leads.
                if parse_url(current_url).is_none() {
                    return PolicyDecision::Allow;
                }
                match self.url_denial(current_url) {
                    None => PolicyDecision::Allow,
                    Some(d) => PolicyDecision::Deny(Denial {
                        rule: PolicyRule::OnForbiddenPage,
                        reason: format!(
                            "the tab is on a forbidden page ({}); go back or navigate to an allowed site first",
                            d.reason
                        ),
                    }),
                }
            }
        }
    }

    /// Judges what an action did, from its effect receipt: a new tab on a
    /// forbidden page must be closed, a tab that landed on one must go back.
    /// Empty when everything it reached is allowed.
    pub fn check_effect(&self, effect: &EffectReceipt) -> Vec<Violation> {
        let mut out = Vec::new();
        // A tab that has not navigated yet (a popup caught as it opens) has
        // no URL: it holds the empty document, judged as such; where it
        // goes next is judged then (the request filter, the next receipt).
        if let Some(tab) = &effect.new_tab
            && let Some(d) = self.url_denial(match tab.url.as_str() {
                "" => "about:blank",
                url => url,
            })
        {
            out.push(Violation {
                url: tab.url.clone(),
                rule: d.rule,
                reason: format!("the action opened a new tab on {}: {}", tab.url, d.reason),
                remedy: Remedy::CloseTab {
                    tab_id: tab.id.clone(),
                },
            });
        }
        if let Some(after) = &effect.url_after
            && let Some(d) = self.url_denial(after)
        {
            out.push(Violation {
                url: after.clone(),
                rule: d.rule,
                reason: format!("the page went to {after}: {}", d.reason),
                remedy: Remedy::NavigateBack,
            });
        }
        out
    }
}

/// A goto target written without a scheme (`www.example.com/a`) is judged
/// as the https URL a browser would open; anything else is judged as
/// written. Judge a goto's target with [`SessionPolicy::check_url_resolved`]
/// on this.
pub fn with_default_scheme(url: &str) -> String {
    let trimmed = url.trim();
    if parse_url(trimmed).is_none()
        && !trimmed.starts_with('/')
        && let Some(u) = parse_url(&format!("https://{trimmed}"))
        && u.host_str().is_some_and(|h| h.contains('.'))
    {
        return u.to_string();
    }
    trimmed.to_owned()
}

fn private_denial(host: &Host<String>, range: &str) -> Denial {
    Denial {
        rule: PolicyRule::PrivateNetwork,
        reason: format!(
            "{host} is a {range} address; private, loopback and link-local addresses are refused (blockPrivateNetwork)"
        ),
    }
}

fn local_port_denial(host: &Host<String>, port: u16) -> Denial {
    Denial {
        rule: PolicyRule::PrivateNetwork,
        reason: format!(
            "port {port} on this machine ({host}) is refused (blockedLocalPorts: the server's own port)"
        ),
    }
}

/// A scheme as the policy stores it (`File:` → `file`), or why it is not
/// one.
pub(crate) fn normalize_scheme(raw: &str) -> std::result::Result<String, String> {
    let s = raw.trim().trim_end_matches(':').to_ascii_lowercase();
    let valid = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if valid {
        Ok(s)
    } else {
        Err(format!("`{s}` is not a URL scheme (write `file`, `data`…)"))
    }
}

fn is_blank(url: &Url) -> bool {
    url.scheme() == "about" && url.path() == "blank"
}

// The policy at the network layer (`network.rs`): a child module, so it
// reads the rules above.
#[path = "network.rs"]
mod network;
pub use network::{PolicyRequestFilter, RESOLVE_TTL, apply_blocked_requests, request_filter};

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;

//! The policy at the network layer: [`PolicyRequestFilter`] implements
//! [`RequestFilter`] for a [`SessionPolicy`], so a browser that supports it
//! refuses every request to a denied host *before it is sent* — the
//! navigations, subframes, popups, redirects, meta refreshes, timer
//! redirects and form posts a page starts on its own, not only the ones
//! the agent asks for.
//!
//! - Names are judged on what they resolve to when the private-network or
//!   local-port rules apply ([`SessionPolicy::check_url_resolved_with`]);
//!   resolutions are cached per host and port for [`RESOLVE_TTL`], since
//!   a page makes many requests to one host.
//! - The backstop against DNS rebinding: [`RequestFilter::judge_address`]
//!   judges the address the browser really connected to
//!   ([`SessionPolicy::check_url_at`]).
//!
//! A child module of `policy` (it reads the policy's private rules); its
//! public items are re-exported from there.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lumen_core::{ActionExecution, BlockKind, EffectReceipt, RequestFilter, RequestVerdict};
use url::Host;

use super::{Denial, PolicyDecision, PolicyRule, SessionPolicy, local_port_denial};
use crate::address;
use crate::pattern::{host_of, parse_url};

/// How long a host's resolution is reused.
pub const RESOLVE_TTL: Duration = Duration::from_secs(10);
/// Hosts kept in the resolution cache.
const CACHE_CAPACITY: usize = 1024;

/// A cached resolution: when, and the addresses or the error.
type Resolved = (Instant, Result<Vec<IpAddr>, String>);

/// A resolver: host name and port to addresses (blocking).
type Resolver = dyn Fn(&str, u16) -> io::Result<Vec<IpAddr>> + Send + Sync;

impl SessionPolicy {
    /// [`check_url_resolved`](Self::check_url_resolved) with the resolver
    /// given: judges the URL, then, when the private-network or local-port
    /// rules apply to its host name, every address `resolve` gives for it.
    pub fn check_url_resolved_with(
        &self,
        raw: &str,
        resolve: impl Fn(&str, u16) -> io::Result<Vec<IpAddr>>,
    ) -> PolicyDecision {
        let (host, port) = match self.host_and_port(raw) {
            Ok(found) => found,
            Err(decided) => return decided,
        };
        let Host::Domain(name) = &host else {
            return PolicyDecision::Allow;
        };
        let check_private = self.private_checked(&host);
        if !check_private && self.local_ports.is_empty() {
            return PolicyDecision::Allow;
        }
        let addrs = match resolve(name, port) {
            Ok(addrs) => addrs,
            Err(e) if check_private => {
                return PolicyDecision::Deny(Denial {
                    rule: PolicyRule::PrivateNetwork,
                    reason: format!(
                        "{name} could not be resolved to check that it is not a private address ({e}); private addresses are refused (blockPrivateNetwork)"
                    ),
                });
            }
            Err(_) => return PolicyDecision::Allow,
        };
        for ip in addrs {
            if let Some(d) = self.address_rule(&host, port, ip) {
                return PolicyDecision::Deny(d);
            }
        }
        PolicyDecision::Allow
    }

    /// Judges a URL as reached at `ip`: the URL's own rules, then the
    /// private-network and local-port rules on the address the browser
    /// really connected to (the DNS-rebinding backstop). A host exempt
    /// through `allowedPrivateHosts` stays exempt.
    pub fn check_url_at(&self, raw: &str, ip: IpAddr) -> PolicyDecision {
        let (host, port) = match self.host_and_port(raw) {
            Ok(found) => found,
            Err(decided) => return decided,
        };
        match self.address_rule(&host, port, ip) {
            Some(d) => PolicyDecision::Deny(d),
            None => PolicyDecision::Allow,
        }
    }

    /// The URL's own rules, then its host and port for the address rules:
    /// `Err` with the decision when the URL's rules already decide (a
    /// denial, or no host to resolve).
    fn host_and_port(&self, raw: &str) -> Result<(Host<String>, u16), PolicyDecision> {
        if let Some(d) = self.url_denial(raw) {
            return Err(PolicyDecision::Deny(d));
        }
        let url = parse_url(raw).ok_or(PolicyDecision::Allow)?;
        let host = host_of(&url).ok_or(PolicyDecision::Allow)?;
        Ok((host, url.port_or_known_default().unwrap_or(0)))
    }

    /// The private-network and local-port rules on one address of `host`.
    fn address_rule(&self, host: &Host<String>, port: u16, ip: IpAddr) -> Option<Denial> {
        if address::is_local(ip) && self.local_ports.contains(&port) {
            return Some(local_port_denial(host, port));
        }
        if self.private_checked(host)
            && let Some(range) = address::private_range(ip)
        {
            return Some(Denial {
                rule: PolicyRule::PrivateNetwork,
                reason: format!(
                    "{host} resolves to {ip}, a {range} address; private, loopback and link-local addresses are refused (blockPrivateNetwork)"
                ),
            });
        }
        None
    }

    /// Whether the policy can refuse an `http`/`https` request at all
    /// (sites allowed or blocked, private networks, local ports). An open
    /// policy needs no request filter.
    pub fn filters_requests(&self) -> bool {
        !self.allowed.is_empty()
            || !self.blocked.is_empty()
            || self.block_private
            || !self.local_ports.is_empty()
    }
}

/// A [`SessionPolicy`] as a [`RequestFilter`], with a short-lived
/// resolution cache. Build it with [`PolicyRequestFilter::new`] (the
/// system resolver) or [`with_resolver`](Self::with_resolver).
pub struct PolicyRequestFilter {
    policy: SessionPolicy,
    resolver: Box<Resolver>,
    cache: Mutex<HashMap<(String, u16), Resolved>>,
}

impl std::fmt::Debug for PolicyRequestFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyRequestFilter")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl PolicyRequestFilter {
    /// A filter judging with `policy`, resolving with the system resolver.
    pub fn new(policy: SessionPolicy) -> Self {
        Self::with_resolver(policy, |host, port| {
            Ok(address::resolve(host, port)?
                .into_iter()
                .map(|a| a.ip())
                .collect())
        })
    }

    /// A filter with its own resolver (tests, a DNS-over-HTTPS client).
    pub fn with_resolver(
        policy: SessionPolicy,
        resolver: impl Fn(&str, u16) -> io::Result<Vec<IpAddr>> + Send + Sync + 'static,
    ) -> Self {
        Self {
            policy,
            resolver: Box::new(resolver),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn resolve_cached(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let key = (host.to_ascii_lowercase(), port);
        let now = Instant::now();
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, result)) = cache.get(&key)
                && now.duration_since(*at) < RESOLVE_TTL
            {
                return result.clone().map_err(io::Error::other);
            }
        }
        // Resolved outside the lock: one slow name must not hold up others.
        let result = (self.resolver)(host, port).map_err(|e| e.to_string());
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_CAPACITY {
            cache.retain(|_, (at, _)| now.duration_since(*at) < RESOLVE_TTL);
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(key, (now, result.clone()));
        result.map_err(io::Error::other)
    }
}

/// Schemes whose requests never leave the browser (their content comes
/// from the page itself); the network layer lets them through.
const LOCAL_SCHEMES: &[&str] = &["data:", "blob:", "about:"];

impl RequestFilter for PolicyRequestFilter {
    fn judge(&self, url: &str) -> RequestVerdict {
        if LOCAL_SCHEMES
            .iter()
            .any(|s| url.len() >= s.len() && url[..s.len()].eq_ignore_ascii_case(s))
        {
            return RequestVerdict::Allow;
        }
        verdict(
            self.policy
                .check_url_resolved_with(url, |h, p| self.resolve_cached(h, p)),
        )
    }

    fn judge_address(&self, url: &str, ip: IpAddr) -> RequestVerdict {
        verdict(self.policy.check_url_at(url, ip))
    }
}

fn verdict(d: PolicyDecision) -> RequestVerdict {
    match d {
        PolicyDecision::Allow => RequestVerdict::Allow,
        PolicyDecision::Deny(d) => RequestVerdict::Deny { reason: d.reason },
    }
}

/// A [`PolicyRequestFilter`] for `policy` when the policy can refuse a
/// request at all, shared; `None` for an open policy.
pub fn request_filter(policy: &SessionPolicy) -> Option<Arc<dyn RequestFilter>> {
    policy
        .filters_requests()
        .then(|| Arc::new(PolicyRequestFilter::new(policy.clone())) as Arc<dyn RequestFilter>)
}

/// Marks `execution` as blocked when its receipt reports a navigation the
/// request filter refused or a page cut off for reaching a forbidden
/// address: `ok: false` with what was refused (refused subresources stay
/// hints). Returns whether it did.
pub fn apply_blocked_requests(effect: &EffectReceipt, execution: &mut ActionExecution) -> bool {
    let serious: Vec<String> = effect
        .blocked_requests
        .iter()
        .filter(|b| matches!(b.kind, BlockKind::Navigation | BlockKind::Rebinding))
        .map(|b| b.describe())
        .collect();
    if serious.is_empty() {
        return false;
    }
    execution.ok = false;
    let text = format!("Blocked: {}.", serious.join("; "));
    execution.error = Some(match execution.error.take() {
        Some(previous) => format!("{previous} {text}"),
        None => text,
    });
    true
}

#[cfg(test)]
mod tests {
    use super::super::PolicyConfig;
    use super::*;

    fn policy(config: PolicyConfig) -> SessionPolicy {
        SessionPolicy::new(&config).unwrap()
    }

    fn public_resolver(_: &str, _: u16) -> io::Result<Vec<IpAddr>> {
        Ok(vec!["93.184.216.34".parse().unwrap()])
    }

    #[test]
    fn blocked_domains_and_private_addresses_are_refused_per_request() {
        let f = PolicyRequestFilter::with_resolver(
            policy(PolicyConfig {
                blocked_domains: vec!["blocked.test".into()],
                block_private_network: true,
                allowed_private_hosts: vec!["127.0.0.1".into()],
                ..PolicyConfig::default()
            }),
            public_resolver,
        );
        assert!(f.judge("http://127.0.0.1:8080/a.png").is_allowed());
        assert!(f.judge("https://example.com/x.js").is_allowed());
        assert!(f.judge("data:image/png;base64,AAAA").is_allowed());
        for denied in [
            "http://blocked.test:9/x",
            "http://169.254.169.254/latest/meta-data/",
            "http://127.0.0.2:8080/",
            "http://localhost:8080/",
            "file:///etc/passwd",
        ] {
            assert!(!f.judge(denied).is_allowed(), "{denied}");
        }
    }

    #[test]
    fn names_are_judged_on_what_they_resolve_to_and_resolutions_are_cached() {
        let calls = Arc::new(Mutex::new(0));
        let counted = calls.clone();
        let f = PolicyRequestFilter::with_resolver(
            policy(PolicyConfig {
                block_private_network: true,
                ..PolicyConfig::default()
            }),
            move |host, _| {
                *counted.lock().unwrap() += 1;
                Ok(vec![if host == "inside.example" {
                    "10.0.0.7".parse().unwrap()
                } else {
                    "93.184.216.34".parse().unwrap()
                }])
            },
        );
        let RequestVerdict::Deny { reason } = f.judge("http://inside.example/") else {
            panic!("a name resolving to 10.0.0.7 passed");
        };
        assert!(reason.contains("10.0.0.7"), "{reason}");
        for _ in 0..5 {
            assert!(f.judge("https://outside.example/a").is_allowed());
        }
        assert_eq!(*calls.lock().unwrap(), 2, "one resolution per host");
    }

    #[test]
    fn the_address_the_browser_reached_is_judged_too() {
        let f = PolicyRequestFilter::with_resolver(
            policy(PolicyConfig {
                block_private_network: true,
                allowed_private_hosts: vec!["intranet.example".into()],
                ..PolicyConfig::default()
            }),
            public_resolver,
        );
        // Passed when judged (a public address), reached at loopback.
        assert!(f.judge("http://rebind.example/").is_allowed());
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(
            !f.judge_address("http://rebind.example/", loopback)
                .is_allowed()
        );
        assert!(
            !f.judge_address("http://rebind.example/", metadata)
                .is_allowed()
        );
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert!(
            f.judge_address("http://rebind.example/", public)
                .is_allowed()
        );
        // An exempt host stays exempt.
        let ten: IpAddr = "10.1.2.3".parse().unwrap();
        assert!(
            f.judge_address("http://intranet.example/", ten)
                .is_allowed()
        );
    }

    #[test]
    fn an_open_policy_needs_no_filter() {
        assert!(request_filter(&SessionPolicy::default()).is_none());
        let schemes_only = policy(PolicyConfig {
            allowed_schemes: vec!["file".into()],
            ..PolicyConfig::default()
        });
        assert!(request_filter(&schemes_only).is_none());
        let blocking = policy(PolicyConfig {
            blocked_domains: vec!["x.test".into()],
            ..PolicyConfig::default()
        });
        assert!(request_filter(&blocking).is_some());
    }

    #[test]
    fn refused_navigations_fail_the_action_and_subresources_stay_hints() {
        let blocked = |kind| lumen_core::BlockedRequest {
            url: "http://blocked.test/".into(),
            reason: "blocked".into(),
            kind,
            resource_type: String::new(),
        };
        let mut exec = ActionExecution::ok();
        let effect = EffectReceipt {
            blocked_requests: vec![blocked(BlockKind::Subresource)],
            ..EffectReceipt::default()
        };
        assert!(!apply_blocked_requests(&effect, &mut exec));
        assert!(exec.ok);
        let effect = EffectReceipt {
            blocked_requests: vec![blocked(BlockKind::Navigation)],
            ..EffectReceipt::default()
        };
        assert!(apply_blocked_requests(&effect, &mut exec));
        assert!(!exec.ok);
        assert!(
            exec.error.unwrap().contains("http://blocked.test/"),
            "the model reads what was refused"
        );
    }
}

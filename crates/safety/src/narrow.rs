//! The operator policy and the requests that may only narrow it.
//!
//! `lumen serve`, `lumen mcp` and `lumen ipc` run with an operator policy
//! ([`PolicyConfig::operator_default`] unless the operator configures one).
//! A client's run may bring its own [`PolicyConfig`]; the run gets
//! [`PolicyConfig::narrowed_by`]: the client can block more, allow fewer
//! sites, schemes and actions, but anything it asks that the operator
//! policy does not allow is a [`PolicyError`] naming the setting.

use std::fmt;

use serde::Serialize;

use crate::pattern::DomainPattern;
use crate::policy::{ACTION_TYPES, PolicyConfig, normalize_scheme};

/// Why a requested policy was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PolicyErrorKind {
    /// The request is malformed (a bad pattern, scheme or action name).
    Invalid,
    /// The request asks for something the operator policy does not allow.
    Widens,
}

/// A requested policy the operator policy cannot grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyError {
    /// Malformed or widening.
    pub kind: PolicyErrorKind,
    /// The setting at fault (`policy.allowedSchemes`…).
    pub setting: String,
    /// What was refused and what to do instead.
    pub message: String,
}

impl PolicyError {
    fn invalid(setting: &str, message: impl Into<String>) -> Self {
        Self {
            kind: PolicyErrorKind::Invalid,
            setting: setting.to_owned(),
            message: message.into(),
        }
    }

    fn widens(setting: &str, message: impl Into<String>) -> Self {
        Self {
            kind: PolicyErrorKind::Widens,
            setting: setting.to_owned(),
            message: message.into(),
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.setting, self.message)
    }
}

impl std::error::Error for PolicyError {}

fn parse_all(list: &[String], setting: &str) -> Result<Vec<DomainPattern>, PolicyError> {
    list.iter()
        .map(|p| DomainPattern::parse(p).map_err(|e| PolicyError::invalid(setting, e)))
        .collect()
}

/// The request's list of domain patterns, each of which must fall under one
/// of the operator's (an empty request list takes the operator's; an empty
/// operator list takes the request's).
fn narrow_domains(
    operator: &[String],
    request: &[String],
    setting: &str,
    operator_name: &str,
) -> Result<Vec<String>, PolicyError> {
    let ours = parse_all(operator, setting)?;
    let theirs = parse_all(request, setting)?;
    if ours.is_empty() {
        return Ok(request.to_vec());
    }
    if theirs.is_empty() {
        return Ok(operator.to_vec());
    }
    for p in &theirs {
        if !ours.iter().any(|o| o.covers(p)) {
            return Err(PolicyError::widens(
                setting,
                format!(
                    "`{p}` is outside what the operator allows ({operator_name}: {}); name sites under those",
                    operator.join(", ")
                ),
            ));
        }
    }
    Ok(request.to_vec())
}

impl PolicyConfig {
    /// The operator policy of `lumen serve`, `mcp` and `ipc` when the
    /// operator configures nothing: `http` and `https` only (so no `file:`,
    /// `chrome:`, `data:`, `javascript:`, `view-source:` or DevTools URLs)
    /// and no private, loopback or link-local address.
    pub fn operator_default() -> Self {
        Self {
            block_private_network: true,
            ..Self::default()
        }
    }

    /// The policy a run gets when a request asks for `request` under this
    /// (operator) policy. The request may only narrow:
    ///
    /// - `blockedDomains` and `blockedLocalPorts` add to the operator's;
    ///   `blockPrivateNetwork` can be turned on, never off.
    /// - `allowModelJavascript` can be turned off, and on only when the
    ///   operator has it on; left out it takes the operator's.
    /// - `allowedDomains`, `allowedSchemes`, `allowedActions` and
    ///   `allowedPrivateHosts` must each stay within the operator's (a
    ///   domain under an allowed one, a scheme or action the operator
    ///   allows); left empty (or `null` for actions) they take the
    ///   operator's.
    ///
    /// Anything else is a [`PolicyError`] naming the setting.
    pub fn narrowed_by(&self, request: &PolicyConfig) -> Result<PolicyConfig, PolicyError> {
        let allowed_domains = narrow_domains(
            &self.allowed_domains,
            &request.allowed_domains,
            "policy.allowedDomains",
            "allowedDomains",
        )?;
        parse_all(&self.blocked_domains, "policy.blockedDomains")?;
        parse_all(&request.blocked_domains, "policy.blockedDomains")?;
        let mut blocked_domains = self.blocked_domains.clone();
        for d in &request.blocked_domains {
            if !blocked_domains.contains(d) {
                blocked_domains.push(d.clone());
            }
        }

        let schemes = |list: &[String]| {
            list.iter()
                .map(|s| {
                    normalize_scheme(s)
                        .map_err(|e| PolicyError::invalid("policy.allowedSchemes", e))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let ours = schemes(&self.allowed_schemes)?;
        let theirs = schemes(&request.allowed_schemes)?;
        let allowed_schemes = if theirs.is_empty() {
            ours
        } else {
            for s in &theirs {
                if !ours.contains(s) && !crate::policy::DEFAULT_SCHEMES.contains(&s.as_str()) {
                    return Err(PolicyError::widens(
                        "policy.allowedSchemes",
                        format!(
                            "{s}: URLs are not allowed by the operator (allowed: http, https{}); drop `{s}` from allowedSchemes",
                            ours.iter().map(|s| format!(", {s}")).collect::<String>()
                        ),
                    ));
                }
            }
            theirs
        };

        let check_actions = |list: &[String]| {
            list.iter().try_for_each(|a| {
                if ACTION_TYPES.contains(&a.trim()) {
                    Ok(())
                } else {
                    Err(PolicyError::invalid(
                        "policy.allowedActions",
                        format!("unknown action type `{}`", a.trim()),
                    ))
                }
            })
        };
        let allowed_actions = match (&self.allowed_actions, &request.allowed_actions) {
            (None, r) => {
                if let Some(r) = r {
                    check_actions(r)?;
                }
                r.clone()
            }
            (Some(o), None) => Some(o.clone()),
            (Some(o), Some(r)) => {
                check_actions(r)?;
                if let Some(a) = r.iter().find(|a| !o.iter().any(|b| b.trim() == a.trim())) {
                    return Err(PolicyError::widens(
                        "policy.allowedActions",
                        format!(
                            "the `{}` action is not allowed by the operator (allowed: {})",
                            a.trim(),
                            o.join(", ")
                        ),
                    ));
                }
                Some(r.clone())
            }
        };

        let block_private_network = self.block_private_network || request.block_private_network;
        let allowed_private_hosts = if !self.block_private_network {
            // The operator allows every private address; the request may
            // block them and exempt what it likes.
            parse_all(&request.allowed_private_hosts, "policy.allowedPrivateHosts")?;
            request.allowed_private_hosts.clone()
        } else if request.allowed_private_hosts.is_empty() {
            self.allowed_private_hosts.clone()
        } else {
            let ours = parse_all(&self.allowed_private_hosts, "policy.allowedPrivateHosts")?;
            for p in parse_all(&request.allowed_private_hosts, "policy.allowedPrivateHosts")? {
                if !ours.iter().any(|o| o.covers(&p)) {
                    return Err(PolicyError::widens(
                        "policy.allowedPrivateHosts",
                        format!(
                            "`{p}` may not reach private addresses: the operator blocks the private network{}",
                            if ours.is_empty() {
                                String::new()
                            } else {
                                format!(" except {}", self.allowed_private_hosts.join(", "))
                            }
                        ),
                    ));
                }
            }
            request.allowed_private_hosts.clone()
        };

        let mut blocked_local_ports = self.blocked_local_ports.clone();
        for p in &request.blocked_local_ports {
            if !blocked_local_ports.contains(p) {
                blocked_local_ports.push(*p);
            }
        }

        let allow_model_javascript = match request.allow_model_javascript {
            Some(true) if self.allow_model_javascript != Some(true) => {
                return Err(PolicyError::widens(
                    "policy.allowModelJavascript",
                    "the operator does not let the model run page JavaScript; drop \
                     allowModelJavascript from the request",
                ));
            }
            None => self.allow_model_javascript,
            asked => asked,
        };

        Ok(PolicyConfig {
            allowed_domains,
            blocked_domains,
            allowed_actions,
            allowed_schemes,
            block_private_network,
            allowed_private_hosts,
            blocked_local_ports,
            allow_model_javascript,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PolicyRule, SessionPolicy};

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn widens(op: &PolicyConfig, req: &PolicyConfig, setting: &str) {
        let err = op.narrowed_by(req).unwrap_err();
        assert_eq!(err.kind, PolicyErrorKind::Widens, "{err}");
        assert_eq!(err.setting, setting, "{err}");
        assert!(!err.message.is_empty());
    }

    #[test]
    fn an_empty_request_gets_the_operator_policy() {
        let op = PolicyConfig {
            allowed_domains: strings(&["example.com"]),
            blocked_domains: strings(&["ads.example.com"]),
            allowed_schemes: strings(&["data"]),
            allowed_actions: Some(strings(&["click", "goto"])),
            allowed_private_hosts: strings(&["127.0.0.1"]),
            blocked_local_ports: vec![3001],
            ..PolicyConfig::operator_default()
        };
        assert_eq!(op.narrowed_by(&PolicyConfig::default()).unwrap(), op);
    }

    #[test]
    fn requests_cannot_widen_schemes() {
        let op = PolicyConfig::operator_default();
        for scheme in [
            "file",
            "chrome",
            "data",
            "javascript",
            "view-source",
            "devtools",
        ] {
            widens(
                &op,
                &PolicyConfig {
                    allowed_schemes: strings(&[scheme]),
                    ..PolicyConfig::default()
                },
                "policy.allowedSchemes",
            );
        }
        // Naming what is allowed anyway is fine, and an operator allow is
        // inherited or narrowed.
        let op = PolicyConfig {
            allowed_schemes: strings(&["file", "data"]),
            ..PolicyConfig::operator_default()
        };
        let got = op
            .narrowed_by(&PolicyConfig {
                allowed_schemes: strings(&["File:", "https"]),
                ..PolicyConfig::default()
            })
            .unwrap();
        assert_eq!(got.allowed_schemes, strings(&["file", "https"]));
    }

    #[test]
    fn requests_cannot_widen_hosts() {
        let op = PolicyConfig {
            allowed_domains: strings(&["example.com"]),
            blocked_domains: strings(&["evil.test"]),
            ..PolicyConfig::operator_default()
        };
        widens(
            &op,
            &PolicyConfig {
                allowed_domains: strings(&["other.test"]),
                ..PolicyConfig::default()
            },
            "policy.allowedDomains",
        );
        widens(
            &op,
            &PolicyConfig {
                allowed_domains: strings(&["docs.example.com", "com"]),
                ..PolicyConfig::default()
            },
            "policy.allowedDomains",
        );
        // Narrower sites and more blocks are fine; the operator's block
        // stays.
        let got = op
            .narrowed_by(&PolicyConfig {
                allowed_domains: strings(&["*.docs.example.com"]),
                blocked_domains: strings(&["ads.test"]),
                ..PolicyConfig::default()
            })
            .unwrap();
        assert_eq!(got.allowed_domains, strings(&["*.docs.example.com"]));
        assert_eq!(got.blocked_domains, strings(&["evil.test", "ads.test"]));
        let p = SessionPolicy::new(&got).unwrap();
        assert!(!p.check_url("https://www.example.com/").is_allowed());
        assert!(p.check_url("https://a.docs.example.com/").is_allowed());
    }

    #[test]
    fn requests_cannot_widen_private_networks() {
        let op = PolicyConfig::operator_default();
        // Turning the rule off is not narrowing: it stays on.
        let got = op
            .narrowed_by(&PolicyConfig {
                block_private_network: false,
                ..PolicyConfig::default()
            })
            .unwrap();
        assert!(got.block_private_network);
        widens(
            &op,
            &PolicyConfig {
                allowed_private_hosts: strings(&["127.0.0.1"]),
                ..PolicyConfig::default()
            },
            "policy.allowedPrivateHosts",
        );
        let op = PolicyConfig {
            allowed_private_hosts: strings(&["intranet.example"]),
            blocked_local_ports: vec![3001],
            ..PolicyConfig::operator_default()
        };
        widens(
            &op,
            &PolicyConfig {
                allowed_private_hosts: strings(&["localhost"]),
                ..PolicyConfig::default()
            },
            "policy.allowedPrivateHosts",
        );
        let got = op
            .narrowed_by(&PolicyConfig {
                allowed_private_hosts: strings(&["wiki.intranet.example"]),
                blocked_local_ports: vec![8080],
                ..PolicyConfig::default()
            })
            .unwrap();
        assert_eq!(
            got.allowed_private_hosts,
            strings(&["wiki.intranet.example"])
        );
        assert_eq!(got.blocked_local_ports, vec![3001, 8080]);
        // A permissive operator lets a request block the private network.
        let got = PolicyConfig::default()
            .narrowed_by(&PolicyConfig {
                block_private_network: true,
                ..PolicyConfig::default()
            })
            .unwrap();
        assert!(got.block_private_network);
    }

    #[test]
    fn requests_cannot_widen_actions_and_bad_input_is_invalid() {
        let op = PolicyConfig {
            allowed_actions: Some(strings(&["click", "goto"])),
            ..PolicyConfig::operator_default()
        };
        widens(
            &op,
            &PolicyConfig {
                allowed_actions: Some(strings(&["type"])),
                ..PolicyConfig::default()
            },
            "policy.allowedActions",
        );
        for (req, setting) in [
            (
                PolicyConfig {
                    allowed_actions: Some(strings(&["fly"])),
                    ..PolicyConfig::default()
                },
                "policy.allowedActions",
            ),
            (
                PolicyConfig {
                    allowed_schemes: strings(&["not a scheme"]),
                    ..PolicyConfig::default()
                },
                "policy.allowedSchemes",
            ),
            (
                PolicyConfig {
                    blocked_domains: strings(&["https://x.test/"]),
                    ..PolicyConfig::default()
                },
                "policy.blockedDomains",
            ),
        ] {
            let err = op.narrowed_by(&req).unwrap_err();
            assert_eq!(err.kind, PolicyErrorKind::Invalid, "{err}");
            assert_eq!(err.setting, setting);
        }
    }

    #[test]
    fn model_javascript_can_only_be_narrowed() {
        let js = |on: Option<bool>| PolicyConfig {
            allow_model_javascript: on,
            ..PolicyConfig::default()
        };
        let runs = |p: &PolicyConfig| {
            SessionPolicy::new(p)
                .unwrap()
                .check_action(
                    &lumen_core::Action::JavascriptExec {
                        text: "1 + 1".into(),
                    },
                    "https://example.com/",
                )
                .is_allowed()
        };
        // The operator leaves it off (the default) or turns it off: a
        // request cannot turn it on.
        for op in [PolicyConfig::operator_default(), js(Some(false))] {
            widens(&op, &js(Some(true)), "policy.allowModelJavascript");
            for req in [js(None), js(Some(false))] {
                assert!(!runs(&op.narrowed_by(&req).unwrap()));
            }
        }
        // The operator turns it on: a request keeps it or turns it off.
        let op = js(Some(true));
        assert!(runs(&op.narrowed_by(&js(None)).unwrap()));
        assert!(runs(&op.narrowed_by(&js(Some(true))).unwrap()));
        assert!(!runs(&op.narrowed_by(&js(Some(false))).unwrap()));
        assert!(!runs(&PolicyConfig::default()));
    }

    #[test]
    fn the_operator_default_refuses_dangerous_schemes_and_private_addresses() {
        let p = SessionPolicy::new(&PolicyConfig {
            blocked_local_ports: vec![3001],
            ..PolicyConfig::operator_default()
        })
        .unwrap();
        for (url, rule) in [
            ("file:///etc/passwd", PolicyRule::SchemeNotAllowed),
            ("chrome://settings", PolicyRule::SchemeNotAllowed),
            ("data:text/html,x", PolicyRule::SchemeNotAllowed),
            ("javascript:alert(1)", PolicyRule::SchemeNotAllowed),
            (
                "view-source:https://example.com/",
                PolicyRule::SchemeNotAllowed,
            ),
            (
                "devtools://devtools/bundled/inspector.html",
                PolicyRule::SchemeNotAllowed,
            ),
            ("chrome-devtools://devtools/x", PolicyRule::SchemeNotAllowed),
            (
                "http://169.254.169.254/latest/meta-data/",
                PolicyRule::PrivateNetwork,
            ),
            ("http://127.0.0.1:4000/", PolicyRule::PrivateNetwork),
            ("http://2130706433/", PolicyRule::PrivateNetwork),
            ("http://0x7f.1/", PolicyRule::PrivateNetwork),
            ("http://[::1]/", PolicyRule::PrivateNetwork),
            ("http://[::ffff:127.0.0.1]/", PolicyRule::PrivateNetwork),
            ("http://[fd00::1]/", PolicyRule::PrivateNetwork),
            ("http://[fe80::1]/", PolicyRule::PrivateNetwork),
            ("http://10.1.2.3/", PolicyRule::PrivateNetwork),
            ("http://172.20.0.1/", PolicyRule::PrivateNetwork),
            ("http://192.168.0.1/", PolicyRule::PrivateNetwork),
            ("http://0.0.0.0:3001/", PolicyRule::PrivateNetwork),
            ("http://localhost:8080/", PolicyRule::PrivateNetwork),
            ("http://app.localhost/", PolicyRule::PrivateNetwork),
        ] {
            let d = p.check_url(url);
            assert_eq!(d.denial().map(|d| d.rule), Some(rule), "{url}: {d:?}");
        }
        assert!(p.check_url("https://example.com/").is_allowed());
        assert!(p.check_url("http://8.8.8.8/").is_allowed());
        assert!(p.check_url("about:blank").is_allowed());
    }

    #[test]
    fn allowed_private_hosts_open_loopback_but_never_the_servers_own_port() {
        let p = SessionPolicy::new(&PolicyConfig {
            allowed_private_hosts: strings(&["127.0.0.1"]),
            blocked_local_ports: vec![3001],
            ..PolicyConfig::operator_default()
        })
        .unwrap();
        assert!(p.check_url("http://127.0.0.1:4000/").is_allowed());
        assert!(!p.check_url("http://127.0.0.1:3001/").is_allowed());
        assert!(!p.check_url("http://localhost:4000/").is_allowed());
        assert!(!p.check_url("http://[::1]:4000/").is_allowed());
        // The permissive default (`lumen run`) opens local pages.
        assert!(
            SessionPolicy::default()
                .check_url("http://127.0.0.1:4000/")
                .is_allowed()
        );
    }

    #[test]
    fn names_are_judged_on_the_address_they_resolve_to() {
        let p = SessionPolicy::new(&PolicyConfig::operator_default()).unwrap();
        // `localhost` is refused by name already; a name that merely
        // resolves to loopback is refused once resolved.
        let d = p.check_url_resolved("http://localhost:4000/");
        assert_eq!(d.denial().map(|d| d.rule), Some(PolicyRule::PrivateNetwork));
        let d = p.check_url_resolved("http://localhost./x");
        assert_eq!(d.denial().map(|d| d.rule), Some(PolicyRule::PrivateNetwork));
        // An unresolvable name is refused while the rule applies to it…
        let d = p.check_url_resolved("http://no-such-host.invalid/");
        assert_eq!(d.denial().map(|d| d.rule), Some(PolicyRule::PrivateNetwork));
        // …and not judged at all when the operator exempts it.
        let open = SessionPolicy::new(&PolicyConfig {
            allowed_private_hosts: strings(&["localhost", "*.invalid"]),
            ..PolicyConfig::operator_default()
        })
        .unwrap();
        assert!(
            open.check_url_resolved("http://localhost:4000/")
                .is_allowed()
        );
        assert!(open.check_url_resolved("http://x.invalid/").is_allowed());
        let ports = SessionPolicy::new(&PolicyConfig {
            blocked_local_ports: vec![4000],
            ..PolicyConfig::default()
        })
        .unwrap();
        assert!(
            !ports
                .check_url_resolved("http://localhost:4000/")
                .is_allowed()
        );
        assert!(
            ports
                .check_url_resolved("http://localhost:4001/")
                .is_allowed()
        );
    }
}

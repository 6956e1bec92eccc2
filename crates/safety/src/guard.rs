//! [`ActionGuard`]: the chain every action passes before it runs — the
//! user's [`PreActionHook`]s in order, then the [`SessionPolicy`].

use std::fmt;
use std::sync::Arc;

use lumen_core::{ActionCall, ActionExecution, HookContext, HookDecision, PreActionHook};
use serde::{Deserialize, Serialize};

use crate::policy::{PolicyDecision, PolicyRule, SessionPolicy};

/// Which layer blocked an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "layer",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum BlockedBy {
    /// A pre-action hook, by its position in the chain.
    Hook {
        /// Index in the order the hooks were added.
        index: usize,
    },
    /// The session policy.
    Policy {
        /// The rule.
        rule: PolicyRule,
    },
}

/// The guard's verdict on one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "decision",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum GuardDecision {
    /// Run it.
    Allow,
    /// Do not run it; the model is told `reason`.
    Block {
        /// The layer that refused.
        by: BlockedBy,
        /// Why, for the model.
        reason: String,
    },
}

impl GuardDecision {
    /// Whether the action may run.
    pub fn is_allowed(&self) -> bool {
        matches!(self, GuardDecision::Allow)
    }

    /// The failed execution the model reads for a blocked action (`None`
    /// when allowed). Record `reason` as the `blocked` field of the
    /// semantic [`ActionRecord`](lumen_core::ActionRecord).
    pub fn to_execution(&self) -> Option<ActionExecution> {
        match self {
            GuardDecision::Allow => None,
            GuardDecision::Block { reason, .. } => {
                Some(ActionExecution::failed(format!("Blocked: {reason}")))
            }
        }
    }
}

/// Hooks, then policy. Cheap to clone (everything is shared).
#[derive(Clone, Default)]
pub struct ActionGuard {
    hooks: Vec<Arc<dyn PreActionHook>>,
    policy: Arc<SessionPolicy>,
}

impl fmt::Debug for ActionGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionGuard")
            .field("hooks", &self.hooks.len())
            .field("policy", &self.policy)
            .finish()
    }
}

impl ActionGuard {
    /// A guard with `policy` and no hooks.
    pub fn new(policy: SessionPolicy) -> Self {
        Self {
            hooks: Vec::new(),
            policy: Arc::new(policy),
        }
    }

    /// Adds a hook at the end of the chain.
    pub fn with_hook(mut self, hook: Arc<dyn PreActionHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// The policy (shared, immutable).
    pub fn policy(&self) -> &SessionPolicy {
        &self.policy
    }

    /// Runs the hooks in order (the first deny wins and later hooks are not
    /// asked), then the policy on `call` at `ctx.url`.
    pub async fn check(&self, call: &ActionCall, ctx: &HookContext<'_>) -> GuardDecision {
        for (index, hook) in self.hooks.iter().enumerate() {
            if let HookDecision::Deny { reason } = hook.check(call, ctx).await {
                tracing::debug!(index, %reason, "pre-action hook denied");
                return GuardDecision::Block {
                    by: BlockedBy::Hook { index },
                    reason,
                };
            }
        }
        match self.policy.check_action(&call.action, ctx.url) {
            PolicyDecision::Allow => GuardDecision::Allow,
            PolicyDecision::Deny(d) => GuardDecision::Block {
                by: BlockedBy::Policy { rule: d.rule },
                reason: d.reason,
            },
        }
    }
}

/// A hook that refuses calls carrying provider safety checks
/// ([`ActionCall::safety_checks`]) unless their code is listed as
/// acknowledged: executing such a call counts as acknowledging the check,
/// so by default nobody does it silently.
#[derive(Debug, Clone, Default)]
pub struct ProviderSafetyChecks {
    acknowledged: Vec<String>,
}

impl ProviderSafetyChecks {
    /// Refuses every call with a pending safety check.
    pub fn deny_all() -> Self {
        Self::default()
    }

    /// Lets calls whose checks all have one of these codes through.
    pub fn acknowledging(codes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            acknowledged: codes.into_iter().map(Into::into).collect(),
        }
    }
}

#[async_trait::async_trait]
impl PreActionHook for ProviderSafetyChecks {
    async fn check(&self, call: &ActionCall, _ctx: &HookContext<'_>) -> HookDecision {
        let pending: Vec<_> = call
            .safety_checks
            .iter()
            .filter(|c| !self.acknowledged.contains(&c.code))
            .collect();
        if pending.is_empty() {
            return HookDecision::Allow;
        }
        let list = pending
            .iter()
            .map(|c| format!("{} ({})", c.code, c.message))
            .collect::<Vec<_>>()
            .join("; ");
        HookDecision::Deny {
            reason: format!(
                "the provider flagged this action and nobody confirmed it: {list}. Choose a different action"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use lumen_core::{Action, SafetyCheck};

    use super::*;
    use crate::policy::PolicyConfig;

    /// Records what it saw and answers as configured.
    struct Recording {
        name: &'static str,
        deny: bool,
        log: Arc<Mutex<Vec<&'static str>>>,
    }

    #[async_trait::async_trait]
    impl PreActionHook for Recording {
        async fn check(&self, _call: &ActionCall, _ctx: &HookContext<'_>) -> HookDecision {
            self.log.lock().unwrap().push(self.name);
            if self.deny {
                HookDecision::Deny {
                    reason: format!("{} says no", self.name),
                }
            } else {
                HookDecision::Allow
            }
        }
    }

    fn ctx(url: &str) -> HookContext<'_> {
        HookContext {
            step: 0,
            url,
            instruction: "task",
        }
    }

    fn goto(url: &str) -> ActionCall {
        ActionCall::new("c", Action::Goto { url: url.into() })
    }

    fn guard(log: &Arc<Mutex<Vec<&'static str>>>, denies: [bool; 3]) -> ActionGuard {
        let policy = SessionPolicy::new(&PolicyConfig {
            blocked_domains: vec!["evil.test".into()],
            ..PolicyConfig::default()
        })
        .unwrap();
        let mut g = ActionGuard::new(policy);
        for (name, deny) in ["a", "b", "c"].into_iter().zip(denies) {
            g = g.with_hook(Arc::new(Recording {
                name,
                deny,
                log: log.clone(),
            }));
        }
        g
    }

    #[tokio::test]
    async fn hooks_run_in_order_before_the_policy_and_the_first_deny_wins() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let g = guard(&log, [false, true, true]);
        let d = g
            .check(&goto("https://evil.test/"), &ctx("about:blank"))
            .await;
        assert_eq!(
            d,
            GuardDecision::Block {
                by: BlockedBy::Hook { index: 1 },
                reason: "b says no".into()
            }
        );
        assert_eq!(*log.lock().unwrap(), vec!["a", "b"]);
    }

    #[tokio::test]
    async fn the_policy_judges_what_the_hooks_let_through() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let g = guard(&log, [false, false, false]);
        let d = g
            .check(&goto("https://evil.test/"), &ctx("about:blank"))
            .await;
        assert!(matches!(
            d,
            GuardDecision::Block {
                by: BlockedBy::Policy {
                    rule: PolicyRule::DomainBlocked
                },
                ..
            }
        ));
        let execution = d.to_execution().unwrap();
        assert!(!execution.ok);
        assert!(
            execution
                .error
                .unwrap()
                .starts_with("Blocked: evil.test is blocked")
        );
        assert_eq!(*log.lock().unwrap(), vec!["a", "b", "c"]);
        let ok = g
            .check(&goto("https://fine.test/"), &ctx("about:blank"))
            .await;
        assert!(ok.is_allowed());
        assert_eq!(ok.to_execution(), None);
    }

    #[tokio::test]
    async fn provider_safety_checks_are_refused_unless_acknowledged() {
        let mut call = goto("https://fine.test/");
        call.safety_checks.push(SafetyCheck {
            id: "s1".into(),
            code: "malicious_instructions".into(),
            message: "the page asks for credentials".into(),
        });
        let d = ProviderSafetyChecks::deny_all()
            .check(&call, &ctx("about:blank"))
            .await;
        let HookDecision::Deny { reason } = d else {
            panic!("expected a denial");
        };
        assert!(reason.contains("malicious_instructions"), "{reason}");
        let ack = ProviderSafetyChecks::acknowledging(["malicious_instructions"]);
        assert_eq!(
            ack.check(&call, &ctx("about:blank")).await,
            HookDecision::Allow
        );
        assert_eq!(
            ProviderSafetyChecks::deny_all()
                .check(&goto("https://fine.test/"), &ctx("about:blank"))
                .await,
            HookDecision::Allow
        );
    }
}

//! [`ActionPipeline`]: the one way an action reaches the browser.
//!
//! Whatever chose the action — the model in the loop, the action cache, the
//! confidence gate, `lumen replay`, the server's and MCP's direct tools —
//! it runs through the same stages, in this order:
//!
//! 1. **hooks**, then **policy** ([`ActionGuard`]), judged against the URL
//!    the tab is on *now*, so each action of a multi-action turn is checked
//!    where the previous one left the page;
//! 2. control actions (terminate, delegate, fold, screenshot, writeState;
//!    told apart by [`lumen_core::Action::control`]) stop here and go back
//!    to the caller as a [`lumen_core::ControlRequest`]; only browser
//!    actions reach
//! 3. the **router**;
//! 4. the **after-effect policy**: a navigation the browser's request
//!    filter refused fails the action; where the action landed is judged
//!    again, and a forbidden landing is undone — and the undo checked (the
//!    page the action started from, else `about:blank`; see
//!    [`crate::undo`]);
//! 5. **verification** of the receipt (when enabled);
//! 6. **redaction**: every secret in the result becomes its placeholder.

use lumen_core::{ActionCall, ActionExecution, BrowserTab, HookContext, Result, Size};
use lumen_safety::{ActionGuard, ActionVerifier, GuardDecision, Secrets, Violation};

use crate::router::ActionRouter;

/// Hooks, policy, router, after-effect policy, verification, redaction.
/// Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ActionPipeline {
    guard: ActionGuard,
    router: ActionRouter,
    verify: bool,
}

/// Where an action runs: the step, the task and the viewport.
#[derive(Debug, Clone, Copy)]
pub struct ActionContext<'a> {
    /// Step index (0 outside a run).
    pub step: u32,
    /// The task, for hooks.
    pub instruction: &'a str,
    /// The viewport the action's coordinates refer to.
    pub viewport: Size,
}

/// What the pipeline did with one action.
#[derive(Debug, Clone, PartialEq)]
pub struct Handled {
    /// The result for the model (redacted). For a control action, `control`
    /// holds the request for the caller to carry out.
    pub execution: ActionExecution,
    /// Why a hook or the policy refused it before it ran (redacted).
    pub blocked: Option<String>,
    /// Why its effect was undone (redacted): it ran, but landed somewhere
    /// the policy forbids.
    pub undone: Option<String>,
}

impl ActionPipeline {
    /// A pipeline with these hooks and policy and this router.
    pub fn new(guard: ActionGuard, router: ActionRouter) -> Self {
        Self {
            guard,
            router,
            verify: false,
        }
    }

    /// Checks each browser action's receipt ([`ActionVerifier`]).
    pub fn with_verification(mut self, on: bool) -> Self {
        self.verify = on;
        self
    }

    /// The hooks and policy.
    pub fn guard(&self) -> &ActionGuard {
        &self.guard
    }

    /// The router.
    pub fn router(&self) -> &ActionRouter {
        &self.router
    }

    /// Replaces the router (the loop sizes its zoom captures).
    pub fn set_router(&mut self, router: ActionRouter) {
        self.router = router;
    }

    /// Replaces the hooks and policy.
    pub fn set_guard(&mut self, guard: ActionGuard) {
        self.guard = guard;
    }

    /// Sets whether receipts are verified.
    pub fn set_verification(&mut self, on: bool) {
        self.verify = on;
    }

    /// The secrets results are redacted with.
    pub fn secrets(&self) -> &Secrets {
        self.router.secrets()
    }

    /// Runs `call` through every stage on `tab`.
    ///
    /// # Errors
    /// Only what ends a run: a lost browser, cancellation. Everything else
    /// is an `ok: false` result.
    pub async fn run(
        &self,
        call: &ActionCall,
        tab: &dyn BrowserTab,
        at: ActionContext<'_>,
    ) -> Result<Handled> {
        let url = tab.url().await?;
        let decision = self
            .guard
            .check(
                call,
                &HookContext {
                    step: at.step,
                    url: &url,
                    instruction: at.instruction,
                },
            )
            .await;
        if let (GuardDecision::Block { reason, .. }, Some(execution)) =
            (&decision, decision.to_execution())
        {
            return Ok(Handled {
                execution: self.redacted(execution),
                blocked: Some(self.secrets().redact(reason).into_owned()),
                undone: None,
            });
        }
        if let Some(control) = call.action.control() {
            return Ok(Handled {
                execution: self.redacted(ActionExecution::control(control)),
                blocked: None,
                undone: None,
            });
        }
        let mut execution = self.router.execute(call, tab, at.viewport).await?;
        let undone = self.after_effect(&mut execution, tab).await?;
        if self.verify && call.action.touches_browser() {
            ActionVerifier::new().apply(&call.action, &mut execution);
        }
        Ok(Handled {
            execution: self.redacted(execution),
            blocked: None,
            undone: undone.map(|r| self.secrets().redact(&r).into_owned()),
        })
    }

    /// `execution` with every secret redacted (its text and the effect
    /// receipt; an image is kept as it is). One that cannot be redacted is
    /// replaced by a failure saying so.
    pub fn redacted(&self, mut execution: ActionExecution) -> ActionExecution {
        let image = execution.image.take();
        let mut out = self.secrets().redact_serde(execution).unwrap_or_else(|_| {
            ActionExecution::failed("the result quoted a secret and could not be redacted")
        });
        out.image = image;
        out
    }

    /// Judges where the action landed: a navigation the browser refused
    /// before it was sent (the request filter) fails the action; a
    /// forbidden landing is undone and the undo checked (see
    /// [`crate::undo`]). Returns the reason when either happened.
    async fn after_effect(
        &self,
        execution: &mut ActionExecution,
        tab: &dyn BrowserTab,
    ) -> Result<Option<String>> {
        let Some(effect) = execution.effect.clone() else {
            return Ok(None);
        };
        let policy = self.guard.policy();
        let violations = policy.check_effect(&effect);
        let refused = lumen_safety::apply_blocked_requests(&effect, execution);
        if !violations.is_empty() {
            let fallback =
                crate::undo::undo(tab, policy, &violations, effect.url_before.as_deref()).await?;
            Violation::apply_all(&violations, execution);
            if let (Some(note), Some(error)) = (fallback, execution.error.as_mut()) {
                error.push(' ');
                error.push_str(&note);
            }
        }
        Ok(
            (refused || !violations.is_empty())
                .then(|| execution.error.clone().unwrap_or_default()),
        )
    }
}

#[cfg(test)]
mod tests {
    use lumen_core::{Action, ControlRequest, EffectReceipt, Modifiers, MouseButton};
    use lumen_safety::{PolicyConfig, SessionPolicy};

    use super::*;
    use crate::fake::FakeTab;

    fn pipeline(blocked: &[&str]) -> ActionPipeline {
        let policy = SessionPolicy::new(&PolicyConfig {
            blocked_domains: blocked.iter().map(|d| d.to_string()).collect(),
            ..PolicyConfig::default()
        })
        .unwrap();
        ActionPipeline::new(ActionGuard::new(policy), ActionRouter::new())
    }

    fn at() -> ActionContext<'static> {
        ActionContext {
            step: 0,
            instruction: "test",
            viewport: Size::new(1280, 720),
        }
    }

    fn click() -> ActionCall {
        ActionCall::new(
            "c",
            Action::Click {
                x: 5,
                y: 5,
                button: MouseButton::Left,
                modifiers: Modifiers::NONE,
            },
        )
    }

    #[tokio::test]
    async fn control_actions_come_back_as_requests_without_touching_the_browser() {
        let tab = FakeTab::new("http://a.test/");
        let p = pipeline(&[]);
        let terminate = ActionCall::new(
            "t",
            Action::Terminate {
                status: lumen_core::TerminateStatus::Success,
                result: "42".into(),
            },
        );
        let h = p.run(&terminate, &tab, at()).await.unwrap();
        assert!(h.execution.is_terminate(), "{h:?}");
        let h = p
            .run(&ActionCall::new("s", Action::Screenshot), &tab, at())
            .await
            .unwrap();
        assert_eq!(h.execution.control, Some(ControlRequest::Screenshot));
        assert!(tab.calls().is_empty(), "{:?}", tab.calls());
    }

    /// Each action is judged at the URL the tab is on when it runs, not
    /// where the step began: an earlier action of the turn may have moved.
    #[tokio::test]
    async fn each_action_is_judged_where_the_tab_is_now() {
        let tab = FakeTab::new("http://a.test/");
        let p = pipeline(&["evil.test"]);
        assert!(p.run(&click(), &tab, at()).await.unwrap().execution.ok);
        *tab.url.lock().unwrap() = "http://evil.test/landing".into();
        let h = p.run(&click(), &tab, at()).await.unwrap();
        assert!(h.blocked.is_some() && !h.execution.ok, "{h:?}");
        assert_eq!(
            tab.calls().len(),
            2,
            "the second click never ran: {:?}",
            tab.calls()
        );
    }

    /// A forbidden landing is undone, and the undo checked: when going
    /// back leaves the tab on the forbidden page, it is replaced by
    /// about:blank.
    #[tokio::test]
    async fn an_undo_that_did_not_work_falls_back_to_a_blank_page() {
        let tab = FakeTab::new("http://a.test/");
        *tab.next_effect.lock().unwrap() = Some(EffectReceipt {
            navigated: true,
            url_after: Some("http://evil.test/x".into()),
            ..EffectReceipt::default()
        });
        let p = pipeline(&["evil.test"]);
        let h = p.run(&click(), &tab, at()).await.unwrap();
        assert!(h.undone.is_some() && !h.execution.ok, "{h:?}");
        let calls = tab.calls();
        let back = calls.iter().position(|c| c == "back").expect("went back");
        let blank = calls
            .iter()
            .position(|c| c == "goto about:blank")
            .expect("fell back to about:blank");
        assert!(back < blank, "{calls:?}");
    }

    #[tokio::test]
    async fn results_are_redacted() {
        let tab = FakeTab::new("http://a.test/");
        *tab.fail_next.lock().unwrap() = Some("the field said hunter2-pw".into());
        let secrets = lumen_safety::Secrets::new()
            .with("pw", "hunter2-pw")
            .unwrap();
        let p = ActionPipeline::new(
            ActionGuard::default(),
            ActionRouter::new().with_secrets(std::sync::Arc::new(secrets)),
        );
        let h = p.run(&click(), &tab, at()).await.unwrap();
        assert_eq!(
            h.execution.error.as_deref(),
            Some("the field said <secret:pw>")
        );
    }
}

//! Handing the run to a person ([`HandoffPolicy`]): when the model calls
//! `request_human`, or a policy trigger fires (a step starts on a URL the
//! policy names, the model is about to submit a payment form, the verifier
//! keeps rejecting the answer), the run waits for a person acting in the
//! same tab through a live view ([`RunControl::handoff`]) and goes on with
//! a fresh screenshot and their note. Nobody finishing within the timeout
//! ends the run with [`RunStatus::HandoffTimeout`].
//!
//! [`RunControl::handoff`]: crate::control::RunControl::handoff
//! [`RunStatus::HandoffTimeout`]: lumen_core::RunStatus::HandoffTimeout

use std::time::{Duration, Instant};

use lumen_core::{
    Action, ActionExecution, HandoffPolicy, HandoffTrigger, LumenError, Result, StreamEvent,
};

use super::{PerceptionLoop, RunState};

/// What a run keeps about its hand-overs.
#[derive(Debug, Default)]
pub(super) struct Handoffs {
    /// URLs a URL trigger already handed over on (once per URL).
    urls: Vec<String>,
    /// Whether the rejection trigger already fired.
    after_rejections: bool,
    /// Whether the run handed over at all: a run a person helped is not
    /// compiled into a run script (a replay would skip the person).
    pub(super) any: bool,
    /// Set when nobody finished in time: the run ends with this result.
    pub(super) timed_out: Option<String>,
}

/// How the wait for a person ended.
enum Wait {
    Done(Option<String>),
    Stopped,
    TimedOut,
}

/// How often a hand-over's wait checks that the browser is still there.
const BROWSER_CHECK: Duration = Duration::from_secs(5);

/// How a hand-over ended.
enum Handover {
    /// The person pressed done, with an optional note.
    Done(Option<String>),
    /// Nobody finished in time, or a stop withdrew it.
    Unanswered(String),
}

/// True for a page showing a payment field, in the main frame (a card form
/// inside a payment provider's iframe is not seen).
const PAYMENT_PROBE: &str = r#"(() => {
  const sel = 'input[autocomplete^="cc-"], input[name*="cardnumber" i], input[name*="card_number" i],'
    + ' input[name*="card-number" i], input[name*="cvc" i], input[name*="cvv" i], input[id*="cvc" i],'
    + ' input[id*="cvv" i], input[id*="cardnumber" i], input[id*="card-number" i]';
  return [...document.querySelectorAll(sel)]
    .some(e => e.type !== 'hidden' && e.getClientRects().length > 0);
})()"#;

impl Handoffs {
    /// Takes in a sub-task's hand-overs: it is part of this run (a person
    /// helped it; a timeout there ends this run too).
    pub(super) fn absorb(&mut self, child: Handoffs) {
        self.any |= child.any;
        self.after_rejections |= child.after_rejections;
        for url in child.urls {
            if !self.urls.contains(&url) {
                self.urls.push(url);
            }
        }
        if self.timed_out.is_none() {
            self.timed_out = child.timed_out;
        }
    }
}

impl PerceptionLoop {
    fn handoff_policy(&self) -> Option<&HandoffPolicy> {
        self.config.handoff.as_ref()
    }

    /// At the start of a step (before its screenshot): hands over when a
    /// URL or rejection trigger fires. The person's note reaches the model
    /// as a notice in the step's prompt.
    pub(super) async fn step_triggers(
        &self,
        step: u32,
        url: &str,
        run: &mut RunState,
    ) -> Result<()> {
        let Some(policy) = self.handoff_policy() else {
            return Ok(());
        };
        let (trigger, reason) = if let Some(pattern) = policy
            .matching_url(url)
            .filter(|_| !run.handoffs.urls.iter().any(|u| u == url))
        {
            run.handoffs.urls.push(url.to_owned());
            (
                HandoffTrigger::Url,
                format!("The policy hands pages matching `{pattern}` to a person."),
            )
        } else if policy.after_rejections > 0
            && run.rejections >= policy.after_rejections
            && !run.handoffs.after_rejections
        {
            run.handoffs.after_rejections = true;
            (
                HandoffTrigger::Rejections,
                format!(
                    "The verifier rejected the answer {} times; please check the page and finish or fix what is missing.",
                    run.rejections
                ),
            )
        } else {
            return Ok(());
        };
        let notice = match self.hand_over(step, &reason, trigger, run).await? {
            Handover::Done(note) => done_text(&reason, note.as_deref()),
            Handover::Unanswered(_) => return Ok(()),
        };
        run.notice = Some(match run.notice.take() {
            Some(earlier) => format!("{earlier}\n{notice}"),
            None => notice,
        });
        Ok(())
    }

    /// The model's `request_human`: waits for the person and answers with
    /// their note, or says why nobody can come.
    pub(super) async fn requested_human(
        &self,
        step: u32,
        reason: &str,
        run: &mut RunState,
    ) -> Result<ActionExecution> {
        if self.handoff_policy().is_none() {
            return Ok(ActionExecution::failed(
                "no person can take over in this run: go on without one, or end with \
                 terminate (status failure) saying what a person would have to do",
            ));
        }
        Ok(
            match self
                .hand_over(step, reason, HandoffTrigger::Model, run)
                .await?
            {
                Handover::Done(note) => ActionExecution {
                    output: Some(done_text(reason, note.as_deref())),
                    ..ActionExecution::ok()
                },
                Handover::Unanswered(why) => ActionExecution::failed(why),
            },
        )
    }

    /// Before an action: with `beforePayment` on, a click or an Enter on a
    /// page with a payment field is handed to a person instead of run.
    /// `Some` is the action's answer (it was not executed).
    pub(super) async fn payment_trigger(
        &self,
        step: u32,
        action: &Action,
        run: &mut RunState,
    ) -> Result<Option<ActionExecution>> {
        if !self.handoff_policy().is_some_and(|p| p.before_payment) || !submits(action) {
            return Ok(None);
        }
        let on_payment_page = match self.guarded(self.tab.evaluate(PAYMENT_PROBE)).await {
            Ok(v) => v.as_bool().unwrap_or(false),
            Err(e @ (LumenError::BrowserDisconnected { .. } | LumenError::Cancelled { .. })) => {
                return Err(e);
            }
            Err(e) => {
                tracing::debug!("the payment probe failed: {e}");
                false
            }
        };
        if !on_payment_page {
            return Ok(None);
        }
        let reason =
            "This page takes a payment: please check it and submit it yourself, or leave it.";
        Ok(Some(
            match self
                .hand_over(step, reason, HandoffTrigger::Payment, run)
                .await?
            {
                Handover::Done(note) => ActionExecution {
                    output: Some(format!(
                        "Not executed: the page takes a payment, so a person took over to submit it. {}",
                        done_text(reason, note.as_deref())
                    )),
                    ..ActionExecution::ok()
                },
                Handover::Unanswered(why) => {
                    ActionExecution::failed(format!("not executed: {why}"))
                }
            },
        ))
    }

    /// Resolves when the browser is lost (checked every few seconds): a
    /// hand-over does not hold a dead browser for its whole timeout.
    async fn browser_lost(&self) -> LumenError {
        loop {
            tokio::time::sleep(BROWSER_CHECK).await;
            if let Err(e @ LumenError::BrowserDisconnected { .. }) = self.tab.url().await {
                return e;
            }
        }
    }

    /// Opens a hand-over and waits for the person, bounded by the policy's
    /// timeout. A cancel ends the run; a stop or the timeout leaves it
    /// unanswered (a timeout also ends the run, see [`Handoffs::timed_out`]).
    async fn hand_over(
        &self,
        step: u32,
        reason: &str,
        trigger: HandoffTrigger,
        run: &mut RunState,
    ) -> Result<Handover> {
        let timeout_secs = self.handoff_policy().map_or(600, |p| p.timeout_secs);
        let reason = self.pipeline.secrets().redact(reason).into_owned();
        let (id, mut answer) = self
            .control
            .open_handoff(reason.clone(), trigger, self.tab.clone());
        run.handoffs.any = true;
        self.bus
            .emit(StreamEvent::WaitingForHuman {
                step,
                reason: reason.clone(),
                trigger,
                timeout_secs,
            })
            .await;
        tracing::info!(
            target: lumen_core::logs::LOOP,
            step,
            ?trigger,
            timeout_secs,
            "waiting for a person to take over"
        );
        let started = Instant::now();
        let waited = tokio::select! {
            biased;
            why = self.control.cancelled() => {
                self.control.close_handoff(id);
                return Err(LumenError::Cancelled { reason: why });
            }
            e = self.browser_lost() => {
                self.control.close_handoff(id);
                return Err(e);
            }
            () = self.control.halted() => Wait::Stopped,
            a = tokio::time::timeout(Duration::from_secs(timeout_secs), &mut answer) => match a {
                Ok(Ok(note)) => Wait::Done(note),
                _ => Wait::TimedOut,
            },
        };
        self.control.close_handoff(id);
        // Input the person sent before the close lands before the agent
        // looks at the page again.
        tokio::select! {
            () = self.control.drain_live_input() => {}
            why = self.control.cancelled() => {
                return Err(LumenError::Cancelled { reason: why });
            }
        }
        // A "done" that raced the deadline or the stop still counts: it
        // either landed before the close (and is in the channel) or was
        // told that nothing waits any more.
        let waited = match (waited, answer.try_recv()) {
            (Wait::Done(note), _) | (_, Ok(note)) => Wait::Done(note),
            (other, _) => other,
        };
        match waited {
            Wait::Done(note) => {
                let note = note
                    .map(|n| self.pipeline.secrets().redact(n.trim()).into_owned())
                    .filter(|n| !n.is_empty());
                self.bus
                    .emit(StreamEvent::HumanDone {
                        step,
                        note: note.clone(),
                        waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    })
                    .await;
                Ok(Handover::Done(note))
            }
            Wait::Stopped => Ok(Handover::Unanswered(
                "the hand-over was withdrawn: the run is stopping".into(),
            )),
            Wait::TimedOut => {
                let why = format!("nobody took over within {timeout_secs} s (asked: {reason})");
                run.handoffs.timed_out = Some(why.clone());
                Ok(Handover::Unanswered(why))
            }
        }
    }
}

/// What the model is told once a person finished.
fn done_text(reason: &str, note: Option<&str>) -> String {
    let mut text = format!(
        "A person took over the browser ({}) and said they are done; the next screenshot shows the page as they left it.",
        reason.trim_end_matches('.')
    );
    if let Some(note) = note {
        text.push_str(&format!(" Their note: {note}"));
    }
    text
}

/// Whether an action may submit a form: a click, or Enter.
pub(super) fn submits(action: &Action) -> bool {
    let enter = |k: &str| {
        k.split('+').any(|k| {
            matches!(
                k.trim().to_ascii_lowercase().as_str(),
                "enter" | "return" | "kp_enter"
            )
        })
    };
    match action {
        Action::Click { .. }
        | Action::DoubleClick { .. }
        | Action::TripleClick { .. }
        | Action::ClickRef { .. }
        | Action::MouseUp { .. }
        // A script can submit the form itself.
        | Action::JavascriptExec { .. } => true,
        Action::KeyPress { keys } | Action::HoldKey { keys, .. } => keys.iter().any(|k| enter(k)),
        Action::KeyDown { key } => enter(key),
        Action::Type { text } => text.ends_with(['\n', '\r']),
        _ => false,
    }
}

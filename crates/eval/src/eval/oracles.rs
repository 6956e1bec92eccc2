//! The offline suites' oracles: the scripted "model" and the checker.
//!
//! - replica sites: [`script`] loads each turn's `at` page and reads the
//!   centre of every target and the text of every `answerFrom` element into
//!   the turn's script steps, before the run;
//! - MiniWoB++: [`LiveOracle`] plans each turn from the page as the loop's
//!   screenshot shows it, during the run ([`miniwob_turn`]);
//! - [`check`] decides a replica run from the run, the answer
//!   ([`answer_matches`]) and the page state read back from the tab.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use lumen::BrowserTab;
use lumen::browser::CdpTab;
use lumen_mock::FixtureServer;
use lumen_mock::mock_provider::MockProvider;
use lumen_mock::mock_provider::trajectory::{ScriptStep, Wire};
use serde_json::Value;

use super::catalogue::{OracleAction, ReplicaTask};
use super::miniwob::{self, MiniWobTask, OracleStep};
use super::report::Verdict;
use super::runner::Run;

/// The oracle's reading of one replica task: the turns as script steps.
pub(crate) async fn script(
    task: &ReplicaTask,
    server: &FixtureServer,
    tab: &CdpTab,
) -> anyhow::Result<Vec<Vec<ScriptStep>>> {
    let mut turns = Vec::new();
    for turn in &task.turns {
        goto(tab, &server.url(&turn.at)).await?;
        let mut steps = Vec::new();
        for action in &turn.actions {
            steps.push(match action {
                OracleAction::Click { click } => {
                    let (x, y) = centre(tab, click, &turn.at).await?;
                    ScriptStep::Click(x, y)
                }
                OracleAction::TypeInto { r#type, text } => {
                    let (x, y) = centre(tab, r#type, &turn.at).await?;
                    ScriptStep::TypeAt(x, y, text.clone())
                }
                OracleAction::Key { key } => ScriptStep::Key(key.clone()),
                OracleAction::Done { done } => ScriptStep::Done(done.clone()),
                OracleAction::AnswerFrom { answer_from } => {
                    let mut parts = Vec::new();
                    for selector in answer_from {
                        parts.push(text_of(tab, selector, &turn.at).await?);
                    }
                    ScriptStep::Done(parts.join(", "))
                }
            });
        }
        turns.push(steps);
    }
    Ok(turns)
}

/// A MiniWoB++ oracle turn as script steps: its actions, or `Done` when it
/// has none left (the episode is over).
pub(crate) fn miniwob_turn(plan: Vec<OracleStep>) -> Vec<ScriptStep> {
    if plan.is_empty() {
        return vec![ScriptStep::Done("done".into())];
    }
    plan.into_iter()
        .map(|s| match s {
            OracleStep::Click(x, y) => ScriptStep::Click(x, y),
            OracleStep::Hover(x, y) => ScriptStep::Hover(x, y),
            OracleStep::TypeAt(x, y, t) => ScriptStep::TypeAt(x, y, t),
            OracleStep::Key(k) => ScriptStep::Key(k),
        })
        .collect()
}

/// The MiniWoB++ "model": when a step's screenshot is taken (just before
/// the loop asks the model), it runs the task's oracle on the page as it is
/// then and queues that turn's answer on the mock in the wire's format. So
/// a task can take as many turns as it needs (open a picker, then choose in
/// it), each planned from the page the screenshot shows.
///
/// It answers inside `on_event`, which monitors are asked to keep short: here
/// the wait stands in for the model's thinking, which the loop waits for
/// anyway, and `block_in_place` keeps the runtime's other tasks (the CDP
/// connection among them) running meanwhile.
pub(crate) struct LiveOracle {
    task: MiniWobTask,
    wire: Wire,
    tab: Arc<CdpTab>,
    mock: Arc<MockProvider>,
    size: (u32, u32),
    runtime: tokio::runtime::Handle,
    turns: std::sync::atomic::AtomicUsize,
    errors: std::sync::Mutex<Vec<String>>,
}

impl LiveOracle {
    /// An oracle for `task`, answering on `mock` in `wire`'s format for a
    /// viewport of `size`; it must be created inside the multi-thread
    /// runtime the run uses.
    pub(crate) fn new(
        task: MiniWobTask,
        wire: Wire,
        tab: Arc<CdpTab>,
        mock: Arc<MockProvider>,
        size: (u32, u32),
    ) -> LiveOracle {
        LiveOracle {
            task,
            wire,
            tab,
            mock,
            size,
            runtime: tokio::runtime::Handle::current(),
            turns: std::sync::atomic::AtomicUsize::new(0),
            errors: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The turns the oracle could not plan, as messages, emptying the list.
    pub(crate) fn take_errors(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .errors
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    async fn plan(&self, turn: usize) -> anyhow::Result<Vec<ScriptStep>> {
        let answer = eval(&self.tab, &miniwob::oracle_js(&self.task, turn)).await?;
        Ok(miniwob_turn(miniwob::parse_oracle(&answer)?))
    }
}

impl lumen::LoopMonitor for LiveOracle {
    fn on_event(&self, event: &lumen::StreamEvent) {
        if !matches!(event, lumen::StreamEvent::Screenshot { .. }) {
            return;
        }
        let turn = self.turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let planned = if self.runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        {
            tokio::task::block_in_place(|| self.runtime.block_on(self.plan(turn)))
        } else {
            Err(anyhow::anyhow!(
                "the live oracle needs a multi-thread runtime"
            ))
        };
        let steps = planned.unwrap_or_else(|error| {
            let text = format!("oracle turn {turn}: {error:#}");
            self.errors
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(text.clone());
            vec![ScriptStep::Done(text)]
        });
        self.mock
            .push(self.wire.route(), self.wire.turn(turn, &steps, self.size));
    }
}

/// Whether the answer contains every expected string (case-insensitive).
pub(crate) fn answer_matches(answer: Option<&str>, expected: &[String]) -> Result<(), String> {
    let answer = answer.unwrap_or_default().to_lowercase();
    match expected
        .iter()
        .find(|e| !answer.contains(&e.to_lowercase()))
    {
        None => Ok(()),
        Some(missing) => Err(format!("the answer lacks {missing:?}")),
    }
}

/// The checker: the run succeeded, used every scripted turn, answered with
/// the expected strings, and left the page in the expected state.
pub(crate) async fn check(
    task: &ReplicaTask,
    run: &Run,
    tab: &CdpTab,
    unused_turns: usize,
) -> Verdict {
    let fail = |reason: String| Verdict {
        pass: false,
        reason,
    };
    if run.status() != "success" {
        let error = run
            .result
            .as_ref()
            .and_then(|r| r.error.as_ref())
            .map_or_else(String::new, |e| format!(": {}", e.message));
        return fail(format!("the run ended with {}{error}", run.status()));
    }
    if unused_turns > 0 {
        return fail(format!(
            "{unused_turns} scripted turn(s) were never requested"
        ));
    }
    if let Err(reason) = answer_matches(run.answer().as_deref(), &task.expect.answer) {
        return fail(reason);
    }
    if let Some(state) = &task.expect.state {
        match eval(tab, &format!("Boolean({state})")).await {
            Ok(Value::Bool(true)) => {}
            Ok(other) => return fail(format!("page state check returned {other}: {state}")),
            Err(error) => return fail(format!("page state check failed: {error:#}")),
        }
    }
    Verdict {
        pass: true,
        reason: "expected answer and page state".into(),
    }
}

pub(crate) async fn goto(tab: &CdpTab, url: &str) -> anyhow::Result<()> {
    let outcome = tab
        .goto(url)
        .await
        .map_err(|e| anyhow::anyhow!("opening {url}: {e}"))?;
    if !outcome.ok {
        bail!("opening {url} failed: {:?}", outcome.error);
    }
    Ok(())
}

pub(crate) async fn eval(tab: &CdpTab, js: &str) -> anyhow::Result<Value> {
    tab.evaluate(js)
        .await
        .map_err(|e| anyhow::anyhow!("evaluating JavaScript: {e}"))
}

/// The centre of the first element matching `selector`, in viewport pixels.
async fn centre(tab: &CdpTab, selector: &str, page: &str) -> anyhow::Result<(i32, i32)> {
    match lumen_mock::element_center(tab, selector).await {
        Ok(Some(p)) => Ok((p.x, p.y)),
        Ok(None) => bail!("oracle: no element {selector:?} on {page}"),
        Err(e) => Err(anyhow::anyhow!("evaluating JavaScript: {e}")),
    }
}

/// The trimmed text of the first element matching `selector`.
async fn text_of(tab: &CdpTab, selector: &str, page: &str) -> anyhow::Result<String> {
    let sel = serde_json::to_string(selector)?;
    let js = format!(
        "(() => {{ const e = document.querySelector({sel}); return e ? e.textContent.trim() : null; }})()"
    );
    eval(tab, &js)
        .await?
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("oracle: no element {selector:?} on {page}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_check_is_case_insensitive_and_needs_every_part() {
        let want = vec!["Salt Road".to_owned(), "6.50".to_owned()];
        assert!(answer_matches(Some("The salt road, £6.50"), &want).is_ok());
        assert!(answer_matches(Some("The Salt Road"), &want).is_err());
        assert!(answer_matches(None, &want).is_err());
        assert!(answer_matches(None, &[]).is_ok());
    }

    #[test]
    fn an_oracle_turn_without_actions_finishes_the_run() {
        assert_eq!(miniwob_turn(Vec::new()), [ScriptStep::Done("done".into())]);
        assert_eq!(
            miniwob_turn(vec![
                OracleStep::Click(1, 2),
                OracleStep::Hover(3, 4),
                OracleStep::TypeAt(5, 6, "x".into()),
                OracleStep::Key("Enter".into()),
            ]),
            [
                ScriptStep::Click(1, 2),
                ScriptStep::Hover(3, 4),
                ScriptStep::TypeAt(5, 6, "x".into()),
                ScriptStep::Key("Enter".into()),
            ]
        );
    }
}

//! Run scripts in the loop: a task's saved script is loaded on its first
//! step and replayed step by step while its guards hold
//! ([`lumen_memory::cache`]); a successful run is compiled into the
//! script its task reruns from.

use lumen_core::{Action, ActionCall, ModelResponse, Result, TerminateStatus};
use lumen_memory::cache::{ScriptStep, ScriptTarget};
use lumen_memory::{RunScript, ScriptKey};

use super::{Done, PerceptionLoop, RunState, StepScope, soft};

/// A saved script being replayed: which of its steps comes next.
#[derive(Debug)]
pub(super) struct ScriptReplay {
    script: RunScript,
    next: usize,
}

/// The stop reason of a step replayed from a run script.
pub(super) const REPLAYED: &str = "run_script";

/// Notes that the run stops replaying its script at `step`, and why.
fn script_left(step: u32, why: &str) {
    tracing::info!(
        target: lumen_core::logs::LOOP,
        step,
        why,
        "the run script no longer matches the page; the model takes over"
    );
}

impl PerceptionLoop {
    /// The saved script of this task, if the cache holds one.
    pub(super) fn load_script(&self, instruction: &str, url: &str) -> Option<ScriptReplay> {
        let script = self
            .cache
            .as_ref()?
            .load(&self.script_key(url, instruction))?;
        tracing::info!(
            target: lumen_core::logs::LOOP,
            steps = script.steps.len(),
            "replaying a saved run script while the page matches it"
        );
        Some(ScriptReplay { script, next: 0 })
    }

    /// Replays the script's next step when the page still is the one it was
    /// taken on: the same URL and screenshot size, a screenshot alike to its
    /// hash, and before each action the same element under its point (and,
    /// before the final answer, the same page text). `Ok(None)` when nothing
    /// was replayed: the model is asked, and the script is given up for the
    /// rest of the run. A guard or action that fails after the step's first
    /// action ends the step there.
    pub(super) async fn replay_step(
        &self,
        scope: StepScope<'_>,
        run: &mut RunState,
        done: &mut Vec<Done>,
        terminated: &mut Option<(TerminateStatus, String)>,
    ) -> Result<Option<ModelResponse>> {
        let StepScope {
            step, url, shot, ..
        } = scope;
        let Some(mut replay) = run.script.take() else {
            return Ok(None);
        };
        let Some(planned) = replay.script.steps.get(replay.next).cloned() else {
            return Ok(None);
        };
        if !planned.same_url(url) {
            script_left(step, "the page's address is not the script's");
            return Ok(None);
        }
        let threshold = self.cache.as_ref().map_or(1.0, |c| c.threshold());
        let alike = {
            let (planned, image) = (planned.clone(), shot.image.clone());
            tokio::task::spawn_blocking(move || planned.similarity(&image)).await
        };
        match alike {
            Ok(Ok(alike)) if alike >= threshold => {}
            Ok(Ok(alike)) => {
                script_left(
                    step,
                    &format!("the page looks different ({alike:.2} alike)"),
                );
                return Ok(None);
            }
            Ok(Err(e)) => {
                script_left(step, &e.to_string());
                return Ok(None);
            }
            Err(joined) => {
                script_left(step, &joined.to_string());
                return Ok(None);
            }
        }
        let mut calls = Vec::new();
        let mut holds = true;
        for (i, planned_action) in planned.actions.iter().enumerate() {
            if let Some(why) = self.guard_differs(&planned, planned_action).await? {
                script_left(step, &why);
                holds = false;
                if i == 0 {
                    return Ok(None);
                }
                break;
            }
            let call = ActionCall::new(format!("replay_{step}_{i}"), planned_action.action.clone());
            self.handle(call.clone(), scope, run, done, terminated)
                .await?;
            calls.push(call);
            let Some(d) = done.last_mut() else { break };
            if !d.record.execution.ok {
                script_left(step, "a replayed action failed");
                holds = false;
                break;
            }
            d.record
                .execution
                .hints
                .push("replayed from the saved run script".into());
        }
        if holds {
            replay.next += 1;
            run.script = Some(replay);
        }
        run.replayed_steps += 1;
        Ok(Some(ModelResponse {
            turn: lumen_core::AssistantTurn {
                calls,
                ..Default::default()
            },
            usage: Default::default(),
            stop_reason: Some(REPLAYED.into()),
        }))
    }

    /// Why `action` of the script's `planned` step must not be replayed on
    /// the page as it is now, if it must not.
    async fn guard_differs(
        &self,
        planned: &ScriptStep,
        action: &lumen_memory::cache::ScriptAction,
    ) -> Result<Option<String>> {
        if lumen_memory::cache::guarded_by_element(&action.action) {
            let point = action.action.point();
            let place = match point {
                Some(at) => format!("at ({}, {})", at.x, at.y),
                None => "with the focus".to_owned(),
            };
            let Some(target) = &action.target else {
                return Ok(Some(format!("the script kept no element {place}")));
            };
            let now = match point {
                Some(at) => self.guarded(self.tab.element_at(at)).await,
                None => self.guarded(self.tab.focused_element()).await,
            };
            let now = match soft(now)? {
                // Seen as the script saw it: with the run's secrets masked.
                Ok(now) => now.map(|e| match self.pipeline.secrets().redact_serde(e) {
                    Ok(e) | Err(e) => e,
                }),
                Err(e) => return Ok(Some(format!("the element {place} is unknown: {e}"))),
            };
            let same = match point {
                Some(_) => now.as_ref().is_some_and(|e| target.matches(e)),
                None => ScriptTarget::of_focus(now.as_ref()) == *target,
            };
            if !same {
                return Ok(Some(format!(
                    "the element {place} is not the <{}> the script acted on",
                    target.tag
                )));
            }
        }
        // The answer, and state written on its step, come from the page's
        // words, which the screenshot's hash cannot see.
        if matches!(
            action.action,
            Action::Terminate { .. } | Action::WriteState { .. }
        ) {
            let text = match soft(self.guarded(self.tab.page_text()).await)? {
                Ok(text) => text,
                Err(e) => return Ok(Some(format!("the page text is unknown: {e}"))),
            };
            if !planned.text_matches(&text) {
                return Ok(Some(
                    "the page's text differs from the script's answer page".into(),
                ));
            }
        }
        Ok(None)
    }

    /// The cache key of `instruction` started on `url`: the instruction
    /// and the caller's extra system prompt with secret values as their
    /// placeholders, as the saved script holds them.
    fn script_key(&self, url: &str, instruction: &str) -> ScriptKey {
        let secrets = self.pipeline.secrets();
        let prompt = self
            .config
            .user_prompt
            .as_deref()
            .map(|p| secrets.redact(p));
        ScriptKey::new(url, &secrets.redact(instruction)).with_prompt(prompt.as_deref())
    }

    /// Compiles the successful run into the cache's script for its task,
    /// secrets scrubbed. A run replayed whole leaves the script as it was,
    /// and one that did not start from an empty history (a continued run:
    /// its history holds an earlier task's steps; a resumed one) saves none.
    /// Failures are logged: a script is an optimisation, never the run.
    pub(super) async fn save_script(&self, instruction: &str, run: &RunState, fresh: bool) {
        let Some(cache) = &self.cache else { return };
        let steps = run.history.semantic();
        let Some(first) = steps.first() else { return };
        if !fresh || first.step != 0 || run.replayed_steps as usize == steps.len() {
            return;
        }
        let text = match self.guarded(self.tab.page_text()).await {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!("no run script saved: the final page text is unknown: {e}");
                return;
            }
        };
        let key = self.script_key(&first.url, instruction);
        let steps = steps.to_vec();
        let compiled =
            tokio::task::spawn_blocking(move || RunScript::compile(key, &steps, &text)).await;
        let script = match compiled {
            Ok(Ok(Some(script))) => script,
            Ok(Ok(None)) => return,
            Ok(Err(e)) => return tracing::warn!("no run script saved: {e}"),
            Err(e) => return tracing::warn!("no run script saved: {e}"),
        };
        let scrubbed = serde_json::to_value(&script).and_then(|mut v| {
            self.pipeline.secrets().redact_json(&mut v);
            serde_json::from_value::<RunScript>(v)
        });
        match scrubbed {
            Ok(script) => {
                if let Err(e) = cache.save(&script) {
                    tracing::warn!("the run script could not be saved: {e}");
                }
            }
            Err(e) => tracing::warn!("no run script saved: {e}"),
        }
    }
}

//! [`Session`]: one tab, one adapter and the history of the tasks run on
//! them, and the one place the run modes live.
//!
//! - `options.rs`: [`SessionOptions`], how a session runs.
//! - `modes.rs`: [`RunMode`] and the modes (plan, agent, exec with
//!   retries), the planner pass and opening the start URL.
//! - here: building the loop, running it, snapshots.

use std::sync::Arc;

use lumen_core::{BrowserTab, LumenError, ModelAdapter, Result, RunResult};
use lumen_memory::{HistoryManager, SerializedHistory, StateStore};
use lumen_perception::budget::Pricing;
use lumen_perception::control::RunControl;
use lumen_perception::gate::ConfidenceGate;
use lumen_perception::monitor::{EventBus, EventSender};
use lumen_perception::router::ActionRouter;
use lumen_perception::{LoopConfig, PerceptionLoop, RunState};
use lumen_safety::{ActionGuard, Secrets, SessionPolicy};

mod modes;
mod options;

pub use modes::RunMode;
pub use options::SessionOptions;

/// One browser tab, one adapter, and the history of the tasks run on them.
///
/// A session runs a task in one of three modes ([`RunMode`], through
/// [`run_mode`](Self::run_mode), which first opens the start URL when one is
/// given):
///
/// - **plan** ([`plan`](Self::plan)): one call to the planner (the planner
///   adapter when one is set, otherwise the session's adapter) on a
///   screenshot of the current page; the plan is the result, no action is
///   taken.
/// - **agent**: the planner pass when a planner adapter is set
///   ([`set_planner`](Self::set_planner)), its plan shown in every step's
///   prompt, then the loop ([`run`](Self::run)) until the task ends.
/// - **exec** ([`exec`](Self::exec)): agent mode with a retry budget: up to
///   `attempts` runs, each failed attempt's reason fed to the next as
///   guidance, in the same browser with the task state carried over.
///
/// [`Agent`](crate::Agent), the CLI and the server all run their tasks
/// through these methods.
pub struct Session {
    perception: PerceptionLoop,
    run: RunState,
    secrets: Arc<Secrets>,
    tab: Arc<dyn BrowserTab>,
    adapter: Arc<dyn ModelAdapter>,
    planner: Option<Arc<dyn ModelAdapter>>,
    /// The policy as a request filter, until installed on the tab
    /// ([`install_request_filter`](Self::install_request_filter)).
    request_filter: Option<Arc<dyn lumen_core::RequestFilter>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("loop", &self.perception)
            .field("steps", &self.run.history.step_count())
            .field(
                "planner",
                &self.planner.as_ref().map(|p| p.info().model_id.clone()),
            )
            .finish()
    }
}

/// The registry's list prices of the model `info` names, for the run's
/// cost and its cost budget (see [`check_cost_budget`]).
pub(crate) fn pricing(info: &lumen_core::ModelInfo, max_cost_usd: Option<f64>) -> Result<Pricing> {
    let model = model_name(info);
    check_cost_budget(&model, max_cost_usd)?;
    let note = lumen_models::registry::cost_note(&model);
    Ok(
        Pricing::new(move |usage| lumen_models::registry::cost(&model, usage))
            .with_note(move || note.clone()),
    )
}

/// A cost budget that is not a positive number, or is set for a `model`
/// without a published price, is a configuration error naming the fix.
fn check_cost_budget(model: &str, max_cost_usd: Option<f64>) -> Result<()> {
    let Some(max) = max_cost_usd else {
        return Ok(());
    };
    if !(max.is_finite() && max > 0.0) {
        return Err(LumenError::config(
            "max cost",
            format!("{max} is not a positive number of US dollars"),
        ));
    }
    let probe = lumen_core::TokenUsage {
        input_tokens: 1,
        ..Default::default()
    };
    if lumen_models::registry::cost(model, &probe).is_none() {
        return Err(LumenError::config(
            "max cost",
            format!(
                "{model} has no published price, so a cost budget cannot be checked; \
                 use a token budget (max tokens) instead"
            ),
        ));
    }
    Ok(())
}

/// `provider/id` of a model's info.
fn model_name(info: &lumen_core::ModelInfo) -> String {
    format!("{}/{}", info.provider, info.model_id)
}

/// The pricing of a session's loop: the main model's list prices, and the
/// verifier's model's for its tokens. An adapter that switched to a
/// fallback model ([`lumen_models::fallback`]) is priced at the dearer of
/// the first and the current model's prices for all its tokens: an upper
/// bound, so a cost budget still holds; no estimate when either has no
/// price.
fn session_pricing(
    adapter: &Arc<dyn ModelAdapter>,
    verifier: Option<&dyn lumen_core::Verifier>,
    max_cost_usd: Option<f64>,
) -> Result<Pricing> {
    let first = model_name(adapter.info());
    check_cost_budget(&first, max_cost_usd)?;
    let (live, named) = (adapter.clone(), first.clone());
    let cost = move |usage: &lumen_core::TokenUsage| {
        let at_first = lumen_models::registry::cost(&first, usage)?;
        let now = model_name(live.info());
        if now == first {
            return Some(at_first);
        }
        Some(at_first.max(lumen_models::registry::cost(&now, usage)?))
    };
    let live = adapter.clone();
    let note = move || {
        let now = model_name(live.info());
        lumen_models::registry::cost_note(&now)
            .or_else(|| lumen_models::registry::cost_note(&named))
    };
    let mut priced = Pricing::new(cost).with_note(note);
    if let Some(model) = verifier.and_then(|v| v.model()) {
        priced = priced.with_verifier(&pricing(model, None)?);
    }
    Ok(priced)
}

impl Session {
    /// A session on `tab` with `adapter`. Fails only on invalid options (a
    /// malformed policy pattern), naming the setting to fix.
    pub fn new(
        tab: Arc<dyn BrowserTab>,
        adapter: Arc<dyn ModelAdapter>,
        options: SessionOptions,
    ) -> Result<Self> {
        Self::build(tab, adapter, options, None, None)
    }

    /// A session that continues a serialized run: the next step is the one
    /// after the last recorded step; nothing is repeated or lost.
    pub fn resume(
        tab: Arc<dyn BrowserTab>,
        adapter: Arc<dyn ModelAdapter>,
        options: SessionOptions,
        snapshot: SerializedHistory,
    ) -> Result<Self> {
        Self::build(tab, adapter, options, Some(snapshot), None)
    }

    pub(crate) fn build(
        tab: Arc<dyn BrowserTab>,
        adapter: Arc<dyn ModelAdapter>,
        options: SessionOptions,
        snapshot: Option<SerializedHistory>,
        stream: Option<EventSender>,
    ) -> Result<Self> {
        let policy = SessionPolicy::new(&options.policy)?;
        let request_filter = lumen_safety::request_filter(&policy);
        let mut guard = ActionGuard::new(policy);
        for hook in &options.hooks {
            guard = guard.with_hook(hook.clone());
        }
        let secrets = Arc::new(options.secrets.clone());
        // Logs (the CDP surface reads pages back) scrub them while the
        // session lives.
        crate::logging::scrub(&secrets);
        let mut bus = EventBus::new();
        for m in &options.monitors {
            bus = bus.with_monitor(m.clone());
        }
        for r in &options.recorders {
            bus = bus.with_recorder(r.clone());
        }
        if let Some(s) = stream {
            bus = bus.with_stream(s);
        }
        let user_prompt = match (&options.system_prompt, secrets.prompt_block()) {
            (Some(p), Some(s)) => Some(format!("{p}\n{s}")),
            (p, s) => p.clone().or(s),
        };
        let config = LoopConfig {
            max_steps: options.max_steps,
            screenshot: options.screenshot.clone(),
            history: options.history,
            confidence_gate: options.confidence_gate.map(ConfidenceGate::new),
            checkpoint_interval: options.checkpoint_interval,
            action_verifier: options.action_verifier,
            user_prompt,
            max_tokens: options.max_tokens,
            max_cost_usd: options.max_cost_usd,
            max_failures: options.max_failures,
            max_actions_per_turn: options.max_actions_per_turn,
            run_id: options.run_id.clone(),
            handoff: options.handoff.clone(),
            pricing: Some(session_pricing(
                &adapter,
                options.verifier.as_deref(),
                options.max_cost_usd,
            )?),
            ..LoopConfig::default()
        };
        let run = match snapshot {
            Some(snap) => {
                let (history, state) = HistoryManager::resume(snap, options.history);
                let mut store = StateStore::new();
                store.restore(state)?;
                RunState::resume(history, store, &config)
            }
            None => RunState::new(&config),
        };
        let router = ActionRouter::new()
            .with_settle(options.settle)
            .with_secrets(secrets.clone());
        let mut perception = PerceptionLoop::new(tab.clone(), adapter.clone(), config)
            .with_router(router)
            .with_guard(guard)
            .with_bus(bus);
        if let Some(v) = &options.verifier {
            perception = perception.with_verifier(v.clone());
        }
        if let Some(kb) = &options.site_kb {
            perception = perception.with_site_kb(kb.clone());
        }
        if let Some(w) = &options.workflows {
            perception = perception.with_workflows(w.clone());
        }
        if let Some(c) = &options.cache {
            perception = perception.with_cache(c.clone());
        }
        Ok(Self {
            perception,
            run,
            secrets,
            tab,
            adapter,
            planner: None,
            request_filter,
        })
    }

    /// Has the tab refuse, before they are sent, the requests the policy
    /// denies (every tab, popup, frame and redirect of the browser; see
    /// docs/security.md). Done once, before the first page is opened; an
    /// open policy installs nothing. A tab that cannot filter requests
    /// keeps the after-the-fact checks only.
    pub async fn install_request_filter(&mut self) -> Result<()> {
        if let Some(filter) = self.request_filter.take()
            && !self.tab.install_request_filter(filter).await?
        {
            tracing::debug!(
                "this browser cannot filter requests; the policy judges where actions led"
            );
        }
        Ok(())
    }

    /// Runs the loop on `instruction` until it ends, from the page the tab
    /// shows, with the plan set by [`set_plan`](Self::set_plan) if any (no
    /// planner pass: [`run_mode`](Self::run_mode) does that). Action
    /// failures are inside the result; only setup problems are errors, and
    /// there are none left here.
    pub async fn run(&mut self, instruction: &str) -> RunResult {
        if let Err(e) = self.install_request_filter().await {
            tracing::warn!("the request filter could not be installed: {e}");
        }
        self.perception.run(instruction, &mut self.run).await
    }

    /// Forgets the previous run: the next one starts with a fresh history,
    /// step budget and task state, in the browser as it is.
    pub fn new_run(&mut self) {
        self.run = RunState::new(self.perception.config());
    }

    /// Starts a follow-on task in the same browser with a fresh history and
    /// step budget (the task state carries over).
    pub async fn add_task(&mut self, instruction: &str) -> RunResult {
        self.begin_task();
        self.run(instruction).await
    }

    /// What [`add_task`](Self::add_task) does before it runs: a fresh
    /// history and step budget, the task state carried over. Lets a caller
    /// snapshot the task boundary ([`save`](Self::save)) or run the next
    /// task in a mode ([`run_mode`](Self::run_mode)), as the server does
    /// for a run's follow-on tasks.
    pub fn begin_task(&mut self) {
        let state = self.run.state.clone();
        self.run = RunState::resume(
            HistoryManager::new(self.perception.config().history),
            state,
            self.perception.config(),
        );
    }

    /// Sets a plan shown in every step's prompt (from a planner pass).
    pub fn set_plan(&mut self, plan: Option<String>) {
        let mut config = self.perception.config().clone();
        config.plan = plan.filter(|p| !p.trim().is_empty());
        self.perception = self.perception.clone().with_config(config);
    }

    /// Steers the following runs with `control` (the agent keeps one handle
    /// across sessions; a server creates it before the run starts, so a
    /// queued run can already be cancelled or given guidance).
    pub fn set_control(&mut self, control: RunControl) {
        self.perception = self.perception.clone().with_control(control);
    }

    /// Cancel, pause/resume, stop and guidance for the running task.
    pub fn control(&self) -> RunControl {
        self.perception.control().clone()
    }

    /// A versioned snapshot to resume from. Secret values never enter the
    /// history (the model only sees placeholders); [`save`](Self::save)
    /// scrubs once more on the way to disk. The semantic history (every
    /// screenshot) is included when asked for.
    pub fn serialize(&self, include_semantic: bool) -> SerializedHistory {
        self.run
            .history
            .to_serialized(self.run.state.get(), include_semantic)
    }

    /// Saves the snapshot to `path` (as [`save`](Self::save) does, without
    /// the semantic history) after every completed step of the following
    /// runs, so a run killed mid-way can be resumed from its last completed
    /// step with [`Session::resume`]. A failed write is logged and does not
    /// disturb the run.
    pub fn save_after_each_step(&mut self, path: impl Into<std::path::PathBuf>) {
        let path = path.into();
        let secrets = self.secrets.clone();
        let hook: lumen_perception::StepHook = Arc::new(move |run: &RunState| {
            let secrets = secrets.clone();
            let saved = run
                .history
                .to_serialized(run.state.get(), false)
                .save_with(&path, move |v| secrets.redact_json(v));
            if let Err(e) = saved {
                tracing::warn!("the session snapshot could not be saved: {e}");
            }
        });
        self.perception = self.perception.clone().with_step_hook(hook);
    }

    /// Hands the snapshot (as [`save`](Self::save) writes it: without the
    /// semantic history, every secret value replaced by its placeholder) to
    /// `sink` after every completed step of the following runs, on the
    /// loop's thread, after the step's `step_completed` event was recorded:
    /// for a store other than a file (the server's database). `sink` should
    /// hand the value on rather than block.
    pub fn snapshot_after_each_step(&mut self, sink: Arc<dyn Fn(serde_json::Value) + Send + Sync>) {
        let secrets = self.secrets.clone();
        let hook: lumen_perception::StepHook = Arc::new(move |run: &RunState| {
            match run.history.to_serialized(run.state.get(), false).to_value() {
                Ok(mut value) => {
                    secrets.redact_json(&mut value);
                    sink(value);
                }
                Err(e) => tracing::warn!("the session snapshot could not be taken: {e}"),
            }
        });
        self.perception = self.perception.clone().with_step_hook(hook);
    }

    /// Writes the snapshot atomically to `path`, with every secret value
    /// replaced by its placeholder wherever it may have surfaced (page text
    /// echoed by the model, for instance).
    pub fn save(&self, path: &std::path::Path, include_semantic: bool) -> Result<()> {
        let secrets = self.secrets.clone();
        self.serialize(include_semantic)
            .save_with(path, move |v| secrets.redact_json(v))
    }

    /// The secrets (for scrubbing artefacts written outside the session).
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }
}

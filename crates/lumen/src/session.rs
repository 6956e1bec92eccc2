//! [`Session`]: the lower-level API for callers who bring their own tab and
//! adapter (any [`BrowserTab`] and [`ModelAdapter`] implementation).

use std::sync::{Arc, Mutex};

use lumen_core::{
    BrowserTab, LoopMonitor, ModelAdapter, PreActionHook, Result, RunResult, ScreenshotOptions,
    Verifier,
};
use lumen_memory::{
    ActionCache, HistoryConfig, HistoryManager, SerializedHistory, SiteKB, StateStore,
    WorkflowMemory,
};
use lumen_perception::control::RunControl;
use lumen_perception::gate::ConfidenceGate;
use lumen_perception::monitor::{EventBus, EventSender, Recorder};
use lumen_perception::router::{ActionRouter, SettleMode};
use lumen_perception::{LoopConfig, PerceptionLoop, RunState};
use lumen_safety::{ActionGuard, PolicyConfig, Secrets, SessionPolicy};

/// How a session runs, whatever the tab and adapter.
#[derive(Clone)]
pub struct SessionOptions {
    /// Step budget of each run.
    pub max_steps: u32,
    /// Allowed/blocked domains, actions and schemes.
    pub policy: PolicyConfig,
    /// Checks run before every action, in order, ahead of the policy.
    pub hooks: Vec<Arc<dyn PreActionHook>>,
    /// Confirms completion before a run may end.
    pub verifier: Option<Arc<dyn Verifier>>,
    /// Observers of every event.
    pub monitors: Vec<Arc<dyn LoopMonitor>>,
    /// Receivers of every recorded event (event logs).
    pub recorders: Vec<Recorder>,
    /// How many full screenshots a request carries, and when to summarise.
    pub history: HistoryConfig,
    /// Sample this many candidates on hard steps (`None`: off).
    pub confidence_gate: Option<usize>,
    /// Save a checkpoint every N steps for backtracking (0: off).
    pub checkpoint_interval: u32,
    /// Named secrets the model types as `<secret:NAME>`.
    pub secrets: Secrets,
    /// Adaptive settling (default) or fixed delays.
    pub settle: SettleMode,
    /// Screenshot format, quality and size.
    pub screenshot: ScreenshotOptions,
    /// Extra system instructions.
    pub system_prompt: Option<String>,
    /// Check each action's effect (click hit something, typing went into an
    /// editable field, goto reached its host).
    pub action_verifier: bool,
    /// Site tips shown for matching URLs (`SiteKB::default_kb()` ships tips
    /// for the WebVoyager sites).
    pub site_kb: Option<Arc<SiteKB>>,
    /// Workflow memory: suggests a learnt workflow on the first step and
    /// learns from successful runs (saved to its file).
    pub workflows: Option<Arc<Mutex<WorkflowMemory>>>,
    /// An on-disk action cache (`ActionCache::open(dir)`): matching steps
    /// replay without a model call.
    pub cache: Option<Arc<ActionCache>>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            max_steps: 30,
            policy: PolicyConfig::default(),
            hooks: Vec::new(),
            verifier: None,
            monitors: Vec::new(),
            recorders: Vec::new(),
            history: HistoryConfig::default(),
            confidence_gate: None,
            checkpoint_interval: 0,
            secrets: Secrets::default(),
            settle: SettleMode::default(),
            screenshot: ScreenshotOptions::default(),
            system_prompt: None,
            action_verifier: true,
            site_kb: None,
            workflows: None,
            cache: None,
        }
    }
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("max_steps", &self.max_steps)
            .field("policy", &self.policy)
            .field("hooks", &self.hooks.len())
            .field("verifier", &self.verifier.is_some())
            .field("history", &self.history)
            .field("confidence_gate", &self.confidence_gate)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .field("secrets", &self.secrets)
            .field("settle", &self.settle)
            .field("action_verifier", &self.action_verifier)
            .field("site_kb", &self.site_kb.is_some())
            .field("workflows", &self.workflows.is_some())
            .field("cache", &self.cache.as_ref().map(|c| c.dir().to_path_buf()))
            .finish_non_exhaustive()
    }
}

/// One browser tab, one adapter, and the history of the task run on them.
pub struct Session {
    perception: PerceptionLoop,
    run: RunState,
    secrets: Arc<Secrets>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("loop", &self.perception)
            .field("steps", &self.run.history.step_count())
            .finish()
    }
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
        let mut guard = ActionGuard::new(policy);
        for hook in &options.hooks {
            guard = guard.with_hook(hook.clone());
        }
        let secrets = Arc::new(options.secrets.clone());
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
        let mut perception = PerceptionLoop::new(tab, adapter, config)
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
        })
    }

    /// Runs `instruction` until it ends. Action failures are inside the
    /// result; only setup problems are errors, and there are none left here.
    pub async fn run(&mut self, instruction: &str) -> RunResult {
        self.perception.run(instruction, &mut self.run).await
    }

    /// Starts a follow-on task in the same browser with a fresh history and
    /// step budget (the task state carries over).
    pub async fn add_task(&mut self, instruction: &str) -> RunResult {
        let state = self.run.state.clone();
        self.run = RunState::resume(
            HistoryManager::new(self.perception.config().history),
            state,
            self.perception.config(),
        );
        self.run(instruction).await
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

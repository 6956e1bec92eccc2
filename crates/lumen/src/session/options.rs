//! [`SessionOptions`]: how a session runs, whatever the tab and adapter.

use std::sync::{Arc, Mutex};

use lumen_core::{LoopMonitor, PreActionHook, ScreenshotOptions, Verifier};
use lumen_memory::{ActionCache, HistoryConfig, SiteKB, WorkflowMemory};
use lumen_perception::monitor::Recorder;
use lumen_perception::router::SettleMode;
use lumen_safety::{PolicyConfig, Secrets};

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
    /// Save a checkpoint every N steps for backtracking (0: off; default
    /// 5, the seed's).
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
    /// An on-disk action cache (`ActionCache::open(dir)`): a successful run
    /// is saved as a script, and the same task (start URL and instruction)
    /// reruns from it without model calls while the page still matches.
    pub cache: Option<Arc<ActionCache>>,
    /// Stop a run (status `BudgetExceeded`) before its next model call once
    /// it has used this many tokens, every source counted (main loop,
    /// summaries, verifier, planner, confidence gate, sub-tasks).
    pub max_tokens: Option<u64>,
    /// Stop a run once its estimated cost at the model registry's list
    /// prices reaches this many US dollars. A model without a published
    /// price cannot have one (the session refuses to start).
    pub max_cost_usd: Option<f64>,
    /// Stop a run after this many actions in a row failed (a working
    /// action resets the count).
    pub max_failures: Option<u32>,
    /// The most actions one model turn may ask for; the rest of the turn
    /// is answered `ok: false` unrun (default
    /// [`DEFAULT_MAX_ACTIONS_PER_TURN`](lumen_perception::DEFAULT_MAX_ACTIONS_PER_TURN)).
    pub max_actions_per_turn: u32,
    /// The run's id in traces (`lumen.run.id` on the root span, see
    /// `lumen::telemetry`); the server sets its run id.
    pub run_id: Option<String>,
    /// Hand the browser to a person when the model asks (`request_human`)
    /// or a trigger fires; `None`: nobody can be asked. A person acts
    /// through [`RunControl::handoff`](lumen_perception::control::RunControl::handoff)'s
    /// tab, e.g. with `lumen_server::live`.
    pub handoff: Option<lumen_core::HandoffPolicy>,
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
            checkpoint_interval: 5,
            secrets: Secrets::default(),
            settle: SettleMode::default(),
            screenshot: ScreenshotOptions::default(),
            system_prompt: None,
            action_verifier: true,
            site_kb: None,
            workflows: None,
            cache: None,
            max_tokens: None,
            max_cost_usd: None,
            max_failures: None,
            max_actions_per_turn: lumen_perception::DEFAULT_MAX_ACTIONS_PER_TURN,
            run_id: None,
            handoff: None,
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
            .field("max_tokens", &self.max_tokens)
            .field("max_cost_usd", &self.max_cost_usd)
            .field("max_failures", &self.max_failures)
            .field("max_actions_per_turn", &self.max_actions_per_turn)
            .field("run_id", &self.run_id)
            .field("handoff", &self.handoff)
            .finish_non_exhaustive()
    }
}

//! [`RunOptions`]: the one options model of a run, whatever surface it
//! comes from.
//!
//! `lumen run` (its flags and its config file), the server's `POST
//! /v1/runs` body, MCP's `run_task` arguments and IPC's `create` message
//! all fill this one type; its camelCase JSON form *is* the server's run
//! body (with `instruction`). [`RunOptions::apply`] is the single place
//! where an option becomes an engine setting ([`AgentOptions`],
//! [`SessionOptions`](crate::SessionOptions), the adapter and the browser);
//! no surface maps options itself. The network surfaces only add their
//! own checks on top (which folders, endpoints and limits a client may
//! ask for), before the options are applied.
//!
//! Every field is optional: what is left out keeps the engine's default
//! (or, on the server, the operator's). An unknown key is an error naming
//! it ([`RunOptions::from_json_object`]).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use lumen_browser::{BrowserbaseOptions, TabOptions};
use lumen_core::{HandoffPolicy, ImageFormat, LumenError, Result, Size, Verifier};
use lumen_memory::{ActionCache, SiteKB, WorkflowMemory};
use lumen_models::{Effort, Tools};
use lumen_safety::{AllOf, ModelVerifier, PolicyConfig, Secrets, SessionPolicy, UrlMatchesGate};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::agent::{AgentOptions, BrowserSource};
use crate::session::RunMode;

/// The environment variable holding the Browserbase API key
/// (`browserbase: true`).
pub const BROWSERBASE_API_KEY_ENV: &str = "BROWSERBASE_API_KEY";
/// The environment variable holding the Browserbase project id.
pub const BROWSERBASE_PROJECT_ID_ENV: &str = "BROWSERBASE_PROJECT_ID";
/// Attempts of an `exec` run when `attempts` is not given.
pub const DEFAULT_EXEC_ATTEMPTS: u32 = 3;
/// The most fallback models a run may name.
pub(crate) const MAX_FALLBACK_MODELS: usize = 4;

/// What a run does: `agent` (the loop), `plan` (only plan) or `exec` (the
/// loop with retries). The JSON and config spelling of [`RunMode`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    /// The perception loop.
    #[default]
    Agent,
    /// Plan only: the result is the plan.
    Plan,
    /// The loop with retries (`attempts`).
    Exec,
}

/// A folder or file setting: off, on (a surface's own default place, such
/// as the server operator's folder), or a path. In JSON: `false`, `true`
/// or a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSetting {
    /// Off.
    Off,
    /// On, at the default place the surface provides (the server's
    /// operator folder). [`RunOptions::apply`] refuses it: a surface
    /// resolves it to a path first.
    On,
    /// This path.
    Path(PathBuf),
}

impl Serialize for PathSetting {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            PathSetting::Off => s.serialize_bool(false),
            PathSetting::On => s.serialize_bool(true),
            PathSetting::Path(p) => s.serialize_str(&p.to_string_lossy()),
        }
    }
}

impl<'de> Deserialize<'de> for PathSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PathSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or a path")
            }
            fn visit_bool<E: serde::de::Error>(
                self,
                v: bool,
            ) -> std::result::Result<Self::Value, E> {
                Ok(if v { PathSetting::On } else { PathSetting::Off })
            }
            fn visit_str<E: serde::de::Error>(
                self,
                v: &str,
            ) -> std::result::Result<Self::Value, E> {
                if v.trim().is_empty() {
                    return Err(E::custom("the path is empty"));
                }
                Ok(PathSetting::Path(PathBuf::from(v)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A viewport size, written `WIDTHxHEIGHT` (`1280x720`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewport {
    /// Width in CSS pixels.
    pub width: u32,
    /// Height in CSS pixels.
    pub height: u32,
}

/// The smallest and largest viewport side accepted.
const VIEWPORT_SIDE: std::ops::RangeInclusive<u32> = 200..=4096;

impl std::str::FromStr for Viewport {
    type Err = LumenError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            LumenError::config(
                "viewport",
                format!(
                    "`{s}` is not a viewport: write WIDTHxHEIGHT with each side from {} to {}, \
                     e.g. 1280x720",
                    VIEWPORT_SIDE.start(),
                    VIEWPORT_SIDE.end()
                ),
            )
        };
        let (w, h) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let (width, height) = (
            w.trim().parse().map_err(|_| bad())?,
            h.trim().parse().map_err(|_| bad())?,
        );
        if !VIEWPORT_SIDE.contains(&width) || !VIEWPORT_SIDE.contains(&height) {
            return Err(bad());
        }
        Ok(Viewport { width, height })
    }
}

impl std::fmt::Display for Viewport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

impl Serialize for Viewport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Viewport {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e: LumenError| serde::de::Error::custom(e.to_string()))
    }
}

/// Secret values by name. Their `Debug` form shows names only.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValues(pub BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Every option of a run, each optional; see the module docs. JSON keys
/// are the camelCase field names (`maxSteps`, `verifyUrl`…).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RunOptions {
    /// The page to open first (http(s), or what the policy allows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_url: Option<String>,
    /// The model: `anthropic/…`, `openai/…`, `google/…`, or a model served
    /// by an OpenAI-compatible server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A separate model for a planning pass before the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planner_model: Option<String>,
    /// Models to switch to, in order, when the model is retired, not found
    /// or overloaded after every retry (provider/id each; other providers
    /// take their keys from the environment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_models: Option<Vec<String>>,
    /// The tool family: `computer` (the provider's computer-use tool) or
    /// `browser` (Anthropic's browser toolset). Default: the registry's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Tools>,
    /// How hard the model thinks: `minimal`, `low`, `medium`, `high`, `max`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// A thinking budget in tokens (models with a manual budget; others
    /// take it as an effort).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Extra system instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// `agent` (default), `plan` or `exec`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<TaskMode>,
    /// Attempts in `exec` mode (1–10, default 3); only with `mode: exec`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The step budget (default 30).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Stop (status `budgetExceeded`) before the next model call once the
    /// run used this many tokens, every model call counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Stop once the estimated cost at list prices reaches this many US
    /// dollars (models with a published price only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// Stop after this many actions in a row failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<u32>,
    /// The most actions one model turn may ask for (1-1000; default 25):
    /// the rest of the turn is answered `ok: false` without running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_actions_per_turn: Option<u32>,
    /// The longest one model call waits in all before its retries
    /// (seconds; a provider's long Retry-After otherwise waits up to 60 s
    /// per try).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<u64>,
    /// Completion is refused until the page's URL matches this regular
    /// expression (Rust `regex` syntax, unanchored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_url: Option<String>,
    /// Completion is confirmed by asking this model (after `verifyUrl`,
    /// when both are set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verifier_model: Option<String>,
    /// Sample this many candidate actions (2–8) on hard steps and take the
    /// agreed one (the confidence gate). Off by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_gate: Option<usize>,
    /// Save a checkpoint every N steps for backtracking (0: off; default
    /// 5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval: Option<u32>,
    /// Show the built-in site tips for matching URLs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_tips: Option<bool>,
    /// Workflow memory: a JSON file of learnt workflows (suggested on the
    /// first step, learnt from successful runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflows: Option<PathSetting>,
    /// An on-disk action cache folder: a successful run is saved there as a
    /// script, and the same task reruns from it without model calls while
    /// the page still matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<PathSetting>,
    /// Attach to a running browser (`ws://…` or `http://host:port`)
    /// instead of launching one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cdp_url: Option<String>,
    /// Run in a Browserbase session (key and project from
    /// `BROWSERBASE_API_KEY` and `BROWSERBASE_PROJECT_ID`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub browserbase: Option<bool>,
    /// The viewport, `WIDTHxHEIGHT` (default 1280x720, snapped to the
    /// model; an explicit one is kept as given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub viewport: Option<Viewport>,
    /// Screenshot encoding: `jpeg` (default) or `png`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screenshot_format: Option<ImageFormat>,
    /// JPEG quality, 1–100 (default 80).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screenshot_quality: Option<u8>,
    /// Downscale screenshots so their longer edge is at most this many
    /// pixels (64–8192).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screenshot_max_edge: Option<u32>,
    /// How many of the newest screenshots a model request carries as images
    /// (0–50; default 2); older ones become markers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images_kept: Option<usize>,
    /// Where downloads are saved (off: downloads are refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download_dir: Option<PathSetting>,
    /// The folder the model may upload files from (off: uploads are off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload_dir: Option<PathSetting>,
    /// The safety policy (allowed/blocked domains, actions, schemes…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyConfig>,
    /// Secrets the model may type as `<secret:NAME>`: name → value. Values
    /// never reach the model, logs or traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretValues>,
    /// Secret name → the sites it may be typed on (`["*"]`: anywhere). A
    /// secret left out is typed only on the start URL's site (its host,
    /// `www.` dropped, subdomains included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_domains: Option<BTreeMap<String, Vec<String>>>,
    /// Hand the browser to a person: offers the model `request_human`,
    /// with triggers that hand over by themselves and the time to wait
    /// (see [`HandoffPolicy`]). A person acts through a live view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffPolicy>,
}

/// Why a JSON object is not a [`RunOptions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionError {
    /// A key that is no option.
    Unknown(String),
    /// A known key with a value it cannot take: the key and why.
    Invalid(String, String),
}

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionError::Unknown(k) => write!(f, "unknown option `{k}`"),
            OptionError::Invalid(k, why) => write!(f, "`{k}`: {why}"),
        }
    }
}

fn config(field: &str, message: impl Into<String>) -> LumenError {
    LumenError::config(field, message)
}

fn at_least(field: &str, value: Option<u64>, min: u64) -> Result<()> {
    match value {
        Some(v) if v < min => Err(config(field, format!("`{field}` must be at least {min}"))),
        _ => Ok(()),
    }
}

fn within(field: &str, value: Option<u64>, min: u64, max: u64) -> Result<()> {
    match value {
        Some(v) if !(min..=max).contains(&v) => Err(config(
            field,
            format!("`{field}` must be from {min} to {max}"),
        )),
        _ => Ok(()),
    }
}

fn not_empty(field: &str, value: Option<&String>) -> Result<()> {
    match value {
        Some(v) if v.trim().is_empty() => {
            Err(config(field, format!("`{field}` must not be empty")))
        }
        _ => Ok(()),
    }
}

impl RunOptions {
    /// Reads options from a JSON object. An unknown key or a bad value is
    /// an [`OptionError`] naming the key (each key is read on its own
    /// first, so the error is about that key).
    pub fn from_json_object(obj: &Map<String, Value>) -> std::result::Result<Self, OptionError> {
        let known = Self::keys();
        for (k, v) in obj {
            if !known.contains(&k.as_str()) {
                return Err(OptionError::Unknown(k.clone()));
            }
            let one = Value::Object(Map::from_iter([(k.clone(), v.clone())]));
            serde_json::from_value::<RunOptions>(one)
                .map_err(|e| OptionError::Invalid(k.clone(), e.to_string()))?;
        }
        serde_json::from_value(Value::Object(obj.clone()))
            .map_err(|e| OptionError::Invalid(String::new(), e.to_string()))
    }

    /// The JSON keys of every option (the properties of
    /// [`json_schema`](Self::json_schema)).
    pub fn keys() -> Vec<&'static str> {
        SCHEMA.iter().map(|(k, _)| *k).collect()
    }

    /// The JSON schema of every option, as `properties` of an object
    /// schema: what the OpenAPI run body and MCP's `run_task` list.
    pub fn json_schema() -> Map<String, Value> {
        SCHEMA.iter().map(|(k, f)| ((*k).to_owned(), f())).collect()
    }

    /// `self` with `over`'s options laid on top (an option `over` sets
    /// wins): a config file under the flags.
    pub fn overlaid_with(&self, over: &RunOptions) -> RunOptions {
        let as_map = |o: &RunOptions| match serde_json::to_value(o) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let mut merged = as_map(self);
        merged.extend(as_map(over));
        serde_json::from_value(Value::Object(merged)).unwrap_or_else(|_| over.clone())
    }

    /// The run mode the options ask for.
    pub fn run_mode(&self) -> RunMode {
        match self.mode.unwrap_or_default() {
            TaskMode::Agent => RunMode::Agent,
            TaskMode::Plan => RunMode::Plan,
            TaskMode::Exec => RunMode::Exec {
                attempts: self.attempts.unwrap_or(DEFAULT_EXEC_ATTEMPTS),
            },
        }
    }

    /// Checks every value on its own (ranges, patterns, the policy, the
    /// secrets); errors are [`LumenError::Config`] naming the option.
    pub fn check(&self) -> Result<()> {
        for (field, value) in [
            ("startUrl", self.start_url.as_ref()),
            ("model", self.model.as_ref()),
            ("plannerModel", self.planner_model.as_ref()),
            ("systemPrompt", self.system_prompt.as_ref()),
            ("verifyUrl", self.verify_url.as_ref()),
            ("verifierModel", self.verifier_model.as_ref()),
            ("cdpUrl", self.cdp_url.as_ref()),
        ] {
            not_empty(field, value)?;
        }
        within("attempts", self.attempts.map(u64::from), 1, 10)?;
        if self.attempts.is_some() && self.mode != Some(TaskMode::Exec) {
            return Err(config(
                "attempts",
                "`attempts` only applies with mode exec; set mode to exec or drop attempts",
            ));
        }
        at_least("maxSteps", self.max_steps.map(u64::from), 1)?;
        at_least("maxTokens", self.max_tokens, 1)?;
        at_least("maxFailures", self.max_failures.map(u64::from), 1)?;
        within(
            "maxActionsPerTurn",
            self.max_actions_per_turn.map(u64::from),
            1,
            1000,
        )?;
        within("maxWait", self.max_wait, 1, 3600)?;
        for m in self.fallback_models.iter().flatten() {
            not_empty("fallbackModels", Some(m))?;
        }
        if self
            .fallback_models
            .as_ref()
            .is_some_and(|m| m.len() > MAX_FALLBACK_MODELS)
        {
            return Err(config(
                "fallbackModels",
                format!("give at most {MAX_FALLBACK_MODELS} fallback models"),
            ));
        }
        if let Some(usd) = self.max_cost
            && !(usd.is_finite() && usd > 0.0)
        {
            return Err(config(
                "maxCost",
                "`maxCost` must be a positive number of US dollars, e.g. 0.50",
            ));
        }
        within(
            "thinkingBudget",
            self.thinking_budget.map(u64::from),
            1,
            1_000_000,
        )?;
        within(
            "confidenceGate",
            self.confidence_gate.map(|n| n as u64),
            2,
            8,
        )?;
        within(
            "checkpointInterval",
            self.checkpoint_interval.map(u64::from),
            0,
            1000,
        )?;
        within(
            "screenshotQuality",
            self.screenshot_quality.map(u64::from),
            1,
            100,
        )?;
        within(
            "screenshotMaxEdge",
            self.screenshot_max_edge.map(u64::from),
            64,
            8192,
        )?;
        within("imagesKept", self.images_kept.map(|n| n as u64), 0, 50)?;
        if let Some(p) = &self.verify_url {
            UrlMatchesGate::new(p).map_err(|e| config("verifyUrl", e.to_string()))?;
        }
        if self.cdp_url.is_some() && self.browserbase == Some(true) {
            return Err(config(
                "browserbase",
                "choose one browser: `cdpUrl` or `browserbase`, not both",
            ));
        }
        if let Some(p) = &self.policy {
            SessionPolicy::new(p).map_err(|e| match e {
                e @ LumenError::Config { .. } => e,
                other => config("policy", other.to_string()),
            })?;
        }
        self.secrets()?;
        if let Some(h) = &self.handoff {
            h.validate().map_err(|e| config("handoff", e))?;
        }
        Ok(())
    }

    /// The secrets (`secrets` with their `secretDomains`).
    pub fn secrets(&self) -> Result<Secrets> {
        let mut secrets = Secrets::new();
        if let Some(values) = &self.secrets {
            for (name, value) in &values.0 {
                secrets
                    .insert(name, value.clone())
                    .map_err(|e| config("secrets", format!("secret {name}: {e}")))?;
            }
        }
        if let Some(scopes) = &self.secret_domains {
            for (name, domains) in scopes {
                secrets
                    .scope(name, domains)
                    .map_err(|e| config("secretDomains", e.to_string()))?;
            }
        }
        // The rest are typed only where the task starts (its site), unless
        // secretDomains widens them (`["*"]`: anywhere).
        if let Some(start) = &self.start_url {
            secrets.scope_rest_to(&lumen_safety::policy::with_default_scheme(start));
        }
        Ok(secrets)
    }

    /// Agent options for these options: [`AgentOptions::new`] with `model`
    /// (else `default_model`), then [`apply`](Self::apply).
    pub fn agent_options(&self, default_model: &str) -> Result<AgentOptions> {
        let mut agent = AgentOptions::new(default_model);
        self.apply(&mut agent)?;
        Ok(agent)
    }

    /// Sets every option that is present onto `agent`, reading Browserbase
    /// credentials from the environment. Options left out keep what
    /// `agent` has.
    pub fn apply(&self, agent: &mut AgentOptions) -> Result<()> {
        self.apply_with_env(agent, &|name| std::env::var(name).ok())
    }

    /// [`apply`](Self::apply) with `env` as the environment.
    pub fn apply_with_env(
        &self,
        agent: &mut AgentOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<()> {
        self.check()?;
        if let Some(m) = &self.model {
            agent.model = m.clone();
        }
        if let Some(m) = &self.planner_model {
            agent.planner_model = Some(m.clone());
        }
        if let Some(m) = &self.fallback_models {
            agent.fallback_models = m.clone();
        }
        let adapter = &mut agent.adapter;
        if let Some(secs) = self.max_wait {
            adapter.retry.max_wait = Some(std::time::Duration::from_secs(secs));
        }
        adapter.tools = self.tools.or(adapter.tools);
        adapter.effort = self.effort.or(adapter.effort);
        adapter.thinking_budget = self.thinking_budget.or(adapter.thinking_budget);
        self.apply_browser(agent, env)?;
        self.apply_session(agent)?;
        self.apply_verifier(agent)
    }

    fn apply_browser(
        &self,
        agent: &mut AgentOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<()> {
        if let Some(url) = &self.cdp_url {
            let tab = tab_options("cdpUrl", &mut agent.browser)?.clone();
            agent.browser = BrowserSource::Cdp {
                url: url.clone(),
                tab,
            };
        }
        if self.browserbase == Some(true) {
            let tab = tab_options("browserbase", &mut agent.browser)?.clone();
            let read = |name: &str| {
                env(name).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                    config(
                        "browserbase",
                        format!("Browserbase needs {name} in the environment; export it first"),
                    )
                })
            };
            let mut options = BrowserbaseOptions::new(
                read(BROWSERBASE_API_KEY_ENV)?,
                read(BROWSERBASE_PROJECT_ID_ENV)?,
            );
            options.tab = tab;
            agent.browser = BrowserSource::Browserbase(options);
        }
        if let Some(v) = self.viewport {
            let size = Size::new(v.width, v.height);
            if let BrowserSource::Local(launch) = &mut agent.browser {
                launch.window = size;
            }
            tab_options("viewport", &mut agent.browser)?.viewport = Some(size);
            // An explicit viewport is kept as given.
            agent.align_viewport = false;
        }
        if let Some(d) = &self.download_dir {
            tab_options("downloadDir", &mut agent.browser)?.download_dir =
                concrete("downloadDir", d)?;
        }
        if let Some(u) = &self.upload_dir {
            tab_options("uploadDir", &mut agent.browser)?.upload_dir = concrete("uploadDir", u)?;
        }
        Ok(())
    }

    fn apply_session(&self, agent: &mut AgentOptions) -> Result<()> {
        let s = &mut agent.session;
        s.max_steps = self.max_steps.unwrap_or(s.max_steps);
        s.max_tokens = self.max_tokens.or(s.max_tokens);
        s.max_cost_usd = self.max_cost.or(s.max_cost_usd);
        s.max_failures = self.max_failures.or(s.max_failures);
        s.max_actions_per_turn = self.max_actions_per_turn.unwrap_or(s.max_actions_per_turn);
        if let Some(p) = &self.system_prompt {
            s.system_prompt = Some(p.clone());
        }
        if let Some(n) = self.confidence_gate {
            s.confidence_gate = Some(n);
        }
        s.checkpoint_interval = self.checkpoint_interval.unwrap_or(s.checkpoint_interval);
        if let Some(p) = &self.policy {
            s.policy = p.clone();
        }
        s.history.keep_recent = self.images_kept.unwrap_or(s.history.keep_recent);
        s.screenshot.format = self.screenshot_format.unwrap_or(s.screenshot.format);
        s.screenshot.quality = self.screenshot_quality.unwrap_or(s.screenshot.quality);
        if let Some(edge) = self.screenshot_max_edge {
            s.screenshot.max_edge = Some(edge);
        }
        match self.site_tips {
            Some(true) => s.site_kb = Some(Arc::new(SiteKB::default_kb())),
            Some(false) => s.site_kb = None,
            None => {}
        }
        if let Some(w) = &self.workflows {
            s.workflows = match concrete("workflows", w)? {
                None => None,
                Some(path) => Some(Arc::new(Mutex::new(
                    WorkflowMemory::open(path).map_err(|e| config("workflows", e.to_string()))?,
                ))),
            };
        }
        if let Some(c) = &self.cache {
            s.cache = match concrete("cache", c)? {
                None => None,
                Some(dir) => Some(Arc::new(
                    ActionCache::open(dir).map_err(|e| config("cache", e.to_string()))?,
                )),
            };
        }
        if self.secrets.is_some() || self.secret_domains.is_some() {
            s.secrets = self.secrets()?;
        }
        if let Some(h) = &self.handoff {
            s.handoff = Some(h.clone());
        }
        Ok(())
    }

    fn apply_verifier(&self, agent: &mut AgentOptions) -> Result<()> {
        let mut verifiers: Vec<Arc<dyn Verifier>> = Vec::new();
        if let Some(p) = &self.verify_url {
            verifiers.push(Arc::new(
                UrlMatchesGate::new(p).map_err(|e| config("verifyUrl", e.to_string()))?,
            ));
        }
        if let Some(m) = &self.verifier_model {
            let adapter = lumen_models::create_adapter(m, agent.adapter_options())
                .map_err(|e| config("verifierModel", e.to_string()))?;
            verifiers.push(Arc::new(ModelVerifier::new(adapter)));
        }
        agent.session.verifier = match verifiers.len() {
            0 => agent.session.verifier.take(),
            1 => verifiers.pop(),
            _ => Some(Arc::new(AllOf(verifiers))),
        };
        Ok(())
    }
}

/// The tab options of a browser Lumen connects (a custom tab is set up by
/// its owner).
fn tab_options<'a>(field: &str, browser: &'a mut BrowserSource) -> Result<&'a mut TabOptions> {
    match browser {
        BrowserSource::Local(l) => Ok(&mut l.tab),
        BrowserSource::Cdp { tab, .. } => Ok(tab),
        BrowserSource::Browserbase(b) => Ok(&mut b.tab),
        BrowserSource::Custom(_) => Err(config(
            field,
            format!("`{field}` cannot be applied to a custom browser tab; set it up on the tab"),
        )),
    }
}

/// The path of a setting `apply` can use: `true` must have been resolved
/// by the surface.
fn concrete(field: &str, setting: &PathSetting) -> Result<Option<PathBuf>> {
    match setting {
        PathSetting::Off => Ok(None),
        PathSetting::Path(p) => Ok(Some(p.clone())),
        PathSetting::On => Err(config(
            field,
            format!("`{field}: true` needs a place; give a path instead"),
        )),
    }
}

/// Whether `path` is a plain relative path that stays below where it is
/// joined (no root, no `..`, no drive prefix).
pub fn is_plain_subpath(path: &Path) -> bool {
    path.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && path.components().next().is_some()
}

mod schema;
use schema::SCHEMA;
pub use schema::every_option_set;

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;

//! [`Agent`]: the recommended entry point. Give it a model and a browser
//! (by name and launch options, or as your own [`ModelAdapter`] and
//! [`BrowserTab`]); it connects lazily on the first run, sets up the
//! adapter(s), starts the browser (a local Chromium starts in the
//! background, so a run without a start URL asks the model while it
//! starts), aligns the viewport to the model, and hands the run to its
//! [`Session`], where the run modes and the planner pass live.
//!
//! Each [`Agent::run`] is a new task with a fresh history and step budget
//! (the browser stays where the last run left it);
//! [`Agent::continue_run`] is the explicit way to go on with the previous
//! run's history.

use std::sync::Arc;

use futures::Stream;
use lumen_browser::{BrowserbaseOptions, CdpTab, LaunchOptions, TabOptions};
use lumen_core::{BrowserTab, LumenError, ModelAdapter, RecordedEvent, Result, RunResult};
use lumen_memory::SerializedHistory;
use lumen_models::AdapterOptions;
use lumen_perception::control::RunControl;
use lumen_perception::monitor::event_stream;

use crate::session::{RunMode, Session, SessionOptions};

/// Where the browser comes from.
#[derive(Clone)]
pub enum BrowserSource {
    /// Launch a local Chromium (headless by default).
    Local(LaunchOptions),
    /// Attach to a running browser by DevTools WebSocket URL or
    /// `http://host:port` (remote pools: browserless, Selenium Grid…).
    Cdp {
        /// The endpoint.
        url: String,
        /// How tabs behave.
        tab: TabOptions,
    },
    /// Create a Browserbase session.
    Browserbase(BrowserbaseOptions),
    /// Use a tab you built yourself (any `BrowserTab`).
    Custom(Arc<dyn BrowserTab>),
}

impl Default for BrowserSource {
    fn default() -> Self {
        BrowserSource::Local(LaunchOptions::default())
    }
}

impl std::fmt::Debug for BrowserSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BrowserSource::Local(o) => f.debug_tuple("Local").field(o).finish(),
            BrowserSource::Cdp { url, .. } => f
                .debug_struct("Cdp")
                .field("url", url)
                .finish_non_exhaustive(),
            BrowserSource::Browserbase(o) => f.debug_tuple("Browserbase").field(o).finish(),
            BrowserSource::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Everything an [`Agent`] needs.
///
/// Each option is set one way: as a field. [`AgentOptions::new`] gives the
/// defaults for a model; change the rest with struct update syntax (as for
/// [`SessionOptions`], [`AdapterOptions`] and [`LaunchOptions`]) or by
/// assigning a field:
///
/// ```
/// use lumen::{AgentOptions, SessionOptions};
///
/// let options = AgentOptions {
///     planner_model: Some("anthropic/claude-haiku-4-5".into()),
///     session: SessionOptions {
///         max_steps: 20,
///         ..SessionOptions::default()
///     },
///     ..AgentOptions::new("anthropic/claude-sonnet-4-6")
/// };
/// assert_eq!(options.session.max_steps, 20);
/// ```
///
/// Bring your own model and browser: [`AgentOptions::with_adapter`] takes
/// any [`ModelAdapter`] (a local server, a custom protocol, a test double),
/// and [`BrowserSource::Custom`] any [`BrowserTab`]:
///
/// ```no_run
/// # use std::sync::Arc;
/// use lumen::{AgentOptions, BrowserSource, BrowserTab, ModelAdapter};
///
/// # fn build(adapter: Arc<dyn ModelAdapter>, tab: Arc<dyn BrowserTab>) {
/// let options = AgentOptions {
///     browser: BrowserSource::Custom(tab),
///     ..AgentOptions::with_adapter(adapter)
/// };
/// # }
/// ```
#[derive(Clone)]
pub struct AgentOptions {
    /// The model: `anthropic/…`, `openai/…`, `google/…`, or any name served
    /// by an OpenAI-compatible server at `adapter.base_url`. With
    /// `model_adapter` set it only names the model (logs, traces).
    pub model: String,
    /// Your own adapter, used instead of creating one from `model` and
    /// `adapter` ([`AgentOptions::with_adapter`]).
    pub model_adapter: Option<Arc<dyn ModelAdapter>>,
    /// Keys, base URLs, retries, thinking budget (for the adapters created
    /// from `model` and `planner_model`).
    pub adapter: AdapterOptions,
    /// A separate model for the planner pass (`None`: no planner pass in
    /// agent and exec mode, unless `planner_adapter` is set; plan mode
    /// plans with `model`).
    pub planner_model: Option<String>,
    /// Models to switch to, in order, when `model` is retired, not found
    /// or overloaded after every retry
    /// ([`create_adapter_chain`](lumen_models::create_adapter_chain)).
    /// Not used with `model_adapter`.
    pub fallback_models: Vec<String>,
    /// Your own adapter for the planner pass, used instead of creating one
    /// from `planner_model`.
    pub planner_adapter: Option<Arc<dyn ModelAdapter>>,
    /// Where the browser comes from.
    pub browser: BrowserSource,
    /// Snap the viewport to the model's patch size and image limit.
    pub align_viewport: bool,
    /// The loop's settings.
    pub session: SessionOptions,
}

impl AgentOptions {
    /// Options for `model` with defaults for everything else: no planner, a
    /// local headless Chromium, the viewport aligned, the default
    /// [`SessionOptions`].
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            model_adapter: None,
            adapter: AdapterOptions::default(),
            planner_model: None,
            fallback_models: Vec::new(),
            planner_adapter: None,
            browser: BrowserSource::default(),
            align_viewport: true,
            session: SessionOptions::default(),
        }
    }

    /// Options for your own `adapter` (`model` is its model id) with the
    /// same defaults as [`new`](Self::new).
    pub fn with_adapter(adapter: Arc<dyn ModelAdapter>) -> Self {
        Self {
            model_adapter: Some(adapter.clone()),
            ..Self::new(adapter.info().model_id.clone())
        }
    }
}

impl std::fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOptions")
            .field("model", &self.model)
            .field("model_adapter", &self.model_adapter.is_some())
            .field("adapter", &self.adapter)
            .field("planner_model", &self.planner_model)
            .field("planner_adapter", &self.planner_adapter.is_some())
            .field("browser", &self.browser)
            .field("align_viewport", &self.align_viewport)
            .field("session", &self.session)
            .finish()
    }
}

impl AgentOptions {
    /// The adapter options with the browser toolset's opt-ins as the
    /// session allows them: `javascript_exec` when the policy allows
    /// model JavaScript, `file_upload` when the browser has an upload
    /// folder (a custom tab keeps what `adapter` says); `request_human`
    /// when the session has a handoff policy.
    pub fn adapter_options(&self) -> AdapterOptions {
        let upload_dir = match &self.browser {
            BrowserSource::Local(l) => Some(l.tab.upload_dir.is_some()),
            BrowserSource::Cdp { tab, .. } => Some(tab.upload_dir.is_some()),
            BrowserSource::Browserbase(b) => Some(b.tab.upload_dir.is_some()),
            BrowserSource::Custom(_) => None,
        };
        let mut adapter = self.adapter.clone();
        adapter.browser_opt_ins.javascript_exec =
            self.session.policy.allow_model_javascript == Some(true);
        if let Some(on) = upload_dir {
            adapter.browser_opt_ins.file_upload = on;
        }
        adapter.request_human = self.session.handoff.is_some();
        adapter
    }
}

struct Connected {
    tab: Arc<dyn BrowserTab>,
    adapter: Arc<dyn ModelAdapter>,
    planner: Option<Arc<dyn ModelAdapter>>,
}

/// A browser agent. Nothing connects until the first run.
pub struct Agent {
    options: AgentOptions,
    connected: Option<Connected>,
    session: Option<Session>,
    resume_from: Option<SerializedHistory>,
    /// Where every session saves its snapshot after each completed step.
    autosave: Option<std::path::PathBuf>,
    control: RunControl,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.options.model)
            .field("connected", &self.connected.is_some())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent; cheap, does no I/O.
    pub fn new(options: AgentOptions) -> Self {
        Self {
            options,
            connected: None,
            session: None,
            resume_from: None,
            autosave: None,
            control: RunControl::new(),
        }
    }

    /// An agent that continues a serialized run on its first `run`.
    pub fn resume(snapshot: SerializedHistory, options: AgentOptions) -> Self {
        Self {
            resume_from: Some(snapshot),
            ..Self::new(options)
        }
    }

    /// Saves the run's snapshot to `path` after every completed step of
    /// this agent's runs ([`Session::save_after_each_step`]), so a process
    /// killed mid-run can be resumed from its last completed step with
    /// [`Agent::resume`] (`lumen resume` does).
    pub fn save_after_each_step(&mut self, path: impl Into<std::path::PathBuf>) {
        let path = path.into();
        if let Some(session) = &mut self.session {
            session.save_after_each_step(path.clone());
        }
        self.autosave = Some(path);
    }

    /// Cancel, pause/resume, stop and guidance for the current run. The same
    /// handle steers every run of this agent.
    pub fn control(&self) -> RunControl {
        self.control.clone()
    }

    /// Creates the adapter(s) and connects the browser. A local Chromium
    /// starts in the background ([`CdpTab::start`]): a run without a start
    /// URL sends its first model request while Chromium starts.
    async fn connect(&mut self) -> Result<&Connected> {
        if self.connected.is_none() {
            let o = &self.options;
            let adapter_options = o.adapter_options();
            let adapter = match &o.model_adapter {
                Some(custom) => custom.clone(),
                None => lumen_models::create_adapter_chain(
                    &o.model,
                    &o.fallback_models,
                    adapter_options.clone(),
                )?,
            };
            let planner = match (&o.planner_adapter, &o.planner_model) {
                (Some(custom), _) => Some(custom.clone()),
                (None, Some(m)) => Some(lumen_models::create_adapter(m, adapter_options)?),
                (None, None) => None,
            };
            let info = adapter.info();
            let align = match (info.patch_size, info.max_image_dimension) {
                (Some(patch), Some(max)) if o.align_viewport => Some((patch, max)),
                _ => None,
            };
            let tab: Arc<dyn BrowserTab> = match &o.browser {
                BrowserSource::Local(l) => {
                    let mut l = l.clone();
                    // A fixed viewport is aligned before launch, so the
                    // blank page answered meanwhile has the final size.
                    let align_after = match (align, l.tab.viewport) {
                        (Some((patch, max)), Some(v)) => {
                            l.tab.viewport = Some(lumen_browser::aligned_viewport(v, patch, max)?);
                            None
                        }
                        (align, _) => align,
                    };
                    let starting = CdpTab::start(l)?;
                    if let Some((patch, max)) = align_after {
                        starting.tab().await?.align_viewport(patch, max).await?;
                    }
                    Arc::new(starting)
                }
                BrowserSource::Cdp { url, tab } => {
                    aligned(CdpTab::connect(url, tab.clone()).await?, align).await?
                }
                BrowserSource::Browserbase(b) => {
                    aligned(CdpTab::browserbase(b.clone()).await?, align).await?
                }
                BrowserSource::Custom(t) => t.clone(),
            };
            self.connected = Some(Connected {
                tab,
                adapter,
                planner,
            });
        }
        self.connected
            .as_ref()
            .ok_or_else(|| LumenError::config("agent", "connection state lost"))
    }

    /// The session for the next run. `fresh`: a new task (fresh history,
    /// step budget and task state), except on the first run of a
    /// [`resume`](Self::resume)d agent, which continues its snapshot.
    /// Otherwise the previous run goes on. A live stream needs a session
    /// built with it, so streaming rebuilds the session (carrying the
    /// history over when continuing).
    async fn session(
        &mut self,
        stream: Option<lumen_perception::monitor::EventSender>,
        fresh: bool,
    ) -> Result<&mut Session> {
        let (tab, adapter, planner) = {
            let c = self.connect().await?;
            (c.tab.clone(), c.adapter.clone(), c.planner.clone())
        };
        match &mut self.session {
            Some(session) if stream.is_none() => {
                if fresh {
                    session.new_run();
                }
            }
            _ => {
                let snapshot = match &self.session {
                    Some(s) if !fresh => Some(s.serialize(true)),
                    Some(_) => None,
                    None => self.resume_from.take(),
                };
                self.session =
                    Some(self.build_session(&tab, &adapter, &planner, snapshot, stream)?);
            }
        }
        self.session
            .as_mut()
            .ok_or_else(|| LumenError::config("agent", "session state lost"))
    }

    fn build_session(
        &self,
        tab: &Arc<dyn BrowserTab>,
        adapter: &Arc<dyn ModelAdapter>,
        planner: &Option<Arc<dyn ModelAdapter>>,
        snapshot: Option<SerializedHistory>,
        stream: Option<lumen_perception::monitor::EventSender>,
    ) -> Result<Session> {
        let mut session = Session::build(
            tab.clone(),
            adapter.clone(),
            self.options.session.clone(),
            snapshot,
            stream,
        )?;
        session.set_control(self.control.clone());
        session.set_planner(planner.clone());
        if let Some(path) = &self.autosave {
            session.save_after_each_step(path.clone());
        }
        Ok(session)
    }

    /// Ends the live stream of a streamed run: its session (which holds
    /// the sending half) is replaced by one without a stream that carries
    /// the run over, so [`continue_run`](Self::continue_run) and
    /// [`serialize`](Self::serialize) still see it.
    fn end_stream(&mut self) {
        let (Some(streamed), Some(c)) = (self.session.take(), self.connected.as_ref()) else {
            return;
        };
        let snapshot = streamed.serialize(true);
        drop(streamed);
        let (tab, adapter, planner) = (c.tab.clone(), c.adapter.clone(), c.planner.clone());
        match self.build_session(&tab, &adapter, &planner, Some(snapshot), None) {
            Ok(session) => self.session = Some(session),
            Err(e) => tracing::warn!("the streamed run could not be kept: {e}"),
        }
    }

    /// Runs a task in agent mode: opens `start_url` (when given), plans
    /// (when a planner model is set) and runs the loop
    /// ([`Session::run_mode`]). Each run is a new task: a fresh history,
    /// step budget and task state, in the browser as the previous run left
    /// it ([`continue_run`](Self::continue_run) goes on with the previous
    /// run instead). The first run of a [`resume`](Self::resume)d agent
    /// continues its snapshot.
    pub async fn run(&mut self, instruction: &str, start_url: Option<&str>) -> Result<RunResult> {
        self.run_mode(instruction, start_url, RunMode::Agent).await
    }

    /// Runs a task in the given mode ([`Session::run_mode`] says what each
    /// mode does), as a new task like [`run`](Self::run).
    pub async fn run_mode(
        &mut self,
        instruction: &str,
        start_url: Option<&str>,
        mode: RunMode,
    ) -> Result<RunResult> {
        self.run_inner(instruction, start_url, mode, None, true)
            .await
    }

    /// Goes on with the previous run (or the resumed snapshot) in agent
    /// mode: the model sees its history, steps count on from it and the
    /// steps already taken count against the step budget
    /// (`session.max_steps`). `instruction` is the task from here on (a
    /// follow-up, or the same task again). Before any run it is
    /// [`run`](Self::run) without a start URL.
    pub async fn continue_run(&mut self, instruction: &str) -> Result<RunResult> {
        self.run_inner(instruction, None, RunMode::Agent, None, false)
            .await
    }

    async fn run_inner(
        &mut self,
        instruction: &str,
        start_url: Option<&str>,
        mode: RunMode,
        stream: Option<lumen_perception::monitor::EventSender>,
        fresh: bool,
    ) -> Result<RunResult> {
        self.session(stream, fresh)
            .await?
            .run_mode(instruction, start_url, mode)
            .await
    }

    /// Runs a task in the background, as a new task like [`run`](Self::run)
    /// in agent mode, and returns its live events (bounded: a slow reader
    /// slows the run; screenshots are dropped first) and a handle resolving
    /// to the result. The event stream ends after the run's last event
    /// (`Done`). The agent comes back with the result so it can run again,
    /// continue or be serialized.
    pub fn stream(
        mut self,
        instruction: String,
        start_url: Option<String>,
    ) -> (
        impl Stream<Item = RecordedEvent> + Send,
        tokio::task::JoinHandle<(Agent, Result<RunResult>)>,
    ) {
        let (tx, rx) = event_stream(256);
        let handle = tokio::spawn(async move {
            let r = self
                .run_inner(
                    &instruction,
                    start_url.as_deref(),
                    RunMode::Agent,
                    Some(tx),
                    true,
                )
                .await;
            self.end_stream();
            (self, r)
        });
        (rx, handle)
    }

    /// A snapshot of the current (or last) run to resume from later.
    pub fn serialize(&self, include_semantic: bool) -> Option<SerializedHistory> {
        self.session.as_ref().map(|s| s.serialize(include_semantic))
    }

    /// The session, once connected (for saving, secrets, follow-on tasks).
    pub fn session_mut(&mut self) -> Option<&mut Session> {
        self.session.as_mut()
    }

    /// Closes the browser. Dropping the agent also kills a browser it
    /// launched; `close` does it gracefully.
    pub async fn close(mut self) -> Result<()> {
        self.session = None;
        if let Some(c) = self.connected.take() {
            c.tab.close().await?;
        }
        Ok(())
    }
}

/// `tab` with its viewport aligned to the model's patches, when asked.
async fn aligned(tab: CdpTab, align: Option<(u32, u32)>) -> Result<Arc<dyn BrowserTab>> {
    if let Some((patch, max)) = align {
        tab.align_viewport(patch, max).await?;
    }
    Ok(Arc::new(tab))
}

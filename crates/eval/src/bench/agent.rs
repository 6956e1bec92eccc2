//! `cargo xtask bench agent`: what one step of the real engine costs, as
//! ratios measured in one run.
//!
//! A fixed 20-step scripted trajectory (type, key, scroll, hover, click,
//! navigate, read, terminate) runs on fixture pages in real headless
//! Chromium through the real `lumen` session and a real adapter, with the
//! mock provider answering instantly in that provider's wire format.
//! Configurations alternate run by run so they see the same machine load:
//! - `adaptive`: the defaults (JPEG q80, 2 screenshots kept, adaptive settle);
//! - `fixed-sleep`: the original's post-action sleeps (`RouterTiming`);
//! - `naive`: full-size PNG, `keep_recent + 1` screenshots, the baseline the
//!   token ratio is measured against.
//!
//! The tab and the adapter are wrapped (not modified) to time capture,
//! dispatch, settle, request building and stream decoding. The mock answers
//! from memory: its serving time is counted as engine overhead, which only
//! makes our figures worse. The raw CDP floor is the same 20 steps replayed
//! on the same browser, in the same run, with bare CDP calls: a
//! `Page.captureScreenshot` plus the input (and, for navigations, the
//! load) each step needs. A step's wall time runs from its start to the next
//! step's, so work the loop does between steps counts too.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use async_trait::async_trait;
use futures::{Stream, StreamExt as _};
use lumen::browser::{CdpTab, LaunchOptions};
use lumen::memory::ActionCache;
use lumen::models::{AdapterOptions, ApiKey};
use lumen::perception::router::{RouterTiming, SettleMode};
use lumen::{
    ActionOutcome, BrowserTab, ClickOptions, ImageFormat, ModelAdapter, ModelInfo, ModelResponse,
    ModelStream, Modifiers, MouseButton, Point, RunStatus, Screenshot, ScreenshotOptions, Session,
    SessionOptions, SettleOptions, SettleReport, Size, StepContext, TaskState, WireRecord,
};
use lumen_mock::mock_provider::MockProvider;
use lumen_mock::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_mock::{FixtureServer, element_center};
use serde_json::{Value, json};

/// Options of `cargo xtask bench agent`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// A shorter run: 2 runs per configuration, concurrency 1 and 2.
    #[arg(long)]
    quick: bool,
    /// Runs per configuration.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The wire protocol the mock answers in.
    #[arg(long, default_value = "anthropic")]
    provider: Wire,
    /// Internal: run the trajectory once as the engine alone, from this
    /// start page, against the parent bench's mock provider at
    /// `--engine-child-api`, and print the process's peak RSS.
    #[arg(long, hide = true, requires = "engine_child_api")]
    engine_child_start: Option<String>,
    /// Internal: the parent's mock provider (the adapter's base URL).
    #[arg(long, hide = true)]
    engine_child_api: Option<String>,
}

pub(crate) fn run(options: &Options) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    match (&options.engine_child_start, &options.engine_child_api) {
        (Some(start), Some(api)) => runtime.block_on(engine_child(options.provider, start, api)),
        _ => runtime.block_on(bench(options)),
    }
}

/// The adapter for `wire`, talking to the mock provider at `base_url`.
fn adapter(wire: Wire, base_url: &str) -> Result<Arc<dyn ModelAdapter>> {
    lumen::models::create_adapter(
        wire.model(),
        AdapterOptions {
            api_key: Some(ApiKey::new("bench")),
            base_url: Some(base_url.to_owned()),
            ..AdapterOptions::default()
        },
    )
    .map_err(|e| anyhow!("{e}"))
}

/// The child side of [`engine_alone`]: one adaptive run in a process that
/// holds nothing but the engine (and its Chromium, a process of its own).
/// Prints `{"peakMib": …}`.
async fn engine_child(wire: Wire, start: &str, api: &str) -> Result<()> {
    let tab = launch().await?;
    goto(&tab, start).await?;
    let adapter = adapter(wire, api)?;
    let mut session = Session::new(tab.clone(), adapter, Config::Adaptive.session())
        .map_err(|e| anyhow!("{e}"))?;
    let result = session
        .run("Fill the form, use the counter, scroll the list and read page 3")
        .await;
    tab.close().await.map_err(|e| anyhow!("{e}"))?;
    if result.status != RunStatus::Success {
        return Err(anyhow!(
            "the engine-alone run ended {:?}: {:?}",
            result.status,
            result.error
        ));
    }
    println!(
        "{}",
        json!({"peakMib": self_peak_mib(), "steps": result.steps})
    );
    Ok(())
}

/// The engine's peak RSS at one agent, measured apart from the mock
/// provider and the fixture server: the same adaptive run in a child
/// process of this binary that talks to this process's mock over HTTP.
async fn engine_alone(wire: Wire, site: &FixtureServer, t: &Targets) -> Result<f64> {
    let mock = MockProvider::start().await?;
    for (i, turn) in trajectory(t, site).iter().enumerate() {
        mock.push(wire.route(), wire.turn(i, turn, (1280, 720)));
    }
    let exe = std::env::current_exe().context("finding this binary")?;
    let child = tokio::process::Command::new(exe)
        .args(["bench", "agent", "--provider", wire.name()])
        .arg("--engine-child-start")
        .arg(site.url("form.html"))
        .arg("--engine-child-api")
        .arg(wire.base_url(&mock))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .context("running the engine-alone child")?;
    if !child.status.success() {
        return Err(anyhow!(
            "the engine-alone child failed: {}",
            String::from_utf8_lossy(&child.stderr)
        ));
    }
    let out: Value = serde_json::from_slice(&child.stdout).with_context(|| {
        format!(
            "the child printed {}",
            String::from_utf8_lossy(&child.stdout)
        )
    })?;
    if mock.pending(wire.route()) != 0 {
        return Err(anyhow!("the engine-alone run left turns unused"));
    }
    out["peakMib"]
        .as_f64()
        .ok_or_else(|| anyhow!("no peakMib in {out}"))
}

/// Nanosecond counters of where a run's time went.
#[derive(Debug, Default)]
struct Phases {
    capture: AtomicU64,
    dispatch: AtomicU64,
    settle: AtomicU64,
    request: AtomicU64,
    decode: AtomicU64,
    other: AtomicU64,
}

impl Phases {
    fn add(counter: &AtomicU64, since: Instant) {
        counter.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn ms(counter: &AtomicU64, steps: usize) -> f64 {
        counter.load(Ordering::Relaxed) as f64 / 1e6 / steps.max(1) as f64
    }
}

/// The real tab, with each call timed into a phase.
struct TimedTab {
    inner: Arc<CdpTab>,
    phases: Arc<Phases>,
}

macro_rules! timed {
    ($self:ident, $phase:ident, $call:expr) => {{
        let t = Instant::now();
        let r = $call.await;
        Phases::add(&$self.phases.$phase, t);
        r
    }};
}

#[async_trait]
impl BrowserTab for TimedTab {
    async fn screenshot(&self, o: &ScreenshotOptions) -> lumen::Result<Screenshot> {
        timed!(self, capture, self.inner.screenshot(o))
    }
    async fn viewport(&self) -> lumen::Result<Size> {
        timed!(self, other, self.inner.viewport())
    }
    async fn set_viewport(&self, size: Size, dpr: f64) -> lumen::Result<()> {
        self.inner.set_viewport(size, dpr).await
    }
    async fn url(&self) -> lumen::Result<String> {
        timed!(self, other, self.inner.url())
    }
    async fn title(&self) -> lumen::Result<String> {
        timed!(self, other, self.inner.title())
    }
    fn cursor(&self) -> Option<Point> {
        self.inner.cursor()
    }
    async fn form_fields(&self) -> lumen::Result<Option<Vec<lumen::FormField>>> {
        timed!(self, other, self.inner.form_fields())
    }
    async fn scroll_offset(&self) -> lumen::Result<Option<lumen::ScrollOffset>> {
        timed!(self, other, self.inner.scroll_offset())
    }
    async fn set_scroll_offset(&self, offset: lumen::ScrollOffset) -> lumen::Result<ActionOutcome> {
        timed!(self, other, self.inner.set_scroll_offset(offset))
    }
    async fn element_at(&self, at: Point) -> lumen::Result<Option<lumen::ElementInfo>> {
        timed!(self, other, self.inner.element_at(at))
    }
    async fn focused_element(&self) -> lumen::Result<Option<lumen::ElementInfo>> {
        timed!(self, other, self.inner.focused_element())
    }
    async fn page_text(&self) -> lumen::Result<String> {
        timed!(self, other, self.inner.page_text())
    }
    async fn click(&self, at: Point, o: ClickOptions) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.click(at, o))
    }
    async fn hover(&self, at: Point) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.hover(at))
    }
    async fn drag(&self, from: Point, to: Point, path: &[Point]) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.drag(from, to, path))
    }
    async fn mouse_down(&self, at: Option<Point>, b: MouseButton) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.mouse_down(at, b))
    }
    async fn mouse_up(&self, at: Option<Point>, b: MouseButton) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.mouse_up(at, b))
    }
    async fn scroll(
        &self,
        at: Point,
        dx: f64,
        dy: f64,
        m: Modifiers,
    ) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.scroll(at, dx, dy, m))
    }
    async fn type_text(&self, text: &str) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.type_text(text))
    }
    async fn key_press(&self, keys: &[String]) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.key_press(keys))
    }
    async fn hold_key(&self, keys: &[String], d: Duration) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.hold_key(keys, d))
    }
    async fn goto(&self, url: &str) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.goto(url))
    }
    async fn back(&self) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.back())
    }
    async fn forward(&self) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.forward())
    }
    async fn reload(&self) -> lumen::Result<ActionOutcome> {
        timed!(self, dispatch, self.inner.reload())
    }
    async fn settle(&self, o: &SettleOptions) -> lumen::Result<SettleReport> {
        timed!(self, settle, self.inner.settle(o))
    }
    async fn evaluate(&self, expression: &str) -> lumen::Result<Value> {
        timed!(self, other, self.inner.evaluate(expression))
    }
    async fn close(&self) -> lumen::Result<()> {
        self.inner.close().await
    }
}

/// The real adapter, with request building/sending and stream decoding
/// timed. Action execution happens between polls and is not counted here.
struct TimedAdapter {
    inner: Arc<dyn ModelAdapter>,
    phases: Arc<Phases>,
}

struct TimedStream {
    inner: ModelStream,
    phases: Arc<Phases>,
}

impl Stream for TimedStream {
    type Item = <ModelStream as Stream>::Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let t = Instant::now();
        let r = self.inner.poll_next_unpin(cx);
        Phases::add(&self.phases.decode, t);
        r
    }
}

#[async_trait]
impl ModelAdapter for TimedAdapter {
    fn info(&self) -> &ModelInfo {
        self.inner.info()
    }
    async fn stream(&self, ctx: &StepContext<'_>) -> lumen::Result<ModelStream> {
        let inner = timed!(self, request, self.inner.stream(ctx))?;
        Ok(Box::pin(TimedStream {
            inner,
            phases: self.phases.clone(),
        }))
    }
    async fn step(&self, ctx: &StepContext<'_>) -> lumen::Result<ModelResponse> {
        self.inner.step(ctx).await
    }
    fn estimate_tokens(&self, ctx: &StepContext<'_>) -> u64 {
        self.inner.estimate_tokens(ctx)
    }
    async fn summarize(
        &self,
        wire: &[WireRecord],
        state: Option<&TaskState>,
    ) -> lumen::Result<String> {
        self.inner.summarize(wire, state).await
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Config {
    Adaptive,
    FixedSleep,
    Naive,
}

impl Config {
    const ALL: [Config; 3] = [Config::Adaptive, Config::FixedSleep, Config::Naive];

    fn name(self) -> &'static str {
        match self {
            Config::Adaptive => "adaptive",
            Config::FixedSleep => "fixed-sleep",
            Config::Naive => "naive",
        }
    }

    fn session(self) -> SessionOptions {
        let mut o = SessionOptions {
            max_steps: 25,
            ..SessionOptions::default()
        };
        match self {
            Config::Adaptive => {}
            Config::FixedSleep => o.settle = SettleMode::Fixed(RouterTiming::default()),
            Config::Naive => {
                o.screenshot = ScreenshotOptions {
                    format: ImageFormat::Png,
                    ..ScreenshotOptions::default()
                };
                o.history.keep_recent += 1;
                o.history.older_image_scale = 1.0;
                o.history.keep_turns = None;
            }
        }
        o
    }
}

/// Where the trajectory's targets are, read from the pages once.
struct Targets {
    name: Point,
    email: Point,
    submit: Point,
    inc: Point,
    hover: Point,
    next: Point,
}

async fn center(tab: &CdpTab, selector: &str) -> Result<Point> {
    element_center(tab, selector)
        .await
        .map_err(|e| anyhow!("{e}"))?
        .ok_or_else(|| anyhow!("no element {selector}"))
}

async fn goto(tab: &CdpTab, url: &str) -> Result<()> {
    let o = tab.goto(url).await.map_err(|e| anyhow!("{e}"))?;
    if !o.ok {
        return Err(anyhow!("could not open {url}: {:?}", o.error));
    }
    Ok(())
}

async fn targets(tab: &CdpTab, site: &FixtureServer) -> Result<Targets> {
    goto(tab, &site.url("form.html")).await?;
    let (name, email, submit) = (
        center(tab, "#name").await?,
        center(tab, "#email").await?,
        center(tab, "#submit").await?,
    );
    goto(tab, &site.url("counter.html")).await?;
    let (inc, hover) = (center(tab, "#inc").await?, center(tab, "#hover").await?);
    goto(tab, &site.url("links/page1.html")).await?;
    let next = center(tab, "#next").await?;
    Ok(Targets {
        name,
        email,
        submit,
        inc,
        hover,
        next,
    })
}

/// The 20 turns: one action each (the first two click then type).
fn trajectory(t: &Targets, site: &FixtureServer) -> Vec<Vec<ScriptStep>> {
    use ScriptStep::*;
    let p = |p: Point| (p.x, p.y);
    let (nx, ny) = p(t.name);
    let (ex, ey) = p(t.email);
    vec![
        vec![TypeAt(nx, ny, "Ada Lovelace".into())],
        vec![TypeAt(ex, ey, "ada@example.com".into())],
        vec![Key("Tab".into())],
        vec![ScrollDown],
        vec![Hover(t.submit.x, t.submit.y)],
        vec![Click(t.submit.x, t.submit.y)],
        vec![Goto(site.url("counter.html"))],
        vec![Click(t.inc.x, t.inc.y)],
        vec![Click(t.inc.x, t.inc.y)],
        vec![Type("abc".into())],
        vec![Hover(t.hover.x, t.hover.y)],
        vec![Goto(site.url("scroll.html"))],
        vec![ScrollDown],
        vec![Key("Page_Down".into())],
        vec![Key("Home".into())],
        vec![Goto(site.url("links/page1.html"))],
        vec![Click(t.next.x, t.next.y)],
        vec![Click(t.next.x, t.next.y)],
        vec![ScrollDown],
        vec![Done("Page 3 of 3".into())],
    ]
}

/// Reads one phase's milliseconds per step out of a run.
type Phase = fn(&RunStats) -> f64;

/// What one run measured.
#[derive(Debug, Clone, Default)]
struct RunStats {
    step_ms: Vec<f64>,
    capture: f64,
    dispatch: f64,
    settle: f64,
    request: f64,
    decode: f64,
    other: f64,
    bytes: Vec<usize>,
    images: Vec<usize>,
    tokens: Vec<f64>,
    cacheable: Vec<f64>,
    /// Requests the mock provider received.
    model_calls: usize,
}

/// Anthropic's estimate: an image costs width × height / 750 tokens (its
/// real size, read from the image itself), text about one token per 4
/// characters. Returns the tokens, the image count and the body's bytes.
fn estimate_tokens(body: &Value) -> (f64, usize, usize) {
    fn image_pixels(data: &str) -> Option<f64> {
        use base64::Engine as _;
        let b64 = data.rsplit_once(";base64,").map_or(data, |(_, d)| d);
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        let (w, h) = image::ImageReader::new(std::io::Cursor::new(bytes))
            .with_guessed_format()
            .ok()?
            .into_dimensions()
            .ok()?;
        Some(f64::from(w) * f64::from(h))
    }
    fn walk(v: &Value, pixels: &mut Vec<f64>, image_chars: &mut usize) {
        match v {
            Value::String(s)
                if s.len() > 512
                    && (s.starts_with("/9j/")
                        || s.starts_with("iVBOR")
                        || s.contains(";base64,")) =>
            {
                pixels.push(image_pixels(s).unwrap_or(0.0));
                *image_chars += s.len();
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, pixels, image_chars)),
            Value::Object(o) => o.values().for_each(|x| walk(x, pixels, image_chars)),
            _ => {}
        }
    }
    let text = body.to_string();
    let (mut pixels, mut image_chars) = (Vec::new(), 0);
    walk(body, &mut pixels, &mut image_chars);
    let image_tokens: f64 = pixels.iter().map(|p| p / 750.0).sum();
    let tokens = image_tokens + text.len().saturating_sub(image_chars) as f64 / 4.0;
    (tokens, pixels.len(), text.len())
}

/// With `LUMEN_BENCH_DUMP=<dir>`, writes each request body of a run to
/// `<dir>/<config>-<n>.json` (the last run of each configuration wins),
/// images replaced by `<image W×H, T tokens>`: where the tokens go.
fn dump_requests(config: Config, bodies: &[&Value]) -> Result<()> {
    fn strip(v: &Value) -> Value {
        match v {
            Value::String(s) if s.len() > 512 => match estimate_tokens(&json!([s])) {
                // The brackets and quotes around it are one token.
                (tokens, 1, _) => Value::String(format!("<image, {:.0} tokens>", tokens - 1.0)),
                _ => v.clone(),
            },
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), strip(v))).collect())
            }
            other => other.clone(),
        }
    }
    let Some(dir) = std::env::var_os("LUMEN_BENCH_DUMP") else {
        return Ok(());
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (i, body) in bodies.iter().enumerate() {
        let path = dir.join(format!("{}-{i:02}.json", config.name()));
        let text = serde_json::to_string_pretty(&strip(body))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// How a run meets the action cache.
#[derive(Debug, Clone, Copy)]
enum Cache<'a> {
    /// No cache.
    Off,
    /// The model answers every step; the run is saved as a script.
    Record(&'a Arc<ActionCache>),
    /// The saved script answers: the mock has no turn queued, so a model
    /// call fails the run.
    Replay(&'a Arc<ActionCache>),
}

async fn one_run(
    wire: Wire,
    config: Config,
    site: &FixtureServer,
    targets: &Targets,
    tab: Arc<CdpTab>,
    cache: Cache<'_>,
) -> Result<RunStats> {
    let mock = MockProvider::start()
        .await
        .context("starting the mock provider")?;
    let vp = tab.viewport().await.map_err(|e| anyhow!("{e}"))?;
    if !matches!(cache, Cache::Replay(_)) {
        for (i, turn) in trajectory(targets, site).iter().enumerate() {
            mock.push(wire.route(), wire.turn(i, turn, (vp.width, vp.height)));
        }
    }
    goto(&tab, &site.url("form.html")).await?;
    let phases = Arc::new(Phases::default());
    let adapter = adapter(wire, &wire.base_url(&mock))?;
    let adapter = Arc::new(TimedAdapter {
        inner: adapter,
        phases: phases.clone(),
    });
    let timed = Arc::new(TimedTab {
        inner: tab,
        phases: phases.clone(),
    });
    let mut options = config.session();
    if let Cache::Record(c) | Cache::Replay(c) = cache {
        options.cache = Some(c.clone());
    }
    let mut session = Session::new(timed, adapter, options).map_err(|e| anyhow!("{e}"))?;
    let result = session
        .run("Fill the form, use the counter, scroll the list and read page 3")
        .await;
    if result.status != RunStatus::Success {
        // What each step did, so a failed replay says where and why.
        let steps: Vec<String> = result
            .history
            .iter()
            .map(|s| {
                let calls: Vec<String> = s
                    .actions
                    .iter()
                    .map(|a| {
                        let why = a.execution.error.clone().unwrap_or_default();
                        format!(
                            "{} {} {why} {:?}",
                            a.call.id,
                            a.call.action.kind(),
                            a.execution.hints
                        )
                    })
                    .collect();
                format!("step {}: {}", s.step, calls.join("; "))
            })
            .collect();
        return Err(anyhow!(
            "{} run ended {:?}: {:?}\n{}",
            config.name(),
            result.status,
            result.error,
            steps.join("\n")
        ));
    }
    let steps = result.history.len();
    // A step lasts from its start to the next step's start, so the work
    // the loop does between steps (form state, checkpoints) counts too.
    let step_ms = result
        .history
        .iter()
        .zip(result.history.iter().skip(1).map(Some).chain([None]))
        .map(|(h, next)| match next {
            Some(n) => n.started_at_ms.saturating_sub(h.started_at_ms) as f64,
            None => h.duration_ms as f64,
        })
        .collect();
    let mut s = RunStats {
        step_ms,
        capture: Phases::ms(&phases.capture, steps),
        dispatch: Phases::ms(&phases.dispatch, steps),
        settle: Phases::ms(&phases.settle, steps),
        request: Phases::ms(&phases.request, steps),
        decode: Phases::ms(&phases.decode, steps),
        other: Phases::ms(&phases.other, steps),
        model_calls: mock.requests().len(),
        ..RunStats::default()
    };
    dump_requests(
        config,
        &mock.requests().iter().map(|r| &r.body).collect::<Vec<_>>(),
    )?;
    for r in mock.requests() {
        let (tokens, images, bytes) = estimate_tokens(&r.body);
        let text = r.body.to_string();
        // What a steady-state request reads from the prompt cache: the
        // prefix up to the second-to-last breakpoint (the last one marks
        // what this request writes for the next).
        let marks: Vec<usize> = text
            .match_indices("cache_control")
            .map(|(i, _)| i)
            .collect();
        let cacheable = match marks.len() {
            0 | 1 => 0.0,
            n => marks[n - 2] as f64 / text.len() as f64,
        };
        s.tokens.push(tokens);
        s.images.push(images);
        s.bytes.push(bytes);
        s.cacheable.push(cacheable);
    }
    Ok(s)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn min_max(v: &[f64]) -> (f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// The raw CDP floor of the trajectory itself, on the same browser: each
/// step is a bare `Page.captureScreenshot` (JPEG q80, as the engine takes
/// it) plus the input calls that step needs (press/release, insertText, a
/// key down/up, one wheel event, a pointer move) and, for steps that
/// navigate, `Page.navigate` or the link click followed by polling until the
/// new document is complete. No receipts, no settling, no model protocol.
/// Returns each step's milliseconds.
async fn raw_replay(tab: &CdpTab, t: &Targets, site: &FixtureServer) -> Result<Vec<f64>> {
    async fn call(tab: &CdpTab, method: &'static str, params: Value) -> Result<Value> {
        tab.cdp(method, params).await.map_err(|e| anyhow!("{e}"))
    }
    async fn press(tab: &CdpTab, p: Point) -> Result<()> {
        for kind in ["mousePressed", "mouseReleased"] {
            call(
                tab,
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": p.x, "y": p.y, "button": "left", "clickCount": 1}),
            )
            .await?;
        }
        Ok(())
    }
    async fn arrive(tab: &CdpTab, url: &str) -> Result<()> {
        let check = format!(
            "location.href === {} && document.readyState === 'complete'",
            Value::from(url)
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let v = call(
                tab,
                "Runtime.evaluate",
                json!({"expression": check, "returnByValue": true}),
            )
            .await
            .unwrap_or(Value::Null);
            if v["result"]["value"] == true {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Err(anyhow!("the raw replay never reached {url}"))
    }
    goto(tab, &site.url("form.html")).await?;
    let turns = trajectory(t, site);
    let mut page = 1;
    let mut out = Vec::with_capacity(turns.len());
    for turn in &turns {
        let started = Instant::now();
        call(
            tab,
            "Page.captureScreenshot",
            json!({"format": "jpeg", "quality": 80}),
        )
        .await?;
        for step in turn {
            match step {
                ScriptStep::TypeAt(x, y, text) => {
                    press(tab, Point::new(*x, *y)).await?;
                    call(tab, "Input.insertText", json!({ "text": text })).await?;
                }
                ScriptStep::Type(text) => {
                    call(tab, "Input.insertText", json!({ "text": text })).await?;
                }
                ScriptStep::Key(name) => {
                    let (key, code) = match name.as_str() {
                        "Tab" => ("Tab", 9),
                        "Page_Down" => ("PageDown", 34),
                        "Home" => ("Home", 36),
                        other => return Err(anyhow!("no raw key for {other}")),
                    };
                    for kind in ["rawKeyDown", "keyUp"] {
                        call(
                            tab,
                            "Input.dispatchKeyEvent",
                            json!({"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code}),
                        )
                        .await?;
                    }
                }
                ScriptStep::ScrollDown => {
                    call(
                        tab,
                        "Input.dispatchMouseEvent",
                        json!({"type": "mouseWheel", "x": 640, "y": 360, "deltaX": 0,
                               "deltaY": 5.0 * lumen::core::action::PIXELS_PER_WHEEL_CLICK}),
                    )
                    .await?;
                }
                ScriptStep::Hover(x, y) => {
                    call(
                        tab,
                        "Input.dispatchMouseEvent",
                        json!({"type": "mouseMoved", "x": x, "y": y}),
                    )
                    .await?;
                }
                ScriptStep::Click(x, y) => {
                    press(tab, Point::new(*x, *y)).await?;
                    // The "next" link leads from page N to page N+1.
                    if Point::new(*x, *y) == t.next {
                        page += 1;
                        arrive(tab, &site.url(&format!("links/page{page}.html"))).await?;
                    }
                }
                ScriptStep::Goto(url) => {
                    call(tab, "Page.navigate", json!({ "url": url })).await?;
                    arrive(tab, url).await?;
                }
                _ => {}
            }
        }
        out.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(out)
}

/// A bare capture plus the pressed/released pair, on the same browser.
async fn floor(tab: &CdpTab, samples: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        tab.cdp(
            "Page.captureScreenshot",
            json!({"format": "jpeg", "quality": 80}),
        )
        .await
        .map_err(|e| anyhow!("{e}"))?;
        for kind in ["mousePressed", "mouseReleased"] {
            tab.cdp(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": 5, "y": 5, "button": "left", "clickCount": 1}),
            )
            .await
            .map_err(|e| anyhow!("{e}"))?;
        }
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(out)
}

fn self_peak_mib() -> f64 {
    crate::util::status_kb("VmHWM:", std::process::id()).unwrap_or(0) as f64 / 1024.0
}

fn self_rss_mib() -> f64 {
    crate::util::status_kb("VmRSS:", std::process::id()).unwrap_or(0) as f64 / 1024.0
}

async fn launch() -> Result<Arc<CdpTab>> {
    Ok(Arc::new(
        CdpTab::launch(LaunchOptions::default())
            .await
            .map_err(|e| anyhow!("{e}"))?,
    ))
}

async fn bench(options: &Options) -> Result<()> {
    let runs = if options.quick {
        2
    } else {
        options.runs.max(1)
    };
    let wire = options.provider;
    let site = FixtureServer::start()
        .await
        .context("starting the fixture server")?;
    let tab = launch().await?;
    let t = targets(&tab, &site).await?;

    // Configurations alternate run by run.
    let mut stats: Vec<(Config, Vec<RunStats>)> =
        Config::ALL.iter().map(|c| (*c, Vec::new())).collect();
    let mut raw = Vec::new();
    let mut reruns = Vec::new();
    // The engine at one agent: this process's peak once the first run (the
    // adaptive one) is done, before any other configuration ran.
    let mut one_agent_mib = None;
    for _ in 0..runs {
        for (config, list) in stats.iter_mut() {
            list.push(one_run(wire, *config, &site, &t, tab.clone(), Cache::Off).await?);
            one_agent_mib.get_or_insert_with(self_peak_mib);
        }
        raw.push(raw_replay(&tab, &t, &site).await?);
        reruns.push(rerun(wire, &site, &t, tab.clone()).await?);
    }
    let moved = moved_button(wire).await?;
    let engine_mib = engine_alone(wire, &site, &t).await?;
    let floor_ms = floor(&tab, if options.quick { 20 } else { 60 }).await?;
    let floor_median = median(floor_ms.clone());
    let chromium_mib = tab
        .browser_pid()
        .map(crate::util::tree_rss_mib)
        .unwrap_or(0.0);

    // Cold start: Agent::run until the first provider request, against the
    // Chromium launch alone; without a start URL (the target) and with one.
    let mut cold = Cold::default();
    for _ in 0..if options.quick { 1 } else { 3 } {
        let t0 = Instant::now();
        let probe = launch().await?;
        cold.launch.push(t0.elapsed().as_secs_f64() * 1000.0);
        probe.close().await.map_err(|e| anyhow!("{e}"))?;
        cold.blank.push(cold_start(wire, None).await?);
        cold.start_url
            .push(cold_start(wire, Some(&site.url("form.html"))).await?);
    }

    // Concurrency: N agents, each with its own browser and mock.
    let levels: &[usize] = if options.quick {
        &[1, 2]
    } else {
        &[1, 2, 4, 8]
    };
    let mut concurrency = Vec::new();
    for &n in levels {
        for browsers in [Browsers::Own, Browsers::Contexts] {
            concurrency.push(concurrent(wire, n, browsers, &site, &t).await?);
        }
    }

    report(
        wire,
        &stats,
        &raw,
        one_agent_mib.unwrap_or(0.0),
        floor_median,
        chromium_mib,
        &cold,
        &concurrency,
        &reruns,
        &moved,
        engine_mib,
    )?;
    tab.close().await.map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Cold-start samples, milliseconds.
#[derive(Default)]
struct Cold {
    /// `Agent::run` without a start URL until the first request.
    blank: Vec<f64>,
    /// `Agent::run` with a start URL until the first request.
    start_url: Vec<f64>,
    /// `CdpTab::launch` alone.
    launch: Vec<f64>,
}

async fn cold_start(wire: Wire, start_url: Option<&str>) -> Result<f64> {
    let mock = MockProvider::start().await?;
    mock.push(
        wire.route(),
        wire.turn(0, &[ScriptStep::Done("ok".into())], (1280, 720)),
    );
    let options = lumen::AgentOptions {
        adapter: AdapterOptions {
            api_key: Some(ApiKey::new("bench")),
            base_url: Some(wire.base_url(&mock)),
            ..AdapterOptions::default()
        },
        session: SessionOptions {
            max_steps: 2,
            ..SessionOptions::default()
        },
        ..lumen::AgentOptions::new(wire.model())
    };
    let mut agent = lumen::Agent::new(options);
    let t0 = Instant::now();
    let watch = async {
        while mock.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        t0.elapsed().as_secs_f64() * 1000.0
    };
    let (first, run) = tokio::join!(watch, agent.run("finish", start_url));
    run.map_err(|e| anyhow!("{e}"))?;
    agent.close().await.map_err(|e| anyhow!("{e}"))?;
    Ok(first)
}

/// How concurrent agents get their browsers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Browsers {
    /// One Chromium process each.
    Own,
    /// One Chromium, a browser context (`CdpTab::open_isolated`) each.
    Contexts,
}

/// One level of the concurrency table.
struct Level {
    agents: usize,
    browsers: Browsers,
    step_ms: f64,
    engine_growth_mib: f64,
    chromium_mib: f64,
}

async fn concurrent(
    wire: Wire,
    n: usize,
    browsers: Browsers,
    site: &FixtureServer,
    t: &Targets,
) -> Result<Level> {
    let base = self_rss_mib();
    let mut tabs = Vec::new();
    let host = match browsers {
        Browsers::Own => None,
        Browsers::Contexts => Some(launch().await?),
    };
    for _ in 0..n {
        tabs.push(match &host {
            None => launch().await?,
            Some(h) => Arc::new(h.open_isolated().await.map_err(|e| anyhow!("{e}"))?),
        });
    }
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max((self_rss_mib() * 1024.0) as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let runs = futures::future::join_all(
        tabs.iter()
            .map(|tab| one_run(wire, Config::Adaptive, site, t, tab.clone(), Cache::Off)),
    )
    .await;
    sampler.abort();
    // Every Chromium process the agents used, at the end of their runs.
    let chromium_mib = match &host {
        Some(h) => h
            .browser_pid()
            .map(crate::util::tree_rss_mib)
            .unwrap_or(0.0),
        None => tabs
            .iter()
            .filter_map(|tab| tab.browser_pid())
            .map(crate::util::tree_rss_mib)
            .sum(),
    };
    for tab in &tabs {
        tab.close().await.map_err(|e| anyhow!("{e}"))?;
    }
    if let Some(h) = host {
        h.close().await.map_err(|e| anyhow!("{e}"))?;
    }
    let mut step_ms = Vec::new();
    for r in runs {
        step_ms.extend(r?.step_ms);
    }
    let peak_mib = peak.load(Ordering::Relaxed) as f64 / 1024.0;
    Ok(Level {
        agents: n,
        browsers,
        step_ms: median(step_ms),
        engine_growth_mib: (peak_mib - base).max(0.0),
        chromium_mib,
    })
}

/// The trajectory run twice on one cache: recorded with the model, then
/// rerun from its script. Returns the rerun.
async fn rerun(
    wire: Wire,
    site: &FixtureServer,
    t: &Targets,
    tab: Arc<CdpTab>,
) -> Result<RunStats> {
    let dir = tempfile::tempdir().context("a folder for the run scripts")?;
    let cache = Arc::new(ActionCache::open(dir.path()).map_err(|e| anyhow!("{e}"))?);
    one_run(
        wire,
        Config::Adaptive,
        site,
        t,
        tab.clone(),
        Cache::Record(&cache),
    )
    .await?;
    let again = one_run(wire, Config::Adaptive, site, t, tab, Cache::Replay(&cache)).await?;
    if again.model_calls != 0 {
        return Err(anyhow!("the rerun made {} model calls", again.model_calls));
    }
    Ok(again)
}

/// The rerun on a changed page: `fixtures/sites/rerun/order.html`, then
/// its variant whose buttons swapped places, at the same address.
struct Moved {
    /// Steps of the rerun, and which of them were replayed.
    replayed: Vec<bool>,
    /// Model calls of the first run and of the rerun.
    calls: (usize, usize),
    /// The first step the model answered in the rerun.
    fell_back_at: Option<usize>,
}

async fn moved_button(wire: Wire) -> Result<Moved> {
    const TASK: &str = "Order three packs of tea and say what the basket holds";
    let root = tempfile::tempdir().context("a web root")?;
    let serve = |variant: &str| {
        let from = lumen_mock::fixtures_root().join("rerun").join(variant);
        std::fs::copy(&from, root.path().join("order.html"))
            .with_context(|| format!("copying {}", from.display()))
    };
    serve("order.html")?;
    let site = FixtureServer::start_at(root.path()).await?;
    let tab = launch().await?;
    let dir = tempfile::tempdir().context("a folder for the run scripts")?;
    let cache = Arc::new(ActionCache::open(dir.path()).map_err(|e| anyhow!("{e}"))?);
    let mock = MockProvider::start().await?;
    let mut calls = Vec::new();
    let mut last = None;
    for variant in ["order.html", "order-moved.html"] {
        serve(variant)?;
        goto(&tab, &site.url("order.html")).await?;
        let (qty, add) = (center(&tab, "#qty").await?, center(&tab, "#add").await?);
        let turns: Vec<Vec<ScriptStep>> = match variant {
            "order.html" => vec![
                vec![ScriptStep::TypeAt(qty.x, qty.y, "3".into())],
                vec![ScriptStep::Click(add.x, add.y)],
                vec![ScriptStep::Done("Basket: 3 × green tea".into())],
            ],
            // The model is asked from the moved button on.
            _ => vec![
                vec![ScriptStep::Click(add.x, add.y)],
                vec![ScriptStep::Done("Basket: 3 × green tea".into())],
            ],
        };
        let sent = mock.requests().len();
        for (i, turn) in turns.iter().enumerate() {
            mock.push(wire.route(), wire.turn(sent + i, turn, (1280, 720)));
        }
        let adapter = adapter(wire, &wire.base_url(&mock))?;
        let options = SessionOptions {
            max_steps: 8,
            cache: Some(cache.clone()),
            ..SessionOptions::default()
        };
        let mut session =
            Session::new(tab.clone(), adapter, options).map_err(|e| anyhow!("{e}"))?;
        let r = session.run(TASK).await;
        if r.status != RunStatus::Success || mock.pending(wire.route()) != 0 {
            return Err(anyhow!(
                "the {variant} run ended {:?} with {} turns unused: {:?}",
                r.status,
                mock.pending(wire.route()),
                r.error
            ));
        }
        calls.push(mock.requests().len() - sent);
        last = Some(r);
    }
    tab.close().await.map_err(|e| anyhow!("{e}"))?;
    let r = last.ok_or_else(|| anyhow!("no rerun"))?;
    let replayed: Vec<bool> = r
        .history
        .iter()
        .map(|s| s.actions.iter().all(|a| a.call.id.starts_with("replay_")))
        .collect();
    Ok(Moved {
        fell_back_at: replayed.iter().position(|r| !r),
        replayed,
        calls: (calls[0], calls[1]),
    })
}

/// How a figure compares with its issue-21 target.
fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// Prints where the mean step of `runs` went; returns that mean.
fn breakdown(what: &str, runs: &[RunStats]) -> f64 {
    let mean_step = median(
        runs.iter()
            .map(|r| r.step_ms.iter().sum::<f64>() / r.step_ms.len().max(1) as f64)
            .collect(),
    );
    println!(
        "Breakdown of the mean {what}, {mean_step:.1} ms (navigations included; ms, medians over runs):"
    );
    let phases: [(&str, Phase); 6] = [
        ("capture (incl. encode)", |r| r.capture),
        ("request build + send", |r| r.request),
        ("stream decode", |r| r.decode),
        ("action dispatch", |r| r.dispatch),
        ("settle", |r| r.settle),
        ("page queries (url…)", |r| r.other),
    ];
    let mut accounted = 0.0;
    for (name, f) in phases {
        let ms = median(runs.iter().map(f).collect());
        accounted += ms;
        println!("  {name:<24} {ms:.2}");
    }
    println!(
        "  {:<24} {:.2}",
        "bookkeeping (rest)",
        (mean_step - accounted).max(0.0)
    );
    mean_step
}

/// Each step of the trajectory (medians over runs): the adaptive run, the
/// rerun from its script and the raw floor, so the median's neighbours
/// can be read.
fn per_step_table(adaptive: &[RunStats], reruns: &[RunStats], raw: &[Vec<f64>]) {
    let at = |runs: Vec<&Vec<f64>>, i: usize| {
        median(runs.iter().filter_map(|r| r.get(i).copied()).collect())
    };
    let steps = raw.iter().map(Vec::len).max().unwrap_or(0);
    println!("  per step (ms, medians over runs): adaptive / rerun / floor");
    let line: Vec<String> = (0..steps)
        .map(|i| {
            format!(
                "{i}: {:.0}/{:.0}/{:.0}",
                at(adaptive.iter().map(|r| &r.step_ms).collect(), i),
                at(reruns.iter().map(|r| &r.step_ms).collect(), i),
                at(raw.iter().collect(), i)
            )
        })
        .collect();
    for chunk in line.chunks(5) {
        println!("    {}", chunk.join("  "));
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    wire: Wire,
    stats: &[(Config, Vec<RunStats>)],
    raw: &[Vec<f64>],
    one_agent_mib: f64,
    floor_ms: f64,
    chromium_mib: f64,
    cold: &Cold,
    concurrency: &[Level],
    reruns: &[RunStats],
    moved: &Moved,
    engine_mib: f64,
) -> Result<()> {
    let per_step = |list: &[RunStats]| -> Vec<f64> {
        list.iter().map(|r| median(r.step_ms.clone())).collect()
    };
    let total_tokens =
        |list: &[RunStats]| -> Vec<f64> { list.iter().map(|r| r.tokens.iter().sum()).collect() };
    let find = |c: Config| {
        stats
            .iter()
            .find(|(x, _)| *x == c)
            .map(|(_, l)| l.as_slice())
            .unwrap_or(&[])
    };
    let (adaptive, fixed, naive) = (
        find(Config::Adaptive),
        find(Config::FixedSleep),
        find(Config::Naive),
    );

    println!(
        "cargo xtask bench agent — {} wire format, {} runs per configuration",
        wire.name(),
        adaptive.len()
    );
    println!();
    println!(
        "| configuration | per-step wall (ms) median [min–max] | input tokens / 20 steps | bytes / request | images / request |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (config, list) in stats {
        let step = per_step(list);
        let (lo, hi) = min_max(&step);
        let tokens = median(total_tokens(list));
        let bytes = median(
            list.iter()
                .flat_map(|r| r.bytes.iter().map(|b| *b as f64))
                .collect(),
        );
        let images = median(
            list.iter()
                .flat_map(|r| r.images.iter().map(|b| *b as f64))
                .collect(),
        );
        println!(
            "| {} | {:.1} [{:.1}–{:.1}] | {:.0} | {:.0} | {:.0} |",
            config.name(),
            median(step),
            lo,
            hi,
            tokens,
            bytes,
            images
        );
    }
    let overhead = median(per_step(adaptive));
    println!();
    let mean_step = breakdown("adaptive step", adaptive);
    let raw_step = median(raw.iter().map(|r| median(r.clone())).collect());
    let raw_mean = median(
        raw.iter()
            .map(|r| r.iter().sum::<f64>() / r.len().max(1) as f64)
            .collect(),
    );
    let overhead_to_floor = overhead / raw_step.max(1e-6);
    let trajectory_to_floor = mean_step / raw_mean.max(1e-6);
    let tokens_vs_naive = median(total_tokens(adaptive)) / median(total_tokens(naive)).max(1.0);
    let fixed_ratio = median(per_step(fixed)) / overhead.max(1e-6);
    let cacheable = median(adaptive.iter().flat_map(|r| r.cacheable.clone()).collect());
    // Priced by the model registry as Claude Sonnet 4.6: the cacheable share
    // of the input read from the cache, 20 output tokens a step.
    let tokens = median(total_tokens(adaptive));
    let usage = lumen::TokenUsage {
        input_tokens: (tokens * (1.0 - cacheable)).round() as u64,
        cache_read_tokens: (tokens * cacheable).round() as u64,
        output_tokens: 20 * 20,
        cache_write_tokens: 0,
    };
    let cost = lumen::models::registry::cost("anthropic/claude-sonnet-4-6", &usage).unwrap_or(0.0);
    let cold_ms = median(cold.blank.clone());
    let cold_url_ms = median(cold.start_url.clone());
    let launch_ms = median(cold.launch.clone());
    println!();
    println!(
        "raw CDP floor, the same 20 steps replayed with bare CDP calls: median step {raw_step:.2} ms, mean {raw_mean:.2} ms"
    );
    println!("  (a bare capture + press/release alone: {floor_ms:.2} ms)");
    per_step_table(adaptive, reruns, raw);
    println!(
        "overhead_to_floor: {overhead_to_floor:.2}x median step (target ≤ 1.15x: {}); whole trajectory {trajectory_to_floor:.2}x",
        verdict(overhead_to_floor <= 1.15)
    );
    println!("fixed-sleep / adaptive per step: {fixed_ratio:.2}x");
    println!(
        "tokens_vs_naive: {tokens_vs_naive:.2} (target ≤ 0.40: {}); share of request bytes read from the prompt cache ≈ {:.0}%",
        verdict(tokens_vs_naive <= 0.40),
        cacheable * 100.0
    );
    println!("estimated cost of the 20 steps at list prices: ${cost:.4}");
    println!(
        "engine peak RSS at one agent: {engine_mib:.1} MiB alone (target ≤ 30: {}; a child process running the same adaptive run against this process's mock); {one_agent_mib:.1} MiB with the mock and fixture server in the process; whole bench {:.1} MiB; Chromium tree RSS: {chromium_mib:.0} MiB",
        verdict(engine_mib <= 30.0),
        self_peak_mib()
    );
    println!(
        "cold start: Agent::run → first request {cold_ms:.0} ms vs Chromium launch {launch_ms:.0} ms ({:.2}x, target ≤ 1.0x: {}); with a start URL {cold_url_ms:.0} ms ({:.2}x: launch, load and first capture)",
        cold_ms / launch_ms.max(1e-6),
        verdict(cold_ms <= launch_ms),
        cold_url_ms / launch_ms.max(1e-6)
    );
    println!();
    println!(
        "| agents | browsers | per-step wall (ms) | per step ÷ one agent's | engine RSS growth (MiB) | per extra agent (MiB) | Chromium RSS (MiB) |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for l in concurrency {
        let one = concurrency
            .iter()
            .find(|o| o.agents == 1 && o.browsers == l.browsers)
            .map_or(l.step_ms, |o| o.step_ms);
        let per_extra = match l.agents {
            1 => 0.0,
            n => l.engine_growth_mib / (n - 1) as f64,
        };
        println!(
            "| {} | {} | {:.1} | {:.2}x | {:.1} | {:.1} | {:.0} |",
            l.agents,
            match l.browsers {
                Browsers::Own => "own process",
                Browsers::Contexts => "contexts of one",
            },
            l.step_ms,
            l.step_ms / one.max(1e-6),
            l.engine_growth_mib,
            per_extra,
            l.chromium_mib
        );
    }

    println!();
    breakdown("rerun step (from the saved script)", reruns);
    let rerun_step = median(per_step(reruns));
    let rerun_wall = median(reruns.iter().map(|r| r.step_ms.iter().sum()).collect());
    let raw_wall = median(raw.iter().map(|r| r.iter().sum()).collect());
    let rerun_to_floor = rerun_wall / raw_wall.max(1e-6);
    let rerun_calls: usize = reruns.iter().map(|r| r.model_calls).sum();
    println!();
    println!(
        "rerun from the saved script: {rerun_calls} model calls in {} reruns; median step {rerun_step:.1} ms (floor {raw_step:.1}); wall {rerun_wall:.0} ms vs the floor's {raw_wall:.0} ms: rerun_to_floor {rerun_to_floor:.2}x (target ≤ 1.2x with 0 calls: {})",
        reruns.len(),
        verdict(rerun_calls == 0 && rerun_to_floor <= 1.2)
    );
    println!(
        "rerun on a changed page (rerun/order.html, buttons swapped): model calls {} then {}; steps replayed {:?}; fell back at step {}",
        moved.calls.0,
        moved.calls.1,
        moved.replayed,
        moved.fell_back_at.map_or("none".into(), |s| s.to_string())
    );

    let json = json!({
        "rerun": {
            "model_calls": rerun_calls,
            "per_step_ms": rerun_step,
            "wall_ms": rerun_wall,
            "floor_wall_ms": raw_wall,
            "rerun_to_floor": rerun_to_floor,
            "changed_page": {
                "model_calls_first_run": moved.calls.0,
                "model_calls_rerun": moved.calls.1,
                "replayed": moved.replayed,
                "fell_back_at_step": moved.fell_back_at,
            },
        },
        "provider": wire.name(),
        "runs_per_config": adaptive.len(),
        "per_step_ms": {"adaptive": median(per_step(adaptive)), "fixed_sleep": median(per_step(fixed)), "naive": median(per_step(naive))},
        "floor_ms": raw_step,
        "floor_mean_ms": raw_mean,
        "bare_capture_click_ms": floor_ms,
        "overhead_to_floor": overhead_to_floor,
        "trajectory_to_floor": trajectory_to_floor,
        "tokens_20_steps": {"adaptive": median(total_tokens(adaptive)), "naive": median(total_tokens(naive))},
        "tokens_vs_naive": tokens_vs_naive,
        "cacheable_share": cacheable,
        "estimated_cost_usd": cost,
        "engine_peak_rss_mib": engine_mib,
        "engine_with_mock_peak_rss_mib": one_agent_mib,
        "bench_peak_rss_mib": self_peak_mib(),
        "chromium_rss_mib": chromium_mib,
        "cold_start_ms": cold_ms,
        "cold_start_with_start_url_ms": cold_url_ms,
        "chromium_launch_ms": launch_ms,
        "concurrency": concurrency.iter().map(|l| json!({"agents": l.agents, "browsers": format!("{:?}", l.browsers).to_lowercase(), "per_step_ms": l.step_ms, "rss_growth_mib": l.engine_growth_mib, "chromium_rss_mib": l.chromium_mib})).collect::<Vec<_>>(),
    });
    let dir = crate::util::project_root()?.join("target/bench");
    std::fs::create_dir_all(&dir).context("creating target/bench")?;
    let path = dir.join("agent.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!();
    println!("wrote {}", path.display());
    Ok(())
}

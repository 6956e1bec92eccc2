//! Command-line arguments (clap derive). Every `run` option is optional so a
//! config file can supply it; [`crate::config`] merges the two, flags first.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Lumen: a vision-first browser agent. Run a task, watch it live, and get a
/// trace folder with a report you can open offline.
#[derive(Debug, Parser)]
#[command(name = "lumen", version, about, long_about = None)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `lumen browser …` on its own: the browser commands' parser without the
/// other subcommands' arguments, which a direct command would otherwise
/// build (and drop) before doing anything else.
#[derive(Debug, Parser)]
#[command(
    name = "lumen browser",
    bin_name = "lumen browser",
    about = "Drive a background browser by hand, one command at a time."
)]
pub(crate) struct BrowserCli {
    #[command(flatten)]
    pub(crate) args: crate::direct::BrowserArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a task in a browser with a model.
    Run(Box<RunCmd>),
    /// Continue a run saved in a trace folder (its `session.json`) from its
    /// last completed step, into a new trace folder.
    Resume(Box<ResumeArgs>),
    /// The offline demo: a fixture site, a scripted mock model and real
    /// Chromium. Needs no network and no API key.
    Demo(DemoArgs),
    /// Re-run a recorded trace without the model, checking at every step
    /// that the page still looks as recorded.
    Replay(ReplayArgs),
    /// Drive a background browser by hand, one command at a time.
    Browser(crate::direct::BrowserArgs),
    /// Serve runs over HTTP: a JSON API, Server-Sent Events and a WebSocket.
    Serve(ServeArgs),
    /// Serve runs as JSON lines on stdin/stdout, for embedding.
    Ipc(ServeArgs),
    /// Serve runs and direct browser tools as an MCP server on stdio.
    Mcp(ServeArgs),
    /// Print the model registry: tool family, thinking style, temperature
    /// rule, image limits, context window, prices and status of each model
    /// (`?` marks a figure not confirmed offline); with MODEL, what that
    /// model runs with and whether the registry knows it.
    Models(ModelsArgs),
}

/// `lumen models [MODEL]`.
#[derive(Debug, Args)]
pub(crate) struct ModelsArgs {
    /// A model as provider/id (`openai/gpt-6.1-sol`): show its rules, how
    /// they were found, its status and whether its cost is estimated.
    pub(crate) model: Option<String>,
}

/// `lumen serve`, `lumen ipc` and `lumen mcp`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// TCP port (`serve` only; 0 picks a free one).
    #[arg(long, default_value_t = 3001)]
    pub(crate) port: u16,
    /// Address to listen on; anything but loopback requires `--token`.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) host: std::net::IpAddr,
    /// Where runs are persisted.
    #[arg(long, value_name = "DIR", default_value = "lumen-data")]
    pub(crate) data_dir: PathBuf,
    /// Bearer token required on every request but `/health` (`serve`).
    /// Prefer the environment variable: a flag is visible to every user in
    /// `ps`. Without one, `serve` generates a token at start, prints it once
    /// on stderr and writes it to `<data-dir>/token` (mode 0600).
    #[arg(long, env = lumen_server::TOKEN_ENV, hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Another name clients may use for the server in `Host` and `Origin`
    /// (`name` or `name:port`; repeatable), such as a reverse proxy's. Only
    /// the bound address (loopback names on loopback) is accepted otherwise.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(crate) allow_hosts: Vec<String>,
    /// Runs executing at once (a browser context each).
    #[arg(long, default_value_t = 2)]
    pub(crate) max_concurrent: usize,
    /// The most local Chromium processes runs are spread over; each serves
    /// many runs, a browser context each (use --max-concurrent's value for
    /// a process per run).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub(crate) browser_processes: u64,
    /// Launch Chromium when the server starts, so the first run does not
    /// wait for it (by default it is launched with the first run).
    #[arg(long)]
    pub(crate) prelaunch: bool,
    /// Keep runs in PostgreSQL (`postgres://user:password@host/db`) instead
    /// of SQLite in the data directory: every `lumen serve` given the same
    /// database shares one run queue (docs/deployment.md). Prefer the
    /// environment variable: a flag is visible in `ps`.
    #[arg(
        long,
        env = "LUMEN_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) database_url: Option<String>,
    /// This server's name in the shared queue (default: host name and pid).
    #[arg(long, value_name = "NAME", requires = "database_url")]
    pub(crate) worker_id: Option<String>,
    /// With --database-url: runs executing at once across all workers.
    #[arg(long, value_name = "N", requires = "database_url")]
    pub(crate) global_max_concurrent: Option<usize>,
    /// With --database-url: a worker silent this long loses its runs to
    /// another, which resumes them from their last completed step.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) lease_secs: u64,
    /// The most follow-on tasks one run takes (`POST /v1/runs/{id}/tasks`,
    /// IPC `add_task`); more are refused with 409 `task_limit`.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub(crate) max_tasks_per_run: usize,
    /// Model used when a request names none.
    #[arg(long, short = 'm')]
    pub(crate) model: Option<String>,
    /// Base URL of the model API (an OpenAI-compatible server, a proxy).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// Only these sites may be visited by any run (repeatable;
    /// `*.example.com`). A request may only narrow it.
    #[arg(long = "allow-domain", value_name = "PATTERN")]
    pub(crate) allow_domains: Vec<String>,
    /// These sites are never visited by any run (repeatable).
    #[arg(long = "block-domain", value_name = "PATTERN")]
    pub(crate) block_domains: Vec<String>,
    /// The folder runs may upload files from: a request's `uploadDir:
    /// true` (or a relative subfolder of it). Without it, uploads stay off.
    #[arg(long, value_name = "DIR")]
    pub(crate) upload_root: Option<PathBuf>,
    /// The folder downloads are saved under: a request's `downloadDir:
    /// true` (or a subfolder, created). Without it, downloads are refused.
    #[arg(long, value_name = "DIR")]
    pub(crate) download_root: Option<PathBuf>,
    /// The action cache folder: a request's `cache: true` (or a
    /// subfolder). Without it, requests cannot use the cache.
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_root: Option<PathBuf>,
    /// The workflow-memory file a request's `workflows: true` uses.
    #[arg(long = "workflows", value_name = "FILE")]
    pub(crate) workflows_file: Option<PathBuf>,
    /// A browser a request may attach its run to with `cdpUrl`
    /// (repeatable; `ws://…` or `http://host:port`, matched exactly). Any
    /// other endpoint is refused: this machine would connect to it.
    #[arg(long = "allow-cdp-url", value_name = "URL")]
    pub(crate) allowed_cdp_urls: Vec<String>,
    /// A model a request may choose for its run, planner or verifier
    /// (repeatable; `provider/id`, a trailing `*` matches every id it
    /// begins). Without it, any model; the default model is always allowed.
    #[arg(long = "allow-model", value_name = "MODEL")]
    pub(crate) allowed_models: Vec<String>,
    /// Let a request run in Browserbase (`browserbase: true`) with this
    /// server's BROWSERBASE_API_KEY and BROWSERBASE_PROJECT_ID.
    #[arg(long)]
    pub(crate) allow_browserbase: bool,
    /// Serve runs from this remote browser instead of launching Chromium
    /// (repeatable: a pool; `ws://…/devtools/browser/…`, `http://host:port`
    /// or a browserless URL). A lost browser fails over to another.
    #[arg(long = "browser-endpoint", value_name = "URL")]
    pub(crate) browser_endpoints: Vec<String>,
    /// With --browser-endpoint: the most runs each endpoint takes at once.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        requires = "browser_endpoints"
    )]
    pub(crate) endpoint_sessions: usize,
    /// Serve runs from Browserbase (a session each, BROWSERBASE_API_KEY and
    /// BROWSERBASE_PROJECT_ID from the environment), at most N at once;
    /// with --browser-endpoint too, runs go to the least busy.
    #[arg(long, value_name = "N")]
    pub(crate) browserbase_sessions: Option<usize>,
    /// The operator policy (requests can only narrow it).
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

/// The policy options of `serve`, `ipc`, `mcp`, `run` and `replay`. The
/// servers start from a closed default (http and https only, no private
/// network); `run` and `replay` from an open one (local pages work).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct PolicyArgs {
    /// A policy file, TOML or JSON (`.json`), with the keys of a run's
    /// `policy`: allowedDomains, blockedDomains, allowedSchemes,
    /// allowedActions, blockPrivateNetwork, allowedPrivateHosts,
    /// blockedLocalPorts. Keys it leaves out keep the default; flags add
    /// to it.
    #[arg(long = "policy", value_name = "FILE")]
    pub(crate) policy_file: Option<PathBuf>,
    /// Allow URLs of this scheme besides http and https (repeatable:
    /// `file`, `data`, `chrome`…).
    #[arg(long = "allow-scheme", value_name = "SCHEME")]
    pub(crate) allow_schemes: Vec<String>,
    /// Allow private, loopback and link-local addresses (refused by
    /// default by `serve`, `ipc` and `mcp`).
    #[arg(long, conflicts_with = "block_private_network")]
    pub(crate) allow_private_network: bool,
    /// Refuse private, loopback and link-local addresses, judged on the
    /// address a host resolves to (the default of `serve`, `ipc` and
    /// `mcp`).
    #[arg(long)]
    pub(crate) block_private_network: bool,
    /// A host that may be reached on a private address although the
    /// private network is refused (repeatable: `127.0.0.1`, `localhost`,
    /// `*.intranet.example`).
    #[arg(long = "allow-private-host", value_name = "HOST")]
    pub(crate) allow_private_hosts: Vec<String>,
}

/// How the run is shown while it goes.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct OutputArgs {
    /// Print the event stream as JSON lines on stdout instead of progress.
    #[arg(long)]
    pub(crate) json: bool,
    /// Where to write the trace folder (default:
    /// `./lumen-traces/<timestamp>-<task>/`).
    #[arg(long, value_name = "DIR")]
    pub(crate) trace_dir: Option<PathBuf>,
    /// Do not write `run.gif` (it takes a moment on long runs).
    #[arg(long)]
    pub(crate) no_gif: bool,
    /// Show the model's thinking and text live as they stream in; twice
    /// (`-vv`) also logs every surface to stderr (as `LUMEN_VERBOSE=2`;
    /// `LUMEN_LOG` and `LUMEN_LOG_<SURFACE>` still win). See docs/logging.md.
    #[arg(long, short = 'v', action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

/// `lumen run`.
#[derive(Debug, Args)]
pub(crate) struct RunCmd {
    /// The task, in plain words.
    pub(crate) instruction: String,
    /// The run's options.
    #[command(flatten)]
    pub(crate) options: RunArgs,
}

/// `lumen resume`.
#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// The trace folder of the run to continue, or the `session.json` in
    /// it.
    pub(crate) path: PathBuf,
    /// The task from here on (default: the saved run's task; required only
    /// when the folder names none).
    #[arg(long, value_name = "TEXT")]
    pub(crate) instruction: Option<String>,
    /// The run's options: each one given overrides the saved run's.
    #[command(flatten)]
    pub(crate) options: RunArgs,
}

/// The options of `lumen run` and `lumen resume` (every one optional, so a
/// config file or a saved run can supply it).
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The page to start on (`resume`: instead of the page the run was on).
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// The model: `anthropic/…`, `openai/…`, `google/…`, or a model name
    /// served by an OpenAI-compatible server at `--base-url`.
    #[arg(long, short = 'm')]
    pub(crate) model: Option<String>,
    /// The provider's API base URL (a proxy, a local server).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// The tool family: `computer` (the provider's computer-use tool) or
    /// `browser` (Anthropic's browser toolset: element refs, tabs, form
    /// input). Default: the model registry's choice (`lumen models`).
    #[arg(long, value_name = "computer|browser")]
    pub(crate) tools: Option<String>,
    /// How hard the model thinks: minimal, low, medium, high, xhigh or max (models
    /// with adaptive thinking, reasoning effort or thinking levels).
    #[arg(long, value_name = "LEVEL")]
    pub(crate) effort: Option<String>,
    /// A thinking budget in tokens (models with a manual budget; others
    /// take it as an effort).
    #[arg(long, value_name = "TOKENS")]
    pub(crate) thinking_budget: Option<u32>,
    /// A separate model for a planning pass before the run.
    #[arg(long, value_name = "MODEL")]
    pub(crate) planner_model: Option<String>,
    /// A model to switch to when the model is retired, not found or
    /// overloaded after every retry; repeat for more, tried in order
    /// (another provider's key comes from its environment variable).
    #[arg(long = "fallback-model", value_name = "MODEL")]
    pub(crate) fallback_models: Vec<String>,
    /// The longest one model call waits in all before its retries,
    /// seconds (a long Retry-After otherwise waits up to 60 s per try).
    #[arg(long, value_name = "SECS")]
    pub(crate) max_wait: Option<u64>,
    /// The step budget.
    #[arg(long, value_name = "N")]
    pub(crate) max_steps: Option<u32>,
    /// Stop (exit 6, status budgetExceeded) before the next model call once
    /// the run has used this many tokens, every model call counted.
    #[arg(long, value_name = "N")]
    pub(crate) max_tokens: Option<u64>,
    /// Stop (exit 6) once the run's estimated cost at list prices reaches
    /// this many US dollars (models with a published price only).
    #[arg(long = "max-cost", value_name = "USD")]
    pub(crate) max_cost: Option<f64>,
    /// Stop (exit 6) after N actions in a row failed.
    #[arg(long, value_name = "N")]
    pub(crate) max_failures: Option<u32>,
    /// Answer the actions of one model turn past N with `ok: false`
    /// without running them (default 25).
    #[arg(long, value_name = "N")]
    pub(crate) max_actions_per_turn: Option<u32>,
    /// Show the browser window.
    #[arg(long)]
    pub(crate) headed: bool,
    /// Attach to a running browser (`ws://…` or `http://host:port`) instead
    /// of launching one.
    #[arg(long, value_name = "URL")]
    pub(crate) cdp_url: Option<String>,
    /// Only these sites may be visited (repeatable; `*.example.com`).
    #[arg(long = "allow-domain", value_name = "PATTERN")]
    pub(crate) allow_domains: Vec<String>,
    /// These sites must never be visited (repeatable; wins over allow).
    #[arg(long = "block-domain", value_name = "PATTERN")]
    pub(crate) block_domains: Vec<String>,
    /// A secret the model may type as `<secret:NAME>`, read from the
    /// environment variable ENV (repeatable). Values never reach the model,
    /// the terminal or the trace.
    #[arg(long = "secret", value_name = "NAME=ENV")]
    pub(crate) secrets: Vec<String>,
    /// A file of `NAME=value` lines (blank lines and `#` comments allowed).
    #[arg(long, value_name = "FILE")]
    pub(crate) secrets_file: Option<PathBuf>,
    /// Types the secret NAME only on these sites, e.g.
    /// `PASSWORD=shop.example,*.pay.example` (repeatable).
    #[arg(long = "secret-domain", value_name = "NAME=PATTERNS")]
    pub(crate) secret_domains: Vec<String>,
    /// plan: only plan; agent: the loop; exec: the loop with retries.
    #[arg(long, value_enum)]
    pub(crate) mode: Option<Mode>,
    /// Attempts in exec mode.
    #[arg(long, value_name = "N")]
    pub(crate) attempts: Option<u32>,
    /// A TOML config file; flags override it.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Let the model run JavaScript of its own in the page (the browser
    /// toolset's `javascript_exec`). Off by default: a script can read and
    /// change anything the page can and send it anywhere.
    #[arg(long)]
    pub(crate) allow_model_javascript: bool,
    /// The folder the model may upload files from (the browser toolset's
    /// `file_upload`, file choosers). Nothing outside it is read; without
    /// it, uploads are off.
    #[arg(long, value_name = "DIR")]
    pub(crate) upload_dir: Option<PathBuf>,
    /// Extra system instructions for the model.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system_prompt: Option<String>,
    /// Refuse the model's "done" until the page URL matches this regular
    /// expression (e.g. `/order/confirmed`).
    #[arg(long, value_name = "REGEX")]
    pub(crate) verify_url: Option<String>,
    /// Confirm the model's "done" by asking this model (after
    /// `--verify-url`, when both are given).
    #[arg(long, value_name = "MODEL")]
    pub(crate) verifier_model: Option<String>,
    /// On hard steps, sample N candidate actions (2-8) and take the agreed
    /// one.
    #[arg(long, value_name = "N")]
    pub(crate) confidence_gate: Option<usize>,
    /// Save a checkpoint every N steps to backtrack to (0: off; default 5).
    #[arg(long, value_name = "N")]
    pub(crate) checkpoint_interval: Option<u32>,
    /// Show the built-in site tips on the sites they know.
    #[arg(long)]
    pub(crate) site_tips: bool,
    /// Workflow memory in FILE: suggest a learnt workflow, learn from
    /// successful runs.
    #[arg(long, value_name = "FILE")]
    pub(crate) workflows: Option<PathBuf>,
    /// Run scripts in DIR: a successful run is saved there, and the same
    /// task reruns from it without model calls while the page matches.
    #[arg(long, value_name = "DIR")]
    pub(crate) cache: Option<PathBuf>,
    /// Run in a Browserbase session (BROWSERBASE_API_KEY and
    /// BROWSERBASE_PROJECT_ID from the environment).
    #[arg(long, conflicts_with = "cdp_url")]
    pub(crate) browserbase: bool,
    /// Let a person take over when the model asks (a one-time code, a
    /// CAPTCHA): the run waits, a live view is served on 127.0.0.1 and its
    /// URL (valid while the hand-over waits) printed.
    #[arg(long)]
    pub(crate) handoff: bool,
    /// With --handoff: how long to wait for the person (default 600);
    /// then the run ends with handoffTimeout (exit 7).
    #[arg(long, value_name = "SECS", requires = "handoff")]
    pub(crate) handoff_timeout: Option<u64>,
    /// With --handoff: hand over by itself when a step starts on a
    /// matching URL (repeatable; `*` matches anything).
    #[arg(long = "handoff-url", value_name = "PATTERN", requires = "handoff")]
    pub(crate) handoff_urls: Vec<String>,
    /// The viewport, WIDTHxHEIGHT (kept as given; default 1280x720 snapped
    /// to the model).
    #[arg(long, value_name = "WxH")]
    pub(crate) viewport: Option<String>,
    /// Screenshot encoding: jpeg (default) or png.
    #[arg(long, value_name = "jpeg|png")]
    pub(crate) screenshot_format: Option<String>,
    /// JPEG quality of screenshots, 1-100 (default 80).
    #[arg(long, value_name = "Q")]
    pub(crate) screenshot_quality: Option<u8>,
    /// Downscale screenshots so their longer edge is at most PX pixels.
    #[arg(long, value_name = "PX")]
    pub(crate) screenshot_max_edge: Option<u32>,
    /// How many of the newest screenshots each model request carries as
    /// images (default 2).
    #[arg(long, value_name = "N")]
    pub(crate) images_kept: Option<usize>,
    /// Save downloads into DIR (without it, downloads are refused).
    #[arg(long, value_name = "DIR")]
    pub(crate) download_dir: Option<PathBuf>,
    /// Policy options.
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Output options.
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

/// `lumen demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Show the browser window.
    #[arg(long)]
    pub(crate) headed: bool,
    /// Output options.
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

/// `lumen replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The trace folder (or its `events.jsonl`).
    pub(crate) trace: PathBuf,
    /// Set a variable (repeatable): a `{{name}}` placeholder in recorded
    /// typed text and URLs, or a value the model typed that appears in the
    /// task (`v1`, `v2`… in the order first typed; the replay lists them).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub(crate) vars: Vec<String>,
    /// Retry an action that failed up to N times (pausing `--delay`, at
    /// least half a second, between tries) before its step fails. Actions
    /// the policy refuses are not retried.
    #[arg(long, default_value_t = 0, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub(crate) max_retries: u32,
    /// Report a step whose actions still fail as skipped and go on with the
    /// next one instead of ending the replay (exit code 5 at the end).
    #[arg(long)]
    pub(crate) skip_failures: bool,
    /// Pause this many milliseconds between steps.
    #[arg(long, default_value_t = 0, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub(crate) delay: u64,
    /// How alike (0–1, perceptual hash) a page must look to its recording.
    #[arg(long, default_value_t = 0.92, value_name = "SIMILARITY")]
    pub(crate) threshold: f64,
    /// Where the page diverges, ask `--model` to do that step instead of
    /// stopping (one model step), then go on with the recording.
    #[arg(long, requires = "model")]
    pub(crate) heal: bool,
    /// The model for `--heal` (same forms as `lumen run --model`).
    #[arg(long, short = 'm')]
    pub(crate) model: Option<String>,
    /// The provider's API base URL for `--heal`.
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// Show the browser window.
    #[arg(long)]
    pub(crate) headed: bool,
    /// Print one JSON object per step instead of lines of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Policy options: the recorded URLs are judged by them.
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// Plan only and print the plan.
    Plan,
    /// The perception loop.
    Agent,
    /// The loop with an explicit retry budget (`--attempts`).
    Exec,
}

impl From<Mode> for lumen::TaskMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Plan => lumen::TaskMode::Plan,
            Mode::Agent => lumen::TaskMode::Agent,
            Mode::Exec => lumen::TaskMode::Exec,
        }
    }
}

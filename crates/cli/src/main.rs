//! The `lumen` command-line tool.
//!
//! - `lumen demo`: an offline run on an embedded site with a scripted mock
//!   model and real Chromium; no network, no API key.
//! - `lumen run "<task>" --url <start>`: a task with a real model, live
//!   progress, Ctrl-C cancellation and a trace folder (`events.jsonl`,
//!   screenshots, `session.json`, `report.html`, `run.gif`).
//!
//! - `lumen resume <trace>`: continues a run saved in a trace folder from
//!   its last completed step, into a new trace folder.
//!
//! - `lumen replay <trace>`: re-runs a trace without the model, stopping
//!   with a report where the page no longer looks as recorded.
//!
//! Exit codes: 0 success, 1 the task failed, 2 configuration error (nothing
//! ran), 3 the step budget ran out, 4 a replay diverged, 5 a replay skipped
//! steps (`--skip-failures`), 6 a token, cost or failure budget stopped the
//! run, 130 cancelled. See `docs/cli.md`.
//!
//! The trace folder, `report.html` and `run.gif` are written with
//! `lumen-trace`, as the server's run folders and the eval's traces are.
//!
//! May depend on the `lumen` facade, `lumen-server` (`lumen serve`, `ipc`,
//! `mcp`), `lumen-trace`, `lumen-mock` (the offline demo) and command-line
//! crates (clap, indicatif); nothing depends on this package (it has no
//! library).

mod args;
mod config;
mod demo;
mod direct;
mod exit;
mod pricing;
mod progress;
mod replay;
mod resume;
mod runner;
mod terminal;

use std::process::ExitCode;

use clap::Parser as _;
use lumen::{AgentOptions, BrowserSource};

// The trace folder and its report: the run-folder crate.
use lumen_trace::{self as trace, TraceError, timeline};

use crate::args::{BrowserCli, Cli, Command, RunArgs, RunCmd, ServeArgs};
use crate::config::RunConfig;
use crate::exit::CliError;
use crate::runner::Job;

/// The command line. When its first word is `browser`, only the browser
/// commands' parser is built: building every subcommand's arguments took
/// a direct command (a few milliseconds in all) over 0.2 ms of CPU.
fn parse() -> Cli {
    if std::env::args_os().nth(1).is_some_and(|w| w == "browser") {
        let words: Vec<std::ffi::OsString> =
            std::iter::once(std::ffi::OsString::from("lumen browser"))
                .chain(std::env::args_os().skip(2))
                .collect();
        return match BrowserCli::try_parse_from(&words) {
            Ok(cli) => Cli {
                command: Command::Browser(cli.args),
            },
            Err(e) => {
                // With --json a usage error is one JSON object on stdout
                // too; the usage text stays on stderr.
                use clap::error::ErrorKind;
                let shown = matches!(
                    e.kind(),
                    ErrorKind::DisplayHelp
                        | ErrorKind::DisplayVersion
                        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                );
                if !shown && words.iter().any(|w| w == "--json") {
                    let message = e.render().to_string();
                    let first = message.lines().next().unwrap_or_default();
                    let first = first.strip_prefix("error: ").unwrap_or(first);
                    direct::print_error(&CliError::config(first));
                }
                e.exit()
            }
        };
    }
    Cli::parse()
}

fn main() -> ExitCode {
    let cli = parse();
    // Logs are off unless LUMEN_LOG, a LUMEN_LOG_<SURFACE> switch or -vv
    // asks for them; otherwise no subscriber is built at all (a direct
    // browser command pays for every microsecond). docs/logging.md.
    let verbose = match &cli.command {
        Command::Run(a) => a.options.output.verbose,
        Command::Resume(a) => a.options.output.verbose,
        Command::Demo(a) => a.output.verbose,
        _ => 0,
    };
    // Runs are traced to an OpenTelemetry collector when
    // OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set
    // (docs/telemetry.md); direct browser commands run no loop to trace.
    let telemetry = match &cli.command {
        Command::Browser(_) | Command::Models(_) => None,
        _ => match lumen::telemetry::Telemetry::new(&Default::default()) {
            Ok(t) => t,
            Err(e) => return CliError::config(e.to_string()).report(),
        },
    };
    lumen::logging::init_with(
        &lumen::logging::LogOptions {
            verbose: if verbose >= 2 { 2 } else { 0 },
            callback: None,
        },
        telemetry.as_ref(),
    );
    // A direct browser command is one short exchange on one socket: a
    // single-threaded runtime without signal handling starts and stops
    // faster (no worker threads to spawn, wake and join).
    let mut builder = if matches!(cli.command, Command::Browser(_)) {
        let mut b = tokio::runtime::Builder::new_current_thread();
        b.enable_io().enable_time();
        b
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2).enable_all();
        b
    };
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            return CliError::failure(format!("cannot start the async runtime: {e}")).report();
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(cmd) => run(*cmd).await,
            Command::Resume(args) => resume::run(*args).await,
            Command::Replay(args) => replay::run(args).await,
            Command::Browser(args) => direct::run(args).await,
            Command::Demo(args) => demo::run(args).await.map(|f| {
                demo::epilogue(&f.report);
                f.code
            }),
            Command::Serve(args) => served(lumen_server::serve(serve_options(&args)?).await),
            Command::Ipc(args) => served(lumen_server::ipc_stdio(serve_options(&args)?).await),
            Command::Mcp(args) => served(lumen_server::mcp_stdio(serve_options(&args)?).await),
            Command::Models(args) => {
                let text = match &args.model {
                    Some(model) => lumen::models::registry::describe(model),
                    None => lumen::models::registry::table(),
                };
                #[allow(clippy::print_stdout)]
                {
                    print!("{text}");
                }
                Ok(0)
            }
        }
    });
    // Do not wait for stray tasks (a pending Ctrl-C watcher, idle servers).
    runtime.shutdown_background();
    // Send the spans still buffered.
    if let Some(t) = telemetry {
        t.shutdown();
    }
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => e.report(),
    }
}

/// A trace folder that cannot be used is a configuration error (nothing
/// ran); a failed write at the end of a run is a failure.
impl From<TraceError> for CliError {
    fn from(e: TraceError) -> Self {
        match e {
            TraceError::Setup(m) => CliError::config(m),
            TraceError::Io(m) => CliError::failure(m),
        }
    }
}

/// The server's options from `lumen serve|ipc|mcp` flags.
fn serve_options(args: &ServeArgs) -> Result<lumen_server::ServeOptions, CliError> {
    let mut o = lumen_server::ServeOptions::new(&args.data_dir);
    o.host = args.host;
    o.port = args.port;
    o.token = args.token.clone();
    o.allowed_hosts = args.allow_hosts.clone();
    o.max_concurrent = args.max_concurrent.max(1);
    o.browser_processes = usize::try_from(args.browser_processes).unwrap_or(1);
    o.prelaunch = args.prelaunch;
    o.max_tasks_per_run = args.max_tasks_per_run;
    if let Some(url) = args
        .database_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
    {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(CliError::config(
                "--database-url: give a PostgreSQL URL (postgres://user:password@host/db); \
                 without one, runs are kept in SQLite in the data directory",
            ));
        }
        o.database_url = Some(url.to_string());
    }
    o.worker_id = args.worker_id.clone();
    o.global_max_concurrent = args.global_max_concurrent.map(|n| n.max(1));
    o.lease = std::time::Duration::from_secs(args.lease_secs);
    if let Some(model) = &args.model {
        o.default_model = model.clone();
    }
    o.adapter.base_url = args.base_url.clone();
    o.upload_root = args.upload_root.clone();
    o.download_root = args.download_root.clone();
    o.cache_root = args.cache_root.clone();
    o.workflows_file = args.workflows_file.clone();
    o.allowed_cdp_urls = args.allowed_cdp_urls.clone();
    // The registry's reading of the prefix, as the server matches with it:
    // a name it strips no provider from would match no model.
    let with_provider = |m: &str| {
        let m = m.trim();
        lumen::models::registry::split_model(m).1.len() < m.len()
    };
    if let Some(bad) = args
        .allowed_models
        .iter()
        .find(|m| !with_provider(m) || m.trim_end_matches('*').contains('*'))
    {
        return Err(CliError::config(format!(
            "--allow-model {bad:?}: give a model as provider/id (anthropic/, openai/, google/ \
             or compatible/), with `*` only at its end (anthropic/claude-haiku-*)"
        )));
    }
    o.allowed_models = args.allowed_models.clone();
    o.allow_browserbase = args.allow_browserbase;
    o.browser_endpoints = args
        .browser_endpoints
        .iter()
        .map(|url| lumen_server::BrowserEndpoint::new(url, args.endpoint_sessions))
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::config(format!("--browser-endpoint: {e}")))?;
    if let Some(n) = args.browserbase_sessions {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| {
                    CliError::config(format!(
                        "--browserbase-sessions needs {name} in the environment; export it first"
                    ))
                })
        };
        let options = lumen::browser::BrowserbaseOptions::new(
            var(lumen::BROWSERBASE_API_KEY_ENV)?,
            var(lumen::BROWSERBASE_PROJECT_ID_ENV)?,
        );
        o.browser_endpoints.push(
            lumen_server::BrowserEndpoint::browserbase(options, n)
                .map_err(|e| CliError::config(format!("--browserbase-sessions: {e}")))?,
        );
    }
    // The operator policy starts closed; the policy options open it.
    o.policy = config::policy_from(
        &args.policy,
        lumen::safety::PolicyConfig::operator_default(),
    )?;
    o.policy
        .allowed_domains
        .extend(args.allow_domains.iter().cloned());
    o.policy
        .blocked_domains
        .extend(args.block_domains.iter().cloned());
    lumen::safety::SessionPolicy::new(&o.policy)
        .map_err(|e| CliError::config(format!("the policy: {e}")))?;
    Ok(o)
}

/// Exit code of a server that stopped: refusing to start for want of a
/// token or a usable data directory is a configuration error.
fn served(result: Result<(), lumen_server::ServeError>) -> Result<u8, CliError> {
    match result {
        Ok(()) => Ok(0),
        Err(
            e @ (lumen_server::ServeError::TokenRequired(_)
            | lumen_server::ServeError::DataDir { .. }),
        ) => Err(CliError::config(e.to_string())),
        Err(e) => Err(CliError::failure(e.to_string())),
    }
}

/// `lumen run`.
async fn run(cmd: RunCmd) -> Result<u8, CliError> {
    let config = RunConfig::resolve(&cmd.options, |name| std::env::var(name).ok())?;
    let start_url = config.options.start_url.clone();
    launch(&cmd.options, config, cmd.instruction, start_url, None).await
}

/// Runs `instruction` with the resolved `config`, from `start_url`
/// (continuing `resume` when given): the one path of `lumen run` and
/// `lumen resume`. The trace gets the run's `options.json`.
async fn launch(
    args: &RunArgs,
    config: RunConfig,
    instruction: String,
    start_url: Option<String>,
    resume: Option<lumen::memory::SerializedHistory>,
) -> Result<u8, CliError> {
    let mut options = AgentOptions::new(config.model.clone());
    options.adapter.base_url = config.base_url.clone();
    if let BrowserSource::Local(launch) = &mut options.browser {
        launch.headless = !config.headed;
    }
    // Every run option, set in the one place that maps them.
    config
        .options
        .apply(&mut options)
        .map_err(|e| config::option_error(&e))?;
    // Catch a bad key or model before a browser starts.
    lumen::models::create_adapter_chain(
        &options.model,
        &options.fallback_models,
        options.adapter_options(),
    )
    .map_err(|e| CliError::from_setup(&e, None))?;
    if let Some(note) = lumen::models::registry::cost_note(&options.model) {
        eprintln!("lumen: warning: {}", terminal::visible(&note));
    }
    let mode = config.options.run_mode();
    let saved = resume::SavedRun::of(&config, &instruction);
    let finished = runner::execute(Job {
        options,
        instruction,
        start_url,
        mode,
        output: args.output.clone(),
        trace_dir: config.trace_dir.clone(),
        cdp_url: config.options.cdp_url.clone(),
        saved: Some(saved),
        resume,
    })
    .await?;
    Ok(finished.code)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    fn serve(extra: &[&str]) -> lumen_server::ServeOptions {
        let mut argv = vec!["lumen", "serve", "--data-dir", "/tmp/lumen-unused"];
        argv.extend_from_slice(extra);
        let crate::args::Command::Serve(args) =
            crate::args::Cli::try_parse_from(argv).unwrap().command
        else {
            panic!("not serve")
        };
        super::serve_options(&args).unwrap()
    }

    /// An `--allow-model` entry names its provider as the registry reads
    /// it, with `*` only at its end; anything else would match no model.
    #[test]
    fn allowed_models_need_a_provider_and_a_trailing_star_only() {
        let listed = serve(&[
            "--allow-model",
            "anthropic/claude-haiku-*",
            "--allow-model",
            "gemini/x",
        ]);
        assert_eq!(
            listed.allowed_models,
            ["anthropic/claude-haiku-*", "gemini/x"]
        );
        for bad in ["claude-haiku-4-5", "anthropic/*-haiku", " ", "anthropic"] {
            let argv = [
                "lumen",
                "serve",
                "--data-dir",
                "/tmp/lumen-unused",
                "--allow-model",
                bad,
            ];
            let crate::args::Command::Serve(args) =
                crate::args::Cli::try_parse_from(argv).unwrap().command
            else {
                panic!("not serve")
            };
            let err = super::serve_options(&args).unwrap_err();
            assert!(
                err.message.contains("--allow-model"),
                "{bad:?}: {}",
                err.message
            );
        }
    }

    #[test]
    fn the_task_cap_is_the_operators_flag() {
        assert_eq!(serve(&[]).max_tasks_per_run, 32);
        assert_eq!(serve(&["--max-tasks-per-run", "3"]).max_tasks_per_run, 3);
        assert!(
            crate::args::Cli::try_parse_from(["lumen", "serve", "--max-tasks-per-run", "many"])
                .is_err()
        );
    }

    #[test]
    fn runs_share_one_chromium_unless_the_operator_says_more() {
        assert_eq!(serve(&[]).browser_processes, 1);
        assert_eq!(serve(&["--browser-processes", "4"]).browser_processes, 4);
        assert!(!serve(&[]).prelaunch);
        assert!(serve(&["--prelaunch"]).prelaunch);
        assert!(
            crate::args::Cli::try_parse_from(["lumen", "serve", "--browser-processes", "0"])
                .is_err()
        );
    }
}

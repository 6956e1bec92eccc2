//! Runs one task through the `lumen` facade with live progress, Ctrl-C
//! cancellation and a trace folder; shared by `run` and `demo`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use lumen::memory::SerializedHistory;
use lumen::safety::Secrets;
use lumen::{Agent, AgentOptions, RunMode, RunResult, RunStatus};

use crate::args::OutputArgs;
use crate::exit::{self, CliError};
use crate::progress::{Progress, Style};
use crate::resume::SavedRun;
use crate::trace::{self, Trace};

/// One run to execute.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) options: AgentOptions,
    pub(crate) instruction: String,
    pub(crate) start_url: Option<String>,
    pub(crate) mode: RunMode,
    pub(crate) output: OutputArgs,
    /// The trace folder (default: under `./lumen-traces/`).
    pub(crate) trace_dir: Option<PathBuf>,
    /// For error messages about attaching.
    pub(crate) cdp_url: Option<String>,
    /// What the run was asked to do, written to the trace's `options.json`
    /// so `lumen resume` can continue it (`None`: not written).
    pub(crate) saved: Option<SavedRun>,
    /// The snapshot a resumed run continues from.
    pub(crate) resume: Option<SerializedHistory>,
}

/// Serves the live view and announces each hand-over's own URL on
/// stderr (also in `--json` mode: a person has to read it).
async fn handoff_desk(
    control: lumen::perception::control::RunControl,
) -> Result<tokio::task::JoinHandle<()>, CliError> {
    let server = lumen_server::live::LiveServer::start(control.clone())
        .await
        .map_err(|e| CliError::config(format!("--handoff: the live view cannot listen: {e}")))?;
    Ok(tokio::spawn(async move {
        loop {
            let pending = control.handoff_opened().await;
            let line = match server.url(pending.id) {
                Ok(url) => format!(
                    "a person is needed: {}\nlive view (this hand-over only): {url}\n",
                    pending.reason
                ),
                Err(e) => format!("a person is needed but no live-view link could be made: {e}\n"),
            };
            let _ = std::io::stderr().write_all(crate::terminal::visible(&line).as_bytes());
            control.handoff_closed(pending.id).await;
            server.forget(pending.id);
        }
    }))
}

/// What a finished run left behind.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) code: u8,
    pub(crate) report: PathBuf,
}

/// Runs the job to the end; the browser is closed and the trace written
/// whatever the outcome (a setup error that recorded nothing leaves no
/// folder behind).
pub(crate) async fn execute(job: Job) -> Result<Finished, CliError> {
    let Job {
        mut options,
        instruction,
        start_url,
        mode,
        output,
        trace_dir,
        cdp_url,
        saved,
        resume,
    } = job;
    let default_dir = trace_dir.is_none();
    let dir = trace_dir.unwrap_or_else(|| trace::default_dir(&instruction));
    let trace = Trace::create(&dir)?;
    let secrets = options.session.secrets.clone();
    let style = Style::pick(output.json);
    let progress = Progress::new(
        style,
        &options.model,
        options.session.max_steps,
        secrets.clone(),
    )
    .verbose(output.verbose > 0);
    if let Some(saved) = &saved
        && let Err(e) = saved.write(&trace.dir().join(trace::OPTIONS), &secrets)
    {
        progress.say(&format!(
            "warning: the run's options could not be saved: {e}"
        ));
    }
    options.session.recorders.extend(trace.recorders()?);
    options.session.recorders.push(progress.recorder());

    let handoff = options.session.handoff.is_some();
    let mut agent = match resume {
        Some(snapshot) => Agent::resume(snapshot, options),
        None => Agent::new(options),
    };
    // A run killed mid-way can be resumed from its last completed step (a
    // plan-only run takes no step: there is nothing to resume).
    if mode != RunMode::Plan {
        agent.save_after_each_step(trace.dir().join(trace::SESSION));
    }
    // A person takes over through a live view on 127.0.0.1, one URL (and
    // ticket) per hand-over.
    let live = match handoff {
        true => Some(handoff_desk(agent.control()).await?),
        false => None,
    };
    let control = agent.control();
    let watcher = {
        let progress = progress.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                progress.say("Ctrl-C: cancelling; the browser closes and the trace is written…");
                control.cancel("interrupted by Ctrl-C");
            }
        })
    };
    let outcome = agent
        .run_mode(&instruction, start_url.as_deref(), mode)
        .await;
    watcher.abort();
    if let Some(live) = live {
        live.abort();
    }
    progress.finish();

    let result = match outcome {
        Ok(result) => result,
        Err(error) => {
            let cancelled = agent.control().is_cancelled();
            let _ = agent.close().await;
            if trace.is_empty() {
                let _ = std::fs::remove_dir_all(trace.dir());
                if default_dir && let Some(parent) = trace.dir().parent() {
                    // Only succeeds when no other trace is in there.
                    let _ = std::fs::remove_dir(parent);
                }
            }
            if cancelled {
                return Err(CliError {
                    code: exit::CANCELLED,
                    message: "cancelled before the run started".to_owned(),
                });
            }
            return Err(CliError::from_setup(&error, cdp_url.as_deref()));
        }
    };
    // A plan-only run takes no step: there is no session to resume.
    if mode != RunMode::Plan
        && let Some(session) = agent.session_mut()
        && let Err(e) = session.save(&trace.dir().join(trace::SESSION), false)
    {
        progress.say(&format!("warning: the session could not be saved: {e}"));
    }
    let closed = agent.close().await;
    let report = trace.finish(
        &result,
        &trace::RenderOptions {
            secrets: secrets.clone(),
            gif: !output.no_gif,
            pricing: Some(lumen::models::registry::cost),
        },
    )?;
    if let Err(e) = closed {
        progress.say(&format!("warning: the browser did not close cleanly: {e}"));
    }
    summarize(&result, &progress, trace.dir(), &report, &secrets, style);
    Ok(Finished {
        code: exit::for_status(result.status),
        report,
    })
}

/// The closing lines: outcome, answer, cost and where the trace is. On
/// stdout, or stderr with `--json` (stdout stays pure JSON lines).
fn summarize(
    result: &RunResult,
    progress: &Progress,
    dir: &Path,
    report: &Path,
    secrets: &Secrets,
    style: Style,
) {
    let (mark, word) = match result.status {
        RunStatus::Success => ("✓", "success"),
        RunStatus::Failure => ("✗", "failed"),
        RunStatus::MaxSteps => ("…", "ran out of steps"),
        RunStatus::Cancelled => ("■", "cancelled"),
        RunStatus::BudgetExceeded => ("$", "stopped by its budget"),
        RunStatus::HandoffTimeout => ("⌛", "nobody took over in time"),
    };
    let mut text = format!("{mark} {word} after {} steps", result.steps);
    if let Some(answer) = &result.result {
        text.push_str(&format!(": {}", secrets.redact(answer)));
    }
    if let Some(error) = result
        .error
        .as_ref()
        .filter(|_| result.status != RunStatus::Cancelled)
    {
        text.push_str(&format!("\n  error: {}", secrets.redact(&error.message)));
    }
    text.push_str(&format!(
        "\n  {}\n  trace:  {}\n  report: {}\n",
        progress.totals(),
        dir.display(),
        report.display()
    ));
    let text = crate::terminal::visible(&text);
    if style == Style::Json {
        eprint!("{text}");
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

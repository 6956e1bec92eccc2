//! `lumen replay <trace>`: re-runs a recorded run without the model. Before
//! each recorded step it compares the page with the step's recorded
//! screenshot by perceptual hash (lumen-memory's dHash); if they differ
//! beyond the threshold it stops with a divergence report, else it replays
//! the step's actions that succeeded when recorded.
//!
//! Values the model typed that appear in the task become variables
//! ([`vars`]); `--max-retries` retries a failed action, `--skip-failures`
//! goes on past a step whose actions fail, `--delay` paces the steps.

mod vars;

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::memory::cache::{dhash, similarity};
use lumen::models::AdapterOptions;
use lumen::perception::pipeline::{ActionContext, ActionPipeline};
use lumen::perception::router::ActionRouter;
use lumen::safety::policy::with_default_scheme;
use lumen::safety::{ActionGuard, PolicyConfig, PolicyDecision, SessionPolicy};
use lumen::{
    Action, ActionCall, BrowserTab, Image, ModelAdapter, RecordedEvent, RunStatus,
    ScreenshotOptions, Session, SessionOptions, Size, StreamEvent,
};
use serde_json::json;

use crate::args::ReplayArgs;
use crate::exit::{self, CliError};
use crate::timeline::describe;
use crate::trace::{EVENTS, SCREENSHOTS};
use vars::Variable;

/// The shortest pause between two tries of an action.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// One recorded step to replay.
#[derive(Debug)]
struct Step {
    step: u32,
    url: String,
    /// The recorded screenshot (bytes from its file).
    recorded: Option<Image>,
    actions: Vec<ActionCall>,
}

/// Runs the replay; returns the exit code.
pub(crate) async fn run(args: ReplayArgs) -> Result<u8, CliError> {
    let (dir, events_path) = if args.trace.is_dir() {
        (args.trace.clone(), args.trace.join(EVENTS))
    } else {
        let dir = args
            .trace
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        (dir, args.trace.clone())
    };
    if !(0.0..=1.0).contains(&args.threshold) {
        return Err(CliError::config(
            "--threshold is a similarity between 0 and 1",
        ));
    }
    let healer = match (&args.heal, &args.model) {
        (true, Some(model)) => {
            crate::config::check_model(model, args.base_url.as_deref(), &|name: &str| {
                std::env::var(name).ok()
            })?;
            let options = AdapterOptions {
                base_url: args.base_url.clone(),
                ..AdapterOptions::default()
            };
            Some(
                lumen::models::create_adapter(model, options)
                    .map_err(|e| CliError::from_setup(&e, None))?,
            )
        }
        _ => None,
    };
    // Like `lumen run`, replay starts open (local pages work); the policy
    // options close it, and every recorded URL is judged by them.
    let policy = crate::config::policy_from(&args.policy, PolicyConfig::default())?;
    let judge = SessionPolicy::new(&policy).map_err(|e| CliError::config(e.to_string()))?;
    let (recorded_task, mut steps, viewport) = load(&dir, &events_path)?;
    let Some(first) = steps.first() else {
        return Err(CliError::config(format!(
            "{} records no step to replay",
            events_path.display()
        )));
    };
    let first_url = first.url.clone();
    let mut actions: Vec<(u32, &mut Vec<ActionCall>)> = steps
        .iter_mut()
        .map(|s| (s.step + 1, &mut s.actions))
        .collect();
    let variables = vars::detect(&recorded_task, &mut actions, &first_url, &args.vars)?;
    let instruction = vars::instruction(&recorded_task, &variables);
    let start = vars::substitute(&first_url, &variables);
    if let PolicyDecision::Deny(d) = judged(&judge, &start).await {
        return Err(CliError::config(format!(
            "the recorded start URL {start} is refused by the policy: {}",
            d.reason
        )));
    }
    let tab = CdpTab::launch(LaunchOptions {
        headless: !args.headed,
        window: viewport,
        ..LaunchOptions::default()
    })
    .await
    .map_err(|e| CliError::from_setup(&e, None))?;
    let tab = Arc::new(tab);
    let code = match tab.goto(&start).await {
        Ok(o) if o.ok => {
            let job = Replay {
                tab: &tab,
                healer: healer.as_ref(),
                instruction: &instruction,
                vars: &variables,
                policy: &policy,
                judge: &judge,
                dir: &dir,
                args: &args,
            };
            job.run(&steps).await
        }
        Ok(o) => Err(CliError::failure(format!(
            "could not open {start}: {}",
            o.error.unwrap_or_default()
        ))),
        Err(e) => Err(CliError::failure(format!("could not open {start}: {e}"))),
    };
    let _ = tab.close().await;
    code
}

/// What a replay works with.
struct Replay<'a> {
    tab: &'a Arc<CdpTab>,
    healer: Option<&'a Arc<dyn ModelAdapter>>,
    instruction: &'a str,
    vars: &'a [Variable],
    policy: &'a PolicyConfig,
    judge: &'a SessionPolicy,
    dir: &'a Path,
    args: &'a ReplayArgs,
}

impl Replay<'_> {
    /// Lets the model do one step in place of recorded step `n`; whether it
    /// did something without failing.
    async fn heal(&self, adapter: &Arc<dyn ModelAdapter>, s: &Step) -> Result<bool, CliError> {
        let tab: Arc<dyn BrowserTab> = self.tab.clone();
        let mut session = Session::new(
            tab,
            adapter.clone(),
            SessionOptions {
                max_steps: 1,
                policy: self.policy.clone(),
                ..SessionOptions::default()
            },
        )
        .map_err(|e| CliError::failure(e.to_string()))?;
        let recorded: Vec<String> = s
            .actions
            .iter()
            .map(|c| describe(&vars::substitute_action(&c.action, self.vars)))
            .collect();
        let task = format!(
            "{}\n\n(Replaying a recorded run of this task. The page no longer looks as it did at \
             step {}, where the recording did: {}. Do what that step meant to do on the page as it \
             is now, in one step.)",
            self.instruction,
            s.step + 1,
            if recorded.is_empty() {
                "nothing".to_owned()
            } else {
                recorded.join(", ")
            }
        );
        let result = session.run(&task).await;
        let acted = result.history.iter().flat_map(|h| &h.actions).count() > 0;
        Ok(result.error.is_none()
            && result.status != RunStatus::Failure
            && result.status != RunStatus::Cancelled
            && acted)
    }

    /// Why the policy refuses a `goto` to the address its host resolves to
    /// (the pipeline judges everything else, and the name).
    async fn refusal(&self, action: &Action) -> Option<String> {
        let Action::Goto { url } = action else {
            return None;
        };
        judged(self.judge, &with_default_scheme(url))
            .await
            .denial()
            .map(|d| format!("refused by the policy: {}", d.reason))
    }

    /// One line of output: `value` with `--json`, else `line`.
    fn say(&self, value: serde_json::Value, line: String) {
        let mut out = std::io::stdout().lock();
        let _ = if self.args.json {
            writeln!(out, "{value}")
        } else {
            writeln!(out, "{}", crate::terminal::visible(&line))
        };
        let _ = out.flush();
    }

    /// Runs `call` once through the pipeline: `Ok` if it worked, else why
    /// not and whether trying again could help.
    async fn attempt(
        &self,
        pipeline: &ActionPipeline,
        call: &ActionCall,
        at: ActionContext<'_>,
    ) -> Result<(), (String, bool)> {
        if let Some(why) = self.refusal(&call.action).await {
            return Err((why, false));
        }
        match pipeline.run(call, self.tab.as_ref(), at).await {
            // Refused by a hook or the policy, or undone for where it
            // landed: the same again next time.
            Ok(h) => match (h.blocked, h.undone, h.execution.ok) {
                (Some(why), _, _) | (None, Some(why), _) => Err((why, false)),
                (None, None, true) => Ok(()),
                (None, None, false) => Err((
                    h.execution
                        .error
                        .unwrap_or_else(|| "no reason given".to_owned()),
                    true,
                )),
            },
            Err(e) => Err((e.to_string(), true)),
        }
    }

    /// Runs `call`, retried up to `--max-retries` times; the error and the
    /// number of tries if it still failed.
    async fn act(
        &self,
        pipeline: &ActionPipeline,
        n: u32,
        call: &ActionCall,
        at: ActionContext<'_>,
    ) -> Result<(), (String, u32)> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.attempt(pipeline, call, at).await {
                Ok(()) => return Ok(()),
                Err((why, retry)) if !retry || tries > self.args.max_retries => {
                    return Err((why, tries));
                }
                Err((why, _)) => {
                    self.say(
                        json!({"step": n, "status": "retrying", "action": call.action,
                               "error": why, "attempt": tries, "maxRetries": self.args.max_retries}),
                        format!(
                            "↺ step {n}: {} failed ({why}); retry {tries} of {}",
                            describe(&call.action),
                            self.args.max_retries
                        ),
                    );
                    tokio::time::sleep(Duration::from_millis(self.args.delay).max(RETRY_PAUSE))
                        .await;
                }
            }
        }
    }

    async fn run(&self, steps: &[Step]) -> Result<u8, CliError> {
        let (tab, vars, dir, args) = (self.tab, self.vars, self.dir, self.args);
        if !vars.is_empty() {
            let listing: Vec<String> = vars.iter().map(|v| format!("  {}", v.describe())).collect();
            self.say(
                json!({"status": "variables", "variables": vars.iter().map(Variable::to_json).collect::<Vec<_>>()}),
                format!(
                    "variables (set with --var NAME=VALUE):\n{}",
                    listing.join("\n")
                ),
            );
        }
        // The same pipeline as a live run: hooks and policy, the router, the
        // after-effect policy (a forbidden landing undone and checked),
        // redaction.
        let pipeline =
            ActionPipeline::new(ActionGuard::new(self.judge.clone()), ActionRouter::new());
        let mut skipped: Vec<u32> = Vec::new();
        'steps: for (i, s) in steps.iter().enumerate() {
            let n = s.step + 1;
            if i > 0 && args.delay > 0 {
                tokio::time::sleep(Duration::from_millis(args.delay)).await;
            }
            let shot = tab
                .screenshot(&ScreenshotOptions::default())
                .await
                .map_err(|e| CliError::failure(format!("step {n}: no screenshot: {e}")))?;
            let viewport = shot.viewport;
            let alike = match &s.recorded {
                Some(recorded) => match (dhash(recorded), dhash(&shot.image)) {
                    (Ok(a), Ok(b)) => Some(similarity(a, b)),
                    _ => None,
                },
                None => None,
            };
            if let Some(alike) = alike
                && alike < args.threshold
                && let Some(adapter) = self.healer
            {
                if self.heal(adapter, s).await? {
                    self.say(
                        json!({"step": n, "status": "healed", "similarity": alike}),
                        format!(
                            "↻ step {n}: the page looked {:.0}% like the recording; the model did this step",
                            alike * 100.0
                        ),
                    );
                    continue;
                }
                self.say(
                    json!({"step": n, "status": "failed", "similarity": alike, "error": "the model could not do the step"}),
                    format!("✗ step {n}: the page diverged and the model could not do the step"),
                );
                return Ok(exit::FAILURE);
            }
            if let Some(alike) = alike
                && alike < args.threshold
            {
                let out_dir = dir.join("replay");
                let now =
                    out_dir.join(format!("step-{n:03}-now.{}", shot.image.format.extension()));
                let saved = std::fs::create_dir_all(&out_dir)
                    .and_then(|()| std::fs::write(&now, &*shot.image.data))
                    .is_ok();
                let url = tab.url().await.unwrap_or_default();
                self.say(
                    json!({"step": n, "status": "diverged", "similarity": alike, "threshold": args.threshold,
                       "recordedUrl": s.url, "url": url, "screenshot": saved.then(|| now.display().to_string())}),
                    format!(
                        "✗ diverged at step {n}: the page looks {:.0}% like the recording (needs {:.0}%)\n  \
                     recorded on {}\n  now on      {url}\n  recorded screenshot: {}\n  current screenshot:  {}",
                        alike * 100.0,
                        args.threshold * 100.0,
                        s.url,
                        dir.join(SCREENSHOTS)
                            .join(format!("step-{n:03}.jpg"))
                            .display(),
                        if saved {
                            now.display().to_string()
                        } else {
                            "(not saved)".to_owned()
                        }
                    ),
                );
                return Ok(exit::DIVERGED);
            }
            let calls: Vec<ActionCall> = s
                .actions
                .iter()
                .map(|call| ActionCall {
                    action: vars::substitute_action(&call.action, vars),
                    ..call.clone()
                })
                .collect();
            for call in &calls {
                let at = ActionContext {
                    step: s.step,
                    instruction: self.instruction,
                    viewport,
                };
                let Err((why, tries)) = self.act(&pipeline, n, call, at).await else {
                    continue;
                };
                let what = describe(&call.action);
                let after = if tries > 1 {
                    format!(" after {tries} tries")
                } else {
                    String::new()
                };
                if args.skip_failures {
                    self.say(
                        json!({"step": n, "status": "skipped", "action": call.action, "error": why, "attempts": tries}),
                        format!("⤼ step {n} skipped: {what} failed{after}: {why}"),
                    );
                    skipped.push(n);
                    continue 'steps;
                }
                self.say(
                    json!({"step": n, "status": "failed", "action": call.action, "error": why, "attempts": tries}),
                    format!("✗ step {n}: {what} failed{after}: {why}"),
                );
                return Ok(exit::FAILURE);
            }
            let what: Vec<String> = calls.iter().map(|c| describe(&c.action)).collect();
            self.say(
                json!({"step": n, "status": "ok", "similarity": alike, "actions": s.actions.len()}),
                format!(
                    "✓ step {n} ({}): {}",
                    alike.map_or("no recording".to_owned(), |a| format!(
                        "{:.0}% alike",
                        a * 100.0
                    )),
                    if what.is_empty() {
                        "nothing to do".to_owned()
                    } else {
                        what.join(", ")
                    }
                ),
            );
        }
        if !skipped.is_empty() {
            let list: Vec<String> = skipped.iter().map(u32::to_string).collect();
            self.say(
                json!({"status": "partial", "steps": steps.len(), "skipped": skipped}),
                format!(
                    "replayed {} steps; skipped step{} {} (an action failed)",
                    steps.len(),
                    if skipped.len() == 1 { "" } else { "s" },
                    list.join(", ")
                ),
            );
            return Ok(exit::SKIPPED);
        }
        self.say(
            json!({"status": "success", "steps": steps.len()}),
            format!(
                "replayed {} steps; every page matched its recording",
                steps.len()
            ),
        );
        Ok(exit::SUCCESS)
    }
}

/// The task, the steps of a trace and the viewport it was recorded at.
fn load(dir: &Path, events: &Path) -> Result<(String, Vec<Step>, Size), CliError> {
    let text = std::fs::read_to_string(events).map_err(|e| {
        CliError::config(format!(
            "cannot read {}: {e}; pass a trace folder written by `lumen run` or `lumen demo`",
            events.display()
        ))
    })?;
    let mut steps: Vec<Step> = Vec::new();
    let mut viewport = None;
    let mut instruction = String::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: RecordedEvent = match serde_json::from_str(line) {
            Ok(e) => e,
            // Events this version does not know are skipped, not fatal.
            Err(_) if serde_json::from_str::<serde_json::Value>(line).is_ok() => continue,
            Err(err) => {
                return Err(CliError::config(format!(
                    "{} line {} is not JSON: {err}",
                    events.display(),
                    i + 1
                )));
            }
        };
        match e.event {
            StreamEvent::RunStarted {
                instruction: task, ..
            } => instruction = task,
            StreamEvent::StepStarted { step, url } => steps.push(Step {
                step,
                url,
                recorded: None,
                actions: Vec::new(),
            }),
            StreamEvent::Screenshot { step, screenshot } => {
                viewport.get_or_insert(screenshot.viewport);
                if let Some(s) = steps.iter_mut().rev().find(|s| s.step == step)
                    && s.recorded.is_none()
                {
                    let file = dir.join(SCREENSHOTS).join(format!(
                        "step-{:03}.{}",
                        step + 1,
                        screenshot.image.format.extension()
                    ));
                    if let Ok(bytes) = std::fs::read(&file) {
                        s.recorded = Some(Image::new(
                            screenshot.image.format,
                            screenshot.image.width,
                            screenshot.image.height,
                            bytes,
                        ));
                    }
                }
            }
            StreamEvent::ActionResult {
                step,
                call,
                execution,
            } if execution.ok && call.action.touches_browser() => {
                if let Some(s) = steps.iter_mut().rev().find(|s| s.step == step) {
                    s.actions.push(call);
                }
            }
            _ => {}
        }
    }
    Ok((instruction, steps, viewport.unwrap_or(Size::new(1280, 720))))
}

/// `url` judged by `policy` on the address its host resolves to (off the
/// async threads).
async fn judged(policy: &SessionPolicy, url: &str) -> PolicyDecision {
    policy.judge_resolved(url).await
}

//! `lumen replay <trace>`: re-runs a recorded run without the model. Before
//! each recorded step it compares the page with the step's recorded
//! screenshot by perceptual hash (lumen-memory's dHash); if they differ
//! beyond the threshold it stops with a divergence report, else it replays
//! the step's actions that succeeded when recorded.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

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
    let vars = parse_vars(&args.vars)?;
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
    let (instruction, steps, viewport) = load(&dir, &events_path)?;
    let Some(first) = steps.first() else {
        return Err(CliError::config(format!(
            "{} records no step to replay",
            events_path.display()
        )));
    };
    let start = substitute(&first.url, &vars);
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
                vars: &vars,
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
    vars: &'a [(String, String)],
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
        let recorded: Vec<String> = s.actions.iter().map(|c| describe(&c.action)).collect();
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

    async fn run(&self, steps: &[Step]) -> Result<u8, CliError> {
        let (tab, vars, dir, args) = (self.tab, self.vars, self.dir, self.args);
        // The same pipeline as a live run: hooks and policy, the router, the
        // after-effect policy (a forbidden landing undone and checked),
        // redaction.
        let pipeline =
            ActionPipeline::new(ActionGuard::new(self.judge.clone()), ActionRouter::new());
        let say = |value: serde_json::Value, line: String| {
            let mut out = std::io::stdout().lock();
            let _ = if args.json {
                writeln!(out, "{value}")
            } else {
                writeln!(out, "{line}")
            };
            let _ = out.flush();
        };
        for s in steps {
            let n = s.step + 1;
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
                    say(
                        json!({"step": n, "status": "healed", "similarity": alike}),
                        format!(
                            "↻ step {n}: the page looked {:.0}% like the recording; the model did this step",
                            alike * 100.0
                        ),
                    );
                    continue;
                }
                say(
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
                say(
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
            for call in &s.actions {
                let call = ActionCall {
                    action: substitute_action(&call.action, vars),
                    ..call.clone()
                };
                let at = ActionContext {
                    step: s.step,
                    instruction: self.instruction,
                    viewport,
                };
                let failure = match self.refusal(&call.action).await {
                    Some(why) => Some(why),
                    None => match pipeline.run(&call, tab.as_ref(), at).await {
                        Ok(h) => match (h.blocked, h.undone, h.execution.ok) {
                            (Some(why), _, _) | (None, Some(why), _) => Some(why),
                            (None, None, true) => None,
                            (None, None, false) => Some(
                                h.execution
                                    .error
                                    .unwrap_or_else(|| "no reason given".to_owned()),
                            ),
                        },
                        Err(e) => Some(e.to_string()),
                    },
                };
                if let Some(why) = failure {
                    say(
                        json!({"step": n, "status": "failed", "action": call.action, "error": why}),
                        format!("✗ step {n}: {} failed: {why}", describe(&call.action)),
                    );
                    return Ok(exit::FAILURE);
                }
            }
            let what: Vec<String> = s.actions.iter().map(|c| describe(&c.action)).collect();
            say(
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
        say(
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
    let (policy, target) = (policy.clone(), url.to_owned());
    tokio::task::spawn_blocking(move || policy.check_url_resolved(&target))
        .await
        .unwrap_or_else(|e| {
            PolicyDecision::Deny(lumen::safety::Denial {
                rule: lumen::safety::PolicyRule::InvalidUrl,
                reason: format!("the URL could not be judged: {e}"),
            })
        })
}

fn parse_vars(specs: &[String]) -> Result<Vec<(String, String)>, CliError> {
    specs
        .iter()
        .map(|spec| {
            spec.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.to_owned()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| {
                    CliError::config(format!("--var {spec:?} must look like name=value"))
                })
        })
        .collect()
}

/// Replaces every `{{name}}` in `text`.
fn substitute(text: &str, vars: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    out
}

fn substitute_action(action: &Action, vars: &[(String, String)]) -> Action {
    match action {
        Action::Type { text } => Action::Type {
            text: substitute(text, vars),
        },
        Action::Goto { url } => Action::Goto {
            url: substitute(url, vars),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_fill_placeholders_in_typed_text_and_urls() {
        let vars = parse_vars(&["email=bob@example.com".into(), "id=7".into()]).unwrap();
        assert_eq!(
            substitute_action(
                &Action::Type {
                    text: "{{email}}".into()
                },
                &vars
            ),
            Action::Type {
                text: "bob@example.com".into()
            }
        );
        assert_eq!(
            substitute("https://x.test/item/{{id}}?q={{nope}}", &vars),
            "https://x.test/item/7?q={{nope}}"
        );
        assert!(parse_vars(&["novalue".into()]).is_err());
        assert!(parse_vars(&["=x".into()]).is_err());
    }
}

//! Live WebVoyager runs: the chosen model on the real sites, judged by an
//! LLM judge. Needs internet and keys; nothing here runs in CI except the
//! pieces unit-tested in the sibling modules.
//!
//! Work is a list of tasks (after selection, date shifting and `--shard`);
//! `--concurrency` workers take tasks from a shared queue, and every trial
//! gets a fresh Chromium (no cookies or storage carried between tasks). A task runs up to `--trials` times and stops at its first pass;
//! with `--feedback`, each trial after the first is told the judge's reason
//! for failing the previous one. Every finished run is written to
//! `results.json` at once, so `--resume` continues where an interrupted
//! eval stopped.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use lumen::memory::SiteKB;
use lumen::models::{AdapterOptions, create_adapter};
use lumen::{BrowserTab, SessionOptions};
use tokio::sync::Mutex;

use super::catalogue::{Dataset, Reference, Selection, Task, select};
use super::dates::{Date, shift_dates};
use super::judge::{Judge, JudgeInput};
use super::report::{Results, Verdict, write_outputs};
use super::runner::{self, RecordHead};
use super::{Options, slug};

/// A task ready to run: its question already date-shifted.
#[derive(Debug, Clone)]
pub(super) struct Work {
    pub(super) task: Task,
    pub(super) question: String,
    pub(super) references: Vec<Reference>,
}

/// The instruction for a trial: the question, plus the judge's reason for
/// failing the previous trial when feedback is on.
pub(crate) fn instruction(question: &str, previous_failure: Option<&str>) -> String {
    match previous_failure {
        Some(reason) => format!(
            "{question}\n\nAn earlier attempt at this task was judged incomplete: {reason} \
             Start again from the page you are on and make sure every requirement is met."
        ),
        None => question.to_owned(),
    }
}

pub(crate) async fn run(options: &Options, root: &Path, out: &Path) -> anyhow::Result<()> {
    let data = Dataset::load(&root.join("fixtures/webvoyager"))?;
    let selection = Selection {
        subset: options.subset.clone(),
        sites: options.sites.clone(),
        ids: options.tasks.clone(),
        sample: options.sample.map(|n| (n, options.seed)),
        limit: options.limit,
    };
    let mut tasks = select(&data, &selection)?;
    if let Some(shard) = options.shard {
        tasks = shard.take(&tasks);
    }
    let today = Date::today_utc();
    let work: Vec<Work> = tasks
        .into_iter()
        .map(|task| {
            let question = if options.no_date_shift {
                task.question.clone()
            } else {
                shift_dates(&task.question, today).text
            };
            let references = data.references.get(&task.id).cloned().unwrap_or_default();
            Work {
                task,
                question,
                references,
            }
        })
        .collect();
    if options.dry_run {
        for w in &work {
            println!("{}\t{}\t{}", w.task.id, w.task.start_url, w.question);
        }
        println!("{} task(s)", work.len());
        return Ok(());
    }
    if work.is_empty() {
        bail!("no task selected");
    }
    if options.trials == 0 {
        bail!("--trials must be at least 1");
    }
    let judge = if options.no_judge {
        None
    } else {
        Some(Arc::new(Judge::new(
            &options.judge,
            None,
            None,
            options.judge_screenshots,
        )?))
    };
    if options.queue.is_some() {
        let workers = (0..options.queue_workers)
            .map(|i| queue_worker(options, i))
            .collect();
        return super::queue::execute(work, judge, options, out, today, workers).await;
    }
    execute(work, judge, options, out, today).await
}

/// A `lumen serve` worker this process starts on the `--queue` database
/// (`--queue-workers`): `--concurrency` browsers, the agent's model options.
pub(super) fn queue_worker(options: &Options, i: usize) -> lumen_server::ServeOptions {
    let data = std::env::temp_dir().join(format!("lumen-eval-queue-{}", std::process::id()));
    let mut o = lumen_server::ServeOptions::new(data);
    o.port = 0;
    o.token = Some(format!("eval-worker-{}", std::process::id()));
    o.database_url = options.queue.clone();
    o.worker_id = Some(format!("eval-{}-{i}", std::process::id()));
    o.max_concurrent = options.concurrency.max(1);
    o.default_model = options.model.clone();
    o.max_steps_limit = o.max_steps_limit.max(options.max_steps);
    o.adapter = adapter_options(options);
    o
}

/// The agent's adapter options: `--base-url`, else the environment.
fn adapter_options(options: &Options) -> AdapterOptions {
    AdapterOptions {
        base_url: options.base_url.clone(),
        ..AdapterOptions::default()
    }
}

/// Runs the prepared work with its workers, writing results as it goes.
async fn execute(
    work: Vec<Work>,
    judge: Option<Arc<Judge>>,
    options: &Options,
    out: &Path,
    today: Date,
) -> anyhow::Result<()> {
    // Fail early on a missing key, before any browser starts.
    create_adapter(&options.model, adapter_options(options))
        .map_err(|e| anyhow::anyhow!("the agent's model {}: {e}", options.model))?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let results_path = out.join("results.json");
    let results = if options.resume {
        Results::load(&results_path).context("--resume needs the results.json of --out")?
    } else {
        let mut notes = vec![format!(
            "Agent model: {}. Tasks: {}{}.",
            options.model,
            work.len(),
            options
                .shard
                .map_or_else(String::new, |s| format!(" (shard {}/{})", s.index, s.count))
        )];
        notes.push(if options.no_site_tips {
            "Site tips: off.".to_owned()
        } else {
            "Site tips: the bundled WebVoyager tips (SiteKB::default_kb) were shown to the agent."
                .to_owned()
        });
        if !options.no_date_shift {
            notes.push("Past dates in the questions were moved forward (docs/eval.md).".into());
        }
        Results {
            mode: "live".into(),
            started: today.iso(),
            trials: options.trials,
            feedback: options.feedback,
            judge: judge.as_ref().map(|j| j.model().to_owned()),
            notes,
            results: Vec::new(),
        }
    };
    println!(
        "eval live: {} task(s) with {}, {} trial(s){} → {}",
        work.len(),
        options.model,
        options.trials,
        if options.feedback {
            " with judge feedback"
        } else {
            ""
        },
        out.display()
    );
    let queue = Arc::new(Mutex::new(work.into_iter().collect::<VecDeque<Work>>()));
    let results = Arc::new(Mutex::new(results));
    let mut workers = Vec::new();
    for _ in 0..options.concurrency {
        let (queue, results, judge) = (Arc::clone(&queue), Arc::clone(&results), judge.clone());
        let (options, out) = (options.clone(), out.to_path_buf());
        workers.push(tokio::spawn(async move {
            worker(&queue, &results, judge.as_deref(), &options, &out).await
        }));
    }
    let mut errors = Vec::new();
    for w in workers {
        match w.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(format!("{e:#}")),
            Err(e) => errors.push(format!("a worker panicked: {e}")),
        }
    }
    let results = results.lock().await;
    write_outputs(&results, out)?;
    println!("eval live: report in {}", out.join("report.md").display());
    if !errors.is_empty() {
        bail!("{}", errors.join("; "));
    }
    Ok(())
}

async fn worker(
    queue: &Mutex<VecDeque<Work>>,
    results: &Mutex<Results>,
    judge: Option<&Judge>,
    options: &Options,
    out: &Path,
) -> anyhow::Result<()> {
    loop {
        let Some(work) = queue.lock().await.pop_front() else {
            break;
        };
        let mut previous_failure: Option<String> = None;
        for trial in 1..=options.trials {
            let head = RecordHead {
                id: work.task.id.clone(),
                site: work.task.site.clone(),
                adapter: options.model.clone(),
                trial,
                feedback: options.feedback && trial > 1,
                trace: Some(format!("traces/{}/trial-{trial}", slug(&work.task.id))),
                scripted: false,
            };
            // On resume: a recorded trial counts as done; a recorded pass
            // ends the task.
            let done = {
                let r = results.lock().await;
                r.results
                    .iter()
                    .find(|x| x.id == head.id && x.adapter == head.adapter && x.trial == trial)
                    .cloned()
            };
            let record = match done {
                Some(record) => record,
                None => {
                    let feedback = if options.feedback {
                        previous_failure.as_deref()
                    } else {
                        None
                    };
                    let record =
                        match fresh_trial(&work, feedback, judge, options, out, &head).await {
                            Ok(record) => record,
                            Err(error) => runner::error_record(head.clone(), &error),
                        };
                    println!(
                        "  {:<5} {} trial {trial}: {}",
                        if record.passed() { "pass" } else { "fail" },
                        work.task.id,
                        record.verdict.as_ref().map_or("", |v| v.reason.as_str())
                    );
                    let mut r = results.lock().await;
                    r.results.push(record.clone());
                    write_outputs(&r, out)?;
                    record
                }
            };
            if record.passed() {
                break;
            }
            previous_failure = Some(record.verdict.map_or_else(
                || format!("the run ended with {}.", record.status),
                |v| v.reason,
            ));
        }
    }
    Ok(())
}

/// One trial in a browser of its own (a fresh profile: no cookies, storage
/// or open pages left by an earlier task), closed afterwards.
async fn fresh_trial(
    work: &Work,
    feedback: Option<&str>,
    judge: Option<&Judge>,
    options: &Options,
    out: &Path,
    head: &RecordHead,
) -> anyhow::Result<super::report::TaskResult> {
    let tab = runner::launch(options.chrome.as_deref()).await?;
    let record = one_trial(&tab, work, feedback, judge, options, out, head).await;
    let _ = tab.close().await;
    record
}

async fn one_trial(
    tab: &Arc<lumen::browser::CdpTab>,
    work: &Work,
    feedback: Option<&str>,
    judge: Option<&Judge>,
    options: &Options,
    out: &Path,
    head: &RecordHead,
) -> anyhow::Result<super::report::TaskResult> {
    let outcome = tab
        .goto(&work.task.start_url)
        .await
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", work.task.start_url))?;
    if !outcome.ok {
        bail!(
            "opening {} failed: {:?}",
            work.task.start_url,
            outcome.error
        );
    }
    let adapter = create_adapter(&options.model, adapter_options(options))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let session = SessionOptions {
        max_steps: options.max_steps,
        site_kb: (!options.no_site_tips).then(|| Arc::new(SiteKB::default_kb())),
        ..SessionOptions::default()
    };
    let trace_dir = out.join(head.trace.as_deref().unwrap_or("traces"));
    let keep = judge.map_or(1, |j| j.screenshots);
    let run = runner::run_task(
        Arc::clone(tab),
        adapter,
        &instruction(&work.question, feedback),
        session,
        Duration::from_secs(options.timeout),
        &trace_dir,
        keep,
    )
    .await?;
    let verdict = match judge {
        None => None,
        Some(judge) => {
            let answer = run.answer();
            let input = JudgeInput {
                question: &work.question,
                answer: answer.as_deref(),
                references: &work.references,
                screenshots: &run.screenshots,
            };
            Some(match judge.judge(&input).await {
                Ok(v) => v,
                Err(e) => Verdict {
                    pass: false,
                    reason: format!("the judge failed: {e:#}"),
                },
            })
        }
    };
    Ok(run.record(head.clone(), verdict))
}

#[cfg(test)]
mod tests {
    use lumen_mock::mock_provider::trajectory::{ScriptStep, Wire};
    use lumen_mock::mock_provider::{MockProvider, Reply, Route};
    use lumen_mock::{FixtureServer, StatusCode};
    use serde_json::json;

    use super::*;

    fn judge_says(pass: bool, reason: &str) -> Reply {
        let verdict = json!({"verdict": if pass { "pass" } else { "fail" }, "reason": reason});
        Reply::Json(
            StatusCode::OK,
            json!({"content": [{"type": "text", "text": verdict.to_string()}]}),
        )
    }

    /// The live machinery end to end on loopback: a real Chromium session
    /// per trial, the agent and the judge both served by the mock provider.
    /// Trial 1 is judged a failure, trial 2 is told why and passes, trial 3
    /// never runs; a resumed eval runs nothing again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trials_feed_the_judges_reason_forward_and_resume_skips_finished_work() {
        let root = crate::util::project_root().unwrap();
        let site = FixtureServer::start_at(root.join("fixtures/sites/eval"))
            .await
            .unwrap();
        let mock = MockProvider::start().await.unwrap();
        let wire = Wire::Compatible;
        mock.push(
            wire.route(),
            wire.turn(0, &[ScriptStep::Done("v0.4.1".into())], (1280, 720)),
        );
        mock.push(
            wire.route(),
            wire.turn(0, &[ScriptStep::Done("v0.4.2".into())], (1280, 720)),
        );
        mock.push(
            Route::AnthropicMessages,
            judge_says(false, "v0.4.1 is not the latest release."),
        );
        mock.push(
            Route::AnthropicMessages,
            judge_says(true, "v0.4.2 is the latest."),
        );
        let judge = Arc::new(
            Judge::new(
                "anthropic/claude-judge",
                Some(mock.base_url()),
                Some("k".into()),
                2,
            )
            .unwrap(),
        );
        let out = std::env::temp_dir().join(format!("lumen-eval-live-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let base = wire.base_url(&mock);
        let out_arg = out.display().to_string();
        let parse = |extra: &[&str]| {
            let mut argv = vec![
                "t",
                "--model",
                "compatible/qwen2.5-vl",
                "--base-url",
                base.as_str(),
                "--trials",
                "3",
                "--feedback",
                "--max-steps",
                "3",
                "--out",
                out_arg.as_str(),
            ];
            argv.extend_from_slice(extra);
            <Options as clap::FromArgMatches>::from_arg_matches(
                &<Options as clap::Args>::augment_args(clap::Command::new("t"))
                    .get_matches_from(argv),
            )
            .unwrap()
        };
        let question = "Open the lumen-lite repository and tell me its latest release tag.";
        let work = vec![Work {
            task: Task {
                id: "Replica--1".into(),
                site: "Replica".into(),
                question: question.into(),
                start_url: site.url("repo.html"),
            },
            question: question.into(),
            references: Vec::new(),
        }];
        let today = Date::new(2026, 1, 1);
        execute(work.clone(), Some(judge.clone()), &parse(&[]), &out, today)
            .await
            .unwrap();

        let results = Results::load(&out.join("results.json")).unwrap();
        let runs: Vec<(u32, bool, bool)> = results
            .results
            .iter()
            .map(|r| (r.trial, r.feedback, r.passed()))
            .collect();
        assert_eq!(
            runs,
            [(1, false, false), (2, true, true)],
            "stops at the first pass"
        );
        assert_eq!(results.results[1].answer.as_deref(), Some("v0.4.2"));
        assert!(results.feedback && results.judge.as_deref() == Some("claude-judge"));
        let requests = mock.requests();
        let agent: Vec<String> = requests
            .iter()
            .filter(|r| r.route == Some(wire.route()))
            .map(|r| r.body.to_string())
            .collect();
        let judged: Vec<String> = requests
            .iter()
            .filter(|r| r.route == Some(Route::AnthropicMessages))
            .map(|r| r.body.to_string())
            .collect();
        assert_eq!((agent.len(), judged.len()), (2, 2));
        assert!(!agent[0].contains("judged incomplete"));
        assert!(
            agent[1].contains("v0.4.1 is not the latest release."),
            "feedback reached trial 2"
        );
        assert!(judged[0].contains("Agent's answer: v0.4.1"));
        assert!(
            judged[0].contains("\"type\":\"image\""),
            "the judge saw a screenshot"
        );
        let report = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(
            report.contains("pass@1 0/1 (0%), pass@3 1/1 (100%)"),
            "{report}"
        );
        let trace = out.join(results.results[0].trace.clone().unwrap());
        assert!(trace.join("events.jsonl").is_file());
        // Each trial's trace has the CLI's report and GIF, and report.md
        // links them.
        assert!(trace.join("report.html").is_file() && trace.join("run.gif").is_file());
        assert!(
            report.contains("[report](traces/Replica--1/trial-1/report.html)"),
            "{report}"
        );

        // Resumed: everything is done, so nothing is requested again.
        execute(work, Some(judge), &parse(&["--resume"]), &out, today)
            .await
            .unwrap();
        assert_eq!(mock.requests().len(), requests.len());
        assert_eq!(
            Results::load(&out.join("results.json"))
                .unwrap()
                .results
                .len(),
            2
        );
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn feedback_is_appended_to_the_question_only_when_given() {
        assert_eq!(instruction("Find X.", None), "Find X.");
        let with = instruction("Find X.", Some("The price was not given."));
        assert!(with.starts_with("Find X.\n\n"));
        assert!(with.contains("The price was not given."));
    }
}

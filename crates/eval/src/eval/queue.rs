//! `--queue postgres://…`: the live eval on the run queue `lumen serve`
//! workers share (docs/deployment.md).
//!
//! Each selected task is enqueued as a run straight into the database (a
//! run id derived from `--queue-name` and the task id), and the workers
//! execute them: the workers of a deployment, and `--queue-workers N`
//! servers this process starts on the same database. The eval waits until
//! every one of its runs has ended, then builds the results from the
//! database: the runs' answers, steps and tokens, judged as the live eval
//! judges (without screenshots: they are files of the workers).
//!
//! Resuming is free: a task whose run is already in the database is not
//! enqueued again, so an eval stopped half-way and started again with the
//! same name only waits for the rest; and the results are always read
//! back from the database, never from this process's memory.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use lumen_server::db::Db;
use lumen_server::db::queue::QUEUE;
use lumen_server::{RunInfo, ServeOptions, Server};

use super::Options;
use super::dates::Date;
use super::judge::{Judge, JudgeInput};
use super::live::Work;
use super::report::{Results, TaskResult, Verdict, write_outputs};

/// How often the eval looks at its runs.
const POLL: Duration = Duration::from_secs(1);

/// The run id of `task` in the eval named `name`: letters, digits, `-` and
/// `_` only, at most 64 characters (a server's run id), the same on every
/// start so a second start finds the runs of the first.
pub(crate) fn run_id(name: &str, task: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let id = format!("ev_{}_{}", clean(name), clean(task));
    if id.len() <= 64 {
        return id;
    }
    // FNV-1a: stable across builds, unlike std's hasher.
    let hash = format!("{name}\u{0}{task}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{}_{hash:016x}", &id[..47])
}

/// Enqueues `work`, lets the workers run it (with `workers`, servers of
/// this process), waits, and writes the results built from the database.
pub(crate) async fn execute(
    work: Vec<Work>,
    judge: Option<Arc<Judge>>,
    options: &Options,
    out: &Path,
    today: Date,
    workers: Vec<ServeOptions>,
) -> anyhow::Result<()> {
    let url = options
        .queue
        .as_deref()
        .ok_or_else(|| anyhow!("--queue needs a postgres:// URL"))?;
    if options.trials != 1 {
        bail!("--queue runs one trial per task; drop --trials");
    }
    let scratch = std::env::temp_dir().join(format!("lumen-eval-queue-{}", std::process::id()));
    let db = Db::open(&scratch, Some(url))
        .await
        .map_err(|e| anyhow!("the queue's database: {e}"))?;
    let name = options.queue_name.as_str();
    let mut fresh = 0;
    for w in &work {
        let id = run_id(name, &w.task.id);
        if db.run(&id).await?.is_some() {
            continue;
        }
        let info = RunInfo::queued(
            id,
            w.question.clone(),
            Some(w.task.start_url.clone()),
            options.model.clone(),
            options.max_steps,
        );
        db.insert_run(&info, None, None).await?;
        fresh += 1;
    }
    db.notify(QUEUE, "eval").await;
    println!(
        "eval queue {name}: {} task(s), {fresh} enqueued now, {} from before; {} worker(s) here → {}",
        work.len(),
        work.len() - fresh,
        workers.len(),
        out.display()
    );
    let mut servers = Vec::new();
    for o in workers {
        servers.push(
            Server::start(o)
                .await
                .map_err(|e| anyhow!("a worker: {e}"))?,
        );
    }
    let waited = wait(&db, name, &work, options).await;
    for s in servers {
        s.shutdown().await;
    }
    let infos = waited?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut results = Results {
        mode: "live".into(),
        started: today.iso(),
        trials: 1,
        feedback: false,
        judge: judge.as_ref().map(|j| j.model().to_owned()),
        notes: vec![format!(
            "Agent model: {}. Tasks: {}, run by the workers of the queue at {} as eval {name:?}; \
             results read from its database. The judge saw no screenshots.",
            options.model,
            work.len(),
            lumen_server::db::redact_url(url),
        )],
        results: Vec::new(),
    };
    for (w, info) in work.iter().zip(infos) {
        let verdict = match &judge {
            None => None,
            Some(judge) => Some(
                judge
                    .judge(&JudgeInput {
                        question: &w.question,
                        answer: info.result.as_deref(),
                        references: &w.references,
                        screenshots: &[],
                    })
                    .await
                    .unwrap_or_else(|e| Verdict {
                        pass: false,
                        reason: format!("the judge failed: {e:#}"),
                    }),
            ),
        };
        results
            .results
            .push(record(w, &info, verdict, &options.model));
    }
    db.close().await;
    let _ = std::fs::remove_dir_all(&scratch);
    write_outputs(&results, out)?;
    let passed = results.results.iter().filter(|r| r.passed()).count();
    println!(
        "eval queue {name}: {passed}/{} passed; report in {}",
        results.results.len(),
        out.join("report.md").display()
    );
    Ok(())
}

/// Waits until every run of the eval has ended; returns their records in
/// the order of `work`.
async fn wait(
    db: &Db,
    name: &str,
    work: &[Work],
    options: &Options,
) -> anyhow::Result<Vec<RunInfo>> {
    // Each task may wait for the ones before it on one worker.
    let limit = Duration::from_secs(options.timeout.saturating_mul(work.len().max(1) as u64));
    let started = Instant::now();
    loop {
        let mut infos = Vec::with_capacity(work.len());
        for w in work {
            let id = run_id(name, &w.task.id);
            let row = db
                .run(&id)
                .await?
                .ok_or_else(|| anyhow!("run {id} left the database"))?;
            infos.push(row.info);
        }
        let open = infos.iter().filter(|i| !i.status.is_terminal()).count();
        if open == 0 {
            return Ok(infos);
        }
        if started.elapsed() > limit {
            bail!(
                "{open} run(s) of eval {name:?} have not ended after {}s; start it again to go \
                 on waiting (nothing is enqueued twice)",
                limit.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The results record of a finished run.
fn record(w: &Work, info: &RunInfo, verdict: Option<Verdict>, model: &str) -> TaskResult {
    let status = info.outcome.map_or_else(
        || info.status.as_str().to_owned(),
        |o| {
            serde_json::to_value(o)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| info.status.as_str().to_owned())
        },
    );
    let wall_ms = match (info.started_at_ms, info.ended_at_ms) {
        (Some(s), Some(e)) => e.saturating_sub(s),
        _ => 0,
    };
    let cached = info.usage.cache_read_tokens + info.usage.cache_write_tokens;
    TaskResult {
        id: w.task.id.clone(),
        site: w.task.site.clone(),
        adapter: model.to_owned(),
        trial: 1,
        feedback: false,
        status,
        answer: info.result.clone(),
        verdict,
        steps: info.steps_completed,
        input_tokens: info.usage.input_tokens,
        output_tokens: info.usage.output_tokens,
        cached_tokens: cached,
        cost_usd: lumen_models::registry::cost(model, &info.usage),
        wall_ms,
        engine_ms: wall_ms,
        trace: None,
        scripted: false,
    }
}

#[cfg(test)]
mod tests {
    use lumen_mock::FixtureServer;
    use lumen_mock::mock_provider::MockProvider;
    use lumen_mock::mock_provider::trajectory::{ScriptStep, Wire};

    use super::*;
    use crate::eval::catalogue::Task;

    #[test]
    fn run_ids_are_server_run_ids_and_stable() {
        for task in ["Allrecipes--3", "recipes/first review", &"x".repeat(200)] {
            let id = run_id("nightly 2026", task);
            assert!(lumen_server::store::valid_run_id(&id), "{id}");
            assert_eq!(id, run_id("nightly 2026", task));
        }
        assert_ne!(
            run_id("a", &"x".repeat(100)),
            run_id("a", &format!("{}y", "x".repeat(99)))
        );
    }

    /// The eval on a real PostgreSQL queue: two tasks enqueued, run by two
    /// workers this process starts, the results built from the database;
    /// started again, it enqueues and asks nothing again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_run_on_the_queue_and_a_second_start_only_reads_the_results() {
        let root = crate::util::project_root().unwrap();
        let site = FixtureServer::start_at(root.join("fixtures/sites/eval"))
            .await
            .unwrap();
        let mock = MockProvider::start().await.unwrap();
        let wire = Wire::Compatible;
        for answer in ["v0.4.2", "v0.4.2"] {
            mock.push(
                wire.route(),
                wire.turn(0, &[ScriptStep::Done(answer.into())], (1280, 720)),
            );
        }
        let url = tokio::task::spawn_blocking(lumen_test_support::postgres::database)
            .await
            .unwrap()
            .unwrap();
        let out = std::env::temp_dir().join(format!("lumen-eval-queue-t-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let base = wire.base_url(&mock);
        let argv = [
            "t",
            "--model",
            "compatible/qwen2.5-vl",
            "--base-url",
            base.as_str(),
            "--no-judge",
            "--max-steps",
            "3",
            "--queue",
            url.as_str(),
            "--queue-name",
            "nightly",
            "--queue-workers",
            "2",
        ];
        let options = <Options as clap::FromArgMatches>::from_arg_matches(
            &<Options as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from(argv),
        )
        .unwrap();
        let question = "Open the lumen-lite repository and tell me its latest release tag.";
        let work: Vec<Work> = (1..=2)
            .map(|i| Work {
                task: Task {
                    id: format!("Replica--{i}"),
                    site: "Replica".into(),
                    question: question.into(),
                    start_url: site.url("repo.html"),
                },
                question: question.into(),
                references: Vec::new(),
            })
            .collect();
        let workers = |n: usize| {
            (0..n)
                .map(|i| {
                    let mut o = super::super::live::queue_worker(&options, i);
                    // The fixture site is on loopback: this operator allows it.
                    o.policy.allowed_private_hosts = vec!["127.0.0.1".into()];
                    o
                })
                .collect::<Vec<_>>()
        };
        let today = Date::new(2026, 1, 1);
        execute(work.clone(), None, &options, &out, today, workers(2))
            .await
            .unwrap();
        let results = Results::load(&out.join("results.json")).unwrap();
        let got: Vec<(&str, &str, Option<&str>)> = results
            .results
            .iter()
            .map(|r| (r.id.as_str(), r.status.as_str(), r.answer.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("Replica--1", "success", Some("v0.4.2")),
                ("Replica--2", "success", Some("v0.4.2"))
            ]
        );
        assert_eq!(mock.requests().len(), 2);

        // Started again (no worker needed): nothing is enqueued or asked
        // twice, and the results are read back from the database.
        std::fs::remove_dir_all(&out).unwrap();
        execute(work, None, &options, &out, today, Vec::new())
            .await
            .unwrap();
        assert_eq!(mock.requests().len(), 2);
        let again = Results::load(&out.join("results.json")).unwrap();
        assert_eq!(again.results.len(), 2);
        assert!(again.results.iter().all(|r| r.passed()));
        std::fs::remove_dir_all(&out).unwrap();
    }
}

//! The offline suite: replica sites (`fixtures/sites/eval`) served from
//! 127.0.0.1, every task run through the real `lumen` facade in real
//! Chromium with each of the four adapters, and the model replaced by
//! `lumen-mock` answering in that provider's own wire format.
//!
//! The "model" is an oracle with a script: each task in
//! `fixtures/sites/eval/tasks.json` lists its turns, each turn the page state
//! it starts from (`at`, a URL that reproduces that state) and its actions
//! as CSS selectors. Before the run the oracle loads each `at` page in the
//! same tab and viewport, reads the centre of every target and the text of
//! every `answerFrom` element, and queues the turns as provider-native
//! answers (screenshot pixels for Anthropic and OpenAI, the 0–1000 grid for
//! Gemini and compatible servers). The run itself then starts from a fresh
//! start page, and its checker reads the page state and the answer.
//! MiniWoB++ tasks are answered turn by turn instead: a live oracle reads
//! the page each time the loop is about to ask the model (`LiveOracle`).
//! The tasks are in [`super::catalogue`], the oracles and the checker in
//! [`super::oracles`]; this module selects, schedules and runs them.
//!
//! So the model is scripted, and the report says so; what the suite proves
//! is everything else: HTTP, streaming, decoding, coordinate conversion,
//! clicks, typing, keys, settling and verification, for every adapter.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use lumen::browser::CdpTab;
use lumen::models::{AdapterOptions, ApiKey, create_adapter};
use lumen::{BrowserTab, SessionOptions};
use serde_json::Value;
use tokio::sync::Mutex;

use super::catalogue::{ReplicaCatalogue, ReplicaTask};
use super::miniwob::{self, MiniWobTask, TASKS};
use super::oracles::{LiveOracle, check, eval, goto, script};
use super::report::{Results, TaskResult, Verdict, write_outputs};
use super::runner::{self, RecordHead, Run};
use super::{Options, slug};

/// Where the offline doubles come from: `lumen-mock` (a normal dependency,
/// unlike `lumen-test-support`). Everything below names them through here.
mod doubles {
    pub(super) use lumen_mock::FixtureServer;
    pub(super) use lumen_mock::mock_provider::MockProvider;
    pub(super) use lumen_mock::mock_provider::trajectory::{ScriptStep, Wire};
}
use doubles::{FixtureServer, MockProvider, ScriptStep, Wire};

/// A task of either offline suite.
#[derive(Debug, Clone)]
pub(crate) enum OfflineTask {
    Replica(ReplicaTask),
    MiniWob(MiniWobTask),
}

impl OfflineTask {
    pub(crate) fn id(&self) -> String {
        match self {
            OfflineTask::Replica(t) => t.id.clone(),
            OfflineTask::MiniWob(t) => format!("miniwob/{}", t.name),
        }
    }

    pub(crate) fn site(&self) -> &str {
        match self {
            OfflineTask::Replica(t) => &t.site,
            OfflineTask::MiniWob(_) => "miniwob",
        }
    }
}

/// Which suites `--suites` names (default both).
fn suites(options: &Options) -> anyhow::Result<(bool, bool)> {
    if options.suites.is_empty() {
        return Ok((true, true));
    }
    for suite in &options.suites {
        if suite != "replica" && suite != "miniwob" {
            bail!("unknown suite {suite:?} (replica, miniwob)");
        }
    }
    let has = |name: &str| options.suites.iter().any(|s| s == name);
    Ok((has("replica"), has("miniwob")))
}

/// Every task of the chosen suites that `--quick`, `--sites`, `--tasks` and
/// `--limit` select, replica tasks first.
pub(crate) fn select_all(
    catalogue: &ReplicaCatalogue,
    options: &Options,
) -> anyhow::Result<Vec<OfflineTask>> {
    let (replica, miniwob) = suites(options)?;
    let mut all: Vec<OfflineTask> = Vec::new();
    if replica {
        all.extend(catalogue.tasks.iter().cloned().map(OfflineTask::Replica));
    }
    if miniwob {
        all.extend(TASKS.iter().copied().map(OfflineTask::MiniWob));
    }
    for site in &options.sites {
        if !all.iter().any(|t| t.site() == site) {
            bail!("no offline site {site:?} in the chosen suites");
        }
    }
    for id in &options.tasks {
        if !all.iter().any(|t| &t.id() == id) {
            bail!("no offline task {id:?} in the chosen suites");
        }
    }
    let quick = |t: &OfflineTask| match t {
        OfflineTask::Replica(t) => t.quick,
        OfflineTask::MiniWob(t) => t.quick,
    };
    let mut tasks: Vec<OfflineTask> = all
        .into_iter()
        .filter(|t| !options.quick || quick(t))
        .filter(|t| options.sites.is_empty() || options.sites.iter().any(|s| s == t.site()))
        .filter(|t| options.tasks.is_empty() || options.tasks.contains(&t.id()))
        .collect();
    if let Some(limit) = options.limit {
        tasks.truncate(limit);
    }
    Ok(tasks)
}

/// The servers the workers share.
struct Servers {
    replica: FixtureServer,
    miniwob: Option<FixtureServer>,
}

/// Runs the offline suites and fails if any run fails.
pub(crate) async fn run(options: &Options, root: &Path, out: &Path) -> anyhow::Result<()> {
    let site_dir = root.join("fixtures/sites/eval");
    let catalogue = ReplicaCatalogue::load(&site_dir.join("tasks.json"))?;
    let tasks = select_all(&catalogue, options)?;
    if tasks.is_empty() {
        bail!("no offline task selected");
    }
    let wires: Vec<Wire> = if options.adapters.is_empty() {
        Wire::ALL.to_vec()
    } else {
        options
            .adapters
            .iter()
            .map(|a| {
                a.parse::<Wire>()
                    .map_err(|_| anyhow::anyhow!("unknown adapter {a:?}"))
            })
            .collect::<anyhow::Result<_>>()?
    };
    let miniwob = if tasks.iter().any(|t| matches!(t, OfflineTask::MiniWob(_))) {
        let pages = miniwob::ensure_pages(root)?;
        Some(
            FixtureServer::start_at(&pages)
                .await
                .context("starting the MiniWoB++ server")?,
        )
    } else {
        None
    };
    let servers = Arc::new(Servers {
        replica: FixtureServer::start_at(&site_dir)
            .await
            .context("starting the replica-site server")?,
        miniwob,
    });
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let results_path = out.join("results.json");
    let results = if options.resume && results_path.exists() {
        Results::load(&results_path)?
    } else {
        Results {
            mode: "offline".into(),
            started: super::dates::Date::today_utc().iso(),
            trials: 1,
            feedback: false,
            judge: None,
            notes: vec![
                "The model is scripted. Every run here is driven by an oracle that read its targets from the pages and answers through the mock provider in each provider's real wire format; these numbers prove the engine (HTTP, streaming, decoding, coordinates, input, settling, verification), not a model's ability.".into(),
                "Pass means the deterministic checker agreed: on the replica sites the expected answer and the page state read via JavaScript, on MiniWoB++ the episode's own reward (done with a positive raw reward).".into(),
            ],
            results: Vec::new(),
        }
    };
    let mut results = results;
    if servers.miniwob.is_some()
        && !results
            .notes
            .iter()
            .any(|n| n.starts_with("MiniWoB++ tasks not scripted"))
    {
        let skipped: Vec<String> = miniwob::NOT_SCRIPTED
            .iter()
            .map(|(name, why)| format!("{name} ({why})"))
            .collect();
        results.notes.push(format!(
            "MiniWoB++ tasks not scripted: {}.",
            skipped.join("; ")
        ));
    }
    let results = Arc::new(Mutex::new(results));
    println!(
        "eval offline: {} task(s) × {} adapter(s) → {}",
        tasks.len(),
        wires.len(),
        out.display()
    );
    // One worker per adapter, at most `concurrency` at once; each has its
    // own browser.
    let semaphore = Arc::new(tokio::sync::Semaphore::new(options.concurrency));
    let mut workers = Vec::new();
    for wire in wires {
        let (tasks, servers, results, semaphore) = (
            tasks.clone(),
            Arc::clone(&servers),
            Arc::clone(&results),
            Arc::clone(&semaphore),
        );
        let (options, out) = (options.clone(), out.to_path_buf());
        workers.push(tokio::spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            adapter_worker(wire, &tasks, &servers, &options, &out, &results).await
        }));
    }
    let mut worker_errors = Vec::new();
    for worker in workers {
        match worker.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => worker_errors.push(format!("{error:#}")),
            Err(error) => worker_errors.push(format!("a worker panicked: {error}")),
        }
    }
    let results = results.lock().await.clone();
    write_outputs(&results, out)?;
    let failed: Vec<&TaskResult> = results.results.iter().filter(|r| !r.passed()).collect();
    println!(
        "eval offline: {}/{} runs passed; report: {}",
        results.results.len() - failed.len(),
        results.results.len(),
        out.join("report.md").display()
    );
    for f in &failed {
        println!(
            "  FAILED {} [{}]: {} — {}",
            f.id,
            f.adapter,
            f.status,
            f.verdict.as_ref().map_or("", |v| v.reason.as_str())
        );
    }
    if !worker_errors.is_empty() {
        bail!("{}", worker_errors.join("; "));
    }
    if !failed.is_empty() {
        bail!("{} offline run(s) failed", failed.len());
    }
    Ok(())
}

async fn adapter_worker(
    wire: Wire,
    tasks: &[OfflineTask],
    servers: &Servers,
    options: &Options,
    out: &Path,
    results: &Mutex<Results>,
) -> anyhow::Result<()> {
    let tab = runner::launch(options.chrome.as_deref()).await?;
    for task in tasks {
        let id = task.id();
        let trace = format!("traces/{}/{}", wire.name(), slug(&id));
        let head = RecordHead {
            id: id.clone(),
            site: task.site().to_owned(),
            adapter: wire.model().to_owned(),
            trial: 1,
            feedback: false,
            trace: Some(trace.clone()),
            scripted: true,
        };
        if results.lock().await.has(&head.id, &head.adapter, 1) {
            continue;
        }
        let trace_dir = out.join(&trace);
        let outcome = match task {
            OfflineTask::Replica(t) => {
                run_replica(wire, t, &servers.replica, &tab, options, &trace_dir).await
            }
            OfflineTask::MiniWob(t) => match &servers.miniwob {
                Some(server) => run_miniwob(wire, t, server, &tab, options, &trace_dir).await,
                None => Err(anyhow::anyhow!("the MiniWoB++ server is not running")),
            },
        };
        let record = match outcome {
            Ok((run, verdict)) => run.record(head, Some(verdict)),
            Err(error) => runner::error_record(head, &error),
        };
        println!(
            "  {:<5} {:<34} {}",
            if record.passed() { "pass" } else { "FAIL" },
            id,
            wire.name()
        );
        let mut results = results.lock().await;
        results.results.push(record);
        write_outputs(&results, out)?;
    }
    let _ = tab.close().await;
    Ok(())
}

/// Queues `turns` on a fresh mock (nothing left over from an earlier task
/// can answer this one), runs `instruction` with `wire`'s adapter, and
/// returns the run and how many scripted turns were never requested.
async fn drive(
    wire: Wire,
    turns: &[Vec<ScriptStep>],
    instruction: &str,
    tab: &Arc<CdpTab>,
    options: &Options,
    trace_dir: &Path,
) -> anyhow::Result<(Run, usize)> {
    let viewport = tab
        .viewport()
        .await
        .map_err(|e| anyhow::anyhow!("reading the viewport: {e}"))?;
    let size = (viewport.width, viewport.height);
    let mock = MockProvider::start()
        .await
        .context("starting the mock provider")?;
    for (i, steps) in turns.iter().enumerate() {
        mock.push(wire.route(), wire.turn(i, steps, size));
    }
    let adapter = create_adapter(
        wire.model(),
        AdapterOptions {
            api_key: Some(ApiKey::new("offline-eval")),
            base_url: Some(wire.base_url(&mock)),
            ..AdapterOptions::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("creating the {} adapter: {e}", wire.name()))?;
    let session = SessionOptions {
        max_steps: u32::try_from(turns.len()).unwrap_or(u32::MAX) + 2,
        ..SessionOptions::default()
    };
    let run = runner::run_task(
        Arc::clone(tab),
        adapter,
        instruction,
        session,
        Duration::from_secs(options.timeout),
        trace_dir,
        1,
    )
    .await?;
    Ok((run, mock.pending(wire.route())))
}

async fn run_replica(
    wire: Wire,
    task: &ReplicaTask,
    server: &FixtureServer,
    tab: &Arc<CdpTab>,
    options: &Options,
    trace_dir: &Path,
) -> anyhow::Result<(Run, Verdict)> {
    // Each task starts from an empty basket (localStorage) and its start page.
    goto(tab, &server.url(&task.start)).await?;
    eval(tab, "localStorage.clear(); sessionStorage.clear(); true").await?;
    let turns = script(task, server, tab).await?;
    goto(tab, &server.url(&task.start)).await?;
    let (run, unused) = drive(wire, &turns, &task.question, tab, options, trace_dir).await?;
    let verdict = check(task, &run, tab, unused).await;
    Ok((run, verdict))
}

async fn run_miniwob(
    wire: Wire,
    task: &MiniWobTask,
    server: &FixtureServer,
    tab: &Arc<CdpTab>,
    options: &Options,
    trace_dir: &Path,
) -> anyhow::Result<(Run, Verdict)> {
    goto(tab, &server.url(&format!("miniwob/{}.html", task.name))).await?;
    let started = eval(tab, &miniwob::start_episode_js(options.seed)).await?;
    let utterance = started[0]
        .as_str()
        .filter(|u| !u.is_empty())
        .with_context(|| format!("{}: no instruction from core.getUtterance()", task.name))?
        .to_owned();
    if started[1] != Value::Bool(true) {
        bail!("{}: WOB_TASK_READY is not true", task.name);
    }
    let viewport = tab
        .viewport()
        .await
        .map_err(|e| anyhow::anyhow!("reading the viewport: {e}"))?;
    let mock = Arc::new(
        MockProvider::start()
            .await
            .context("starting the mock provider")?,
    );
    let oracle = Arc::new(LiveOracle::new(
        *task,
        wire,
        Arc::clone(tab),
        Arc::clone(&mock),
        (viewport.width, viewport.height),
    ));
    let adapter = create_adapter(
        wire.model(),
        AdapterOptions {
            api_key: Some(ApiKey::new("offline-eval")),
            base_url: Some(wire.base_url(&mock)),
            ..AdapterOptions::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("creating the {} adapter: {e}", wire.name()))?;
    let session = SessionOptions {
        max_steps: options.max_steps,
        monitors: vec![Arc::clone(&oracle) as Arc<dyn lumen::LoopMonitor>],
        ..SessionOptions::default()
    };
    let run = runner::run_task(
        Arc::clone(tab),
        adapter,
        &utterance,
        session,
        Duration::from_secs(options.timeout),
        trace_dir,
        1,
    )
    .await?;
    let reward = eval(tab, miniwob::REWARD_JS).await?;
    let (pass, reason) = miniwob::succeeded(&reward);
    let errors = oracle.take_errors();
    let verdict = if !errors.is_empty() {
        Verdict {
            pass: false,
            reason: format!("{}; {reason}", errors.join("; ")),
        }
    } else if run.status() != "success" {
        Verdict {
            pass: false,
            reason: format!("the run ended with {}; {reason}", run.status()),
        }
    } else {
        Verdict { pass, reason }
    };
    Ok((run, verdict))
}

#[cfg(test)]
mod tests {
    use super::super::catalogue::OracleAction;
    use super::*;

    fn shipped() -> ReplicaCatalogue {
        let root = crate::util::project_root().unwrap();
        ReplicaCatalogue::load(&root.join("fixtures/sites/eval/tasks.json")).unwrap()
    }

    fn parse_options(args: &[&str]) -> Options {
        let mut argv = vec!["t", "--offline"];
        argv.extend_from_slice(args);
        <Options as clap::FromArgMatches>::from_arg_matches(
            &<Options as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from(argv),
        )
        .unwrap()
    }

    /// The checker passes the scripted trajectory and fails the same task
    /// when the "model" clicks the wrong tab: the page state is read back,
    /// not taken from the script.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_replica_checker_passes_the_script_and_catches_a_wrong_click() {
        let root = crate::util::project_root().unwrap();
        let task = shipped()
            .tasks
            .into_iter()
            .find(|t| t.id == "repo/latest-release")
            .unwrap();
        let mut wrong = task.clone();
        wrong.turns[1].actions = vec![OracleAction::Click {
            click: "#tab-code".into(),
        }];
        let server = FixtureServer::start_at(root.join("fixtures/sites/eval"))
            .await
            .unwrap();
        let tab = runner::launch(None).await.unwrap();
        let options = parse_options(&[]);
        let traces =
            std::env::temp_dir().join(format!("lumen-eval-checker-{}", std::process::id()));
        let (_, verdict) = run_replica(
            Wire::Compatible,
            &task,
            &server,
            &tab,
            &options,
            &traces.join("ok"),
        )
        .await
        .unwrap();
        assert!(verdict.pass, "{}", verdict.reason);
        let (run, verdict) = run_replica(
            Wire::Compatible,
            &wrong,
            &server,
            &tab,
            &options,
            &traces.join("wrong"),
        )
        .await
        .unwrap();
        assert_eq!(
            run.status(),
            "success",
            "the scripted model still claims success"
        );
        assert!(!verdict.pass);
        assert!(verdict.reason.contains("page state"), "{}", verdict.reason);
        assert!(traces.join("wrong/events.jsonl").is_file());
        tab.close().await.unwrap();
        std::fs::remove_dir_all(&traces).unwrap();
    }

    /// A stand-in for a MiniWoB++ page with MiniWoB's episode protocol
    /// (seed, start, utterance, reward globals, the START cover) and a task
    /// that needs two looks: "Open" reveals "Submit", which wins; "Decoy"
    /// loses.
    const TWO_LOOKS: &str = r#"<!doctype html><html><body>
<div id="query"></div>
<div id="area"><button id="open">Open</button> <button id="decoy">Decoy</button>
<button id="submit" style="display:none">Submit</button></div>
<script>
var WOB_DONE_GLOBAL = false, WOB_RAW_REWARD_GLOBAL = 0, WOB_REWARD_REASON = null, WOB_TASK_READY = true;
Math.seedrandom = function () {};
var cover = document.createElement('div');
cover.id = 'sync-task-cover'; cover.textContent = 'START'; document.body.appendChild(cover);
var core = {
  EPISODE_MAX_TIME: 10000,
  startEpisodeReal: function () {
    cover.style.display = 'none';
    document.getElementById('query').textContent = 'Open the form, then press "Submit".';
  },
  getUtterance: function () { return document.getElementById('query').textContent; },
  endEpisode: function (r) { WOB_DONE_GLOBAL = true; WOB_RAW_REWARD_GLOBAL = r; cover.style.display = 'block'; }
};
document.getElementById('open').onclick = function () { document.getElementById('submit').style.display = 'inline'; };
document.getElementById('submit').onclick = function () { core.endEpisode(1); };
document.getElementById('decoy').onclick = function () { core.endEpisode(-1); };
</script></body></html>"#;

    /// The live oracle plans every turn from the page the screenshot shows
    /// (the second target does not exist before the first click), for a
    /// pixel and a grid protocol; and the verdict is MiniWoB's reward, not
    /// the run's own claim: a wrong click or a broken oracle fails.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_live_oracle_takes_as_many_looks_as_the_task_needs() {
        let root = std::env::temp_dir().join(format!("lumen-eval-miniwob-{}", std::process::id()));
        std::fs::create_dir_all(root.join("miniwob")).unwrap();
        std::fs::write(root.join("miniwob/two-looks.html"), TWO_LOOKS).unwrap();
        let server = FixtureServer::start_at(&root).await.unwrap();
        let tab = runner::launch(None).await.unwrap();
        let options = parse_options(&[]);
        let right = MiniWobTask::scripted(
            "two-looks",
            "const submit = document.getElementById('submit'); \
             if (!vis(submit)) return [['click', ...c(document.getElementById('open'))]]; \
             return [['click', ...c(submit)]];",
        );
        for wire in [Wire::Anthropic, Wire::Google] {
            let (run, verdict) = run_miniwob(
                wire,
                &right,
                &server,
                &tab,
                &options,
                &root.join(wire.name()),
            )
            .await
            .unwrap();
            assert!(verdict.pass, "{wire:?}: {}", verdict.reason);
            assert_eq!(run.steps, 3, "{wire:?}: open, submit, then done");
        }
        let wrong = MiniWobTask::scripted(
            "two-looks",
            "return [['click', ...c(document.getElementById('decoy'))]];",
        );
        let (run, verdict) = run_miniwob(
            Wire::Compatible,
            &wrong,
            &server,
            &tab,
            &options,
            &root.join("wrong"),
        )
        .await
        .unwrap();
        assert_eq!(
            run.status(),
            "success",
            "the scripted model still claims success"
        );
        assert!(!verdict.pass);
        assert!(
            verdict.reason.contains("raw reward -1"),
            "{}",
            verdict.reason
        );
        let broken = MiniWobTask::scripted(
            "two-looks",
            "return [['click', ...c(document.getElementById('nope'))]];",
        );
        let (_, verdict) = run_miniwob(
            Wire::OpenAi,
            &broken,
            &server,
            &tab,
            &options,
            &root.join("broken"),
        )
        .await
        .unwrap();
        assert!(!verdict.pass);
        assert!(
            verdict.reason.contains("oracle turn 0"),
            "{}",
            verdict.reason
        );
        tab.close().await.unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn quick_suites_and_filters_select_tasks() {
        let catalogue = shipped();
        let select = |args: &[&str]| select_all(&catalogue, &parse_options(args));
        let quick = select(&["--quick"]).unwrap();
        assert_eq!(
            quick
                .iter()
                .filter(|t| matches!(t, OfflineTask::Replica(_)))
                .count(),
            6
        );
        assert!(quick.iter().any(|t| t.site() == "miniwob"));
        assert!(
            select(&["--quick", "--suites", "replica"])
                .unwrap()
                .iter()
                .all(|t| t.site() != "miniwob")
        );
        let news = select(&["--sites", "news"]).unwrap();
        assert!(news.len() >= 2 && news.iter().all(|t| t.site() == "news"));
        assert_eq!(select(&["--tasks", "miniwob/click-test"]).unwrap().len(), 1);
        assert!(select(&["--sites", "nope"]).is_err());
        assert!(select(&["--suites", "replica", "--sites", "miniwob"]).is_err());
        assert!(select(&["--suites", "webarena"]).is_err());
        assert_eq!(select(&["--limit", "1"]).unwrap().len(), 1);
    }
}

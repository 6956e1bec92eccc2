//! `cargo xtask bench server`: a bounded load test of `lumen serve` on
//! loopback.
//!
//! The real server (in this process, on 127.0.0.1 with an ephemeral port)
//! runs `--runs` tasks submitted at once by a local HTTP client, at most
//! `--concurrency` at a time per server (a browser context each, in at most
//! `--browser-processes` Chromium per server), against the
//! mock provider (every step is a scripted click on the fixture counter
//! page; each run ends at its step budget). Bounded in count (`--runs`)
//! and time (`--timeout-secs`); nothing leaves the machine.
//!
//! With `--workers N` (N > 1) the same load runs twice in one invocation:
//! first on one server with its SQLite store (the baseline), then on N
//! servers sharing one PostgreSQL queue (`--database-url`), the runs
//! submitted round-robin to the servers; the table gives both and their
//! ratios. With `--compare-processes` the same load runs first with a
//! Chromium per concurrent run (`--browser-processes` = `--concurrency`, the
//! server's layout before session 15), then with `--browser-processes`.
//!
//! Reported: runs/min, p50/p95 step latency (the loop's own step timing,
//! from each run's trace), p50/p95 claim latency (from a run's creation to
//! the start of its execution: queue wait included), peak memory, and a
//! nothing-lost check: every run reached its end with every step exactly
//! once in its event log and trace, and the provider saw exactly one
//! request per step.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use lumen::models::{AdapterOptions, ApiKey};
use lumen_mock::FixtureServer;
use lumen_mock::mock_provider::script::chat_turn;
use lumen_mock::mock_provider::{MockProvider, Route};
use serde_json::{Value, json};

/// Options of `cargo xtask bench server`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// Runs submitted at once.
    #[arg(long, default_value_t = 12)]
    runs: usize,
    /// Runs executing at once per server.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// Local Chromium processes per server (the server's
    /// `--browser-processes`).
    #[arg(long, default_value_t = 1)]
    browser_processes: usize,
    /// First measure the same load with a Chromium per concurrent run, as
    /// the baseline of the ratios.
    #[arg(long, conflicts_with = "workers")]
    compare_processes: bool,
    /// Steps per run.
    #[arg(long, default_value_t = 4)]
    steps: u32,
    /// Give up after this long (each measurement).
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Servers sharing one PostgreSQL queue, measured against one server
    /// on SQLite. 1: only the SQLite figure.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// The PostgreSQL the `--workers` share (an empty database the bench
    /// may fill).
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
}

/// What one measurement found.
struct Figures {
    label: String,
    wall: Duration,
    runs: usize,
    step_ms: Vec<u64>,
    claim_ms: Vec<u64>,
    requests: usize,
    problems: Vec<String>,
    /// The process tree's peak RSS during this measurement (sampled), MiB.
    peak_tree: f64,
}

impl Figures {
    fn runs_per_min(&self) -> f64 {
        self.runs as f64 / self.wall.as_secs_f64() * 60.0
    }
}

pub(crate) fn run(options: &Options) -> Result<()> {
    if options.runs == 0 || options.runs > 200 || options.steps == 0 || options.steps > 50 {
        bail!("--runs must be 1..=200 and --steps 1..=50 (the test is bounded)");
    }
    if options.workers == 0 || options.workers > 8 {
        bail!("--workers must be 1..=8");
    }
    if options.browser_processes == 0 {
        bail!("--browser-processes must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(bench(options))
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn bench(options: &Options) -> Result<()> {
    // reqwest is built with rustls but no crypto provider in this workspace.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut all = Vec::new();
    if options.compare_processes {
        all.push(measure(options, None, 1, options.concurrency.max(1)).await?);
    }
    all.push(measure(options, None, 1, options.browser_processes).await?);
    if options.workers > 1 {
        let url = options.database_url.as_deref().ok_or_else(|| {
            anyhow!(
                "--workers {} needs --database-url postgres://… (an empty database the \
                 bench may fill; docs/deployment.md)",
                options.workers
            )
        })?;
        all.push(
            measure(
                options,
                Some(url),
                options.workers,
                options.browser_processes,
            )
            .await?,
        );
    }
    let self_peak =
        crate::util::status_kb("VmHWM:", std::process::id()).unwrap_or(0) as f64 / 1024.0;
    let total_steps = options.runs * options.steps as usize;
    let header: Vec<&str> = all.iter().map(|f| f.label.as_str()).collect();
    print!("| measure | {} |", header.join(" | "));
    let ratio = all.len() > 1;
    println!("{}", if ratio { " ratio |" } else { "" });
    println!(
        "|---|{}{}",
        "---|".repeat(all.len()),
        if ratio { "---|" } else { "" }
    );
    let row = |name: &str, values: Vec<f64>, unit: &str, digits: usize| {
        let cells: Vec<String> = values
            .iter()
            .map(|v| format!("{v:.digits$} {unit}"))
            .collect();
        let r = match (values.first(), values.last()) {
            (Some(a), Some(b)) if ratio && *a > 0.0 => format!(" {:.2}× |", b / a),
            _ if ratio => " – |".to_string(),
            _ => String::new(),
        };
        println!("| {name} | {} |{r}", cells.join(" | "));
    };
    println!(
        "| runs × steps, concurrency per server | {} |{}",
        all.iter()
            .map(|_| format!(
                "{} × {}, {}",
                options.runs, options.steps, options.concurrency
            ))
            .collect::<Vec<_>>()
            .join(" | "),
        if ratio { " |" } else { "" }
    );
    row(
        "wall time",
        all.iter().map(|f| f.wall.as_secs_f64()).collect(),
        "s",
        1,
    );
    row(
        "throughput",
        all.iter().map(Figures::runs_per_min).collect(),
        "runs/min",
        1,
    );
    for (name, p) in [("p50", 0.5), ("p95", 0.95)] {
        row(
            &format!("step latency {name}"),
            all.iter()
                .map(|f| percentile(&f.step_ms, p) as f64)
                .collect(),
            "ms",
            0,
        );
    }
    for (name, p) in [("p50", 0.5), ("p95", 0.95)] {
        row(
            &format!("claim latency {name} (creation to start)"),
            all.iter()
                .map(|f| percentile(&f.claim_ms, p) as f64)
                .collect(),
            "ms",
            0,
        );
    }
    row(
        "peak RSS, process tree incl. Chromium (sampled)",
        all.iter().map(|f| f.peak_tree).collect(),
        "MiB",
        0,
    );
    println!("| peak RSS, bench process (VmHWM) | {self_peak:.0} MiB |");
    for f in &all {
        println!(
            "| provider requests / steps ({}) | {} / {total_steps} |",
            f.label, f.requests
        );
    }
    let problems: Vec<&String> = all.iter().flat_map(|f| &f.problems).collect();
    if problems.is_empty() {
        println!("| lost or repeated | none |");
        Ok(())
    } else {
        for p in &problems {
            eprintln!("lost or repeated: {p}");
        }
        bail!("{} run(s) lost or repeated work", problems.len())
    }
}

/// One measurement: `workers` servers (one on SQLite when `database_url`
/// is `None`), each with at most `processes` Chromium, the load, the
/// nothing-lost check.
async fn measure(
    options: &Options,
    database_url: Option<&str>,
    workers: usize,
    processes: usize,
) -> Result<Figures> {
    let mut peak_tree = crate::util::tree_rss_mib(std::process::id());
    let site = FixtureServer::start().await.context("fixture server")?;
    let mock = MockProvider::start().await.context("mock provider")?;
    let data = std::env::temp_dir().join(format!(
        "lumen-bench-server-{}-{workers}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&data);
    let x = lumen::normalize(160.0, 1280);
    let y = lumen::normalize(120.0, 720);
    let total_steps = options.runs * options.steps as usize;
    for _ in 0..total_steps {
        mock.push(
            Route::ChatCompletions,
            chat_turn(&[("c", "click", json!({"x": x, "y": y}))], None, 1000),
        );
    }
    let mut servers = Vec::new();
    for w in 0..workers {
        let mut serve = lumen_server::ServeOptions::new(&data);
        serve.port = 0;
        serve.token = Some("bench-token-0123456789".into());
        serve.max_concurrent = options.concurrency.max(1);
        serve.browser_processes = processes;
        serve.queue_limit = options.runs;
        serve.default_model = "compatible/qwen2.5-vl".into();
        serve.database_url = database_url.map(str::to_string);
        serve.worker_id = database_url.map(|_| format!("bench-{w}"));
        // The fixture site is on loopback, which the operator policy denies
        // unless the operator allows it, as this bench does.
        serve.policy.allowed_private_hosts = vec!["127.0.0.1".into()];
        serve.adapter = AdapterOptions {
            api_key: Some(ApiKey::new("bench")),
            base_url: Some(format!("{}/v1", mock.base_url())),
            ..AdapterOptions::default()
        };
        servers.push(
            lumen_server::Server::start(serve)
                .await
                .map_err(|e| anyhow!("{e}"))?,
        );
    }
    let bases: Vec<String> = servers
        .iter()
        .map(|s| format!("http://{}", s.local_addr()))
        .collect();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_static("Bearer bench-token-0123456789"),
    );
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()?;
    let base = bases[0].clone();

    let started = Instant::now();
    let deadline = started + Duration::from_secs(options.timeout_secs);
    let creates = (0..options.runs).map(|i| {
        let http = http.clone();
        let body = json!({
            "instruction": format!("Click the button (run {i})"),
            "startUrl": site.url("counter.html"),
            "maxSteps": options.steps,
        });
        let url = format!("{}/v1/runs", bases[i % bases.len()]);
        async move {
            let r = http.post(url).json(&body).send().await?;
            let status = r.status();
            let v: Value = r.json().await?;
            anyhow::ensure!(status.as_u16() == 201, "create: {status} {v}");
            v["id"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| anyhow!("no id in {v}"))
        }
    });
    let ids: Vec<String> = futures::future::try_join_all(creates).await?;

    let finals = loop {
        peak_tree = peak_tree.max(crate::util::tree_rss_mib(std::process::id()));
        let v: Value = http
            .get(format!("{base}/v1/runs"))
            .send()
            .await?
            .json()
            .await?;
        let runs = v["runs"].as_array().cloned().unwrap_or_default();
        let ended = runs
            .iter()
            .filter(|r| {
                matches!(
                    r["status"].as_str(),
                    Some("completed" | "failed" | "cancelled")
                )
            })
            .count();
        if ended == ids.len() {
            break runs;
        }
        if Instant::now() > deadline {
            for s in servers {
                s.shutdown().await;
            }
            bail!(
                "only {ended} of {} runs ended within {}s",
                ids.len(),
                options.timeout_secs
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let wall = started.elapsed();

    // Nothing lost: every run, every step once, one provider call per step.
    let mut step_ms: Vec<u64> = Vec::new();
    let mut claim_ms: Vec<u64> = Vec::new();
    let mut problems = Vec::new();
    for id in &ids {
        let run = finals.iter().find(|r| r["id"] == id.as_str());
        let Some(run) = run else {
            problems.push(format!("{id}: missing from the list"));
            continue;
        };
        if run["stepsCompleted"] != options.steps || run["outcome"] != "maxSteps" {
            problems.push(format!(
                "{id}: {} steps, outcome {}",
                run["stepsCompleted"], run["outcome"]
            ));
        }
        if let (Some(c), Some(s)) = (run["createdAtMs"].as_u64(), run["startedAtMs"].as_u64()) {
            claim_ms.push(s.saturating_sub(c));
        }
        let trace: Value = http
            .get(format!("{base}/v1/runs/{id}/trace"))
            .send()
            .await?
            .json()
            .await?;
        let steps = trace["steps"].as_array().cloned().unwrap_or_default();
        let numbers: Vec<u64> = steps.iter().filter_map(|s| s["step"].as_u64()).collect();
        if numbers != (0..options.steps as u64).collect::<Vec<_>>()
            || steps.iter().any(|s| s["completed"] != true)
        {
            problems.push(format!("{id}: trace steps {numbers:?}"));
        }
        step_ms.extend(steps.iter().filter_map(|s| s["durationMs"].as_u64()));
    }
    let requests = mock.requests().len();
    if requests != total_steps {
        problems.push(format!(
            "{requests} provider requests for {total_steps} steps"
        ));
    }
    for s in servers {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&data);
    step_ms.sort_unstable();
    claim_ms.sort_unstable();
    Ok(Figures {
        label: match database_url {
            None => format!("1 server, SQLite, {processes} Chromium"),
            Some(_) => format!("{workers} workers, PostgreSQL, {processes} Chromium each"),
        },
        wall,
        runs: ids.len(),
        step_ms,
        claim_ms,
        requests,
        problems,
        peak_tree,
    })
}

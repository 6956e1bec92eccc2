//! `cargo xtask bench server`: a bounded load test of `lumen serve` on
//! loopback.
//!
//! The real server (in this process, on 127.0.0.1 with an ephemeral port)
//! runs `--runs` tasks submitted at once by a local HTTP client, at most
//! `--concurrency` at a time (one Chromium each), against the mock provider
//! (every step is a scripted click on the fixture counter page; each run
//! ends at its step budget). Bounded in count (`--runs`) and time
//! (`--timeout-secs`); nothing leaves the machine.
//!
//! Reported: runs/min, p50/p95 step latency (the loop's own step timing,
//! from each run's trace), peak memory (this process's high-water mark and
//! the sampled peak of the process tree, Chromium included), and a
//! nothing-lost check: every run reached its end with every step exactly
//! once in its event log and trace, and the provider saw exactly one request
//! per step.

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
    /// Runs executing at once (browsers).
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// Steps per run.
    #[arg(long, default_value_t = 4)]
    steps: u32,
    /// Give up after this long.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
}

pub(crate) fn run(options: &Options) -> Result<()> {
    if options.runs == 0 || options.runs > 200 || options.steps == 0 || options.steps > 50 {
        bail!("--runs must be 1..=200 and --steps 1..=50 (the test is bounded)");
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
    let site = FixtureServer::start().await.context("fixture server")?;
    let mock = MockProvider::start().await.context("mock provider")?;
    let data = std::env::temp_dir().join(format!("lumen-bench-server-{}", std::process::id()));
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

    let mut serve = lumen_server::ServeOptions::new(&data);
    serve.port = 0;
    serve.max_concurrent = options.concurrency.max(1);
    serve.queue_limit = options.runs;
    serve.default_model = "compatible/qwen2.5-vl".into();
    // The fixture site is on loopback, which the operator policy denies
    // unless the operator allows it, as this bench does.
    serve.policy.allowed_private_hosts = vec!["127.0.0.1".into()];
    serve.adapter = AdapterOptions {
        api_key: Some(ApiKey::new("bench")),
        base_url: Some(format!("{}/v1", mock.base_url())),
        ..AdapterOptions::default()
    };
    let server = lumen_server::Server::start(serve)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let base = format!("http://{}", server.local_addr());
    // Every request carries the token the server generated at start.
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {}", server.token());
    headers.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_str(&bearer)?,
    );
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()?;
    let rss_before = crate::util::tree_rss_mib(std::process::id());

    let started = Instant::now();
    let deadline = started + Duration::from_secs(options.timeout_secs);
    let creates = (0..options.runs).map(|i| {
        let http = http.clone();
        let body = json!({
            "instruction": format!("Click the button (run {i})"),
            "startUrl": site.url("counter.html"),
            "maxSteps": options.steps,
        });
        let url = format!("{base}/v1/runs");
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

    let mut peak_tree = rss_before;
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
            server.shutdown().await;
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
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&data);
    step_ms.sort_unstable();

    let runs_per_min = ids.len() as f64 / wall.as_secs_f64() * 60.0;
    let self_peak =
        crate::util::status_kb("VmHWM:", std::process::id()).unwrap_or(0) as f64 / 1024.0;
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| runs × steps, concurrency | {} × {}, {} |",
        ids.len(),
        options.steps,
        options.concurrency
    );
    println!("| wall time | {:.1} s |", wall.as_secs_f64());
    println!("| throughput | {runs_per_min:.1} runs/min |");
    println!(
        "| step latency p50 / p95 | {} / {} ms |",
        percentile(&step_ms, 0.5),
        percentile(&step_ms, 0.95)
    );
    println!("| peak RSS, server process (VmHWM) | {self_peak:.0} MiB |");
    println!("| peak RSS, process tree incl. Chromium (sampled) | {peak_tree:.0} MiB |");
    println!("| provider requests / steps | {requests} / {total_steps} |");
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

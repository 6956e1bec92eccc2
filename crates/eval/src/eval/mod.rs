//! `cargo xtask eval`: WebVoyager tasks live (a real model, the internet,
//! an LLM judge) or the offline suites (replica sites on 127.0.0.1, a
//! scripted model served by `lumen-mock` in each provider's wire format).
//! Both write `results.json` and `report.md` under `--out`. See
//! `docs/eval.md`.
//!
//! - [`catalogue`]: the task catalogues: WebVoyager (loader, reference
//!   answers, selection and the stratified sampler) and the replica sites'
//!   `tasks.json`;
//! - [`dates`]: moving past dates into the future;
//! - [`judge`]: the live judge's prompt, request and verdict parsing;
//! - [`report`]: the results file and the Markdown report;
//! - [`runner`]: one run of one task through the `lumen` facade, with its
//!   trace;
//! - [`offline`]: the offline suites (replica sites, MiniWoB++): selection,
//!   workers per adapter, one run per task;
//! - [`oracles`]: the offline suites' scripted "model" and checker;
//!   [`miniwob`]: fetching MiniWoB++ and its episode protocol;
//! - [`live`]: trials, concurrency, sharding and resume for live runs.

pub(crate) mod catalogue;
pub(crate) mod dates;
mod judge;
mod live;
mod miniwob;
mod offline;
mod oracles;
mod queue;
mod report;
pub(crate) mod runner;

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context as _, bail};

use crate::util;

/// Options of `cargo xtask eval`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    /// Run the offline suites (replica sites and MiniWoB++ with a scripted
    /// model; no keys, and no internet once MiniWoB++ is fetched) instead of
    /// live WebVoyager tasks.
    #[arg(long)]
    pub(crate) offline: bool,
    /// Offline: the fast slice for CI (one task per replica site and four
    /// MiniWoB++ tasks) instead of every task.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Offline: which suites to run (replica, miniwob); default both.
    #[arg(long, value_delimiter = ',')]
    pub(crate) suites: Vec<String>,
    /// Offline: which wire protocols to drive (anthropic, openai, google,
    /// compatible); default all four.
    #[arg(long, value_delimiter = ',')]
    pub(crate) adapters: Vec<String>,
    /// Live: the agent's model (`provider/model`).
    #[arg(long, default_value = "anthropic/claude-sonnet-4-6")]
    pub(crate) model: String,
    /// Live: the agent model's API base URL (default: the provider's
    /// environment variable, then its public endpoint).
    #[arg(long)]
    pub(crate) base_url: Option<String>,
    /// Live: the judge's model (google/…, anthropic/…, openai/…).
    #[arg(long, default_value = "google/gemini-3.5-flash")]
    pub(crate) judge: String,
    /// Live: skip the judge; a run passes when the agent reports success.
    #[arg(long)]
    pub(crate) no_judge: bool,
    /// Live: how many of the last screenshots the judge sees.
    #[arg(long, default_value_t = 3)]
    pub(crate) judge_screenshots: usize,
    /// Live: a named subset of WebVoyager (`lumen25`).
    #[arg(long)]
    pub(crate) subset: Option<String>,
    /// Only these sites (WebVoyager names live, replica names offline).
    #[arg(long, value_delimiter = ',')]
    pub(crate) sites: Vec<String>,
    /// Only these task ids.
    #[arg(long, value_delimiter = ',')]
    pub(crate) tasks: Vec<String>,
    /// At most this many tasks (after every other filter).
    #[arg(long)]
    pub(crate) limit: Option<usize>,
    /// Live: a seeded stratified sample of N tasks (an even share per site).
    #[arg(long)]
    pub(crate) sample: Option<usize>,
    /// Seed of `--sample`.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Live: run without the bundled WebVoyager site tips (on by default,
    /// as in the original Lumen's runs).
    #[arg(long)]
    pub(crate) no_site_tips: bool,
    /// Live: keep the dataset's dates as written (see docs/eval.md).
    #[arg(long)]
    pub(crate) no_date_shift: bool,
    /// Live: trials per task (pass@k); a task stops at its first pass.
    #[arg(long, default_value_t = 1)]
    pub(crate) trials: u32,
    /// Live: tell each trial after the first why the judge failed the last.
    #[arg(long)]
    pub(crate) feedback: bool,
    /// Runs at once, one browser each.
    #[arg(long, default_value_t = 1)]
    pub(crate) concurrency: usize,
    /// Live: run only shard I of N (`--shard 2/4`), for CI matrices and job
    /// arrays; task k (0-based, after selection) belongs to shard k % N + 1.
    #[arg(long)]
    pub(crate) shard: Option<Shard>,
    /// Continue the eval whose results are in `--out`, skipping finished runs.
    #[arg(long, requires = "out")]
    pub(crate) resume: bool,
    /// Step budget per task.
    #[arg(long, default_value_t = 30)]
    pub(crate) max_steps: u32,
    /// Per-task timeout in seconds.
    #[arg(long, default_value_t = 600)]
    pub(crate) timeout: u64,
    /// Output folder (default `target/eval/<date>-<time>-<mode>`).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// The Chromium binary (default: LUMEN_CHROME, CHROME_PATH, the headless
    /// shell, then /usr/bin/chromium).
    #[arg(long)]
    pub(crate) chrome: Option<PathBuf>,
    /// Live: print the selected tasks (after date shifting) and stop.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Live: enqueue the tasks into the run queue of `lumen serve` workers
    /// in this PostgreSQL (`postgres://…`) and build the results from it
    /// (docs/eval.md); started again, it enqueues nothing twice.
    #[arg(long, value_name = "URL")]
    pub(crate) queue: Option<String>,
    /// Live, with --queue: the eval's name in the queue (its run ids).
    #[arg(long, default_value = "eval", requires = "queue")]
    pub(crate) queue_name: String,
    /// Live, with --queue: workers this process starts on the queue
    /// (0: the deployment's workers do the work).
    #[arg(long, default_value_t = 0, requires = "queue")]
    pub(crate) queue_workers: usize,
}

/// `--shard I/N`: 1-based shard I of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard {
    pub(crate) index: usize,
    pub(crate) count: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("expected I/N, got {s:?}"))?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|_| format!("bad shard index {i:?}"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("bad shard count {n:?}"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!("shard {index}/{count}: need 1 <= I <= N"));
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// The items of this shard: every N-th, starting at I-1.
    pub(crate) fn take<T: Clone>(&self, items: &[T]) -> Vec<T> {
        items
            .iter()
            .enumerate()
            .filter(|(k, _)| k % self.count == self.index - 1)
            .map(|(_, t)| t.clone())
            .collect()
    }
}

/// Runs the eval described by `options`.
pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    if options.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let root = util::project_root()?;
    let mode = if options.offline { "offline" } else { "live" };
    let out = match &options.out {
        Some(out) => out.clone(),
        None => root
            .join("target/eval")
            .join(format!("{}-{mode}", timestamp())),
    };
    if options.offline {
        runtime.block_on(offline::run(options, &root, &out))
    } else {
        runtime.block_on(live::run(options, &root, &out))
    }
}

/// `YYYY-MM-DD-HHMMSS` in UTC, for default output folders.
fn timestamp() -> String {
    let secs = lumen_trace::clock::unix_secs();
    let day = secs % 86_400;
    format!(
        "{}-{:02}{:02}{:02}",
        dates::Date::from_days(i64::try_from(secs / 86_400).unwrap_or(0)).iso(),
        day / 3600,
        day / 60 % 60,
        day % 60
    )
}

/// The file-system-safe form of a task id (`recipes/x` → `recipes_x`).
pub(crate) fn slug(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_split_the_work_without_overlap() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let items: Vec<u32> = (0..10).collect();
        let parts: Vec<Vec<u32>> = (1..=3)
            .map(|i| Shard { index: i, count: 3 }.take(&items))
            .collect();
        assert_eq!(parts[0], [0, 3, 6, 9]);
        let mut all: Vec<u32> = parts.concat();
        all.sort_unstable();
        assert_eq!(all, items, "every task in exactly one shard");
    }

    /// One offline task end to end through `cargo xtask eval --offline`'s
    /// own entry point: its trace folder holds the CLI's report.html (one
    /// section per step, screenshots embedded) and run.gif, and report.md
    /// links both.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_offline_task_trace_has_the_cli_report_and_gif_and_report_md_links_them() {
        let root = util::project_root().unwrap();
        let out = std::env::temp_dir().join(format!("lumen-eval-traces-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let options = <Options as clap::FromArgMatches>::from_arg_matches(
            &<Options as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from([
                "t",
                "--offline",
                "--suites",
                "replica",
                "--tasks",
                "repo/latest-release",
                "--adapters",
                "compatible",
            ]),
        )
        .unwrap();
        offline::run(&options, &root, &out).await.unwrap();

        let results = report::Results::load(&out.join("results.json")).unwrap();
        let [run] = results.results.as_slice() else {
            panic!("one run expected: {:?}", results.results);
        };
        let trace = run.trace.clone().unwrap();
        let dir = out.join(&trace);
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert_eq!(
            html.matches("<section class=\"step").count() as u32,
            run.steps,
            "one section per step"
        );
        assert!(html.contains("data:image/"), "screenshots are embedded");
        let gif = std::fs::read(dir.join("run.gif")).unwrap();
        assert!(gif.starts_with(b"GIF8"), "run.gif is a GIF");
        assert!(
            dir.join("screenshots/step-001.jpg").is_file()
                || dir.join("screenshots/step-001.png").is_file()
        );
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(
            md.contains(&format!("[report]({trace}/report.html)"))
                && md.contains(&format!("[gif]({trace}/run.gif)")),
            "{md}"
        );
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn slugs_are_safe_file_names() {
        assert_eq!(slug("recipes/first-review"), "recipes_first-review");
        assert_eq!(slug("Google Flights--17"), "Google_Flights--17");
    }
}

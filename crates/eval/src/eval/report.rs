//! What an eval writes: `results.json` (one record per task, adapter and
//! trial, rewritten after every task so an interrupted eval can resume) and
//! `report.md` (summary tables, pass@1 and pass@k, and a line per task with
//! links to its trace: `report.html`, `run.gif` and `events.jsonl`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The judge's (or the offline checker's) verdict on one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Verdict {
    /// Whether the task was accomplished.
    pub(crate) pass: bool,
    /// Why, in a sentence.
    pub(crate) reason: String,
}

/// One run of one task with one adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskResult {
    /// `Allrecipes--3`, or `recipes/vegetarian-filter` offline.
    pub(crate) id: String,
    /// The site (WebVoyager name or replica site).
    pub(crate) site: String,
    /// The model string the agent ran with.
    pub(crate) adapter: String,
    /// 1-based trial number.
    pub(crate) trial: u32,
    /// Whether this trial was told the judge's reason for failing the last one.
    pub(crate) feedback: bool,
    /// How the run ended: `success`, `failure`, `maxSteps`, `cancelled`,
    /// `timeout` or `error` (the run could not start).
    pub(crate) status: String,
    /// The agent's answer.
    pub(crate) answer: Option<String>,
    /// The judge's or checker's verdict; `None` when there was no judge.
    pub(crate) verdict: Option<Verdict>,
    /// Steps taken.
    pub(crate) steps: u32,
    /// Input tokens at the normal rate.
    pub(crate) input_tokens: u64,
    /// Output tokens.
    pub(crate) output_tokens: u64,
    /// Input tokens read from or written to the prompt cache.
    pub(crate) cached_tokens: u64,
    /// Estimated cost in US dollars, when the model's prices are known.
    pub(crate) cost_usd: Option<f64>,
    /// Wall time of the run.
    pub(crate) wall_ms: u64,
    /// Wall time minus time spent waiting for the model.
    pub(crate) engine_ms: u64,
    /// The run's trace folder, relative to the report.
    pub(crate) trace: Option<String>,
    /// True when the model was scripted (offline mode).
    pub(crate) scripted: bool,
}

impl TaskResult {
    /// Whether the run counts as passed: the verdict if there is one, else
    /// the agent's own claim of success.
    pub(crate) fn passed(&self) -> bool {
        self.verdict
            .as_ref()
            .map_or(self.status == "success", |v| v.pass)
    }
}

/// The whole results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Results {
    /// `live` or `offline`.
    pub(crate) mode: String,
    /// When the eval started (UTC, ISO 8601 date).
    pub(crate) started: String,
    /// Trials per task.
    pub(crate) trials: u32,
    /// Whether trials after the first were given the judge's feedback.
    pub(crate) feedback: bool,
    /// The judge model, if any.
    pub(crate) judge: Option<String>,
    /// Notes printed at the top of the report (e.g. "the model is scripted").
    pub(crate) notes: Vec<String>,
    /// Every run so far.
    pub(crate) results: Vec<TaskResult>,
}

impl Results {
    /// Reads a results file (for `--resume`).
    pub(crate) fn load(path: &Path) -> anyhow::Result<Results> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a results file", path.display()))
    }

    /// Writes the file atomically (a temporary file, then a rename), so an
    /// interrupted eval never leaves a half-written file behind.
    pub(crate) fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        lumen_trace::write_atomic(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Whether a run of (`id`, `adapter`, `trial`) is already recorded.
    pub(crate) fn has(&self, id: &str, adapter: &str, trial: u32) -> bool {
        self.results
            .iter()
            .any(|r| r.id == id && r.adapter == adapter && r.trial == trial)
    }
}

/// pass@1 and pass@k over a set of runs: a task (per adapter) passes at k
/// if any of its first k trials passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PassRates {
    /// Distinct (task, adapter) pairs.
    pub(crate) tasks: usize,
    /// Passed on the first trial.
    pub(crate) pass1: usize,
    /// Passed on any trial.
    pub(crate) passk: usize,
}

pub(crate) fn pass_rates<'a>(runs: impl IntoIterator<Item = &'a TaskResult>) -> PassRates {
    let mut by_task: BTreeMap<(&str, &str), (bool, bool)> = BTreeMap::new();
    for run in runs {
        let entry = by_task
            .entry((run.id.as_str(), run.adapter.as_str()))
            .or_default();
        if run.trial == 1 {
            entry.0 |= run.passed();
        }
        entry.1 |= run.passed();
    }
    PassRates {
        tasks: by_task.len(),
        pass1: by_task.values().filter(|v| v.0).count(),
        passk: by_task.values().filter(|v| v.1).count(),
    }
}

fn percent(n: usize, of: usize) -> String {
    if of == 0 {
        "–".into()
    } else {
        format!("{n}/{of} ({:.0}%)", 100.0 * n as f64 / of as f64)
    }
}

/// Writes `results.json` and `report.md` into `out` (after every finished
/// run, so an interrupted eval keeps what it has).
pub(crate) fn write_outputs(results: &Results, out: &Path) -> anyhow::Result<()> {
    results.save(&out.join("results.json"))?;
    let report = out.join("report.md");
    std::fs::write(&report, render_markdown(results))
        .with_context(|| format!("writing {}", report.display()))
}

/// Renders `report.md`.
pub(crate) fn render_markdown(results: &Results) -> String {
    let mut md = String::new();
    let k = results.trials;
    // With one trial the pass@k column repeats pass@1; say so in its name.
    let passk = if k > 1 {
        format!("pass@{k}")
    } else {
        "pass@k (k=1)".to_owned()
    };
    let _ = writeln!(
        md,
        "# Lumen eval ({} mode, {})\n",
        results.mode, results.started
    );
    for note in &results.notes {
        let _ = writeln!(md, "> {note}\n");
    }
    let _ = writeln!(
        md,
        "Trials per task: {k}; {}. Judge: {}.\n",
        if k > 1 && results.feedback {
            "trials after the first were told why the judge failed the previous one (pass@k *with feedback*)"
        } else if k > 1 {
            "trials were independent (no judge feedback)"
        } else {
            "one trial, so pass@k is pass@1"
        },
        results
            .judge
            .as_deref()
            .unwrap_or("none (a deterministic checker or the agent's own status)")
    );
    let overall = pass_rates(&results.results);
    let _ = writeln!(
        md,
        "**Overall: pass@1 {}, {passk} {}**\n",
        percent(overall.pass1, overall.tasks),
        percent(overall.passk, overall.tasks)
    );
    type Key = fn(&TaskResult) -> &str;
    let groups: [(&str, Key); 2] = [
        ("Site", |r| r.site.as_str()),
        ("Adapter", |r| r.adapter.as_str()),
    ];
    for (title, key) in groups {
        let mut by: BTreeMap<&str, Vec<&TaskResult>> = BTreeMap::new();
        for run in &results.results {
            by.entry(key(run)).or_default().push(run);
        }
        let _ = writeln!(md, "## By {}\n", title.to_lowercase());
        let _ = writeln!(
            md,
            "| {title} | tasks | pass@1 | {passk} | mean steps | tokens in/out | cost (USD) | mean engine ms |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
        for (name, runs) in by {
            let rates = pass_rates(runs.iter().copied());
            let n = runs.len().max(1) as f64;
            let steps: u32 = runs.iter().map(|r| r.steps).sum();
            let tokens_in: u64 = runs.iter().map(|r| r.input_tokens + r.cached_tokens).sum();
            let tokens_out: u64 = runs.iter().map(|r| r.output_tokens).sum();
            let cost: Option<f64> = runs.iter().map(|r| r.cost_usd).sum();
            let engine: u64 = runs.iter().map(|r| r.engine_ms).sum();
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} | {:.1} | {tokens_in}/{tokens_out} | {} | {:.0} |",
                rates.tasks,
                percent(rates.pass1, rates.tasks),
                percent(rates.passk, rates.tasks),
                f64::from(steps) / n,
                cost.map_or_else(|| "–".into(), |c| format!("{c:.2}")),
                engine as f64 / n,
            );
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Runs\n");
    let _ = writeln!(
        md,
        "| task | adapter | trial | status | pass | steps | answer | verdict | trace |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for r in &results.results {
        let _ = writeln!(
            md,
            "| {} | {} | {}{} | {} | {} | {} | {} | {} | {} |",
            cell(&r.id),
            cell(&r.adapter),
            r.trial,
            if r.feedback { " (fb)" } else { "" },
            r.status,
            if r.passed() { "yes" } else { "no" },
            r.steps,
            cell(r.answer.as_deref().unwrap_or("")),
            cell(r.verdict.as_ref().map_or("", |v| v.reason.as_str())),
            trace_links(r),
        );
    }
    md
}

/// The trace cell of a run: its report (the CLI's `report.html`, with every
/// step's screenshot and actions), the GIF and the raw event log. A run that
/// never started (`error`) has no trace to link.
fn trace_links(r: &TaskResult) -> String {
    match r.trace.as_deref() {
        Some(t) if r.status != "error" => format!(
            "[report]({t}/{}) · [gif]({t}/{}) · [events]({t}/{})",
            lumen_trace::REPORT,
            lumen_trace::GIF,
            lumen_trace::EVENTS
        ),
        _ => String::new(),
    }
}

/// Table-safe text: pipes escaped, newlines flattened, long text cut.
fn cell(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let cut: String = flat.chars().take(120).collect();
    let cut = if cut.len() < flat.len() {
        format!("{cut}…")
    } else {
        cut
    };
    cut.replace('|', "\\|")
}

/// The estimated cost of a run from the model registry (the one price table
/// the CLI uses too); unknown models get no estimate.
pub(crate) fn estimate_cost(model: &str, input: u64, output: u64, cached: u64) -> Option<f64> {
    let usage = lumen_core::TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    };
    lumen_models::registry::cost(model, &usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, adapter: &str, trial: u32, pass: bool) -> TaskResult {
        TaskResult {
            id: id.into(),
            site: id.split("--").next().unwrap().into(),
            adapter: adapter.into(),
            trial,
            feedback: trial > 1,
            status: "success".into(),
            answer: Some("the | answer\nhere".into()),
            verdict: Some(Verdict {
                pass,
                reason: "because".into(),
            }),
            steps: 4,
            input_tokens: 1000,
            output_tokens: 100,
            cached_tokens: 0,
            cost_usd: Some(0.01),
            wall_ms: 2000,
            engine_ms: 500,
            trace: Some(format!("traces/{id}")),
            scripted: false,
        }
    }

    fn sample() -> Results {
        Results {
            mode: "live".into(),
            started: "2026-11-22".into(),
            trials: 2,
            feedback: true,
            judge: Some("google/gemini-3.5-flash".into()),
            notes: vec!["A note.".into()],
            results: vec![
                run("A--1", "m1", 1, true),
                run("A--2", "m1", 1, false),
                run("A--2", "m1", 2, true),
                run("B--1", "m1", 1, false),
                run("B--1", "m1", 2, false),
            ],
        }
    }

    #[test]
    fn pass_at_1_counts_first_trials_and_pass_at_k_any_trial() {
        let rates = pass_rates(&sample().results);
        assert_eq!(
            rates,
            PassRates {
                tasks: 3,
                pass1: 1,
                passk: 2
            }
        );
        // Without a verdict the agent's own status decides.
        let mut r = run("C--1", "m", 1, false);
        r.verdict = None;
        assert!(r.passed());
        r.status = "maxSteps".into();
        assert!(!r.passed());
    }

    #[test]
    fn the_results_file_round_trips_and_knows_what_is_done() {
        let dir = std::env::temp_dir().join(format!("lumen-eval-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("results.json");
        let results = sample();
        results.save(&path).unwrap();
        let loaded = Results::load(&path).unwrap();
        assert_eq!(loaded, results);
        assert!(loaded.has("A--2", "m1", 2));
        assert!(!loaded.has("A--1", "m1", 2));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for field in [
            "id",
            "site",
            "adapter",
            "status",
            "answer",
            "verdict",
            "steps",
            "input_tokens",
            "output_tokens",
            "cached_tokens",
            "cost_usd",
            "wall_ms",
            "engine_ms",
            "trace",
        ] {
            assert!(json["results"][0].get(field).is_some(), "missing {field}");
        }
        std::fs::write(&path, "{").unwrap();
        assert!(Results::load(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_markdown_report_has_both_tables_and_escapes_cells() {
        let md = render_markdown(&sample());
        assert!(md.contains("> A note."));
        assert!(
            md.contains("**Overall: pass@1 1/3 (33%), pass@2 2/3 (67%)**"),
            "{md}"
        );
        assert!(md.contains("## By site") && md.contains("## By adapter"));
        assert!(md.contains("| A | 2 | 1/2 (50%) | 2/2 (100%) |"), "{md}");
        assert!(md.contains("| B | 1 | 0/1 (0%) | 0/1 (0%) |"), "{md}");
        assert!(md.contains("*with feedback*"));
        assert!(md.contains("the \\| answer here"), "{md}");
        assert!(
            md.contains(
                "[report](traces/A--1/report.html) · [gif](traces/A--1/run.gif) · [events](traces/A--1/events.jsonl)"
            ),
            "{md}"
        );
        let mut failed = run("C--1", "m1", 1, false);
        failed.status = "error".into();
        assert_eq!(
            trace_links(&failed),
            "",
            "a run that never started links nothing"
        );
    }

    #[test]
    fn costs_are_estimated_only_for_known_models() {
        let c = estimate_cost("anthropic/claude-sonnet-4-6", 1_000_000, 100_000, 0).unwrap();
        assert!((c - 4.5).abs() < 1e-9);
        assert_eq!(estimate_cost("compatible/qwen2.5-vl", 1, 1, 1), None);
    }
}

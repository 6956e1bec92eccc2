//! [`WorkflowMemory`]: step plans learnt from successful runs, suggested
//! when a similar task comes up.
//!
//! A workflow is extracted from a run's semantic history (only a run that
//! ended with an accepted `terminate` of status `success`), described in
//! plain steps ("Click \"Search\"", "Type \"Paris\"", "Press Enter"), capped
//! at [`MAX_WORKFLOW_STEPS`], and saved to the memory's JSON file at once.
//! Matching scores the *instruction* (not the whole system prompt) by
//! keyword overlap, with a bonus when the current site is the workflow's
//! and a small one for each past success.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use lumen_core::{
    Action, ActionRecord, ControlRequest, LumenError, Result, ScrollDirection, SemanticStep,
    TerminateStatus,
};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::fsutil;

/// The most steps a workflow keeps.
pub const MAX_WORKFLOW_STEPS: usize = 15;
/// The lowest score [`WorkflowMemory::best_match`] accepts by default.
pub const DEFAULT_MIN_SCORE: f64 = 0.3;
const FILE_VERSION: u32 = 1;
const WHAT: &str = "workflow memory";
const DOMAIN_BONUS: f64 = 0.25;
const SUCCESS_BONUS: f64 = 0.02;
const MAX_SUCCESS_BONUS_COUNT: u32 = 5;

/// A reusable routine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// A short name: the instruction it came from, cut at 80 characters.
    pub name: String,
    /// Keywords of the instruction, separated by `|`.
    pub trigger: String,
    /// Human-readable steps, at most [`MAX_WORKFLOW_STEPS`].
    pub steps: Vec<String>,
    /// The site it ran on (`booking.com`), without `www.`.
    pub domain: String,
    /// How many successful runs followed it.
    pub success_count: u32,
}

impl Workflow {
    fn keywords(&self) -> BTreeSet<String> {
        self.trigger
            .split('|')
            .map(|k| k.trim().to_lowercase())
            .filter(|k| !k.is_empty())
            .collect()
    }
}

#[derive(Serialize, Deserialize)]
struct WorkflowFile {
    version: u32,
    workflows: Vec<Workflow>,
}

/// Workflows, optionally backed by a JSON file that every change rewrites
/// atomically.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowMemory {
    path: Option<PathBuf>,
    workflows: Vec<Workflow>,
    min_score: f64,
}

impl WorkflowMemory {
    /// A memory that is never saved.
    pub fn in_memory() -> Self {
        Self {
            path: None,
            workflows: Vec::new(),
            min_score: DEFAULT_MIN_SCORE,
        }
    }

    /// Opens the memory saved at `path` (empty when the file does not exist
    /// yet); every later change is written back to it. A corrupt or
    /// future-version file is an [`LumenError::InvalidData`].
    pub fn open(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        let workflows = match fsutil::read_optional(&path, WHAT)? {
            None => Vec::new(),
            Some(text) => parse_file(&text, &path)?,
        };
        Ok(Self {
            path: Some(path),
            workflows,
            min_score: DEFAULT_MIN_SCORE,
        })
    }

    /// Sets the lowest score a match needs (default [`DEFAULT_MIN_SCORE`]).
    pub fn with_min_score(mut self, min_score: f64) -> Self {
        self.min_score = min_score;
        self
    }

    /// The backing file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// All workflows.
    pub fn workflows(&self) -> &[Workflow] {
        &self.workflows
    }

    /// Extracts a workflow from a run's semantic history, or `None` when the
    /// run did not end in an accepted successful terminate or did nothing
    /// worth repeating.
    pub fn extract(instruction: &str, history: &[SemanticStep]) -> Option<Workflow> {
        let succeeded = history.iter().flat_map(|s| &s.actions).any(|r| {
            r.blocked.is_none()
                && r.execution.ok
                && matches!(
                    r.execution.control,
                    Some(ControlRequest::Terminate {
                        status: TerminateStatus::Success,
                        ..
                    })
                )
        });
        if !succeeded {
            return None;
        }
        let mut steps: Vec<String> = Vec::new();
        let mut repeated = false;
        for record in history.iter().flat_map(|s| &s.actions) {
            let Some(text) = describe(record) else {
                continue;
            };
            if steps.last() == Some(&text) {
                repeated = true;
                continue;
            }
            if repeated && let Some(last) = steps.last_mut() {
                last.push_str(" (repeat as needed)");
            }
            repeated = false;
            steps.push(text);
        }
        if repeated && let Some(last) = steps.last_mut() {
            last.push_str(" (repeat as needed)");
        }
        // Only a terminate: nothing to repeat.
        if steps.len() < 2 {
            return None;
        }
        if steps.len() > MAX_WORKFLOW_STEPS {
            let last = steps.pop();
            steps.truncate(MAX_WORKFLOW_STEPS - 1);
            steps.extend(last);
        }
        let domain = history
            .iter()
            .find_map(|s| site_of(&s.url))
            .unwrap_or_default();
        let keywords = keywords(instruction);
        if keywords.is_empty() {
            return None;
        }
        Some(Workflow {
            name: clip(instruction, 80),
            trigger: keywords.join("|"),
            steps,
            domain,
            success_count: 1,
        })
    }

    /// Learns from a successful run: extracts its workflow, merges it with
    /// a known one for the same site and keywords (counting one more
    /// success and keeping the shorter plan), and saves the memory. Returns
    /// the stored workflow, or `None` when there was nothing to learn.
    pub fn record_success(
        &mut self,
        instruction: &str,
        history: &[SemanticStep],
    ) -> Result<Option<&Workflow>> {
        let Some(new) = Self::extract(instruction, history) else {
            return Ok(None);
        };
        let new_keys = new.keywords();
        let existing = self
            .workflows
            .iter()
            .position(|w| w.domain == new.domain && jaccard(&w.keywords(), &new_keys) >= 0.8);
        let index = match existing {
            Some(i) => {
                let w = &mut self.workflows[i];
                w.success_count = w.success_count.saturating_add(1);
                if new.steps.len() < w.steps.len() {
                    w.steps = new.steps;
                }
                i
            }
            None => {
                self.workflows.push(new);
                self.workflows.len() - 1
            }
        };
        self.save()?;
        Ok(self.workflows.get(index))
    }

    /// Adds a workflow written by hand (steps beyond the cap are dropped)
    /// and saves the memory.
    pub fn add(&mut self, mut workflow: Workflow) -> Result<()> {
        workflow.steps.truncate(MAX_WORKFLOW_STEPS);
        self.workflows.push(workflow);
        self.save()
    }

    /// Writes the memory to its file (nothing for an in-memory one).
    pub fn save(&self) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = WorkflowFile {
            version: FILE_VERSION,
            workflows: self.workflows.clone(),
        };
        let text = serde_json::to_vec_pretty(&file)
            .map_err(|e| LumenError::invalid_data(WHAT, format!("cannot serialise: {e}")))?;
        fsutil::write_atomic(path, &text, WHAT)
    }

    /// The best workflow for `instruction` on the page at `url` and its
    /// score, when one reaches the minimum score. The score is the keyword
    /// overlap (shared keywords over all keywords of both), plus a bonus
    /// when `url` is on the workflow's site and a small one per success.
    pub fn best_match(&self, instruction: &str, url: Option<&str>) -> Option<(&Workflow, f64)> {
        let words: BTreeSet<String> = keywords(instruction).into_iter().collect();
        if words.is_empty() {
            return None;
        }
        let site = url.and_then(site_of);
        self.workflows
            .iter()
            .filter_map(|w| {
                let overlap = jaccard(&w.keywords(), &words);
                if overlap == 0.0 {
                    return None;
                }
                let on_site = site.as_deref().is_some_and(|s| {
                    !w.domain.is_empty()
                        && (s == w.domain || s.ends_with(&format!(".{}", w.domain)))
                });
                let score = overlap
                    + if on_site { DOMAIN_BONUS } else { 0.0 }
                    + SUCCESS_BONUS * f64::from(w.success_count.min(MAX_SUCCESS_BONUS_COUNT));
                (score >= self.min_score).then_some((w, score))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The suggestion block for the prompt, or `None` when nothing matches.
    pub fn prompt_block(&self, instruction: &str, url: Option<&str>) -> Option<String> {
        let (w, _) = self.best_match(instruction, url)?;
        let mut out = format!(
            "A plan that worked before for a similar task (\"{}\" on {}, {} success{}); use it as a guide and adapt it to what you see:",
            w.name,
            if w.domain.is_empty() {
                "the same site"
            } else {
                &w.domain
            },
            w.success_count,
            if w.success_count == 1 { "" } else { "es" }
        );
        for (i, step) in w.steps.iter().enumerate() {
            out.push_str(&format!("\n{}. {step}", i + 1));
        }
        Some(out)
    }
}

fn parse_file(text: &str, path: &Path) -> Result<Vec<Workflow>> {
    let what = format!("{WHAT} {}", path.display());
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| LumenError::invalid_data(&what, format!("not valid JSON ({e})")))?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(FILE_VERSION) => {}
        Some(v) if v > u64::from(FILE_VERSION) => {
            return Err(LumenError::invalid_data(
                &what,
                format!(
                    "format version {v} is newer than this build reads ({FILE_VERSION}); upgrade Lumen"
                ),
            ));
        }
        _ => {
            return Err(LumenError::invalid_data(
                &what,
                "missing or invalid `version`",
            ));
        }
    }
    let file: WorkflowFile = serde_json::from_value(value)
        .map_err(|e| LumenError::invalid_data(&what, format!("unreadable content: {e}")))?;
    Ok(file.workflows)
}

/// One action as a reusable step, or `None` for actions not worth
/// repeating (observation, waiting, state notes, failures).
fn describe(record: &ActionRecord) -> Option<String> {
    if record.blocked.is_some() || !record.execution.ok {
        return None;
    }
    let target = record
        .execution
        .effect
        .as_ref()
        .and_then(|e| e.target.as_ref())
        .and_then(|t| {
            t.name
                .as_deref()
                .filter(|n| !n.trim().is_empty())
                .map(|n| (n, t))
        });
    let point = |verb: &str, x: i32, y: i32| match target {
        Some((name, _)) => format!("{verb} \"{}\"", clip(name, 60)),
        None => format!("{verb} at ({x}, {y})"),
    };
    Some(match &record.call.action {
        Action::Click { x, y, .. } => point("Click", *x, *y),
        Action::DoubleClick { x, y, .. } => point("Double-click", *x, *y),
        Action::TripleClick { x, y, .. } => point("Triple-click", *x, *y),
        Action::Type { text } => format!("Type \"{}\"", clip(text, 60)),
        Action::KeyPress { keys } => format!("Press {}", keys.join("+")),
        Action::Goto { url } => format!("Go to {url}"),
        Action::Back => "Go back".to_owned(),
        Action::Forward => "Go forward".to_owned(),
        Action::Scroll { direction, .. } => format!(
            "Scroll {}",
            match direction {
                ScrollDirection::Up => "up",
                ScrollDirection::Down => "down",
                ScrollDirection::Left => "left",
                ScrollDirection::Right => "right",
            }
        ),
        Action::Drag { .. } => "Drag the control into place".to_owned(),
        Action::Delegate { instruction, .. } => format!("Delegate: {}", clip(instruction, 80)),
        Action::Terminate {
            status: TerminateStatus::Success,
            ..
        } => "Read the answer on the page and finish".to_owned(),
        _ => return None,
    })
}

fn clip(s: &str, max: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// The site of a URL: its host without `www.`, for http(s) URLs only.
fn site_of(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?.trim_end_matches('.');
    Some(host.strip_prefix("www.").unwrap_or(host).to_owned())
}

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "into", "onto", "than", "then", "them",
    "what", "which", "who", "whom", "whose", "where", "when", "how", "are", "was", "were", "has",
    "have", "had", "its", "his", "her", "their", "there", "these", "those", "about", "any", "all",
    "can", "could", "should", "would", "will", "please", "find", "show", "tell", "give", "get",
    "me", "you", "your", "our", "out", "one", "also", "just", "only", "most", "more", "some",
];

/// The keywords of an instruction: lower-case words of three or more
/// letters (or any number), without common filler words, in order, once.
fn keywords(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
    {
        let keep = (word.chars().count() >= 3 || word.chars().all(|c| c.is_ascii_digit()))
            && !word.is_empty()
            && !STOPWORDS.contains(&word.as_str());
        if keep && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

#[cfg(test)]
#[path = "workflow_tests.rs"]
mod tests;

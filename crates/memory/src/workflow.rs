//! [`WorkflowMemory`]: step plans learnt from successful runs, suggested
//! when a similar task comes up.
//!
//! A workflow is extracted from a run's semantic history (only a run that
//! ended with an accepted `terminate` of status `success`) as action kinds
//! and their targets ([`WorkflowStep`]: `click` on `button Search`, `type`
//! into `textbox Destination`, `press` `Enter`), capped at
//! [`MAX_WORKFLOW_STEPS`], and saved to the memory's JSON file at once.
//!
//! A page is hostile and could try to teach a later run its own text, so a
//! workflow keeps no free page text: never what was typed, never a URL's
//! query, and targets only as a role and a short name of letters, digits
//! and spaces. It is suggested only on its own site (the domain or a
//! subdomain), so a page can at most mislead runs on its own site.
//! Matching scores the *instruction* by keyword overlap, plus a small bonus
//! for each past success.

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
const FILE_VERSION: u32 = 2;
const WHAT: &str = "workflow memory";
const SUCCESS_BONUS: f64 = 0.02;
/// Characters of a target's name kept.
const MAX_NAME_CHARS: usize = 40;
/// Characters of a path kept for `goto`.
const MAX_PATH_CHARS: usize = 80;
const MAX_SUCCESS_BONUS_COUNT: u32 = 5;

/// A reusable routine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// A short name: the instruction it came from, cut at 80 characters.
    pub name: String,
    /// Keywords of the instruction, separated by `|`.
    pub trigger: String,
    /// The steps, at most [`MAX_WORKFLOW_STEPS`].
    pub steps: Vec<WorkflowStep>,
    /// The site it ran on (`booking.com`), without `www.`; it is suggested
    /// only there.
    pub domain: String,
    /// How many successful runs followed it.
    pub success_count: u32,
}

/// One step of a workflow: an action kind and what it acted on, never free
/// page text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStep {
    /// The action kind (`click`, `type`, `press`, `scroll`, `goto`, …).
    pub kind: String,
    /// What it acted on: a role and name (`button Search`), a key chord
    /// (`Enter`), a direction (`down`) or a path on the site (`/search`);
    /// letters, digits, spaces and `/._-+` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether the step was repeated in a row (scrolling through a list).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
}

impl WorkflowStep {
    /// A step of `kind` on `target` (sanitised: see [`WorkflowStep::target`]).
    pub fn new(kind: &str, target: Option<&str>) -> Self {
        Self {
            kind: sanitize(kind, 20),
            target: target
                .map(|t| sanitize(t, MAX_PATH_CHARS))
                .filter(|t| !t.is_empty()),
            repeat: false,
        }
    }

    /// The step as a line of the prompt: `click button Search`.
    pub fn describe(&self) -> String {
        let mut out = self.kind.clone();
        if let Some(t) = &self.target {
            out.push(' ');
            out.push_str(t);
        }
        if self.repeat {
            out.push_str(" (repeat as needed)");
        }
        out
    }
}

impl Workflow {
    /// The steps as prompt lines.
    pub fn step_lines(&self) -> Vec<String> {
        self.steps.iter().map(WorkflowStep::describe).collect()
    }

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
        let domain = history.iter().find_map(|s| site_of(&s.url)).or_else(|| {
            // A run that started blank and opened the site itself.
            history
                .iter()
                .flat_map(|s| &s.actions)
                .find_map(|r| match &r.call.action {
                    Action::Goto { url } => site_of(url),
                    _ => None,
                })
        })?;
        let mut steps: Vec<WorkflowStep> = Vec::new();
        for record in history.iter().flat_map(|s| &s.actions) {
            let Some(step) = describe(record, &domain) else {
                continue;
            };
            match steps.last_mut() {
                Some(last) if last.kind == step.kind && last.target == step.target => {
                    last.repeat = true;
                }
                _ => steps.push(step),
            }
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
    /// score, when one reaches the minimum score. Only workflows of the
    /// page's own site (its domain or a parent domain) are considered. The
    /// score is the keyword overlap (shared keywords over all keywords of
    /// both) plus a small bonus per success.
    pub fn best_match(&self, instruction: &str, url: Option<&str>) -> Option<(&Workflow, f64)> {
        let words: BTreeSet<String> = keywords(instruction).into_iter().collect();
        if words.is_empty() {
            return None;
        }
        let site = url.and_then(site_of)?;
        self.workflows
            .iter()
            .filter_map(|w| {
                let on_site = !w.domain.is_empty()
                    && (site == w.domain || site.ends_with(&format!(".{}", w.domain)));
                if !on_site {
                    return None;
                }
                let overlap = jaccard(&w.keywords(), &words);
                if overlap == 0.0 {
                    return None;
                }
                let score = overlap
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
            w.domain,
            w.success_count,
            if w.success_count == 1 { "" } else { "es" }
        );
        for (i, step) in w.step_lines().iter().enumerate() {
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
        Some(1) => return migrate_v1(value, &what),
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

/// Reads a version-1 file, whose steps were free text ("Click \"Search\"",
/// "Type \"Paris\""): each becomes a step of the kind its verb names, its
/// quoted text kept only as a sanitised target of a click (typed text is
/// dropped). Workflows without a site are dropped: they would never be
/// suggested again. The file is rewritten as version 2 on the next save.
fn migrate_v1(value: serde_json::Value, what: &str) -> Result<Vec<Workflow>> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct V1 {
        name: String,
        trigger: String,
        steps: Vec<String>,
        domain: String,
        success_count: u32,
    }
    #[derive(Deserialize)]
    struct V1File {
        workflows: Vec<V1>,
    }
    let file: V1File = serde_json::from_value(value)
        .map_err(|e| LumenError::invalid_data(what, format!("unreadable content: {e}")))?;
    let verb = |line: &str| -> Option<(&'static str, Option<String>)> {
        let quoted = line.split('"').nth(1).map(str::to_owned);
        let repeat_free = line.trim_end_matches(" (repeat as needed)");
        let (kind, target) = match repeat_free.split_whitespace().next()? {
            "Click" | "Double-click" | "Triple-click" => ("click", quoted),
            "Type" => ("type", None),
            "Press" => (
                "keyPress",
                repeat_free.split_whitespace().nth(1).map(str::to_owned),
            ),
            "Go" if repeat_free.starts_with("Go back") => ("back", None),
            "Go" if repeat_free.starts_with("Go forward") => ("forward", None),
            "Go" => ("goto", None),
            "Scroll" => (
                "scroll",
                repeat_free.split_whitespace().nth(1).map(str::to_owned),
            ),
            "Drag" => ("drag", None),
            "Read" => ("terminate", None),
            _ => return None,
        };
        Some((kind, target))
    };
    let workflows = file
        .workflows
        .into_iter()
        .filter(|w| !w.domain.is_empty())
        .map(|w| Workflow {
            steps: w
                .steps
                .iter()
                .filter_map(|line| {
                    let (kind, target) = verb(line)?;
                    let mut step = WorkflowStep::new(kind, target.as_deref());
                    step.repeat = line.ends_with("(repeat as needed)");
                    Some(step)
                })
                .collect(),
            name: w.name,
            trigger: w.trigger,
            domain: w.domain,
            success_count: w.success_count,
        })
        .collect();
    Ok(workflows)
}

/// One action as a reusable step on `domain`, or `None` for actions not
/// worth repeating (observation, waiting, state notes, failures). Typed
/// text, URLs' queries and other sites' URLs are left out: page text and
/// what the model typed never become part of a workflow.
fn describe(record: &ActionRecord, domain: &str) -> Option<WorkflowStep> {
    if record.blocked.is_some() || !record.execution.ok {
        return None;
    }
    let target = record
        .execution
        .effect
        .as_ref()
        .and_then(|e| e.target.as_ref());
    let element = target.map(|t| {
        let role = t.role.as_deref().unwrap_or(&t.tag);
        let name = t.name.as_deref().map(|n| sanitize(n, MAX_NAME_CHARS));
        match name.filter(|n| !n.is_empty()) {
            Some(n) => format!("{role} {n}"),
            None => role.to_owned(),
        }
    });
    let kind = record.call.action.kind();
    let step = |target: Option<&str>| Some(WorkflowStep::new(kind, target));
    match &record.call.action {
        Action::Click { .. } | Action::DoubleClick { .. } | Action::TripleClick { .. } => {
            step(element.as_deref())
        }
        // Into the field that had focus; never the text.
        Action::Type { .. } => step(
            record
                .execution
                .effect
                .as_ref()
                .and_then(|e| e.focus.as_ref().or(e.target.as_ref()))
                .and_then(|f| f.role.as_deref().or(Some(f.tag.as_str()))),
        ),
        Action::KeyPress { keys } => step(Some(&keys.join("+"))),
        Action::Goto { url } => {
            let url = Url::parse(url).ok()?;
            let same_site = site_of(url.as_str()).is_some_and(|s| s == domain);
            step(same_site.then(|| url.path()))
        }
        Action::Back | Action::Forward | Action::Drag { .. } => step(None),
        Action::Scroll { direction, .. } => step(Some(match direction {
            ScrollDirection::Up => "up",
            ScrollDirection::Down => "down",
            ScrollDirection::Left => "left",
            ScrollDirection::Right => "right",
        })),
        Action::Terminate {
            status: TerminateStatus::Success,
            ..
        } => step(None),
        _ => None,
    }
}

/// `text` reduced to letters, digits, spaces and `/._-+`, whitespace
/// collapsed, cut at `max` characters: nothing that can quote, format or
/// instruct.
fn sanitize(text: &str, max: usize) -> String {
    let kept: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "/._-+".contains(c) {
                c
            } else {
                ' '
            }
        })
        .collect();
    let joined = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.chars().take(max).collect()
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

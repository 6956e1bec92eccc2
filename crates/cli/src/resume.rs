//! `lumen resume PATH`: continues a run saved in a trace folder.
//!
//! `lumen run` writes, into its trace folder, the session snapshot after
//! every completed step (`session.json`, so even a killed run can be
//! resumed) and what the run was asked to do (`options.json`: the task,
//! the model, the base URL and every run option, with secret values left
//! out: only the secrets' names and their sites are kept). `resume` reads
//! both, lays the config file and the flags it is given over the saved
//! options, reopens the page the run was on (when the policy allows it;
//! else the start URL; else a blank page) and goes on from the snapshot
//! through the same code path as `run`, into a new trace folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lumen::memory::SerializedHistory;
use lumen::safety::{PolicyConfig, PolicyDecision, Secrets, SessionPolicy};
use lumen::{RecordedEvent, RunOptions, StreamEvent};
use serde::{Deserialize, Serialize};

use crate::args::ResumeArgs;
use crate::config::{self, RunConfig};
use crate::exit::CliError;
use crate::trace;

/// The `options.json` format this build writes and the newest it reads.
const VERSION: u32 = 1;

/// What a run was asked to do: the trace's `options.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SavedRun {
    /// Format version ([`VERSION`]).
    version: u32,
    /// The task.
    instruction: String,
    /// The model (`provider/model`).
    model: String,
    /// The provider's base URL (left out when it carries credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_url: Option<String>,
    /// Every run option but the secrets (and a `cdpUrl` carrying
    /// credentials).
    #[serde(default)]
    options: RunOptions,
    /// The names of the run's secrets: resume needs them given again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secret_names: Vec<String>,
    /// The sites each secret may be typed on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    secret_domains: BTreeMap<String, Vec<String>>,
}

impl SavedRun {
    /// The saved form of a resolved run: secret values are dropped.
    pub(crate) fn of(config: &RunConfig, instruction: &str) -> Self {
        let mut options = config.options.clone();
        let secret_names = options
            .secrets
            .take()
            .map(|s| s.0.into_keys().collect())
            .unwrap_or_default();
        let secret_domains = options.secret_domains.take().unwrap_or_default();
        options.cdp_url = options.cdp_url.filter(|u| credential_free(u));
        Self {
            version: VERSION,
            instruction: instruction.to_owned(),
            model: config.model.clone(),
            base_url: config.base_url.clone().filter(|u| credential_free(u)),
            options,
            secret_names,
            secret_domains,
        }
    }

    /// Writes it atomically to `path`, any secret value that surfaced (in
    /// the task, say) replaced by its placeholder.
    pub(crate) fn write(&self, path: &Path, secrets: &Secrets) -> std::io::Result<()> {
        let mut value = serde_json::to_value(self).map_err(std::io::Error::other)?;
        secrets.redact_json(&mut value);
        let mut text = serde_json::to_vec_pretty(&value).map_err(std::io::Error::other)?;
        text.push(b'\n');
        lumen_trace::write_private(path, &text)
    }

    /// Reads `path`; a missing file is `None` (a trace from before
    /// `options.json`), a damaged or newer one an error naming the fix.
    fn load(path: &Path) -> Result<Option<Self>, CliError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(CliError::config(format!(
                    "cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        let bad = |why: String| {
            CliError::config(format!(
                "{} is not a run's options ({why}); delete it and give the task with \
                 --instruction and the options as flags",
                path.display()
            ))
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let version = value.get("version").and_then(serde_json::Value::as_u64);
        if let Some(v) = version
            && v > u64::from(VERSION)
        {
            return Err(CliError::config(format!(
                "{} is format version {v}, written by a newer Lumen; this build reads \
                 version {VERSION}. Upgrade Lumen to resume it",
                path.display()
            )));
        }
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| bad(e.to_string()))
    }
}

/// Whether `url` carries no credentials: no `user:password@` and no query
/// (where endpoints put tokens). Such a URL is not saved; resume takes it
/// as a flag again.
fn credential_free(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    !authority.contains('@') && !url.contains('?')
}

/// The folder and snapshot a `PATH` names.
#[derive(Debug)]
struct Located {
    dir: PathBuf,
    session: PathBuf,
}

/// A trace folder, the `session.json` in it, or the event log beside one.
fn locate(path: &Path) -> Result<Located, CliError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        CliError::config(format!(
            "no trace folder or session file at {}: {e}; pass the trace folder `lumen run` \
             printed (`trace: …`) or the {} in it",
            path.display(),
            trace::SESSION
        ))
    })?;
    let located = if meta.is_dir() {
        Located {
            dir: path.to_path_buf(),
            session: path.join(trace::SESSION),
        }
    } else {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let session = if path.file_name().is_some_and(|n| n == trace::EVENTS) {
            dir.join(trace::SESSION)
        } else {
            path.to_path_buf()
        };
        Located { dir, session }
    };
    if !located.session.is_file() {
        return Err(CliError::config(format!(
            "{} holds no {}: the run saved no completed step to resume from (a plan-only \
             run, or one stopped before its first step ended); start the task again with \
             `lumen run`",
            located.dir.display(),
            trace::SESSION
        )));
    }
    Ok(located)
}

/// What the event log says about the run.
#[derive(Debug, Default)]
struct Log {
    instruction: Option<String>,
    model: Option<String>,
    /// The last URL the run was on.
    last_url: Option<String>,
}

/// Reads the event log (missing: nothing known). Lines that do not parse
/// (a newer event, the torn last line of a killed run) are skipped.
fn read_log(path: &Path) -> Log {
    let mut log = Log::default();
    let Ok(text) = std::fs::read_to_string(path) else {
        return log;
    };
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<RecordedEvent>(line) else {
            continue;
        };
        match e.event {
            StreamEvent::RunStarted {
                instruction, model, ..
            } => {
                log.instruction.get_or_insert(instruction);
                log.model.get_or_insert(model);
            }
            StreamEvent::StepStarted { url, .. } => log.last_url = Some(url),
            StreamEvent::ActionResult { execution, .. } => {
                if let Some(url) = execution.effect.and_then(|e| e.url_after) {
                    log.last_url = Some(url);
                }
            }
            _ => {}
        }
    }
    log
}

/// The first of `candidates` the policy allows (a refused one is skipped
/// with a warning); `None` at `about:blank` or when none is allowed: the
/// run goes on from a blank page.
async fn reopen(
    policy: Option<&PolicyConfig>,
    candidates: [Option<String>; 2],
) -> Result<Option<String>, CliError> {
    let judge = SessionPolicy::new(&policy.cloned().unwrap_or_default())
        .map_err(|e| CliError::config(format!("the policy: {e}")))?;
    for candidate in candidates.into_iter().flatten() {
        if candidate == "about:blank" {
            break;
        }
        match judge.judge_resolved(&candidate).await {
            PolicyDecision::Allow => return Ok(Some(candidate)),
            PolicyDecision::Deny(d) => {
                eprintln!(
                    "{}",
                    crate::terminal::visible(&format!("not reopening {candidate}: {}", d.reason))
                );
            }
        }
    }
    Ok(None)
}

/// The saved secrets must be given again (by name); their saved sites
/// apply unless the flags scope them anew.
fn restore_secrets(options: &mut RunOptions, saved: &SavedRun) -> Result<(), CliError> {
    let given: Vec<&String> = options.secrets.iter().flat_map(|s| s.0.keys()).collect();
    let missing: Vec<&str> = saved
        .secret_names
        .iter()
        .filter(|n| !given.contains(n))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(CliError::config(format!(
            "the run used the secret(s) {}: their values are never saved, so give them \
             again, e.g. --secret {}=ENV_VAR (or --secrets-file)",
            missing.join(", "),
            missing[0]
        )));
    }
    let scopes = options.secret_domains.get_or_insert_with(BTreeMap::new);
    for (name, domains) in &saved.secret_domains {
        scopes
            .entry(name.clone())
            .or_insert_with(|| domains.clone());
    }
    if scopes.is_empty() {
        options.secret_domains = None;
    }
    options.check().map_err(|e| config::option_error(&e))
}

/// `lumen resume`.
pub(crate) async fn run(args: ResumeArgs) -> Result<u8, CliError> {
    let at = locate(&args.path)?;
    let snapshot = SerializedHistory::load(&at.session).map_err(|e| {
        let message = e.to_string();
        if message.contains("Upgrade Lumen") {
            CliError::config(format!("cannot resume: {message}"))
        } else {
            CliError::config(format!(
                "cannot resume: {message}; resume from another trace or start the task \
                 again with `lumen run`"
            ))
        }
    })?;
    let saved = SavedRun::load(&at.dir.join(trace::OPTIONS))?;
    let log = read_log(&at.dir.join(trace::EVENTS));
    let instruction = args
        .instruction
        .clone()
        .or_else(|| saved.as_ref().map(|s| s.instruction.clone()))
        .or_else(|| log.instruction.clone())
        .filter(|i| !i.trim().is_empty())
        .ok_or_else(|| {
            CliError::config(format!(
                "nothing in {} names the task (no {} and no run_started event); give it \
                 with --instruction",
                at.dir.display(),
                trace::OPTIONS
            ))
        })?;
    let mut base = saved
        .as_ref()
        .map(|s| s.options.clone())
        .unwrap_or_default();
    // The log names the model without its provider unless it was given
    // so; only a full `provider/model` name is taken from it.
    base.model = base
        .model
        .or_else(|| saved.as_ref().map(|s| s.model.clone()))
        .or_else(|| log.model.clone().filter(|m| m.contains('/')));
    let base_url = saved.as_ref().and_then(|s| s.base_url.clone());
    let mut config = RunConfig::resolve_over(&base, base_url, &args.options, |name| {
        std::env::var(name).ok()
    })?;
    if let Some(saved) = &saved {
        restore_secrets(&mut config.options, saved)?;
    }
    let start_url = match &args.options.url {
        // An explicit --url is opened as `run` opens it.
        Some(url) => Some(url.clone()),
        None => {
            reopen(
                config.options.policy.as_ref(),
                [log.last_url.clone(), config.options.start_url.clone()],
            )
            .await?
        }
    };
    crate::launch(
        &args.options,
        config,
        instruction,
        start_url,
        Some(snapshot),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_credentials_are_not_saved() {
        assert!(credential_free("https://api.example.com/v1"));
        assert!(credential_free("ws://127.0.0.1:9222/devtools/browser/abc"));
        assert!(!credential_free("wss://user:key@pool.example/"));
        assert!(!credential_free("wss://pool.example/?token=abc"));
    }

    #[test]
    fn a_torn_log_still_gives_the_task_and_the_last_url() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(trace::EVENTS);
        std::fs::write(
            &log,
            "{\"seq\":0,\"timestampMs\":1,\"type\":\"run_started\",\"instruction\":\"buy\",\
             \"model\":\"claude\",\"maxSteps\":3}\n\
             {\"seq\":1,\"timestampMs\":2,\"type\":\"step_started\",\"step\":0,\
             \"url\":\"http://127.0.0.1:1/a\"}\n{\"seq\":2,\"timesta",
        )
        .unwrap();
        let read = read_log(&log);
        assert_eq!(read.instruction.as_deref(), Some("buy"));
        assert_eq!(read.model.as_deref(), Some("claude"));
        assert_eq!(read.last_url.as_deref(), Some("http://127.0.0.1:1/a"));
    }
}

//! Running the `lumen` binary, scripting the mock model, and reading what a
//! run left behind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use lumen_test_support::FixtureServer;
use lumen_test_support::mock_provider::script::{AnthropicBlock, anthropic_turn};
use lumen_test_support::mock_provider::{MockProvider, Reply, Route};
use serde_json::{Value, json};

/// The API key the tests pass in the environment; it must never appear in
/// any artefact or output.
pub(crate) const API_KEY: &str = "sk-ant-test-KEY-d41d8cd98f00";
pub(crate) const MODEL: &str = "anthropic/claude-sonnet-4-6";

/// A fixture site, a mock provider and a scratch folder.
pub(crate) struct Env {
    pub(crate) site: FixtureServer,
    pub(crate) mock: MockProvider,
    pub(crate) dir: tempfile::TempDir,
}

impl Env {
    pub(crate) async fn new() -> Env {
        Env {
            site: FixtureServer::start().await.unwrap(),
            mock: lumen_test_support::mock_provider().await.unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn trace(&self) -> PathBuf {
        self.dir.path().join("trace")
    }

    /// Queues Anthropic turns, one per element.
    pub(crate) fn script(&self, turns: Vec<Reply>) {
        for t in turns {
            self.mock.push(Route::AnthropicMessages, t);
        }
    }

    /// `lumen run <instruction> --url <page>` against the mock, with the
    /// trace in `self.trace()` and `extra` flags.
    pub(crate) fn run_command(&self, page: &str, extra: &[&str]) -> tokio::process::Command {
        let mut cmd = lumen(self.dir.path());
        cmd.env("ANTHROPIC_API_KEY", API_KEY).args([
            "run",
            "Do the scripted task",
            "--url",
            &self.site.url(page),
            "--model",
            MODEL,
            "--base-url",
            &self.mock.base_url(),
            "--trace-dir",
        ]);
        cmd.arg(self.trace()).args(extra);
        cmd
    }

    pub(crate) async fn run(&self, page: &str, extra: &[&str]) -> Output {
        self.run_command(page, extra).output().await.unwrap()
    }
}

/// The binary, in `cwd`, with no provider keys inherited.
pub(crate) fn lumen(cwd: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lumen"));
    cmd.current_dir(cwd).kill_on_drop(true);
    for var in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn tool(turn: usize, name: &str, input: Value) -> AnthropicBlock {
    AnthropicBlock::ToolUse {
        id: format!("toolu_{turn}_0"),
        name: name.into(),
        input,
    }
}

pub(crate) fn navigate(turn: usize, url: &str) -> Reply {
    anthropic_turn(&[tool(turn, "navigate", json!({"url": url}))], 1000)
}

pub(crate) fn key(turn: usize, keys: &str) -> Reply {
    anthropic_turn(
        &[tool(
            turn,
            "computer",
            json!({"action": "key", "text": keys}),
        )],
        1000,
    )
}

pub(crate) fn type_text(turn: usize, text: &str) -> Reply {
    anthropic_turn(
        &[tool(
            turn,
            "computer",
            json!({"action": "type", "text": text}),
        )],
        1000,
    )
}

pub(crate) fn request_human(turn: usize, reason: &str) -> Reply {
    anthropic_turn(
        &[tool(turn, "request_human", json!({"reason": reason}))],
        1000,
    )
}

pub(crate) fn done(turn: usize, result: &str, status: &str) -> Reply {
    anthropic_turn(
        &[tool(
            turn,
            "task_complete",
            json!({"result": result, "status": status}),
        )],
        1000,
    )
}

pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file below `dir`, recursively.
pub(crate) fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The names of the files a complete trace holds, relative to the folder.
pub(crate) fn names(dir: &Path) -> BTreeSet<String> {
    files(dir)
        .iter()
        .map(|p| {
            p.strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect()
}

/// Asserts that `needle` occurs in no file below `dir` (binary included).
pub(crate) fn assert_absent(dir: &Path, needle: &str) {
    for f in files(dir) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "{needle:?} leaked into {}",
            f.display()
        );
    }
}

/// The trace's events.
pub(crate) fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The processes below `pid` (children, grandchildren…), from /proc.
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let ppid = after
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((p, ppid));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for (p, pp) in &parent_of {
            if *pp == parent && !found.contains(p) {
                found.push(*p);
            }
        }
        i += 1;
    }
    found.remove(0);
    found
}

/// Whether `pid` is still a live (non-zombie) process.
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

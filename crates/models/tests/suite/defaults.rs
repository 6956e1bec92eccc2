//! No default names a model that is gone: every `provider/model` string in
//! the engine's code (tests aside), its docs, the README and the Python
//! package is a model the registry knows and the provider still serves.
//! Defaults are such strings (summary models, the eval judge, the planner,
//! the verifier, the server's default model, the demo, doc examples), so a
//! retirement in the registry fails this test until every one has moved.

use std::path::{Path, PathBuf};

use lumen_models::registry::{self, Known, Status};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Files where a retired id is the point: the registry itself, and the
/// mock's protocol selector for `computer-use-preview` recordings (the
/// preview protocol's trajectories, served by the mock at its own URL).
const EXEMPT: &[&str] = &[
    "crates/models/src/registry.rs",
    "crates/mock/src/mock_provider/trajectory.rs",
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(
                name.as_str(),
                "tests" | "target" | "snapshots" | "node_modules"
            ) {
                files(&path, out);
            }
        } else if [".rs", ".md", ".py", ".pyi", ".toml"]
            .iter()
            .any(|ext| name.ends_with(ext))
            && !name.ends_with("_tests.rs")
        {
            out.push(path);
        }
    }
}

/// The text of a source file up to its test module.
fn non_test(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// Every `anthropic/…`, `openai/…`, `google/…` or `gemini/…` model string.
fn model_strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for prefix in ["anthropic/", "openai/", "google/", "gemini/"] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().next_back();
            let tail = &rest[at + prefix.len()..];
            let raw: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
                .collect();
            // A pattern (`anthropic/claude-haiku-*`) names no one model.
            let pattern = tail[raw.len()..].starts_with('*');
            let id = raw.trim_end_matches(['.', '-']).to_owned();
            // `google/genai`, URLs and paths are not model strings.
            let model_like = ["claude-", "gpt-", "gemini-", "computer-use"]
                .iter()
                .any(|p| id.starts_with(p));
            if model_like
                && !pattern
                && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '/')
            {
                out.push(format!("{prefix}{id}"));
            }
            rest = &tail[raw.len()..];
        }
    }
    out
}

#[test]
fn every_default_and_example_names_a_live_model() {
    let root = workspace();
    let mut paths = Vec::new();
    for dir in ["crates", "docs", "bindings", "xtask"] {
        files(&root.join(dir), &mut paths);
    }
    paths.push(root.join("README.md"));
    let today = registry::today();
    let mut checked = 0;
    let mut problems = Vec::new();
    for path in paths {
        let relative = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if EXEMPT.contains(&relative.as_str()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let text = if relative.ends_with(".rs") {
            non_test(&text)
        } else {
            &text
        };
        for model in model_strings(text) {
            checked += 1;
            let (provider, id) = registry::split_model(&model);
            let found = registry::lookup(provider, id);
            if let Some(retired) = registry::retirement_on(&model, &today) {
                problems.push(format!("{relative}: {model}: {retired}"));
            } else if let Status::Deprecated {
                shutdown,
                replacement,
                ..
            } = found.spec.status
                && found.known == Known::Exact
            {
                problems.push(format!(
                    "{relative}: {model} shuts down {shutdown}: use {replacement}"
                ));
            } else if found.known != Known::Exact {
                problems.push(format!("{relative}: {model} is not in the registry"));
            }
        }
    }
    assert!(
        checked > 20,
        "found only {checked} model strings: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scan_finds_model_strings_and_nothing_else() {
    assert_eq!(
        model_strings("use `openai/gpt-5.4-mini`, not google/genai or x/openai/gpt-5."),
        ["openai/gpt-5.4-mini"]
    );
    assert_eq!(
        model_strings(r#"default_value = "google/gemini-2.5-flash")"#),
        ["google/gemini-2.5-flash"]
    );
    assert!(model_strings("--allow-model anthropic/claude-haiku-*").is_empty());
}

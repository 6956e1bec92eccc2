//! Configuration errors: one clear message naming the fix, exit 2, no
//! backtrace, and no trace folder left behind.

use super::harness::{MODEL, code, lumen, text};

async fn run_in(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = lumen(dir)
        .args(["run", "Do something", "--url", "http://127.0.0.1:9/"])
        .args(args)
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    assert!(
        !dir.join("lumen-traces").exists(),
        "a run that never started leaves no trace folder"
    );
    (code(&out), stderr)
}

#[tokio::test]
async fn a_missing_api_key_names_the_variable_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = run_in(dir.path(), &["--model", MODEL]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one message: {stderr}");
}

#[tokio::test]
async fn an_unknown_model_prefix_suggests_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = run_in(dir.path(), &["--model", "mistral/large-2"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("unknown model prefix \"mistral\""),
        "{stderr}"
    );
    assert!(stderr.contains("--base-url"), "{stderr}");
}

#[tokio::test]
async fn a_retired_model_is_refused_before_anything_starts_naming_its_replacement() {
    let dir = tempfile::tempdir().unwrap();
    for (model, replacement) in [
        ("anthropic/claude-sonnet-4-20250514", "claude-sonnet-4-6"),
        ("openai/computer-use-preview", "gpt-5.4-mini"),
        ("google/gemini-2.5-flash", "gemini-3.6-flash"),
    ] {
        let out = lumen(dir.path())
            .envs([
                ("ANTHROPIC_API_KEY", "k"),
                ("OPENAI_API_KEY", "k"),
                ("GEMINI_API_KEY", "k"),
            ])
            .env_remove("GOOGLE_GEMINI_BASE_URL")
            .args(["run", "Do something", "--url", "http://127.0.0.1:9/"])
            .args(["--model", model])
            .output()
            .await
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 2, "{model}: {stderr}");
        assert!(
            stderr.contains("was retired") && stderr.contains(&format!("use {replacement}")),
            "{model}: {stderr}"
        );
        assert!(!dir.path().join("lumen-traces").exists());
    }
}

#[tokio::test]
async fn lumen_models_says_what_a_model_runs_with_and_whether_it_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let show = |args: &'static [&'static str]| {
        let mut cmd = lumen(dir.path());
        cmd.arg("models").args(args);
        async move {
            let out = cmd.output().await.unwrap();
            assert_eq!(code(&out), 0, "{}", text(&out.stderr));
            text(&out.stdout)
        }
    };
    let table = show(&[]).await;
    assert!(table.contains("| `gpt-6.1-sol` |"), "{table}");
    assert!(
        table.contains("retired 2026-07-23 → `gpt-5.4-mini`"),
        "{table}"
    );
    let unknown = show(&["openai/gpt-6-pro"]).await;
    assert!(unknown.contains("registry: unknown"), "{unknown}");
    assert!(unknown.contains("price: not estimated"), "{unknown}");
    let known = show(&["anthropic/claude-opus-4-7"]).await;
    assert!(known.contains("registry: known"), "{known}");
    assert!(known.contains("price: $5 in / $25 out"), "{known}");
    let new = show(&["openai/gpt-6.1-sol"]).await;
    assert!(new.contains("unconfirmed: price, context"), "{new}");
}

#[tokio::test]
async fn a_bad_config_file_names_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lumen.toml");
    std::fs::write(&config, "modle = \"anthropic/claude-sonnet-4-6\"\n").unwrap();
    let (code, stderr) = run_in(dir.path(), &["--config", config.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("lumen.toml") && stderr.contains("modle"),
        "{stderr}"
    );
}

#[tokio::test]
async fn flags_override_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lumen.toml");
    // The file names a model with no key; the flag's model is just as
    // keyless but from another provider, and the error shows which won.
    std::fs::write(&config, "model = \"openai/gpt-5.4\"\nmax_steps = 5\n").unwrap();
    let path = config.to_str().unwrap();
    let (_, from_file) = run_in(dir.path(), &["--config", path]).await;
    assert!(from_file.contains("OPENAI_API_KEY"), "{from_file}");
    let (_, from_flag) = run_in(dir.path(), &["--config", path, "--model", MODEL]).await;
    assert!(from_flag.contains("ANTHROPIC_API_KEY"), "{from_flag}");
}

#[tokio::test]
async fn an_unreachable_cdp_url_says_how_to_start_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let out = lumen(dir.path())
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args([
            "run",
            "Do something",
            "--model",
            MODEL,
            "--cdp-url",
            "http://127.0.0.1:9",
        ])
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 2, "{stderr}");
    assert!(stderr.contains("--remote-debugging-port"), "{stderr}");
    assert!(!dir.path().join("lumen-traces").exists());
}

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
    std::fs::write(
        &config,
        "model = \"openai/computer-use-preview\"\nmax_steps = 5\n",
    )
    .unwrap();
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

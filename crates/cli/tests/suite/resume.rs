//! `lumen resume`: a run stopped part-way (out of steps, or killed) goes
//! on from its last completed step in a new trace folder, with the
//! earlier history, the step numbers continuing and the saved options
//! (flags overriding them); unusable paths are configuration errors
//! naming the fix.

use std::path::Path;
use std::time::Duration;

use lumen_test_support::mock_provider::{Reply, Route};
use serde_json::Value;

use super::harness::{API_KEY, Env, code, done, events, lumen, navigate, text};

/// `lumen resume <args>` against the mock (the base URL and model come
/// from the saved run), with only the API key in the environment.
fn resume(env: &Env, args: &[&str]) -> tokio::process::Command {
    let mut cmd = lumen(env.dir.path());
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .arg("resume")
        .args(args);
    cmd
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The `step_started` events of a trace: (step, url).
fn started(trace: &Path) -> Vec<(u64, String)> {
    events(trace)
        .into_iter()
        .filter(|e| e["type"] == "step_started")
        .map(|e| {
            (
                e["step"].as_u64().unwrap(),
                e["url"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_out_of_steps_resumes_with_its_history_and_a_flag_overrides_the_saved_budget() {
    let env = Env::new().await;
    let page2 = env.site.url("links/page2.html");
    env.script(vec![navigate(0, &page2)]);
    let out = env.run("links/page1.html", &["--max-steps", "1"]).await;
    assert_eq!(code(&out), 3, "stderr: {}", text(&out.stderr));
    let first = env.trace();
    let saved = json(&first.join("options.json"));
    assert_eq!(saved["instruction"], "Do the scripted task");
    assert_eq!(saved["model"], "anthropic/claude-sonnet-4-6");
    assert_eq!(saved["options"]["maxSteps"], 1);
    assert_eq!(json(&first.join("session.json"))["stepCount"], 1);

    env.script(vec![done(1, "Page 2 is open", "success")]);
    let second = env.dir.path().join("resumed");
    let out = resume(
        &env,
        &[
            first.to_str().unwrap(),
            "--max-steps",
            "5",
            "--trace-dir",
            second.to_str().unwrap(),
        ],
    )
    .output()
    .await
    .unwrap();
    // With the saved budget of 1 the resumed run would stop at once (the
    // step already taken counts): the flag won.
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("success after 2 steps"),
        "{}",
        text(&out.stdout)
    );
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 2);
    // The resumed run's first request carries the earlier turn and its
    // result.
    let body = requests[1].body.to_string();
    assert!(body.contains("toolu_0_0"), "{body}");
    assert!(body.contains("Do the scripted task"), "{body}");
    // The step numbers go on, on the page the run was on.
    assert_eq!(started(&second), vec![(1, page2.clone())]);
    assert_eq!(started(&first), vec![(0, env.site.url("links/page1.html"))]);
    assert_eq!(json(&second.join("options.json"))["options"]["maxSteps"], 5);
    assert_eq!(json(&second.join("session.json"))["stepCount"], 2);
    assert_eq!(json(&second.join("result.json"))["status"], "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_resumes_from_its_session_json_after_its_last_completed_step() {
    let env = Env::new().await;
    let page2 = env.site.url("links/page2.html");
    env.script(vec![navigate(0, &page2)]);
    // The second model call never answers: the process is killed there.
    env.mock
        .push(Route::AnthropicMessages, Reply::Stall(Vec::new()));
    let mut child = env.run_command("links/page1.html", &[]).spawn().unwrap();
    let mut waited = 0;
    while env.mock.requests().len() < 2 {
        assert!(waited < 600, "the run never reached its second step");
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    let pid = child.id().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let _ = child.wait().await;
    let first = env.trace();
    assert!(!first.join("result.json").exists(), "the run never ended");
    // Saved after step 1 completed, before it was killed.
    assert_eq!(json(&first.join("session.json"))["stepCount"], 1);

    env.script(vec![done(1, "Page 2 is open", "success")]);
    let second = env.dir.path().join("resumed");
    let session = first.join("session.json");
    let out = resume(
        &env,
        &[
            session.to_str().unwrap(),
            "--trace-dir",
            second.to_str().unwrap(),
        ],
    )
    .output()
    .await
    .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].body.to_string().contains("toolu_0_0"));
    assert_eq!(started(&second), vec![(1, page2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_policy_merges_into_the_saved_policy_instead_of_replacing_it() {
    let env = Env::new().await;
    env.script(vec![navigate(0, &env.site.url("links/page2.html"))]);
    let out = env
        .run(
            "links/page1.html",
            &[
                "--max-steps",
                "1",
                "--allow-domain",
                "127.0.0.1",
                "--block-domain",
                "ads.test",
            ],
        )
        .await;
    assert_eq!(code(&out), 3, "stderr: {}", text(&out.stderr));
    let first = env.trace();
    let config = env.dir.path().join("narrow.toml");
    std::fs::write(&config, "[policy]\nallowedSchemes = [\"data\"]\n").unwrap();

    env.script(vec![done(1, "Page 2 is open", "success")]);
    let second = env.dir.path().join("resumed");
    let out = resume(
        &env,
        &[
            first.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--max-steps",
            "5",
            "--trace-dir",
            second.to_str().unwrap(),
        ],
    )
    .output()
    .await
    .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let policy = &json(&second.join("options.json"))["options"]["policy"];
    // The saved keys stay; the file's key is laid over them.
    assert_eq!(policy["allowedDomains"], serde_json::json!(["127.0.0.1"]));
    assert_eq!(policy["blockedDomains"], serde_json::json!(["ads.test"]));
    assert_eq!(policy["allowedSchemes"], serde_json::json!(["data"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_needs_its_secrets_again() {
    let env = Env::new().await;
    env.script(vec![navigate(0, &env.site.url("form.html"))]);
    let out = env
        .run_command(
            "links/page1.html",
            &[
                "--max-steps",
                "1",
                "--secret",
                "PASSWORD=LUMEN_TEST_PASSWORD",
            ],
        )
        .env("LUMEN_TEST_PASSWORD", "hunter2-Zq9v7")
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 3, "stderr: {}", text(&out.stderr));
    let saved = std::fs::read_to_string(env.trace().join("options.json")).unwrap();
    assert!(!saved.contains("hunter2-Zq9v7"), "{saved}");
    assert!(saved.contains("PASSWORD"), "{saved}");
    let out = resume(&env, &[env.trace().to_str().unwrap(), "--max-steps", "3"])
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 2, "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--secret PASSWORD="),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(env.mock.requests().len(), 1, "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_paths_and_snapshots_exit_2_naming_the_fix() {
    let env = Env::new().await;
    let dir = env.dir.path();
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let corrupt = dir.join("corrupt");
    std::fs::create_dir(&corrupt).unwrap();
    std::fs::write(corrupt.join("session.json"), "{\"version\":1,\"wi").unwrap();
    let newer = dir.join("newer");
    std::fs::create_dir(&newer).unwrap();
    std::fs::write(
        newer.join("session.json"),
        "{\"version\":99,\"wire\":[],\"stepCount\":3}",
    )
    .unwrap();
    let untitled = dir.join("untitled");
    std::fs::create_dir(&untitled).unwrap();
    std::fs::write(
        untitled.join("session.json"),
        "{\"version\":1,\"wire\":[],\"stepCount\":0}",
    )
    .unwrap();
    let missing = dir.join("nope");
    for (path, needle) in [
        (&missing, "no trace folder or session file at"),
        (&empty, "holds no session.json"),
        (&corrupt, "corrupt"),
        (&newer, "Upgrade Lumen"),
        (&untitled, "--instruction"),
    ] {
        let out = resume(&env, &[path.to_str().unwrap()])
            .output()
            .await
            .unwrap();
        assert_eq!(code(&out), 2, "{}: {}", path.display(), text(&out.stderr));
        assert!(
            text(&out.stderr).contains(needle),
            "{needle}: {}",
            text(&out.stderr)
        );
    }
    assert!(env.mock.requests().is_empty());
}

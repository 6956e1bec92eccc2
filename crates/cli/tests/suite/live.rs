//! Live output: `--verbose` shows the model's reasoning and text as they
//! stream in, `--json` carries them as delta events, and neither reaches
//! the trace.

use lumen_test_support::mock_provider::script::{AnthropicBlock, anthropic_turn};
use serde_json::{Value, json};

use super::harness::{Env, assert_absent, code, done, events, key, text, type_text};

/// A turn that thinks `thinking`, says `says`, then presses Tab.
fn thinking_turn(thinking: &str, says: &str) -> lumen_test_support::mock_provider::Reply {
    anthropic_turn(
        &[
            AnthropicBlock::Thinking {
                text: thinking.into(),
                signature: "sig".into(),
            },
            AnthropicBlock::Text(says.into()),
            AnthropicBlock::ToolUse {
                id: "toolu_0_0".into(),
                name: "computer".into(),
                input: json!({"action": "key", "text": "Tab"}),
            },
        ],
        1000,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_shows_thinking_live_and_redacts_a_secret_split_across_pieces() {
    let env = Env::new().await;
    let secret = "hunter2-Zq9v7";
    // The mock splits each block in two halves: the secret is cut in the
    // middle, one half in each delta.
    let thinking = format!("Type {secret} there.");
    assert!(thinking.find(secret).unwrap() < thinking.len() / 2);
    assert!(thinking.find(secret).unwrap() + secret.len() > thinking.len() / 2);
    env.script(vec![
        thinking_turn(&thinking, "Moving to the field."),
        done(1, "Focused", "success"),
    ]);
    let out = env
        .run_command(
            "form.html",
            &["-v", "--secret", "PASSWORD=LUMEN_TEST_PASSWORD"],
        )
        .env("LUMEN_TEST_PASSWORD", secret)
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("    1 thinking: Type <secret:PASSWORD> there.\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("    1 says: Moving to the field.\n"),
        "{stdout}"
    );
    // Shown as it streams: before the step's action, not after the step.
    let thought = stdout.find("1 thinking:").unwrap();
    let action = stdout.find("1 → ").unwrap();
    assert!(thought < action, "{stdout}");
    for s in [&stdout, &text(&out.stderr)] {
        assert!(!s.contains(secret), "{s}");
    }
    assert_absent(&env.trace(), secret);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_streams_the_deltas_but_the_trace_keeps_only_the_complete_thinking() {
    let env = Env::new().await;
    env.script(vec![
        thinking_turn("I should move to the field.", "On it."),
        done(1, "Focused", "success"),
    ]);
    let out = env.run("form.html", &["--json"]).await;
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let stream: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let joined = |kind: &str| -> String {
        stream
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| e["text"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        stream
            .iter()
            .filter(|e| e["type"] == "reasoning_delta")
            .count()
            >= 2
    );
    assert_eq!(joined("reasoning_delta"), "I should move to the field.");
    assert_eq!(joined("assistant_delta"), "On it.");
    let logged = events(&env.trace());
    assert!(
        logged
            .iter()
            .all(|e| { !e["type"].as_str().is_some_and(|t| t.ends_with("_delta")) })
    );
    assert!(
        logged
            .iter()
            .any(|e| e["type"] == "thinking" && e["text"] == "I should move to the field.")
    );
    let without: Vec<&Value> = stream
        .iter()
        .filter(|e| !e["type"].as_str().is_some_and(|t| t.ends_with("_delta")))
        .collect();
    assert_eq!(without.len(), logged.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_surfaces_show_cdp_traffic_and_dispatch_on_stderr_without_the_typed_secret() {
    let env = Env::new().await;
    let secret = "hunter2-Zq9v7";
    env.script(vec![
        key(0, "Tab"),
        type_text(1, "<secret:PASSWORD>"),
        done(2, "Typed", "success"),
    ]);
    let out = env
        .run_command("form.html", &["--secret", "PASSWORD=LUMEN_TEST_PASSWORD"])
        .env("LUMEN_TEST_PASSWORD", secret)
        .env("LUMEN_LOG_CDP", "1")
        .env("LUMEN_LOG_ACTIONS", "1")
        .env_remove("LUMEN_LOG")
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let cdp: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("lumen::cdp"))
        .collect();
    // Commands and their answers on the wire, the tab's own included.
    assert!(
        cdp.iter()
            .any(|l| l.contains("→ command") && l.contains("Input.dispatchKeyEvent")),
        "{stderr}"
    );
    assert!(
        cdp.iter()
            .any(|l| l.contains("← response") && l.contains("Page.captureScreenshot")),
        "{stderr}"
    );
    // Events too (chromiumoxide's, as the tab's tracker sees them), the
    // browser's included.
    for event in ["Page.loadEventFired", "Target.targetCreated"] {
        assert!(
            cdp.iter()
                .any(|l| l.contains("← event") && l.contains(event)),
            "{event}: {stderr}"
        );
    }
    // Screenshots are cut, typed text is never in clear.
    assert!(cdp.iter().all(|l| l.len() < 2_000), "a line was not cut");
    assert!(!stderr.contains(secret), "{stderr}");
    assert!(
        cdp.iter()
            .any(|l| l.contains("Input.dispatchKeyEvent") && l.contains("<1 chars>")),
        "{stderr}"
    );
    // The action surface: the dispatch with its timing.
    assert!(
        stderr.lines().any(|l| l.contains("lumen::actions")
            && l.contains("action=\"keyPress\"")
            && l.contains("ms=")),
        "{stderr}"
    );
    // Surfaces not asked for stay silent, and so does everything else.
    assert!(
        !stderr.contains("lumen::loop") && !stderr.contains("lumen::browser"),
        "{stderr}"
    );
    assert!(!stderr.contains(" INFO "), "{stderr}");

    // Without the switches, no log at all.
    let env = Env::new().await;
    env.script(vec![done(0, "Nothing to do", "success")]);
    let out = env.run("form.html", &[]).await;
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("lumen::"),
        "{}",
        text(&out.stderr)
    );
}

//! `lumen run`: exit codes, the JSON event stream, the trace folder,
//! secrets, and Ctrl-C.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::script::{OpenAiItem, openai_turn};
use lumen_test_support::mock_provider::{Reply, Route};
use serde_json::Value;

use super::harness::{
    API_KEY, Env, alive, assert_absent, code, descendants, done, events, key, lumen, names,
    navigate, text, type_text,
};

/// Timestamps, durations and ports vary between runs; effect receipts carry
/// page timings. Everything else in the stream is pinned.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("effect");
            for (k, v) in map.iter_mut() {
                if matches!(k.as_str(), "timestampMs" | "durationMs" | "modelMs") {
                    *v = Value::from("[redacted]");
                } else {
                    normalize(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::String(s) => {
            if let Some(at) = s.find("127.0.0.1:") {
                let rest = &s[at + 10..];
                let digits = rest.chars().take_while(char::is_ascii_digit).count();
                *s = format!("{}127.0.0.1:[port]{}", &s[..at], &rest[digits..]);
            }
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_run_exits_0_streams_json_events_and_writes_a_complete_trace() {
    let env = Env::new().await;
    let page2 = env.site.url("links/page2.html");
    env.script(vec![
        navigate(0, &page2),
        done(1, "Page 2 is open", "success"),
    ]);
    let out = env.run("links/page1.html", &["--json"]).await;
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));

    let mut stream: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The stream is the same log as the trace's events.jsonl.
    assert_eq!(stream.len(), events(&env.trace()).len());
    stream.iter_mut().for_each(normalize);
    insta::assert_json_snapshot!("success_events", stream);

    let trace = env.trace();
    let names = names(&trace);
    for f in [
        "events.jsonl",
        "report.html",
        "result.json",
        "run.gif",
        "session.json",
        "screenshots/step-001.jpg",
        "screenshots/step-002.jpg",
    ] {
        assert!(names.contains(f), "{f} missing from {names:?}");
    }
    // Screenshots, pages and what was typed: the owner's alone.
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&trace), 0o700);
        assert_eq!(mode(&trace.join("screenshots")), 0o700);
        for f in &names {
            assert_eq!(mode(&trace.join(f)), 0o600, "{f}");
        }
    }
    let gif = std::fs::read(trace.join("run.gif")).unwrap();
    assert!(gif.starts_with(b"GIF89a"), "run.gif is a GIF");
    let result: Value =
        serde_json::from_slice(&std::fs::read(trace.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["status"], "success");
    assert_eq!(result["result"], "Page 2 is open");
    assert_absent(&trace, API_KEY);
    assert!(!text(&out.stdout).contains(API_KEY) && !text(&out.stderr).contains(API_KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_the_model_gives_up_on_exits_1() {
    let env = Env::new().await;
    env.script(vec![done(0, "The page has no such button", "failure")]);
    let out = env.run("links/page1.html", &[]).await;
    assert_eq!(code(&out), 1, "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("failed after 1 steps"), "{stdout}");
    assert!(stdout.contains("The page has no such button"), "{stdout}");
    assert!(env.trace().join("report.html").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_steps_exits_3() {
    let env = Env::new().await;
    let (p2, p3) = (
        env.site.url("links/page2.html"),
        env.site.url("links/page3.html"),
    );
    env.script(vec![navigate(0, &p2), navigate(1, &p3)]);
    let out = env.run("links/page1.html", &["--max-steps", "2"]).await;
    assert_eq!(code(&out), 3, "stderr: {}", text(&out.stderr));
    let last = events(&env.trace()).pop().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["status"].as_str()),
        (Some("done"), Some("maxSteps"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_typed_but_never_reach_output_or_any_artefact() {
    let env = Env::new().await;
    let secret = "hunter2-Zq9v7";
    // The model types the placeholder; then, as if it had read the value
    // back from the page, echoes it in its answer.
    env.script(vec![
        key(0, "Tab"),
        type_text(1, "<secret:PASSWORD>"),
        done(2, &format!("Typed {secret} into the name field"), "success"),
    ]);
    let out = env
        .run_command("form.html", &["--secret", "PASSWORD=LUMEN_TEST_PASSWORD"])
        .env("LUMEN_TEST_PASSWORD", secret)
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let trace = env.trace();
    assert_absent(&trace, secret);
    assert_absent(&trace, API_KEY);
    for stream in [&out.stdout, &out.stderr] {
        let s = text(stream);
        assert!(!s.contains(secret) && !s.contains(API_KEY), "{s}");
    }
    // The secret reached the page, and only the page.
    let typed = events(&trace).into_iter().any(|e| {
        e["type"] == "action_result" && e["call"]["action"]["text"] == "<secret:PASSWORD>"
    });
    assert!(typed, "the placeholder was typed");
    // (Whether the model's requests are clean is the loop's business and
    // is tested there; this test is about what the CLI writes and prints.)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_closes_chromium_and_leaves_a_complete_trace() {
    let env = Env::new().await;
    // The model never answers: the run sits in a model request.
    env.mock
        .push(Route::AnthropicMessages, Reply::Stall(Vec::new()));
    let child = env
        .run_command("links/page1.html", &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut waited = 0;
    while env.mock.requests().is_empty() {
        assert!(waited < 600, "the run never reached the model");
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    let browser = descendants(pid);
    assert!(!browser.is_empty(), "a Chromium runs under lumen");
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(code(&out), 130, "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("■ cancelled after 0 steps"), "{stdout}");
    // Chromium is closed before lumen exits; the browser crate's watchdog
    // shell notices the exit through its pipe a moment later. Allow it a
    // generous while to go, then name whatever is left.
    let mut left: Vec<u32> = browser.clone();
    for _ in 0..300 {
        left.retain(|p| alive(*p));
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let described: Vec<String> = left
        .iter()
        .map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            format!("{p}: {}", String::from_utf8_lossy(&cmd).replace('\0', " "))
        })
        .collect();
    assert_eq!(described, Vec::<String>::new(), "processes left behind");
    let trace = env.trace();
    let last = events(&trace).pop().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["status"].as_str()),
        (Some("done"), Some("cancelled"))
    );
    let names = names(&trace);
    for f in [
        "report.html",
        "result.json",
        "session.json",
        "screenshots/step-001.jpg",
    ] {
        assert!(names.contains(f), "{f} missing from {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_action_is_shown_live_and_highlighted_in_the_report() {
    let env = Env::new().await;
    let forbidden = env.site.cross_origin_url("links/page2.html");
    env.script(vec![
        navigate(0, &forbidden),
        done(1, "page 2 is off limits", "success"),
    ]);
    let out = env
        .run(
            "links/page1.html",
            &["--block-domain", "localhost", "--no-gif"],
        )
        .await;
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("⛔ blocked go to"), "{stdout}");
    let report = std::fs::read_to_string(env.trace().join("report.html")).unwrap();
    assert_eq!(
        report.matches("<section class=\"step problem\"").count(),
        1,
        "step 1 is flagged"
    );
    assert_eq!(report.matches("<li class=\"action blocked\">").count(), 1);
    assert!(
        report.contains("stroke-dasharray") || report.contains("go to"),
        "drawn or listed"
    );
    assert!(!env.trace().join("run.gif").exists(), "--no-gif");
}

/// `--max-tokens` counts every model call and stops the run before the
/// next one: each scripted turn costs 1001 tokens, so a budget of 1500 lets
/// two calls through and stops before the third, with exit code 6, the
/// `budgetExceeded` status and the figures in the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_budget_stops_the_run_with_exit_6_and_the_budget_status() {
    let env = Env::new().await;
    let (p2, p3) = (
        env.site.url("links/page2.html"),
        env.site.url("links/page3.html"),
    );
    env.script(vec![navigate(0, &p2), navigate(1, &p3), navigate(2, &p2)]);
    let out = env.run("links/page1.html", &["--max-tokens", "1500"]).await;
    assert_eq!(code(&out), 6, "stderr: {}", text(&out.stderr));
    assert_eq!(env.mock.requests().len(), 2, "no third model call");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("stopped by its budget after 2 steps"),
        "{stdout}"
    );
    assert!(stdout.contains("token budget of 1500 tokens"), "{stdout}");
    let last = events(&env.trace()).pop().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["status"].as_str()),
        (Some("done"), Some("budgetExceeded"))
    );
    let result: Value =
        serde_json::from_slice(&std::fs::read(env.trace().join("result.json")).unwrap()).unwrap();
    assert_eq!(result["status"], "budgetExceeded");
    assert_eq!(result["usageBySource"]["main"]["inputTokens"], 2000);
    assert!(
        result["costUsd"].as_f64().is_some_and(|c| c > 0.0),
        "{result}"
    );
}

/// A new version of a known family runs with its family's nearest rules,
/// but is never priced as that other model: the run warns, and
/// `result.json` says why it has no cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_registry_does_not_name_runs_unpriced_and_says_so() {
    let env = Env::new().await;
    env.script(vec![done(0, "Nothing to do", "success")]);
    let out = lumen(env.dir.path())
        .env("ANTHROPIC_API_KEY", API_KEY)
        .args(["run", "Do the scripted task", "--url"])
        .arg(env.site.url("links/page1.html"))
        .args(["--model", "anthropic/claude-sonnet-4-7", "--base-url"])
        .arg(env.mock.base_url())
        .arg("--trace-dir")
        .arg(env.trace())
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "stderr: {stderr}");
    assert!(
        stderr.contains("claude-sonnet-4-7 is not in Lumen's model registry")
            && stderr.contains("rules of claude-sonnet-4-6")
            && stderr.contains("not estimated"),
        "{stderr}"
    );
    let requests = env.mock.requests();
    assert_eq!(requests[0].body["model"], "claude-sonnet-4-7");
    let result: Value =
        serde_json::from_slice(&std::fs::read(env.trace().join("result.json")).unwrap()).unwrap();
    assert!(result.get("costUsd").is_none(), "{result}");
    assert!(
        result["costNote"]
            .as_str()
            .is_some_and(|n| n.contains("not estimated")),
        "{result}"
    );
}

/// The model answers a step, then is gone (404): the run goes on on the
/// fallback, another provider, with the whole history in that provider's
/// own wire format; the switch is an event, a progress line and a line in
/// the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_is_gone_hands_the_run_to_its_fallback_on_another_provider() {
    let env = Env::new().await;
    let openai = lumen_test_support::mock_provider().await.unwrap();
    env.script(vec![
        navigate(0, &env.site.url("links/page2.html")),
        Reply::error(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "model: claude-sonnet-4-6",
            None,
        ),
    ]);
    openai.push(
        Route::OpenAiResponses,
        openai_turn(
            &[OpenAiItem::FunctionCall {
                call_id: "call_fb".into(),
                name: "task_complete".into(),
                arguments: serde_json::json!({"result": "Finished on the fallback", "status": "success"}),
            }],
            800,
        ),
    );
    let out = env
        .run_command("links/page1.html", &["--fallback-model", "openai/gpt-5.4"])
        .env("OPENAI_API_KEY", "sk-openai-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", openai.base_url()))
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "stdout: {stdout}\nstderr: {stderr}");
    let switched = "switched from anthropic/claude-sonnet-4-6 to openai/gpt-5.4";
    assert!(
        stdout.contains(switched) || stderr.contains(switched),
        "{stdout}\n{stderr}"
    );
    // The fallback got the run so far as OpenAI input (checked against the
    // SDK's types by the mock): the first step's call and its result, as
    // the adapter replays another provider's turns.
    let requests = openai.requests();
    assert_eq!(requests.len(), 1);
    let input = serde_json::to_string(&requests[0].body["input"]).unwrap();
    assert!(
        input.contains("[action toolu_0_0]") && input.contains("Result of `goto` (toolu_0_0): ok"),
        "the history reached the fallback"
    );
    let notice = events(&env.trace())
        .into_iter()
        .find(|e| e["type"] == "model_notice")
        .expect("a model_notice event");
    assert_eq!(
        (notice["step"].as_u64(), notice["notice"]["kind"].as_str()),
        (Some(1), Some("fallback"))
    );
    assert_eq!(notice["notice"]["to"], "openai/gpt-5.4");
    let report = std::fs::read_to_string(env.trace().join("report.html")).unwrap();
    assert!(report.contains(switched), "the report shows the switch");
}

/// A rate limit with a Retry-After is shown while the run waits; with
/// `--max-wait` below it, the call gives up instead of waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_before_a_retry_is_shown_and_max_wait_caps_it() {
    let env = Env::new().await;
    let limited = |secs| {
        Reply::error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            Some(secs),
        )
    };
    env.script(vec![limited(1), done(0, "Nothing to do", "success")]);
    let out = env.run("links/page1.html", &[]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("waiting 1.0s before retrying"),
        "{stdout}\n{stderr}"
    );
    let wait = events(&env.trace())
        .into_iter()
        .find(|e| e["type"] == "model_notice")
        .expect("a model_notice event");
    assert_eq!(wait["notice"]["kind"], "waiting");
    assert_eq!(
        (
            wait["notice"]["attempt"].as_u64(),
            wait["notice"]["waitMs"].as_u64()
        ),
        (Some(1), Some(1000))
    );

    // A 5 s Retry-After does not fit in a 2 s budget: no retry is made.
    let capped = Env::new().await;
    capped.script(vec![limited(5), done(0, "Nothing to do", "success")]);
    let out = capped.run("links/page1.html", &["--max-wait", "2"]).await;
    let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_ne!(code(&out), 0, "{shown}");
    assert!(shown.contains("gave up after 1 attempts"), "{shown}");
    assert_eq!(
        capped.mock.requests().len(),
        1,
        "no retry past the wait budget"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_flags_that_cannot_work_are_configuration_errors() {
    let env = Env::new().await;
    for (flags, needle) in [
        (
            &["--max-tokens", "0"][..],
            "--max-tokens must be at least 1",
        ),
        (&["--max-cost", "0"][..], "positive number of US dollars"),
        (
            &["--max-failures", "0"][..],
            "--max-failures must be at least 1",
        ),
        (
            &["--max-actions-per-turn", "0"][..],
            "--max-actions-per-turn must be from 1 to 1000",
        ),
    ] {
        let out = env.run("links/page1.html", flags).await;
        assert_eq!(code(&out), 2, "{flags:?}");
        assert!(text(&out.stderr).contains(needle), "{}", text(&out.stderr));
    }
    assert!(env.mock.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_url_and_screenshot_format_flags_take_effect_in_a_real_run() {
    let env = Env::new().await;
    let page2 = env.site.url("links/page2.html");
    env.script(vec![
        done(0, "too early", "success"),
        navigate(1, &page2),
        done(2, "on page 2", "success"),
    ]);
    let out = env
        .run(
            "links/page1.html",
            &[
                "--verify-url",
                r"page2\.html$",
                "--screenshot-format",
                "png",
                "--max-steps",
                "5",
            ],
        )
        .await;
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let bodies: Vec<String> = env
        .mock
        .requests()
        .into_iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(bodies.len(), 3, "the early finish was refused");
    assert!(
        bodies[1].contains("should be at a URL matching"),
        "{}",
        bodies[1]
    );
    assert!(
        bodies[0].contains("image/png"),
        "png screenshots reach the model"
    );
    assert!(!bodies[0].contains("image/jpeg"));
}

/// A bare OTLP/HTTP receiver on 127.0.0.1: keeps each request's first line
/// and body, answers 200 (keep-alive).
async fn otlp_receiver() -> (String, Arc<Mutex<Vec<(String, Vec<u8>)>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let kept = got.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        let mut chunk = [0u8; 8192];
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    while buf.len() < end + 4 + length {
                        let mut chunk = [0u8; 8192];
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body = buf[end + 4..end + 4 + length].to_vec();
                    let line = head.lines().next().unwrap_or_default().to_owned();
                    kept.lock().unwrap().push((line, body));
                    buf.drain(..end + 4 + length);
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if conn.write_all(ok).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_otlp_endpoint_in_the_environment_traces_the_run() {
    let (endpoint, got) = otlp_receiver().await;
    let env = Env::new().await;
    env.script(vec![done(0, "Nothing to do", "success")]);
    let out = env
        .run_command("links/page1.html", &[])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let got = got.lock().unwrap().clone();
    assert!(
        got.iter()
            .all(|(line, _)| line.starts_with("POST /v1/traces ")),
        "{:?}",
        got.iter().map(|(l, _)| l).collect::<Vec<_>>()
    );
    // Span names and attribute keys are plain strings in the protobuf.
    let all: Vec<u8> = got.into_iter().flat_map(|(_, body)| body).collect();
    let has = |needle: &str| all.windows(needle.len()).any(|w| w == needle.as_bytes());
    for needle in [
        "lumen.run",
        "lumen.step",
        "lumen.action",
        "gen_ai.request.model",
    ] {
        assert!(has(needle), "no {needle} in what was exported");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_with_cache_replays_the_saved_script_without_the_model() {
    let env = Env::new().await;
    let secret = "hunter2-Rr4c8";
    let cache = env.dir.path().join("scripts");
    let cache_flag = ["--cache", cache.to_str().unwrap()];
    let run = |extra: &[&str]| {
        let mut cmd = env.run_command("form.html", extra);
        cmd.args(cache_flag)
            .args(["--secret", "PASSWORD=LUMEN_TEST_PASSWORD"])
            .env("LUMEN_TEST_PASSWORD", secret);
        cmd
    };
    env.script(vec![
        key(0, "Tab"),
        type_text(1, "<secret:PASSWORD>"),
        done(2, "Typed the password", "success"),
    ]);
    let out = run(&[]).output().await.unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    assert_eq!(env.mock.requests().len(), 3);
    // The script keeps the placeholder, never the value.
    assert_absent(&cache, secret);
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);

    // Again, with no turn queued: a model call would fail the run.
    std::fs::rename(env.trace(), env.dir.path().join("first")).unwrap();
    let out = run(&["--json"]).output().await.unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    assert_eq!(env.mock.requests().len(), 3, "the rerun asked the model");
    assert!(text(&out.stdout).contains("Typed the password"));
    let ids: Vec<String> = events(&env.trace())
        .into_iter()
        .filter(|e| e["type"] == "action_result")
        .map(|e| e["call"]["id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(
        ids.iter().all(|id| id.starts_with("replay_")),
        "every action came from the script: {ids:?}"
    );
    assert_absent(&env.trace(), secret);
}

/// The model's final answer is printed with its escape sequences shown,
/// not sent to the terminal (a clipboard write, a screen clear).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_answer_cannot_drive_the_terminal() {
    let env = Env::new().await;
    env.script(vec![done(
        0,
        "\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2Jdone",
        "success",
    )]);
    let out = env.run("links/page1.html", &[]).await;
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    assert!(
        stdout.contains("\\x1b]52;c;ZXZpbA==\\x07\\x1b[2Jdone"),
        "{stdout}"
    );
}

/// A secret is typed only on the start URL's site unless the operator
/// widens it: a page that leads the model to another host gets nothing,
/// and the model is told why. `--secret-domain NAME='*'` widens it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_is_typed_only_on_the_start_sites_pages_by_default() {
    let secret = "hunter2-Zq9v7";
    // The site is served on 127.0.0.1; `localhost` is another host.
    for (flags, typed) in [
        (&[][..], false),
        (&["--secret-domain", "PASSWORD=*"][..], true),
    ] {
        let env = Env::new().await;
        let elsewhere = env.site.url("form.html").replace("127.0.0.1", "localhost");
        env.script(vec![
            navigate(0, &elsewhere),
            key(1, "Tab"),
            type_text(2, "<secret:PASSWORD>"),
            done(3, "done", "success"),
        ]);
        let mut args = vec!["--secret", "PASSWORD=LUMEN_TEST_PASSWORD"];
        args.extend_from_slice(flags);
        let out = env
            .run_command("form.html", &args)
            .env("LUMEN_TEST_PASSWORD", secret)
            .output()
            .await
            .unwrap();
        assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
        let result = events(&env.trace())
            .into_iter()
            .find(|e| {
                e["type"] == "action_result" && e["call"]["action"]["text"] == "<secret:PASSWORD>"
            })
            .expect("the typing was answered");
        assert_eq!(result["execution"]["ok"], typed, "{flags:?}: {result}");
        if !typed {
            let error = result["execution"]["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("may only be typed on 127.0.0.1") && error.contains("localhost"),
                "{error}"
            );
        }
    }
}

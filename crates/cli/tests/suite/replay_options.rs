//! `lumen replay` options: variables detected in a model's typing, and
//! `--max-retries`, `--skip-failures` and `--delay`.

use std::path::Path;
use std::time::{Duration, Instant};

use lumen_test_support::mock_provider::Route;
use lumen_test_support::{FixtureServer, fixtures_root};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, BufReader};

use super::harness::{API_KEY, MODEL, code, done, key, lumen, navigate, text, type_text};

/// Records `task` from `start` with the mock model playing `turns`; the
/// trace is `<work>/trace`.
async fn record(
    work: &Path,
    task: &str,
    start: &str,
    turns: Vec<lumen_test_support::mock_provider::Reply>,
) {
    let mock = lumen_test_support::mock_provider().await.unwrap();
    for t in turns {
        mock.push(Route::AnthropicMessages, t);
    }
    let out = lumen(work)
        .env("ANTHROPIC_API_KEY", API_KEY)
        .args(["run", task, "--url", start, "--model", MODEL])
        .args(["--base-url", &mock.base_url(), "--no-gif", "--trace-dir"])
        .arg(work.join("trace"))
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn with_status<'a>(lines: &'a [Value], status: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["status"] == status).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_the_model_typed_from_the_task_is_a_variable() {
    let site_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        site_dir.path().join("search.html"),
        "<!doctype html><html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">\
         <title>Search</title></head><body style=\"margin:0;font:20px sans-serif\">\
         <h1 style=\"font-size:64px;margin:30px\">Hotel search</h1>\
         <form action=\"results.html\" method=\"get\" style=\"margin:30px\">\
         <input id=\"q\" name=\"q\" autocomplete=\"off\" style=\"font-size:14px;width:160px\"></form>\
         <script>document.getElementById('q').focus()</script></body></html>",
    )
    .unwrap();
    std::fs::write(
        site_dir.path().join("results.html"),
        "<!doctype html><html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">\
         <title>Results</title></head><body style=\"margin:0\">\
         <h1 style=\"font-size:64px;margin:30px\">Results</h1></body></html>",
    )
    .unwrap();
    let site = FixtureServer::start_at(site_dir.path()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    record(
        work.path(),
        "Search for Paris hotels",
        &site.url("search.html"),
        vec![
            type_text(0, "Paris"),
            key(1, "Return"),
            done(2, "found hotels", "success"),
        ],
    )
    .await;
    let searched = |site: &FixtureServer| -> Vec<String> {
        site.requests()
            .into_iter()
            .filter(|r| r.path == "/results.html")
            .filter_map(|r| r.query)
            .collect()
    };
    assert_eq!(searched(&site), ["q=Paris"], "the recording searched Paris");
    site.clear_requests();

    let out = lumen(work.path())
        .args(["replay", "--json", "--var", "v1=Rome"])
        .arg(work.path().join("trace"))
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}\n{}", text(&out.stderr));
    let lines = json_lines(&stdout);
    assert_eq!(lines[0]["status"], "variables", "{stdout}");
    let v1 = &lines[0]["variables"][0];
    assert_eq!(
        (&v1["name"], &v1["recorded"], &v1["value"], &v1["steps"]),
        (
            &Value::from("v1"),
            &Value::from("Paris"),
            &Value::from("Rome"),
            &serde_json::json!([1])
        ),
        "{stdout}"
    );
    assert_eq!(lines.last().unwrap()["status"], "success", "{stdout}");
    assert_eq!(searched(&site), ["q=Rome"], "the replay searched Rome");

    // Human output lists the variable; unset, it keeps the recorded value.
    site.clear_requests();
    let out = lumen(work.path())
        .arg("replay")
        .arg(work.path().join("trace"))
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("v1 = \"Paris\" (from the task, typed at step 1)"),
        "{stdout}"
    );
    assert_eq!(searched(&site), ["q=Paris"]);

    // A name the trace does not have is a configuration error naming v1.
    let out = lumen(work.path())
        .args(["replay", "--var", "city=Rome"])
        .arg(work.path().join("trace"))
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 2, "{stderr}");
    assert!(stderr.contains("it has v1"), "{stderr}");
}

/// A site with `links/page1.html`, `links/page2.html` and `links/copy.html`
/// (page 2 again), and a trace that goes page 1 → page 2 → the copy, on
/// `localhost` (another origin of the same server).
async fn copy_trace(work: &Path) -> (tempfile::TempDir, FixtureServer) {
    let site_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site_dir.path().join("links")).unwrap();
    for page in ["links/page1.html", "links/page2.html"] {
        std::fs::copy(fixtures_root().join(page), site_dir.path().join(page)).unwrap();
    }
    std::fs::copy(
        fixtures_root().join("links/page2.html"),
        site_dir.path().join("links/copy.html"),
    )
    .unwrap();
    let site = FixtureServer::start_at(site_dir.path()).await.unwrap();
    record(
        work,
        "Open page 2, then its copy",
        &site.url("links/page1.html"),
        vec![
            navigate(0, &site.url("links/page2.html")),
            navigate(1, &site.cross_origin_url("links/copy.html")),
            done(2, "on the copy", "success"),
        ],
    )
    .await;
    site.clear_requests();
    (site_dir, site)
}

/// A loopback URL nothing listens on: navigating there fails.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/gone")
}

fn copy_requests(site: &FixtureServer) -> usize {
    site.requests()
        .iter()
        .filter(|r| r.path == "/links/copy.html")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_action_fails_or_is_skipped_and_the_exit_code_says_so() {
    let work = tempfile::tempdir().unwrap();
    let (_dir, site) = copy_trace(work.path()).await;
    // The copy now redirects to a dead address: step 2's goto fails, and
    // is tried again.
    site.redirect("/links/copy.html", &dead_url());

    let out = lumen(work.path())
        .args(["replay", "--json", "--max-retries", "1"])
        .arg(work.path().join("trace"))
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 1, "{stdout}\n{}", text(&out.stderr));
    let lines = json_lines(&stdout);
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["status"], &last["step"], &last["attempts"]),
        (&Value::from("failed"), &Value::from(2), &Value::from(2)),
        "{stdout}"
    );
    assert_eq!(with_status(&lines, "retrying").len(), 1, "{stdout}");
    assert_eq!(copy_requests(&site), 2, "tried twice");

    // Refused by the policy, step 2 is not retried; skipped, the replay
    // goes on: page 2 looks like its copy, so step 3 matches its recording.
    let policy = work.path().join("policy.toml");
    std::fs::write(&policy, "blockedDomains = [\"localhost\"]\n").unwrap();
    let out = lumen(work.path())
        .args([
            "replay",
            "--json",
            "--skip-failures",
            "--max-retries",
            "2",
            "--policy",
        ])
        .arg(&policy)
        .arg(work.path().join("trace"))
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 5, "{stdout}\n{}", text(&out.stderr));
    let lines = json_lines(&stdout);
    let skipped = with_status(&lines, "skipped");
    assert_eq!(skipped.len(), 1, "{stdout}");
    assert_eq!(
        (&skipped[0]["step"], &skipped[0]["attempts"]),
        (&Value::from(2), &Value::from(1)),
        "{stdout}"
    );
    assert!(
        skipped[0]["error"].as_str().unwrap().contains("polic"),
        "{stdout}"
    );
    assert!(with_status(&lines, "retrying").is_empty(), "{stdout}");
    assert!(
        lines.iter().any(|l| l["step"] == 3 && l["status"] == "ok"),
        "{stdout}"
    );
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["status"], &last["skipped"]),
        (&Value::from("partial"), &serde_json::json!([2])),
        "{stdout}"
    );

    // Human output says so too.
    let out = lumen(work.path())
        .args(["replay", "--skip-failures", "--policy"])
        .arg(&policy)
        .arg(work.path().join("trace"))
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 5, "{stdout}");
    assert!(stdout.contains("⤼ step 2 skipped"), "{stdout}");
    assert!(stdout.contains("skipped step 2"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_gets_past_a_passing_failure_and_delay_paces_the_steps() {
    let work = tempfile::tempdir().unwrap();
    let (_dir, site) = copy_trace(work.path()).await;
    site.redirect("/links/copy.html", &dead_url());

    let delay = 1200;
    let mut child = lumen(work.path())
        .args(["replay", "--json", "--max-retries", "3", "--delay"])
        .arg(delay.to_string())
        .arg(work.path().join("trace"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Each line of output with the moment it arrived.
    let stdout = child.stdout.take().unwrap();
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let mut out: Vec<(Instant, Value)> = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            out.push((Instant::now(), serde_json::from_str(&line).unwrap()));
        }
        out
    });
    // The first try of step 2 fails; the address comes back before the
    // retry (a pause of `--delay` later).
    let mut waited = 0;
    while copy_requests(&site) == 0 {
        assert!(waited < 3000, "step 2 never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    site.clear_faults();
    let out = child.wait_with_output().await.unwrap();
    let timed = reader.await.unwrap();
    let lines: Vec<Value> = timed.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(code(&out), 0, "{lines:?}\n{}", text(&out.stderr));
    let statuses: Vec<(&Value, &Value)> =
        lines.iter().map(|l| (&l["step"], &l["status"])).collect();
    let expected = [(1, "ok"), (2, "retrying"), (2, "ok"), (3, "ok")];
    assert_eq!(statuses.len(), expected.len() + 1, "{lines:?}");
    for (got, (step, status)) in statuses.iter().zip(expected) {
        assert_eq!(
            *got,
            (&Value::from(step), &Value::from(status)),
            "{lines:?}"
        );
    }
    assert_eq!(lines[1]["attempt"], 1, "{lines:?}");
    assert_eq!(lines.last().unwrap()["status"], "success", "{lines:?}");
    assert_eq!(copy_requests(&site), 2, "one failed try, one that worked");
    // `--delay` before step 2, before the retry and before step 3.
    let delay = Duration::from_millis(delay);
    for (before, after) in [(0, 1), (1, 2), (2, 3)] {
        let gap = timed[after].0 - timed[before].0;
        assert!(
            gap >= delay,
            "{gap:?} between lines {before} and {after}: {lines:?}"
        );
    }
}

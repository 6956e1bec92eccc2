//! `lumen replay`: a recorded run replays without the model, and a page
//! that changed since the recording stops the replay with a report.

use lumen_test_support::{FixtureServer, fixtures_root};

use super::harness::{API_KEY, MODEL, code, done, lumen, navigate, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_replays_and_a_changed_page_is_reported_as_a_divergence() {
    // A copy of two fixture pages that the test can change later.
    let site_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site_dir.path().join("links")).unwrap();
    for page in ["links/page1.html", "links/page2.html"] {
        std::fs::copy(fixtures_root().join(page), site_dir.path().join(page)).unwrap();
    }
    let site = FixtureServer::start_at(site_dir.path()).await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let page2 = site.url("links/page2.html");
    for reply in [navigate(0, &page2), done(1, "on page 2", "success")] {
        mock.push(
            lumen_test_support::mock_provider::Route::AnthropicMessages,
            reply,
        );
    }
    let work = tempfile::tempdir().unwrap();
    let trace = work.path().join("trace");
    let out = lumen(work.path())
        .env("ANTHROPIC_API_KEY", API_KEY)
        .args([
            "run",
            "Open page 2",
            "--url",
            &site.url("links/page1.html"),
            "--model",
            MODEL,
        ])
        .args(["--base-url", &mock.base_url(), "--no-gif", "--trace-dir"])
        .arg(&trace)
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let requests = mock.requests().len();

    let out = lumen(work.path())
        .arg("replay")
        .arg(&trace)
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        code(&out),
        0,
        "stdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    assert!(stdout.contains("replayed 2 steps"), "{stdout}");
    assert_eq!(
        mock.requests().len(),
        requests,
        "the replay never asked the model"
    );

    // Page 2 changes beyond recognition: the replay stops at step 2.
    std::fs::write(
        site_dir.path().join("links/page2.html"),
        "<!doctype html><body style=\"margin:0;background:#111;color:#fff\">\
         <h1 style=\"font-size:120px\">Site redesigned</h1>\
         <div style=\"height:300px;background:linear-gradient(90deg,#f00,#00f)\"></div></body>",
    )
    .unwrap();
    let out = lumen(work.path())
        .args(["replay", "--json"])
        .arg(&trace)
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        code(&out),
        4,
        "stdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["status"].as_str(), last["step"].as_u64()),
        (Some("diverged"), Some(2)),
        "{stdout}"
    );
    assert!(last["similarity"].as_f64().unwrap() < 0.92, "{stdout}");
    assert!(trace.join("replay/step-002-now.jpg").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heal_asks_the_model_for_the_diverged_step_only() {
    let site_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site_dir.path().join("links")).unwrap();
    for page in ["links/page1.html", "links/page2.html"] {
        std::fs::copy(fixtures_root().join(page), site_dir.path().join(page)).unwrap();
    }
    let site = FixtureServer::start_at(site_dir.path()).await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let page2 = site.url("links/page2.html");
    let route = lumen_test_support::mock_provider::Route::AnthropicMessages;
    for reply in [navigate(0, &page2), done(1, "on page 2", "success")] {
        mock.push(route, reply);
    }
    let work = tempfile::tempdir().unwrap();
    let trace = work.path().join("trace");
    let out = lumen(work.path())
        .env("ANTHROPIC_API_KEY", API_KEY)
        .args([
            "run",
            "Open page 2",
            "--url",
            &site.url("links/page1.html"),
            "--model",
            MODEL,
        ])
        .args(["--base-url", &mock.base_url(), "--no-gif", "--trace-dir"])
        .arg(&trace)
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));

    // The start page is redesigned; the model redoes step 1 only.
    std::fs::write(
        site_dir.path().join("links/page1.html"),
        "<!doctype html><body style=\"margin:0;background:#111;color:#fff\">\
         <h1 style=\"font-size:120px\">New start page</h1></body>",
    )
    .unwrap();
    mock.push(route, navigate(7, &page2));
    let before = mock.requests().len();
    let out = lumen(work.path())
        .env("ANTHROPIC_API_KEY", API_KEY)
        .args([
            "replay",
            "--heal",
            "--model",
            MODEL,
            "--base-url",
            &mock.base_url(),
        ])
        .arg(&trace)
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        code(&out),
        0,
        "stdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    assert!(stdout.contains("↻ step 1"), "{stdout}");
    assert!(stdout.contains("✓ step 2"), "{stdout}");
    assert_eq!(
        mock.requests().len(),
        before + 1,
        "one model call, for step 1"
    );
}

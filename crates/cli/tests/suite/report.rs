//! `lumen demo` end to end, and its report.html rendered in headless
//! Chromium.

use lumen::BrowserTab as _;
use lumen::browser::{CdpTab, LaunchOptions};
use lumen::{ImageFormat, ScreenshotOptions};
use lumen_test_support::FixtureServer;

use super::harness::{code, events, lumen, names, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_offline_and_its_report_renders_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("demo");
    let out = lumen(dir.path())
        .args(["demo", "--trace-dir"])
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
    assert!(stdout.contains("✓ success after 6 steps"), "{stdout}");
    assert!(stdout.contains("report.html"), "{stdout}");
    // Not only the run's word for it: the demo read the order back from the
    // bakery's page (its verifier would have rejected the finish otherwise).
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "The bakery received the order (read back from its page): \
             Ada Lovelace <ada@example.com>: \"One chocolate cake for Saturday, please.\""
        ),
        "{stderr}"
    );

    // The form really was sent: the last screenshot shows the page after it.
    let log = events(&trace);
    let clicks_and_types = log
        .iter()
        .filter(|e| e["type"] == "action_result" && e["execution"]["ok"] == true)
        .count();
    assert_eq!(
        clicks_and_types, 9,
        "5 clicks, 3 typed texts and the finish"
    );
    let names = names(&trace);
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("screenshots/"))
            .count(),
        6
    );

    // Open the report from a server, as a person would open the file.
    let site = FixtureServer::start_at(&trace).await.unwrap();
    let tab = CdpTab::launch(LaunchOptions::default()).await.unwrap();
    assert!(tab.goto(&site.url("report.html")).await.unwrap().ok);
    let counts = tab
        .evaluate(
            "[document.querySelectorAll('#timeline section.step').length, \
              document.querySelectorAll('section.step svg image').length, \
              document.querySelectorAll('g.mark.click').length, \
              document.querySelectorAll('g.mark.type').length, \
              document.getElementById('status').textContent, \
              document.getElementById('step-count').textContent, \
              document.querySelector('section.step svg image').getBoundingClientRect().width]",
        )
        .await
        .unwrap();
    assert_eq!(counts[0], 6, "one section per step: {counts}");
    assert_eq!(counts[1], 6, "every step shows its screenshot: {counts}");
    assert_eq!(counts[2], 5, "every click is drawn: {counts}");
    assert_eq!(counts[3], 3, "every typed text is drawn: {counts}");
    assert_eq!(counts[4], "success");
    assert_eq!(counts[5], "6");
    assert!(
        counts[6].as_f64().unwrap() > 300.0,
        "the screenshot is laid out: {counts}"
    );
    let shot = tab
        .screenshot(&ScreenshotOptions {
            format: ImageFormat::Png,
            ..ScreenshotOptions::default()
        })
        .await
        .unwrap();
    assert!(shot.image.data.len() > 10_000, "the report paints");
    tab.close().await.unwrap();
}

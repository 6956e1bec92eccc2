//! [`StartingTab`]: the blank page answered while Chromium starts, the
//! request filter in place before anything reaches the browser, and launch
//! failures. Chromium is held back by [`GatedChromium`], so "while it
//! starts" is a matter of order, not timing.

use std::sync::Arc;

use lumen_browser::{CdpTab, LaunchOptions, StartingTab};
use lumen_core::{
    BrowserTab, ErrorCode, ImageFormat, RequestFilter, RequestVerdict, ScreenshotOptions, Size,
};
use lumen_test_support::{FixtureServer, GatedChromium};

use super::common::launch_options;

fn gated(dir: &std::path::Path) -> (GatedChromium, StartingTab) {
    let chromium = GatedChromium::new(dir).unwrap();
    let tab = CdpTab::start(LaunchOptions {
        executable: Some(chromium.executable.clone()),
        ..launch_options(Default::default())
    })
    .unwrap();
    (chromium, tab)
}

fn rgb(image: &lumen_core::Image) -> image::RgbImage {
    image::load_from_memory(&image.data).unwrap().to_rgb8()
}

#[tokio::test]
async fn a_starting_browser_answers_for_its_blank_page_as_the_page_itself_would() {
    let dir = tempfile::tempdir().unwrap();
    let (chromium, tab) = gated(dir.path());
    let options = [
        ScreenshotOptions::default(),
        ScreenshotOptions {
            format: ImageFormat::Png,
            max_edge: Some(640),
            ..ScreenshotOptions::default()
        },
    ];
    let mut answered = Vec::new();
    for o in &options {
        answered.push(tab.screenshot(o).await.unwrap());
    }
    let (url, title, viewport) = (
        tab.url().await.unwrap(),
        tab.title().await.unwrap(),
        tab.viewport().await.unwrap(),
    );
    assert!(!tab.launched(), "answered before Chromium started");
    assert_eq!(tab.cursor(), None);

    chromium.open().unwrap();
    let real = tab.tab().await.unwrap();
    assert_eq!(url, real.url().await.unwrap());
    assert_eq!(title, real.title().await.unwrap());
    assert_eq!(viewport, real.viewport().await.unwrap());
    assert_eq!(viewport, Size::new(1280, 720));
    for (o, shot) in options.iter().zip(&answered) {
        let captured = real.screenshot(o).await.unwrap();
        assert_eq!(shot.image.format, captured.image.format);
        assert_eq!(shot.image.size(), captured.image.size());
        assert_eq!(shot.viewport, captured.viewport);
        assert_eq!(shot.scale, captured.scale);
        let (a, b) = (rgb(&shot.image), rgb(&captured.image));
        let diff = a
            .as_raw()
            .iter()
            .zip(b.as_raw())
            .map(|(x, y)| x.abs_diff(*y) as u64)
            .max()
            .unwrap();
        assert!(diff <= 4, "{o:?}: pixels differ by up to {diff}");
    }
    tab.close().await.unwrap();
}

#[tokio::test]
async fn once_it_acts_the_real_page_answers() {
    let site = FixtureServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (chromium, tab) = gated(dir.path());
    chromium.open().unwrap();
    // Sent while Chromium starts: it waits for the launch.
    let out = tab.goto(&site.url("counter.html")).await.unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(tab.url().await.unwrap(), site.url("counter.html"));
    let shot = tab.screenshot(&ScreenshotOptions::default()).await.unwrap();
    assert!(
        rgb(&shot.image)
            .pixels()
            .any(|p| p.0.iter().any(|&c| c < 128)),
        "the screenshot shows the page, not a blank one"
    );
    tab.close().await.unwrap();
}

/// Refuses any URL with `forbidden` in it.
struct Forbidden;

impl RequestFilter for Forbidden {
    fn judge(&self, url: &str) -> RequestVerdict {
        if url.contains("forbidden") {
            RequestVerdict::Deny {
                reason: "forbidden in this test".into(),
            }
        } else {
            RequestVerdict::Allow
        }
    }
}

#[tokio::test]
async fn a_filter_installed_while_starting_holds_before_the_first_request() {
    let site = FixtureServer::start().await.unwrap();
    let forbidden = site.url("forbidden.html");
    for filter in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (chromium, tab) = gated(dir.path());
        if filter {
            assert!(
                tab.install_request_filter(Arc::new(Forbidden))
                    .await
                    .unwrap()
            );
            assert!(!tab.launched());
        }
        let arrived = || {
            site.requests()
                .iter()
                .filter(|r| r.path == "/forbidden.html")
                .count()
        };
        let before = arrived();
        chromium.open().unwrap();
        let _ = tab.goto(&forbidden).await.unwrap();
        assert_eq!(arrived() > before, !filter, "filter installed: {filter}");
        tab.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_launch_that_fails_is_the_error_of_the_first_call_that_needs_the_browser() {
    let missing = CdpTab::start(LaunchOptions {
        executable: Some("/nonexistent/chromium".into()),
        ..LaunchOptions::default()
    })
    .unwrap_err();
    assert_eq!(missing.code(), ErrorCode::ConfigError, "{missing}");

    let dir = tempfile::tempdir().unwrap();
    let failing = dir.path().join("chromium-failing");
    std::fs::write(&failing, "#!/bin/sh\nexit 3\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&failing, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tab = CdpTab::start(LaunchOptions {
        executable: Some(failing),
        ..LaunchOptions::default()
    })
    .unwrap();
    let err = tab.goto("about:blank").await.unwrap_err();
    assert!(err.to_string().contains("exited"), "{err}");
    assert!(tab.launched());
    // Once the launch has failed, nothing is answered for a blank page.
    assert!(tab.url().await.is_err());
    tab.close().await.unwrap();
}

//! `cargo xtask bench browser`: lumen-browser against the raw CDP floor.
//!
//! Everything is measured in one run, on one Chromium and one connection,
//! with lumen-browser calls and their raw CDP equivalents interleaved so
//! both see the same machine load:
//! - screenshots (PNG and JPEG q80, 1280×720 and 1344×840): `screenshot()`
//!   against a bare `Page.captureScreenshot`;
//! - click and type round trips: `click()` / `type_text()` against the raw
//!   `Input.dispatchMouseEvent` pair / `Input.insertText`, with effect
//!   receipts off (the input path alone) and on (what the loop uses);
//! - settle time on an already-settled page and on `slow.html`.
//!
//! Pages come from `fixtures/sites` through lumen-mock's `FixtureServer`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use lumen_browser::{CdpTab, LaunchOptions};
use lumen_core::{
    BrowserTab, ClickOptions, ImageFormat, Point, ScreenshotOptions, SettleOptions, Size,
};
use lumen_mock::FixtureServer;
use serde_json::json;

/// Options of `cargo xtask bench browser`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// Samples per measurement (medians are reported).
    #[arg(long, default_value_t = 30)]
    samples: usize,
    /// The Chromium binary (default: LUMEN_CHROME, CHROME_PATH, the headless
    /// shell, then /usr/bin/chromium).
    #[arg(long)]
    chrome: Option<PathBuf>,
}

pub(crate) fn run(options: &Options) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(bench(options))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Row {
    what: String,
    lumen: Duration,
    raw: Option<Duration>,
}

fn print_rows(rows: &[Row]) {
    println!("| measurement | lumen-browser (ms) | raw CDP (ms) | ratio |");
    println!("|---|---:|---:|---:|");
    for r in rows {
        match r.raw {
            Some(raw) => println!(
                "| {} | {:.2} | {:.2} | {:.2}x |",
                r.what,
                ms(r.lumen),
                ms(raw),
                ms(r.lumen) / ms(raw).max(1e-6)
            ),
            None => println!("| {} | {:.2} | – | – |", r.what, ms(r.lumen)),
        }
    }
}

async fn bench(options: &Options) -> Result<()> {
    let n = options.samples.max(3);
    let site = FixtureServer::start()
        .await
        .context("starting the fixture server")?;
    let server = site.url("");
    let server = server.trim_end_matches('/');
    let launch = LaunchOptions {
        executable: options.chrome.clone(),
        ..LaunchOptions::default()
    };
    let tab = CdpTab::launch(launch).await.map_err(|e| anyhow!("{e}"))?;
    let result = measure(&tab, server, n).await;
    tab.close().await.map_err(|e| anyhow!("{e}"))?;
    let rows = result?;
    println!(
        "lumen-browser vs raw CDP, medians of {n} interleaved samples, one Chromium, one connection"
    );
    print_rows(&rows);
    Ok(())
}

async fn measure(tab: &CdpTab, base: &str, n: usize) -> Result<Vec<Row>> {
    let e = |e: lumen_core::LumenError| anyhow!("{e}");
    let mut rows = Vec::new();
    tab.goto(&format!("{base}/counter.html")).await.map_err(e)?;
    tab.settle(&SettleOptions::default()).await.map_err(e)?;

    for size in [Size::new(1280, 720), Size::new(1344, 840)] {
        tab.set_viewport(size, 1.0).await.map_err(e)?;
        for format in [ImageFormat::Png, ImageFormat::Jpeg] {
            let opts = ScreenshotOptions {
                format,
                quality: 80,
                ..ScreenshotOptions::default()
            };
            let mut raw_params = json!({ "format": format.extension().replace("jpg", "jpeg") });
            if format == ImageFormat::Jpeg {
                raw_params["quality"] = 80.into();
            }
            // Warm up both paths.
            tab.screenshot(&opts).await.map_err(e)?;
            tab.cdp("Page.captureScreenshot", raw_params.clone())
                .await
                .map_err(e)?;
            let (mut ours, mut raw) = (Vec::new(), Vec::new());
            // Alternate which goes first: captures are paced by compositor
            // frames (~16.7 ms), and a fixed order would favour one side.
            for i in 0..n {
                for ours_now in [i % 2 == 0, i % 2 == 1] {
                    let t = Instant::now();
                    if ours_now {
                        tab.screenshot(&opts).await.map_err(e)?;
                        ours.push(t.elapsed());
                    } else {
                        tab.cdp("Page.captureScreenshot", raw_params.clone())
                            .await
                            .map_err(e)?;
                        raw.push(t.elapsed());
                    }
                }
            }
            rows.push(Row {
                what: format!(
                    "screenshot {} {}x{}",
                    format.extension().to_uppercase().replace("JPG", "JPEG q80"),
                    size.width,
                    size.height
                ),
                lumen: median(ours),
                raw: Some(median(raw)),
            });
        }
    }
    tab.set_viewport(Size::new(1280, 720), 1.0)
        .await
        .map_err(e)?;

    // Clicks on the counter button; the pointer already rests there, so
    // both paths send exactly a press and a release.
    let at = Point::new(160, 120);
    let press = |kind: &str| json!({ "type": kind, "x": 160.0, "y": 120.0, "button": "left", "buttons": 1, "clickCount": 1 });
    for receipts in [false, true] {
        tab.set_receipts(receipts);
        tab.click(at, ClickOptions::default()).await.map_err(e)?;
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let t = Instant::now();
            tab.click(at, ClickOptions::default()).await.map_err(e)?;
            ours.push(t.elapsed());
            let t = Instant::now();
            tab.cdp("Input.dispatchMouseEvent", press("mousePressed"))
                .await
                .map_err(e)?;
            tab.cdp("Input.dispatchMouseEvent", press("mouseReleased"))
                .await
                .map_err(e)?;
            raw.push(t.elapsed());
        }
        rows.push(Row {
            what: format!(
                "click ({})",
                if receipts {
                    "with effect receipt"
                } else {
                    "receipts off"
                }
            ),
            lumen: median(ours),
            raw: Some(median(raw)),
        });
    }
    // Typing into the focused input.
    tab.evaluate("document.getElementById('keys').focus()")
        .await
        .map_err(e)?;
    for receipts in [false, true] {
        tab.set_receipts(receipts);
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let t = Instant::now();
            tab.type_text("hello").await.map_err(e)?;
            ours.push(t.elapsed());
            let t = Instant::now();
            tab.cdp("Input.insertText", json!({ "text": "hello" }))
                .await
                .map_err(e)?;
            raw.push(t.elapsed());
        }
        rows.push(Row {
            what: format!(
                "type 5 chars ({})",
                if receipts {
                    "with effect receipt"
                } else {
                    "receipts off"
                }
            ),
            lumen: median(ours),
            raw: Some(median(raw)),
        });
    }
    tab.set_receipts(true);

    // Settling an already-settled page.
    let mut settled = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        tab.settle(&SettleOptions::default()).await.map_err(e)?;
        settled.push(t.elapsed());
    }
    rows.push(Row {
        what: "settle, page already settled".into(),
        lumen: median(settled),
        raw: None,
    });
    // Settling after navigating to the slow page (content at ~1.5 s).
    let mut slow = Vec::new();
    for _ in 0..3 {
        tab.goto(&format!("{base}/index.html")).await.map_err(e)?;
        let t = Instant::now();
        tab.evaluate(&format!("location.href = '{base}/slow.html'"))
            .await
            .map_err(e)?;
        let report = tab
            .settle(&SettleOptions {
                expect_navigation: true,
                ..SettleOptions::default()
            })
            .await
            .map_err(e)?;
        slow.push(t.elapsed());
        let ready = tab.evaluate("window.lumen.ready").await.map_err(e)?;
        if ready != json!(true) || report.timed_out {
            return Err(anyhow!(
                "settle returned before slow.html was ready: {report:?}"
            ));
        }
    }
    rows.push(Row {
        what: "settle after navigating to slow.html (data at ~1500 ms)".into(),
        lumen: median(slow),
        raw: None,
    });
    Ok(rows)
}

//! Screenshots, viewport and device pixel ratio.

use lumen_browser::TabOptions;
use lumen_core::{
    BrowserTab, ClickOptions, ImageFormat, ImageScale, Point, Rect, ScreenshotOptions, Size,
};

use super::common::{env, env_with};

fn decode(shot: &lumen_core::Screenshot) -> image::RgbaImage {
    image::load_from_memory(&shot.image.data)
        .unwrap()
        .to_rgba8()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_png_jpeg_downscaled_and_with_cursor() {
    let e = env().await;
    e.open("dpr.html").await;
    let png = e
        .tab
        .screenshot(&ScreenshotOptions {
            format: ImageFormat::Png,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(png.image.size(), Size::new(1280, 720));
    assert_eq!(&png.image.data[1..4], b"PNG");
    assert_eq!(png.viewport, Size::new(1280, 720));
    assert_eq!(png.scale, ImageScale::IDENTITY);

    let low = e
        .tab
        .screenshot(&ScreenshotOptions {
            quality: 30,
            ..Default::default()
        })
        .await
        .unwrap();
    let high = e
        .tab
        .screenshot(&ScreenshotOptions {
            quality: 95,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(&low.image.data[..2], &[0xFF, 0xD8]);
    assert!(
        low.image.data.len() < high.image.data.len(),
        "quality has no effect"
    );

    let small = e
        .tab
        .screenshot(&ScreenshotOptions {
            max_edge: Some(640),
            format: ImageFormat::Png,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(small.image.size(), Size::new(640, 360));
    assert_eq!(decode(&small).dimensions(), (640, 360));
    assert_eq!(small.scale, ImageScale { x: 0.5, y: 0.5 });
    // The centre of cell C2 (150,150) is at (75,75) in the small image and
    // maps back exactly; clicking there hits C2.
    let p = small.to_viewport(75.0, 75.0);
    assert_eq!(p, Point::new(150, 150));
    e.tab.click(p, ClickOptions::default()).await.unwrap();
    assert_eq!(e.lumen("clicked.label").await, "C2");

    // Cursor overlay: a red dot where the pointer is now, only when asked.
    let plain = decode(
        &e.tab
            .screenshot(&ScreenshotOptions {
                format: ImageFormat::Png,
                ..Default::default()
            })
            .await
            .unwrap(),
    );
    let dotted = e
        .tab
        .screenshot(&ScreenshotOptions {
            format: ImageFormat::Png,
            cursor_overlay: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let dotted = decode(&dotted);
    assert_eq!(dotted.get_pixel(150, 150).0, [230, 30, 30, 255]);
    assert_ne!(plain.get_pixel(150, 150).0, [230, 30, 30, 255]);

    // A region comes back at device resolution with its own size.
    let region = e
        .tab
        .screenshot(&ScreenshotOptions {
            format: ImageFormat::Png,
            region: Some(Rect {
                x0: 100,
                y0: 60,
                x1: 300,
                y1: 180,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(region.image.size(), Size::new(200, 120));
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_land_on_screenshot_pixels_at_dpr_1_and_2() {
    let e = env().await;
    e.open("dpr.html").await;
    for dpr in [1.0, 2.0] {
        e.tab.set_viewport(Size::new(1000, 600), dpr).await.unwrap();
        assert_eq!(e.tab.viewport().await.unwrap(), Size::new(1000, 600));
        let shot = e
            .tab
            .screenshot(&ScreenshotOptions {
                format: ImageFormat::Png,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            shot.image.size(),
            Size::new((1000.0 * dpr) as u32, (600.0 * dpr) as u32)
        );
        assert_eq!(shot.scale, ImageScale { x: dpr, y: dpr });
        // Every cell centre, computed in screenshot pixels, clicks that cell.
        for r in 0..4 {
            for c in 0..4 {
                let (ix, iy) = ((c * 100 + 50) as f64 * dpr, (r * 60 + 30) as f64 * dpr);
                let p = shot.to_viewport(ix, iy);
                let out = e.tab.click(p, ClickOptions::default()).await.unwrap();
                assert!(out.ok);
                let label = format!("{}{}", (b'A' + r as u8) as char, c + 1);
                assert_eq!(e.lumen("clicked.label").await, label.as_str(), "dpr {dpr}");
                assert_eq!(e.lumen("clicked.offsetX").await, 50);
                assert_eq!(e.lumen("clicked.offsetY").await, 30);
            }
        }
        assert_eq!(e.lumen("dpr").await, dpr);
        assert_eq!(e.lumen("misses").await, 0);
    }
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewport_alignment_queries_the_real_size() {
    let e = env_with(TabOptions {
        viewport: Some(Size::new(1280, 720)),
        ..TabOptions::default()
    })
    .await;
    e.open("dpr.html").await;
    assert_eq!(
        e.tab.align_viewport(28, 1344).await.unwrap(),
        Size::new(1288, 728)
    );
    assert_eq!(e.tab.viewport().await.unwrap(), Size::new(1288, 728));
    e.tab.set_viewport(Size::new(1500, 900), 1.0).await.unwrap();
    assert_eq!(
        e.tab.align_viewport(56, 1344).await.unwrap(),
        Size::new(1344, 896)
    );
    assert!(e.tab.align_viewport(0, 1344).await.is_err());
    assert!(e.tab.set_viewport(Size::new(0, 10), 1.0).await.is_err());
    assert!(e.tab.set_viewport(Size::new(10, 10), 0.0).await.is_err());
    assert_eq!(
        e.tab.title().await.unwrap(),
        "Lumen fixtures: coordinate grid"
    );
    assert!(e.tab.url().await.unwrap().ends_with("/dpr.html"));
    e.close().await;
}

//! `zoom` on real Chromium: the region comes back rendered larger (up to
//! the model's image limits), its pixels are the region's, and the
//! Anthropic request carries it inside the zoom's tool result, once.

use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::memory::history::HistoryManager;
use lumen::models::anthropic::AnthropicAdapter;
use lumen::models::{AdapterOptions, ApiKey};
use lumen::perception::router::ActionRouter;
use lumen::{
    Action, ActionCall, AssistantTurn, BrowserTab, ImageFormat, Rect, ScreenshotOptions, Size,
    StepContext, ToolResult, WireRecord,
};
use lumen_test_support::FixtureServer;

fn rgba(image: &lumen::Image) -> image::RgbaImage {
    image::load_from_memory(&image.data).unwrap().to_rgba8()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zoom_shows_its_region_at_full_resolution_inside_its_tool_result() {
    let site = FixtureServer::start().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url("dpr.html")).await.unwrap().ok);
    let viewport = tab.viewport().await.unwrap();
    // Claude's older limits: 1568 px and about 1.18 MP.
    let capture = ScreenshotOptions {
        format: ImageFormat::Png,
        max_edge: Some(1568),
        max_pixels: Some(1_176_000),
        ..ScreenshotOptions::default()
    };
    let router = ActionRouter::new().with_capture(capture.clone());

    // Cell B2 spans (100,60)-(200,120): a 100x60 region, rendered 4x.
    let region = Rect {
        x0: 100,
        y0: 60,
        x1: 200,
        y1: 120,
    };
    let call = ActionCall::new("toolu_zoom", Action::Zoom { region });
    let exec = router.execute(&call, tab.as_ref(), viewport).await.unwrap();
    assert!(exec.ok, "{exec:?}");
    let image = exec.image.clone().expect("a zoom carries its image");
    assert_eq!(image.size(), Size::new(400, 240));
    // Its middle is the middle of B2, the same colour as B2 in a full capture.
    let full = tab.screenshot(&capture).await.unwrap();
    let zoomed = rgba(&image);
    let whole = rgba(&full.image);
    assert_eq!(zoomed.get_pixel(200, 60).0, whole.get_pixel(150, 75).0);
    assert_ne!(zoomed.get_pixel(200, 60).0, whole.get_pixel(250, 75).0);

    // A region past the viewport is clipped; one wholly outside is refused.
    let outside = Rect {
        x0: 5000,
        y0: 5000,
        x1: 5100,
        y1: 5100,
    };
    let refused = router
        .execute(
            &ActionCall::new("z2", Action::Zoom { region: outside }),
            tab.as_ref(),
            viewport,
        )
        .await
        .unwrap();
    assert!(!refused.ok && refused.image.is_none(), "{refused:?}");

    // The Anthropic request: the zoom's image inside its tool_result.
    let result = ToolResult {
        call_id: "toolu_zoom".into(),
        action: "zoom".into(),
        ok: true,
        error: None,
        hints: exec.hints.clone(),
        acknowledged_safety_checks: vec![],
        image: Some(image.clone()),
        output: None,
        download: None,
    };
    let mut history = HistoryManager::new(Default::default());
    history.push_screenshot(0, full.image.clone(), None);
    history.push_assistant(AssistantTurn {
        calls: vec![call],
        ..AssistantTurn::default()
    });
    history.push_tool_result(result);
    history.push_screenshot(1, full.image.clone(), None);
    let adapter = AnthropicAdapter::new(
        "claude-opus-4-7",
        AdapterOptions {
            api_key: Some(ApiKey::new("test-key-0123456789")),
            ..AdapterOptions::default()
        },
    )
    .unwrap();
    let body = |wire: &[WireRecord]| {
        adapter.request_body(
            &StepContext {
                step: 1,
                max_steps: 10,
                instruction: "read the grid",
                system_prompt: "",
                screenshot: &full,
                wire,
                state: None,
                url: "http://127.0.0.1/",
                temperature: None,
                cursor: None,
            },
            true,
        )
    };
    let sent = body(history.wire());
    let zoom_result = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap().iter())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_zoom")
        .expect("the zoom's tool result")
        .clone();
    let images: Vec<&serde_json::Value> = zoom_result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "image")
        .collect();
    assert_eq!(images[0]["source"]["data"], image.to_base64());

    // Once the model has answered, the zoom is not sent again.
    history.push_assistant(AssistantTurn::default());
    let later = body(history.wire()).to_string();
    assert!(!later.contains(&image.to_base64()));
    tab.close().await.unwrap();
}

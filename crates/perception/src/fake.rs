//! An in-memory `BrowserTab` for the loop's unit tests: it records every call
//! and answers from a script. Real-Chromium tests live with the facade, where
//! the browser crate may be used.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use lumen_core::browser::{FormField, ScrollOffset};
use lumen_core::{
    ActionOutcome, BrowserTab, ClickOptions, Image, ImageFormat, ImageScale, Modifiers,
    MouseButton, Point, Result, Screenshot, ScreenshotOptions, SettleOptions, SettleReport, Size,
};

#[derive(Debug, Default)]
pub(crate) struct FakeTab {
    pub(crate) calls: Mutex<Vec<String>>,
    pub(crate) url: Mutex<String>,
    pub(crate) fail_next: Mutex<Option<String>>,
    /// The page's scroll offset, moved only by `set_scroll_offset`.
    pub(crate) scroll: Mutex<ScrollOffset>,
    /// What `form_fields` answers.
    pub(crate) form: Mutex<Vec<FormField>>,
    /// What `read_console` answers (drained by the read).
    pub(crate) console: Mutex<Vec<String>>,
    /// A receipt the next click reports (and the URL it lands on).
    pub(crate) next_effect: Mutex<Option<lumen_core::EffectReceipt>>,
    /// After this many screenshots the page stops answering: screenshots
    /// and scripts fail as a hung CdpTab page's do (a script error, the
    /// browser still there).
    pub(crate) hang_after_shots: Mutex<Option<usize>>,
    shots: Mutex<usize>,
}

/// What a CdpTab call on a hung page fails with.
fn hung() -> lumen_core::LumenError {
    lumen_core::LumenError::Script {
        message: "Page.captureScreenshot: the page did not answer within 15.0s (busy or hung)"
            .into(),
    }
}

impl FakeTab {
    pub(crate) fn new(url: &str) -> Self {
        Self {
            url: Mutex::new(url.into()),
            ..Self::default()
        }
    }

    fn is_hung(&self) -> bool {
        self.hang_after_shots
            .lock()
            .unwrap()
            .is_some_and(|n| *self.shots.lock().unwrap() >= n)
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn log(&self, s: String) -> ActionOutcome {
        self.calls.lock().unwrap().push(s);
        match self.fail_next.lock().unwrap().take() {
            Some(e) => ActionOutcome::failed(e),
            None => ActionOutcome::ok(),
        }
    }
}

#[async_trait]
impl BrowserTab for FakeTab {
    async fn screenshot(&self, _: &ScreenshotOptions) -> Result<Screenshot> {
        if self.is_hung() {
            return Err(hung());
        }
        *self.shots.lock().unwrap() += 1;
        Ok(Screenshot {
            image: Image::new(ImageFormat::Png, 1280, 720, vec![1, 2, 3]),
            viewport: Size::new(1280, 720),
            scale: ImageScale::IDENTITY,
        })
    }
    async fn viewport(&self) -> Result<Size> {
        Ok(Size::new(1280, 720))
    }
    async fn set_viewport(&self, size: Size, dpr: f64) -> Result<()> {
        self.log(format!("viewport {}x{}@{dpr}", size.width, size.height));
        Ok(())
    }
    async fn url(&self) -> Result<String> {
        Ok(self.url.lock().unwrap().clone())
    }
    async fn title(&self) -> Result<String> {
        Ok("fake".into())
    }
    async fn focused_url(&self) -> Result<String> {
        self.url().await
    }
    fn cursor(&self) -> Option<Point> {
        None
    }
    async fn click(&self, at: Point, o: ClickOptions) -> Result<ActionOutcome> {
        let out = self.log(format!(
            "click {},{} {:?} x{} mods={}",
            at.x,
            at.y,
            o.button,
            o.click_count,
            o.modifiers.cdp_mask()
        ));
        Ok(match self.next_effect.lock().unwrap().take() {
            Some(effect) => {
                if let Some(to) = &effect.url_after {
                    *self.url.lock().unwrap() = to.clone();
                }
                out.with_effect(effect)
            }
            None => out,
        })
    }
    async fn hover(&self, at: Point) -> Result<ActionOutcome> {
        Ok(self.log(format!("hover {},{}", at.x, at.y)))
    }
    async fn drag(&self, from: Point, to: Point, path: &[Point]) -> Result<ActionOutcome> {
        Ok(self.log(format!(
            "drag {},{}->{},{} via {}",
            from.x,
            from.y,
            to.x,
            to.y,
            path.len()
        )))
    }
    async fn mouse_down(&self, at: Option<Point>, b: MouseButton) -> Result<ActionOutcome> {
        Ok(self.log(format!("down {at:?} {b:?}")))
    }
    async fn mouse_up(&self, at: Option<Point>, b: MouseButton) -> Result<ActionOutcome> {
        Ok(self.log(format!("up {at:?} {b:?}")))
    }
    async fn scroll(&self, at: Point, dx: f64, dy: f64, m: Modifiers) -> Result<ActionOutcome> {
        Ok(self.log(format!(
            "scroll {},{} by {dx},{dy} mods={}",
            at.x,
            at.y,
            m.cdp_mask()
        )))
    }
    async fn type_text(&self, text: &str) -> Result<ActionOutcome> {
        Ok(self.log(format!("type {text}")))
    }
    async fn key_press(&self, keys: &[String]) -> Result<ActionOutcome> {
        Ok(self.log(format!("key {}", keys.join("+"))))
    }
    async fn hold_key(&self, keys: &[String], d: Duration) -> Result<ActionOutcome> {
        Ok(self.log(format!("hold {} {}ms", keys.join("+"), d.as_millis())))
    }
    async fn goto(&self, url: &str) -> Result<ActionOutcome> {
        *self.url.lock().unwrap() = url.into();
        Ok(self.log(format!("goto {url}")))
    }
    async fn back(&self) -> Result<ActionOutcome> {
        Ok(self.log("back".into()))
    }
    /// Reports the navigation as done, the way `CdpTab` does after waiting
    /// for commit and load.
    async fn forward(&self) -> Result<ActionOutcome> {
        let out = self.log("forward".into());
        Ok(out.with_effect(lumen_core::EffectReceipt {
            navigated: true,
            ..Default::default()
        }))
    }
    async fn reload(&self) -> Result<ActionOutcome> {
        Ok(self.log("reload".into()))
    }
    async fn settle(&self, o: &SettleOptions) -> Result<SettleReport> {
        self.log(format!("settle nav={}", o.expect_navigation));
        Ok(SettleReport::default())
    }
    async fn evaluate(&self, expression: &str) -> Result<serde_json::Value> {
        self.log(format!("eval {expression}"));
        if self.is_hung() {
            return Err(hung());
        }
        Ok(serde_json::Value::from(0))
    }
    async fn read_console(&self) -> Result<Option<lumen_core::BufferedLines>> {
        Ok(Some(lumen_core::BufferedLines {
            lines: std::mem::take(&mut *self.console.lock().unwrap()),
            dropped: 2,
        }))
    }
    async fn form_fields(&self) -> Result<Option<Vec<FormField>>> {
        self.log("form fields".into());
        Ok(Some(self.form.lock().unwrap().clone()))
    }
    async fn scroll_offset(&self) -> Result<Option<ScrollOffset>> {
        Ok(Some(*self.scroll.lock().unwrap()))
    }
    async fn set_scroll_offset(&self, offset: ScrollOffset) -> Result<ActionOutcome> {
        *self.scroll.lock().unwrap() = offset;
        Ok(self.log(format!("scroll to {},{}", offset.x, offset.y)))
    }
    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

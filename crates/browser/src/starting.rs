//! [`StartingTab`]: a local Chromium that is still starting, usable as a
//! [`BrowserTab`] at once.
//!
//! A launch takes a few hundred milliseconds, most of it Chromium's own
//! start-up. A run without a start URL opens on a blank page, so its first
//! model request does not need the browser: the page it shows is known. A
//! `StartingTab` answers the questions the loop asks about that page
//! (URL, title, viewport, pointer, and a screenshot rendered as Chromium
//! renders `about:blank`: white, at the size and scale a capture would
//! have) while Chromium starts in the background, so the model's first
//! turn overlaps the launch. Everything else waits for the launch and goes
//! to the [`CdpTab`].
//!
//! The blank page is answered only while it is certain:
//! - the profile is a fresh temporary one (a profile of your own may
//!   restore tabs at start-up);
//! - the viewport is fixed by [`TabOptions::viewport`](crate::TabOptions)
//!   (otherwise its size is the browser's to say);
//! - nothing has been sent to the browser yet, and the launch has not
//!   finished (after it, the real page answers).
//!
//! A request filter installed while Chromium starts is installed on the
//! tab before any other call reaches it: nothing is sent to the browser
//! without the operator's policy in place. If installing it fails, every
//! later call fails with that error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use lumen_core::{
    ActionOutcome, AxSnapshot, BrowserTab, BufferedLines, ClickOptions, ElementInfo, Image,
    ImageScale, LiveFrames, LiveInput, LumenError, Modifiers, MouseButton, Point, RequestFilter,
    Result, Screenshot, ScreenshotOptions, SettleOptions, SettleReport, Size, TabInfo,
    browser::{FormField, ScrollOffset},
};
use tokio::sync::OnceCell;
use tokio::task::AbortHandle;

use crate::imaging;
use crate::options::LaunchOptions;
use crate::tab::{CdpTab, lock};

type Launch = Shared<BoxFuture<'static, std::result::Result<Arc<CdpTab>, LumenError>>>;

/// A local Chromium being launched in the background
/// ([`CdpTab::start`]); see the [module](self) docs.
pub struct StartingTab {
    launch: Launch,
    /// The tab once launched and given the pending request filter.
    ready: OnceCell<Arc<CdpTab>>,
    filter: Mutex<PendingFilter>,
    /// The blank page's viewport and device pixel ratio, when certain.
    blank: Option<(Size, f64)>,
    /// Something other than a question about the blank page was asked.
    touched: AtomicBool,
    task: AbortHandle,
}

#[derive(Default)]
struct PendingFilter {
    filter: Option<Arc<dyn RequestFilter>>,
    /// The tab took the pending filter: later ones go to the tab directly.
    taken: bool,
}

impl std::fmt::Debug for StartingTab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartingTab")
            .field("launched", &self.launched())
            .field("blank", &self.blank)
            .finish_non_exhaustive()
    }
}

impl CdpTab {
    /// Starts launching a local Chromium and returns at once with a tab
    /// that answers for the blank page it opens on while the launch goes
    /// on (see [`StartingTab`]).
    ///
    /// # Errors
    /// [`LumenError::Config`] when no Chromium is found. Errors of the
    /// launch itself (see [`CdpTab::launch`]) come from the first call that
    /// needs the browser.
    ///
    /// # Panics
    /// Outside a Tokio runtime (the launch runs in a task of its own).
    pub fn start(options: LaunchOptions) -> Result<StartingTab> {
        crate::chromium::check_executable(&options)?;
        let blank = options
            .user_data_dir
            .is_none()
            .then_some(options.tab.viewport)
            .flatten()
            .map(|v| (v, options.tab.device_scale_factor));
        let handle = tokio::spawn(async move { CdpTab::launch(options).await.map(Arc::new) });
        let task = handle.abort_handle();
        let launch = async move {
            handle.await.unwrap_or_else(|e| {
                Err(LumenError::disconnected(format!(
                    "the browser launch did not finish: {e}"
                )))
            })
        }
        .boxed()
        .shared();
        Ok(StartingTab {
            launch,
            ready: OnceCell::new(),
            filter: Mutex::new(PendingFilter::default()),
            blank,
            touched: AtomicBool::new(false),
            task,
        })
    }
}

impl StartingTab {
    /// Whether the launch has ended (successfully or not).
    pub fn launched(&self) -> bool {
        self.launch.peek().is_some()
    }

    /// The launched tab, once the launch is done and the request filter
    /// installed: for what only a [`CdpTab`] offers (aligning the viewport,
    /// the browser's process id).
    ///
    /// # Errors
    /// The launch's error, or the request filter's.
    pub async fn tab(&self) -> Result<&Arc<CdpTab>> {
        self.ready
            .get_or_try_init(|| async {
                let tab = self.launch.clone().await?;
                let filter = {
                    let mut pending = lock(&self.filter);
                    pending.taken = true;
                    // Cloned, not taken: after a failed install, the next
                    // call installs it again instead of going on without.
                    pending.filter.clone()
                };
                if let Some(filter) = filter {
                    tab.install_request_filter(filter).await?;
                }
                Ok(tab)
            })
            .await
    }

    /// The launched tab for a call that acts on the browser: from here on
    /// the blank page is no longer answered for it.
    async fn act(&self) -> Result<&Arc<CdpTab>> {
        self.touched.store(true, Ordering::SeqCst);
        self.tab().await
    }

    /// The blank page's viewport and DPR while the answer is certain.
    fn blank(&self) -> Option<(Size, f64)> {
        let untouched = !self.touched.load(Ordering::SeqCst) && !self.launched();
        self.blank.filter(|_| untouched)
    }
}

impl Drop for StartingTab {
    fn drop(&mut self) {
        // A launch still running is dropped with its Chromium (which dies
        // with its owner); a finished one is a no-op here.
        self.task.abort();
    }
}

/// `about:blank` as a capture of `viewport` at `dpr` would show it: white,
/// at device resolution, fitted to the options' limits.
fn blank_screenshot(viewport: Size, dpr: f64, options: &ScreenshotOptions) -> Result<Screenshot> {
    let device = Size::new(
        ((viewport.width as f64 * dpr).round() as u32).max(1),
        ((viewport.height as f64 * dpr).round() as u32).max(1),
    );
    let size = imaging::fitted(device, options.max_edge, options.max_pixels);
    let bytes = imaging::white(size, options.format, options.quality)
        .map_err(|e| LumenError::invalid_data("screenshot", e))?;
    Ok(Screenshot {
        image: Image::new(options.format, size.width, size.height, bytes),
        viewport,
        scale: ImageScale::between(viewport, size),
    })
}

#[async_trait::async_trait]
impl BrowserTab for StartingTab {
    async fn screenshot(&self, options: &ScreenshotOptions) -> Result<Screenshot> {
        match self.blank() {
            Some((viewport, dpr)) if options.region.is_none() => {
                blank_screenshot(viewport, dpr, options)
            }
            _ => self.tab().await?.screenshot(options).await,
        }
    }

    async fn viewport(&self) -> Result<Size> {
        match self.blank() {
            Some((viewport, _)) => Ok(viewport),
            None => self.tab().await?.viewport().await,
        }
    }

    async fn set_viewport(&self, size: Size, device_scale_factor: f64) -> Result<()> {
        self.act()
            .await?
            .set_viewport(size, device_scale_factor)
            .await
    }

    async fn url(&self) -> Result<String> {
        match self.blank() {
            Some(_) => Ok("about:blank".to_owned()),
            None => self.tab().await?.url().await,
        }
    }

    async fn title(&self) -> Result<String> {
        match self.blank() {
            Some(_) => Ok(String::new()),
            None => self.tab().await?.title().await,
        }
    }

    fn cursor(&self) -> Option<Point> {
        self.ready.get().and_then(|tab| tab.cursor())
    }

    async fn click(&self, at: Point, options: ClickOptions) -> Result<ActionOutcome> {
        self.act().await?.click(at, options).await
    }

    async fn hover(&self, at: Point) -> Result<ActionOutcome> {
        self.act().await?.hover(at).await
    }

    async fn drag(&self, from: Point, to: Point, path: &[Point]) -> Result<ActionOutcome> {
        self.act().await?.drag(from, to, path).await
    }

    async fn mouse_down(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome> {
        self.act().await?.mouse_down(at, button).await
    }

    async fn mouse_up(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome> {
        self.act().await?.mouse_up(at, button).await
    }

    async fn scroll(
        &self,
        at: Point,
        delta_x: f64,
        delta_y: f64,
        modifiers: Modifiers,
    ) -> Result<ActionOutcome> {
        self.act()
            .await?
            .scroll(at, delta_x, delta_y, modifiers)
            .await
    }

    async fn type_text(&self, text: &str) -> Result<ActionOutcome> {
        self.act().await?.type_text(text).await
    }

    async fn key_press(&self, keys: &[String]) -> Result<ActionOutcome> {
        self.act().await?.key_press(keys).await
    }

    async fn hold_key(&self, keys: &[String], duration: Duration) -> Result<ActionOutcome> {
        self.act().await?.hold_key(keys, duration).await
    }

    async fn goto(&self, url: &str) -> Result<ActionOutcome> {
        self.act().await?.goto(url).await
    }

    async fn back(&self) -> Result<ActionOutcome> {
        self.act().await?.back().await
    }

    async fn forward(&self) -> Result<ActionOutcome> {
        self.act().await?.forward().await
    }

    async fn reload(&self) -> Result<ActionOutcome> {
        self.act().await?.reload().await
    }

    async fn settle(&self, options: &SettleOptions) -> Result<SettleReport> {
        self.act().await?.settle(options).await
    }

    async fn evaluate(&self, expression: &str) -> Result<serde_json::Value> {
        self.act().await?.evaluate(expression).await
    }

    async fn close_tab(&self, id: &str) -> Result<ActionOutcome> {
        self.act().await?.close_tab(id).await
    }

    /// Closes the browser once launched; a launch that failed leaves
    /// nothing to close.
    async fn close(&self) -> Result<()> {
        self.touched.store(true, Ordering::SeqCst);
        match self.launch.clone().await {
            Ok(tab) => tab.close().await,
            Err(_) => Ok(()),
        }
    }

    async fn install_request_filter(&self, filter: Arc<dyn RequestFilter>) -> Result<bool> {
        {
            let mut pending = lock(&self.filter);
            if !pending.taken {
                pending.filter = Some(filter);
                return Ok(true);
            }
        }
        self.act().await?.install_request_filter(filter).await
    }

    async fn key_down(&self, key: &str) -> Result<ActionOutcome> {
        self.act().await?.key_down(key).await
    }

    async fn key_up(&self, key: &str) -> Result<ActionOutcome> {
        self.act().await?.key_up(key).await
    }

    async fn accessibility(&self) -> Result<Option<AxSnapshot>> {
        self.act().await?.accessibility().await
    }

    async fn ref_point(&self, reference: &str) -> Result<Option<Point>> {
        self.act().await?.ref_point(reference).await
    }

    async fn scroll_to_ref(&self, reference: &str) -> Result<ActionOutcome> {
        self.act().await?.scroll_to_ref(reference).await
    }

    async fn fill_ref(&self, reference: &str, value: &serde_json::Value) -> Result<ActionOutcome> {
        self.act().await?.fill_ref(reference, value).await
    }

    async fn page_text(&self) -> Result<String> {
        self.act().await?.page_text().await
    }

    async fn tabs(&self) -> Result<Vec<TabInfo>> {
        self.act().await?.tabs().await
    }

    async fn new_tab(&self) -> Result<ActionOutcome> {
        self.act().await?.new_tab().await
    }

    async fn switch_tab(&self, id: &str) -> Result<ActionOutcome> {
        self.act().await?.switch_tab(id).await
    }

    async fn answer_next_dialog(&self, accept: bool, text: Option<&str>) -> Result<ActionOutcome> {
        self.act().await?.answer_next_dialog(accept, text).await
    }

    async fn choose_files(&self, paths: &[String]) -> Result<ActionOutcome> {
        self.act().await?.choose_files(paths).await
    }

    async fn upload_files(
        &self,
        reference: &str,
        paths: &[String],
        document_ids: &[String],
    ) -> Result<ActionOutcome> {
        self.act()
            .await?
            .upload_files(reference, paths, document_ids)
            .await
    }

    async fn read_console(&self) -> Result<Option<BufferedLines>> {
        self.act().await?.read_console().await
    }

    async fn read_network(&self) -> Result<Option<BufferedLines>> {
        self.act().await?.read_network().await
    }

    async fn mask_secret_field(&self, reference: Option<&str>) -> Result<bool> {
        self.act().await?.mask_secret_field(reference).await
    }

    async fn form_fields(&self) -> Result<Option<Vec<FormField>>> {
        self.act().await?.form_fields().await
    }

    async fn scroll_offset(&self) -> Result<Option<ScrollOffset>> {
        self.act().await?.scroll_offset().await
    }

    async fn screencast(&self, max_width: u32) -> Result<Option<LiveFrames>> {
        self.act().await?.screencast(max_width).await
    }

    async fn live_input(&self, input: &LiveInput) -> Result<bool> {
        self.act().await?.live_input(input).await
    }

    async fn element_at(&self, at: Point) -> Result<Option<ElementInfo>> {
        self.act().await?.element_at(at).await
    }

    async fn focused_element(&self) -> Result<Option<ElementInfo>> {
        self.act().await?.focused_element().await
    }

    async fn set_scroll_offset(&self, offset: ScrollOffset) -> Result<ActionOutcome> {
        self.act().await?.set_scroll_offset(offset).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumen_core::ImageFormat;

    #[test]
    fn the_blank_page_has_the_size_and_scale_a_capture_would() {
        let options = ScreenshotOptions {
            max_edge: Some(1000),
            ..ScreenshotOptions::default()
        };
        let shot = blank_screenshot(Size::new(1280, 720), 2.0, &options).unwrap();
        assert_eq!(shot.image.size(), Size::new(1000, 563));
        assert_eq!(shot.viewport, Size::new(1280, 720));
        assert!((shot.scale.x - 1000.0 / 1280.0).abs() < 1e-9);
        let decoded = image::load_from_memory(&shot.image.data).unwrap().to_rgb8();
        assert_eq!(decoded.dimensions(), (1000, 563));
        assert!(decoded.pixels().all(|p| p.0.iter().all(|&c| c >= 250)));
        let png = ScreenshotOptions {
            format: ImageFormat::Png,
            ..ScreenshotOptions::default()
        };
        let shot = blank_screenshot(Size::new(800, 600), 1.0, &png).unwrap();
        assert_eq!(shot.image.format, ImageFormat::Png);
        assert_eq!(shot.image.size(), Size::new(800, 600));
    }
}

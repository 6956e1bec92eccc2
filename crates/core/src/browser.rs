//! The browser side of the loop: the [`BrowserTab`] trait and its options.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::action::{Modifiers, MouseButton};
use crate::coords::{ImageScale, Point, Rect, Size};
use crate::error::Result;
use crate::image::{Image, ImageFormat};
use crate::outcome::{ActionOutcome, ElementInfo, TabInfo};
use crate::page::AxSnapshot;

/// How to take a screenshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScreenshotOptions {
    /// Encoding.
    pub format: ImageFormat,
    /// JPEG quality 1–100 (ignored for PNG).
    pub quality: u8,
    /// Downscale so the longer edge is at most this many pixels.
    pub max_edge: Option<u32>,
    /// Downscale so width × height is at most this many pixels.
    pub max_pixels: Option<u64>,
    /// Draw a dot where the pointer last was.
    pub cursor_overlay: bool,
    /// Capture only this region (viewport CSS pixels), at device resolution.
    pub region: Option<Rect>,
}

impl Default for ScreenshotOptions {
    fn default() -> Self {
        Self {
            format: ImageFormat::Jpeg,
            quality: 80,
            max_edge: None,
            max_pixels: None,
            cursor_overlay: false,
            region: None,
        }
    }
}

/// A screenshot and how its pixels map onto the viewport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Screenshot {
    /// The encoded image.
    pub image: Image,
    /// The viewport it shows, CSS pixels.
    pub viewport: Size,
    /// Image pixels per CSS pixel (after any downscaling).
    pub scale: ImageScale,
}

impl Screenshot {
    /// Maps a point in this image's pixels to viewport CSS pixels.
    pub fn to_viewport(&self, x: f64, y: f64) -> Point {
        self.scale.image_to_css(x, y, self.viewport)
    }
}

/// How to click.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClickOptions {
    /// Button.
    pub button: MouseButton,
    /// 1, 2 or 3.
    pub click_count: u8,
    /// Modifiers held.
    pub modifiers: Modifiers,
}

impl Default for ClickOptions {
    fn default() -> Self {
        Self {
            button: MouseButton::Left,
            click_count: 1,
            modifiers: Modifiers::NONE,
        }
    }
}

/// How to wait for the page to be ready after an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SettleOptions {
    /// Give up waiting after this long (the page is used as it is).
    #[serde(with = "duration_ms")]
    pub max_wait: Duration,
    /// The network counts as quiet when no request is in flight and none
    /// whose answer a script may act on (a fetch, an XHR, a script) started
    /// or ended for this long. A page's documents, stylesheets, images and
    /// fonts count only while they load.
    #[serde(with = "duration_ms")]
    pub network_quiet: Duration,
    /// Whether a navigation is expected (goto, back): wait for it to commit
    /// and load.
    pub expect_navigation: bool,
    /// Whether the last check, that the page holds still for a frame after
    /// a change, may be left to whatever uses the page next, when the page
    /// changed a moment ago. The next screenshot then compares the page
    /// before and after capturing (and settles and captures again if it
    /// moved); the next input waits for the frame first. A tab without the
    /// means to compare waits for the frame here. Saves a frame on every
    /// step that changes the page; reads in between (`evaluate`) may see
    /// the page a frame early.
    pub stable_at_capture: bool,
}

impl Default for SettleOptions {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_secs(5),
            network_quiet: Duration::from_millis(100),
            expect_navigation: false,
            stable_at_capture: false,
        }
    }
}

/// What settling observed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettleReport {
    /// How long it waited.
    pub waited_ms: u64,
    /// Whether it gave up at `max_wait`.
    pub timed_out: bool,
    /// Whether a navigation happened while waiting.
    pub navigated: bool,
}

/// One visible form control and what it holds, as
/// [`BrowserTab::form_fields`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FormField {
    /// How a person would name it: the text of its first `<label>`, else
    /// its `name`, `id`, placeholder or type, trimmed; page text, so the
    /// reader caps it (the CDP tab sends at most 200 characters).
    pub label: String,
    /// What it holds, whole up to a bound (4,096 characters for the CDP
    /// tab): the loop redacts secrets first and then shortens it, which it
    /// could not do with a value already cut; `checked` for a checked box
    /// or radio; empty when it holds nothing.
    pub value: String,
}

/// What a tab buffered since the last read (console messages, network
/// requests), one line per entry, oldest first. Page-derived text: the
/// reader redacts and caps it before a model sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BufferedLines {
    /// The entries, each one line (the CDP tab cuts each at 1,000
    /// characters).
    pub lines: Vec<String>,
    /// How many older entries were dropped because the buffer was full
    /// (the CDP tab keeps the last 500 per tab).
    pub dropped: u64,
}

/// How far the page is scrolled, CSS pixels from the top left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ScrollOffset {
    /// Horizontal offset.
    pub x: f64,
    /// Vertical offset.
    pub y: f64,
}

/// The most characters of page text [`BrowserTab::page_text`] reads by
/// default (far more than a model is shown: reading actions answer with
/// at most 50,000 characters).
pub const MAX_PAGE_TEXT_CHARS: usize = 1 << 20;

/// Finds the URL of the document holding the focus, for
/// [`BrowserTab::focused_url`]: down through focused frames, a
/// cross-origin frame by its `src` (`about:blank` when it has none that
/// parses).
const FOCUSED_URL_SCRIPT: &str = "(() => { let d = document; for (let i = 0; i < 16; i++) { \
    const a = d.activeElement; \
    if (!a || (a.tagName !== 'IFRAME' && a.tagName !== 'FRAME')) return d.URL; \
    let inner = null; try { inner = a.contentDocument; } catch (e) {} \
    if (!inner) { try { return new URL(a.getAttribute('src') || 'about:blank', d.baseURI).href; } \
    catch (e) { return 'about:blank'; } } \
    d = inner; } return d.URL; })()";

/// A browser tab the loop can see and act on.
///
/// Object-safe (`#[async_trait]`), stored as `Arc<dyn BrowserTab>`; methods
/// take `&self` (implementations use interior mutability), so a tab can be
/// shared by a loop and its child loops, one call at a time.
///
/// # Contract
/// - **Coordinates** are viewport CSS pixels at any device pixel ratio.
/// - **Never lie, never throw for page problems**: a click on nothing, an
///   unknown key, a failed navigation or an off-viewport point is
///   `Ok(ActionOutcome { ok: false, .. })` with a message for the model; a
///   click that changed nothing says so in its receipt. `Err` is reserved for
///   fatal conditions, above all
///   [`LumenError::BrowserDisconnected`](crate::LumenError::BrowserDisconnected),
///   which must arrive promptly (every call has a deadline), never as a hang.
/// - **Settling** is separate: action methods return once the input is
///   delivered; [`settle`](Self::settle) waits for the page to be ready.
/// - **Cancellation**: dropping a returned future abandons the call; the tab
///   stays usable.
#[async_trait::async_trait]
pub trait BrowserTab: Send + Sync {
    /// Takes a screenshot.
    async fn screenshot(&self, options: &ScreenshotOptions) -> Result<Screenshot>;
    /// The viewport size in CSS pixels, as the page reports it.
    async fn viewport(&self) -> Result<Size>;
    /// Sets the viewport (CSS pixels) and device pixel ratio.
    async fn set_viewport(&self, size: Size, device_scale_factor: f64) -> Result<()>;
    /// The current URL.
    async fn url(&self) -> Result<String>;
    /// The current title.
    async fn title(&self) -> Result<String>;
    /// Where the pointer last was, if it was moved.
    fn cursor(&self) -> Option<Point>;

    /// Clicks at a point.
    async fn click(&self, at: Point, options: ClickOptions) -> Result<ActionOutcome>;
    /// Moves the pointer to a point.
    async fn hover(&self, at: Point) -> Result<ActionOutcome>;
    /// Drags from `from` through `path` to `to` with the left button.
    async fn drag(&self, from: Point, to: Point, path: &[Point]) -> Result<ActionOutcome>;
    /// Presses a button (at a point, or where the pointer is).
    async fn mouse_down(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome>;
    /// Releases a button (at a point, or where the pointer is).
    async fn mouse_up(&self, at: Option<Point>, button: MouseButton) -> Result<ActionOutcome>;
    /// Scrolls with the wheel at a point by a CSS-pixel delta.
    async fn scroll(
        &self,
        at: Point,
        delta_x: f64,
        delta_y: f64,
        modifiers: Modifiers,
    ) -> Result<ActionOutcome>;
    /// Types text into the focused element.
    async fn type_text(&self, text: &str) -> Result<ActionOutcome>;
    /// Presses a key chord (names normalised by the implementation).
    async fn key_press(&self, keys: &[String]) -> Result<ActionOutcome>;
    /// Holds a key chord for `duration`.
    async fn hold_key(&self, keys: &[String], duration: Duration) -> Result<ActionOutcome>;
    /// Navigates to a URL and waits for it to load (bounded).
    async fn goto(&self, url: &str) -> Result<ActionOutcome>;
    /// Goes back in history.
    async fn back(&self) -> Result<ActionOutcome>;
    /// Goes forward in history.
    async fn forward(&self) -> Result<ActionOutcome>;
    /// Reloads the page.
    async fn reload(&self) -> Result<ActionOutcome>;

    /// Waits until the page is ready (navigation committed, network quiet,
    /// layout stable), bounded by `options.max_wait`.
    async fn settle(&self, options: &SettleOptions) -> Result<SettleReport>;
    /// Evaluates a JavaScript expression in the main frame and returns its
    /// JSON value (promises are awaited). A thrown exception is
    /// [`LumenError::Script`](crate::LumenError::Script).
    async fn evaluate(&self, expression: &str) -> Result<serde_json::Value>;
    /// Closes another tab of the same browser by id (as reported in an
    /// effect receipt's `new_tab`), returning to the tab the agent drove
    /// before if it was following the closed one. The default answers that
    /// this tab cannot manage other tabs.
    async fn close_tab(&self, id: &str) -> Result<ActionOutcome> {
        Ok(ActionOutcome::failed(format!(
            "this browser cannot close tab {id}"
        )))
    }
    /// Closes the tab (and the browser, when the tab owns it).
    async fn close(&self) -> Result<()>;

    /// Has the browser ask `filter` about every request before it is sent
    /// (every tab, popup and frame of the browser, redirects included) and
    /// refuse the ones it denies; refused requests are reported in the
    /// receipts' `blocked_requests`. Installing again replaces the filter.
    /// `Ok(false)`, the default, means this browser cannot filter requests:
    /// the loop then only judges where actions led, after the fact.
    async fn install_request_filter(
        &self,
        filter: std::sync::Arc<dyn crate::request_filter::RequestFilter>,
    ) -> Result<bool> {
        let _ = filter;
        Ok(false)
    }

    /// Presses `key` and keeps it down: held modifiers apply to the mouse
    /// events that follow until [`key_up`](Self::key_up).
    async fn key_down(&self, key: &str) -> Result<ActionOutcome> {
        Ok(ActionOutcome::failed(format!(
            "this browser cannot hold {key} down"
        )))
    }
    /// Releases a key held by [`key_down`](Self::key_down).
    async fn key_up(&self, key: &str) -> Result<ActionOutcome> {
        Ok(ActionOutcome::failed(format!(
            "this browser holds no {key} down"
        )))
    }

    // ----- refs and tabs (the browser toolset) -----------------------------
    //
    // Defaults answer that this browser cannot: a tab of another kind keeps
    // working with the pixel tools.

    /// The accessibility tree of the driven tab, each kept node with a ref
    /// that lasts as long as the document. `Ok(None)` when this browser
    /// cannot read it.
    async fn accessibility(&self) -> Result<Option<AxSnapshot>> {
        Ok(None)
    }
    /// The centre of the element a ref names, viewport CSS pixels, after
    /// scrolling it into view; `None` when the ref is unknown, stale or the
    /// element has no box.
    async fn ref_point(&self, reference: &str) -> Result<Option<Point>> {
        let _ = reference;
        Ok(None)
    }
    /// Scrolls the element a ref names into view.
    async fn scroll_to_ref(&self, reference: &str) -> Result<ActionOutcome> {
        Ok(ActionOutcome::failed(format!(
            "this browser cannot resolve ref {reference}"
        )))
    }
    /// Sets the value of the form control a ref names (text, an option's
    /// value or label, or `true`/`false` for a checkbox or radio).
    async fn fill_ref(&self, reference: &str, value: &serde_json::Value) -> Result<ActionOutcome> {
        let _ = value;
        Ok(ActionOutcome::failed(format!(
            "this browser cannot fill ref {reference}"
        )))
    }
    /// The URL of the document that holds the keyboard focus, which typed
    /// keys reach: the page's own, or that of the frame the focus is in
    /// (same-origin frames are followed down; a cross-origin one is known
    /// by its `src`). A secret is judged by where it would land, not by
    /// the page around it. The default asks the page and falls back to
    /// [`url`](Self::url) when it does not say.
    async fn focused_url(&self) -> Result<String> {
        let v = self.evaluate(FOCUSED_URL_SCRIPT).await?;
        match v.as_str() {
            Some(u) if !u.is_empty() => Ok(u.to_owned()),
            _ => self.url().await,
        }
    }
    /// The visible text of the page, at most [`MAX_PAGE_TEXT_CHARS`]
    /// characters of it (a page's text is the page's to inflate; the cut
    /// happens in the page, so no more crosses to Lumen).
    async fn page_text(&self) -> Result<String> {
        let text = self
            .evaluate(&format!(
                "(document.body ? document.body.innerText : '').slice(0, {MAX_PAGE_TEXT_CHARS})"
            ))
            .await?;
        Ok(text.as_str().unwrap_or_default().to_owned())
    }
    /// Every open tab; the driven one has `followed` set. The default is
    /// this tab alone.
    async fn tabs(&self) -> Result<Vec<TabInfo>> {
        Ok(vec![TabInfo {
            id: "main".into(),
            url: self.url().await?,
            title: self.title().await.unwrap_or_default(),
            followed: true,
        }])
    }
    /// Opens a new blank tab and drives it; the outcome's effect names it.
    async fn new_tab(&self) -> Result<ActionOutcome> {
        Ok(ActionOutcome::failed("this browser cannot open tabs"))
    }
    /// Drives another open tab (an id from [`tabs`](Self::tabs)).
    async fn switch_tab(&self, id: &str) -> Result<ActionOutcome> {
        Ok(ActionOutcome::failed(format!(
            "this browser cannot switch to tab {id}"
        )))
    }

    /// Arms the answer to the next JavaScript dialog (accept or dismiss,
    /// and the text for a prompt); used once. Default: this browser cannot.
    async fn answer_next_dialog(&self, accept: bool, text: Option<&str>) -> Result<ActionOutcome> {
        let _ = (accept, text);
        Ok(ActionOutcome::failed(
            "this browser cannot answer dialogs on request",
        ))
    }

    /// Arms the files the next file chooser gets (only from the operator's
    /// upload folder); used once. Default: this browser cannot.
    async fn choose_files(&self, paths: &[String]) -> Result<ActionOutcome> {
        let _ = paths;
        Ok(ActionOutcome::failed("this browser cannot upload files"))
    }

    /// Sets the files of the file input a ref names: `paths` (relative to
    /// the operator's upload folder, or absolute inside it) and
    /// `document_ids` (plain file names staged in that folder). Anything
    /// outside the folder, or no folder at all, is `ok: false`.
    async fn upload_files(
        &self,
        reference: &str,
        paths: &[String],
        document_ids: &[String],
    ) -> Result<ActionOutcome> {
        let _ = (paths, document_ids);
        Ok(ActionOutcome::failed(format!(
            "this browser cannot upload files to ref {reference}"
        )))
    }
    /// The driven tab's console messages since the tab was attached and
    /// since the last read (the read drains them). `Ok(None)` when this
    /// browser cannot read them.
    async fn read_console(&self) -> Result<Option<BufferedLines>> {
        Ok(None)
    }
    /// The driven tab's network requests since the tab was attached and
    /// since the last read (the read drains them; requests still in flight
    /// are listed as such and again once done). `Ok(None)` when this
    /// browser cannot read them.
    async fn read_network(&self) -> Result<Option<BufferedLines>> {
        Ok(None)
    }

    // ----- page state the loop keeps (form state, checkpoints) -------------
    //
    // Defaults answer that this browser cannot: the loop then goes without
    // (no form state in the prompt, checkpoints at the top of the page).

    /// Remembers the field a secret was just typed into (the element the
    /// ref `reference` names, or the focused element) so every later
    /// screenshot of this page paints over it. `Ok(false)` when no field
    /// was found or this browser cannot mask (the default).
    async fn mask_secret_field(&self, reference: Option<&str>) -> Result<bool> {
        let _ = reference;
        Ok(false)
    }

    /// The visible form controls of the driven page (inputs, selects and
    /// text areas; hidden and password fields left out), in document order,
    /// at most 30. `Ok(None)` when they cannot be read (this browser cannot,
    /// or the page refused).
    async fn form_fields(&self) -> Result<Option<Vec<FormField>>> {
        Ok(None)
    }
    /// How far the driven page is scrolled. `Ok(None)` when it cannot be
    /// read (this browser cannot, or the page refused).
    async fn scroll_offset(&self) -> Result<Option<ScrollOffset>> {
        Ok(None)
    }
    // ----- live view (handing the run to a person) --------------------------

    /// Streams the driven page as JPEG frames for a person to watch
    /// (acknowledged and throttled by the implementation); dropping the
    /// stream stops it. `Ok(None)` when this browser cannot (the default).
    async fn screencast(&self, max_width: u32) -> Result<Option<crate::LiveFrames>> {
        let _ = max_width;
        Ok(None)
    }
    /// Sends a person's input into the driven page as it is, with no
    /// receipt and no settling. `Ok(false)` when this browser cannot (the
    /// default).
    async fn live_input(&self, input: &crate::LiveInput) -> Result<bool> {
        let _ = input;
        Ok(false)
    }

    /// The element at a viewport point: what a click there would hit,
    /// described as effect receipts describe targets. `Ok(None)` when
    /// nothing is there, the page is navigating, or this browser cannot
    /// tell (the default).
    async fn element_at(&self, at: Point) -> Result<Option<ElementInfo>> {
        let _ = at;
        Ok(None)
    }
    /// The element that has the keyboard focus (what typing would go
    /// into), described as effect receipts describe `focus`. `Ok(None)`
    /// when nothing but the page itself has it, the page is navigating, or
    /// this browser cannot tell (the default).
    async fn focused_element(&self) -> Result<Option<ElementInfo>> {
        Ok(None)
    }
    /// Scrolls the driven page to `offset` (as [`scroll_offset`](Self::scroll_offset)
    /// read it), without moving the pointer.
    async fn set_scroll_offset(&self, offset: ScrollOffset) -> Result<ActionOutcome> {
        Ok(ActionOutcome::failed(format!(
            "this browser cannot scroll to ({}, {})",
            offset.x, offset.y
        )))
    }
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().min(u64::MAX as u128) as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

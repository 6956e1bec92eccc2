//! Reading the page: evaluating scripts in the main frame and in child
//! frames, the URL and title, the accessibility tree and its refs, form
//! fields and the scroll offset.

use lumen_core::{
    ActionOutcome, AxSnapshot, LumenError, Point, Result,
    browser::{FormField, ScrollOffset},
};

use super::{CdpTab, PageCtx, is_fatal, page_level};
use crate::scripts::{FORM_FIELDS, SCROLL_OFFSET};

impl CdpTab {
    /// Evaluates an expression and returns its JSON value, retrying while a
    /// navigation replaces the execution context.
    pub(super) async fn eval_in(
        &self,
        ctx: &PageCtx,
        expression: &str,
    ) -> Result<serde_json::Value> {
        self.session(ctx).evaluate(expression).await
    }

    /// Evaluates in a child frame whose URL contains `frame_url` (same- or
    /// cross-origin). Same-origin frames run through their parent; out-of-
    /// process frames through their own target.
    ///
    /// # Errors
    /// [`LumenError::Script`] when the script throws or no frame matches.
    pub async fn evaluate_in_frame(
        &self,
        frame_url: &str,
        expression: &str,
    ) -> Result<serde_json::Value> {
        let ctx = self.active();
        crate::frames::evaluate_in_frame(self.session(&ctx), frame_url, expression).await
    }

    /// Evaluates in the main frame of the driven page.
    pub(super) async fn eval_active(&self, expression: &str) -> Result<serde_json::Value> {
        let ctx = self.active();
        self.eval_in(&ctx, expression).await
    }

    /// Takes an accessibility snapshot (`Accessibility.getFullAXTree`) of
    /// the driven tab. Refs (`@e1`, `@e2`, …) are stable per element for as
    /// long as the document lives.
    ///
    /// # Errors
    /// Fatal ones, or [`LumenError::Script`] when Chromium refuses.
    pub async fn accessibility_snapshot(&self) -> Result<AxSnapshot> {
        let ctx = self.active();
        crate::ax::snapshot(self.session(&ctx), &ctx.ax_refs).await
    }

    /// The centre of an element named by a ref from the last snapshot, in
    /// viewport CSS pixels (`None` when the ref is unknown or the element has
    /// no box).
    ///
    /// # Errors
    /// Fatal ones only.
    pub async fn ref_center(&self, reference: &str) -> Result<Option<Point>> {
        let ctx = self.active();
        crate::ax::ref_center(self.session(&ctx), &ctx.ax_refs, reference).await
    }

    /// The driven page's URL.
    ///
    /// The page's tracker follows every commit and same-document navigation
    /// of the main frame (and was told the URL when the page was set up), so
    /// once it has taken in the events Chromium sent so far, its URL is the
    /// page's, without a round trip: the loop asks at every step and before
    /// every action. The page is asked when the tracker knows none, or while
    /// a navigation is pending: Chromium answers a page's commands only once
    /// that navigation commits, so the answer is where the page went (a form
    /// a person submitted in the live view, say), as it always was. It is
    /// asked again of the new document when a navigation took the old one
    /// away.
    pub(super) async fn current_url(&self) -> Result<String> {
        if let Some(reason) = self.conn().dead_reason() {
            return Err(LumenError::disconnected(reason));
        }
        let ctx = self.active();
        self.flush(&ctx).await;
        let known = {
            let log = ctx.log.lock();
            (!log.nav_pending && !log.url.is_empty()).then(|| log.url.clone())
        };
        if let Some(url) = known {
            return Ok(url);
        }
        let v = match self.eval_active("location.href").await {
            // The document went away under a navigation: ask the new one.
            Err(LumenError::Script { .. }) => {
                self.wait_until_settled(&self.shared.options.settle).await?;
                self.eval_active("location.href").await?
            }
            other => other?,
        };
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    /// The driven page's title.
    pub(super) async fn current_title(&self) -> Result<String> {
        let v = self.eval_active("document.title").await?;
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    /// The centre of a ref's element after scrolling it into view.
    pub(super) async fn ref_point_in_view(&self, reference: &str) -> Result<Option<Point>> {
        let ctx = self.active();
        let page = self.session(&ctx);
        if !crate::ax::scroll_to_ref(page, &ctx.ax_refs, reference)
            .await?
            .ok
        {
            return Ok(None);
        }
        crate::ax::ref_center(page, &ctx.ax_refs, reference).await
    }

    /// The visible form fields ([`FORM_FIELDS`]); `None` when the page
    /// refuses the script.
    pub(super) async fn read_form_fields(&self) -> Result<Option<Vec<FormField>>> {
        match self.eval_active(FORM_FIELDS).await {
            Ok(v) => Ok(serde_json::from_value(v).ok()),
            Err(e) if is_fatal(&e) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// The page's scroll offset; `None` when the page refuses the script.
    pub(super) async fn read_scroll_offset(&self) -> Result<Option<ScrollOffset>> {
        match self.eval_active(SCROLL_OFFSET).await {
            Ok(v) => Ok(v[1].as_f64().map(|y| ScrollOffset {
                x: v[0].as_f64().unwrap_or(0.0),
                y,
            })),
            Err(e) if is_fatal(&e) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// Scrolls the page to `offset`; a page that refuses is `ok: false`.
    pub(super) async fn scroll_page_to(&self, offset: ScrollOffset) -> Result<ActionOutcome> {
        let js = format!("window.scrollTo({}, {})", offset.x, offset.y);
        match self.eval_active(&js).await {
            Ok(_) => Ok(ActionOutcome::ok()),
            Err(e) => page_level(e),
        }
    }
}

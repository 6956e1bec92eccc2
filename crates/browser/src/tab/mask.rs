//! Masking fields that hold secrets: once a secret is typed into a field,
//! every screenshot of that page (the model's and every saved one) paints
//! over the field's box.
//!
//! Fields are remembered by DOM backend node id and measured through CDP
//! (`DOM.getContentQuads`), not by page script, so a page cannot hide a
//! field from the mask by overriding DOM methods. A field inside a
//! cross-origin frame is masked by masking the whole frame element.

use lumen_core::Result;

use super::{CdpTab, PageCtx, lock};
use crate::cdp::CallError;

/// A box in viewport CSS pixels: left, top, right, bottom.
pub(super) type CssBox = (f64, f64, f64, f64);

/// The element with focus, descending into open shadow roots; the frame
/// element itself when focus is inside a child frame.
const FOCUSED: &str = "(() => { let e = document.activeElement; \
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement; \
  return e && e !== document.body && e !== document.documentElement ? e : null; })()";

impl CdpTab {
    /// Remembers the field named by `reference` (a ref from the last
    /// snapshot) or, without one, the focused element, as holding a
    /// secret. Returns whether a field was found.
    pub(super) async fn mark_secret(&self, reference: Option<&str>) -> Result<bool> {
        // The field typed into is on the page the typing was sent to, which
        // is not the active one when the page opened a tab on input (the
        // tab follows it): the mask goes with the field.
        let typed_on = lock(&self.shared.input_page).upgrade();
        let ctx = match (reference, typed_on) {
            (None, Some(page)) => page,
            _ => self.active(),
        };
        let backend = match reference {
            Some(r) => crate::ax::backend_of(&ctx.ax_refs, r),
            None => self.focused_backend(&ctx).await?,
        };
        let Some(backend) = backend else {
            return Ok(false);
        };
        let mut nodes = lock(&ctx.secret_fields);
        if !nodes.contains(&backend) {
            nodes.push(backend);
        }
        Ok(true)
    }

    async fn focused_backend(&self, ctx: &PageCtx) -> Result<Option<i64>> {
        let page = self.session(ctx);
        let found = match page
            .call(
                "Runtime.evaluate",
                serde_json::json!({ "expression": FOCUSED, "returnByValue": false }),
            )
            .await
        {
            Ok(v) => v,
            Err(CallError::Protocol { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some(object) = found["result"]["objectId"].as_str() else {
            return Ok(None);
        };
        let described = page
            .call(
                "DOM.describeNode",
                serde_json::json!({ "objectId": object }),
            )
            .await;
        let _ = page
            .call(
                "Runtime.releaseObject",
                serde_json::json!({ "objectId": object }),
            )
            .await;
        match described {
            Ok(v) => Ok(v["node"]["backendNodeId"].as_i64()),
            Err(CallError::Protocol { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The boxes of the page's secret fields now, in viewport CSS pixels.
    /// Fields that are gone (the page navigated or removed them) are
    /// forgotten.
    pub(super) async fn secret_boxes(&self, ctx: &PageCtx) -> Result<Vec<CssBox>> {
        let nodes = lock(&ctx.secret_fields).clone();
        let mut boxes = Vec::new();
        let mut gone = Vec::new();
        for backend in nodes {
            let Some(quads) = crate::ax::content_quads(self.session(ctx), backend).await? else {
                gone.push(backend);
                continue;
            };
            for corners in quads.into_iter().flatten() {
                let (x0, x1) = corners
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), c| (a.min(c.0), b.max(c.0)));
                let (y0, y1) = corners
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), c| (a.min(c.1), b.max(c.1)));
                boxes.push((x0, y0, x1, y1));
            }
        }
        if !gone.is_empty() {
            lock(&ctx.secret_fields).retain(|b| !gone.contains(b));
        }
        Ok(boxes)
    }
}

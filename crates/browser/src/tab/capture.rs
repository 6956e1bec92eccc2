//! Seeing the page: screenshots (with optional region, downscaling and
//! cursor dot) and the viewport (reading, setting, aligning to patches).

use chromiumoxide::Page;
use lumen_core::{
    Image, ImageScale, LumenError, Point, Result, Screenshot, ScreenshotOptions, Size,
};

use super::{CdpTab, lock};
use crate::cdp::Conn;
use crate::imaging;
use crate::protocol::{runtime, screenshot};

impl CdpTab {
    /// The viewport we last applied, if any.
    pub(super) fn viewport_known(&self) -> Option<Size> {
        lock(&self.shared.emulation).map(|(s, _)| s)
    }

    /// One capture of the active page.
    async fn capture(&self, options: &ScreenshotOptions) -> Result<Screenshot> {
        let ctx = self.active();
        let format = options.format;
        if let Some(r) = options.region
            && (r.width() == 0 || r.height() == 0)
        {
            return Err(LumenError::invalid_data(
                "screenshot region",
                "the region is empty",
            ));
        }
        let (method, params) = screenshot::capture(&screenshot::Capture {
            format,
            quality: options.quality,
            clip: options
                .region
                .map(|r| (r, region_scale(r, options.max_edge, options.max_pixels))),
            fast: false,
        });
        let capture = self.conn().page_raw(&ctx.page, method, params);
        let (shot, viewport) = match options.region {
            Some(r) => (capture.await, Ok(Size::new(r.width(), r.height()))),
            None => {
                let known = self.viewport_known();
                match known {
                    Some(v) => (capture.await, Ok(v)),
                    None => tokio::join!(capture, self.read_viewport()),
                }
            }
        };
        let shot = shot?;
        let viewport = viewport?;
        let bytes = screenshot::decode(&shot)?;
        let mut size = imaging::dimensions(&bytes, format)
            .map_err(|e| LumenError::invalid_data("screenshot", e))?;
        let mut bytes = bytes;
        let target = imaging::fitted(size, options.max_edge, options.max_pixels);
        let cursor = if options.cursor_overlay {
            *lock(&self.shared.cursor)
        } else {
            None
        };
        let secrets = self.secret_boxes(&ctx).await?;
        if target != size || cursor.is_some() || !secrets.is_empty() {
            let scale = ImageScale::between(viewport, target);
            let offset = options.region.map(|r| (r.x0, r.y0)).unwrap_or((0, 0));
            let (ox, oy) = (offset.0 as f64, offset.1 as f64);
            let dot =
                cursor.map(|p| scale.css_to_image(Point::new(p.x - offset.0, p.y - offset.1)));
            let masks: Vec<imaging::PixelBox> = secrets
                .iter()
                .map(|&(x0, y0, x1, y1)| {
                    (
                        (x0 - ox) * scale.x,
                        (y0 - oy) * scale.y,
                        (x1 - ox) * scale.x,
                        (y1 - oy) * scale.y,
                    )
                })
                .collect();
            let (out, new_size) =
                imaging::process(&bytes, format, options.quality, target, &masks, dot)
                    .map_err(|e| LumenError::invalid_data("screenshot", e))?;
            bytes = out;
            size = new_size;
        }
        Ok(Screenshot {
            image: Image::new(format, size.width, size.height, bytes),
            viewport,
            scale: ImageScale::between(viewport, size),
        })
    }

    /// A screenshot; when the capture fails under a navigation, settles
    /// and captures the new document. After a settle that left its frame's
    /// check to this capture, the page is compared before and after
    /// capturing: unchanged, the capture shows the settled page; changed,
    /// the page is settled in full and captured again.
    pub(super) async fn screenshot_settled(
        &self,
        options: &ScreenshotOptions,
    ) -> Result<Screenshot> {
        let ctx = self.active();
        self.bring_to_front(&ctx).await?;
        let pending = lock(&ctx.unsettled).take();
        let shot = match self.capture(options).await {
            // A navigation that began after the last settle (a form the
            // page submits a moment after the click) detaches the page
            // from the compositor for a while: wait for the new document
            // and capture that.
            Err(LumenError::Script { message }) => {
                tracing::debug!("capture failed ({message}); settling and capturing again");
                self.wait_until_settled(&self.shared.options.settle).await?;
                return self.capture(options).await;
            }
            other => other?,
        };
        let Some(u) = pending else {
            return Ok(shot);
        };
        if self.still_as_settled(&ctx, &u).await? {
            return Ok(shot);
        }
        tracing::debug!("the page changed while it was captured; settling and capturing again");
        self.settle_again(&u).await?;
        self.capture(options).await
    }

    /// The layout viewport, as the page reports it.
    pub(super) async fn read_viewport(&self) -> Result<Size> {
        let v = self.eval_active(runtime::VIEWPORT).await?;
        Ok(runtime::viewport_size(&v))
    }

    /// Sets the viewport and DPR (for this page and tabs opened later).
    pub(super) async fn apply_viewport(&self, size: Size, device_scale_factor: f64) -> Result<()> {
        if size.width == 0 || size.height == 0 || size.width > 10_000 || size.height > 10_000 {
            return Err(LumenError::config(
                "viewport",
                format!("{}x{} is not a usable viewport", size.width, size.height),
            ));
        }
        if !(device_scale_factor > 0.0 && device_scale_factor <= 8.0) {
            return Err(LumenError::config(
                "device_scale_factor",
                format!("{device_scale_factor} must be in (0, 8]"),
            ));
        }
        let ctx = self.active();
        apply_metrics(self.conn(), &ctx.page, size, device_scale_factor).await?;
        *lock(&self.shared.emulation) = Some((size, device_scale_factor));
        Ok(())
    }

    /// Sets the viewport to the nearest multiple of `patch_size` in each
    /// dimension (at least one patch), capped at `max_dim` (rounded down to
    /// a whole patch), keeping the current device pixel ratio, and returns
    /// the new size. Vision models address patches, so an aligned viewport
    /// avoids rounding error in their coordinates.
    ///
    /// # Errors
    /// [`LumenError::Config`] for a zero patch size; fatal ones otherwise.
    pub async fn align_viewport(&self, patch_size: u32, max_dim: u32) -> Result<Size> {
        let v = self
            .eval_active("[innerWidth, innerHeight, devicePixelRatio]")
            .await?;
        let w = v[0].as_f64().unwrap_or(1280.0) as u32;
        let h = v[1].as_f64().unwrap_or(720.0) as u32;
        let dpr = v[2].as_f64().unwrap_or(1.0);
        let size = aligned_viewport(Size::new(w, h), patch_size, max_dim)?;
        self.apply_viewport(size, dpr).await?;
        Ok(size)
    }
}

/// The size [`CdpTab::align_viewport`] gives a viewport of `size`: each
/// side the nearest multiple of `patch_size` (at least one patch), capped
/// at `max_dim` rounded down to a whole patch. For a viewport fixed before
/// launch ([`TabOptions::viewport`](crate::TabOptions)).
///
/// # Errors
/// [`LumenError::Config`] for a zero patch size or a maximum below it.
pub fn aligned_viewport(size: Size, patch_size: u32, max_dim: u32) -> Result<Size> {
    if patch_size == 0 || max_dim < patch_size {
        return Err(LumenError::config(
            "patch_size",
            format!("patch size {patch_size} with maximum {max_dim} cannot be aligned"),
        ));
    }
    Ok(Size::new(
        align_dim(size.width, patch_size, max_dim),
        align_dim(size.height, patch_size, max_dim),
    ))
}

/// The scale a region is rendered at: with image limits, as large as they
/// allow (a zoom shows detail the full screenshot cannot), at most 4×;
/// without, 1 (device pixels).
fn region_scale(region: lumen_core::Rect, max_edge: Option<u32>, max_pixels: Option<u64>) -> f64 {
    let long = region.width().max(region.height()).max(1) as f64;
    let area = (region.width().max(1) as f64) * (region.height().max(1) as f64);
    let by_edge = max_edge.map(|m| m as f64 / long);
    let by_area = max_pixels.map(|p| (p as f64 / area).sqrt());
    match (by_edge, by_area) {
        (None, None) => 1.0,
        (a, b) => a
            .unwrap_or(f64::MAX)
            .min(b.unwrap_or(f64::MAX))
            .clamp(1.0, 4.0),
    }
}

/// Rounds to the nearest multiple of `patch` (ties up), at least one patch,
/// at most `max` rounded down to a multiple.
fn align_dim(v: u32, patch: u32, max: u32) -> u32 {
    let rounded = ((v + patch / 2) / patch).max(1) * patch;
    let cap = (max / patch) * patch;
    rounded.min(cap).max(patch)
}

/// Emulates a viewport of `size` CSS pixels at `dpr` on `page`.
pub(super) async fn apply_metrics(conn: &Conn, page: &Page, size: Size, dpr: f64) -> Result<()> {
    conn.page_raw(
        page,
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({
            "width": size.width,
            "height": size.height,
            "deviceScaleFactor": dpr,
            "mobile": false,
            "screenWidth": size.width,
            "screenHeight": size.height,
        }),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_dim_rounds_to_patches_and_caps() {
        assert_eq!(align_dim(1280, 28, 1344), 1288);
        assert_eq!(align_dim(720, 28, 1344), 728);
        assert_eq!(align_dim(1500, 28, 1344), 1344);
        assert_eq!(align_dim(1280, 56, 1568), 1288);
        assert_eq!(align_dim(5, 28, 1344), 28);
        assert_eq!(align_dim(2000, 100, 1050), 1000);
    }
}

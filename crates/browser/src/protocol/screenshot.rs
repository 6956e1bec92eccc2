//! `Page.captureScreenshot`: its parameters, and the image in its answer.

use base64::Engine as _;
use lumen_core::{ImageFormat, LumenError, Rect, Result};
use serde_json::json;

use super::Command;

/// What to capture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Capture {
    /// Encoding.
    pub(crate) format: ImageFormat,
    /// JPEG quality, clamped to 1–100 (ignored for PNG).
    pub(crate) quality: u8,
    /// Only this region (viewport CSS pixels), rendered at this scale.
    pub(crate) clip: Option<(Rect, f64)>,
    /// Let Chromium trade compression for speed.
    pub(crate) fast: bool,
}

/// The capture command of the visible viewport (from the compositor's
/// surface, nothing beyond the viewport).
pub(crate) fn capture(c: &Capture) -> Command {
    let mut params = json!({
        "format": match c.format { ImageFormat::Png => "png", ImageFormat::Jpeg => "jpeg" },
        "captureBeyondViewport": false,
        "fromSurface": true,
    });
    if c.format == ImageFormat::Jpeg {
        params["quality"] = c.quality.clamp(1, 100).into();
    }
    if let Some((r, scale)) = c.clip {
        params["clip"] = json!({
            "x": r.x0, "y": r.y0, "width": r.width(), "height": r.height(),
            "scale": scale,
        });
    }
    if c.fast {
        params["optimizeForSpeed"] = true.into();
    }
    ("Page.captureScreenshot", params)
}

/// The encoded image in a capture's answer.
///
/// # Errors
/// [`LumenError::InvalidData`] when it is not base64.
pub(crate) fn decode(answer: &serde_json::Value) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(answer["data"].as_str().unwrap_or_default())
        .map_err(|e| LumenError::invalid_data("screenshot", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jpeg_gets_a_quality_and_a_region_its_clip() {
        let (method, p) = capture(&Capture {
            format: ImageFormat::Jpeg,
            quality: 0,
            clip: Some((
                Rect {
                    x0: 1,
                    y0: 2,
                    x1: 11,
                    y1: 22,
                },
                2.0,
            )),
            fast: false,
        });
        assert_eq!(method, "Page.captureScreenshot");
        assert_eq!(p["quality"], 1);
        assert_eq!(p["clip"]["width"], 10);
        assert_eq!(p["clip"]["scale"], 2.0);
        assert!(p.get("optimizeForSpeed").is_none());
        let png = capture(&Capture {
            format: ImageFormat::Png,
            quality: 80,
            clip: None,
            fast: true,
        })
        .1;
        assert!(png.get("quality").is_none());
        assert_eq!(png["optimizeForSpeed"], true);
        assert_eq!(decode(&json!({ "data": "AQI=" })).unwrap(), vec![1, 2]);
    }
}

//! Coordinate spaces and conversions.
//!
//! Every [`Action`](crate::Action) coordinate is an integer **CSS pixel of the
//! viewport** (origin top-left, x to the right, y down), whatever the device
//! pixel ratio. Providers speak other spaces: Anthropic and OpenAI answer in
//! pixels *of the screenshot they were shown* (which may be downscaled), Google
//! and the compatible adapter (by default) in a 0–1000 grid. Adapters convert
//! exactly once, at decode time, with the helpers here; after that every layer
//! speaks viewport pixels.
//!
//! Rounding: conversions round half away from zero (`f64::round`) and clamp
//! into the target range, so a decoded point always lies inside the viewport.

use serde::{Deserialize, Serialize};

/// Upper bound of the normalised grid some providers use (0–1000 inclusive).
pub const NORMALIZED_MAX: u32 = 1000;

/// A point in viewport CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Point {
    /// Horizontal position, CSS pixels from the left edge of the viewport.
    pub x: i32,
    /// Vertical position, CSS pixels from the top edge of the viewport.
    pub y: i32,
}

impl Point {
    /// A point at `(x, y)` CSS pixels.
    pub const fn new(x: i32, y: i32) -> Self {
        Self { x, y }
    }
}

/// An axis-aligned rectangle in viewport CSS pixels, `[x0, y0]` to `[x1, y1]`
/// (the far corner is exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rect {
    /// Left edge.
    pub x0: i32,
    /// Top edge.
    pub y0: i32,
    /// Right edge (exclusive).
    pub x1: i32,
    /// Bottom edge (exclusive).
    pub y1: i32,
}

impl Rect {
    /// Width in CSS pixels (0 for an inverted rectangle).
    pub fn width(&self) -> u32 {
        self.x1.saturating_sub(self.x0).max(0).unsigned_abs()
    }

    /// Height in CSS pixels (0 for an inverted rectangle).
    pub fn height(&self) -> u32 {
        self.y1.saturating_sub(self.y0).max(0).unsigned_abs()
    }
}

/// A size in pixels: the viewport in CSS pixels, or an image in image pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Size {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

impl Size {
    /// A size of `width` × `height`.
    pub const fn new(width: u32, height: u32) -> Self {
        Self { width, height }
    }

    /// The longer edge.
    pub fn max_edge(&self) -> u32 {
        self.width.max(self.height)
    }

    /// Whether `p` lies inside a viewport of this size.
    pub fn contains(&self, p: Point) -> bool {
        p.x >= 0
            && p.y >= 0
            && (p.x as i64) < self.width as i64
            && (p.y as i64) < self.height as i64
    }
}

/// Viewport size in CSS pixels.
pub type ViewportSize = Size;

/// Converts a 0–1000 coordinate into a pixel position along an axis of
/// `dimension` pixels.
///
/// Out-of-range input (negative, above 1000, NaN) is clamped into 0–1000
/// first; the result is clamped to `0..=dimension-1` so it always addresses a
/// real pixel. A zero dimension yields 0.
pub fn denormalize(coord: f64, dimension: u32) -> i32 {
    if dimension == 0 {
        return 0;
    }
    let c = if coord.is_nan() {
        0.0
    } else {
        coord.clamp(0.0, NORMALIZED_MAX as f64)
    };
    let px = (c / NORMALIZED_MAX as f64 * dimension as f64).round();
    clamp_to_axis(px, dimension)
}

/// Converts a pixel position along an axis of `dimension` pixels into the
/// 0–1000 grid. Out-of-range pixels clamp to 0 or 1000; a zero dimension
/// yields 0.
pub fn normalize(pixel: f64, dimension: u32) -> u32 {
    if dimension == 0 || pixel.is_nan() {
        return 0;
    }
    let n = (pixel / dimension as f64 * NORMALIZED_MAX as f64).round();
    n.clamp(0.0, NORMALIZED_MAX as f64) as u32
}

/// How a screenshot's pixels relate to the viewport's CSS pixels.
///
/// `scale` is image pixels per CSS pixel: 1.0 for a capture at DPR 1 with no
/// downscaling, 0.5 for a 2560-wide viewport downscaled to 1280, 2.0 for a
/// DPR-2 capture kept at full resolution. Adapters decode a provider's pixel
/// coordinate `p` (in the image the model saw) as `p / scale` CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ImageScale {
    /// Image pixels per CSS pixel, horizontally.
    pub x: f64,
    /// Image pixels per CSS pixel, vertically.
    pub y: f64,
}

impl ImageScale {
    /// The identity mapping (image pixel = CSS pixel).
    pub const IDENTITY: ImageScale = ImageScale { x: 1.0, y: 1.0 };

    /// The scale that maps a `viewport` (CSS pixels) onto an `image` of the
    /// given size. Zero sizes give the identity.
    pub fn between(viewport: Size, image: Size) -> Self {
        let axis = |img: u32, css: u32| {
            if img == 0 || css == 0 {
                1.0
            } else {
                img as f64 / css as f64
            }
        };
        Self {
            x: axis(image.width, viewport.width),
            y: axis(image.height, viewport.height),
        }
    }

    /// Maps a point in image pixels to viewport CSS pixels, clamped into the
    /// viewport.
    pub fn image_to_css(&self, x: f64, y: f64, viewport: Size) -> Point {
        let sx = if self.x > 0.0 && self.x.is_finite() {
            self.x
        } else {
            1.0
        };
        let sy = if self.y > 0.0 && self.y.is_finite() {
            self.y
        } else {
            1.0
        };
        Point {
            x: clamp_to_axis((x / sx).round(), viewport.width),
            y: clamp_to_axis((y / sy).round(), viewport.height),
        }
    }

    /// Maps a viewport point to image pixels (for drawing overlays).
    pub fn css_to_image(&self, p: Point) -> (f64, f64) {
        (p.x as f64 * self.x, p.y as f64 * self.y)
    }
}

impl Default for ImageScale {
    fn default() -> Self {
        Self::IDENTITY
    }
}

fn clamp_to_axis(px: f64, dimension: u32) -> i32 {
    if dimension == 0 || px.is_nan() {
        return 0;
    }
    let max = (dimension - 1).min(i32::MAX as u32) as f64;
    px.clamp(0.0, max) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denormalize_edges() {
        assert_eq!(denormalize(0.0, 1280), 0);
        assert_eq!(denormalize(500.0, 1280), 640);
        // 1000 maps to the far edge, which is not a pixel: clamp to the last one.
        assert_eq!(denormalize(1000.0, 1280), 1279);
        assert_eq!(denormalize(1000.0, 1), 0);
        assert_eq!(denormalize(500.0, 0), 0);
    }

    #[test]
    fn denormalize_odd_sizes_round_half_away_from_zero() {
        // 333/1000 * 1001 = 333.333 -> 333; 500/1000 * 1001 = 500.5 -> 501.
        assert_eq!(denormalize(333.0, 1001), 333);
        assert_eq!(denormalize(500.0, 1001), 501);
        assert_eq!(denormalize(1.0, 727), 1); // 0.727 -> 1
        assert_eq!(denormalize(999.0, 727), 726);
    }

    #[test]
    fn denormalize_clamps_out_of_range_input() {
        assert_eq!(denormalize(-5.0, 1280), 0);
        assert_eq!(denormalize(1500.0, 1280), 1279);
        assert_eq!(denormalize(f64::NAN, 1280), 0);
        assert_eq!(denormalize(f64::INFINITY, 720), 719);
    }

    #[test]
    fn normalize_edges_and_clamping() {
        assert_eq!(normalize(0.0, 1280), 0);
        assert_eq!(normalize(640.0, 1280), 500);
        assert_eq!(normalize(1280.0, 1280), 1000);
        assert_eq!(normalize(-10.0, 1280), 0);
        assert_eq!(normalize(5000.0, 1280), 1000);
        assert_eq!(normalize(10.0, 0), 0);
        assert_eq!(normalize(f64::NAN, 10), 0);
        // Odd size: 363 / 727 * 1000 = 499.31 -> 499.
        assert_eq!(normalize(363.0, 727), 499);
    }

    #[test]
    fn round_trip_is_within_one_grid_step() {
        for dim in [1u32, 7, 727, 1001, 1280, 1344] {
            for px in (0..dim).step_by(((dim / 50).max(1)) as usize) {
                let back = denormalize(normalize(px as f64, dim) as f64, dim);
                let step = (dim as f64 / 1000.0).ceil() as i32 + 1;
                assert!(
                    (back - px as i32).abs() <= step,
                    "dim {dim} px {px} back {back}"
                );
            }
        }
    }

    #[test]
    fn image_scale_maps_downscaled_and_hidpi_images() {
        let viewport = Size::new(1280, 720);
        let half = ImageScale::between(viewport, Size::new(640, 360));
        assert_eq!(
            half.image_to_css(320.0, 180.0, viewport),
            Point::new(640, 360)
        );
        let hidpi = ImageScale::between(viewport, Size::new(2560, 1440));
        assert_eq!(
            hidpi.image_to_css(2559.0, 1439.0, viewport),
            Point::new(1279, 719)
        );
        assert_eq!(hidpi.css_to_image(Point::new(10, 20)), (20.0, 40.0));
        // Odd downscale 1288x728 -> 1000x565: x=999 image px -> 1286.7 -> 1287.
        let odd = ImageScale::between(Size::new(1288, 728), Size::new(1000, 565));
        assert_eq!(
            odd.image_to_css(999.0, 564.0, Size::new(1288, 728)),
            Point::new(1287, 727)
        );
        // Out of the image clamps into the viewport.
        assert_eq!(
            half.image_to_css(-3.0, 9999.0, viewport),
            Point::new(0, 719)
        );
        // Degenerate scales fall back to identity rather than dividing by zero.
        let zero = ImageScale {
            x: 0.0,
            y: f64::NAN,
        };
        assert_eq!(zero.image_to_css(5.0, 6.0, viewport), Point::new(5, 6));
        assert_eq!(
            ImageScale::between(Size::new(0, 0), Size::new(10, 10)),
            ImageScale::IDENTITY
        );
    }

    #[test]
    fn size_contains_and_rect_dims() {
        let s = Size::new(10, 5);
        assert!(s.contains(Point::new(0, 0)));
        assert!(s.contains(Point::new(9, 4)));
        assert!(!s.contains(Point::new(10, 4)));
        assert!(!s.contains(Point::new(-1, 0)));
        let r = Rect {
            x0: 10,
            y0: 10,
            x1: 5,
            y1: 30,
        };
        assert_eq!((r.width(), r.height()), (0, 20));
    }
}

//! Screenshot post-processing with `image`: downscaling to a maximum edge
//! and the cursor overlay. Only runs when asked for; a plain capture passes
//! Chromium's bytes through untouched.

use std::io::Cursor;

use image::codecs::png::PngEncoder;
use image::{ImageEncoder as _, Rgba, RgbaImage};
use lumen_core::{ImageFormat, Size};

/// Reads the pixel size from encoded bytes without decoding the pixels.
pub(crate) fn dimensions(bytes: &[u8], format: ImageFormat) -> Result<Size, String> {
    let fmt = match format {
        ImageFormat::Png => image::ImageFormat::Png,
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
    };
    image::ImageReader::with_format(Cursor::new(bytes), fmt)
        .into_dimensions()
        .map(|(w, h)| Size::new(w, h))
        .map_err(|e| format!("unreadable screenshot: {e}"))
}

/// The size an image of `size` becomes when its longer edge is capped at
/// `max_edge` (aspect ratio kept, each side at least 1).
pub(crate) fn capped(size: Size, max_edge: u32) -> Size {
    let longest = size.max_edge();
    if max_edge == 0 || longest <= max_edge {
        return size;
    }
    let f = max_edge as f64 / longest as f64;
    let w = ((size.width as f64 * f).round() as u32).clamp(1, max_edge);
    let h = ((size.height as f64 * f).round() as u32).clamp(1, max_edge);
    Size::new(w, h)
}

/// The size an image of `size` becomes within both limits: the longer edge
/// at most `max_edge`, width × height at most `max_pixels` (aspect ratio
/// kept, each side at least 1).
pub(crate) fn fitted(size: Size, max_edge: Option<u32>, max_pixels: Option<u64>) -> Size {
    let size = max_edge.map_or(size, |m| capped(size, m));
    let area = size.width as u64 * size.height as u64;
    match max_pixels {
        Some(max) if max > 0 && area > max => {
            let f = (max as f64 / area as f64).sqrt();
            // Floor, so rounding never pushes the area back over the limit.
            let w = ((size.width as f64 * f).floor() as u32).max(1);
            let h = ((size.height as f64 * f).floor() as u32).max(1);
            Size::new(w, h)
        }
        _ => size,
    }
}

/// A box in image pixels: left, top, right, bottom.
pub(crate) type PixelBox = (f64, f64, f64, f64);

/// The colour secret fields are painted over with.
pub(crate) const MASK: Rgba<u8> = Rgba([96, 96, 96, 255]);

/// Decodes, optionally resizes to `target`, paints `masks` (image pixels,
/// grown to whole pixels) and draws a pointer dot at `dot`, then encodes
/// again.
pub(crate) fn process(
    bytes: &[u8],
    format: ImageFormat,
    quality: u8,
    target: Size,
    masks: &[PixelBox],
    dot: Option<(f64, f64)>,
) -> Result<(Vec<u8>, Size), String> {
    let decoded =
        image::load_from_memory(bytes).map_err(|e| format!("cannot decode screenshot: {e}"))?;
    let mut rgba: RgbaImage = decoded.to_rgba8();
    if rgba.width() != target.width || rgba.height() != target.height {
        rgba = image::imageops::resize(
            &rgba,
            target.width,
            target.height,
            image::imageops::FilterType::Triangle,
        );
    }
    for &(x0, y0, x1, y1) in masks {
        let (w, h) = (rgba.width() as f64, rgba.height() as f64);
        let (x0, y0) = (
            x0.floor().clamp(0.0, w) as u32,
            y0.floor().clamp(0.0, h) as u32,
        );
        let (x1, y1) = (
            x1.ceil().clamp(0.0, w) as u32,
            y1.ceil().clamp(0.0, h) as u32,
        );
        for y in y0..y1 {
            for x in x0..x1 {
                rgba.put_pixel(x, y, MASK);
            }
        }
    }
    if let Some((x, y)) = dot {
        draw_dot(&mut rgba, x, y);
    }
    let size = Size::new(rgba.width(), rgba.height());
    Ok((encode(rgba, format, quality)?, size))
}

/// Encodes `rgba` as `format` (`quality` for JPEG).
fn encode(rgba: RgbaImage, format: ImageFormat, quality: u8) -> Result<Vec<u8>, String> {
    let size = Size::new(rgba.width(), rgba.height());
    let mut out = Vec::new();
    match format {
        ImageFormat::Png => PngEncoder::new(&mut out)
            .write_image(
                rgba.as_raw(),
                size.width,
                size.height,
                image::ExtendedColorType::Rgba8,
            )
            .map_err(|e| format!("cannot encode PNG: {e}"))?,
        // `jpeg-encoder` takes RGBA as it is, about three times faster
        // than `image`'s encoder.
        ImageFormat::Jpeg => {
            let side =
                |n: u32| u16::try_from(n).map_err(|_| format!("{n} px is too large for JPEG"));
            jpeg_encoder::Encoder::new(&mut out, quality.clamp(1, 100))
                .encode(
                    rgba.as_raw(),
                    side(size.width)?,
                    side(size.height)?,
                    jpeg_encoder::ColorType::Rgba,
                )
                .map_err(|e| format!("cannot encode JPEG: {e}"))?
        }
    }
    Ok(out)
}

/// A white image of `size`, encoded: what Chromium shows of `about:blank`.
pub(crate) fn white(size: Size, format: ImageFormat, quality: u8) -> Result<Vec<u8>, String> {
    let rgba = RgbaImage::from_pixel(size.width, size.height, Rgba([255, 255, 255, 255]));
    encode(rgba, format, quality)
}

/// A red dot with a white ring, radius scaled to the image (about 6 px on a
/// 1280-wide image), so it stays visible on any background.
fn draw_dot(img: &mut RgbaImage, cx: f64, cy: f64) {
    let r = (img.width().max(img.height()) as f64 / 213.0).clamp(3.0, 12.0);
    let ring = r + 2.0;
    let (w, h) = (img.width() as i64, img.height() as i64);
    let x0 = (cx - ring).floor() as i64;
    let y0 = (cy - ring).floor() as i64;
    for y in y0..=(cy + ring).ceil() as i64 {
        for x in x0..=(cx + ring).ceil() as i64 {
            if x < 0 || y < 0 || x >= w || y >= h {
                continue;
            }
            let d = ((x as f64 - cx).powi(2) + (y as f64 - cy).powi(2)).sqrt();
            let colour = if d <= r {
                Rgba([230, 30, 30, 255])
            } else if d <= ring {
                Rgba([255, 255, 255, 255])
            } else {
                continue;
            };
            img.put_pixel(x as u32, y as u32, colour);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = RgbaImage::from_pixel(w, h, Rgba([0, 0, 255, 255]));
        let mut out = Vec::new();
        PngEncoder::new(&mut out)
            .write_image(img.as_raw(), w, h, image::ExtendedColorType::Rgba8)
            .unwrap();
        out
    }

    #[test]
    fn capped_keeps_aspect_and_never_upscales() {
        assert_eq!(capped(Size::new(2560, 1440), 1280), Size::new(1280, 720));
        assert_eq!(capped(Size::new(1280, 720), 1568), Size::new(1280, 720));
        assert_eq!(capped(Size::new(1288, 728), 1000), Size::new(1000, 565));
        assert_eq!(capped(Size::new(5000, 1), 100), Size::new(100, 1));
    }

    #[test]
    fn fitted_keeps_within_the_edge_and_the_pixel_count() {
        // Claude's older limits: 1568 px and ~1.18 MP.
        let claude = |s| fitted(s, Some(1568), Some(1_176_000));
        // A DPR-2 capture of 1280x720 is 2560x1440 (3.7 MP).
        let s = claude(Size::new(2560, 1440));
        assert!(s.width <= 1568 && s.height <= 1568, "{s:?}");
        assert!(s.width as u64 * s.height as u64 <= 1_176_000, "{s:?}");
        assert_eq!(s, Size::new(1445, 813));
        // 1280x720 fits both.
        assert_eq!(claude(Size::new(1280, 720)), Size::new(1280, 720));
        // No limits: unchanged.
        assert_eq!(
            fitted(Size::new(4000, 3000), None, None),
            Size::new(4000, 3000)
        );
    }

    #[test]
    fn process_resizes_and_draws_the_dot() {
        let src = png(200, 100);
        let (out, size) = process(
            &src,
            ImageFormat::Png,
            80,
            Size::new(100, 50),
            &[(10.2, 10.0, 20.0, 20.0), (-5.0, 45.0, 500.0, 90.0)],
            Some((50.0, 25.0)),
        )
        .unwrap();
        assert_eq!(size, Size::new(100, 50));
        assert_eq!(dimensions(&out, ImageFormat::Png).unwrap(), size);
        let img = image::load_from_memory(&out).unwrap().to_rgba8();
        assert_eq!(img.get_pixel(50, 25), &Rgba([230, 30, 30, 255]));
        assert_eq!(img.get_pixel(5, 5), &Rgba([0, 0, 255, 255]));
        // Masks cover whole pixels and are clipped to the image.
        for (x, y) in [(10, 10), (19, 19), (0, 49), (99, 45)] {
            assert_eq!(img.get_pixel(x, y), &MASK, "({x}, {y})");
        }
        assert_eq!(img.get_pixel(20, 20), &Rgba([0, 0, 255, 255]));
        // A JPEG decodes to the same colours, channels in order (lossy:
        // within a few levels).
        let (jpeg, size) =
            process(&src, ImageFormat::Jpeg, 70, Size::new(200, 100), &[], None).unwrap();
        assert_eq!(dimensions(&jpeg, ImageFormat::Jpeg).unwrap(), size);
        let img = image::load_from_memory(&jpeg).unwrap().to_rgb8();
        let [r, g, b] = img.get_pixel(100, 50).0;
        assert!(r < 8 && g < 8 && b > 247, "{:?}", (r, g, b));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(dimensions(b"not an image", ImageFormat::Png).is_err());
        assert!(process(b"nope", ImageFormat::Png, 80, Size::new(1, 1), &[], None).is_err());
    }
}

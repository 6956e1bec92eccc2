//! Snapshot refs drawn onto a screenshot (`lumen browser screenshot
//! --annotate`): each ref's box outlined and its label (`e3`) written in a
//! filled tag at the box's top-left corner, so a person or a model can
//! match what it sees to the refs it can use.

use std::io::Cursor;

use image::codecs::png::PngEncoder;
use image::{ImageEncoder as _, Rgba, RgbaImage};
use lumen_core::{LumenError, Result};

/// One ref to draw: its label and its box in viewport CSS pixels (left,
/// top, width, height).
#[derive(Debug, Clone, PartialEq)]
pub struct RefBox {
    /// The label written (`e3`).
    pub label: String,
    /// Left, top, width, height in CSS pixels.
    pub rect: [f64; 4],
}

/// The outline and tag colours, cycled so neighbours differ.
const COLOURS: [Rgba<u8>; 4] = [
    Rgba([220, 38, 38, 255]),
    Rgba([37, 99, 235, 255]),
    Rgba([22, 163, 74, 255]),
    Rgba([147, 51, 234, 255]),
];
const WHITE: Rgba<u8> = Rgba([255, 255, 255, 255]);

/// A 3×5 bitmap font for what labels hold: `e` and the digits. Each row is
/// three bits, the high bit leftmost.
fn glyph(c: char) -> Option<[u8; 5]> {
    Some(match c {
        'e' => [0b111, 0b100, 0b111, 0b100, 0b111],
        '0' => [0b111, 0b101, 0b101, 0b101, 0b111],
        '1' => [0b010, 0b110, 0b010, 0b010, 0b111],
        '2' => [0b111, 0b001, 0b111, 0b100, 0b111],
        '3' => [0b111, 0b001, 0b111, 0b001, 0b111],
        '4' => [0b101, 0b101, 0b111, 0b001, 0b001],
        '5' => [0b111, 0b100, 0b111, 0b001, 0b111],
        '6' => [0b111, 0b100, 0b111, 0b101, 0b111],
        '7' => [0b111, 0b001, 0b010, 0b010, 0b010],
        '8' => [0b111, 0b101, 0b111, 0b101, 0b111],
        '9' => [0b111, 0b101, 0b111, 0b001, 0b111],
        _ => return None,
    })
}

fn fill(img: &mut RgbaImage, x0: i64, y0: i64, x1: i64, y1: i64, colour: Rgba<u8>) {
    let (w, h) = (i64::from(img.width()), i64::from(img.height()));
    for y in y0.max(0)..y1.min(h) {
        for x in x0.max(0)..x1.min(w) {
            img.put_pixel(x as u32, y as u32, colour);
        }
    }
}

/// Draws `refs` onto the PNG `png`, whose pixels are `scale` times CSS
/// pixels (the device pixel ratio); returns the new PNG. Boxes are clipped
/// to the image.
///
/// # Errors
/// [`LumenError::InvalidData`] for bytes that are no PNG.
pub fn annotate_png(png: &[u8], refs: &[RefBox], scale: f64) -> Result<Vec<u8>> {
    let mut img = image::load_from_memory_with_format(png, image::ImageFormat::Png)
        .map_err(|e| LumenError::invalid_data("screenshot", e.to_string()))?
        .to_rgba8();
    let scale = if scale.is_finite() && scale > 0.0 {
        scale
    } else {
        1.0
    };
    let line = (2.0 * scale).round().max(1.0) as i64;
    let dot = (2.0 * scale).round().max(1.0) as i64;
    for (i, r) in refs.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let [x, y, w, h] = r.rect.map(|v| (v * scale).round() as i64);
        // The outline.
        fill(&mut img, x, y, x + w, y + line, colour);
        fill(&mut img, x, y + h - line, x + w, y + h, colour);
        fill(&mut img, x, y, x + line, y + h, colour);
        fill(&mut img, x + w - line, y, x + w, y + h, colour);
        // The tag: the label in white on the colour, inside the box's
        // top-left corner (so it stays on the image for boxes at an edge).
        let glyphs: Vec<[u8; 5]> = r.label.chars().filter_map(glyph).collect();
        let pad = dot;
        let tag_w = glyphs.len() as i64 * 4 * dot - dot + 2 * pad;
        let tag_h = 5 * dot + 2 * pad;
        let (tx, ty) = (x.max(0), y.max(0));
        fill(&mut img, tx, ty, tx + tag_w, ty + tag_h, colour);
        for (n, g) in glyphs.iter().enumerate() {
            let gx = tx + pad + n as i64 * 4 * dot;
            for (row, bits) in g.iter().enumerate() {
                for col in 0..3 {
                    if bits & (0b100 >> col) != 0 {
                        let px = gx + col * dot;
                        let py = ty + pad + row as i64 * dot;
                        fill(&mut img, px, py, px + dot, py + dot, WHITE);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    PngEncoder::new(Cursor::new(&mut out))
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgba8,
        )
        .map_err(|e| LumenError::invalid_data("screenshot", e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank(w: u32, h: u32) -> Vec<u8> {
        let img = RgbaImage::from_pixel(w, h, Rgba([250, 250, 250, 255]));
        let mut out = Vec::new();
        PngEncoder::new(Cursor::new(&mut out))
            .write_image(img.as_raw(), w, h, image::ExtendedColorType::Rgba8)
            .unwrap();
        out
    }

    #[test]
    fn boxes_and_labels_are_drawn_and_clipped_to_the_image() {
        let refs = [
            RefBox {
                label: "e12".into(),
                rect: [10.0, 10.0, 40.0, 20.0],
            },
            // Half outside: clipped, no panic.
            RefBox {
                label: "e3".into(),
                rect: [90.0, 50.0, 40.0, 40.0],
            },
        ];
        let png = annotate_png(&blank(100, 60), &refs, 1.0).unwrap();
        let img = image::load_from_memory(&png).unwrap().to_rgba8();
        assert_eq!(img.dimensions(), (100, 60));
        // The outline's bottom edge, away from the tag.
        assert_eq!(*img.get_pixel(40, 29), COLOURS[0]);
        // Inside the box, away from tag and outline: untouched.
        assert_eq!(*img.get_pixel(40, 20), Rgba([250, 250, 250, 255]));
        // The tag holds white glyph pixels.
        let tag_white = (10..30).any(|x| (10..20).any(|y| *img.get_pixel(x, y) == WHITE));
        assert!(tag_white);
        assert_eq!(*img.get_pixel(90, 58), COLOURS[1]);
        assert!(annotate_png(b"not a png", &refs, 1.0).is_err());
    }
}

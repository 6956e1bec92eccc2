//! `run.gif`: every step's screenshot, scaled to at most 640 pixels wide,
//! with its actions drawn on it (rings for clicks, lines for drags and
//! scrolls, a bar under a field that was typed into), one second a frame.
//! Text is not drawn (no font is bundled); the report has it.

use std::io::Cursor;

use image::codecs::gif::{GifEncoder, Repeat};
use image::imageops::FilterType;
use image::{Delay, Frame, Rgba, RgbaImage};
use lumen_core::{Action, ScrollDirection};

use crate::timeline::{Outcome, Timeline};

const WIDTH: u32 = 640;
const RED: Rgba<u8> = Rgba([225, 29, 72, 255]);
const ORANGE: Rgba<u8> = Rgba([249, 115, 22, 255]);

/// The GIF, or `None` when there is no screenshot (or none decodes).
pub(crate) fn render(t: &Timeline) -> Option<Vec<u8>> {
    let mut frames = Vec::new();
    for step in &t.steps {
        let Some(shot) = &step.screenshot else {
            continue;
        };
        let Ok(decoded) = image::load_from_memory(&shot.image.data) else {
            continue;
        };
        let vw = shot.viewport.width.max(1) as f32;
        let height = (decoded.height() as f32 * WIDTH as f32 / decoded.width().max(1) as f32)
            .round()
            .max(1.0) as u32;
        let mut img = decoded
            .resize_exact(WIDTH, height, FilterType::Triangle)
            .to_rgba8();
        // Action coordinates are viewport CSS pixels.
        let k = WIDTH as f32 / vw;
        let p = |x: i32, y: i32| (x as f32 * k, y as f32 * k);
        let mut last = None;
        for a in &step.actions {
            let color = match &a.outcome {
                Outcome::Blocked(_) => ORANGE,
                _ => RED,
            };
            match &a.call.action {
                Action::Click { x, y, .. }
                | Action::DoubleClick { x, y, .. }
                | Action::TripleClick { x, y, .. }
                | Action::Hover { x, y } => {
                    let (cx, cy) = p(*x, *y);
                    ring(&mut img, cx, cy, 9.0, 3.0, color);
                    disc(&mut img, cx, cy, 2.5, color);
                    last = Some((cx, cy));
                }
                Action::Drag {
                    start_x,
                    start_y,
                    end_x,
                    end_y,
                    path,
                } => {
                    let mut points = vec![p(*start_x, *start_y)];
                    points.extend(path.iter().map(|q| p(q.x, q.y)));
                    points.push(p(*end_x, *end_y));
                    for w in points.windows(2) {
                        line(&mut img, w[0], w[1], 3.0, color);
                    }
                    disc(&mut img, points[0].0, points[0].1, 4.0, color);
                    last = points.last().copied();
                }
                Action::Scroll {
                    x, y, direction, ..
                } => {
                    let (cx, cy) = p(*x, *y);
                    let (dx, dy) = match direction {
                        ScrollDirection::Up => (0.0, -40.0),
                        ScrollDirection::Down => (0.0, 40.0),
                        ScrollDirection::Left => (-40.0, 0.0),
                        ScrollDirection::Right => (40.0, 0.0),
                    };
                    line(&mut img, (cx, cy), (cx + dx, cy + dy), 4.0, color);
                    disc(&mut img, cx + dx, cy + dy, 6.0, color);
                }
                Action::Type { .. } => {
                    if let Some((cx, cy)) = last {
                        line(
                            &mut img,
                            (cx - 20.0, cy + 14.0),
                            (cx + 60.0, cy + 14.0),
                            3.0,
                            color,
                        );
                    }
                }
                _ => {}
            }
        }
        frames.push(Frame::from_parts(
            img,
            0,
            0,
            Delay::from_numer_denom_ms(1000, 1),
        ));
    }
    if frames.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(Cursor::new(&mut out), 20);
        encoder.set_repeat(Repeat::Infinite).ok()?;
        encoder.encode_frames(frames).ok()?;
    }
    Some(out)
}

fn blend(img: &mut RgbaImage, x: i64, y: i64, color: Rgba<u8>) {
    if x >= 0 && y >= 0 && (x as u32) < img.width() && (y as u32) < img.height() {
        img.put_pixel(x as u32, y as u32, color);
    }
}

/// Pixels whose centre lies within `test` of the box around a shape.
fn paint(
    img: &mut RgbaImage,
    (x0, y0, x1, y1): (f32, f32, f32, f32),
    color: Rgba<u8>,
    test: impl Fn(f32, f32) -> bool,
) {
    for y in y0.floor() as i64..=y1.ceil() as i64 {
        for x in x0.floor() as i64..=x1.ceil() as i64 {
            if test(x as f32 + 0.5, y as f32 + 0.5) {
                blend(img, x, y, color);
            }
        }
    }
}

fn ring(img: &mut RgbaImage, cx: f32, cy: f32, r: f32, width: f32, color: Rgba<u8>) {
    let outer = r + width / 2.0;
    paint(
        img,
        (cx - outer, cy - outer, cx + outer, cy + outer),
        color,
        |x, y| ((x - cx).hypot(y - cy) - r).abs() <= width / 2.0,
    );
}

fn disc(img: &mut RgbaImage, cx: f32, cy: f32, r: f32, color: Rgba<u8>) {
    paint(img, (cx - r, cy - r, cx + r, cy + r), color, |x, y| {
        (x - cx).hypot(y - cy) <= r
    });
}

fn line(img: &mut RgbaImage, a: (f32, f32), b: (f32, f32), width: f32, color: Rgba<u8>) {
    let h = width / 2.0;
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len2 = (dx * dx + dy * dy).max(f32::EPSILON);
    paint(
        img,
        (
            a.0.min(b.0) - h,
            a.1.min(b.1) - h,
            a.0.max(b.0) + h,
            a.1.max(b.1) + h,
        ),
        color,
        |x, y| {
            let t = (((x - a.0) * dx + (y - a.1) * dy) / len2).clamp(0.0, 1.0);
            (x - (a.0 + t * dx)).hypot(y - (a.1 + t * dy)) <= h
        },
    );
}

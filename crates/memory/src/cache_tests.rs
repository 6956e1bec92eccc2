//! Tests of the action cache on real encoded screenshots-like images.

use std::io::Cursor;

use image::{ImageEncoder, Rgb, RgbImage};
use lumen_core::{ImageFormat, Modifiers, MouseButton, TerminateStatus};
use pretty_assertions::assert_eq;

use super::*;

type Block = (u32, u32, u32, u32, [u8; 3]);

/// Renders a page-like layout: white background and solid blocks.
fn render(blocks: &[Block]) -> RgbImage {
    let mut img = RgbImage::from_pixel(640, 400, Rgb([255, 255, 255]));
    for &(x, y, w, h, color) in blocks {
        for py in y..(y + h).min(400) {
            for px in x..(x + w).min(640) {
                img.put_pixel(px, py, Rgb(color));
            }
        }
    }
    img
}

fn png(img: &RgbImage) -> Image {
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut bytes))
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    Image::new(ImageFormat::Png, img.width(), img.height(), bytes)
}

fn jpeg(img: &RgbImage) -> Image {
    let mut bytes = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(Cursor::new(&mut bytes), 70)
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    Image::new(ImageFormat::Jpeg, img.width(), img.height(), bytes)
}

const DARK: [u8; 3] = [30, 30, 40];
const BLUE: [u8; 3] = [20, 90, 200];
const GREY: [u8; 3] = [170, 170, 170];

/// A search page: header on top, text lines, a search button on the left.
fn search_page() -> Vec<Block> {
    vec![
        (0, 0, 640, 60, DARK),
        (40, 100, 300, 12, GREY),
        (40, 130, 260, 12, GREY),
        (40, 160, 280, 12, GREY),
        (40, 220, 160, 44, BLUE),
    ]
}

/// The same page with a small difference (a caret in the text, a badge).
fn search_page_touched() -> Vec<Block> {
    let mut blocks = search_page();
    blocks.push((345, 100, 3, 12, DARK));
    blocks.push((600, 20, 14, 14, [220, 40, 40]));
    blocks
}

/// A different layout: header at the bottom, sidebar, button on the right.
fn moved_page() -> Vec<Block> {
    vec![
        (0, 340, 640, 60, DARK),
        (0, 0, 140, 340, GREY),
        (460, 60, 150, 44, BLUE),
        (200, 200, 400, 12, GREY),
    ]
}

fn click() -> Action {
    Action::Click {
        x: 120,
        y: 242,
        button: MouseButton::Left,
        modifiers: Modifiers::NONE,
    }
}

fn key(step: u32) -> CacheKey {
    CacheKey::new("https://shop.test/search?q=tea", "Find green tea", step)
}

#[test]
fn dhash_separates_layouts_and_tolerates_small_changes() {
    let a = dhash(&png(&render(&search_page()))).unwrap();
    let touched = dhash(&png(&render(&search_page_touched()))).unwrap();
    let reencoded = dhash(&jpeg(&render(&search_page()))).unwrap();
    let moved = dhash(&png(&render(&moved_page()))).unwrap();
    assert!(
        similarity(a, touched) >= DEFAULT_SIMILARITY,
        "{}",
        similarity(a, touched)
    );
    assert!(
        similarity(a, reencoded) >= DEFAULT_SIMILARITY,
        "{}",
        similarity(a, reencoded)
    );
    assert!(
        similarity(a, moved) < DEFAULT_SIMILARITY,
        "{}",
        similarity(a, moved)
    );
    assert_eq!(similarity(a, a), 1.0);
}

#[test]
fn a_click_is_replayed_on_the_same_layout_and_invalidated_on_a_changed_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    let page = png(&render(&search_page()));
    assert!(cache.store(&key(3), &click(), Some(&page)).unwrap());

    // Hit: the same page, and the same page slightly changed or re-encoded.
    for shot in [
        page.clone(),
        png(&render(&search_page_touched())),
        jpeg(&render(&search_page())),
    ] {
        match cache.lookup(&key(3), Some(&shot)).unwrap() {
            CacheLookup::Hit { action, similarity } => {
                assert_eq!(action, click());
                assert!(similarity.unwrap() >= DEFAULT_SIMILARITY);
            }
            other => panic!("expected a hit, got {other:?}"),
        }
    }

    // Invalidation: the layout moved, so the entry goes away.
    let moved = png(&render(&moved_page()));
    let CacheLookup::Invalidated { similarity } = cache.lookup(&key(3), Some(&moved)).unwrap()
    else {
        panic!("expected an invalidation");
    };
    assert!(similarity < DEFAULT_SIMILARITY);
    assert_eq!(
        cache.lookup(&key(3), Some(&page)).unwrap(),
        CacheLookup::Miss
    );
}

#[test]
fn steps_on_one_page_have_their_own_entries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    let page = png(&render(&search_page()));
    let typing = Action::Type {
        text: "green tea".into(),
    };
    let enter = Action::KeyPress {
        keys: vec!["Enter".into()],
    };
    assert!(cache.store(&key(0), &click(), Some(&page)).unwrap());
    assert!(cache.store(&key(1), &typing, None).unwrap());
    assert!(cache.store(&key(2), &enter, Some(&page)).unwrap());
    let hit = |step, shot: Option<&Image>| match cache.lookup(&key(step), shot).unwrap() {
        CacheLookup::Hit { action, .. } => Some(action),
        _ => None,
    };
    assert_eq!(hit(0, Some(&page)), Some(click()));
    // Keyboard actions do not depend on the layout.
    assert_eq!(hit(1, None), Some(typing));
    assert_eq!(hit(2, Some(&png(&render(&moved_page())))), Some(enter));
    assert_eq!(hit(4, Some(&page)), None);
}

#[test]
fn keys_are_normalised_and_specific() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    let goto = Action::Goto {
        url: "https://shop.test/tea".into(),
    };
    cache.store(&key(0), &goto, None).unwrap();
    let same = CacheKey::new(
        "https://shop.test/search?q=tea#results",
        "  find GREEN\ttea ",
        0,
    );
    assert_eq!(same, key(0));
    assert!(matches!(
        cache.lookup(&same, None).unwrap(),
        CacheLookup::Hit { .. }
    ));
    for other in [
        CacheKey::new("https://shop.test/search?q=coffee", "Find green tea", 0),
        CacheKey::new("https://shop.test/search?q=tea", "Find black tea", 0),
    ] {
        assert_eq!(cache.lookup(&other, None).unwrap(), CacheLookup::Miss);
    }
    // The cache lives on disk: a new handle sees the entry.
    let reopened = ActionCache::open(dir.path()).unwrap();
    assert!(matches!(
        reopened.lookup(&key(0), None).unwrap(),
        CacheLookup::Hit { .. }
    ));
}

#[test]
fn a_terminate_is_never_cached_or_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    let terminate = Action::Terminate {
        status: TerminateStatus::Success,
        result: "£3.49".into(),
    };
    assert!(!cache.store(&key(5), &terminate, None).unwrap());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Even an entry planted on disk is not replayed.
    let planted = CacheEntry {
        version: ENTRY_VERSION,
        key: key(5),
        action: terminate,
        screenshot_hash: None,
    };
    std::fs::write(
        dir.path().join(key(5).file_name()),
        serde_json::to_vec(&planted).unwrap(),
    )
    .unwrap();
    assert_eq!(cache.lookup(&key(5), None).unwrap(), CacheLookup::Miss);
    for observe in [Action::Screenshot, Action::Wait { ms: 100 }] {
        assert!(!cache.store(&key(6), &observe, None).unwrap());
    }
}

#[test]
fn coordinate_actions_need_a_screenshot() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    assert!(!cache.store(&key(0), &click(), None).unwrap());
    let page = png(&render(&search_page()));
    cache.store(&key(0), &click(), Some(&page)).unwrap();
    assert_eq!(cache.lookup(&key(0), None).unwrap(), CacheLookup::Miss);
}

#[test]
fn corrupt_entries_are_misses_and_bad_screenshots_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ActionCache::open(dir.path()).unwrap();
    std::fs::write(dir.path().join(key(0).file_name()), "{truncated").unwrap();
    assert_eq!(cache.lookup(&key(0), None).unwrap(), CacheLookup::Miss);
    let garbage = Image::new(ImageFormat::Png, 10, 10, vec![1, 2, 3]);
    let err = cache.store(&key(1), &click(), Some(&garbage)).unwrap_err();
    assert_eq!(err.code(), lumen_core::ErrorCode::InvalidData);
    // Overwriting a corrupt entry works.
    let page = png(&render(&search_page()));
    assert!(cache.store(&key(0), &click(), Some(&page)).unwrap());
    assert!(matches!(
        cache.lookup(&key(0), Some(&page)).unwrap(),
        CacheLookup::Hit { .. }
    ));
}

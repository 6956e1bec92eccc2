//! [`ActionCache`]: an on-disk cache of the actions that worked, so a
//! repeated task can replay them without asking the model.
//!
//! - **Key**: (URL without fragment, instruction with whitespace collapsed
//!   and case folded, step position). The step is part of the key so that
//!   several steps on one page do not overwrite each other.
//! - **Screenshot guard**: for actions aimed at coordinates (clicks, hover,
//!   scroll, drag, mouse down/up) the entry keeps a 64-bit difference hash
//!   ([`dhash`]) of the screenshot it was taken on. A lookup on a screenshot
//!   whose hash is less similar than the threshold (default 0.92, i.e. at
//!   most 5 of 64 bits differ) invalidates the entry: the layout changed, so
//!   the old coordinates may now hit something else.
//! - **Never cached**: `terminate` (replaying an old answer would end a run
//!   without looking at the page), and actions that only observe or only
//!   touch the loop (state writes, folds, delegation, waits, screenshots).
//!
//! Each entry is one small JSON file named by a stable hash of its key,
//! written atomically. An unreadable entry is a miss, never an error.

use std::fs;
use std::path::{Path, PathBuf};

use image::imageops::FilterType;
use lumen_core::{Action, Image, LumenError, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil;

/// The default similarity a screenshot must reach for a coordinate action
/// to be replayed.
pub const DEFAULT_SIMILARITY: f64 = 0.92;
const ENTRY_VERSION: u32 = 1;
const WHAT: &str = "action cache entry";

/// Where in which task an action was taken.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CacheKey {
    /// The page URL, without its fragment.
    pub url: String,
    /// The instruction, whitespace collapsed, lower case.
    pub instruction: String,
    /// The step position in the run.
    pub step: u32,
}

impl CacheKey {
    /// A normalised key.
    pub fn new(url: &str, instruction: &str, step: u32) -> Self {
        let url = url.trim();
        let url = url.split_once('#').map_or(url, |(u, _)| u).to_owned();
        let instruction = instruction
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        Self {
            url,
            instruction,
            step,
        }
    }

    fn file_name(&self) -> String {
        let mut h = Fnv64::new();
        h.write(self.url.as_bytes());
        h.write(&[0]);
        h.write(self.instruction.as_bytes());
        h.write(&[0]);
        h.write(&self.step.to_le_bytes());
        format!("{:016x}.json", h.finish())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheEntry {
    version: u32,
    key: CacheKey,
    action: Action,
    /// Difference hash of the screenshot, 16 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    screenshot_hash: Option<String>,
}

/// The result of a lookup.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheLookup {
    /// Replay this action. `similarity` is set for coordinate actions.
    Hit {
        /// The cached action.
        action: Action,
        /// How alike the screenshots were (0–1), for coordinate actions.
        similarity: Option<f64>,
    },
    /// Nothing usable is cached for this key.
    Miss,
    /// An entry existed but the screenshot changed too much; it was removed.
    Invalidated {
        /// How alike the screenshots were (0–1).
        similarity: f64,
    },
}

/// The on-disk action cache.
#[derive(Debug, Clone)]
pub struct ActionCache {
    dir: PathBuf,
    threshold: f64,
}

impl ActionCache {
    /// Opens (creating if needed) a cache in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| {
            LumenError::config(
                dir.display().to_string(),
                format!("cannot create the action cache directory: {e}"),
            )
        })?;
        Ok(Self {
            dir,
            threshold: DEFAULT_SIMILARITY,
        })
    }

    /// Sets the similarity a screenshot must reach (0–1).
    pub fn with_threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold.clamp(0.0, 1.0);
        self
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether `action` may be cached at all.
    pub fn is_cacheable(action: &Action) -> bool {
        matches!(
            action,
            Action::Click { .. }
                | Action::DoubleClick { .. }
                | Action::TripleClick { .. }
                | Action::Drag { .. }
                | Action::Hover { .. }
                | Action::MouseDown { .. }
                | Action::MouseUp { .. }
                | Action::Scroll { .. }
                | Action::Type { .. }
                | Action::KeyPress { .. }
                | Action::HoldKey { .. }
                | Action::Goto { .. }
                | Action::Back
                | Action::Forward
        )
    }

    /// Whether replaying `action` depends on the page layout.
    pub fn needs_screenshot(action: &Action) -> bool {
        action.point().is_some()
            || matches!(action, Action::MouseDown { .. } | Action::MouseUp { .. })
    }

    fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Stores an action that worked. Returns `Ok(false)` when the action is
    /// not cacheable, or is a coordinate action and no screenshot was
    /// given. An undecodable screenshot is an [`LumenError::InvalidData`].
    pub fn store(
        &self,
        key: &CacheKey,
        action: &Action,
        screenshot: Option<&Image>,
    ) -> Result<bool> {
        if !Self::is_cacheable(action) {
            return Ok(false);
        }
        let hash = match (Self::needs_screenshot(action), screenshot) {
            (true, None) => return Ok(false),
            (_, Some(img)) => Some(format!("{:016x}", dhash(img)?)),
            (false, None) => None,
        };
        let entry = CacheEntry {
            version: ENTRY_VERSION,
            key: key.clone(),
            action: action.clone(),
            screenshot_hash: hash,
        };
        let text = serde_json::to_vec(&entry)
            .map_err(|e| LumenError::invalid_data(WHAT, format!("cannot serialise: {e}")))?;
        fsutil::write_atomic(&self.path(key), &text, WHAT)?;
        Ok(true)
    }

    /// Looks up the action for `key` on the page shown by `screenshot`.
    pub fn lookup(&self, key: &CacheKey, screenshot: Option<&Image>) -> Result<CacheLookup> {
        let path = self.path(key);
        let Some(entry) = self.read_entry(&path, key) else {
            return Ok(CacheLookup::Miss);
        };
        // Entries written by hand or by another tool are held to the same
        // rules as ours: a terminate is never replayed.
        if !Self::is_cacheable(&entry.action) {
            return Ok(CacheLookup::Miss);
        }
        if !Self::needs_screenshot(&entry.action) {
            return Ok(CacheLookup::Hit {
                action: entry.action,
                similarity: None,
            });
        }
        let (Some(stored), Some(current)) = (
            entry
                .screenshot_hash
                .as_deref()
                .and_then(|h| u64::from_str_radix(h, 16).ok()),
            screenshot,
        ) else {
            return Ok(CacheLookup::Miss);
        };
        let similarity = similarity(stored, dhash(current)?);
        if similarity >= self.threshold {
            Ok(CacheLookup::Hit {
                action: entry.action,
                similarity: Some(similarity),
            })
        } else {
            self.remove(key)?;
            Ok(CacheLookup::Invalidated { similarity })
        }
    }

    /// Removes the entry for `key` (after a replayed action failed).
    pub fn remove(&self, key: &CacheKey) -> Result<()> {
        match fs::remove_file(self.path(key)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LumenError::config(
                self.dir.display().to_string(),
                format!("cannot remove an action cache entry: {e}"),
            )),
        }
    }

    fn read_entry(&self, path: &Path, key: &CacheKey) -> Option<CacheEntry> {
        let text = match fsutil::read_optional(path, WHAT) {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "action cache entry unreadable; treated as a miss");
                return None;
            }
        };
        match serde_json::from_str::<CacheEntry>(&text) {
            // A different key under the same file name is a hash collision.
            Ok(entry) if entry.version == ENTRY_VERSION && entry.key == *key => Some(entry),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "corrupt action cache entry; treated as a miss");
                None
            }
        }
    }
}

/// A 64-bit difference hash of an image: the picture is reduced to 9×8
/// grey pixels and each bit says whether a pixel is brighter than its right
/// neighbour. Similar layouts give hashes that differ in few bits.
pub fn dhash(image: &Image) -> Result<u64> {
    let format = match image.format {
        lumen_core::ImageFormat::Png => image::ImageFormat::Png,
        lumen_core::ImageFormat::Jpeg => image::ImageFormat::Jpeg,
    };
    let decoded = image::load_from_memory_with_format(&image.data, format)
        .map_err(|e| LumenError::invalid_data("screenshot", format!("cannot decode it: {e}")))?;
    let grey = decoded.to_luma8();
    let small = image::imageops::resize(&grey, 9, 8, FilterType::Triangle);
    let mut hash = 0u64;
    for y in 0..8 {
        for x in 0..8 {
            let left = small.get_pixel(x, y).0[0];
            let right = small.get_pixel(x + 1, y).0[0];
            hash = (hash << 1) | u64::from(left > right);
        }
    }
    Ok(hash)
}

/// The share of equal bits of two hashes (1.0: identical).
pub fn similarity(a: u64, b: u64) -> f64 {
    1.0 - f64::from((a ^ b).count_ones()) / 64.0
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust versions and
/// runs, for file names.
struct Fnv64(u64);

impl Fnv64 {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;

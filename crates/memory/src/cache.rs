//! [`ActionCache`]: successful runs compiled into replayable scripts, so a
//! repeated task runs again without asking the model.
//!
//! - **Key**: the run's start URL (without its fragment), its instruction
//!   as given (trimmed: its case and spacing can be the very text a step
//!   types) and a hash of the caller's extra system prompt, which can carry
//!   the task's data too. The loop keys on the instruction with secret
//!   values as placeholders. One script a key; a later success of the same
//!   task replaces it.
//! - **A script** ([`RunScript`]) is the run's steps in order, each with the
//!   actions that worked on it and the guards that say whether the page is
//!   still the one they were taken on:
//!   - the step's URL and screenshot size must be the same;
//!   - a perceptual hash of its screenshot ([`dhash`]) must be at least as
//!     similar as the threshold (default 0.92: at most 5 of 64 bits differ);
//!   - each action aimed at a point keeps the element it hit (tag, role,
//!     accessible name and the text of its row, from the effect receipt):
//!     the element at that point must be the same before the action is
//!     replayed, so a moved button, or the same button on another row, is
//!     never clicked blind; typing keeps the element with the focus it went
//!     into, which must have the focus before the text is replayed; an
//!     action whose element is unknown ends the script before its step;
//!   - the step that ends the run keeps a hash of the page's visible text:
//!     the answer, and state written on that step, are replayed only on a
//!     page that reads the same (state written earlier ends the script).
//! - **What is kept**: actions that ran and worked (blocked and failed ones
//!   are left out). Observations (screenshots, page reads, zooms) need no
//!   replay and are dropped; a step that needs a live page reference, a tab,
//!   a dialog, a file or a sub-task ends the script before it (see
//!   [`replay_kind`]).
//!
//! Each script is one JSON file named by a stable hash of its key, written
//! atomically and readable by its owner only. A script is a program the
//! browser will run: the cache refuses a folder another user owns and makes
//! the user's own private. An unreadable, oversized or foreign file (another
//! owner, writable by others, a link, an action no recorder keeps, an
//! action without its element) is a miss, never an error. The loop scrubs secret values out of a script before it is saved.

use std::fs;
use std::path::{Path, PathBuf};

use lumen_core::{Action, ActionRecord, ElementInfo, Image, LumenError, Result, SemanticStep};
use serde::{Deserialize, Serialize};

use crate::fsutil;

/// The default similarity a screenshot must reach for its step to replay.
pub const DEFAULT_SIMILARITY: f64 = 0.92;
/// 3: targets keep a hash of their row's text (scripts without it could
/// not tell one row's control from another's, and are misses).
const SCRIPT_VERSION: u32 = 3;
const WHAT: &str = "run script";

/// The largest script file read (a real one is a few kilobytes a step).
const MAX_SCRIPT_BYTES: u64 = 4 << 20;

/// Which task a script belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScriptKey {
    /// The URL the run started on, without its fragment.
    pub url: String,
    /// The instruction, trimmed.
    pub instruction: String,
    /// A hash of the caller's extra system prompt, 16 hex digits, when
    /// there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

impl ScriptKey {
    /// The key of `instruction` started on `url`.
    pub fn new(url: &str, instruction: &str) -> Self {
        Self {
            url: without_fragment(url).to_owned(),
            instruction: instruction.trim().to_owned(),
            prompt: None,
        }
    }

    /// The key with the caller's extra system prompt (`None`: none).
    pub fn with_prompt(mut self, prompt: Option<&str>) -> Self {
        self.prompt = prompt
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| hex(text_hash(p)));
        self
    }

    fn file_name(&self) -> String {
        let mut h = Fnv64::new();
        h.write(self.url.as_bytes());
        h.write(&[0]);
        h.write(self.instruction.as_bytes());
        if let Some(p) = &self.prompt {
            h.write(&[0]);
            h.write(p.as_bytes());
        }
        format!("{:016x}.json", h.finish())
    }
}

fn without_fragment(url: &str) -> &str {
    let url = url.trim();
    url.split_once('#').map_or(url, |(u, _)| u)
}

/// A successful run, compiled for replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunScript {
    /// The file format's version.
    pub version: u32,
    /// The task.
    pub key: ScriptKey,
    /// The steps, in order.
    pub steps: Vec<ScriptStep>,
}

/// One step of a script and the guards of the page it was taken on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptStep {
    /// The page's URL (as the loop showed it: secrets as placeholders).
    pub url: String,
    /// The screenshot's size in pixels.
    pub width: u32,
    /// The screenshot's height in pixels.
    pub height: u32,
    /// [`dhash`] of the screenshot, 16 hex digits.
    pub screen: String,
    /// A hash of the page's visible text, 16 hex digits: set on the step
    /// that ends the run, whose answer depends on what the page says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_text: Option<String>,
    /// The actions, in the order they ran.
    pub actions: Vec<ScriptAction>,
}

/// An action of a script, with the element it was aimed at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptAction {
    /// The action, as the model gave it (secrets as placeholders).
    pub action: Action,
    /// The element under the action's point when it ran (for typing, the
    /// element with the focus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ScriptTarget>,
}

/// Whether `action` is replayed only onto the element it was taken on: the
/// one at its point (a scroll's wheel only moves what is under it, and its
/// receipt names no element), or for typing, the one with the focus.
pub fn guarded_by_element(action: &Action) -> bool {
    match action {
        Action::Scroll { .. } => false,
        Action::Type { .. } => true,
        a => a.point().is_some(),
    }
}

impl ScriptAction {
    /// Whether a recorder could have kept it: a kind that is replayed, and
    /// for an action guarded by its element, that element.
    fn recordable(&self) -> bool {
        replay_kind(&self.action) == ReplayKind::Replay
            && (!guarded_by_element(&self.action) || self.target.is_some())
    }
}

/// The accessible identity of an element: enough to tell a moved or
/// replaced control from the one an action was aimed at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptTarget {
    /// Lower-case tag name.
    pub tag: String,
    /// ARIA role, explicit or implicit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Accessible name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A hash of the text of the row the element sits in
    /// ([`ElementInfo::context`]), 16 hex digits: the same "Delete" on
    /// another row is another target. A hash, so the script file does not
    /// keep more of the page than it needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

impl From<&ElementInfo> for ScriptTarget {
    fn from(e: &ElementInfo) -> Self {
        Self {
            tag: e.tag.clone(),
            role: e.role.clone(),
            name: e.name.clone(),
            context: e.context.as_deref().map(|c| hex(text_hash(c))),
        }
    }
}

impl ScriptTarget {
    /// The focus typing went into: `None` is the page itself (its body).
    pub fn of_focus(focus: Option<&ElementInfo>) -> Self {
        focus.map_or_else(
            || Self {
                tag: "body".into(),
                role: None,
                name: None,
                context: None,
            },
            Self::from,
        )
    }

    /// Whether `element` is this target.
    pub fn matches(&self, element: &ElementInfo) -> bool {
        *self == Self::from(element)
    }
}

/// How a script treats an action kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayKind {
    /// Replayed as recorded.
    Replay,
    /// Left out: it only observed, so replaying it changes nothing.
    Skip,
    /// Cannot be replayed without the model (a live page reference, a tab,
    /// a dialog, a file, a script, a sub-task): the script ends before the
    /// step that holds it.
    End,
}

/// How a script treats `action`.
pub fn replay_kind(action: &Action) -> ReplayKind {
    use Action as A;
    match action {
        A::Click { .. }
        | A::DoubleClick { .. }
        | A::TripleClick { .. }
        | A::Drag { .. }
        | A::Hover { .. }
        | A::MouseDown { .. }
        | A::MouseUp { .. }
        | A::Scroll { .. }
        | A::Type { .. }
        | A::KeyPress { .. }
        | A::KeyDown { .. }
        | A::KeyUp { .. }
        | A::HoldKey { .. }
        | A::Wait { .. }
        | A::Goto { .. }
        | A::Back
        | A::Forward
        | A::Reload
        | A::WriteState { .. }
        | A::Terminate { .. } => ReplayKind::Replay,
        A::Screenshot
        | A::CursorPosition
        | A::Zoom { .. }
        | A::ReadPage { .. }
        | A::FindElements { .. }
        | A::PageText
        | A::ListTabs
        | A::ReadConsole
        | A::ReadNetwork
        | A::Fold { .. } => ReplayKind::Skip,
        // Refs, tabs, dialogs, files, scripts, sub-tasks, invalid calls, and
        // any kind added later until it is judged safe to replay.
        _ => ReplayKind::End,
    }
}

/// Whether a step gave the run's answer (a `Terminate` that ran).
fn step_ends_run(actions: &[ActionRecord]) -> bool {
    actions.iter().any(|r| {
        r.blocked.is_none() && r.execution.ok && matches!(r.call.action, Action::Terminate { .. })
    })
}

impl RunScript {
    /// Compiles a successful run: `steps` is its semantic history and
    /// `final_text` the visible text of the page it ended on. `Ok(None)`
    /// when nothing of it can be replayed (no step kept a screenshot, or the
    /// first step already needs the model). Decodes every screenshot: run it
    /// off the async threads.
    pub fn compile(
        key: ScriptKey,
        steps: &[SemanticStep],
        final_text: &str,
    ) -> Result<Option<Self>> {
        let mut out = Vec::new();
        'steps: for step in steps {
            let Some(shot) = &step.screenshot else {
                // A step restored without its screenshot cannot be guarded.
                break;
            };
            let mut actions = Vec::new();
            let mut ends_run = false;
            for record in &step.actions {
                if record.blocked.is_some() || !record.execution.ok {
                    continue;
                }
                match replay_kind(&record.call.action) {
                    ReplayKind::Skip => continue,
                    ReplayKind::End => break 'steps,
                    ReplayKind::Replay => {}
                }
                ends_run |= matches!(record.call.action, Action::Terminate { .. });
                let effect = record.execution.effect.as_ref();
                let target = match &record.call.action {
                    // Typing keeps the focus it went into (the page itself
                    // when no element had it): the one before the keys, as
                    // a page may move it as they arrive.
                    Action::Type { .. } => {
                        effect.map(|e| ScriptTarget::of_focus(e.focus_before.as_ref()))
                    }
                    a if a.point().is_some() => effect
                        .and_then(|e| e.target.as_ref())
                        .map(ScriptTarget::from),
                    _ => None,
                };
                // An action whose element is unknown (receipts off, a probe
                // that could not run) could only be replayed blind.
                if guarded_by_element(&record.call.action) && target.is_none() {
                    break 'steps;
                }
                // State written mid-run holds what the page said then; only
                // the answer's step has its page's text checked.
                if matches!(record.call.action, Action::WriteState { .. })
                    && !step_ends_run(&step.actions)
                {
                    break 'steps;
                }
                actions.push(ScriptAction {
                    action: record.call.action.clone(),
                    target,
                });
                if ends_run {
                    break;
                }
            }
            if actions.is_empty() {
                continue;
            }
            out.push(ScriptStep {
                url: step.url.clone(),
                width: shot.width,
                height: shot.height,
                screen: hex(dhash(shot)?),
                page_text: ends_run.then(|| hex(text_hash(final_text))),
                actions,
            });
            if ends_run {
                break;
            }
        }
        Ok((!out.is_empty()).then_some(Self {
            version: SCRIPT_VERSION,
            key,
            steps: out,
        }))
    }
}

impl ScriptStep {
    /// Whether `url` is this step's page (fragments aside).
    pub fn same_url(&self, url: &str) -> bool {
        without_fragment(&self.url) == without_fragment(url)
    }

    /// How alike `screenshot` is to this step's (0–1); 0 for another size
    /// or an unreadable stored hash.
    pub fn similarity(&self, screenshot: &Image) -> Result<f64> {
        if (screenshot.width, screenshot.height) != (self.width, self.height) {
            return Ok(0.0);
        }
        let Ok(stored) = u64::from_str_radix(&self.screen, 16) else {
            return Ok(0.0);
        };
        // A uniform frame (a blank or loading page) hashes to 0, as every
        // other does: it guards no action aimed at a point.
        if stored == 0 && self.actions.iter().any(|a| a.action.point().is_some()) {
            return Ok(0.0);
        }
        Ok(similarity(stored, dhash(screenshot)?))
    }

    /// Whether `text` is the page text this step ended the run on (true
    /// for a step that did not end it).
    pub fn text_matches(&self, text: &str) -> bool {
        self.page_text
            .as_deref()
            .is_none_or(|h| h == hex(text_hash(text)))
    }
}

/// The on-disk script cache.
#[derive(Debug, Clone)]
pub struct ActionCache {
    dir: PathBuf,
    threshold: f64,
}

impl ActionCache {
    /// Opens (creating if needed, readable by its owner only) a cache in
    /// `dir`.
    ///
    /// # Errors
    /// [`LumenError::Config`] when the folder cannot be created, or when
    /// another user owns it: whoever can put a script there drives the
    /// browser. A folder of the user's own that others may read or write
    /// is made private (0700).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        let fail = |why: String| LumenError::config(dir.display().to_string(), why);
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&dir)
            .map_err(|e| fail(format!("cannot create the action cache directory: {e}")))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            let meta = fs::metadata(&dir)
                .map_err(|e| fail(format!("cannot read the action cache directory: {e}")))?;
            if meta.uid() != rustix::process::geteuid().as_raw() {
                return Err(fail(
                    "the action cache directory belongs to another user, who could place \
                     scripts in it for the browser to run; use a folder of your own"
                        .into(),
                ));
            }
            // The user's own folder (made under a umask that lets the
            // group write, as `mkdir` or a server's subfolder may be) is
            // made private; files already in it are judged one by one
            // when loaded.
            if meta.mode() & 0o077 != 0 {
                use std::os::unix::fs::PermissionsExt as _;
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(|e| {
                    fail(format!(
                        "others may write to the action cache directory (mode {:o}), and \
                         whoever can place a script there drives the browser; it cannot be \
                         made private: {e}",
                        meta.mode() & 0o777
                    ))
                })?;
            }
        }
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

    /// The similarity a screenshot must reach for its step to replay.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &ScriptKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Stores `script`, replacing the one of the same task. The caller has
    /// scrubbed secrets out of it.
    pub fn save(&self, script: &RunScript) -> Result<()> {
        let text = serde_json::to_vec_pretty(script)
            .map_err(|e| LumenError::invalid_data(WHAT, format!("cannot serialise: {e}")))?;
        let path = self.path(&script.key);
        fsutil::write_atomic(&path, &text, WHAT)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).map_err(|e| {
                LumenError::config(
                    path.display().to_string(),
                    format!("cannot protect it: {e}"),
                )
            })?;
        }
        Ok(())
    }

    /// The script of `key`'s task, if one was saved and can be read.
    pub fn load(&self, key: &ScriptKey) -> Option<RunScript> {
        let path = self.path(key);
        if let Ok(meta) = fs::symlink_metadata(&path) {
            if meta.len() > MAX_SCRIPT_BYTES {
                tracing::warn!(path = %path.display(), bytes = meta.len(), "run script too large; treated as a miss");
                return None;
            }
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt as _;
                if meta.uid() != rustix::process::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
                    tracing::warn!(path = %path.display(), "run script of another user, or writable by others; treated as a miss");
                    return None;
                }
            }
        }
        let text = match fsutil::read_optional(&path, WHAT) {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "run script unreadable; treated as a miss");
                return None;
            }
        };
        match serde_json::from_str::<RunScript>(&text) {
            // A different key under the same file name is a hash collision;
            // a step without actions, an action no recorder keeps, or a
            // pointer action without its element is no script's (a crafted
            // file).
            Ok(s)
                if s.version == SCRIPT_VERSION
                    && s.key == *key
                    && s.steps.iter().all(|step| {
                        !step.actions.is_empty()
                            && step.actions.iter().all(ScriptAction::recordable)
                    }) =>
            {
                Some(s)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "corrupt run script; treated as a miss");
                None
            }
        }
    }

    /// Removes the script of `key`'s task.
    pub fn remove(&self, key: &ScriptKey) -> Result<()> {
        match fs::remove_file(self.path(key)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LumenError::config(
                self.dir.display().to_string(),
                format!("cannot remove a run script: {e}"),
            )),
        }
    }
}

/// A 64-bit difference hash of an image: the picture is averaged into 9×8
/// grey cells and each bit says whether a cell is brighter than its right
/// neighbour. Similar layouts give hashes that differ in few bits.
pub fn dhash(image: &Image) -> Result<u64> {
    let (grey, w, h) = grey_pixels(image)?;
    if w == 0 || h == 0 || grey.len() < w * h {
        return Err(LumenError::invalid_data("screenshot", "it has no pixels"));
    }
    // One pass over the pixels, each added to its cell (a box filter: the
    // same for every decoder, and cheap enough for the replay's hot path).
    let column: Vec<usize> = (0..w).map(|x| (x * 9) / w).collect();
    let mut sums = [[0u64; 9]; 8];
    let mut counts = [[0u64; 9]; 8];
    for (y, row) in grey.chunks_exact(w).take(h).enumerate() {
        let cy = (y * 8) / h;
        for (x, p) in row.iter().enumerate() {
            sums[cy][column[x]] += u64::from(*p);
            counts[cy][column[x]] += 1;
        }
    }
    let mut hash = 0u64;
    for (s, c) in sums.iter().zip(&counts) {
        let mean = |i: usize| s[i] * 1024 / c[i].max(1);
        for x in 0..8 {
            hash = (hash << 1) | u64::from(mean(x) > mean(x + 1));
        }
    }
    Ok(hash)
}

/// The image as one grey byte a pixel, with its width and height. A JPEG
/// is decoded straight to grey (no colour conversion to undo).
fn grey_pixels(image: &Image) -> Result<(Vec<u8>, usize, usize)> {
    let bad = |e: String| LumenError::invalid_data("screenshot", format!("cannot decode it: {e}"));
    match image.format {
        lumen_core::ImageFormat::Jpeg => {
            use zune_jpeg::zune_core::bytestream::ZCursor;
            use zune_jpeg::zune_core::colorspace::ColorSpace;
            use zune_jpeg::zune_core::options::DecoderOptions;
            let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::Luma);
            let mut decoder = zune_jpeg::JpegDecoder::new_with_options(
                ZCursor::new(image.data.as_ref()),
                options,
            );
            let pixels = decoder.decode().map_err(|e| bad(format!("{e:?}")))?;
            let (w, h) = decoder
                .dimensions()
                .ok_or_else(|| bad("no dimensions".into()))?;
            Ok((pixels, w, h))
        }
        lumen_core::ImageFormat::Png => {
            let grey = image::load_from_memory_with_format(&image.data, image::ImageFormat::Png)
                .map_err(|e| bad(e.to_string()))?
                .into_luma8();
            let (w, h) = (grey.width() as usize, grey.height() as usize);
            Ok((grey.into_raw(), w, h))
        }
    }
}

/// The share of equal bits of two hashes (1.0: identical).
pub fn similarity(a: u64, b: u64) -> f64 {
    1.0 - f64::from((a ^ b).count_ones()) / 64.0
}

fn text_hash(text: &str) -> u64 {
    let mut h = Fnv64::new();
    for word in text.split_whitespace() {
        h.write(word.as_bytes());
        h.write(b" ");
    }
    h.finish()
}

fn hex(v: u64) -> String {
    format!("{v:016x}")
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust versions and
/// runs, for file names and guards.
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

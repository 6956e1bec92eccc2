//! What a run folder records as the run goes: the event log (a
//! [`Recorder`] that appends each event as one JSON line) and the
//! screenshot files ([`ScreenshotFiles`]).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use lumen_core::{Image, RecordedEvent, Recorder, StreamEvent};

use crate::atomic::write_private;
use crate::layout::screenshot_name;

/// Saves a run's screenshots as files of its folder, named by
/// [`screenshot_name`]: each step's screenshots are counted, so a step's
/// second screenshot never overwrites its first. Every writer of a run
/// folder (the CLI's [`Trace`](crate::Trace), the server, the eval) saves
/// them through this, so [`render`](crate::render) finds them.
#[derive(Debug)]
pub struct ScreenshotFiles {
    dir: PathBuf,
    atomic: bool,
    counts: Mutex<BTreeMap<u32, usize>>,
}

impl ScreenshotFiles {
    /// Saves into the run folder `dir` (whose `screenshots/` folder must
    /// exist) with plain writes.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            atomic: false,
            counts: Mutex::default(),
        }
    }

    /// Writes each file atomically ([`write_private`]), for folders that
    /// others read while the run goes (the server serves screenshots live).
    pub fn atomic(mut self) -> Self {
        self.atomic = true;
        self
    }

    /// Saves `image` as the next screenshot of `step` and returns its name
    /// relative to the folder. A failed write still counts, so later names
    /// stay stable.
    pub fn save(&self, step: u32, image: &Image) -> std::io::Result<String> {
        let nth = {
            let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            let n = counts.entry(step).or_insert(0);
            *n += 1;
            *n - 1
        };
        let name = screenshot_name(step, nth, image.format.extension());
        let path = self.dir.join(&name);
        if self.atomic {
            write_private(&path, &image.data)?;
        } else {
            crate::private::private_options()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?
                .write_all(&image.data)?;
        }
        Ok(name)
    }
}

/// A recorder that appends each event as one JSON line to `path` (the event
/// log traces and replays are built from), live-only deltas left out
/// ([`StreamEvent::is_live_only`]). With `keep_images` false,
/// screenshot bytes are left out (`data` emptied) so the log stays small;
/// the caller saves screenshots as files. Write errors are logged once and
/// do not disturb the run.
pub fn jsonl_recorder(path: &Path, keep_images: bool) -> std::io::Result<Recorder> {
    let file = crate::private::private_options()
        .create(true)
        .append(true)
        .open(path)?;
    let writer = Mutex::new(std::io::BufWriter::new(file));
    let failed = AtomicBool::new(false);
    Ok(Arc::new(move |e: &RecordedEvent| {
        // Streamed deltas are live only; the complete text is logged.
        if e.event.is_live_only() {
            return;
        }
        let line = if keep_images {
            serde_json::to_string(e)
        } else {
            let mut e = e.clone();
            if let StreamEvent::Screenshot { screenshot, .. } = &mut e.event {
                screenshot.image.data = Arc::from(Vec::new());
            }
            serde_json::to_string(&e)
        };
        let written = line.map_err(std::io::Error::other).and_then(|l| {
            let mut w = writer
                .lock()
                .map_err(|_| std::io::Error::other("event log lock poisoned"))?;
            writeln!(w, "{l}")?;
            w.flush()
        });
        if let Err(err) = written
            && !failed.swap(true, Ordering::Relaxed)
        {
            tracing::warn!("the event log could not be written: {err}");
        }
    }))
}

#[cfg(test)]
mod tests {
    use lumen_core::{Image, ImageFormat, ImageScale, Screenshot, Size};

    use super::*;

    fn recorded(seq: u64, event: StreamEvent) -> RecordedEvent {
        RecordedEvent {
            seq,
            timestamp_ms: 1_000 + seq,
            event,
        }
    }

    #[test]
    fn screenshots_are_numbered_per_step() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("screenshots")).unwrap();
        for atomic in [false, true] {
            let files = ScreenshotFiles::new(dir.path());
            let files = if atomic { files.atomic() } else { files };
            let png = Image::new(ImageFormat::Png, 1, 1, vec![7u8; 3]);
            let names: Vec<String> = [0, 0, 1, 0]
                .into_iter()
                .map(|step| files.save(step, &png).unwrap())
                .collect();
            assert_eq!(
                names,
                [
                    "screenshots/step-001.png",
                    "screenshots/step-001-2.png",
                    "screenshots/step-002.png",
                    "screenshots/step-001-3.png",
                ]
            );
            assert_eq!(
                std::fs::read(dir.path().join(&names[1])).unwrap(),
                [7, 7, 7]
            );
        }
    }

    #[test]
    fn one_parseable_line_per_event_without_image_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let record = jsonl_recorder(&path, false).unwrap();
        record(&recorded(
            0,
            StreamEvent::StepStarted {
                step: 0,
                url: "about:blank".into(),
            },
        ));
        let shot = Screenshot {
            image: Image::new(ImageFormat::Png, 1, 1, vec![0u8; 4]),
            viewport: Size::new(1, 1),
            scale: ImageScale::IDENTITY,
        };
        record(&recorded(
            1,
            StreamEvent::Screenshot {
                step: 0,
                screenshot: shot,
            },
        ));
        // Streamed deltas are live only: not a line of the log.
        record(&recorded(
            1,
            StreamEvent::ReasoningDelta {
                step: 0,
                text: "thinking…".into(),
            },
        ));
        let lines: Vec<RecordedEvent> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].seq, lines[1].seq), (0, 1));
        let StreamEvent::Screenshot { screenshot, .. } = &lines[1].event else {
            panic!("the second line is the screenshot")
        };
        assert!(screenshot.image.data.is_empty());
    }
}

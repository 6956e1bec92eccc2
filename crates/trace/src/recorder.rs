//! The event log: a [`Recorder`] that appends each event as one JSON line.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lumen_core::{RecordedEvent, Recorder, StreamEvent};

/// A recorder that appends each event as one JSON line to `path` (the event
/// log traces and replays are built from). With `keep_images` false,
/// screenshot bytes are left out (`data` emptied) so the log stays small;
/// the caller saves screenshots as files. Write errors are logged once and
/// do not disturb the run.
pub fn jsonl_recorder(path: &Path, keep_images: bool) -> std::io::Result<Recorder> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let writer = Mutex::new(std::io::BufWriter::new(file));
    let failed = AtomicBool::new(false);
    Ok(Arc::new(move |e: &RecordedEvent| {
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

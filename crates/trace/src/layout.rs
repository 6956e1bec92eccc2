//! The run folder's layout: the names of what a run leaves behind, and
//! where a run's folder goes by default.
//!
//! - [`EVENTS`] (`events.jsonl`): the recorded events, one per line, images
//!   left out;
//! - [`SCREENSHOTS`]`/step-NNN.<ext>`: every step's screenshot (NNN counts
//!   steps from 1; a step's second and later screenshots get `-2`, `-3`, …),
//!   named by [`screenshot_name`];
//! - [`SESSION`] (`session.json`): the serialized session (resumable;
//!   secrets scrubbed);
//! - [`OPTIONS`] (`options.json`): what the run was asked to do (task,
//!   model, run options without secret values), for `lumen resume`;
//! - [`RESULT`] (`result.json`): how the run ended;
//! - [`REPORT`] (`report.html`): a self-contained report (opens offline);
//! - [`GIF`] (`run.gif`): the screenshots with the actions drawn on them.

use std::path::PathBuf;

use crate::clock::{compact_utc, unix_secs};

/// The event log: one JSON [`RecordedEvent`] a line, screenshot bytes left
/// out.
pub const EVENTS: &str = "events.jsonl";
/// The self-contained HTML report.
pub const REPORT: &str = "report.html";
/// The animated GIF of the screenshots with the actions drawn on them.
pub const GIF: &str = "run.gif";
/// The serialized session.
pub const SESSION: &str = "session.json";
/// The run's task, model and options (no secret values).
pub const OPTIONS: &str = "options.json";
/// The run's result without its history.
pub const RESULT: &str = "result.json";
/// The folder of screenshot files.
pub const SCREENSHOTS: &str = "screenshots";

/// The file name, relative to the trace folder, of screenshot number `nth`
/// (0-based) of step `step` (0-based, as recorded), with extension `ext`:
/// `screenshots/step-001.jpg`, then `screenshots/step-001-2.jpg`, ….
pub fn screenshot_name(step: u32, nth: usize, ext: &str) -> String {
    let suffix = if nth == 0 {
        String::new()
    } else {
        format!("-{}", nth + 1)
    };
    format!(
        "{SCREENSHOTS}/step-{:03}{suffix}.{ext}",
        u64::from(step) + 1
    )
}

/// The `lumen` binary's default trace folder for a task:
/// `./lumen-traces/<UTC timestamp>-<slug of the task>`.
pub fn default_dir(instruction: &str) -> PathBuf {
    PathBuf::from("lumen-traces").join(format!(
        "{}-{}",
        compact_utc(unix_secs()),
        slug(instruction)
    ))
}

/// Lower-case ASCII words of `text` joined by `-`, at most 40 characters
/// (`run` when there is none): a safe folder name for a task.
pub fn slug(text: &str) -> String {
    let mut s = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if s.len() + word.len() + 1 > 40 {
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&word.to_ascii_lowercase());
    }
    if s.is_empty() { "run".to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screenshot_names_count_steps_from_one() {
        assert_eq!(screenshot_name(0, 0, "png"), "screenshots/step-001.png");
        assert_eq!(screenshot_name(0, 1, "jpg"), "screenshots/step-001-2.jpg");
        assert_eq!(screenshot_name(41, 0, "png"), "screenshots/step-042.png");
    }

    #[test]
    fn default_folders_are_stamped_and_slugged() {
        let dir = default_dir("Find the price");
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(dir.starts_with("lumen-traces"));
        assert!(name.ends_with("Z-find-the-price"), "{name}");
    }

    #[test]
    fn slugs_are_short_and_safe() {
        assert_eq!(
            slug("Fill in the form, then submit!"),
            "fill-in-the-form-then-submit"
        );
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("日本"), "run");
        assert!(slug(&"word ".repeat(40)).len() <= 40);
    }
}

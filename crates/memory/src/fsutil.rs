//! Small file helpers shared by everything in this crate that persists data:
//! atomic writes (so a crash never leaves half a file) and reads that turn
//! every failure into a [`LumenError`] naming the file.

use std::fs;
use std::path::Path;

use lumen_core::{LumenError, Result};

/// Writes `bytes` to `path` atomically with the workspace's one writer,
/// readable by its owner only ([`lumen_trace::write_private`]): readers see
/// either the old content or the new, never a torn file, and no other user
/// reads a history, cache or workflow (they hold pages, screenshots and
/// what was typed).
///
/// `what` names the file for error messages ("history file").
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], what: &str) -> Result<()> {
    lumen_trace::write_private(path, bytes).map_err(|e| {
        LumenError::config(
            path.display().to_string(),
            format!("cannot write the {what}: {e}; choose a writable location"),
        )
    })
}

/// Reads a whole file as UTF-8 text; `Ok(None)` when it does not exist.
pub(crate) fn read_optional(path: &Path, what: &str) -> Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|e| {
            LumenError::invalid_data(
                format!("{what} {}", path.display()),
                format!("not UTF-8 text: {e}"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LumenError::invalid_data(
            format!("{what} {}", path.display()),
            format!("cannot read it: {e}"),
        )),
    }
}

/// Reads a whole file that must exist.
pub(crate) fn read_required(path: &Path, what: &str) -> Result<String> {
    read_optional(path, what)?.ok_or_else(|| {
        LumenError::invalid_data(
            format!("{what} {}", path.display()),
            "the file does not exist",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"one", "test file").unwrap();
        write_atomic(&path, b"two", "test file").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.json")]);
    }

    #[test]
    fn write_into_a_missing_directory_is_a_config_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("a.json");
        let err = write_atomic(&path, b"x", "test file").unwrap_err();
        assert_eq!(err.code(), lumen_core::ErrorCode::ConfigError);
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn reads_distinguish_missing_from_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_optional(&dir.path().join("nope"), "f").unwrap(), None);
        let err = read_required(&dir.path().join("nope"), "f").unwrap_err();
        assert_eq!(err.code(), lumen_core::ErrorCode::InvalidData);
        let bad = dir.path().join("bad");
        fs::write(&bad, [0xff, 0xfe, 0x00]).unwrap();
        let err = read_optional(&bad, "f").unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }
}

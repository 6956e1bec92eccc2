//! Atomic file writes, the one implementation every crate uses (private
//! ones, [`write_private`], for a run folder's files): a run
//! folder's artefacts, the server's run store, `lumen-memory`'s saved
//! state, the CLI's session files and the eval's results.
//!
//! A temporary file with a name unique to this process and call is written
//! in the same folder and synced, then renamed over the target, then the
//! folder is synced so the rename itself survives a crash. Readers see the
//! old content or the new, never a torn file, and two writers of one path
//! never share a temporary file.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files written concurrently by one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically (see the module docs). The parent
/// folder must exist. On failure the temporary file is removed and `path`
/// is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, bytes, fs::OpenOptions::new())
}

/// As [`write_atomic`], for a file only its owner may read: it is 0600 on
/// Unix from its creation on (never briefly readable by others). A run
/// folder's files are written so: they hold pages, screenshots and what
/// was typed.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, bytes, crate::private::private_options())
}

fn write_with(path: &Path, bytes: &[u8], mut options: fs::OpenOptions) -> std::io::Result<()> {
    let dir = parent_of(path);
    let tmp = temp_path(dir, path);
    let result = (|| {
        let mut file = options.write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        sync_dir(dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes a rename or a file creation in `dir` durable where the platform
/// lets a folder be opened and synced. Failing to do so does not lose data
/// already written, so errors are ignored.
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn temp_path(dir: &Path, path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "lumen".to_owned());
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_files_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"first, longer content").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"], "no temporary file is left");
    }

    #[test]
    fn a_missing_folder_is_an_error_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("x.json");
        assert!(write_atomic(&path, b"x").is_err());
        assert!(!dir.path().join("missing").exists());
    }

    #[test]
    fn concurrent_writers_of_one_path_use_distinct_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.json");
        std::thread::scope(|s| {
            for i in 0..8u8 {
                let path = &path;
                s.spawn(move || write_atomic(path, &[i; 64]).unwrap());
            }
        });
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 64);
        assert!(
            bytes.iter().all(|b| *b == bytes[0]),
            "one writer's whole content"
        );
    }
}

//! One process per data directory: an advisory lock on `<data-dir>/lock`.
//!
//! Two servers (or a server and `lumen ipc`/`lumen mcp`) on one data
//! directory would each mark the other's running runs `interrupted`, resume
//! them twice and interleave their event logs. The first to start takes an
//! exclusive `flock` on the lock file and writes its pid into it; a second
//! one finds the lock taken and refuses to start, naming that pid. The
//! kernel releases the lock when the holder's file is closed: when the
//! manager shuts down or is dropped, and when the process dies in any way
//! (a crash, `kill -9`), so a stale lock file never blocks a restart.

use std::fs::{File, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// The lock file's name under the data directory.
pub(crate) const LOCK_FILE: &str = "lock";

/// Why the data directory could not be locked.
#[derive(Debug)]
pub(crate) enum LockError {
    /// Another process holds it (its pid, when it could be read).
    Held { path: PathBuf, pid: Option<u32> },
    /// The lock file could not be opened or locked.
    Io(std::io::Error),
}

/// The held lock; released when dropped.
#[derive(Debug)]
pub(crate) struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock on `data_dir` (which must exist) without waiting.
    pub(crate) fn acquire(data_dir: &Path) -> Result<Self, LockError> {
        let path = data_dir.join(LOCK_FILE);
        let mut open = std::fs::OpenOptions::new();
        // Never truncate before holding the lock: the holder's pid is in it.
        open.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            open.mode(0o600);
            // A link planted in its place is refused, never followed (it
            // would have the pid written over the file it points to).
            open.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
        }
        let mut file = open.open(&path).map_err(LockError::Io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Held {
                    pid: text.trim().parse().ok(),
                    path,
                });
            }
            Err(TryLockError::Error(e)) => return Err(LockError::Io(e)),
        }
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .and_then(|()| file.flush());
        if let Err(e) = written {
            tracing::warn!(
                "could not write this process's pid into {}: {e}",
                path.display()
            );
        }
        Ok(Self { _file: file })
    }
}

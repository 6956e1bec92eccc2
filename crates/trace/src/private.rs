//! Folders and files only their owner may read (0700 and 0600 on Unix):
//! a run folder holds the instruction, the pages, the screenshots and what
//! was typed, so every writer of one (`lumen run`'s trace, the server's
//! run store, the eval) creates it through these.

use std::fs;
use std::path::Path;

/// Creates `dir` (and any missing parents) readable by its owner only,
/// and tightens `dir` itself to 0700 if it already exists (its parents,
/// which may be the user's own folders, are left as they are).
///
/// # Errors
/// As [`std::fs::DirBuilder::create`] and [`std::fs::set_permissions`].
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        builder.mode(0o700);
        builder.create(dir)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    builder.create(dir)
}

/// Makes `dir` a folder of this process's user's alone, safely: created
/// 0700 when missing; an existing one must be a folder owned by this
/// user, and when `dir` is a symbolic link the link must be this user's
/// too; then it is made 0700. Another user's folder, or a link another
/// user planted, is refused before anything is changed: what it holds (a
/// `lock` or `runs` link to a file or folder of ours) would have this
/// process truncate or chmod what it points to. (The data directory of
/// `lumen serve`, `ipc` and `mcp`, and `lumen browser`'s session folders.)
///
/// # Errors
/// [`std::io::ErrorKind::PermissionDenied`] carrying [`NotOwned`] for a
/// folder that is not this user's; the I/O error otherwise.
pub fn own_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
        builder.mode(0o700);
        builder.create(dir)?;
        let me = rustix::process::geteuid().as_raw();
        let link = fs::symlink_metadata(dir)?;
        let target = fs::metadata(dir)?;
        if !target.is_dir() || link.uid() != me || target.uid() != me {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                NotOwned(dir.to_path_buf()),
            ));
        }
        private_dir(dir)
    }
    #[cfg(not(unix))]
    builder.create(dir)
}

/// Why [`own_dir`] refused a folder: another user owns it, or the link to
/// it (inside the `io::Error` it returns, for callers that word their own
/// fix).
#[derive(Debug)]
pub struct NotOwned(pub std::path::PathBuf);

impl std::fmt::Display for NotOwned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is not a folder of this user's (another user owns it or a link to it): \
             remove it, or choose a folder of your own",
            self.0.display()
        )
    }
}

impl std::error::Error for NotOwned {}

/// Makes an existing file readable and writable by its owner only.
///
/// # Errors
/// As [`std::fs::set_permissions`].
pub fn private_file(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Open options whose files are created 0600 (Unix), for files written in
/// place (the event log, appended to as the run goes).
pub(crate) fn private_options() -> fs::OpenOptions {
    #[allow(unused_mut)]
    let mut options = fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn folders_and_files_are_the_owners_alone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("a")), 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700, "an existing folder is tightened");
        let file = dir.join("f");
        crate::write_private(&file, b"x").unwrap();
        assert_eq!(mode(&file), 0o600);
        crate::write_private(&file, b"y").unwrap();
        assert_eq!(mode(&file), 0o600);
        fs::write(dir.join("g"), b"z").unwrap();
        private_file(&dir.join("g")).unwrap();
        assert_eq!(mode(&dir.join("g")), 0o600);
    }
}

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

//! Files in and out: arming uploads for the next file chooser (only from
//! the allowed folder) and where downloads are saved. File choosers and
//! downloads themselves are answered and reported by the event trackers
//! and the receipt.

use std::path::{Path, PathBuf};

use lumen_core::{LumenError, Result};

use super::{CdpTab, lock};

impl CdpTab {
    /// Arms files for the next file chooser a page opens. Every path must lie
    /// inside [`TabOptions::upload_dir`](crate::TabOptions::upload_dir).
    ///
    /// # Errors
    /// [`LumenError::PolicyViolation`] for a path outside the allowed folder
    /// (or when uploads are not enabled), [`LumenError::InvalidData`] for a
    /// missing file.
    pub fn set_upload_files(&self, files: &[PathBuf]) -> Result<()> {
        let Some(dir) = &self.shared.options.upload_dir else {
            return Err(LumenError::PolicyViolation {
                reason: "uploads are not enabled: set TabOptions::upload_dir".into(),
            });
        };
        let root = dir
            .canonicalize()
            .map_err(|e| LumenError::config("upload_dir", format!("{}: {e}", dir.display())))?;
        let mut checked = Vec::new();
        for f in files {
            let full = if f.is_absolute() {
                f.clone()
            } else {
                root.join(f)
            };
            let real = full.canonicalize().map_err(|e| {
                LumenError::invalid_data("upload file", format!("{}: {e}", full.display()))
            })?;
            if !real.starts_with(&root) || !real.is_file() {
                return Err(LumenError::PolicyViolation {
                    reason: format!(
                        "{} is not a file inside the upload folder {}",
                        f.display(),
                        root.display()
                    ),
                });
            }
            checked.push(real.to_string_lossy().into_owned());
        }
        *lock(&self.shared.uploads) = checked;
        Ok(())
    }

    /// The folder downloads are saved to.
    pub fn download_dir(&self) -> Option<&Path> {
        self.shared.options.download_dir.as_deref()
    }
}

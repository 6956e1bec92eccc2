//! Files in and out: arming uploads for the next file chooser (only from
//! the allowed folder) and where downloads are saved. File choosers and
//! downloads themselves are answered and reported by the event trackers
//! and the receipt.

use std::path::{Path, PathBuf};

use lumen_core::{ActionOutcome, LumenError, Result};

use super::{CdpTab, lock};
use crate::cdp::CallError;

/// Why a file may not be uploaded.
enum Refusal {
    /// It does not exist (or cannot be read).
    Missing(String),
    /// It resolves outside the upload folder, or is not a file.
    Outside(String),
}

/// `path` (relative to `root`, or absolute) resolved with symlinks
/// followed, if it is a file inside `root` (canonical).
fn inside(root: &Path, path: &Path) -> std::result::Result<PathBuf, Refusal> {
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        root.join(path)
    };
    let real = full
        .canonicalize()
        .map_err(|e| Refusal::Missing(format!("{}: {e}", full.display())))?;
    if !real.starts_with(root) || !real.is_file() {
        return Err(Refusal::Outside(format!(
            "{} is not a file inside the upload folder {}",
            path.display(),
            root.display()
        )));
    }
    Ok(real)
}

/// A staged document's path in the upload folder: a plain file name, or
/// an empty path when it is anything else (folders, `..`, `.`).
fn staged(id: &str) -> PathBuf {
    let plain = !id.is_empty()
        && id != "."
        && id != ".."
        && !id.contains(['/', '\\', '\0'])
        && Path::new(id).file_name().is_some_and(|n| n == id);
    if plain {
        PathBuf::from(id)
    } else {
        PathBuf::new()
    }
}

impl CdpTab {
    /// Arms files for the next file chooser a page opens. Every path must lie
    /// inside [`TabOptions::upload_dir`](crate::TabOptions::upload_dir).
    ///
    /// # Errors
    /// [`LumenError::PolicyViolation`] for a path outside the allowed folder
    /// (or when uploads are not enabled), [`LumenError::InvalidData`] for a
    /// missing file.
    pub fn set_upload_files(&self, files: &[PathBuf]) -> Result<()> {
        let root = self
            .upload_root()
            .map_err(|reason| match self.shared.options.upload_dir {
                None => LumenError::PolicyViolation { reason },
                Some(_) => LumenError::config("upload_dir", reason),
            })?;
        let mut checked = Vec::new();
        for f in files {
            let real = inside(&root, f).map_err(|e| match e {
                Refusal::Missing(m) => LumenError::invalid_data("upload file", m),
                Refusal::Outside(reason) => LumenError::PolicyViolation { reason },
            })?;
            checked.push(real.to_string_lossy().into_owned());
        }
        *lock(&self.shared.armed.files) = checked;
        Ok(())
    }

    /// The upload folder, canonical (symlinks followed), or why there is
    /// none to read from.
    fn upload_root(&self) -> std::result::Result<PathBuf, String> {
        let Some(dir) = &self.shared.options.upload_dir else {
            return Err(
                "uploads are not enabled in this session: the operator sets an upload \
                        folder (`lumen run --upload-dir DIR`, TabOptions::upload_dir)"
                    .into(),
            );
        };
        dir.canonicalize()
            .map_err(|e| format!("the upload folder {} is not usable: {e}", dir.display()))
    }

    /// Sets the files of the `<input type=file>` a ref names
    /// (`DOM.setFileInputFiles`; the page gets its `input` and `change`
    /// events). `paths` are relative to the upload folder or absolute
    /// inside it; `document_ids` are plain file names staged in it. Every
    /// file is resolved with symlinks followed and must stay inside the
    /// folder: anything else, a missing file or no folder is `ok: false`,
    /// and nothing is set.
    ///
    /// # Errors
    /// Fatal ones only.
    pub(super) async fn upload_to_ref(
        &self,
        reference: &str,
        paths: &[String],
        document_ids: &[String],
    ) -> Result<ActionOutcome> {
        let root = match self.upload_root() {
            Ok(root) => root,
            Err(reason) => return Ok(ActionOutcome::failed(reason)),
        };
        let mut files = Vec::new();
        let named = paths
            .iter()
            .map(|p| (p, Path::new(p).to_path_buf()))
            .chain(document_ids.iter().map(|d| (d, staged(d))));
        for (given, path) in named {
            if path.as_os_str().is_empty() {
                return Ok(ActionOutcome::failed(format!(
                    "document id {given:?} is not a plain file name: name a file staged in \
                     the upload folder, without folders"
                )));
            }
            match inside(&root, &path) {
                Ok(real) => files.push(real),
                Err(Refusal::Missing(_)) => {
                    return Ok(ActionOutcome::failed(format!(
                        "there is no file {given:?} in the upload folder"
                    )));
                }
                Err(Refusal::Outside(_)) => {
                    return Ok(ActionOutcome::failed(format!(
                        "{given:?} is outside the upload folder: only files inside it can be \
                         uploaded (name them relative to it)"
                    )));
                }
            }
        }
        if files.is_empty() {
            return Ok(ActionOutcome::failed("no files to upload were given"));
        }
        let ctx = self.active();
        let Some(node) = crate::ax::backend_of(&ctx.ax_refs, reference) else {
            return Ok(ActionOutcome::failed(format!(
                "ref {reference} is unknown or stale (refs last until the page navigates): \
                 read the page again for fresh refs"
            )));
        };
        let list: Vec<String> = files
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let params = serde_json::json!({ "files": list, "backendNodeId": node });
        match self
            .session(&ctx)
            .call("DOM.setFileInputFiles", params)
            .await
        {
            Ok(_) => {}
            Err(CallError::Protocol { message, .. }) => {
                return Ok(ActionOutcome::failed(format!(
                    "ref {reference} did not take the files (is it an <input type=file>?): \
                     {message}"
                )));
            }
            Err(e) => return Err(e.into()),
        }
        let names: Vec<String> = files
            .iter()
            .map(|f| {
                let name = f
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into());
                let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
                format!("{name} ({size} bytes)")
            })
            .collect();
        let mut outcome = ActionOutcome::ok();
        outcome
            .hints
            .push(format!("ref {reference} now holds {}", names.join(", ")));
        Ok(outcome)
    }

    /// The folder downloads are saved to.
    pub fn download_dir(&self) -> Option<&Path> {
        self.shared.options.download_dir.as_deref()
    }
}

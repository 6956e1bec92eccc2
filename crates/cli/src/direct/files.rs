//! `lumen browser upload|download|pdf`: files into the page (an
//! `<input type=file>`'s files set directly, no file chooser), out of it (a
//! real click with downloads allowed into a folder, followed until the file
//! is complete) and the page printed as a PDF.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lumen::LumenError;
use lumen::browser::{DownloadResult, ElementSpot, PageLink, UploadResult};
use serde_json::{Value, json};

use super::elements::{element, element_error};
use super::{State, fail, refusal};
use crate::exit::CliError;

/// Each file, absolute with symlinks followed; it must exist and be a
/// file.
fn existing(files: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    if files.is_empty() {
        return Err(CliError::config("name at least one file to upload"));
    }
    files
        .iter()
        .map(|f| {
            let real = f
                .canonicalize()
                .map_err(|e| CliError::config(format!("cannot upload {}: {e}", f.display())))?;
            if !real.is_file() {
                return Err(CliError::config(format!(
                    "cannot upload {}: it is not a file",
                    f.display()
                )));
            }
            Ok(real)
        })
        .collect()
}

/// `upload TARGET FILE...`.
pub(super) async fn upload(
    link: &PageLink,
    state: &State,
    target: &str,
    files: &[PathBuf],
) -> Result<(Value, String), CliError> {
    let files = existing(files)?;
    let el = element(state, target)?;
    match link.upload(el, &files).await.map_err(element_error)? {
        UploadResult::Set => {}
        UploadResult::NotFileInput(by) => {
            return Err(CliError::failure(format!(
                "{target} is {by}, not a file input (<input type=\"file\">)"
            )));
        }
        UploadResult::Disabled => {
            return Err(CliError::failure(format!("{target} is disabled")));
        }
        UploadResult::NotMultiple => {
            return Err(CliError::failure(format!(
                "{target} takes one file (it has no `multiple` attribute); {} were given",
                files.len()
            )));
        }
        UploadResult::Refused(spot) => return Err(refusal(target, spot)),
        other => return Err(CliError::failure(format!("{target}: {other:?}"))),
    }
    let shown: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    Ok((
        json!({"ok": true, "files": shown}),
        format!("uploaded {}", shown.join(", ")),
    ))
}

/// `download TARGET [--dir DIR] [--timeout MS]`.
pub(super) async fn download(
    link: &PageLink,
    state: &State,
    target: &str,
    dir: Option<&Path>,
    timeout: u64,
) -> Result<(Value, String), CliError> {
    let dir = dir.unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::config(format!("cannot create {}: {e}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| CliError::config(format!("cannot use {}: {e}", dir.display())))?;
    let at = match link
        .locate_target(element(state, target)?)
        .await
        .map_err(element_error)?
    {
        ElementSpot::At(p) => p,
        spot => return Err(refusal(target, spot)),
    };
    match link
        .download(&state.ws_url, at, &dir, Duration::from_millis(timeout))
        .await
        .map_err(fail)?
    {
        DownloadResult::Saved { path, url, bytes } => {
            let shown = path.display().to_string();
            Ok((
                json!({"ok": true, "path": shown, "url": url, "bytes": bytes}),
                shown,
            ))
        }
        DownloadResult::Failed {
            url,
            suggested,
            reason,
        } => Err(CliError::failure(format!(
            "the download of {suggested:?} from {url} failed: {reason}"
        ))),
        DownloadResult::NotStarted => Err(CliError::failure(format!(
            "clicking {target} started no download within {timeout} ms"
        ))),
        other => Err(CliError::failure(format!("{target}: {other:?}"))),
    }
}

/// `pdf [PATH]` (default `page.pdf`).
pub(super) async fn pdf(link: &PageLink, path: Option<&Path>) -> Result<(Value, String), CliError> {
    let path = path.unwrap_or_else(|| Path::new("page.pdf"));
    let bytes = link.pdf().await.map_err(|e| match e {
        LumenError::Script { message } => CliError::failure(format!(
            "Chromium did not print the page ({message}); printing to PDF works in headless \
             sessions only: open the session without --headed"
        )),
        other => fail(other),
    })?;
    std::fs::write(path, &bytes)
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", path.display())))?;
    let shown = path.display().to_string();
    Ok((json!({"path": shown, "bytes": bytes.len()}), shown))
}

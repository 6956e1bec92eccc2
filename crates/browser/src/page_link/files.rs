//! [`PageLink`]'s files in and out for one-shot commands (`lumen browser
//! upload @e3 cv.pdf`, `download @e5`, `pdf`): an `<input type=file>`'s
//! files set, a download started by a real click and followed to its end
//! over a browser connection of its own, and the page printed as a PDF.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lumen_core::{LumenError, MouseButton, Point, Result};
use serde_json::json;

use super::PageLink;
use super::elements::ElementTarget;
use super::refs::ElementSpot;
use crate::ws::Wire;

/// The window property an upload's input is held in between the check and
/// `DOM.setFileInputFiles` (deleted right after).
const UPLOAD_PROPERTY: &str = "__lumenUploadInput";

/// Checks that `this` is a file input that takes `count` files and holds it
/// in `window[hold]` for the next call.
const UPLOAD_FN: &str = r#"function(mark, prop, count, hold) {
  const el = this.nodeType === 1 ? this : this.parentElement;
  const describe = (e) => '<' + e.tagName.toLowerCase() + (e.id ? ' id="' + e.id + '"' : '') + (e.tagName === 'INPUT' ? ' type="' + e.type + '"' : '') + '>';
  if (!el || el.tagName !== 'INPUT' || el.type !== 'file') return { kind: 'nofile', by: el ? describe(el) : 'a text node' };
  if (el.disabled) return { kind: 'disabled' };
  if (count > 1 && !el.multiple) return { kind: 'single' };
  window[hold] = el;
  return { kind: 'ok' };
}"#;

/// What [`PageLink::upload`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UploadResult {
    /// The input holds the files now (the page got `input` and `change`).
    Set,
    /// The element is no `<input type=file>` (the element described).
    NotFileInput(String),
    /// The input is disabled.
    Disabled,
    /// Several files for an input without `multiple`.
    NotMultiple,
    /// The element cannot be reached (another document, removed).
    Refused(ElementSpot),
}

/// How a download started by [`PageLink::download`] ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DownloadResult {
    /// Saved completely.
    Saved {
        /// Where the file is.
        path: PathBuf,
        /// The URL it came from.
        url: String,
        /// Its size in bytes.
        bytes: u64,
    },
    /// It began but did not complete.
    Failed {
        /// The URL it came from.
        url: String,
        /// The name the page suggested.
        suggested: String,
        /// Why.
        reason: String,
    },
    /// The click started no download within the time given.
    NotStarted,
}

impl PageLink {
    /// Where the element `target` names can be clicked, checked as
    /// [`locate`](Self::locate) checks a ref (a selector's first match is
    /// checked the same way, in the document there is now).
    ///
    /// # Errors
    /// As [`on_target`](Self::on_target).
    pub async fn locate_target(&self, target: ElementTarget<'_>) -> Result<ElementSpot> {
        match self
            .on_target(target, super::refs::LOCATE_FN, Vec::new())
            .await?
        {
            Ok(v) => super::refs::spot_of(v),
            Err(spot) => Ok(spot),
        }
    }

    /// Sets the files of the `<input type=file>` `target` names
    /// (`DOM.setFileInputFiles`: the page gets its `input` and `change`
    /// events as if a person had chosen them). `files` must be absolute
    /// paths of existing files; checking them is the caller's part.
    ///
    /// # Errors
    /// As [`on_target`](Self::on_target).
    pub async fn upload(
        &self,
        target: ElementTarget<'_>,
        files: &[PathBuf],
    ) -> Result<UploadResult> {
        let args = vec![json!(files.len()), json!(UPLOAD_PROPERTY)];
        let v = match self.on_target(target, UPLOAD_FN, args).await? {
            Ok(v) => v,
            Err(spot) => return Ok(UploadResult::Refused(spot)),
        };
        match v["kind"].as_str().unwrap_or_default() {
            "ok" => {}
            "nofile" => {
                return Ok(UploadResult::NotFileInput(
                    v["by"].as_str().unwrap_or("it").to_owned(),
                ));
            }
            "disabled" => return Ok(UploadResult::Disabled),
            "single" => return Ok(UploadResult::NotMultiple),
            // A locate answer (no element, another document).
            _ => return Ok(UploadResult::Refused(super::refs::spot_of(v)?)),
        }
        let held = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": format!("window.{UPLOAD_PROPERTY}") }),
            )
            .await?;
        let Some(object) = held["result"]["objectId"].as_str() else {
            return Ok(UploadResult::Refused(ElementSpot::Gone));
        };
        let list: Vec<String> = files
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let set = self
            .call(
                "DOM.setFileInputFiles",
                json!({ "files": list, "objectId": object }),
            )
            .await;
        let _ = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": format!("delete window.{UPLOAD_PROPERTY}") }),
            )
            .await;
        set.map(|_| UploadResult::Set)
    }

    /// Clicks at `at` with downloads allowed into `dir` (absolute) and
    /// follows the download that click starts to its end, for up to
    /// `wait`. Downloads are allowed only while this call runs (over a
    /// connection of its own to the browser at `browser_ws_url`); after,
    /// the browser's default applies again. A download whose connection
    /// fails (Chromium then restarts it silently) is cancelled and told
    /// as failed, as is one that does not finish in time.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn download(
        &self,
        browser_ws_url: &str,
        at: Point,
        dir: &Path,
        wait: Duration,
    ) -> Result<DownloadResult> {
        let mut browser = Wire::open(browser_ws_url, self.timeout).await?;
        let deadline = Instant::now() + self.timeout;
        let id = browser
            .send(
                "Browser.setDownloadBehavior",
                json!({
                    "behavior": "allow",
                    "downloadPath": dir.to_string_lossy(),
                    "eventsEnabled": true,
                }),
            )
            .await?;
        browser
            .reply(id, "Browser.setDownloadBehavior", deadline)
            .await?;
        let result = match self.click(at, MouseButton::Left, 1).await {
            Ok(_) => follow(&mut browser, dir, Instant::now() + wait).await,
            Err(e) => Err(e),
        };
        // Back to the browser's default, whatever happened.
        if let Ok(id) = browser
            .send(
                "Browser.setDownloadBehavior",
                json!({ "behavior": "default" }),
            )
            .await
        {
            let _ = browser
                .reply(
                    id,
                    "Browser.setDownloadBehavior",
                    Instant::now() + self.timeout,
                )
                .await;
        }
        result
    }

    /// The page printed as a PDF (`Page.printToPDF`, backgrounds included).
    /// Chromium prints in headless mode only.
    ///
    /// # Errors
    /// [`LumenError::Script`] when Chromium refuses (a headed browser);
    /// otherwise as [`call`](Self::call).
    pub async fn pdf(&self) -> Result<Vec<u8>> {
        let answer = self
            .call(
                "Page.printToPDF",
                json!({ "printBackground": true, "transferMode": "ReturnAsBase64" }),
            )
            .await?;
        crate::protocol::screenshot::decode(&answer)
            .map_err(|_| LumenError::invalid_data("pdf", "Chromium sent an unreadable PDF"))
    }
}

/// Reads the browser's download events until the first download started
/// after the click ends, or `deadline` passes.
async fn follow(browser: &mut Wire, dir: &Path, deadline: Instant) -> Result<DownloadResult> {
    let Some(began) = browser
        .event(deadline, |ev| ev["method"] == "Browser.downloadWillBegin")
        .await?
    else {
        return Ok(DownloadResult::NotStarted);
    };
    let p = &began["params"];
    let guid = p["guid"].as_str().unwrap_or_default().to_owned();
    let url = p["url"].as_str().unwrap_or_default().to_owned();
    let suggested = p["suggestedFilename"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let failed = |reason: String| DownloadResult::Failed {
        url: url.clone(),
        suggested: suggested.clone(),
        reason,
    };
    let mut most: HashMap<String, f64> = HashMap::new();
    loop {
        let progress = browser
            .event(deadline, |ev| {
                ev["method"] == "Browser.downloadProgress" && ev["params"]["guid"] == guid.as_str()
            })
            .await?;
        let Some(ev) = progress else {
            cancel(browser, &guid).await;
            return Ok(failed("it did not finish in time".to_owned()));
        };
        let p = &ev["params"];
        let received = p["receivedBytes"].as_f64().unwrap_or(0.0);
        match p["state"].as_str().unwrap_or_default() {
            "completed" => {
                let path = p["filePath"]
                    .as_str()
                    .map_or_else(|| dir.join(&suggested), PathBuf::from);
                let bytes = std::fs::metadata(&path).map_or(received as u64, |m| m.len());
                return Ok(DownloadResult::Saved { path, url, bytes });
            }
            "canceled" => {
                return Ok(failed("the browser cancelled it".to_owned()));
            }
            _ => {
                // An interrupted download stays `inProgress` while Chromium
                // starts it over: its byte count goes back.
                let top = most.entry(guid.clone()).or_insert(0.0);
                if received < *top {
                    let reason = format!(
                        "the connection failed after {:.0} of {:.0} bytes",
                        *top,
                        p["totalBytes"].as_f64().unwrap_or(0.0)
                    );
                    cancel(browser, &guid).await;
                    return Ok(failed(reason));
                }
                *top = received;
            }
        }
    }
}

async fn cancel(browser: &mut Wire, guid: &str) {
    if let Ok(id) = browser
        .send("Browser.cancelDownload", json!({ "guid": guid }))
        .await
    {
        let deadline = Instant::now() + Duration::from_secs(2);
        let _ = browser.reply(id, "Browser.cancelDownload", deadline).await;
    }
}

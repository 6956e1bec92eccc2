//! The browser-level tracker: targets created and destroyed, downloads,
//! each kept to the tab's own browser context.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chromiumoxide::cdp::browser_protocol::browser::{
    EventDownloadProgress, EventDownloadWillBegin,
};
use chromiumoxide::cdp::browser_protocol::target::{EventTargetCreated, EventTargetDestroyed};
use futures::stream::{BoxStream, StreamExt as _};
use tokio::sync::mpsc;

use super::{Ev, EventLog, Flusher, run_tracker, wire_logged};
use crate::cdp::{CallError, Conn};

enum BrowserEv {
    Created(Arc<EventTargetCreated>),
    Destroyed(Arc<EventTargetDestroyed>),
    DownloadBegin(Arc<EventDownloadWillBegin>),
    DownloadProgress(Arc<EventDownloadProgress>),
}

/// Subscribes to browser-level events (targets, downloads).
///
/// Chromium announces both to every connection of the browser, whatever
/// context they happen in. Only pages created in `context` (the tab's
/// browser context, once known) and downloads not started by a frame of
/// another context are recorded, so a tab never takes another context's
/// popup or download for its own. Every target's frame is claimed for the
/// context Chromium names in `owners` (`crate::owners`). With `cap`
/// (every page of the context is the tab's: a browser it launched, or a
/// context of its own), pages past [`MAX_OPEN_TABS`](crate::limits::MAX_OPEN_TABS)
/// are closed as they appear; a browser reached over CDP may hold a
/// person's or another client's tabs, which are never closed.
pub(crate) async fn track_browser(
    conn: Arc<Conn>,
    log: Arc<EventLog>,
    download_dir: Option<std::path::PathBuf>,
    owners: Arc<crate::owners::FrameOwners>,
    context: Arc<std::sync::OnceLock<String>>,
    cap: bool,
) -> Result<(tokio::task::JoinHandle<()>, Flusher), CallError> {
    let t = conn.call_timeout;
    let b = &conn.browser;
    macro_rules! listen {
        ($ty:ty, $map:expr) => {
            conn.guard("event_listener", t, b.event_listener::<$ty>())
                .await
                .map(wire_logged)?
                .map($map)
                .boxed()
        };
    }
    let streams: Vec<BoxStream<'static, BrowserEv>> = vec![
        listen!(EventTargetCreated, BrowserEv::Created),
        listen!(EventTargetDestroyed, BrowserEv::Destroyed),
        listen!(EventDownloadWillBegin, BrowserEv::DownloadBegin),
        listen!(EventDownloadProgress, BrowserEv::DownloadProgress),
    ];
    let merged = futures::stream::select_all(streams);
    let mut names: HashMap<String, String> = HashMap::new();
    // Bytes each download had at most, and why the ones we cancelled
    // failed.
    let mut received: HashMap<String, f64> = HashMap::new();
    let mut failed: HashMap<String, String> = HashMap::new();
    // Downloads of other contexts' frames, ignored to the end.
    let mut foreign: HashSet<String> = HashSet::new();
    // Our context's open pages, to hold them to the cap.
    let mut open_pages: Vec<String> = Vec::new();
    let cancel_conn = conn.clone();
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(run_tracker(merged, rx, move |ev| match ev {
        BrowserEv::Created(e) => {
            let info = &e.target_info;
            if let Some(c) = &info.browser_context_id {
                owners.claim(info.target_id.inner(), &Arc::from(c.inner().as_str()));
            }
            let ours = context.get().is_none_or(|mine| {
                info.browser_context_id
                    .as_ref()
                    .is_none_or(|c| c.inner() == mine)
            });
            // A prerendered page is no tab of its own until shown.
            let prerender = info.subtype.as_deref() == Some("prerender");
            if info.r#type != "page" || prerender || !ours {
                return;
            }
            let id = info.target_id.inner().clone();
            // Only once the context is known: before, every page counts as
            // ours, and another context's must never be closed.
            let capped = cap && context.get().is_some();
            if !capped || open_pages.len() < crate::limits::MAX_OPEN_TABS {
                open_pages.push(id.clone());
                log.record(Ev::TargetCreated {
                    id,
                    url: info.url.clone(),
                });
                return;
            }
            tracing::warn!(url = %info.url, "a page opened more than {} tabs; closing the new one", crate::limits::MAX_OPEN_TABS);
            log.record(Ev::TabRefused {
                url: info.url.clone(),
            });
            let conn = cancel_conn.clone();
            tokio::spawn(async move {
                let params = serde_json::json!({ "targetId": id });
                if let Err(err) = conn.browser_raw("Target.closeTarget", params).await {
                    tracing::debug!("closing a tab past the cap failed: {err}");
                }
            });
        }
        // A download is ours when our context claimed its frame, or when
        // nobody did and no other context shares the browser; any other is
        // neither reported nor cancelled.
        BrowserEv::DownloadBegin(e)
            if context
                .get()
                .is_some_and(|mine| match owners.owner(e.frame_id.inner()) {
                    Some(owner) => &*owner != mine,
                    None => owners.shared_with_others(mine),
                }) =>
        {
            foreign.insert(e.guid.clone());
        }
        BrowserEv::DownloadProgress(e) if foreign.contains(&e.guid) => {
            if download_state(&e) != "inProgress" {
                foreign.remove(&e.guid);
            }
        }
        BrowserEv::Destroyed(e) => {
            let id = e.target_id.inner().clone();
            let was_open = open_pages.contains(&id);
            open_pages.retain(|p| *p != id);
            // Only this context's targets are kept (and unclaimed ones): a
            // shared browser announces every context's, and the set would
            // grow for as long as the browser runs.
            let ours = was_open
                || context.get().is_none_or(|mine| {
                    owners
                        .owner(&id)
                        .is_none_or(|owner| &*owner == mine.as_str())
                });
            if ours {
                log.update(|s| {
                    s.destroyed.insert(id);
                });
            }
        }
        BrowserEv::DownloadBegin(e) => {
            names.insert(e.guid.clone(), e.suggested_filename.clone());
            log.record(Ev::DownloadBegan {
                guid: e.guid.clone(),
                url: e.url.clone(),
                suggested_filename: e.suggested_filename.clone(),
            });
        }
        BrowserEv::DownloadProgress(e) => {
            let state = download_state(&e);
            if state == "inProgress" {
                // CDP has no "interrupted" state: an interrupted download
                // stays `inProgress` while Chromium retries it from the
                // start, so its bytes go back. Such a download failed; it is
                // cancelled (no hidden retries) and told as failed.
                let most = received.entry(e.guid.clone()).or_insert(0.0);
                if e.received_bytes < *most && !failed.contains_key(&e.guid) {
                    failed.insert(
                        e.guid.clone(),
                        format!(
                            "the connection failed after {:.0} of {:.0} bytes",
                            *most, e.total_bytes
                        ),
                    );
                    let conn = cancel_conn.clone();
                    let guid = e.guid.clone();
                    tokio::spawn(async move {
                        let params = serde_json::json!({ "guid": guid });
                        if let Err(err) = conn.browser_raw("Browser.cancelDownload", params).await {
                            tracing::debug!("cancelling an interrupted download failed: {err}");
                        }
                    });
                }
                *most = most.max(e.received_bytes);
                return;
            }
            let completed = state == "completed";
            let path = if completed {
                e.file_path.clone().or_else(|| {
                    let name = names.get(&e.guid).cloned()?;
                    Some(
                        download_dir
                            .as_ref()?
                            .join(name)
                            .to_string_lossy()
                            .into_owned(),
                    )
                })
            } else {
                None
            };
            received.remove(&e.guid);
            log.record(Ev::DownloadDone {
                guid: e.guid.clone(),
                completed,
                path,
                error: failed.remove(&e.guid),
            });
        }
    }));
    Ok((task, Flusher(tx)))
}

/// A download's state as CDP names it (`inProgress`, `completed`,
/// `canceled`).
fn download_state(e: &EventDownloadProgress) -> String {
    serde_json::to_value(&e.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

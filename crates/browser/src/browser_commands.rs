//! Commands to the browser itself (not to a page), each over a connection
//! of its own: the page list, one page's URL and title, bringing a page to
//! the front, and any other browser-level command.

use std::time::{Duration, Instant};

use lumen_core::{LumenError, Result, TabInfo};
use serde_json::{Value, json};

use crate::protocol::pages;
use crate::ws::Wire;

/// Sends one command to the browser itself (not to a page) over a
/// connection of its own: `Target.getTargets`, `Browser.setWindowBounds`.
///
/// # Errors
/// [`LumenError::Script`] when Chromium refuses the command,
/// [`LumenError::BrowserDisconnected`] when the browser cannot be reached.
pub async fn browser_command(
    browser_ws_url: &str,
    method: &str,
    params: Value,
    call_timeout: Duration,
) -> Result<Value> {
    let mut wire = Wire::open(browser_ws_url, call_timeout).await?;
    let deadline = Instant::now() + call_timeout;
    let id = wire.send(method, params).await?;
    wire.reply(id, method, deadline).await
}

/// The page tabs of the browser at `browser_ws_url`, in the browser's
/// order (`followed` is false for all: a link follows no tab).
///
/// # Errors
/// [`LumenError::BrowserDisconnected`] when the browser cannot be reached.
pub async fn page_tabs(browser_ws_url: &str, call_timeout: Duration) -> Result<Vec<TabInfo>> {
    let list =
        browser_command(browser_ws_url, "Target.getTargets", json!({}), call_timeout).await?;
    Ok(pages::page_tabs(&list, None))
}

/// The URL and title of the page `target_id`, as the browser knows them
/// (the committed URL, fragment and `pushState` changes included), without
/// attaching to the page.
///
/// # Errors
/// [`LumenError::InvalidData`] when the browser has no such page;
/// otherwise as [`page_tabs`].
pub async fn page_info(
    browser_ws_url: &str,
    target_id: &str,
    call_timeout: Duration,
) -> Result<(String, String)> {
    let info = browser_command(
        browser_ws_url,
        "Target.getTargetInfo",
        json!({ "targetId": target_id }),
        call_timeout,
    )
    .await
    .map_err(|e| match e {
        LumenError::Script { .. } => {
            LumenError::invalid_data("tab id", format!("there is no open tab {target_id}"))
        }
        other => other,
    })?;
    let field = |k: &str| {
        info["targetInfo"][k]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Ok((field("url"), field("title")))
}

/// Brings the page `target_id` to the front.
///
/// # Errors
/// [`LumenError::Script`] for an unknown target; otherwise as [`page_tabs`].
pub async fn activate_tab(
    browser_ws_url: &str,
    target_id: &str,
    call_timeout: Duration,
) -> Result<()> {
    browser_command(
        browser_ws_url,
        "Target.activateTarget",
        json!({ "targetId": target_id }),
        call_timeout,
    )
    .await
    .map(drop)
}

//! Tabs in a browser context of their own: [`CdpTab::open_isolated`].
//!
//! A browser context is Chromium's "incognito profile": cookies, local and
//! session storage, IndexedDB, the cache, service workers and permissions
//! belong to it alone. A server that reuses one browser for many runs (of
//! possibly different clients) gives each run a fresh context, so nothing
//! one run's pages stored is visible to the next.
//!
//! The context is created on a connection of its own with
//! `disposeOnDetach`, so it disappears with that connection even if the tab
//! is dropped without being closed (a panic, a crash); closing the tab
//! disposes it explicitly, closing every page in it. A context tab lists,
//! switches to, opens and closes only the tabs of its context: the pages of
//! the browser's default context (where the owner's tab sits) are out of
//! its reach.

use lumen_core::{LumenError, Result};
use serde_json::{Value, json};

use super::CdpTab;
use crate::cdp::Conn;

impl CdpTab {
    /// Opens a blank tab in a new browser context of this tab's browser, on
    /// a connection of its own, with this tab's options. This tab is
    /// untouched; close the new one ([`BrowserTab::close`]) to dispose the
    /// context and everything in it.
    ///
    /// # Errors
    /// [`LumenError::BrowserDisconnected`] when the browser cannot be
    /// reached, [`LumenError::Script`] when it refuses a context.
    ///
    /// [`BrowserTab::close`]: lumen_core::BrowserTab::close
    pub async fn open_isolated(&self) -> Result<CdpTab> {
        self.open_isolated_with(self.shared.options.clone()).await
    }

    /// [`open_isolated`](Self::open_isolated) with `options` for the new
    /// tab instead of this tab's (a run's own viewport, download and upload
    /// folders in a shared browser).
    pub async fn open_isolated_with(&self, options: crate::TabOptions) -> Result<CdpTab> {
        let conn = Conn::connect(&self.shared.ws_url, self.shared.conn.call_timeout)
            .await
            .map_err(LumenError::from)?;
        let created = conn
            .browser_raw(
                "Target.createBrowserContext",
                json!({ "disposeOnDetach": true }),
            )
            .await?;
        let Some(id) = created["browserContextId"].as_str().map(str::to_owned) else {
            return Err(LumenError::Script {
                message: "Target.createBrowserContext answered no browserContextId".into(),
            });
        };
        // The new tab shares this one's frame map, so each context's
        // request guard can tell its own requests from the others'.
        let owners = match &self.shared.seat {
            Some(seat) => seat.claims().owners().clone(),
            None => Default::default(),
        };
        Self::setup(conn, options, None, None, Vec::new(), Some((id, owners))).await
    }

    /// The browser context this tab lives in, when it has one of its own.
    pub fn browser_context_id(&self) -> Option<&str> {
        self.shared.context.as_deref()
    }

    /// The browser context of this tab's pages: its own, else the
    /// browser's default one as Chromium named it (`None` if it did not).
    fn pages_context(&self) -> Option<&str> {
        self.browser_context_id()
            .or_else(|| self.shared.seat.as_ref().map(|s| s.context()))
    }

    /// `Target.getTargets`' answer cut down to this tab's context: other
    /// contexts' pages (other agents') are not this tab's to list or drive.
    pub(super) fn own_targets(&self, mut list: Value) -> Value {
        if let (Some(context), Some(infos)) = (
            self.pages_context(),
            list.get_mut("targetInfos").and_then(Value::as_array_mut),
        ) {
            infos.retain(|t| t["browserContextId"] == context);
        }
        list
    }

    /// Whether target `id` is in this tab's context.
    pub(super) async fn owns_target(&self, id: &str) -> Result<bool> {
        if self.pages_context().is_none() {
            return Ok(true);
        }
        let list = self
            .conn()
            .browser_raw("Target.getTargets", json!({}))
            .await?;
        let own = self.own_targets(list);
        Ok(own["targetInfos"]
            .as_array()
            .is_some_and(|a| a.iter().any(|t| t["targetId"] == id)))
    }

    /// `Target.createTarget` parameters for `url` in this tab's context.
    pub(super) fn target_params(&self, url: &str) -> Value {
        match self.browser_context_id() {
            Some(context) => json!({ "url": url, "browserContextId": context }),
            None => json!({ "url": url }),
        }
    }

    /// Disposes this tab's context (closing its pages), if it has one;
    /// whether it had.
    pub(super) async fn dispose_context(&self) -> bool {
        let Some(context) = self.browser_context_id() else {
            return false;
        };
        if let Err(e) = self
            .conn()
            .browser_raw(
                "Target.disposeBrowserContext",
                json!({ "browserContextId": context }),
            )
            .await
        {
            tracing::debug!("Target.disposeBrowserContext failed: {e}");
        }
        true
    }
}

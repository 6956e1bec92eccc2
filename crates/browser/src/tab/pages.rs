//! The tabs of the browser: which page is driven, handing over when it
//! closes, following and switching tabs, opening and closing them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::target::TargetId;
use lumen_core::{ActionOutcome, EffectReceipt, LumenError, Result, TabInfo};

use super::connect::setup_page;
use super::{CdpTab, PageCtx, is_fatal, lock};
use crate::protocol::pages;

impl CdpTab {
    /// Drives `ctx`, keeping `pages` in order of last use so a closed tab
    /// hands over to the one driven before it.
    pub(super) fn make_active(&self, ctx: Arc<PageCtx>) {
        let mut pages = lock(&self.shared.pages);
        pages.retain(|p| p.id != ctx.id);
        pages.push(ctx.clone());
        *lock(&self.shared.active) = ctx;
    }

    /// The page being driven. When it was closed (a popup that closed
    /// itself, a tab closed by someone else), the most recent open page
    /// takes over.
    pub(super) fn active(&self) -> Arc<PageCtx> {
        let current = lock(&self.shared.active).clone();
        let destroyed = self.shared.browser_log.lock().destroyed.clone();
        if !destroyed.contains(&current.id) {
            return current;
        }
        let mut pages = lock(&self.shared.pages);
        pages.retain(|p| !destroyed.contains(&p.id));
        match pages.last() {
            // (Pages are in order of last use.)
            Some(next) => {
                tracing::debug!("tab {} closed; driving {} again", current.id, next.id);
                *lock(&self.shared.active) = next.clone();
                // Bring it to the front so it renders (screenshots, frames).
                let conn = self.shared.conn.clone();
                let id = next.id.clone();
                // (`active_tab_id` may be called outside a runtime.)
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        let _ = conn
                            .browser_raw(
                                "Target.activateTarget",
                                serde_json::json!({ "targetId": id }),
                            )
                            .await;
                    });
                }
                next.clone()
            }
            None => current,
        }
    }

    /// The id of the tab being driven.
    pub fn active_tab_id(&self) -> String {
        self.active().id.clone()
    }

    /// Every open page tab (`followed` marks the one being driven).
    ///
    /// # Errors
    /// Only fatal ones (`BROWSER_DISCONNECTED`).
    pub async fn tabs(&self) -> Result<Vec<TabInfo>> {
        let mut active = self.active_tab_id();
        let list = self
            .conn()
            .browser_raw("Target.getTargets", serde_json::json!({}))
            .await?;
        let listed = list["targetInfos"]
            .as_array()
            .is_some_and(|a| a.iter().any(|t| t["targetId"] == active.as_str()));
        // (Driven since the list was asked for, it may be too new for it.)
        if !listed && self.active_tab_id() == active {
            // The browser no longer has the driven tab: it closed and the
            // event saying so is still on its way. Hand over now, as that
            // event would, so the list never lacks the tab being driven.
            self.shared.browser_log.mark_destroyed(&active);
            active = self.active_tab_id();
        }
        Ok(pages::page_tabs(&self.own_targets(list), Some(&active)))
    }

    /// Drives another open tab (one from [`tabs`](Self::tabs)).
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for an unknown id; fatal ones otherwise.
    pub async fn switch_to_tab(&self, id: &str) -> Result<()> {
        let ctx = self.page_ctx_for(id, Duration::from_secs(3)).await?;
        self.make_active(ctx);
        let _ = self
            .conn()
            .browser_raw(
                "Target.activateTarget",
                serde_json::json!({ "targetId": id }),
            )
            .await;
        Ok(())
    }

    pub(super) async fn page_ctx_for(&self, id: &str, wait: Duration) -> Result<Arc<PageCtx>> {
        if let Some(ctx) = lock(&self.shared.pages).iter().find(|p| p.id == id) {
            return Ok(ctx.clone());
        }
        let targets = self
            .conn()
            .browser_raw("Target.getTargets", serde_json::json!({}))
            .await?;
        let targets = self.own_targets(targets);
        let exists = targets["targetInfos"]
            .as_array()
            .is_some_and(|a| a.iter().any(|t| t["targetId"] == id && t["type"] == "page"));
        if !exists {
            return Err(LumenError::invalid_data(
                "tab id",
                format!("there is no open tab {id}"),
            ));
        }
        let deadline = Instant::now() + wait;
        let page = loop {
            match self
                .shared
                .conn
                .browser
                .get_page(TargetId::new(id.to_owned()))
                .await
            {
                Ok(page) => break page,
                Err(_) if Instant::now() < deadline => {
                    if let Some(reason) = self.conn().dead_reason() {
                        return Err(LumenError::disconnected(reason));
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(e) => {
                    return Err(LumenError::invalid_data(
                        "tab id",
                        format!("no tab {id} is attached: {e}"),
                    ));
                }
            }
        };
        let emulation = *lock(&self.shared.emulation);
        let ctx = setup_page(
            &self.shared.conn,
            &self.shared.options,
            &self.shared.armed,
            emulation,
            self.shared.seat.as_ref().map(crate::owners::Seat::claims),
            page,
        )
        .await?;
        lock(&self.shared.pages).push(ctx.clone());
        if let Some(guard) = self.shared.request_guard.get() {
            self.watch_responses(guard, &ctx).await;
        }
        Ok(ctx)
    }

    /// Opens a blank tab and drives it.
    pub(super) async fn open_tab(&self) -> Result<ActionOutcome> {
        if self.shared.tabs_capped && self.tabs().await?.len() >= crate::limits::MAX_OPEN_TABS {
            return Ok(ActionOutcome::failed(format!(
                "{} tabs are open, the most allowed: close one first",
                crate::limits::MAX_OPEN_TABS
            )));
        }
        let created = self
            .conn()
            .browser_raw("Target.createTarget", self.target_params("about:blank"))
            .await?;
        let Some(id) = created["targetId"].as_str().map(str::to_owned) else {
            return Ok(ActionOutcome::failed("the browser opened no tab"));
        };
        self.switch_to_tab(&id).await?;
        let mut outcome = ActionOutcome::ok();
        outcome.effect = Some(Box::new(EffectReceipt {
            new_tab: Some(TabInfo {
                id: id.clone(),
                url: "about:blank".into(),
                title: String::new(),
                followed: true,
            }),
            ..EffectReceipt::default()
        }));
        outcome.hints.push(format!("opened tab {id}, now driven"));
        Ok(outcome)
    }

    /// [`switch_to_tab`](Self::switch_to_tab), page-level failures as `ok: false`.
    pub(super) async fn switch_tab_outcome(&self, id: &str) -> Result<ActionOutcome> {
        match self.switch_to_tab(id).await {
            Ok(()) => Ok(ActionOutcome::ok()),
            Err(e) if is_fatal(&e) => Err(e),
            Err(e) => Ok(ActionOutcome::failed(format!("no tab {id}: {e}"))),
        }
    }

    /// Closes a tab by id and waits (bounded) until it is gone.
    pub(super) async fn close_other_tab(&self, id: &str) -> Result<ActionOutcome> {
        if !self.owns_target(id).await? {
            return Ok(ActionOutcome::failed(format!("there is no open tab {id}")));
        }
        let conn = self.shared.conn.clone();
        let closed = conn
            .browser_raw("Target.closeTarget", serde_json::json!({ "targetId": id }))
            .await?;
        if closed["success"] == false {
            return Ok(ActionOutcome::failed(format!(
                "tab {id} could not be closed"
            )));
        }
        // Closing is asynchronous: wait (bounded) for the target to be gone,
        // so the tab driven before it takes over before the next action.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if self
                .shared
                .browser_log
                .lock()
                .destroyed
                .iter()
                .any(|d| d == id)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let now = self.active_tab_id();
        Ok(ActionOutcome::ok().with_hint(format!("closed tab {id}; now driving tab {now}")))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use lumen_core::BrowserTab;

    use crate::{CdpTab, LaunchOptions};

    fn closed(tab: &CdpTab) -> HashSet<String> {
        tab.shared.browser_log.lock().destroyed.clone()
    }

    /// Opens a tab on `tab`, closes it, and returns its id.
    async fn open_and_close(tab: &CdpTab) -> String {
        assert!(tab.new_tab().await.unwrap().ok);
        let id = tab.active_tab_id();
        assert!(tab.close_tab(&id).await.unwrap().ok);
        id
    }

    /// In a shared browser each tab keeps the closings of its own
    /// context's targets only: another context's tabs coming and going
    /// (every run's, in a server's pooled browser) do not grow its set.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tab_keeps_only_its_own_contexts_closed_targets() {
        let pooled = CdpTab::launch(LaunchOptions {
            executable: Some(lumen_test_support::locate_chromium().unwrap()),
            ..LaunchOptions::default()
        })
        .await
        .unwrap();
        let a = pooled.open_isolated().await.unwrap();
        let b = pooled.open_isolated().await.unwrap();
        let mut b_closed = Vec::new();
        for _ in 0..3 {
            b_closed.push(open_and_close(&b).await);
        }
        let a_closed = open_and_close(&a).await;
        for id in &b_closed {
            assert!(closed(&b).contains(id), "B's own closing is kept");
            assert!(!closed(&a).contains(id), "A keeps B's closed tab {id}");
            assert!(!closed(&pooled).contains(id), "the pool's tab keeps {id}");
        }
        assert!(closed(&a).contains(&a_closed));
        a.close().await.unwrap();
        b.close().await.unwrap();
        pooled.close().await.unwrap();
    }
}

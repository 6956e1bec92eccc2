//! Undoing what an action did that the policy forbids, and checking that
//! the undo worked: after the remedies (go back, close the new tab) the
//! tab must be on a page the policy allows; if it is not, it goes to the
//! page the action started from (when that is allowed), else to
//! `about:blank`. A `beforeunload` handler cannot hold the tab: the
//! browser accepts it while one of its own navigation commands runs (the
//! CDP tab does; see docs/browser.md).

use lumen_core::{BrowserTab, Result};
use lumen_safety::{Remedy, SessionPolicy, Violation};

/// Carries out the remedies of `violations` and makes sure the tab ends
/// on an allowed page. Returns a sentence for the model when the plain
/// remedy was not enough (`None` when it was).
pub(crate) async fn undo(
    tab: &dyn BrowserTab,
    policy: &SessionPolicy,
    violations: &[Violation],
    url_before: Option<&str>,
) -> Result<Option<String>> {
    for v in violations {
        match &v.remedy {
            Remedy::NavigateBack => {
                tab.back().await?;
            }
            Remedy::CloseTab { tab_id } => {
                // Close the forbidden tab; a browser that cannot manage tabs
                // is at least taken back.
                let closed = tab.close_tab(tab_id).await?;
                if !closed.ok {
                    tab.back().await?;
                }
            }
        }
    }
    let allowed = |url: &str| policy.check_url(url).is_allowed();
    let now = tab.url().await?;
    if allowed(&now) {
        return Ok(None);
    }
    // Going back did not leave the forbidden page (no history, a page
    // that navigated again, a browser that refused): the page the action
    // started from, then about:blank.
    if let Some(before) = url_before.filter(|u| allowed(u) && *u != now) {
        tab.goto(before).await?;
        if allowed(&tab.url().await?) {
            return Ok(Some(format!(
                "Going back left the tab on {now}; it was taken to {before} instead."
            )));
        }
    }
    tab.goto("about:blank").await?;
    let last = tab.url().await?;
    Ok(Some(if allowed(&last) {
        format!("Going back left the tab on {now}; it was taken to about:blank instead.")
    } else {
        format!("The tab could not be taken away from {last}; do not use this page.")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeTab;
    use lumen_safety::{PolicyConfig, PolicyRule};

    fn blocking(domain: &str) -> SessionPolicy {
        SessionPolicy::new(&PolicyConfig {
            blocked_domains: vec![domain.into()],
            ..PolicyConfig::default()
        })
        .unwrap()
    }

    fn back_violation(url: &str) -> Violation {
        Violation {
            url: url.into(),
            rule: PolicyRule::DomainBlocked,
            reason: "blocked".into(),
            remedy: Remedy::NavigateBack,
        }
    }

    #[tokio::test]
    async fn a_back_that_stays_on_the_forbidden_page_falls_back_to_the_page_before() {
        // The fake tab has no history: back leaves it where it is.
        let tab = FakeTab::new("https://evil.test/");
        let policy = blocking("evil.test");
        let note = undo(
            &tab,
            &policy,
            &[back_violation("https://evil.test/")],
            Some("https://good.test/"),
        )
        .await
        .unwrap();
        assert_eq!(tab.url().await.unwrap(), "https://good.test/");
        assert!(note.unwrap().contains("good.test"));
    }

    #[tokio::test]
    async fn without_an_allowed_page_before_the_tab_goes_to_about_blank() {
        let tab = FakeTab::new("https://evil.test/");
        let policy = blocking("evil.test");
        let note = undo(
            &tab,
            &policy,
            &[back_violation("https://evil.test/")],
            Some("https://evil.test/start"),
        )
        .await
        .unwrap();
        assert_eq!(tab.url().await.unwrap(), "about:blank");
        assert!(note.unwrap().contains("about:blank"));
    }
}

//! Pages of the browser: the tab list `Target.getTargets` gives, and
//! navigation: opening a URL, the history entries `Page.getNavigationHistory`
//! gives and going to one, reloading.

use lumen_core::TabInfo;
use serde_json::{Value, json};

use super::Command;

/// `Page.navigate` to `url`.
pub(crate) fn navigate(url: &str) -> Command {
    ("Page.navigate", json!({ "url": url }))
}

/// `Target.attachToTarget` in flattened mode (the page's commands then
/// carry the session id the answer names), for a socket of the browser.
pub(crate) fn attach_flat(target_id: &str) -> Command {
    (
        "Target.attachToTarget",
        json!({ "targetId": target_id, "flatten": true }),
    )
}

/// Why a `Page.navigate` answer says the navigation failed (`net::ERR_…`);
/// `None` when it started.
pub(crate) fn navigate_error(answer: &Value) -> Option<&str> {
    answer["errorText"].as_str().filter(|e| !e.is_empty())
}

/// Whether a `Page.navigate` answer started a new document (a fragment
/// change has no loader, so there is nothing to wait for).
pub(crate) fn navigate_loads(answer: &Value) -> bool {
    !answer["loaderId"].is_null()
}

/// `Page.getNavigationHistory`, read with [`history_entry`].
pub(crate) fn history() -> Command {
    ("Page.getNavigationHistory", json!({}))
}

/// `Page.navigateToHistoryEntry` to the entry [`history_entry`] found.
pub(crate) fn go_to_entry(id: Value) -> Command {
    ("Page.navigateToHistoryEntry", json!({ "entryId": id }))
}

/// `Page.reload`.
pub(crate) fn reload() -> Command {
    ("Page.reload", json!({}))
}

/// The page tabs in a `Target.getTargets` answer, in the browser's order;
/// the one whose id is `followed` is marked so.
pub(crate) fn page_tabs(targets: &Value, followed: Option<&str>) -> Vec<TabInfo> {
    targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "page")
        .map(|t| {
            let id = t["targetId"].as_str().unwrap_or_default().to_owned();
            TabInfo {
                followed: followed == Some(id.as_str()),
                url: t["url"].as_str().unwrap_or_default().to_owned(),
                title: t["title"].as_str().unwrap_or_default().to_owned(),
                id,
            }
        })
        .collect()
}

/// The id of the history entry `delta` steps from the current one (-1
/// back, 1 forward) in a `Page.getNavigationHistory` answer, for
/// `Page.navigateToHistoryEntry`; `None` past either end.
pub(crate) fn history_entry(history: &Value, delta: i64) -> Option<Value> {
    let current = history["currentIndex"].as_i64().unwrap_or(0);
    let entries = history["entries"].as_array()?;
    let entry = usize::try_from(current + delta)
        .ok()
        .and_then(|i| entries.get(i))?;
    Some(entry["id"].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_are_pages_and_history_stops_at_its_ends() {
        let targets = json!({ "targetInfos": [
            { "type": "page", "targetId": "A", "url": "u", "title": "t" },
            { "type": "iframe", "targetId": "F" },
            { "type": "page", "targetId": "B" },
        ]});
        let tabs = page_tabs(&targets, Some("B"));
        assert_eq!(tabs.len(), 2);
        assert!(!tabs[0].followed && tabs[1].followed);
        let history = json!({ "currentIndex": 0, "entries": [{ "id": 7 }, { "id": 9 }] });
        assert_eq!(history_entry(&history, 1), Some(json!(9)));
        assert_eq!(history_entry(&history, -1), None);
        assert_eq!(history_entry(&history, 2), None);
    }

    #[test]
    fn navigate_answers_say_whether_it_failed_and_whether_it_loads() {
        assert_eq!(navigate("u").0, "Page.navigate");
        let failed = json!({ "frameId": "F", "errorText": "net::ERR_NAME_NOT_RESOLVED" });
        assert_eq!(navigate_error(&failed), Some("net::ERR_NAME_NOT_RESOLVED"));
        let started = json!({ "frameId": "F", "loaderId": "L", "errorText": "" });
        assert_eq!(navigate_error(&started), None);
        assert!(navigate_loads(&started));
        assert!(
            !navigate_loads(&json!({ "frameId": "F" })),
            "a fragment change"
        );
    }
}

//! A form task driven through Anthropic's browser toolset on real
//! Chromium: refs from `read_page` and `find`, `form_input`, a click on a
//! ref, a new tab reported in `browser_state`, every request checked
//! against the SDK types by the mock provider.

use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::models::{AdapterOptions, ApiKey, Tools};
use lumen::{BrowserTab, RunStatus, Session, SessionOptions};
use lumen_test_support::FixtureServer;
use lumen_test_support::mock_provider::script::{AnthropicBlock, anthropic_turn};
use lumen_test_support::mock_provider::{MockProvider, Route};
use serde_json::{Value, json};

pub(super) fn member(turn: usize, i: usize, name: &str, input: Value) -> AnthropicBlock {
    AnthropicBlock::MemberUse {
        id: format!("toolu_{turn}_{i}"),
        name: name.into(),
        toolset: "browser".into(),
        input,
    }
}

/// Claude Sonnet 5 with the browser toolset, against the mock.
pub(super) fn browser_toolset(mock: &MockProvider) -> Arc<dyn lumen::ModelAdapter> {
    lumen::models::create_adapter(
        "anthropic/claude-sonnet-5",
        AdapterOptions {
            api_key: Some(ApiKey::new("test-key")),
            base_url: Some(mock.base_url()),
            tools: Some(Tools::Browser),
            ..AdapterOptions::default()
        },
    )
    .unwrap()
}

pub(super) fn by_ref(reference: &str) -> Value {
    json!({"type": "ref", "ref": reference})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_task_runs_through_the_browser_toolset() {
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url("form.html")).await.unwrap().ok);
    // The refs the page's elements get (they last as long as the document,
    // so read_page in the run hands the model the same ones).
    let outline = tab.accessibility().await.unwrap().unwrap();
    let find = |role: &str, name: &str| {
        outline
            .find(role, name)
            .unwrap_or_else(|| panic!("no {role} {name:?} in\n{}", outline.to_text()))
            .reference
            .clone()
    };
    let (name, email, submit) = (
        find("textbox", "Name"),
        find("textbox", "Email"),
        find("button", "Submit"),
    );

    let turns = [
        vec![member(0, 0, "read_page", json!({"filter": "interactive"}))],
        vec![member(1, 0, "find", json!({"query": "the email field"}))],
        vec![
            member(
                2,
                0,
                "form_input",
                json!({"target": by_ref(&name), "value": "Ada Lovelace"}),
            ),
            member(
                2,
                1,
                "form_input",
                json!({"target": by_ref(&email), "value": "ada@example.com"}),
            ),
            member(2, 2, "left_click", json!({"target": by_ref(&submit)})),
        ],
        vec![member(3, 0, "new_tab", json!({}))],
        vec![AnthropicBlock::ToolUse {
            id: "toolu_4_0".into(),
            name: "task_complete".into(),
            input: json!({"result": "submitted"}),
        }],
    ];
    for t in &turns {
        mock.push(Route::AnthropicMessages, anthropic_turn(t, 1000));
    }
    let adapter = browser_toolset(&mock);
    let mut session = Session::new(
        tab.clone(),
        adapter,
        SessionOptions {
            max_steps: 8,
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let r = session
        .run("Fill in name and email, then submit the form")
        .await;
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some("submitted")),
        "{:?}\nviolations: {:?}",
        r.error,
        mock.violations()
    );
    assert_eq!(mock.violations(), Vec::<String>::new());

    // The page really got the values and the submit. (The run ended on the
    // new tab, so read the form's tab.)
    let tabs = tab.tabs().await.unwrap();
    assert_eq!(tabs.len(), 2, "{tabs:?}");
    let form_tab = tabs.iter().find(|t| t.url.ends_with("form.html")).unwrap();
    tab.switch_to_tab(&form_tab.id).await.unwrap();
    let submitted = tab.evaluate("window.lumen.submitted").await.unwrap();
    assert_eq!(submitted["name"], "Ada Lovelace");
    assert_eq!(submitted["email"], "ada@example.com");

    let bodies: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 5);
    // One toolset entry, and our own navigate left out (the toolset has one).
    assert_eq!(bodies[0]["tools"][0]["type"], "browser_toolset_20260801");
    assert!(bodies[0]["tools"][0].get("name").is_none());
    assert!(!bodies[0].to_string().contains("\"name\":\"navigate\""));
    let text = |i: usize| bodies[i].to_string();
    // read_page's answer names the refs; find puts the email field first.
    assert!(text(1).contains(&format!("[{email}]")), "{}", text(1));
    assert!(text(2).contains(&format!("[{email}]")), "{}", text(2));
    // Each successful result carries the tab inventory, one tab active.
    let last_result = |i: usize| -> Value {
        bodies[i]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find_map(|m| {
                m["content"]
                    .as_array()?
                    .iter()
                    .rev()
                    .find(|b| b["type"] == "tool_result")
                    .cloned()
            })
            .unwrap()
    };
    let state = |i: usize| -> Value {
        last_result(i)["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "browser_state")
            .cloned()
            .unwrap_or_else(|| panic!("no browser_state in request {i}: {}", last_result(i)))
    };
    assert_eq!(state(1)["tabs"].as_array().unwrap().len(), 1);
    assert!(state(1).get("state_changes").is_none());
    // After new_tab: two tabs, the new one active and reported as opened.
    let after = state(4);
    let tabs = after["tabs"].as_array().unwrap();
    assert_eq!(tabs.len(), 2, "{after}");
    assert_eq!(tabs.iter().filter(|t| t["active"] == true).count(), 1);
    assert_eq!(after["state_changes"][0]["type"], "tab_opened", "{after}");
    tab.close().await.unwrap();
}

/// A download a click on a ref starts is reported in the next
/// `browser_state` block, with where it was saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_is_reported_in_browser_state() {
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let downloads = tempfile::tempdir().unwrap();
    let tab = Arc::new(
        CdpTab::launch(LaunchOptions {
            tab: lumen::browser::TabOptions {
                download_dir: Some(downloads.path().to_path_buf()),
                ..Default::default()
            },
            ..LaunchOptions::default()
        })
        .await
        .unwrap(),
    );
    assert!(tab.goto(&site.url("download.html")).await.unwrap().ok);
    let outline = tab.accessibility().await.unwrap().unwrap();
    let link = outline
        .nodes
        .iter()
        .find(|n| n.role == "link")
        .unwrap_or_else(|| panic!("no link in\n{}", outline.to_text()))
        .reference
        .clone();
    mock.push(
        Route::AnthropicMessages,
        anthropic_turn(
            &[member(0, 0, "left_click", json!({"target": by_ref(&link)}))],
            1000,
        ),
    );
    mock.push(
        Route::AnthropicMessages,
        anthropic_turn(
            &[AnthropicBlock::ToolUse {
                id: "toolu_1_0".into(),
                name: "task_complete".into(),
                input: json!({"result": "downloaded"}),
            }],
            1000,
        ),
    );
    let adapter = browser_toolset(&mock);
    let mut session = Session::new(tab.clone(), adapter, SessionOptions::default()).unwrap();
    let r = session.run("Download the report").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    assert_eq!(mock.violations(), Vec::<String>::new());
    // Saved during the click: told once, as completed, with its path.
    let second = mock.requests()[1].body.to_string();
    assert!(
        second.contains("\"download_completed\""),
        "{}",
        &second[second.len().saturating_sub(3000)..]
    );
    assert!(!second.contains("\"download_started\""));
    assert!(second.contains("report.csv"));
    tab.close().await.unwrap();
}

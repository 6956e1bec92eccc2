//! The browser toolset's members that read the page's console and network
//! (on by default), run the model's JavaScript and upload files (operator
//! opt-ins), and a download that fails: on real Chromium, with the mock
//! provider replaying each trajectory and checking every request against
//! the SDK types.

use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions, TabOptions};
use lumen::models::{AdapterOptions, ApiKey, BrowserOptIns, Tools};
use lumen::safety::{PolicyConfig, Secrets};
use lumen::{BrowserTab, RunStatus, Session, SessionOptions};
use lumen_test_support::FixtureServer;
use lumen_test_support::mock_provider::script::{AnthropicBlock, anthropic_turn};
use lumen_test_support::mock_provider::{MockProvider, Route};
use serde_json::{Value, json};

use super::browser_toolset::{by_ref, member};

fn adapter(mock: &MockProvider, opt_ins: BrowserOptIns) -> Arc<dyn lumen::ModelAdapter> {
    lumen::models::create_adapter(
        "anthropic/claude-sonnet-5",
        AdapterOptions {
            api_key: Some(ApiKey::new("test-key")),
            base_url: Some(mock.base_url()),
            tools: Some(Tools::Browser),
            browser_opt_ins: opt_ins,
            ..AdapterOptions::default()
        },
    )
    .unwrap()
}

fn done(turn: usize) -> Vec<AnthropicBlock> {
    vec![AnthropicBlock::ToolUse {
        id: format!("toolu_{turn}_0"),
        name: "task_complete".into(),
        input: json!({"result": "done"}),
    }]
}

/// Queues `turns` and runs them to the end.
async fn run(
    mock: &MockProvider,
    tab: Arc<CdpTab>,
    turns: Vec<Vec<AnthropicBlock>>,
    opt_ins: BrowserOptIns,
    options: SessionOptions,
) -> Vec<Value> {
    for t in &turns {
        mock.push(Route::AnthropicMessages, anthropic_turn(t, 1000));
    }
    let mut session = Session::new(tab, adapter(mock, opt_ins), options).unwrap();
    let r = session.run("Look into the page").await;
    assert_eq!(
        r.status,
        RunStatus::Success,
        "{:?}\nviolations: {:?}",
        r.error,
        mock.violations()
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    mock.requests().into_iter().map(|r| r.body).collect()
}

/// The newest tool result of request `body` (the answer to the last call).
fn last_result(body: &Value) -> Value {
    body["messages"]
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
        .unwrap_or_else(|| panic!("no tool result in {body}"))
}

fn result_text(body: &Value) -> String {
    last_result(body)["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_and_network_are_read_and_model_javascript_runs_when_allowed() {
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url("console.html")).await.unwrap().ok);
    // The page's fetch and its timer have run.
    for _ in 0..100 {
        if tab.evaluate("window.lumen.fetched").await.unwrap() == json!(true) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let turns = vec![
        vec![member(0, 0, "read_console", json!({}))],
        vec![member(1, 0, "read_network", json!({}))],
        vec![member(2, 0, "read_console", json!({}))],
        vec![member(
            3,
            0,
            "javascript_exec",
            json!({"text": "document.title + ' / ' + (6 * 7)"}),
        )],
        done(4),
    ];
    let secrets = Secrets::new().with("token", "tok-SECRET-9f2c").unwrap();
    let options = SessionOptions {
        max_steps: 8,
        secrets,
        policy: PolicyConfig {
            allow_model_javascript: Some(true),
            ..PolicyConfig::default()
        },
        ..SessionOptions::default()
    };
    let opt_ins = BrowserOptIns {
        javascript_exec: true,
        file_upload: false,
    };
    let bodies = run(&mock, tab.clone(), turns, opt_ins, options).await;
    assert_eq!(bodies.len(), 5);
    let configs = &bodies[0]["tools"][0]["configs"];
    assert_eq!(configs["read_console"]["enabled"], true, "{configs}");
    assert_eq!(configs["javascript_exec"]["enabled"], true, "{configs}");
    assert_eq!(configs["file_upload"]["enabled"], false, "{configs}");

    // The console, one line per entry, the secret the page logged redacted.
    let console = result_text(&bodies[1]);
    for line in [
        "[log] console.html loaded {shelf: 3}",
        "[warning] low stock: 2 left",
        "[error] payment widget failed",
        "[log] fetched ",
        "[exception] Error: boom from the page",
    ] {
        assert!(console.contains(line), "no {line:?} in\n{console}");
    }
    assert!(console.contains("[log] session token "), "{console}");
    assert!(
        !bodies[1].to_string().contains("tok-SECRET-9f2c"),
        "{console}"
    );
    // The page's fetch, with its status, type and timing.
    let network = result_text(&bodies[2]);
    let fetch = network
        .lines()
        .find(|l| l.contains("/data/slow.json?lumen_delay_ms=20"))
        .unwrap_or_else(|| panic!("no fetch in\n{network}"));
    assert!(fetch.starts_with("GET http://127.0.0.1:"), "{fetch}");
    assert!(fetch.contains(" 200 application/json "), "{fetch}");
    assert!(fetch.ends_with(" ms"), "{fetch}");
    assert!(network.contains("/console.html 200 text/html"), "{network}");
    // Read since the last read: nothing new.
    let again = result_text(&bodies[3]);
    assert!(
        again.contains("no console messages since the last read"),
        "{again}"
    );
    // The model's expression, evaluated in the page.
    let js = last_result(&bodies[4]);
    assert_ne!(js["is_error"], true, "{js}");
    assert!(
        result_text(&bodies[4]).contains("Lumen fixtures: console / 42"),
        "{js}"
    );
    tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_javascript_is_refused_by_default_naming_the_setting() {
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url("console.html")).await.unwrap().ok);
    let turns = vec![
        vec![member(
            0,
            0,
            "javascript_exec",
            json!({"text": "window.lumen.hacked = true"}),
        )],
        done(1),
    ];
    let bodies = run(
        &mock,
        tab.clone(),
        turns,
        BrowserOptIns::default(),
        SessionOptions::default(),
    )
    .await;
    let configs = &bodies[0]["tools"][0]["configs"];
    assert_eq!(configs["javascript_exec"]["enabled"], false, "{configs}");
    let refused = last_result(&bodies[1]);
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        result_text(&bodies[1]).contains("allowModelJavascript"),
        "{refused}"
    );
    // The script never ran.
    assert_eq!(
        tab.evaluate("window.lumen.hacked === undefined")
            .await
            .unwrap(),
        json!(true)
    );
    tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_upload_sets_the_input_from_the_upload_folder_and_refuses_escapes() {
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let uploads = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(uploads.path().join("cv.txt"), "hello upload").unwrap();
    let secret = elsewhere.path().join("secret.txt");
    std::fs::write(&secret, "not for the page").unwrap();
    // A symlink inside the folder that leads out of it.
    std::os::unix::fs::symlink(&secret, uploads.path().join("link.txt")).unwrap();
    let escape = format!(
        "../{}/secret.txt",
        elsewhere.path().file_name().unwrap().to_string_lossy()
    );
    let tab = Arc::new(
        CdpTab::launch(LaunchOptions {
            tab: TabOptions {
                upload_dir: Some(uploads.path().to_path_buf()),
                ..TabOptions::default()
            },
            ..LaunchOptions::default()
        })
        .await
        .unwrap(),
    );
    assert!(tab.goto(&site.url("upload.html")).await.unwrap().ok);
    let outline = tab.accessibility().await.unwrap().unwrap();
    let input = outline
        .nodes
        .iter()
        .find(|n| n.role == "button" && n.name.to_lowercase().contains("choose"))
        .or_else(|| outline.nodes.iter().find(|n| n.role == "button"))
        .unwrap_or_else(|| panic!("no file input in\n{}", outline.to_text()))
        .reference
        .clone();
    let upload = |turn: usize, input_json: Value| {
        let mut v = json!({"target": by_ref(&input)});
        v.as_object_mut()
            .unwrap()
            .extend(input_json.as_object().unwrap().clone());
        vec![member(turn, 0, "file_upload", v)]
    };
    let turns = vec![
        upload(0, json!({"paths": [escape]})),
        upload(1, json!({"paths": [secret.to_str().unwrap()]})),
        upload(2, json!({"paths": ["link.txt"]})),
        upload(3, json!({"document_ids": ["../cv.txt"]})),
        upload(4, json!({"document_ids": ["cv.txt"]})),
        done(5),
    ];
    let opt_ins = BrowserOptIns {
        javascript_exec: false,
        file_upload: true,
    };
    let options = SessionOptions {
        max_steps: 8,
        ..SessionOptions::default()
    };
    let bodies = run(&mock, tab.clone(), turns, opt_ins, options).await;
    assert_eq!(
        bodies[0]["tools"][0]["configs"]["file_upload"]["enabled"],
        true
    );
    // `../` out of the folder, an absolute path outside it, a symlink that
    // leads out and a document id that is not a plain name: all refused.
    for (i, why) in [
        (1, "outside the upload folder"),
        (2, "outside the upload folder"),
        (3, "outside the upload folder"),
        (4, "not a plain file name"),
    ] {
        let r = last_result(&bodies[i]);
        assert_eq!(r["is_error"], true, "request {i}: {r}");
        assert!(result_text(&bodies[i]).contains(why), "request {i}: {r}");
    }
    assert!(!bodies[4].to_string().contains("not for the page"));
    // The staged file reached the page, which shows its name and size.
    let ok = last_result(&bodies[5]);
    assert_ne!(ok["is_error"], true, "{ok}");
    let files = tab.evaluate("window.lumen").await.unwrap();
    assert_eq!(files["changeCount"], 1, "{files}");
    assert_eq!(files["files"][0]["name"], "cv.txt", "{files}");
    assert_eq!(files["files"][0]["size"], 12, "{files}");
    let shown = tab.page_text().await.unwrap();
    assert!(shown.contains("cv.txt (12 bytes)"), "{shown}");
    tab.close().await.unwrap();
}

/// Runs a model that left-clicks, by ref, the first element of the tab's
/// page with this role whose name contains `name`, then says it is done;
/// returns the click's tool result as the next request carries it.
async fn click_by_ref(mock: &MockProvider, tab: &Arc<CdpTab>, role: &str, name: &str) -> Value {
    let outline = tab.accessibility().await.unwrap().unwrap();
    let target = outline
        .nodes
        .iter()
        .find(|n| n.role == role && n.name.contains(name))
        .unwrap_or_else(|| panic!("no {role} {name:?} in\n{}", outline.to_text()))
        .reference
        .clone();
    let turns = vec![
        vec![member(
            0,
            0,
            "left_click",
            json!({"target": by_ref(&target)}),
        )],
        done(1),
    ];
    let bodies = run(
        mock,
        tab.clone(),
        turns,
        BrowserOptIns::default(),
        SessionOptions::default(),
    )
    .await;
    last_result(&bodies[1])
}

/// The `browser_state` block of a tool result.
fn browser_state(result: &Value) -> Value {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "browser_state")
        .cloned()
        .unwrap_or_else(|| panic!("no browser_state in {result}"))
}

/// Clicks the link named `link` on download.html (downloads saved to a
/// folder, or refused without one) and returns the state changes the next
/// request reports.
async fn download_changes(link: &str, save: bool) -> Vec<Value> {
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let downloads = tempfile::tempdir().unwrap();
    let tab = Arc::new(
        CdpTab::launch(LaunchOptions {
            tab: TabOptions {
                download_dir: save.then(|| downloads.path().to_path_buf()),
                ..TabOptions::default()
            },
            ..LaunchOptions::default()
        })
        .await
        .unwrap(),
    );
    assert!(tab.goto(&site.url("download.html")).await.unwrap().ok);
    let state = browser_state(&click_by_ref(&mock, &tab, "link", link).await);
    tab.close().await.unwrap();
    let changes = state["state_changes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(changes.len(), 1, "{state}");
    changes
}

/// A download whose connection drops mid-body is reported as
/// `download_failed`, not as one still running (CDP keeps an interrupted
/// download `inProgress` while Chromium retries it; it is cancelled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_whose_connection_drops_is_reported_as_failed() {
    let changes = download_changes("connection drops", true).await;
    assert_eq!(changes[0]["type"], "download_failed", "{changes:?}");
    assert!(
        changes[0]["url"]
            .as_str()
            .unwrap()
            .contains("report.csv?lumen_abort_after=16"),
        "{changes:?}"
    );
    let error = changes[0]["error"].as_str().unwrap();
    assert!(error.contains("after 16 of 103 bytes"), "{error}");
}

/// A download refused because downloads are off fails, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_download_is_reported_as_failed() {
    let changes = download_changes("Download report.csv", false).await;
    assert_eq!(changes[0]["type"], "download_failed", "{changes:?}");
    let error = changes[0]["error"].as_str().unwrap();
    assert!(error.contains("downloads are not enabled"), "{error}");
}

/// A ref click on a link or button that opens a tab is a success whose
/// `browser_state` lists the new tab (active) and reports `tab_opened`.
/// Before, Chromium's announcement of the popup carried no URL yet, the
/// policy refused the "new tab on ``" as an invalid URL, closed the
/// legitimate popup and answered with an error without the block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_click_that_opens_a_tab_reports_it_in_browser_state() {
    for (role, name, opened) in [
        ("link", "Open in new tab", "links/page3.html"),
        ("button", "Open popup", "links/page2.html"),
    ] {
        let site = FixtureServer::start().await.unwrap();
        let mock = lumen_test_support::mock_provider().await.unwrap();
        let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
        assert!(tab.goto(&site.url("popup.html")).await.unwrap().ok);
        let result = click_by_ref(&mock, &tab, role, name).await;
        assert_ne!(result["is_error"], true, "{name}: {result}");
        let state = browser_state(&result);
        let tabs = state["tabs"].as_array().unwrap();
        assert_eq!(tabs.len(), 2, "{name}: {state}");
        let active: Vec<&Value> = tabs.iter().filter(|t| t["active"] == true).collect();
        assert_eq!(active.len(), 1, "{name}: {state}");
        assert!(
            active[0]["url"].as_str().unwrap().ends_with(opened),
            "{name}: {state}"
        );
        assert_eq!(state["state_changes"][0]["type"], "tab_opened", "{state}");
        assert_eq!(
            state["state_changes"][0]["tab_id"], active[0]["tab_id"],
            "{state}"
        );
        tab.close().await.unwrap();
    }
}

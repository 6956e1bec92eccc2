//! The safety layers on a real run: the policy judging effects after
//! clicks and popups, the model verifier through every adapter, and secrets
//! that never reach an artefact. Real Chromium, fixture pages on 127.0.0.1,
//! the mock provider speaking each protocol.

use super::adapter;
use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::safety::{ModelVerifier, PolicyConfig, Secrets};
use lumen::{BrowserTab, Point, RunStatus, Session, SessionOptions};
use lumen_test_support::StatusCode;
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_test_support::mock_provider::{MockProvider, Reply};
use lumen_test_support::{FixtureServer, element_center};
use lumen_trace::jsonl_recorder;
use serde_json::json;

async fn setup(page: &str) -> (FixtureServer, MockProvider, Arc<CdpTab>) {
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url(page)).await.unwrap().ok);
    (site, mock, tab)
}

async fn center(tab: &CdpTab, selector: &str) -> Point {
    element_center(tab, selector)
        .await
        .unwrap()
        .expect(selector)
}

fn block_localhost() -> PolicyConfig {
    PolicyConfig {
        blocked_domains: vec!["localhost".into()],
        ..PolicyConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_that_navigates_to_a_blocked_domain_is_taken_back_and_reported() {
    let (site, mock, tab) = setup("redirect.html").await;
    let link = center(&tab, "#cross-link").await;
    let wire = Wire::Anthropic;
    mock.push(
        wire.route(),
        wire.turn(0, &[ScriptStep::Click(link.x, link.y)], (1280, 720)),
    );
    mock.push(
        wire.route(),
        wire.turn(1, &[ScriptStep::Done("stayed".into())], (1280, 720)),
    );
    let options = SessionOptions {
        policy: block_localhost(),
        max_steps: 4,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
    let r = session.run("Follow the cross-host link").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    let click = &r.history[0].actions[0].execution;
    assert!(!click.ok, "the click landed on a blocked domain: {click:?}");
    assert!(
        click
            .error
            .as_deref()
            .unwrap_or("")
            .contains("Blocked after the action"),
        "{click:?}"
    );
    let url = tab.url().await.unwrap();
    assert!(
        url.starts_with(&site.url("")) && url.ends_with("redirect.html"),
        "taken back to {url}"
    );
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("Blocked after the action")
    );
    tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_popup_on_a_blocked_domain_is_undone_and_reported() {
    let (site, mock, tab) = setup("popup.html").await;
    let button = center(&tab, "#open-cross").await;
    let wire = Wire::Anthropic;
    mock.push(
        wire.route(),
        wire.turn(0, &[ScriptStep::Click(button.x, button.y)], (1280, 720)),
    );
    mock.push(
        wire.route(),
        wire.turn(1, &[ScriptStep::Done("no popup".into())], (1280, 720)),
    );
    let options = SessionOptions {
        policy: block_localhost(),
        max_steps: 4,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
    let r = session.run("Open the popup").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    let click = &r.history[0].actions[0].execution;
    assert!(
        !click.ok
            && click
                .error
                .as_deref()
                .unwrap_or("")
                .contains("Blocked after the action"),
        "{click:?}"
    );
    let url = tab.url().await.unwrap();
    assert!(
        !url.contains("localhost"),
        "the agent is not left on the blocked popup: {url}"
    );
    assert!(url.starts_with(&site.url("")), "{url}");
    let open = tab.tabs().await.unwrap();
    assert!(
        open.iter().all(|t| !t.url.contains("localhost")),
        "the popup was closed: {open:?}"
    );
    tab.close().await.unwrap();
}

/// A non-streaming "YES"/"NO" answer in each protocol's JSON shape.
fn verdict(wire: Wire, text: &str) -> Reply {
    let body = match wire {
        Wire::Anthropic | Wire::AnthropicToolset => {
            json!({"id": "msg_v", "type": "message", "role": "assistant", "model": "mock",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 3}})
        }
        Wire::OpenAi => json!({"id": "resp_v", "object": "response", "status": "completed",
            "output": [{"type": "message", "id": "msg_v", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}}),
        Wire::Google | Wire::GoogleExtended => {
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3}})
        }
        Wire::Compatible => {
            json!({"id": "chatcmpl-v", "object": "chat.completion", "model": "mock",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
        }
    };
    Reply::Json(StatusCode::OK, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_verifier_rejects_then_accepts_through_every_adapter() {
    for wire in Wire::ALL {
        let (site, mock, tab) = setup("links/page1.html").await;
        let vp = (1280, 720);
        // The agent's turns and the verifier's questions share the route, in
        // the order the loop asks them.
        mock.push(
            wire.route(),
            wire.turn(0, &[ScriptStep::Done("page 1".into())], vp),
        );
        mock.push(wire.route(), verdict(wire, "NO: the task asks for page 2."));
        mock.push(
            wire.route(),
            wire.turn(1, &[ScriptStep::Goto(site.url("links/page2.html"))], vp),
        );
        mock.push(
            wire.route(),
            wire.turn(2, &[ScriptStep::Done("page 2".into())], vp),
        );
        mock.push(wire.route(), verdict(wire, "YES, page 2 is open."));
        let verifier = Arc::new(ModelVerifier::new(adapter(wire, &mock)));
        let options = SessionOptions {
            verifier: Some(verifier),
            max_steps: 5,
            ..SessionOptions::default()
        };
        let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
        let r = session.run("Open page 2").await;
        assert_eq!(
            (r.status, r.result.as_deref()),
            (RunStatus::Success, Some("page 2")),
            "{wire:?}: {:?}",
            r.error
        );
        let first = &r.history[0].actions[0].execution;
        assert!(
            !first.ok && first.error.as_deref().unwrap_or("").contains("page 2"),
            "{wire:?}: {first:?}"
        );
        assert_eq!(
            mock.requests().len(),
            5,
            "{wire:?}: every scripted answer was asked for"
        );
        tab.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_secret_never_reaches_requests_events_or_the_saved_session() {
    const SECRET: &str = "hunter2-Zq9!s3cret";
    let (_site, mock, tab) = setup("form.html").await;
    let field = center(&tab, "#password").await;
    // A visible text field too: its value comes back in the next prompt's
    // form state, which must show the placeholder, not the value.
    let name = center(&tab, "#name").await;
    let wire = Wire::Anthropic;
    let typed = |p: Point| ScriptStep::TypeAt(p.x, p.y, "<secret:password>".into());
    mock.push(wire.route(), wire.turn(0, &[typed(field)], (1280, 720)));
    mock.push(wire.route(), wire.turn(1, &[typed(name)], (1280, 720)));
    mock.push(
        wire.route(),
        wire.turn(2, &[ScriptStep::Done("logged in".into())], (1280, 720)),
    );
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let options = SessionOptions {
        secrets: Secrets::new().with("password", SECRET).unwrap(),
        recorders: vec![jsonl_recorder(&events, true).unwrap()],
        max_steps: 5,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
    let r = session.run("Type the password").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    assert_eq!(
        tab.evaluate("document.querySelector('#password').value")
            .await
            .unwrap(),
        SECRET,
        "the value was typed"
    );
    let saved = dir.path().join("session.json");
    session.save(&saved, true).unwrap();
    let result = serde_json::to_string(&r).unwrap();
    for (what, text) in [
        ("events.jsonl", std::fs::read_to_string(&events).unwrap()),
        ("session.json", std::fs::read_to_string(&saved).unwrap()),
        ("the run result", result),
        (
            "the provider requests",
            mock.requests()
                .iter()
                .map(|r| r.body.to_string())
                .collect::<String>(),
        ),
    ] {
        assert!(
            !text.contains(SECRET) && !text.contains("hunter2"),
            "the secret leaked into {what}"
        );
    }
    tab.close().await.unwrap();
}

/// A 70-character secret typed into a visible field and carried by the URL
/// afterwards: the field is masked in every later screenshot (the model's
/// and the saved ones), and no spelling of the value reaches a provider
/// request, an event, the event log or the saved session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_secret_in_a_field_and_a_url_never_leaves_and_its_field_is_masked() {
    let secret = format!("tok_9f&Zq/{}", "x7K2".repeat(15));
    assert_eq!(secret.len(), 70);
    let (_site, mock, tab) = setup("signin.html").await;
    let field = center(&tab, "#token").await;
    let wire = Wire::Anthropic;
    let vp = (1280, 720);
    mock.push(
        wire.route(),
        wire.turn(
            0,
            &[ScriptStep::TypeAt(
                field.x,
                field.y,
                "<secret:token>".into(),
            )],
            vp,
        ),
    );
    mock.push(
        wire.route(),
        wire.turn(1, &[ScriptStep::Key("Return".into())], vp),
    );
    mock.push(
        wire.route(),
        wire.turn(2, &[ScriptStep::Done("signed in".into())], vp),
    );
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let secrets = Secrets::new().with("token", secret.clone()).unwrap();
    let options = SessionOptions {
        secrets: secrets.clone(),
        recorders: vec![jsonl_recorder(&events, true).unwrap()],
        max_steps: 5,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
    let r = session.run("Sign in with the token").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    let url = tab.url().await.unwrap();
    assert!(url.contains("token=tok_9f"), "the form was sent: {url}");

    let log = std::fs::read_to_string(&events).unwrap();
    let saved = dir.path().join("session.json");
    session.save(&saved, true).unwrap();
    for (what, text) in [
        ("events.jsonl", log.clone()),
        ("session.json", std::fs::read_to_string(&saved).unwrap()),
        ("the run result", serde_json::to_string(&r).unwrap()),
        (
            "the provider requests",
            mock.requests()
                .iter()
                .map(|r| r.body.to_string())
                .collect::<String>(),
        ),
    ] {
        assert!(
            secrets.leaks(&text).is_empty() && !text.contains("x7K2x7K2"),
            "the secret leaked into {what}: {}",
            text.find("x7K2x7K2")
                .map(|i| &text[i.saturating_sub(300)..(i + 100).min(text.len())])
                .unwrap_or("")
        );
    }
    assert!(log.contains("token=<secret:token>"), "the URL is redacted");

    // The screenshots: before typing the field is white, after it is
    // painted over.
    let shots: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "screenshot")
        .map(|e| e["screenshot"].clone())
        .collect();
    let pixel = |shot: &serde_json::Value| {
        let shot_image: lumen::Image = serde_json::from_value(shot["image"].clone()).unwrap();
        let img = image::load_from_memory(&shot_image.data)
            .unwrap()
            .to_rgba8();
        let (sx, sy) = (
            shot["scale"]["x"].as_f64().unwrap(),
            shot["scale"]["y"].as_f64().unwrap(),
        );
        // Off the text, inside the field's box.
        let (x, y) = ((field.x as f64 + 300.0) * sx, field.y as f64 * sy);
        img.get_pixel(x as u32, y as u32).0
    };
    assert_eq!(pixel(&shots[0]), [255, 255, 255, 255], "not masked before");
    assert_eq!(pixel(&shots[1]), [96, 96, 96, 255], "masked after typing");
    tab.close().await.unwrap();
}

/// The secret the echo pages below are given.
const ECHOED: &str = "s3cr3t-Vq8Lm2Zx";

/// A site whose `search.html` is a GET search form (a `Query` box at
/// (20, 20) 300×40, a `Go` button at (20, 80) 100×40) that echoes the
/// query into its URL, title, text and console.
async fn echo_site() -> (FixtureServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("search.html"),
        "<!doctype html><title>Search</title>\
         <form action=search.html method=get><input name=q aria-label=Query \
         style='position:absolute;left:20px;top:20px;width:300px;height:40px'>\
         <button style='position:absolute;left:20px;top:80px;width:100px;height:40px'>Go</button></form>\
         <p id=out style='margin-top:100px'></p><script>\
         const q = new URLSearchParams(location.search).get('q');\
         if (q) { document.title = 'Results for ' + q; out.textContent = 'You searched for ' + q;\
         console.log('searched for', q); }</script>",
    )
    .unwrap();
    let site = FixtureServer::start_at(dir.path()).await.unwrap();
    (site, dir)
}

/// A secret typed into a GET search form comes back in the next page's
/// URL, title, text and console: no spelling of it reaches a later
/// request, `browser_state` (the tab inventory) included. (Red team: the
/// tab list was stored unredacted, so every request after the search
/// carried `…?q=<value>` and the title in `browser_state`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_echoed_by_the_page_reaches_no_request_through_the_toolset() {
    use super::browser_toolset::{browser_toolset, by_ref, member};
    use lumen_test_support::mock_provider::Route;
    use lumen_test_support::mock_provider::script::{AnthropicBlock, anthropic_turn};

    let secret = ECHOED;
    let (site, _dir) = echo_site().await;
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url("search.html")).await.unwrap().ok);
    let outline = tab.accessibility().await.unwrap().unwrap();
    let query = outline.find("textbox", "Query").unwrap().reference.clone();
    let go = outline.find("button", "Go").unwrap().reference.clone();
    let turns = [
        vec![
            member(
                0,
                0,
                "form_input",
                json!({"target": by_ref(&query), "value": "<secret:token>"}),
            ),
            member(0, 1, "left_click", json!({"target": by_ref(&go)})),
        ],
        vec![member(1, 0, "get_page_text", json!({}))],
        vec![member(2, 0, "read_console", json!({}))],
        vec![member(3, 0, "new_tab", json!({}))],
        vec![AnthropicBlock::ToolUse {
            id: "toolu_4_0".into(),
            name: "task_complete".into(),
            input: json!({"result": "searched"}),
        }],
    ];
    for t in &turns {
        mock.push(Route::AnthropicMessages, anthropic_turn(t, 1000));
    }
    let secrets = Secrets::new().with("token", secret).unwrap();
    let options = SessionOptions {
        secrets: secrets.clone(),
        max_steps: 8,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), browser_toolset(&mock), options).unwrap();
    let r = session.run("Search for the token").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    // The page did echo it (the attack works).
    let tabs = tab.tabs().await.unwrap();
    assert!(
        tabs.iter()
            .any(|t| t.title.contains(secret) && t.url.contains(secret)),
        "{tabs:?}"
    );
    let bodies: Vec<String> = mock.requests().iter().map(|r| r.body.to_string()).collect();
    assert_eq!(bodies.len(), 5);
    assert!(
        bodies[1].contains("browser_state"),
        "the toolset's tab inventory is in the request"
    );
    for (i, body) in bodies.iter().enumerate() {
        assert!(
            secrets.leaks(body).is_empty(),
            "request {i} carries the secret: {}",
            body.find(secret)
                .map(|at| &body[at.saturating_sub(200)..(at + 50).min(body.len())])
                .unwrap_or("(another spelling)")
        );
    }
    assert!(
        bodies[1].contains("<secret:token>"),
        "the placeholder stands in"
    );
    tab.close().await.unwrap();
}

/// The same echo through every adapter's computer-use wire: after the
/// search, the page's URL, title and text hold the value; no request of
/// any provider carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_echoed_by_the_page_reaches_no_request_of_any_adapter() {
    let secret = ECHOED;
    let (site, _dir) = echo_site().await;
    for wire in [
        Wire::Anthropic,
        Wire::OpenAi,
        Wire::Google,
        Wire::Compatible,
    ] {
        let mock = lumen_test_support::mock_provider().await.unwrap();
        let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
        assert!(tab.goto(&site.url("search.html")).await.unwrap().ok);
        let vp = (1280, 720);
        let turns = [
            vec![ScriptStep::TypeAt(170, 40, "<secret:token>".into())],
            vec![ScriptStep::Click(70, 100)],
            vec![ScriptStep::ScrollDown],
            vec![ScriptStep::Done("searched".into())],
        ];
        for (i, steps) in turns.iter().enumerate() {
            mock.push(wire.route(), wire.turn(i, steps, vp));
        }
        let secrets = Secrets::new().with("token", secret).unwrap();
        let options = SessionOptions {
            secrets: secrets.clone(),
            max_steps: 6,
            ..SessionOptions::default()
        };
        let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
        let r = session.run("Search for the token").await;
        assert_eq!(r.status, RunStatus::Success, "{wire:?}: {:?}", r.error);
        let title = tab.title().await.unwrap();
        assert!(
            title.contains(secret),
            "{wire:?}: the page did not echo: {title} at {}; {:?}",
            tab.url().await.unwrap(),
            r.history
                .iter()
                .flat_map(|s| s
                    .actions
                    .iter()
                    .map(|a| (&a.call.action, &a.execution.error)))
                .collect::<Vec<_>>()
        );
        for (i, request) in mock.requests().iter().enumerate() {
            let body = request.body.to_string();
            assert!(
                secrets.leaks(&body).is_empty(),
                "{wire:?} request {i} carries the secret: {}",
                body.find(secret)
                    .map(|at| &body[at.saturating_sub(200)..(at + 50).min(body.len())])
                    .unwrap_or("(another spelling)")
            );
        }
        tab.close().await.unwrap();
    }
}

/// A page too big to read in time (100,000 elements against a 2 s call
/// deadline; the red team's 300,000 took over 15 s) makes the
/// accessibility read time out: that action fails with a hint, the run
/// goes on and ends as the model says. (It ended the run.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_hangs_the_accessibility_read_fails_the_action_not_the_run() {
    use super::browser_toolset::{browser_toolset, member};
    use lumen::browser::TabOptions;
    use lumen_test_support::mock_provider::Route;
    use lumen_test_support::mock_provider::script::{AnthropicBlock, anthropic_turn};

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("busy.html"),
        "<!doctype html><title>Busy</title><body><script>\
         document.body.innerHTML = '<button>press</button>'.repeat(100000);\
         </script></body>",
    )
    .unwrap();
    let site = FixtureServer::start_at(dir.path()).await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(
        CdpTab::launch(LaunchOptions {
            tab: TabOptions {
                call_timeout: std::time::Duration::from_secs(2),
                ..TabOptions::default()
            },
            ..LaunchOptions::default()
        })
        .await
        .unwrap(),
    );
    assert!(tab.goto(&site.url("busy.html")).await.unwrap().ok);
    let turns = [
        vec![member(0, 0, "read_page", json!({"filter": "all"}))],
        vec![AnthropicBlock::ToolUse {
            id: "toolu_1_0".into(),
            name: "task_complete".into(),
            input: json!({"result": "the page hung"}),
        }],
    ];
    for t in &turns {
        mock.push(Route::AnthropicMessages, anthropic_turn(t, 1000));
    }
    let options = SessionOptions {
        max_steps: 4,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), browser_toolset(&mock), options).unwrap();
    let r = session.run("Press busy and read the page").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    let read = &r.history[0].actions[0].execution;
    assert!(!read.ok, "{read:?}");
    assert!(
        read.hints.iter().any(|h| h.contains("did not answer")),
        "{read:?}"
    );
    tab.close().await.unwrap();
}

/// A secret scoped to the page's site is not typed into a cross-origin
/// frame on that page: the keys would reach the frame's origin. The
/// action fails saying so, and the frame's field stays empty. (Red team:
/// the frame received it while the model was told nothing was typed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_secret_is_not_typed_into_a_cross_origin_frame() {
    let dir = tempfile::tempdir().unwrap();
    let site = FixtureServer::start_at(dir.path()).await.unwrap();
    let frame_url = site.url("frame.html").replace("127.0.0.1", "localhost");
    std::fs::write(
        dir.path().join("frame.html"),
        "<!doctype html><input id=f autofocus style='position:absolute;left:0;top:0;width:200px;height:40px'>",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("host.html"),
        format!(
            "<!doctype html><title>Host</title><iframe src='{frame_url}' \
             style='position:absolute;left:0;top:0;width:400px;height:200px;border:0'></iframe>"
        ),
    )
    .unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url("host.html")).await.unwrap().ok);
    let wire = Wire::Anthropic;
    let vp = (1280, 720);
    mock.push(
        wire.route(),
        wire.turn(0, &[ScriptStep::TypeAt(100, 20, "<secret:pw>".into())], vp),
    );
    mock.push(
        wire.route(),
        wire.turn(1, &[ScriptStep::Done("done".into())], vp),
    );
    let secrets = Secrets::new()
        .with("pw", "hunter2-frame")
        .unwrap()
        .scoped("pw", &["127.0.0.1"])
        .unwrap();
    let options = SessionOptions {
        secrets,
        max_steps: 4,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
    let r = session.run("Type the password").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    let typed = r.history[0]
        .actions
        .iter()
        .find(|a| matches!(a.call.action, lumen::Action::Type { .. }))
        .unwrap();
    assert!(!typed.execution.ok, "{:?}", typed.execution);
    let error = typed.execution.error.as_deref().unwrap_or_default();
    assert!(error.contains("localhost"), "{error}");
    let value = tab
        .evaluate_in_frame("frame.html", "f.value")
        .await
        .unwrap();
    assert_eq!(value, json!(""), "the frame got nothing");
    tab.close().await.unwrap();
}

/// A page that opens a tab when its field gets input makes the tab follow
/// the popup mid-typing: the mask still goes on the field typed into (its
/// page, painted over when that page is captured again), and the
/// legitimate popup is left open. (Red team: the mask went on the popup,
/// the value showed in every later screenshot of the form, and the popup
/// was closed as "a new tab on ``".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_popup_opened_while_typing_neither_unmasks_the_field_nor_is_closed() {
    use lumen::ScreenshotOptions;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("form.html"),
        "<!doctype html><title>Form</title><body style='margin:0;background:#fff'>\
         <input id=pw style='position:absolute;left:20px;top:20px;width:400px;height:40px;\
         border:0;background:#fff;color:#000;font-size:20px'><script>\
         let opened = false; pw.oninput = () => { if (!opened) { opened = true; window.open('popup.html'); } };\
         </script></body>",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("popup.html"),
        "<!doctype html><title>Popup</title>hello",
    )
    .unwrap();
    let site = FixtureServer::start_at(dir.path()).await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    assert!(tab.goto(&site.url("form.html")).await.unwrap().ok);
    let form_tab = tab.tabs().await.unwrap()[0].id.clone();
    let wire = Wire::Anthropic;
    let vp = (1280, 720);
    mock.push(
        wire.route(),
        wire.turn(0, &[ScriptStep::TypeAt(40, 40, "<secret:pw>".into())], vp),
    );
    mock.push(
        wire.route(),
        wire.turn(1, &[ScriptStep::Done("done".into())], vp),
    );
    let options = SessionOptions {
        secrets: Secrets::new().with("pw", "WWWWWWWWWWWW").unwrap(),
        max_steps: 4,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), adapter(wire, &mock), options).unwrap();
    let r = session.run("Type the password").await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);
    let tabs = tab.tabs().await.unwrap();
    assert_eq!(tabs.len(), 2, "the popup was closed: {tabs:?}");
    // The form's page, captured again: its field is painted over.
    tab.switch_to_tab(&form_tab).await.unwrap();
    assert_eq!(
        tab.evaluate("pw.value").await.unwrap(),
        json!("WWWWWWWWWWWW"),
        "the value was typed into the form, not the popup"
    );
    let shot = tab.screenshot(&ScreenshotOptions::default()).await.unwrap();
    let img = image::load_from_memory(&shot.image.data)
        .unwrap()
        .to_rgba8();
    let (sx, sy) = (shot.scale.x, shot.scale.y);
    // Inside the field, where the typed text is.
    let px = img.get_pixel((40.0 * sx) as u32, (40.0 * sy) as u32).0;
    assert_eq!(px, [96, 96, 96, 255], "the field is not masked");
    tab.close().await.unwrap();
}

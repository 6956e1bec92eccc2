//! The session policy at the network layer, on a real run: the operator's
//! closed policy (private addresses refused, 127.0.0.1 allowed) with pages
//! that make the browser reach `localhost` on their own. "Never sent" is
//! proven by the denied host's own fixture server, whose request log must
//! stay empty; the model is told what was refused, and a refused navigation
//! does not leave the tab on the browser's error page.

use super::adapter;
use std::sync::Arc;
use std::time::Duration;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::safety::PolicyConfig;
use lumen::{BrowserTab, RunStatus, Session, SessionOptions};
use lumen_test_support::FixtureServer;
use lumen_test_support::mock_provider::MockProvider;
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};

/// The whole top-left 400x200 of every test page is one button.
const BUTTON: (i32, i32) = (100, 100);

fn page(body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>t</title></head><body style=margin:0>\
         <button id=b style='position:absolute;left:0;top:0;width:400px;height:200px'>go</button>{body}</body></html>"
    )
}

/// `lumen serve`'s closed default, opened for the fixture site only.
fn operator_policy() -> PolicyConfig {
    PolicyConfig {
        block_private_network: true,
        allowed_private_hosts: vec!["127.0.0.1".into()],
        ..PolicyConfig::default()
    }
}

struct Rig {
    site: FixtureServer,
    /// The denied host: `localhost:PORT` (loopback by name).
    denied: FixtureServer,
    mock: MockProvider,
    tab: Arc<CdpTab>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

async fn rig(pages: &[(&str, &str)]) -> Rig {
    let site_dir = tempfile::tempdir().unwrap();
    let denied_dir = tempfile::tempdir().unwrap();
    let denied = FixtureServer::start_at(denied_dir.path()).await.unwrap();
    for name in ["form", "meta"] {
        std::fs::write(denied_dir.path().join(format!("{name}.html")), page("")).unwrap();
    }
    for (name, body) in pages {
        let body = body.replace("DENIED", &format!("http://localhost:{}", denied.port()));
        std::fs::write(site_dir.path().join(name), page(&body)).unwrap();
    }
    let site = FixtureServer::start_at(site_dir.path()).await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    Rig {
        site,
        denied,
        mock,
        tab,
        _dirs: (site_dir, denied_dir),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_initiated_requests_to_a_denied_host_never_leave_the_browser() {
    let rig = rig(&[
        (
            "form.html",
            "<form id=f method=post action='DENIED/form.html'><input name=q value=secret></form>\
             <script>b.onclick = () => f.submit()</script>",
        ),
        (
            "meta.html",
            r#"<meta http-equiv="refresh" content="0;url=DENIED/meta.html">"#,
        ),
    ])
    .await;
    // Without the policy both pages do reach the denied host.
    rig.tab.goto(&rig.site.url("meta.html")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        rig.denied.requests().iter().any(|r| r.path == "/meta.html"),
        "the attack page does not work: {:?}",
        rig.denied.requests()
    );
    rig.denied.clear_requests();

    assert!(rig.tab.goto(&rig.site.url("form.html")).await.unwrap().ok);
    let wire = Wire::Anthropic;
    let turns = [
        vec![ScriptStep::Click(BUTTON.0, BUTTON.1)],
        vec![ScriptStep::Goto(rig.site.url("meta.html"))],
        vec![ScriptStep::Hover(600, 500)],
        vec![ScriptStep::Done("done".into())],
    ];
    for (i, steps) in turns.iter().enumerate() {
        rig.mock
            .push(wire.route(), wire.turn(i, steps, (1280, 720)));
    }
    let options = SessionOptions {
        policy: operator_policy(),
        max_steps: 6,
        ..SessionOptions::default()
    };
    let mut session = Session::new(rig.tab.clone(), adapter(wire, &rig.mock), options).unwrap();
    let r = session
        .run("Submit the form, then open the other page")
        .await;
    assert_eq!(r.status, RunStatus::Success, "{:?}", r.error);

    assert!(
        rig.denied.requests().is_empty(),
        "requests reached the denied host: {:?}",
        rig.denied.requests()
    );
    // The model read what was refused: the form post (reported by the
    // click, or as "before this action" by the next one when it left
    // just after the click's receipt) and the meta refresh.
    let told = |path: &str| {
        rig.mock.requests()[1..].iter().any(|r| {
            let body = r.body.to_string();
            body.contains("blocked by policy before it was sent") && body.contains(path)
        })
    };
    assert!(
        told("/form.html"),
        "the model was not told about the form post"
    );
    assert!(
        told("/meta.html"),
        "the model was not told about the meta refresh"
    );
    // A refused navigation that left the tab on the browser's error page
    // was undone: the tab is back on an allowed page.
    let url = rig.tab.url().await.unwrap();
    assert!(
        url.starts_with(&rig.site.url("")) || url == "about:blank",
        "the tab was left on {url}"
    );
    rig.tab.close().await.unwrap();
}

//! End to end: real Chromium on fixture pages from 127.0.0.1, each real
//! adapter talking to the mock provider over real HTTP/SSE. The model is
//! scripted: each turn is written in the provider's own wire format with
//! coordinates read from the page, so everything between the provider's
//! bytes and the page's DOM is the real engine.

use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::models::{AdapterOptions, ApiKey};
use lumen::safety::{PolicyConfig, UrlMatchesGate};
use lumen::{BrowserTab, Point, RunResult, RunStatus, Session, SessionOptions, StreamEvent};
use lumen_test_support::mock_provider::MockProvider;
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_test_support::{FixtureServer, element_center};
use serde_json::Value;

type Provider = Wire;
const ALL: [Wire; 4] = Wire::ALL;

struct Harness {
    site: FixtureServer,
    mock: MockProvider,
    tab: Arc<CdpTab>,
    provider: Provider,
}

impl Harness {
    async fn new(provider: Provider, page: &str) -> Harness {
        let site = FixtureServer::start().await.unwrap();
        let mock = lumen_test_support::mock_provider().await.unwrap();
        let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
        assert!(tab.goto(&site.url(page)).await.unwrap().ok);
        Harness {
            site,
            mock,
            tab,
            provider,
        }
    }

    async fn center(&self, selector: &str) -> Point {
        element_center(self.tab.as_ref(), selector)
            .await
            .unwrap()
            .expect(selector)
    }

    async fn script(&self, turns: &[Vec<ScriptStep>]) {
        let vp = self.tab.viewport().await.unwrap();
        for (i, t) in turns.iter().enumerate() {
            self.mock.push(
                self.provider.route(),
                self.provider.turn(i, t, (vp.width, vp.height)),
            );
        }
    }

    fn session(&self, options: SessionOptions) -> Session {
        let adapter = super::adapter(self.provider, &self.mock);
        Session::new(self.tab.clone(), adapter, options).unwrap()
    }

    async fn js(&self, expr: &str) -> Value {
        self.tab.evaluate(expr).await.unwrap()
    }

    /// Request bodies as text, with the number of screenshots each carried.
    fn requests(&self) -> Vec<(String, usize)> {
        self.mock
            .requests()
            .into_iter()
            .map(|r| {
                let body = r.body.to_string();
                // Every screenshot is a JPEG: its base64 starts with /9j/.
                let images = body.matches("/9j/").count();
                (body, images)
            })
            .collect()
    }
}

fn opts(max_steps: u32) -> SessionOptions {
    SessionOptions {
        max_steps,
        ..SessionOptions::default()
    }
}

fn assert_success(r: &RunResult, answer: &str, provider: Provider) {
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some(answer)),
        "{provider:?}: {:?}",
        r.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_step_form_task_fills_and_submits_the_form_with_every_adapter() {
    // Every protocol, and the Anthropic computer toolset and Gemini 3.5's
    // action set on the same adapters.
    for provider in ALL.into_iter().chain(Wire::DIALECTS) {
        let h = Harness::new(provider, "form.html").await;
        let (name, email, submit) = (
            h.center("#name").await,
            h.center("#email").await,
            h.center("#submit").await,
        );
        h.script(&[
            vec![ScriptStep::TypeAt(name.x, name.y, "Ada Lovelace".into())],
            vec![ScriptStep::TypeAt(
                email.x,
                email.y,
                "ada@example.com".into(),
            )],
            vec![ScriptStep::Click(submit.x, submit.y)],
            vec![ScriptStep::Done("submitted".into())],
        ])
        .await;
        let mut session = h.session(opts(8));
        let r = session
            .run("Fill in name and email, then submit the form")
            .await;
        assert_success(&r, "submitted", provider);
        let submitted = h.js("window.lumen.submitted").await;
        assert_eq!(submitted["name"], "Ada Lovelace", "{provider:?}");
        assert_eq!(submitted["email"], "ada@example.com", "{provider:?}");
        let reqs = h.requests();
        assert_eq!(reqs.len(), 4, "{provider:?}: one request per step");
        for (i, (body, images)) in reqs.iter().enumerate() {
            assert!(
                *images >= 1 && *images <= 2,
                "{provider:?} request {i}: {images} screenshots (keep_recent is 2)"
            );
            if i > 0 {
                assert!(
                    provider.answers_turn(body, i - 1),
                    "{provider:?} request {i} answers the previous turn"
                );
            }
        }
        h.tab.close().await.unwrap();
        drop(h.site);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scroll_and_read_task_is_answered_through_terminate() {
    for provider in ALL.into_iter().chain(Wire::DIALECTS) {
        let h = Harness::new(provider, "scroll.html").await;
        h.script(&[
            vec![ScriptStep::ScrollDown],
            vec![ScriptStep::Done("Item 20 is visible".into())],
        ])
        .await;
        let mut session = h.session(opts(5));
        let r = session
            .run("Scroll down and say which item is visible")
            .await;
        assert_success(&r, "Item 20 is visible", provider);
        let y = h.js("window.scrollY").await.as_f64().unwrap();
        assert!(y > 100.0, "{provider:?}: the page scrolled ({y})");
        assert_eq!(r.history.len(), 2);
        h.tab.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_domain_is_refused_and_the_model_is_told() {
    for provider in ALL {
        let h = Harness::new(provider, "links/page1.html").await;
        let forbidden = h.site.cross_origin_url("links/page2.html");
        h.script(&[
            vec![ScriptStep::Goto(forbidden)],
            vec![ScriptStep::Done("blocked".into())],
        ])
        .await;
        let policy = PolicyConfig {
            blocked_domains: vec!["localhost".into()],
            ..PolicyConfig::default()
        };
        let mut session = h.session(SessionOptions { policy, ..opts(5) });
        let r = session.run("Open page 2 on localhost").await;
        assert_success(&r, "blocked", provider);
        let url = h.tab.url().await.unwrap();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("page1.html"),
            "{provider:?}: stayed on {url}"
        );
        assert!(r.history[0].actions[0].blocked.is_some());
        let (second, _) = &h.requests()[1];
        assert!(
            second.contains("Blocked"),
            "{provider:?}: the refusal reached the model"
        );
        h.tab.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_premature_terminate_is_rejected_by_the_verifier_and_the_run_goes_on() {
    for provider in ALL {
        let h = Harness::new(provider, "links/page1.html").await;
        let target = h.site.url("links/page2.html");
        h.script(&[
            vec![ScriptStep::Done("too early".into())],
            vec![ScriptStep::Goto(target)],
            vec![ScriptStep::Done("on page 2".into())],
        ])
        .await;
        let gate = Arc::new(UrlMatchesGate::new("/links/page2\\.html$").unwrap());
        let mut session = h.session(SessionOptions {
            verifier: Some(gate),
            ..opts(6)
        });
        let r = session.run("Go to page 2").await;
        assert_success(&r, "on page 2", provider);
        assert_eq!(r.steps, 3);
        let rejected = &r.history[0].actions[0].execution;
        assert!(
            !rejected.ok
                && rejected
                    .error
                    .as_deref()
                    .unwrap_or("")
                    .contains("terminate rejected")
        );
        let (second, _) = &h.requests()[1];
        assert!(
            second.contains("terminate rejected"),
            "{provider:?}: the rejection was fed back"
        );
        h.tab.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_resumes_from_a_saved_snapshot_without_losing_or_repeating_a_step() {
    for provider in ALL {
        let h = Harness::new(provider, "counter.html").await;
        let inc = h.center("#inc").await;
        h.script(&[
            vec![ScriptStep::Click(inc.x, inc.y)],
            vec![ScriptStep::Click(inc.x, inc.y)],
            vec![ScriptStep::Click(inc.x, inc.y)],
            vec![ScriptStep::Done("3 clicks".into())],
        ])
        .await;
        // The first session stops after two steps (its budget), as a crash would.
        let mut first = h.session(opts(2));
        let r = first.run("Click the button three times").await;
        assert_eq!(r.status, RunStatus::MaxSteps, "{provider:?}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        first.save(&path, false).unwrap();
        drop(first);

        let snapshot = lumen::memory::SerializedHistory::load(&path).unwrap();
        let adapter = lumen::models::create_adapter(
            provider.model(),
            AdapterOptions {
                api_key: Some(ApiKey::new("k")),
                base_url: Some(provider.base_url(&h.mock)),
                ..AdapterOptions::default()
            },
        )
        .unwrap();
        let mut resumed = Session::resume(h.tab.clone(), adapter, opts(6), snapshot).unwrap();
        let r = resumed.run("Click the button three times").await;
        assert_success(&r, "3 clicks", provider);
        assert_eq!(r.steps, 4, "{provider:?}: steps continue from the snapshot");
        assert_eq!(
            h.js("window.lumen.clicks").await,
            3,
            "{provider:?}: no click lost or repeated"
        );
        let reqs = h.requests();
        assert_eq!(reqs.len(), 4);
        assert!(
            provider.answers_turn(&reqs[2].0, 1),
            "{provider:?}: the resumed request carries the history"
        );
        h.tab.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_stream_carries_every_step() {
    let h = Harness::new(Provider::Anthropic, "counter.html").await;
    let inc = h.center("#inc").await;
    h.script(&[
        vec![ScriptStep::Click(inc.x, inc.y)],
        vec![ScriptStep::Done("done".into())],
    ])
    .await;
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    let recorder: lumen::perception::monitor::Recorder =
        Arc::new(move |e| sink.lock().unwrap().push(e.clone()));
    let mut session = h.session(SessionOptions {
        recorders: vec![recorder],
        ..opts(4)
    });
    let r = session.run("Click once").await;
    assert_eq!(r.status, RunStatus::Success);
    let events = events.lock().unwrap().clone();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (0..events.len() as u64).collect::<Vec<_>>(),
        "numbered without gaps"
    );
    assert!(matches!(
        events.first().map(|e| &e.event),
        Some(StreamEvent::RunStarted { .. })
    ));
    assert!(matches!(
        events.last().map(|e| &e.event),
        Some(StreamEvent::Done { .. })
    ));
    let completed = events
        .iter()
        .filter(|e| matches!(e.event, StreamEvent::StepCompleted { .. }))
        .count();
    assert_eq!(completed, 2);
    h.tab.close().await.unwrap();
}

/// Every screenshot a model sees is sized to its image limits, so the API
/// never shrinks it and coordinates stay exact: a 1280x720 page at DPR 2
/// (2560x1440, 3.7 MP) reaches Claude Sonnet 4.6 within 1568 px and ~1.18
/// MP, and the computer tool's display size says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_reach_the_model_within_its_image_limits() {
    let h = Harness::new(Wire::Anthropic, "dpr.html").await;
    h.tab
        .set_viewport(lumen::Size::new(1280, 720), 2.0)
        .await
        .unwrap();
    let cell = h.center("#cell-2-1").await;
    h.script(&[
        vec![ScriptStep::Click(cell.x, cell.y)],
        vec![ScriptStep::Done("C2".into())],
    ])
    .await;
    let mut session = h.session(opts(4));
    let r = session.run("Click cell C2").await;
    assert_success(&r, "C2", Wire::Anthropic);
    // The click landed where the model pointed, through the scaling.
    assert_eq!(h.js("window.lumen.clicked.label").await, "C2");
    assert_eq!(h.mock.violations(), Vec::<String>::new());
    for request in h.mock.requests() {
        let tool = &request.body["tools"][0];
        let (w, h_px) = (
            tool["display_width_px"].as_u64().unwrap(),
            tool["display_height_px"].as_u64().unwrap(),
        );
        assert!(
            w <= 1568 && h_px <= 1568 && w * h_px <= 1_176_000,
            "{w}x{h_px}"
        );
        assert!(w > 1280, "sized down only as far as the limits: {w}x{h_px}");
    }
    h.tab.close().await.unwrap();
}

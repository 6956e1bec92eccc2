//! The [`Agent`] facade end to end: a custom adapter and tab, each run a
//! fresh history and step budget (continuing is explicit), `resume` and
//! `stream`, and the run modes through the agent. Real Chromium on the
//! fixture site; the real OpenAI-compatible adapter talking to the mock
//! provider over HTTP/SSE.

use std::sync::Arc;

use futures::StreamExt as _;
use lumen::browser::{CdpTab, LaunchOptions};
use lumen::models::{AdapterOptions, ApiKey};
use lumen::{
    Agent, AgentOptions, BrowserSource, BrowserTab, ModelAdapter, RunMode, RunStatus,
    SessionOptions, StreamEvent,
};
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_test_support::mock_provider::{MockProvider, Reply};
use lumen_test_support::{FixtureServer, StatusCode, element_center};
use serde_json::{Value, json};

const WIRE: Wire = Wire::Compatible;

struct Env {
    site: FixtureServer,
    mock: MockProvider,
    tab: Arc<CdpTab>,
}

impl Env {
    async fn new() -> Env {
        let env = Env {
            site: FixtureServer::start().await.unwrap(),
            mock: lumen_test_support::mock_provider().await.unwrap(),
            tab: Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap()),
        };
        assert!(env.tab.goto(&env.counter()).await.unwrap().ok);
        env
    }

    fn counter(&self) -> String {
        self.site.url("counter.html")
    }

    fn adapter_options(&self) -> AdapterOptions {
        AdapterOptions {
            api_key: Some(ApiKey::new("test-key")),
            base_url: Some(WIRE.base_url(&self.mock)),
            ..AdapterOptions::default()
        }
    }

    fn adapter(&self, model: &str) -> Arc<dyn ModelAdapter> {
        lumen::models::create_adapter(model, self.adapter_options()).unwrap()
    }

    /// Options naming the model (the agent creates the adapter) on our tab.
    fn options(&self, max_steps: u32) -> AgentOptions {
        AgentOptions {
            adapter: self.adapter_options(),
            browser: BrowserSource::Custom(self.tab.clone()),
            session: SessionOptions {
                max_steps,
                ..SessionOptions::default()
            },
            ..AgentOptions::new(WIRE.model())
        }
    }

    async fn click_inc(&self, turn: usize) {
        let p = element_center(self.tab.as_ref(), "#inc")
            .await
            .unwrap()
            .unwrap();
        self.mock.push(
            WIRE.route(),
            WIRE.turn(turn, &[ScriptStep::Click(p.x, p.y)], (1280, 720)),
        );
    }

    fn done(&self, turn: usize, answer: &str) {
        self.mock.push(
            WIRE.route(),
            WIRE.turn(turn, &[ScriptStep::Done(answer.into())], (1280, 720)),
        );
    }

    fn bodies(&self) -> Vec<String> {
        self.mock
            .requests()
            .into_iter()
            .map(|r| r.body.to_string())
            .collect()
    }

    async fn clicks(&self) -> Value {
        self.tab.evaluate("window.lumen.clicks").await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_starts_a_fresh_history_and_step_budget() {
    let env = Env::new().await;
    env.click_inc(0).await;
    env.done(1, "first done");
    // A budget of 2: the first run spends all of it.
    let mut agent = Agent::new(env.options(2));
    let r = agent.run("FIRST-TASK: click once", None).await.unwrap();
    assert_eq!(
        (r.status, r.result.as_deref(), r.steps),
        (RunStatus::Success, Some("first done"), 2),
        "{:?}",
        r.error
    );

    env.click_inc(0).await;
    env.done(1, "second done");
    let r = agent.run("SECOND-TASK: click again", None).await.unwrap();
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some("second done")),
        "a second run has a budget of its own: {:?}",
        r.error
    );
    assert_eq!(r.steps, 2, "its steps count from 1");
    assert_eq!(r.history.len(), 2, "its history holds only its own steps");
    assert_eq!(env.clicks().await, 2);
    let bodies = env.bodies();
    assert_eq!(bodies.len(), 4);
    for second in &bodies[2..] {
        assert!(second.contains("SECOND-TASK"), "{second}");
        assert!(
            !second.contains("FIRST-TASK") && !second.contains("first done"),
            "the first run's history does not reach the second: {second}"
        );
    }
    agent.close().await.unwrap();
}

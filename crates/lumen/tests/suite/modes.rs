//! The run modes through `Session::run_mode`: plan, agent with a planner
//! pass, exec with retries, and opening the start URL. Real Chromium on the
//! fixture site, the real OpenAI-compatible adapter talking to the mock
//! provider over HTTP/SSE. These are the paths the agent, the CLI and the
//! server take.

use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::models::{AdapterOptions, ApiKey};
use lumen::perception::planner::PLANNER_PROMPT;
use lumen::{
    BrowserTab, ErrorCode, LumenError, ModelAdapter, RunMode, RunStatus, Session, SessionOptions,
};
use lumen_test_support::mock_provider::script::chat_turn;
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_test_support::mock_provider::{MockProvider, Reply};
use lumen_test_support::{FixtureServer, StatusCode, element_center};
use serde_json::{Value, json};

const WIRE: Wire = Wire::Compatible;
/// The planner's model, told apart from the session's by the request body.
const PLANNER: &str = "compatible/planner-mini";

struct Env {
    site: FixtureServer,
    mock: MockProvider,
    /// A fresh browser on about:blank: only `run_mode` opens the page.
    tab: Arc<CdpTab>,
}

impl Env {
    async fn new() -> Env {
        Env {
            site: FixtureServer::start().await.unwrap(),
            mock: lumen_test_support::mock_provider().await.unwrap(),
            tab: Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap()),
        }
    }

    fn adapter(&self, model: &str) -> Arc<dyn ModelAdapter> {
        lumen::models::create_adapter(
            model,
            AdapterOptions {
                api_key: Some(ApiKey::new("test-key")),
                base_url: Some(WIRE.base_url(&self.mock)),
                ..AdapterOptions::default()
            },
        )
        .unwrap()
    }

    fn session(&self, max_steps: u32) -> Session {
        let options = SessionOptions {
            max_steps,
            ..SessionOptions::default()
        };
        Session::new(self.tab.clone(), self.adapter(WIRE.model()), options).unwrap()
    }

    fn counter(&self) -> String {
        self.site.url("counter.html")
    }

    /// The counter's button, read from the page (which must be open).
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

    /// A terminate that gives up: the attempt ends as a failure.
    fn give_up(&self, reason: &str) {
        self.mock.push(
            WIRE.route(),
            chat_turn(
                &[(
                    "f",
                    "task_complete",
                    json!({"result": reason, "status": "failure"}),
                )],
                None,
                100,
            ),
        );
    }

    /// A planner's non-streaming answer.
    fn plan(&self, text: &str) {
        self.mock.push(
            WIRE.route(),
            Reply::Json(
                StatusCode::OK,
                json!({"id": "chatcmpl-p", "object": "chat.completion", "model": "mock",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}}),
            ),
        );
    }

    fn bodies(&self) -> Vec<Value> {
        self.mock.requests().into_iter().map(|r| r.body).collect()
    }

    async fn clicks(&self) -> Value {
        self.tab.evaluate("window.lumen.clicks").await.unwrap()
    }
}

fn is_streamed(body: &Value) -> bool {
    body["stream"] == true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_opens_the_start_url_and_returns_the_plan_without_acting() {
    let env = Env::new().await;
    env.plan("1. Click Increment.\n2. Report the count.");
    let mut session = env.session(5);
    let r = session
        .run_mode("Click the button once", Some(&env.counter()), RunMode::Plan)
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Success);
    assert_eq!(
        r.result.as_deref(),
        Some("1. Click Increment.\n2. Report the count.")
    );
    assert_eq!((r.steps, r.history.len()), (0, 0));
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (40, 12));
    // The start URL was opened, and nothing was clicked.
    assert_eq!(env.tab.url().await.unwrap(), env.counter());
    assert_eq!(env.clicks().await, 0);
    // One single-shot planner call with the session's model (no planner
    // set), about the page it opened.
    let bodies = env.bodies();
    assert_eq!(bodies.len(), 1);
    assert!(!is_streamed(&bodies[0]), "{}", bodies[0]);
    assert_eq!(bodies[0]["model"], "qwen2.5-vl");
    let text = bodies[0].to_string();
    assert!(text.contains(&PLANNER_PROMPT[..40]), "{text}");
    assert!(text.contains(&format!("Current URL: {}", env.counter())));
    assert!(text.contains("Click the button once"));
    assert_eq!(env.mock.violations(), Vec::<String>::new());
    env.tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_mode_with_a_planner_plans_first_and_shows_the_plan_every_step() {
    let env = Env::new().await;
    assert!(env.tab.goto(&env.counter()).await.unwrap().ok);
    env.plan("PLAN-MARKER: click Increment once, then report.");
    env.click_inc(0).await;
    env.done(1, "clicked");
    let mut session = env.session(5);
    session.set_planner(Some(env.adapter(PLANNER)));
    let r = session
        .run_mode("Click the button once", None, RunMode::Agent)
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some("clicked")),
        "{:?}",
        r.error
    );
    assert_eq!(env.clicks().await, 1);
    let bodies = env.bodies();
    assert_eq!(bodies.len(), 3, "the plan, then one request per step");
    assert_eq!(bodies[0]["model"], "planner-mini");
    assert!(!is_streamed(&bodies[0]));
    for body in &bodies[1..] {
        assert_eq!(body["model"], "qwen2.5-vl");
        assert!(is_streamed(body));
        assert!(body.to_string().contains("PLAN-MARKER"), "{body}");
    }
    env.tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_mode_retries_a_failed_attempt_with_its_reason() {
    let env = Env::new().await;
    assert!(env.tab.goto(&env.counter()).await.unwrap().ok);
    env.give_up("REASON-MARKER: the button did not answer");
    env.click_inc(0).await;
    env.done(1, "clicked on the second attempt");
    let mut session = env.session(5);
    let r = session
        .run_mode("Click the button once", None, RunMode::Exec { attempts: 3 })
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some("clicked on the second attempt")),
        "{:?}",
        r.error
    );
    // The second attempt starts afresh: its own history and step count.
    assert_eq!(r.steps, 2);
    assert_eq!(env.clicks().await, 1);
    let bodies: Vec<String> = env.bodies().iter().map(Value::to_string).collect();
    assert_eq!(bodies.len(), 3, "one failed attempt, then two steps");
    assert!(!bodies[0].contains("Attempt 2"));
    for retry in &bodies[1..] {
        assert!(retry.contains("Attempt 2 of 3"), "{retry}");
        assert!(retry.contains("REASON-MARKER"), "the reason was fed back");
        assert!(retry.contains("Take a different approach"));
    }
    env.tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_mode_stops_at_the_first_success_and_after_the_last_attempt() {
    let env = Env::new().await;
    assert!(env.tab.goto(&env.counter()).await.unwrap().ok);
    env.done(0, "first try");
    let mut session = env.session(5);
    let r = session
        .run_mode("Report", None, RunMode::Exec { attempts: 3 })
        .await
        .unwrap();
    assert_eq!(r.result.as_deref(), Some("first try"));
    assert_eq!(env.bodies().len(), 1, "a success is not retried");

    // Two attempts that both give up: two calls, the last failure returned.
    env.give_up("no");
    env.give_up("still no");
    let mut session = env.session(5);
    let r = session
        .run_mode("Report", None, RunMode::Exec { attempts: 2 })
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Failure, Some("still no"))
    );
    assert_eq!(env.bodies().len(), 3);
    env.tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_url_that_does_not_open_or_a_cancelled_run_never_reaches_the_model() {
    let env = Env::new().await;
    let mut session = env.session(5);
    let err = session
        .run_mode("Anything", Some("http://127.0.0.1:9/"), RunMode::Agent)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ConfigError, "{err}");
    assert!(err.to_string().contains("http://127.0.0.1:9/"), "{err}");

    session.control().cancel("test");
    let err = session
        .run_mode("Anything", Some(&env.counter()), RunMode::Plan)
        .await
        .unwrap_err();
    assert!(matches!(err, LumenError::Cancelled { .. }), "{err}");
    assert!(env.bodies().is_empty());
    env.tab.close().await.unwrap();
}

//! The [`Agent`] facade end to end: a custom adapter and tab, each run a
//! fresh history and step budget (continuing is explicit), `resume` and
//! `stream`, and the run modes through the agent. Real Chromium on the
//! fixture site; the real OpenAI-compatible adapter talking to the mock
//! provider over HTTP/SSE.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use lumen::browser::{CdpTab, LaunchOptions};
use lumen::models::{AdapterOptions, ApiKey};
use lumen::{
    Agent, AgentOptions, BrowserSource, BrowserTab, ModelAdapter, ModelInfo, ModelResponse,
    ModelStream, RunMode, RunStatus, SessionOptions, StepContext, StreamEvent, TaskState,
    WireRecord,
};
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_test_support::mock_provider::{MockProvider, Reply};
use lumen_test_support::{FixtureServer, GatedChromium, StatusCode, element_center};
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

/// A model adapter of the user's own: a wrapper counting the calls to the
/// real one, so the test sees the agent used it and created none.
struct Counting {
    inner: Arc<dyn ModelAdapter>,
    calls: AtomicUsize,
}

impl Counting {
    fn new(inner: Arc<dyn ModelAdapter>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            calls: AtomicUsize::new(0),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl ModelAdapter for Counting {
    fn info(&self) -> &ModelInfo {
        self.inner.info()
    }
    async fn stream(&self, ctx: &StepContext<'_>) -> lumen::Result<ModelStream> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.stream(ctx).await
    }
    async fn step(&self, ctx: &StepContext<'_>) -> lumen::Result<ModelResponse> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.step(ctx).await
    }
    fn estimate_tokens(&self, ctx: &StepContext<'_>) -> u64 {
        self.inner.estimate_tokens(ctx)
    }
    async fn summarize(
        &self,
        wire: &[WireRecord],
        state: Option<&TaskState>,
    ) -> lumen::Result<String> {
        self.inner.summarize(wire, state).await
    }
}

/// Options with our own adapter and tab, and nothing that could create
/// another adapter: no key, no base URL.
fn custom(adapter: Arc<dyn ModelAdapter>, tab: Arc<CdpTab>, max_steps: u32) -> AgentOptions {
    AgentOptions {
        browser: BrowserSource::Custom(tab),
        session: SessionOptions {
            max_steps,
            ..SessionOptions::default()
        },
        ..AgentOptions::with_adapter(adapter)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_on_a_custom_adapter_and_tab_and_continues_only_when_asked() {
    let env = Env::new().await;
    let model = Counting::new(env.adapter(WIRE.model()));
    let options = custom(model.clone(), env.tab.clone(), 4);
    assert_eq!(
        options.model, "qwen2.5-vl",
        "named after the adapter's model"
    );
    env.click_inc(0).await;
    env.done(1, "clicked once");
    let mut agent = Agent::new(options);
    let r = agent.run("FIRST-TASK: click once", None).await.unwrap();
    assert_eq!(
        (r.status, r.result.as_deref(), r.steps),
        (RunStatus::Success, Some("clicked once"), 2),
        "{:?}",
        r.error
    );
    assert_eq!(
        model.calls(),
        2,
        "every model call went through our adapter"
    );
    assert_eq!(env.clicks().await, 1, "on our tab");

    // Continuing is explicit: the model sees the first run, steps count on.
    env.done(2, "FOLLOW-UP: the counter shows 1");
    let r = agent
        .continue_run("FOLLOW-UP-TASK: what does the counter show?")
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some("FOLLOW-UP: the counter shows 1")),
        "{:?}",
        r.error
    );
    assert_eq!(r.steps, 3, "steps count on from the previous run");
    assert_eq!(r.history.len(), 3);
    assert_eq!(model.calls(), 3);
    let bodies = env.bodies();
    let last = bodies.last().unwrap();
    assert!(last.contains("FOLLOW-UP-TASK"), "{last}");
    assert!(
        WIRE.answers_turn(last, 1),
        "the continued request carries the previous run's turns: {last}"
    );
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_agent_continues_its_snapshot_then_runs_afresh() {
    let env = Env::new().await;
    for turn in 0..3 {
        env.click_inc(turn).await;
    }
    env.done(3, "3 clicks");
    // The first agent stops after two steps (its budget), as a crash would.
    let mut first = Agent::new(env.options(2));
    let r = first
        .run("Click the button three times", None)
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::MaxSteps, "{:?}", r.error);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.json");
    first.session_mut().unwrap().save(&path, false).unwrap();
    assert_eq!(
        first.serialize(false).unwrap().step_count,
        2,
        "serialize holds the run"
    );
    drop(first);

    let snapshot = lumen::memory::SerializedHistory::load(&path).unwrap();
    let mut resumed = Agent::resume(snapshot, env.options(6));
    let r = resumed
        .run("Click the button three times", None)
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some("3 clicks")),
        "{:?}",
        r.error
    );
    assert_eq!(r.steps, 4, "steps continue from the snapshot");
    assert_eq!(env.clicks().await, 3, "no click lost or repeated");
    let bodies = env.bodies();
    assert_eq!(bodies.len(), 4);
    assert!(
        WIRE.answers_turn(&bodies[2], 1),
        "the resumed request carries the history"
    );

    // The snapshot was for that run only: the next run is a new task.
    env.done(0, "fresh");
    let r = resumed.run("NEW-TASK", None).await.unwrap();
    assert_eq!((r.steps, r.result.as_deref()), (1, Some("fresh")));
    let last = env.bodies().pop().unwrap();
    assert!(!last.contains("three times"), "{last}");
    resumed.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_run_delivers_every_event_and_hands_the_agent_back() {
    let env = Env::new().await;
    env.click_inc(0).await;
    env.done(1, "streamed");
    let agent = Agent::new(env.options(4));
    let (events, handle) = agent.stream("Click once".into(), Some(env.counter()));
    let events: Vec<_> = events.collect().await;
    let (agent, r) = handle.await.unwrap();
    let r = r.unwrap();
    assert_eq!(
        (r.status, r.result.as_deref(), r.steps),
        (RunStatus::Success, Some("streamed"), 2),
        "{:?}",
        r.error
    );
    assert_eq!(env.clicks().await, 1);
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

    // The agent came back: a second stream is a new task of its own.
    env.done(0, "again");
    let (events, handle) = agent.stream("SECOND".into(), None);
    let events: Vec<_> = events.collect().await;
    let (mut agent, r) = handle.await.unwrap();
    let r = r.unwrap();
    assert_eq!((r.steps, r.result.as_deref()), (1, Some("again")));
    assert_eq!(events.first().map(|e| e.seq), Some(0));
    assert!(matches!(
        events.last().map(|e| &e.event),
        Some(StreamEvent::Done { .. })
    ));
    // ...and the streamed run can be continued.
    env.done(1, "continued");
    let r = agent.continue_run("And now?").await.unwrap();
    assert_eq!((r.steps, r.result.as_deref()), (2, Some("continued")));
    agent.close().await.unwrap();
}

/// A planner's non-streaming answer.
fn plan_reply(text: &str) -> Reply {
    Reply::Json(
        StatusCode::OK,
        json!({"id": "chatcmpl-p", "object": "chat.completion", "model": "mock",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_runs_plan_agent_and_exec_mode_with_a_custom_planner() {
    let env = Env::new().await;
    let planner = Counting::new(env.adapter("compatible/planner-mini"));
    let options = AgentOptions {
        planner_adapter: Some(planner.clone()),
        ..env.options(4)
    };
    let mut agent = Agent::new(options);

    // Plan: the custom planner answers; nothing is clicked.
    env.mock
        .push(WIRE.route(), plan_reply("PLAN-A: click Increment."));
    let r = agent
        .run_mode("Click once", Some(&env.counter()), RunMode::Plan)
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref(), r.steps),
        (RunStatus::Success, Some("PLAN-A: click Increment."), 0)
    );
    assert_eq!((planner.calls(), env.clicks().await), (1, json!(0)));

    // Agent: plans with it, then acts with the plan in every prompt.
    env.mock
        .push(WIRE.route(), plan_reply("PLAN-B: click Increment."));
    env.click_inc(0).await;
    env.done(1, "clicked");
    let r = agent
        .run_mode("Click once", None, RunMode::Agent)
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref(), r.steps),
        (RunStatus::Success, Some("clicked"), 2),
        "{:?}",
        r.error
    );
    assert_eq!((planner.calls(), env.clicks().await), (2, json!(1)));
    let bodies = env.bodies();
    assert_eq!(bodies.len(), 4);
    assert!(bodies[2..].iter().all(|b| b.contains("PLAN-B")));

    // Exec: a failed attempt is retried with its reason, fresh budget.
    env.mock.push(WIRE.route(), plan_reply("PLAN-C"));
    env.mock.push(
        WIRE.route(),
        lumen_test_support::mock_provider::script::chat_turn(
            &[(
                "f",
                "task_complete",
                json!({"result": "REASON-MARKER", "status": "failure"}),
            )],
            None,
            100,
        ),
    );
    env.done(0, "second attempt");
    let r = agent
        .run_mode("Report", None, RunMode::Exec { attempts: 2 })
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.result.as_deref(), r.steps),
        (RunStatus::Success, Some("second attempt"), 1),
        "{:?}",
        r.error
    );
    let last = env.bodies().pop().unwrap();
    assert!(last.contains("Attempt 2 of 2") && last.contains("REASON-MARKER"));
    assert_eq!(env.mock.violations(), Vec::<String>::new());
    agent.close().await.unwrap();
}

/// The newest screenshot of a request body (an OpenAI-compatible one),
/// decoded.
fn newest_image(body: &Value) -> image::RgbImage {
    use base64::Engine as _;
    let text = body.to_string();
    let start = text
        .rfind("data:image/jpeg;base64,")
        .expect("a screenshot in the request")
        + "data:image/jpeg;base64,".len();
    let end = start + text[start..].find('"').unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&text[start..end])
        .unwrap();
    image::load_from_memory(&bytes).unwrap().to_rgb8()
}

/// A run without a start URL asks the model while Chromium starts: the
/// browser here is held back by a wrapper until the mock provider has the
/// first request, so the run can only finish if that request went out
/// before the launch ended (otherwise the launch times out). The first
/// request shows the blank page as a capture would; the model's first
/// action then waits for the browser and runs on the real page.
#[tokio::test]
async fn a_run_without_a_start_url_asks_the_model_while_chromium_starts() {
    let dir = tempfile::tempdir().unwrap();
    let chromium = GatedChromium::new(dir.path()).unwrap();
    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    mock.push(
        WIRE.route(),
        WIRE.turn(
            0,
            &[ScriptStep::Goto(site.url("counter.html"))],
            (1280, 720),
        ),
    );
    mock.push(
        WIRE.route(),
        WIRE.turn(1, &[ScriptStep::Done("opened".into())], (1280, 720)),
    );
    let options = AgentOptions {
        adapter: AdapterOptions {
            api_key: Some(ApiKey::new("test-key")),
            base_url: Some(WIRE.base_url(&mock)),
            ..AdapterOptions::default()
        },
        browser: BrowserSource::Local(LaunchOptions {
            executable: Some(chromium.executable.clone()),
            launch_timeout: std::time::Duration::from_secs(10),
            ..LaunchOptions::default()
        }),
        session: SessionOptions {
            max_steps: 3,
            ..SessionOptions::default()
        },
        ..AgentOptions::new(WIRE.model())
    };
    let mut agent = Agent::new(options);
    let result = {
        let run = agent.run("open the counter page", None);
        tokio::pin!(run);
        loop {
            tokio::select! {
                r = &mut run => break r,
                _ = tokio::time::sleep(std::time::Duration::from_millis(5)) => {
                    if !mock.requests().is_empty() && !chromium.is_open() {
                        chromium.open().unwrap();
                    }
                }
            }
        }
    };
    let result = result.unwrap();
    assert_eq!(result.status, RunStatus::Success, "{result:?}");
    assert_eq!(result.result.as_deref(), Some("opened"));

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let blank = newest_image(&requests[0].body);
    assert!(
        blank.pixels().all(|p| p.0.iter().all(|&c| c >= 250)),
        "the blank page is white"
    );
    assert!(requests[0].body.to_string().contains("about:blank"));
    let counter = newest_image(&requests[1].body);
    // The same size as the real page's: the viewport the model's patches
    // asked for was set before launch.
    assert_eq!(blank.dimensions(), counter.dimensions());
    assert!(
        counter.pixels().any(|p| p.0.iter().any(|&c| c < 128)),
        "the second request shows the counter page"
    );
    assert!(requests[1].body.to_string().contains("counter.html"));
    agent.close().await.unwrap();
}

//! A rerun that costs nothing: a successful run is compiled into a script
//! in the action cache, and the same task runs again from it with no model
//! call while its guards hold. Real Chromium on `fixtures/sites/rerun`
//! served from a temporary web root (so a variant page can replace the
//! original at the same address), the Anthropic adapter over real HTTP to
//! the mock provider, which answers only the turns queued for it: a model
//! call the test did not expect fails the run.

use std::path::Path;
use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::memory::{ActionCache, ScriptKey};
use lumen::{BrowserTab, Point, RunResult, RunStatus, Session, SessionOptions};
use lumen_test_support::mock_provider::MockProvider;
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_test_support::{FixtureServer, element_center, fixtures_root};

const TASK: &str = "Order three packs of tea and say what the basket holds";
/// Where the page under test is served: each test copies its fixture (and
/// later a variant of it) there.
const PAGE: &str = "page.html";
const WIRE: Wire = Wire::Anthropic;

struct Rerun {
    task: &'static str,
    /// The secrets its sessions are given (none unless a test sets them).
    secrets: lumen::safety::Secrets,
    root: tempfile::TempDir,
    site: FixtureServer,
    mock: MockProvider,
    tab: Arc<CdpTab>,
    cache: Arc<ActionCache>,
    _cache_dir: tempfile::TempDir,
}

impl Rerun {
    /// The order page and its task.
    async fn new() -> Rerun {
        Self::on("order.html", TASK).await
    }

    /// Fixture `page` of the rerun fixtures, and `task` to run on it.
    async fn on(page: &str, task: &'static str) -> Rerun {
        let root = tempfile::tempdir().unwrap();
        let site = FixtureServer::start_at(root.path()).await.unwrap();
        let cache_dir = tempfile::tempdir().unwrap();
        let rerun = Rerun {
            task,
            secrets: lumen::safety::Secrets::new(),
            site,
            mock: lumen_test_support::mock_provider().await.unwrap(),
            tab: Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap()),
            cache: Arc::new(ActionCache::open(cache_dir.path()).unwrap()),
            _cache_dir: cache_dir,
            root,
        };
        rerun.serve(page);
        rerun
    }

    /// Serves `variant` of the rerun fixtures at [`PAGE`].
    fn serve(&self, variant: &str) {
        let from = fixtures_root().join("rerun").join(variant);
        std::fs::copy(from, self.root.path().join(PAGE)).unwrap();
    }

    async fn open(&self) {
        assert!(self.tab.goto(&self.site.url(PAGE)).await.unwrap().ok);
    }

    async fn center(&self, selector: &str) -> Point {
        element_center(self.tab.as_ref(), selector)
            .await
            .unwrap()
            .expect(selector)
    }

    /// Queues `turns` as the model's next answers.
    async fn script(&self, turns: &[Vec<ScriptStep>]) {
        let vp = self.tab.viewport().await.unwrap();
        let sent = self.mock.requests().len();
        for (i, t) in turns.iter().enumerate() {
            self.mock
                .push(WIRE.route(), WIRE.turn(sent + i, t, (vp.width, vp.height)));
        }
    }

    /// A session on the tab with the cache and the test's secrets.
    fn session(&self) -> Session {
        let options = SessionOptions {
            max_steps: 8,
            cache: Some(self.cache.clone()),
            secrets: self.secrets.clone(),
            ..SessionOptions::default()
        };
        Session::new(self.tab.clone(), super::adapter(WIRE, &self.mock), options).unwrap()
    }

    /// Queues the order page's turns (type the quantity, add to the
    /// basket, answer), then `more`.
    async fn order_turns(&self, more: &[Vec<ScriptStep>]) {
        let (qty, add) = (self.center("#qty").await, self.center("#add").await);
        let mut turns = vec![
            vec![ScriptStep::TypeAt(qty.x, qty.y, "3".into())],
            vec![ScriptStep::Click(add.x, add.y)],
            vec![ScriptStep::Done("Basket: 3 × green tea".into())],
        ];
        turns.extend_from_slice(more);
        self.script(&turns).await;
    }

    /// Runs the task from a freshly loaded page; returns the result and
    /// how many model requests it made.
    async fn run(&self) -> (RunResult, usize) {
        self.open().await;
        let before = self.mock.requests().len();
        let result = self.session().run(self.task).await;
        assert!(
            self.mock.violations().is_empty(),
            "{:?}",
            self.mock.violations()
        );
        assert_eq!(self.mock.pending(WIRE.route()), 0, "every queued turn used");
        (result, self.mock.requests().len() - before)
    }

    /// The first run: the model types the quantity, adds to the basket and
    /// reads the answer.
    async fn first_run(&self) -> RunResult {
        self.open().await;
        self.order_turns(&[]).await;
        let (r, calls) = self.run().await;
        assert_success(&r, "Basket: 3 × green tea");
        assert_eq!(calls, 3);
        r
    }

    async fn basket(&self) -> i64 {
        self.tab
            .evaluate("window.lumen.basket")
            .await
            .unwrap()
            .as_i64()
            .unwrap()
    }

    fn script_file(&self) -> lumen::memory::RunScript {
        self.cache
            .load(&ScriptKey::new(&self.site.url(PAGE), self.task))
            .expect("a script was saved")
    }
}

fn assert_success(r: &RunResult, answer: &str) {
    assert_eq!(
        (r.status, r.result.as_deref()),
        (RunStatus::Success, Some(answer)),
        "{:?}",
        r.error
    );
}

/// The ids of each step's calls: `replay_…` for replayed ones.
fn call_ids(r: &RunResult) -> Vec<Vec<String>> {
    r.history
        .iter()
        .map(|s| s.actions.iter().map(|a| a.call.id.clone()).collect())
        .collect()
}

fn replayed(r: &RunResult) -> Vec<bool> {
    call_ids(r)
        .iter()
        .map(|ids| ids.iter().all(|id| id.starts_with("replay_")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_task_reruns_from_its_script_with_no_model_call() {
    let t = Rerun::new().await;
    t.first_run().await;
    let script = t.script_file();
    assert_eq!(script.steps.len(), 3, "{script:#?}");
    // Each pointer action keeps the element it hit.
    let add = script.steps[1].actions[0].target.as_ref().unwrap();
    assert_eq!(
        (add.tag.as_str(), add.name.as_deref()),
        ("button", Some("Add to basket"))
    );
    assert!(
        script.steps[2].page_text.is_some(),
        "the answer's page text"
    );

    let (r, calls) = t.run().await;
    assert_success(&r, "Basket: 3 × green tea");
    assert_eq!(calls, 0, "the rerun asked the model");
    assert_eq!(replayed(&r), vec![true, true, true], "{:?}", call_ids(&r));
    assert_eq!(r.usage.total_input(), 0);
    assert!(r.history.iter().all(|s| s.model_ms == 0), "no model time");
    assert_eq!(t.basket().await, 3, "the replay really ordered");
    assert!(
        r.history[1].actions[0]
            .execution
            .hints
            .iter()
            .any(|h| h.contains("replayed from the saved run script"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_button_falls_back_to_the_model_at_that_step_and_the_new_path_is_kept() {
    let t = Rerun::new().await;
    t.first_run().await;

    // The buttons swap places: the page looks the same, but a click at the
    // old place would now clear the basket.
    t.serve("order-moved.html");
    t.open().await;
    let add = t.center("#add").await;
    t.script(&[
        vec![ScriptStep::Click(add.x, add.y)],
        vec![ScriptStep::Done("Basket: 3 × green tea".into())],
    ])
    .await;
    let (r, calls) = t.run().await;
    assert_success(&r, "Basket: 3 × green tea");
    assert_eq!(calls, 2, "the model from the moved button's step on");
    assert_eq!(replayed(&r), vec![true, false, false], "{:?}", call_ids(&r));
    assert_eq!(t.basket().await, 3);
    let clears = t.tab.evaluate("window.lumen.clears").await.unwrap();
    assert_eq!(clears, 0, "the old place was never clicked");

    // The new path was recorded: the moved page now reruns for free.
    let (r, calls) = t.run().await;
    assert_success(&r, "Basket: 3 × green tea");
    assert_eq!(calls, 0);
    assert_eq!(replayed(&r), vec![true, true, true]);
}

/// Two look-alike rows, each with its own "Remove": when they change
/// places the page looks the same, but the button at the recorded place is
/// the other row's. The replay stops there and the model removes the
/// right one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_button_on_another_row_is_not_clicked_on_replay() {
    const REMOVE: &str = "Remove the green tea from the basket and say what is left";
    const GREEN: &str = "li[data-name='green tea'] button";
    let t = Rerun::on("basket.html", REMOVE).await;
    t.open().await;
    let green = t.center(GREEN).await;
    t.script(&[
        vec![ScriptStep::Click(green.x, green.y)],
        vec![ScriptStep::Done("Left: black tea".into())],
    ])
    .await;
    let (r, calls) = t.run().await;
    assert_success(&r, "Left: black tea");
    assert_eq!(calls, 2);
    let script = t.script_file();
    let target = script.steps[0].actions[0].target.as_ref().unwrap();
    assert!(target.context.is_some(), "the row is kept: {target:?}");

    t.serve("basket-swapped.html");
    t.open().await;
    let green = t.center(GREEN).await;
    t.script(&[
        vec![ScriptStep::Click(green.x, green.y)],
        vec![ScriptStep::Done("Left: black tea".into())],
    ])
    .await;
    let (r, calls) = t.run().await;
    assert_success(&r, "Left: black tea");
    assert_eq!(calls, 2, "the model from the swapped rows' step on");
    assert_eq!(replayed(&r), vec![false, false], "{:?}", call_ids(&r));
    let removed = t.tab.evaluate("window.lumen.removed").await.unwrap();
    assert_eq!(removed, serde_json::json!(["green tea"]), "the right row");
}

/// Typing is replayed only into the element it went into: on a page whose
/// quantity field hands the focus to another (the screenshot and the
/// clicked element the same), the text is not typed blind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_is_not_replayed_into_another_field() {
    let t = Rerun::new().await;
    t.first_run().await;
    t.serve("order-focus.html");
    t.script(&[vec![ScriptStep::Done("Basket: empty".into())]])
        .await;
    let (r, calls) = t.run().await;
    assert_success(&r, "Basket: empty");
    assert_eq!(calls, 1, "{:?}", call_ids(&r));
    let note = t
        .tab
        .evaluate("document.getElementById('note').value")
        .await
        .unwrap();
    assert_eq!(note, "", "the quantity was typed into the other field");
    assert_eq!(t.basket().await, 0);
}

/// The element a click hit is saved with the run's secrets masked (the
/// receipt is); on replay the element now at the point is masked the same
/// way before the two are compared, so a row that shows a secret still
/// matches itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_showing_a_secret_still_matches_on_replay() {
    const REMOVE: &str = "Remove the first item from the basket and say what is left";
    let mut t = Rerun::on("basket.html", REMOVE).await;
    t.secrets = lumen::safety::Secrets::new()
        .with("item", "Green tea")
        .unwrap();
    t.open().await;
    let green = t.center("li[data-name='green tea'] button").await;
    t.script(&[
        vec![ScriptStep::Click(green.x, green.y)],
        vec![ScriptStep::Done("Left: black tea".into())],
    ])
    .await;
    let (r, calls) = t.run().await;
    assert_success(&r, "Left: black tea");
    assert_eq!(calls, 2);
    let (r, calls) = t.run().await;
    assert_success(&r, "Left: black tea");
    assert_eq!(calls, 0, "{:?}", call_ids(&r));
    let removed = t.tab.evaluate("window.lumen.removed").await.unwrap();
    assert_eq!(removed, serde_json::json!(["green tea"]));
}

/// Guidance a person gave mid-run is something a replay would not have:
/// such a run saves no script, as a handed-over one does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_steered_by_guidance_saves_no_script() {
    let t = Rerun::new().await;
    t.open().await;
    t.order_turns(&[]).await;
    let mut session = t.session();
    session
        .control()
        .inject_guidance("Three packs, not two: the user changed their mind");
    assert_success(&session.run(TASK).await, "Basket: 3 × green tea");
    assert!(
        t.cache
            .load(&ScriptKey::new(&t.site.url(PAGE), TASK))
            .is_none(),
        "a guided run was saved"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_not_replayed_on_a_page_that_reads_differently() {
    let t = Rerun::new().await;
    t.first_run().await;

    // Same layout, other words: the actions replay, the answer does not.
    t.serve("order-price.html");
    t.script(&[vec![ScriptStep::Done("Basket: 3 × black tea".into())]])
        .await;
    let (r, calls) = t.run().await;
    assert_success(&r, "Basket: 3 × black tea");
    assert_eq!(calls, 1);
    assert_eq!(replayed(&r), vec![true, true, false], "{:?}", call_ids(&r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_script_is_a_miss_and_the_model_runs_the_task() {
    let t = Rerun::new().await;
    let key = ScriptKey::new(&t.site.url(PAGE), TASK);
    t.first_run().await;
    let path = std::fs::read_dir(t.cache.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .unwrap();
    std::fs::write(&path, b"{\"version\": 2, \"steps\": [oops").unwrap();
    assert!(t.cache.load(&key).is_none());
    let (first, _) = (t.first_run().await, ());
    assert_eq!(replayed(&first), vec![false, false, false]);
    assert!(
        t.cache.load(&key).is_some(),
        "the good run replaced the corrupt file"
    );
    assert!(Path::new(&path).exists());
}

/// A second task run on in the same session continues the first's
/// history: no script is saved under the second instruction (it would
/// hold the first task's steps and answer, and replay them for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_continued_in_the_same_session_saves_no_script_of_its_own() {
    let t = Rerun::new().await;
    t.open().await;
    t.order_turns(&[vec![ScriptStep::Done("3 packs".into())]])
        .await;
    let mut session = t.session();
    assert_success(&session.run(TASK).await, "Basket: 3 × green tea");
    let follow_up = "How many packs are in the basket?";
    assert_success(&session.run(follow_up).await, "3 packs");
    let url = t.site.url(PAGE);
    assert!(
        t.cache.load(&ScriptKey::new(&url, follow_up)).is_none(),
        "the follow-up saved the first task's steps as its own"
    );
    assert!(t.cache.load(&ScriptKey::new(&url, TASK)).is_some());
}

/// A secret value in the instruction is kept out of the saved script, key
/// included, whatever its case, and the next run of the same task still
/// finds the script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_the_instruction_is_not_saved_and_the_script_still_hits() {
    const SECRET: &str = "Acct-7Qx9Z";
    const TASK_FOR_ACCOUNT: &str =
        "Order three packs of tea and say what the basket holds for account Acct-7Qx9Z";
    let mut t = Rerun::on("order.html", TASK_FOR_ACCOUNT).await;
    t.secrets = lumen::safety::Secrets::new()
        .with("account", SECRET)
        .unwrap();
    t.first_run().await;
    for entry in std::fs::read_dir(t.cache.dir()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(
            !text.to_lowercase().contains(&SECRET.to_lowercase()),
            "{text}"
        );
    }
    let (r, calls) = t.run().await;
    assert_success(&r, "Basket: 3 × green tea");
    assert_eq!(calls, 0, "the script was not found again");
}

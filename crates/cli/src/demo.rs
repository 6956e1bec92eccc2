//! `lumen demo`: a real run, offline. A small bakery site (embedded in the
//! binary, served from 127.0.0.1) and a mock Anthropic endpoint that answers
//! with a scripted trajectory in the real Messages wire format, so
//! everything between the provider's bytes and the page's DOM is the real
//! engine: the adapter, the loop, the safety layer and Chromium.
//!
//! The script's coordinates are read from the pages in the same browser
//! before the run, so they hold whatever fonts the machine has.
//!
//! The demo proves itself: a verifier ([`OrderReceived`]) reads the order
//! back from the bakery's page before the run may end, so the model cannot
//! claim success without the bakery having the order, and the demo prints
//! what the bakery received. A run that reports success without an order
//! read back is a failure.

use std::sync::{Arc, Mutex};

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::models::{AdapterOptions, ApiKey};
use lumen::{
    AgentOptions, BrowserSource, BrowserTab, Point, RunMode, SessionOptions, Verifier, VerifyInput,
    VerifyResult,
};
use lumen_mock::FixtureServer;
use lumen_mock::mock_provider::script::{AnthropicBlock, anthropic_turn};
use lumen_mock::mock_provider::{MockProvider, Route};
use serde_json::json;

use crate::args::DemoArgs;
use crate::exit::{self, CliError};
use crate::runner::{self, Finished, Job};

/// The pages, embedded so an installed binary has them.
const PAGES: &[(&str, &str)] = &[
    ("index.html", include_str!("../assets/demo/index.html")),
    ("contact.html", include_str!("../assets/demo/contact.html")),
];

/// The demo's task.
pub(crate) const INSTRUCTION: &str = "Open the bakery's contact page and send a cake order \
     as Ada Lovelace (ada@example.com): one chocolate cake for Saturday.";

/// The model the mock impersonates; the key is a placeholder that never
/// leaves this machine.
const MODEL: &str = "anthropic/claude-sonnet-4-6";
const OFFLINE_KEY: &str = "lumen-demo-offline-key";

/// One scripted model turn.
enum Turn {
    Click(&'static str, Point),
    TypeAt(&'static str, Point, &'static str),
    Done(&'static str),
}

/// The order the task asks for, as the bakery's page must show it.
const ORDER_NAME: &str = "Ada Lovelace";
const ORDER_EMAIL: &str = "ada@example.com";
const ORDER_ITEM: &str = "chocolate cake";

/// What the bakery's contact form received, read back from its page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Order {
    name: String,
    email: String,
    message: String,
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} <{}>: \"{}\"", self.name, self.email, self.message)
    }
}

/// The demo's verifier: a claimed success passes only when the bakery's
/// page shows it received the order the task asked for (read from the
/// page's `window.lumen.submitted`, set by the form's submit handler); the
/// order is kept for the demo to report.
pub(crate) struct OrderReceived {
    tab: Arc<CdpTab>,
    received: Mutex<Option<Order>>,
}

impl OrderReceived {
    pub(crate) fn new(tab: Arc<CdpTab>) -> Self {
        Self {
            tab,
            received: Mutex::new(None),
        }
    }

    /// The order read back when a success was verified.
    pub(crate) fn received(&self) -> Option<Order> {
        self.received.lock().ok().and_then(|o| o.clone())
    }

    /// The order the page received, or why there is none.
    async fn read_back(&self) -> Result<Order, String> {
        let submitted = self
            .tab
            .evaluate("(window.lumen && window.lumen.submitted) || null")
            .await
            .map_err(|e| format!("the bakery's page could not be read: {e}"))?;
        let field = |k: &str| submitted[k].as_str().unwrap_or_default().to_owned();
        if submitted.is_null() {
            return Err(
                "the bakery has not received an order: the contact form was not sent".into(),
            );
        }
        let order = Order {
            name: field("name"),
            email: field("email"),
            message: field("message"),
        };
        if order.name != ORDER_NAME || order.email != ORDER_EMAIL {
            return Err(format!(
                "the bakery received an order from {} <{}>, not from {ORDER_NAME} <{ORDER_EMAIL}>",
                order.name, order.email
            ));
        }
        if !order.message.to_lowercase().contains(ORDER_ITEM) {
            return Err(format!(
                "the order sent does not ask for a {ORDER_ITEM}: \"{}\"",
                order.message
            ));
        }
        Ok(order)
    }
}

#[async_trait::async_trait]
impl Verifier for OrderReceived {
    async fn verify(&self, input: &VerifyInput<'_>) -> lumen::Result<VerifyResult> {
        if input.status != lumen::TerminateStatus::Success {
            return Ok(VerifyResult::pass());
        }
        Ok(match self.read_back().await {
            Ok(order) => {
                let note = format!("the bakery received the order from {order}");
                if let Ok(mut slot) = self.received.lock() {
                    *slot = Some(order);
                }
                VerifyResult {
                    reason: Some(note),
                    ..VerifyResult::pass()
                }
            }
            Err(why) => VerifyResult::reject(why),
        })
    }
}

/// Writes the embedded pages to a temporary folder and serves them.
async fn serve_site() -> Result<(tempfile::TempDir, FixtureServer), CliError> {
    let site_dir = tempfile::tempdir()
        .map_err(|e| CliError::failure(format!("cannot create a temporary folder: {e}")))?;
    for (name, body) in PAGES {
        std::fs::write(site_dir.path().join(name), body)
            .map_err(|e| CliError::failure(format!("cannot write the demo site: {e}")))?;
    }
    let site = FixtureServer::start_at(site_dir.path())
        .await
        .map_err(|e| CliError::failure(format!("cannot start the demo site: {e}")))?;
    Ok((site_dir, site))
}

/// Runs the demo; returns how it ended.
pub(crate) async fn run(args: DemoArgs) -> Result<Finished, CliError> {
    let (_site_dir, site) = serve_site().await?;
    let mock = MockProvider::start()
        .await
        .map_err(|e| CliError::failure(format!("cannot start the mock model: {e}")))?;
    let launch = LaunchOptions {
        headless: !args.headed,
        ..LaunchOptions::default()
    };
    let tab = CdpTab::launch(launch)
        .await
        .map_err(|e| CliError::from_setup(&e, None))?;
    let tab = Arc::new(tab);
    let script = match measure(&tab, &site).await {
        Ok(script) => script,
        Err(e) => {
            let _ = tab.close().await;
            return Err(e);
        }
    };
    for (i, turn) in script.iter().enumerate() {
        mock.push(Route::AnthropicMessages, reply(i, turn));
    }
    let proof = Arc::new(OrderReceived::new(tab.clone()));
    let options = AgentOptions {
        adapter: AdapterOptions {
            api_key: Some(ApiKey::new(OFFLINE_KEY)),
            base_url: Some(mock.base_url()),
            ..AdapterOptions::default()
        },
        browser: BrowserSource::Custom(tab),
        session: SessionOptions {
            max_steps: 10,
            verifier: Some(proof.clone()),
            ..SessionOptions::default()
        },
        ..AgentOptions::new(MODEL)
    };
    let finished = runner::execute(Job {
        options,
        instruction: INSTRUCTION.to_owned(),
        start_url: Some(site.url("index.html")),
        mode: RunMode::Agent,
        trace_dir: args.output.trace_dir.clone(),
        output: args.output,
        cdp_url: None,
        saved: None,
        resume: None,
    })
    .await?;
    drop(site);
    match proof.received() {
        Some(order) => {
            eprintln!(
                "\nThe bakery received the order (read back from its page): {}",
                crate::terminal::visible(&order.to_string())
            )
        }
        None if finished.code == exit::SUCCESS => {
            return Err(CliError::failure(
                "the run reported success, but the bakery's page shows no order".to_owned(),
            ));
        }
        None => {}
    }
    Ok(finished)
}

/// The closing note: what just happened and where to look.
pub(crate) fn epilogue(report: &std::path::Path) {
    let shown = std::fs::canonicalize(report).unwrap_or_else(|_| report.to_path_buf());
    eprintln!(
        "\nThat was a real run in real Chromium, driven by a scripted mock model on a local \
         site.\nOpen the report in a browser: file://{}\nNext: `lumen run \"<task>\" --url <page> \
         --model anthropic/claude-sonnet-4-6` with ANTHROPIC_API_KEY set.",
        shown.display()
    );
}

/// Reads the targets' positions from the pages and writes the trajectory.
async fn measure(tab: &CdpTab, site: &FixtureServer) -> Result<Vec<Turn>, CliError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        CliError::failure(format!(
            "the demo could not prepare its script ({what}): {e}"
        ))
    };
    let open = |page: &str| site.url(page);
    let goto = |url: String| async move {
        let outcome = tab.goto(&url).await.map_err(|e| fail("open a page", &e))?;
        if outcome.ok {
            Ok(())
        } else {
            Err(fail("open a page", &outcome.error.unwrap_or_default()))
        }
    };
    let center = |selector: &'static str| async move {
        match lumen_mock::element_center(tab, selector).await {
            Ok(Some(p)) => Ok(p),
            Ok(None) => Err(fail("find an element", &selector)),
            Err(e) => Err(fail("find an element", &e)),
        }
    };
    goto(open("index.html")).await?;
    let contact = center("#contact").await?;
    goto(open("contact.html")).await?;
    let (name, email, message, send) = (
        center("#name").await?,
        center("#email").await?,
        center("#message").await?,
        center("#send").await?,
    );
    goto("about:blank".to_owned()).await?;
    Ok(vec![
        Turn::Click(
            "The order form should be behind the \"Contact us\" link in the header.",
            contact,
        ),
        Turn::TypeAt("This is the order form. Name first.", name, "Ada Lovelace"),
        Turn::TypeAt("Now the email address.", email, "ada@example.com"),
        Turn::TypeAt(
            "And the order itself.",
            message,
            "One chocolate cake for Saturday, please.",
        ),
        Turn::Click("Everything is filled in; sending.", send),
        Turn::Done(
            "Sent. The bakery confirmed: \"Thanks, Ada Lovelace! We will reply to ada@example.com.\"",
        ),
    ])
}

/// One turn as an Anthropic Messages stream.
fn reply(i: usize, turn: &Turn) -> lumen_mock::mock_provider::Reply {
    let tool = |n: usize, input: serde_json::Value| AnthropicBlock::ToolUse {
        id: format!("toolu_demo_{i}_{n}"),
        name: "computer".into(),
        input,
    };
    let click = |p: &Point| json!({"action": "left_click", "coordinate": [p.x, p.y]});
    let blocks = match turn {
        Turn::Click(say, p) => vec![AnthropicBlock::Text((*say).into()), tool(0, click(p))],
        Turn::TypeAt(say, p, text) => vec![
            AnthropicBlock::Text((*say).into()),
            tool(0, click(p)),
            tool(1, json!({"action": "type", "text": text})),
        ],
        Turn::Done(result) => vec![AnthropicBlock::ToolUse {
            id: format!("toolu_demo_{i}_0"),
            name: "task_complete".into(),
            input: json!({"result": result}),
        }],
    };
    anthropic_turn(&blocks, 1200 + 350 * i as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumen::{ScreenshotOptions, TerminateStatus};

    /// Asks the verifier about a claimed success on the page the tab shows.
    async fn claim(proof: &OrderReceived, tab: &CdpTab) -> VerifyResult {
        let screenshot = tab.screenshot(&ScreenshotOptions::default()).await.unwrap();
        let url = tab.url().await.unwrap();
        proof
            .verify(&VerifyInput {
                instruction: INSTRUCTION,
                screenshot: &screenshot,
                url: &url,
                status: TerminateStatus::Success,
                result: "sent",
                state: None,
                attempt: 0,
            })
            .await
            .unwrap()
    }

    /// Fills the real contact form and sends it through its own handler.
    async fn send(tab: &CdpTab, name: &str, message: &str) {
        let js = format!(
            "document.getElementById('name').value = {name:?}; \
             document.getElementById('email').value = 'ada@example.com'; \
             document.getElementById('message').value = {message:?}; \
             document.getElementById('send').click(); true"
        );
        tab.evaluate(&js).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_success_passes_only_once_the_bakery_shows_the_order() {
        let (_dir, site) = serve_site().await.unwrap();
        let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
        let proof = OrderReceived::new(tab.clone());
        assert!(tab.goto(&site.url("contact.html")).await.unwrap().ok);

        // Filled in but not sent: rejected, and the model is told why.
        let v = claim(&proof, &tab).await;
        assert!(!v.passed);
        assert!(v.reason.unwrap().contains("not sent"));
        assert_eq!(proof.received(), None);

        // Sent in someone else's name: rejected.
        send(&tab, "Grace Hopper", "One chocolate cake for Saturday").await;
        let v = claim(&proof, &tab).await;
        assert!(!v.passed && v.reason.unwrap().contains("Grace Hopper"));

        // The order the task asks for: passes, and is kept.
        assert!(tab.goto(&site.url("contact.html")).await.unwrap().ok);
        send(
            &tab,
            "Ada Lovelace",
            "One chocolate cake for Saturday, please.",
        )
        .await;
        let v = claim(&proof, &tab).await;
        assert!(v.passed, "{v:?}");
        assert_eq!(
            proof.received().map(|o| o.to_string()).as_deref(),
            Some("Ada Lovelace <ada@example.com>: \"One chocolate cake for Saturday, please.\"")
        );
        tab.close().await.unwrap();
    }
}

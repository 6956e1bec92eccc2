//! `lumen demo`: a real run, offline. A small bakery site (embedded in the
//! binary, served from 127.0.0.1) and a mock Anthropic endpoint that answers
//! with a scripted trajectory in the real Messages wire format, so
//! everything between the provider's bytes and the page's DOM is the real
//! engine: the adapter, the loop, the safety layer and Chromium.
//!
//! The script's coordinates are read from the pages in the same browser
//! before the run, so they hold whatever fonts the machine has.

use std::sync::Arc;

use lumen::browser::{CdpTab, LaunchOptions};
use lumen::models::{AdapterOptions, ApiKey};
use lumen::{AgentOptions, BrowserSource, BrowserTab, Point, RunMode, SessionOptions};
use lumen_mock::FixtureServer;
use lumen_mock::mock_provider::script::{AnthropicBlock, anthropic_turn};
use lumen_mock::mock_provider::{MockProvider, Route};
use serde_json::json;

use crate::args::DemoArgs;
use crate::exit::CliError;
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

/// Runs the demo; returns how it ended.
pub(crate) async fn run(args: DemoArgs) -> Result<Finished, CliError> {
    let site_dir = tempfile::tempdir()
        .map_err(|e| CliError::failure(format!("cannot create a temporary folder: {e}")))?;
    for (name, body) in PAGES {
        std::fs::write(site_dir.path().join(name), body)
            .map_err(|e| CliError::failure(format!("cannot write the demo site: {e}")))?;
    }
    let site = FixtureServer::start_at(site_dir.path())
        .await
        .map_err(|e| CliError::failure(format!("cannot start the demo site: {e}")))?;
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
    let options = AgentOptions {
        adapter: AdapterOptions {
            api_key: Some(ApiKey::new(OFFLINE_KEY)),
            base_url: Some(mock.base_url()),
            ..AdapterOptions::default()
        },
        browser: BrowserSource::Custom(tab),
        session: SessionOptions {
            max_steps: 10,
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
    })
    .await?;
    drop(site);
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

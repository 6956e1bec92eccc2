//! Bring your own model: a `ModelAdapter` written outside Lumen, driving a
//! real Chromium through a `Session`.
//!
//! The "model" here is a few lines of rules (click the button, then report
//! the counter), which is enough to show the contract: decode into
//! `ActionCall`s in viewport pixels, end every stream with `Completed`.
//! Run it with `cargo run -p lumen --example custom_adapter` (needs
//! Chromium; no network, no API key).

#![allow(clippy::print_stdout, reason = "an example prints its result")]

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream;
use lumen::browser::{CdpTab, LaunchOptions};
use lumen::{
    Action, ActionCall, AssistantTurn, BrowserTab, ModelAdapter, ModelEvent, ModelInfo,
    ModelResponse, ModelStream, Modifiers, MouseButton, Result, Session, SessionOptions,
    StepContext, TaskState, TerminateStatus, TokenUsage, WireRecord,
};

const PAGE: &str = "data:text/html,<title>demo</title><body style='margin:0'>\
<button id=b style='position:absolute;left:100px;top:100px;width:200px;height:60px' \
onclick=\"this.textContent='clicked '+(++window.n)\">click me</button><script>window.n=0</script>";

/// Clicks the button on the first step, then terminates with what it did.
struct RuleModel {
    info: ModelInfo,
}

impl RuleModel {
    fn answer(&self, ctx: &StepContext<'_>) -> ModelResponse {
        let action = if ctx.step == 0 {
            Action::Click {
                x: 200,
                y: 130,
                button: MouseButton::Left,
                modifiers: Modifiers::NONE,
            }
        } else {
            Action::Terminate {
                status: TerminateStatus::Success,
                result: "clicked the button once".into(),
            }
        };
        ModelResponse {
            turn: AssistantTurn {
                calls: vec![ActionCall::new(format!("rule_{}", ctx.step), action)],
                ..Default::default()
            },
            usage: TokenUsage::default(),
            stop_reason: None,
        }
    }
}

#[async_trait]
impl ModelAdapter for RuleModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    async fn stream(&self, ctx: &StepContext<'_>) -> Result<ModelStream> {
        let response = self.answer(ctx);
        let mut events: Vec<Result<ModelEvent>> = response
            .turn
            .calls
            .iter()
            .cloned()
            .map(|c| Ok(ModelEvent::Action(c)))
            .collect();
        events.push(Ok(ModelEvent::Completed(response)));
        Ok(Box::pin(stream::iter(events)))
    }
    async fn step(&self, ctx: &StepContext<'_>) -> Result<ModelResponse> {
        Ok(self.answer(ctx))
    }
    fn estimate_tokens(&self, _: &StepContext<'_>) -> u64 {
        0
    }
    async fn summarize(&self, _: &[WireRecord], _: Option<&TaskState>) -> Result<String> {
        Ok(String::new())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await?);
    tab.goto(PAGE).await?;
    let model = Arc::new(RuleModel {
        info: ModelInfo {
            model_id: "rules".into(),
            provider: "custom".into(),
            patch_size: None,
            max_image_dimension: None,
            max_image_pixels: None,
            supports_thinking: false,
            native_computer_use: false,
            context_window_tokens: 8_000,
            tab_inventory: false,
        },
    });
    // The demo page is a data: URL, which the default policy does not allow.
    let policy = lumen::safety::PolicyConfig {
        allowed_schemes: vec!["data".into()],
        ..Default::default()
    };
    let options = SessionOptions {
        max_steps: 5,
        policy,
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), model, options)?;
    let result = session.run("Click the button").await;
    let text = tab
        .evaluate("document.getElementById('b').textContent")
        .await?;
    println!(
        "{:?}: {:?}; the page now says {text}",
        result.status, result.result
    );
    tab.close().await
}

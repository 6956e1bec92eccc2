//! The planner: an optional pass before the loop, possibly on a cheaper
//! model, that writes a short plan the loop then shows every step.

use lumen_core::{
    Action, BrowserTab, ModelAdapter, Result, ScreenshotOptions, StepContext, TokenUsage,
    WireRecord, WireScreenshot,
};

/// The planner's instructions (our own words).
pub const PLANNER_PROMPT: &str = "\
You plan browser tasks; you do not act. Look at the screenshot of the starting page and write a short, \
numbered plan (at most 8 steps) for completing the task below: which pages to visit, what to search or \
fill in, and how to recognise that the task is done. Answer with the plan as plain text and call no tools.";

/// A plan and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The plan text.
    pub text: String,
    /// Tokens the planner used.
    pub usage: TokenUsage,
}

/// Asks `adapter` for a plan of `instruction` from the tab's current page.
///
/// The plan is the model's text; a model that insists on a tool call has
/// its terminate text or reasoning used instead. An empty answer is an empty
/// plan (the loop then runs without one), never an invented one.
pub async fn plan(
    adapter: &dyn ModelAdapter,
    tab: &dyn BrowserTab,
    instruction: &str,
    screenshot: &ScreenshotOptions,
) -> Result<Plan> {
    let sized = crate::perception_loop::capture_limits(screenshot, adapter.info());
    let shot = tab.screenshot(&sized).await?;
    let url = tab.url().await?;
    let wire = [WireRecord::Screenshot(WireScreenshot {
        step: 0,
        image: Some(shot.image.clone()),
        compressed: false,
        url: Some(url.clone()),
        tabs: Vec::new(),
    })];
    let prompt = format!("{PLANNER_PROMPT}\n\nTASK:\n{instruction}\n\nCurrent URL: {url}");
    let ctx = StepContext {
        step: 0,
        max_steps: 1,
        instruction,
        system_prompt: &prompt,
        screenshot: &shot,
        wire: &wire,
        state: None,
        url: &url,
        temperature: Some(0.0),
        cursor: None,
    };
    let response = adapter.step(&ctx).await?;
    let from_terminate = response.turn.calls.iter().find_map(|c| match &c.action {
        Action::Terminate { result, .. } => Some(result.clone()),
        _ => None,
    });
    let from_thinking = response
        .turn
        .thinking
        .iter()
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let text = response
        .turn
        .text
        .clone()
        .filter(|t| !t.trim().is_empty())
        .or(from_terminate)
        .unwrap_or(from_thinking);
    Ok(Plan {
        text: text.trim().to_string(),
        usage: response.usage,
    })
}

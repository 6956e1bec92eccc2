//! Tests of the completion verifiers.

use std::sync::Mutex;

use lumen_core::{
    ActionCall, AssistantTurn, Image, ImageFormat, ImageScale, ModelInfo, ModelStream, Size,
    TaskState, ThinkingBlock, TokenUsage,
};
use pretty_assertions::assert_eq;

use super::*;

fn screenshot() -> Screenshot {
    Screenshot {
        image: Image::new(ImageFormat::Png, 2, 2, vec![1, 2, 3]),
        viewport: Size::new(2, 2),
        scale: ImageScale::IDENTITY,
    }
}

fn input<'a>(shot: &'a Screenshot, attempt: u32) -> VerifyInput<'a> {
    VerifyInput {
        instruction: "Find the cheapest book",
        screenshot: shot,
        url: "https://books.test/cheapest",
        status: TerminateStatus::Success,
        result: "Sharp Objects, £3.49",
        state: None,
        attempt,
    }
}

#[tokio::test]
async fn url_gate_matches_with_a_regex() {
    let shot = screenshot();
    let gate = UrlMatchesGate::new(r"/cheapest$").unwrap();
    assert_eq!(
        gate.verify(&input(&shot, 0)).await.unwrap(),
        VerifyResult::pass()
    );
    let gate = UrlMatchesGate::new(r"/checkout").unwrap();
    let r = gate.verify(&input(&shot, 0)).await.unwrap();
    assert!(!r.passed);
    assert!(r.reason.unwrap().contains("https://books.test/cheapest"));
    let err = UrlMatchesGate::new("(unclosed").unwrap_err();
    assert_eq!(err.code(), lumen_core::ErrorCode::ConfigError);
}

#[tokio::test]
async fn custom_gate_runs_the_async_check_on_screenshot_and_url() {
    let shot = screenshot();
    let gate = CustomGate::new(
        "the basket is still empty",
        |shot: Screenshot, url: String| async move {
            shot.image.data.len() == 3 && url.contains("books.test")
        },
    );
    assert!(gate.verify(&input(&shot, 0)).await.unwrap().passed);
    let gate = CustomGate::new("the basket is still empty", |_, _| async { false });
    assert_eq!(
        gate.verify(&input(&shot, 0)).await.unwrap(),
        VerifyResult::reject("the basket is still empty")
    );
}

/// What a verifier request looked like.
#[derive(Debug, Clone)]
struct Seen {
    prompt: String,
    images: usize,
    url: String,
    temperature: Option<f32>,
}

/// An in-test adapter answering `step` with a fixed response shaped the way
/// one provider's adapter decodes its answers (the real adapters live in
/// `lumen-models`, which safety must not depend on).
struct Scripted {
    info: ModelInfo,
    answer: Result<ModelResponse>,
    seen: Mutex<Vec<Seen>>,
}

impl Scripted {
    fn new(provider: &str, answer: Result<ModelResponse>) -> Arc<Self> {
        Arc::new(Self {
            info: ModelInfo {
                model_id: format!("{provider}-verifier"),
                provider: provider.into(),
                patch_size: None,
                max_image_dimension: None,
                max_image_pixels: None,
                supports_thinking: true,
                native_computer_use: false,
                context_window_tokens: 100_000,
                tab_inventory: false,
            },
            answer,
            seen: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait::async_trait]
impl ModelAdapter for Scripted {
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    async fn stream(&self, _ctx: &StepContext<'_>) -> Result<ModelStream> {
        Err(LumenError::invalid_data(
            "test adapter",
            "the verifier must use step",
        ))
    }
    async fn step(&self, ctx: &StepContext<'_>) -> Result<ModelResponse> {
        let images = ctx
            .wire
            .iter()
            .filter(|r| matches!(r, WireRecord::Screenshot(s) if s.image.is_some()))
            .count();
        self.seen.lock().unwrap().push(Seen {
            prompt: ctx.system_prompt.to_owned(),
            images,
            url: ctx.url.to_owned(),
            temperature: ctx.temperature,
        });
        self.answer.clone()
    }
    fn estimate_tokens(&self, _ctx: &StepContext<'_>) -> u64 {
        0
    }
    async fn summarize(&self, _wire: &[WireRecord], _state: Option<&TaskState>) -> Result<String> {
        Ok(String::new())
    }
}

fn response(turn: AssistantTurn) -> Result<ModelResponse> {
    Ok(ModelResponse {
        turn,
        usage: TokenUsage::default(),
        stop_reason: None,
    })
}

fn terminate(status: TerminateStatus, text: &str) -> ActionCall {
    ActionCall::new(
        "text_end_turn",
        Action::Terminate {
            status,
            result: text.into(),
        },
    )
}

fn thinking(text: &str) -> ThinkingBlock {
    ThinkingBlock {
        text: text.into(),
        signature: Some("sig".into()),
        redacted: false,
    }
}

#[tokio::test]
async fn model_verifier_reads_the_verdict_from_every_adapter_shape() {
    use TerminateStatus::*;
    // (adapter style, its decoded answer, expected pass)
    let cases: Vec<(&str, AssistantTurn, bool)> = vec![
        (
            // Anthropic without thinking: a text-only answer decodes to a
            // terminate carrying the text (the original engine missed this).
            "anthropic",
            AssistantTurn {
                calls: vec![terminate(
                    Success,
                    "YES - the cheapest book and its price are listed.",
                )],
                text: Some("YES - the cheapest book and its price are listed.".into()),
                ..AssistantTurn::default()
            },
            true,
        ),
        (
            // Anthropic with thinking: the reasoning wavers, the text decides.
            "anthropic-thinking",
            AssistantTurn {
                calls: vec![terminate(
                    Success,
                    "NO. The page shows the search form, not a price.",
                )],
                thinking: vec![thinking(
                    "Is it yes? The agent claims a price, so maybe YES...",
                )],
                text: Some("NO. The page shows the search form, not a price.".into()),
                ..AssistantTurn::default()
            },
            false,
        ),
        (
            // OpenAI Responses: plain output text with no call.
            "openai",
            AssistantTurn {
                text: Some("**Answer:** Yes. The listing is sorted by price.".into()),
                ..AssistantTurn::default()
            },
            true,
        ),
        (
            // Google with structured output.
            "google",
            AssistantTurn {
                text: Some(r#"{"evaluation": "NO", "reasoning": "The cart is empty."}"#.into()),
                ..AssistantTurn::default()
            },
            false,
        ),
        (
            // An OpenAI-compatible server that only returns reasoning.
            "compatible",
            AssistantTurn {
                thinking: vec![thinking("The price is visible.\nVerdict: YES")],
                ..AssistantTurn::default()
            },
            true,
        ),
        (
            // A model that answers with its terminate tool and no YES/NO:
            // the claimed status decides.
            "compatible-tool",
            AssistantTurn {
                calls: vec![terminate(
                    Failure,
                    "The task is not done; the price is hidden.",
                )],
                ..AssistantTurn::default()
            },
            false,
        ),
    ];
    let shot = screenshot();
    for (style, turn, expected) in cases {
        let adapter = Scripted::new(style, response(turn));
        let verifier = ModelVerifier::new(adapter.clone());
        let r = verifier.verify(&input(&shot, 0)).await.unwrap();
        assert_eq!(r.passed, expected, "{style}: {r:?}");
        if !expected {
            assert!(
                r.reason.unwrap().starts_with("an independent check found"),
                "{style}"
            );
        }
        let seen = adapter.seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{style}");
        assert_eq!(seen[0].images, 1, "the screenshot is sent");
        assert_eq!(seen[0].url, "https://books.test/cheapest");
        assert_eq!(seen[0].temperature, Some(0.0));
        for needle in [
            "Find the cheapest book",
            "Sharp Objects, £3.49",
            "https://books.test/cheapest",
            "YES or NO",
        ] {
            assert!(seen[0].prompt.contains(needle), "{needle}");
        }
    }
}

#[tokio::test]
async fn model_verifier_hard_passes_after_max_attempts_without_asking() {
    let shot = screenshot();
    let adapter = Scripted::new(
        "anthropic",
        response(AssistantTurn {
            text: Some("NO".into()),
            ..AssistantTurn::default()
        }),
    );
    let verifier = ModelVerifier::new(adapter.clone()).with_max_attempts(2);
    assert!(!verifier.verify(&input(&shot, 0)).await.unwrap().passed);
    assert!(!verifier.verify(&input(&shot, 1)).await.unwrap().passed);
    let third = verifier.verify(&input(&shot, 2)).await.unwrap();
    assert!(third.passed);
    assert!(third.reason.unwrap().contains("2 rejected"));
    assert_eq!(
        adapter.seen.lock().unwrap().len(),
        2,
        "the third attempt asks nobody"
    );
}

#[tokio::test]
async fn model_verifier_rejects_an_unreadable_answer_and_passes_errors_on() {
    let shot = screenshot();
    let unclear = Scripted::new(
        "openai",
        response(AssistantTurn {
            text: Some("It is hard to say from this angle.".into()),
            ..AssistantTurn::default()
        }),
    );
    let r = ModelVerifier::new(unclear)
        .verify(&input(&shot, 0))
        .await
        .unwrap();
    assert!(!r.passed);
    assert!(r.reason.unwrap().contains("could not confirm"));

    let failing = Scripted::new(
        "openai",
        Err(LumenError::invalid_data("response", "broken")),
    );
    let err = ModelVerifier::new(failing)
        .verify(&input(&shot, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), lumen_core::ErrorCode::InvalidData);
}

#[test]
fn verdict_parsing_table() {
    // (text, expected verdict, expected explanation)
    let table: &[(&str, Option<bool>, &str)] = &[
        ("YES", Some(true), ""),
        ("no", Some(false), ""),
        (
            "Yes, the price is shown. Extra text.",
            Some(true),
            "the price is shown.",
        ),
        (
            "NO - the form was not submitted.",
            Some(false),
            "the form was not submitted.",
        ),
        (
            "**YES**\nThe order page is open.",
            Some(true),
            "The order page is open.",
        ),
        ("> Verdict: no. Wrong city.", Some(false), "Wrong city."),
        ("Final answer: YES", Some(true), ""),
        ("`yes`", Some(true), ""),
        ("True", Some(true), ""),
        (
            "I looked carefully.\nVerdict: NO - empty cart.",
            Some(false),
            "empty cart.",
        ),
        (
            "Looking at it... answer: yes, then answer: no, it is wrong.",
            Some(false),
            "it is wrong.",
        ),
        (
            "```json\n{\"complete\": true, \"reason\": \"Shown.\"}\n```",
            Some(true),
            "Shown.",
        ),
        ("{\"passed\": \"fail\"}", Some(false), ""),
        ("The task is complete. YES", Some(true), ""),
        // Lower-case "no" inside a sentence is not a verdict.
        ("There are no errors and the answer is visible.", None, ""),
        // Both words standing alone: ambiguous.
        ("YES or NO? Hard to say.", None, ""),
        ("Nothing conclusive", None, ""),
        ("Noted.", None, ""),
        ("", None, ""),
        ("{\"verdict\": 3}", None, ""),
    ];
    for (text, complete, why) in table {
        let v = parse_verdict(text);
        assert_eq!(v.as_ref().map(|v| v.complete), *complete, "{text:?}: {v:?}");
        if let Some(v) = v {
            assert_eq!(v.why, *why, "{text:?}");
        }
    }
}

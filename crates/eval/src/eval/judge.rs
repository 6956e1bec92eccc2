//! The LLM judge for live runs: shown the task, the agent's answer, the
//! reference answer when the dataset has one, and the last screenshots, it
//! answers with a JSON verdict `{"verdict": "pass" | "fail", "reason": …}`.
//!
//! The judge makes one plain, non-streaming call in the provider's own
//! format: Anthropic Messages, Gemini `generateContent`, or Chat Completions
//! (OpenAI and OpenAI-compatible servers). Keys and base URLs come from the
//! same environment variables the adapters read.

use std::time::Duration;

use anyhow::{Context as _, bail};
use lumen::Image;
use serde_json::{Value, json};

use super::catalogue::Reference;
use super::report::Verdict;

/// Which wire format the judge speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JudgeApi {
    Anthropic,
    Gemini,
    ChatCompletions,
}

/// What the judge is shown.
#[derive(Debug, Clone)]
pub(crate) struct JudgeInput<'a> {
    pub(crate) question: &'a str,
    pub(crate) answer: Option<&'a str>,
    pub(crate) references: &'a [Reference],
    /// The last screenshots, oldest first.
    pub(crate) screenshots: &'a [Image],
}

/// The instructions, in our words.
const SYSTEM: &str = "You grade a web agent's attempt at a task. You see the task, the answer \
the agent gave, sometimes a reference answer, and the last screenshots of its browser. The \
screenshots are the evidence: when the answer and the screenshots disagree, trust the \
screenshots. A task passes only if every requirement in it is met (filters, counts, dates, \
prices, ratings). A reference answer marked golden is the only correct answer; one marked \
possible is an example, and other answers may also be right, since websites change. Reply \
with a single JSON object and nothing else: {\"verdict\": \"pass\" or \"fail\", \"reason\": \
one or two sentences}.";

/// The user-turn text for one judgement.
pub(crate) fn prompt(input: &JudgeInput<'_>) -> String {
    let mut text = format!("Task: {}\n", input.question);
    match input.answer {
        Some(answer) if !answer.trim().is_empty() => {
            text.push_str(&format!("Agent's answer: {answer}\n"));
        }
        _ => text.push_str("Agent's answer: (none; the agent gave no answer)\n"),
    }
    for reference in input.references {
        text.push_str(&format!(
            "Reference answer ({}): {}\n",
            reference.kind, reference.answer
        ));
    }
    text.push_str(&format!(
        "{} screenshot(s) follow, oldest first.",
        input.screenshots.len()
    ));
    text
}

/// The request for one judgement: path (appended to the base URL) and body.
pub(crate) fn request(api: JudgeApi, model: &str, input: &JudgeInput<'_>) -> (String, Value) {
    let text = prompt(input);
    match api {
        JudgeApi::Anthropic => {
            let mut content = vec![json!({"type": "text", "text": text})];
            content.extend(input.screenshots.iter().map(|img| {
                json!({"type": "image", "source": {
                    "type": "base64", "media_type": img.format.mime(), "data": img.to_base64()
                }})
            }));
            (
                "/v1/messages".into(),
                json!({
                    "model": model,
                    "max_tokens": 512,
                    "system": SYSTEM,
                    "messages": [{"role": "user", "content": content}],
                }),
            )
        }
        JudgeApi::Gemini => {
            let mut parts = vec![json!({"text": text})];
            parts.extend(input.screenshots.iter().map(|img| {
                json!({"inlineData": {"mimeType": img.format.mime(), "data": img.to_base64()}})
            }));
            (
                format!("/v1beta/models/{model}:generateContent"),
                json!({
                    "systemInstruction": {"parts": [{"text": SYSTEM}]},
                    "contents": [{"role": "user", "parts": parts}],
                    "generationConfig": {"responseMimeType": "application/json", "maxOutputTokens": 512},
                }),
            )
        }
        JudgeApi::ChatCompletions => {
            let mut content = vec![json!({"type": "text", "text": text})];
            content.extend(
                input.screenshots.iter().map(
                    |img| json!({"type": "image_url", "image_url": {"url": img.to_data_url()}}),
                ),
            );
            (
                "/chat/completions".into(),
                json!({
                    "model": model,
                    "max_tokens": 512,
                    "messages": [
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": content},
                    ],
                }),
            )
        }
    }
}

/// The text of a provider's (non-streaming) answer.
pub(crate) fn reply_text(api: JudgeApi, body: &Value) -> anyhow::Result<String> {
    let texts: Vec<&str> = match api {
        JudgeApi::Anthropic => body["content"]
            .as_array()
            .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect())
            .unwrap_or_default(),
        JudgeApi::Gemini => body["candidates"][0]["content"]["parts"]
            .as_array()
            .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
            .unwrap_or_default(),
        JudgeApi::ChatCompletions => body["choices"][0]["message"]["content"]
            .as_str()
            .into_iter()
            .collect(),
    };
    if texts.is_empty() {
        bail!(
            "the judge's answer has no text: {}",
            truncate(&body.to_string(), 300)
        );
    }
    Ok(texts.concat())
}

/// Reads a verdict from the judge's text: the first JSON object in it (code
/// fences and chatter around it are fine); failing that, a bare `pass` or
/// `fail` word. Anything else is an error, never a silent pass.
pub(crate) fn parse_verdict(text: &str) -> anyhow::Result<Verdict> {
    if let (Some(start), Some(end)) = (text.find('{'), text.rfind('}'))
        && start < end
        && let Ok(value) = serde_json::from_str::<Value>(&text[start..=end])
    {
        let verdict = value["verdict"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let reason = value["reason"].as_str().unwrap_or("").trim().to_owned();
        let pass = match verdict.trim() {
            "pass" | "success" | "yes" => true,
            "fail" | "failure" | "not success" | "no" => false,
            other => bail!("the judge's verdict {other:?} is neither pass nor fail"),
        };
        return Ok(Verdict { pass, reason });
    }
    let lower = text.trim().to_ascii_lowercase();
    let word = lower
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| !w.is_empty());
    match word {
        Some("pass") => Ok(Verdict {
            pass: true,
            reason: text.trim().to_owned(),
        }),
        Some("fail") => Ok(Verdict {
            pass: false,
            reason: text.trim().to_owned(),
        }),
        _ => bail!(
            "could not read a verdict from the judge: {}",
            truncate(text, 300)
        ),
    }
}

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// A configured judge.
#[derive(Debug, Clone)]
pub(crate) struct Judge {
    api: JudgeApi,
    model: String,
    base_url: String,
    key: Option<String>,
    client: reqwest::Client,
    /// How many of the last screenshots it sees.
    pub(crate) screenshots: usize,
}

impl Judge {
    /// A judge for `model`: `google/…`, `anthropic/…`, `openai/…`, or any
    /// other model on an OpenAI-compatible server (`compatible/x` or
    /// `vendor/x`, at `OPENAI_BASE_URL`, as the adapters read it).
    /// `base_url` and `key` override the environment.
    pub(crate) fn new(
        model: &str,
        base_url: Option<String>,
        key: Option<String>,
        screenshots: usize,
    ) -> anyhow::Result<Judge> {
        let env = |names: &[&str]| names.iter().find_map(|n| std::env::var(n).ok());
        let (provider, name) = model.split_once('/').unwrap_or(("", model));
        let (api, name, default_base, key_vars, base_vars): (
            _,
            &str,
            Option<&str>,
            &[&str],
            &[&str],
        ) = match provider {
            "anthropic" => (
                JudgeApi::Anthropic,
                name,
                Some("https://api.anthropic.com"),
                &["ANTHROPIC_API_KEY"],
                &["ANTHROPIC_BASE_URL"],
            ),
            "google" => (
                JudgeApi::Gemini,
                name,
                Some("https://generativelanguage.googleapis.com"),
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                &["GOOGLE_GEMINI_BASE_URL"],
            ),
            "openai" => (
                JudgeApi::ChatCompletions,
                name,
                Some("https://api.openai.com/v1"),
                &["OPENAI_API_KEY"],
                &["OPENAI_BASE_URL"],
            ),
            "compatible" => (
                JudgeApi::ChatCompletions,
                name,
                None,
                &["OPENAI_API_KEY"],
                &["OPENAI_BASE_URL"],
            ),
            _ => (
                JudgeApi::ChatCompletions,
                model,
                None,
                &["OPENAI_API_KEY"],
                &["OPENAI_BASE_URL"],
            ),
        };
        let base_url = base_url
            .or_else(|| env(base_vars))
            .or_else(|| default_base.map(str::to_owned))
            .with_context(|| {
                format!("no base URL for the judge: set {}", base_vars.join(" or "))
            })?;
        let key = key.or_else(|| env(key_vars));
        // Hosted APIs need a key; a local compatible server may not.
        if key.is_none() && default_base.is_some() {
            bail!("no API key for the judge: set {}", key_vars.join(" or "));
        }
        // reqwest is built with rustls but without a crypto provider (see
        // lumen-models); install ring, as the adapters do. A provider
        // installed already is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .context("building the judge's HTTP client")?;
        Ok(Judge {
            api,
            model: name.to_owned(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            key,
            client,
            screenshots,
        })
    }

    /// The model, as configured.
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    /// Asks for a verdict; one retry on a transport error or 429/5xx.
    pub(crate) async fn judge(&self, input: &JudgeInput<'_>) -> anyhow::Result<Verdict> {
        let (path, body) = request(self.api, &self.model, input);
        let url = format!("{}{path}", self.base_url);
        let mut last_error = None;
        for attempt in 0..2 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let mut req = self.client.post(&url).json(&body);
            let key = self.key.as_deref().unwrap_or_default();
            req = match self.api {
                JudgeApi::Anthropic => req
                    .header("x-api-key", key)
                    .header("anthropic-version", "2023-06-01"),
                JudgeApi::Gemini => req.header("x-goog-api-key", key),
                JudgeApi::ChatCompletions if self.key.is_some() => req.bearer_auth(key),
                JudgeApi::ChatCompletions => req,
            };
            match req.send().await {
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    if status.is_success() {
                        let value: Value = serde_json::from_str(&text)
                            .context("the judge's answer is not JSON")?;
                        return parse_verdict(&reply_text(self.api, &value)?);
                    }
                    let error = anyhow::anyhow!("judge HTTP {status}: {}", truncate(&text, 300));
                    if status.as_u16() != 429 && !status.is_server_error() {
                        return Err(error);
                    }
                    last_error = Some(error);
                }
                Err(error) => last_error = Some(anyhow::Error::new(error).context("judge request")),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("judge failed")))
    }
}

#[cfg(test)]
mod tests {
    use lumen::ImageFormat;
    use lumen_mock::StatusCode;
    use lumen_mock::mock_provider::{MockProvider, Reply, Route};

    use super::*;

    fn shot() -> Image {
        Image::new(ImageFormat::Png, 2, 2, vec![0x89, b'P', b'N', b'G'])
    }

    fn input<'a>(refs: &'a [Reference], shots: &'a [Image]) -> JudgeInput<'a> {
        JudgeInput {
            question: "Find a vegan cookie recipe with 4.5 stars",
            answer: Some("Vegan Chewy Cookies, 4.7 stars"),
            references: refs,
            screenshots: shots,
        }
    }

    #[test]
    fn the_prompt_carries_task_answer_references_and_screenshot_count() {
        let refs = [Reference {
            kind: "possible".into(),
            answer: "Any vegan cookie".into(),
        }];
        let shots = [shot(), shot()];
        let text = prompt(&input(&refs, &shots));
        assert!(text.contains("Task: Find a vegan cookie"));
        assert!(text.contains("Agent's answer: Vegan Chewy Cookies"));
        assert!(text.contains("Reference answer (possible): Any vegan cookie"));
        assert!(text.contains("2 screenshot(s)"));
        let none = prompt(&JudgeInput {
            answer: None,
            ..input(&[], &[])
        });
        assert!(none.contains("(none; the agent gave no answer)"));
    }

    #[test]
    fn each_api_gets_its_own_request_shape_with_every_screenshot() {
        let shots = [shot(), shot()];
        let i = input(&[], &shots);
        let (path, body) = request(JudgeApi::Anthropic, "claude-x", &i);
        assert_eq!(path, "/v1/messages");
        assert_eq!(
            body["messages"][0]["content"][2]["source"]["media_type"],
            "image/png"
        );
        let (path, body) = request(JudgeApi::Gemini, "gemini-x", &i);
        assert_eq!(path, "/v1beta/models/gemini-x:generateContent");
        assert_eq!(body["contents"][0]["parts"].as_array().unwrap().len(), 3);
        let (path, body) = request(JudgeApi::ChatCompletions, "gpt-x", &i);
        assert_eq!(path, "/chat/completions");
        assert!(
            body["messages"][1]["content"][1]["image_url"]["url"]
                .as_str()
                .unwrap()
                .starts_with("data:image/png;base64,")
        );
    }

    #[test]
    fn verdicts_are_read_from_json_fences_or_a_bare_word_and_nonsense_is_an_error() {
        let v = parse_verdict("```json\n{\"verdict\": \"pass\", \"reason\": \"All met.\"}\n```")
            .unwrap();
        assert_eq!(
            v,
            Verdict {
                pass: true,
                reason: "All met.".into()
            }
        );
        assert!(
            !parse_verdict(r#"{"verdict":"FAIL","reason":"wrong date"}"#)
                .unwrap()
                .pass
        );
        assert!(!parse_verdict("Fail: the rating is 4.2").unwrap().pass);
        assert!(parse_verdict("Pass.").unwrap().pass);
        assert!(parse_verdict(r#"{"verdict":"maybe"}"#).is_err());
        assert!(parse_verdict("I cannot tell").is_err());
        assert!(parse_verdict("").is_err());
    }

    async fn judged(
        api_model: &str,
        route: Route,
        reply: Value,
        base_suffix: &str,
    ) -> (Verdict, Value, Vec<String>) {
        let mock = MockProvider::start().await.unwrap();
        mock.push(route, Reply::Json(StatusCode::OK, reply));
        let judge = Judge::new(
            api_model,
            Some(format!("{}{base_suffix}", mock.base_url())),
            Some("test-key".into()),
            3,
        )
        .unwrap();
        let shots = [shot()];
        let verdict = judge.judge(&input(&[], &shots)).await.unwrap();
        let req = mock.requests().remove(0);
        (verdict, req.body, req.key_headers)
    }

    #[tokio::test]
    async fn the_judge_talks_to_each_provider_over_http() {
        let verdict_json = r#"{"verdict": "fail", "reason": "Rating is 4.2."}"#;
        let (v, body, keys) = judged(
            "anthropic/claude-haiku-4-5",
            Route::AnthropicMessages,
            json!({"content": [{"type": "text", "text": verdict_json}]}),
            "",
        )
        .await;
        assert_eq!((v.pass, v.reason.as_str()), (false, "Rating is 4.2."));
        assert_eq!(body["model"], "claude-haiku-4-5");
        assert_eq!(keys, ["x-api-key"]);

        let (v, body, keys) = judged(
            "google/gemini-3.5-flash",
            Route::Gemini,
            json!({"candidates": [{"content": {"parts": [{"text": r#"{"verdict":"pass","reason":"ok"}"#}]}}]}),
            "",
        )
        .await;
        assert!(v.pass);
        assert_eq!(
            body["contents"][0]["parts"][1]["inlineData"]["mimeType"],
            "image/png"
        );
        assert_eq!(keys, ["x-goog-api-key"]);

        let (v, _, keys) = judged(
            "openai/gpt-4o",
            Route::ChatCompletions,
            json!({"choices": [{"message": {"role": "assistant", "content": verdict_json}}]}),
            "/v1",
        )
        .await;
        assert!(!v.pass);
        assert_eq!(keys, ["authorization"]);
    }

    #[tokio::test]
    async fn a_judge_error_is_an_error_not_a_verdict() {
        let mock = MockProvider::start().await.unwrap();
        mock.push(
            Route::AnthropicMessages,
            Reply::error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "bad",
                None,
            ),
        );
        let judge = Judge::new(
            "anthropic/claude-x",
            Some(mock.base_url()),
            Some("k".into()),
            1,
        )
        .unwrap();
        let err = judge.judge(&input(&[], &[])).await.unwrap_err();
        assert!(format!("{err:#}").contains("400"), "{err:#}");
        mock.push(
            Route::AnthropicMessages,
            Reply::Json(
                StatusCode::OK,
                json!({"content": [{"type": "text", "text": "no idea"}]}),
            ),
        );
        assert!(judge.judge(&input(&[], &[])).await.is_err());
    }
}

//! The one HTTP adapter every provider shares: `stream`, `step`,
//! `estimate_tokens` and `summarize` are written here once, over a small
//! per-provider [`Codec`] that knows the provider's endpoints, request
//! bodies, stream parser and answers.

use std::fmt;

use async_trait::async_trait;
use lumen_core::{
    ModelAdapter, ModelInfo, ModelResponse, ModelStream, Result, StepContext, TaskState,
    TokenUsage, WireRecord,
};
use serde_json::Value;

use crate::decoder::ActionDecoder;
use crate::http::Http;
use crate::prompt::{self, CHARS_PER_TOKEN};
use crate::stream::{self, Decode};

/// What a provider adds to [`HttpAdapter`]: its wire format. A codec holds
/// the provider's settings and builds requests; it makes no calls itself.
pub trait Codec: Send + Sync + fmt::Debug + 'static {
    /// The provider's stream parser.
    type Parser: Decode;

    /// The provider's name (`anthropic`, `openai`, `google`, `compatible`).
    fn provider(&self) -> &'static str;
    /// The URL of a step's request.
    fn url(&self, stream: bool) -> String;
    /// The headers of a step's request (the key among them).
    fn headers(&self) -> Vec<(&'static str, String)>;
    /// The body of a step's request.
    fn body(&self, ctx: &StepContext<'_>, stream: bool) -> Value;
    /// A parser for a streamed answer.
    fn parser(&self, decoder: ActionDecoder) -> Self::Parser;
    /// A non-streamed answer, parsed.
    fn answer(&self, decoder: ActionDecoder, answer: Value) -> Result<ModelResponse>;
    /// Tokens one image of this size costs, by the provider's own rule.
    fn image_tokens(&self, width: u32, height: u32) -> u64;
    /// Characters a request carries beyond the system prompt and history
    /// (tool declarations, framing), for estimates.
    fn overhead_chars(&self) -> usize;
    /// The URL, headers and body of a summary request for `text`.
    fn summary_request(&self, text: String) -> (String, Vec<(&'static str, String)>, Value);
    /// The summary's text from its answer (may be empty).
    fn summary_text(&self, answer: Value) -> Result<String>;
    /// Whether `error` refuses one of two request shapes the provider's
    /// documentation and its behaviour disagree on; the codec then builds
    /// the other from now on, and the request is sent once more. Default:
    /// no such shapes.
    fn switch_shape(&self, error: &lumen_core::LumenError) -> bool {
        let _ = error;
        false
    }
}

/// A model adapter over HTTP: the shared client and a provider's codec.
#[derive(Debug)]
pub struct HttpAdapter<C: Codec> {
    pub(crate) info: ModelInfo,
    pub(crate) http: Http,
    pub(crate) codec: C,
}

impl<C: Codec> HttpAdapter<C> {
    /// The provider's codec.
    pub fn codec(&self) -> &C {
        &self.codec
    }
}

#[async_trait]
impl<C: Codec> ModelAdapter for HttpAdapter<C> {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn stream(&self, ctx: &StepContext<'_>) -> Result<ModelStream> {
        let started = std::time::Instant::now();
        let post = |body: Value| async move {
            self.http
                .post_sse(&self.codec.url(true), &self.codec.headers(), &body)
                .await
        };
        let events = match post(self.codec.body(ctx, true)).await {
            Err(e) if self.codec.switch_shape(&e) => post(self.codec.body(ctx, true)).await?,
            answer => answer?,
        };
        let model = self.info.model_id.clone();
        tracing::debug!(
            target: lumen_core::logs::ADAPTER,
            model = %model,
            step = ctx.step,
            ms = started.elapsed().as_millis() as u64,
            "stream opened"
        );
        let decoded = stream::drive(events, self.codec.parser(ActionDecoder::for_step(ctx)));
        Ok(Box::pin(futures::StreamExt::inspect(decoded, move |e| {
            if let Ok(lumen_core::ModelEvent::Completed(r)) = e {
                log_call(&model, "stream", started, r);
            }
        })))
    }

    async fn step(&self, ctx: &StepContext<'_>) -> Result<ModelResponse> {
        let started = std::time::Instant::now();
        let post = |body: Value| async move {
            self.http
                .post_json(&self.codec.url(false), &self.codec.headers(), &body)
                .await
        };
        let answer = match post(self.codec.body(ctx, false)).await {
            Err(e) if self.codec.switch_shape(&e) => post(self.codec.body(ctx, false)).await?,
            answer => answer?,
        };
        let response = self.codec.answer(ActionDecoder::for_step(ctx), answer)?;
        log_call(&self.info.model_id, "step", started, &response);
        Ok(response)
    }

    /// Images by the provider's rule, compressed screenshots as a marker,
    /// everything else as text at ~4 characters per token.
    fn estimate_tokens(&self, ctx: &StepContext<'_>) -> u64 {
        let mut chars =
            ctx.system_prompt.len() + prompt::MECHANICS.len() + self.codec.overhead_chars();
        let mut tokens = 0u64;
        for record in ctx.wire {
            match record {
                WireRecord::Screenshot(s) => match &s.image {
                    Some(img) => tokens += self.codec.image_tokens(img.width, img.height),
                    None => chars += 24,
                },
                other => chars += serde_json::to_string(other).map(|s| s.len()).unwrap_or(0),
            }
        }
        tokens + chars as u64 / CHARS_PER_TOKEN
    }

    async fn summarize(&self, wire: &[WireRecord], state: Option<&TaskState>) -> Result<String> {
        Ok(self.summarize_counted(wire, state).await?.0)
    }

    fn set_notices(&self, sink: Option<lumen_core::NoticeSink>) {
        self.http.set_notices(sink);
    }

    async fn summarize_counted(
        &self,
        wire: &[WireRecord],
        state: Option<&TaskState>,
    ) -> Result<(String, TokenUsage)> {
        let text = prompt::summary_input(wire, state);
        let (url, headers, body) = self.codec.summary_request(text);
        let answer = self.http.post_json(&url, &headers, &body).await?;
        let usage = summary_usage(&answer);
        let summary = self.codec.summary_text(answer)?;
        let summary = prompt::non_empty_summary(self.codec.provider(), summary.trim().to_owned())?;
        Ok((summary, usage))
    }
}

/// Logs a finished model call at the adapter surface: timing and tokens.
fn log_call(model: &str, kind: &str, started: std::time::Instant, r: &ModelResponse) {
    tracing::debug!(
        target: lumen_core::logs::ADAPTER,
        model,
        kind,
        ms = started.elapsed().as_millis() as u64,
        input_tokens = r.usage.input_tokens,
        cache_read_tokens = r.usage.cache_read_tokens,
        cache_write_tokens = r.usage.cache_write_tokens,
        output_tokens = r.usage.output_tokens,
        calls = r.turn.calls.len(),
        stop = r.stop_reason.as_deref().unwrap_or(""),
        "model call done"
    );
}

/// The tokens a non-streamed summary answer reports, in whichever of the
/// providers' shapes it comes (Anthropic and OpenAI Responses `usage`,
/// Chat Completions `usage` with prompt/completion tokens, Gemini
/// `usageMetadata`), read as each provider's streaming decoder reads it:
/// cached input apart from the rest. Nothing reported: zero.
pub(crate) fn summary_usage(answer: &Value) -> TokenUsage {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    if let Some(m) = answer.get("usageMetadata") {
        let cached = n(&m["cachedContentTokenCount"]);
        return TokenUsage {
            input_tokens: n(&m["promptTokenCount"]).saturating_sub(cached),
            output_tokens: n(&m["candidatesTokenCount"]) + n(&m["thoughtsTokenCount"]),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        };
    }
    let u = &answer["usage"];
    if u.get("prompt_tokens").is_some() {
        let cached = n(&u["prompt_tokens_details"]["cached_tokens"]);
        return TokenUsage {
            input_tokens: n(&u["prompt_tokens"]).saturating_sub(cached),
            output_tokens: n(&u["completion_tokens"]),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        };
    }
    if u.get("input_tokens_details").is_some() {
        // OpenAI Responses: input_tokens includes the cached ones.
        let cached = n(&u["input_tokens_details"]["cached_tokens"]);
        return TokenUsage {
            input_tokens: n(&u["input_tokens"]).saturating_sub(cached),
            output_tokens: n(&u["output_tokens"]),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        };
    }
    TokenUsage {
        input_tokens: n(&u["input_tokens"]),
        output_tokens: n(&u["output_tokens"]),
        cache_read_tokens: n(&u["cache_read_input_tokens"]),
        cache_write_tokens: n(&u["cache_creation_input_tokens"]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn summary_usage_reads_every_providers_shape() {
        let u = |i, o, r, w| TokenUsage {
            input_tokens: i,
            output_tokens: o,
            cache_read_tokens: r,
            cache_write_tokens: w,
        };
        let cases = [
            (
                json!({"usage": {"input_tokens": 10, "output_tokens": 2,
                       "cache_read_input_tokens": 3, "cache_creation_input_tokens": 4}}),
                u(10, 2, 3, 4),
            ),
            (
                json!({"usage": {"input_tokens": 10, "output_tokens": 2,
                       "input_tokens_details": {"cached_tokens": 6}}}),
                u(4, 2, 6, 0),
            ),
            (
                json!({"usage": {"prompt_tokens": 10, "completion_tokens": 2,
                       "prompt_tokens_details": {"cached_tokens": 1}}}),
                u(9, 2, 1, 0),
            ),
            (
                json!({"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2,
                       "thoughtsTokenCount": 5, "cachedContentTokenCount": 3}}),
                u(7, 7, 3, 0),
            ),
            (json!({"content": []}), TokenUsage::default()),
            (json!("not an object"), TokenUsage::default()),
        ];
        for (answer, want) in cases {
            assert_eq!(summary_usage(&answer), want, "{answer}");
        }
    }
}

//! Google Gemini (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`)
//! with the `computerUse` tool in the browser environment.
//!
//! - Coordinates arrive on the 0–1000 grid and are denormalised against the
//!   viewport ([`crate::decoder`]).
//! - A function call's own `id` is its call id and is echoed in its
//!   `functionResponse.id`; a call without one gets `{responseId}-{n}` (or
//!   `gemini-{n}`). Calls are answered by `functionResponse` parts in call
//!   order, each carrying the page URL; the screenshot taken after the calls
//!   rides in the last response's `parts` (as the computer-use protocol
//!   wants).
//! - Both action sets decode: the 13 legacy functions and Gemini 3.5's.
//! - Our tools' parameters are written in the SDK's `Schema` dialect
//!   (upper-case types, no `additionalProperties`, no property-less object).
//! - `safety_decision` in a call's arguments becomes a [`SafetyCheck`] on its
//!   actions; when the user acknowledged it, the function response says
//!   `safety_acknowledgement: "true"`.
//! - Thought signatures are kept on the parts they came with and replayed
//!   verbatim. Gemini 3 streams arguments (`functionCall{name,
//!   willContinue}`, then `partialArgs`, then an empty `functionCall{}`):
//!   they are assembled and the action is yielded when the call completes.
//! - The stream has no terminal event: it is complete when a candidate has
//!   a `finishReason` and the body ends.

use lumen_core::{
    AssistantTurn, LumenError, ModelErrorKind, ModelEvent, ModelResponse, Result, SafetyCheck,
    StepContext, ThinkingBlock, ToolResult, WireRecord,
};
use serde_json::{Map, Value, json};

use crate::adapter::{Codec, HttpAdapter};
use crate::decoder::ActionDecoder;
use crate::http::{SseEvent, stream_error};
use crate::prompt::{self};
use crate::registry::{self, ModelSpec, Temperature, ThinkingStyle, ToolFamily};
use crate::stream::{self, Decode, TurnBuilder, parse_payload};
use crate::{AdapterOptions, Effort, Provider, join_url};

mod actions;
mod answer;
mod request;
pub use answer::StreamParser;
use answer::*;
use request::*;

const PROVIDER: &str = "google";
const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
const DEFAULT_SUMMARY_MODEL: &str = "gemini-3.5-flash";

/// The Gemini adapter: the shared HTTP adapter over [`GoogleCodec`].
pub type GoogleAdapter = HttpAdapter<GoogleCodec>;

/// Gemini's `generateContent` wire format.
#[derive(Debug)]
pub struct GoogleCodec {
    model: String,
    key: crate::http::ApiKey,
    base_url: String,
    spec: &'static ModelSpec,
    max_tokens: u32,
    thinking_budget: Option<u32>,
    effort: Option<Effort>,
    summary_model: String,
    /// Which session-dependent own tools to offer.
    own: prompt::OwnTools,
}

impl HttpAdapter<GoogleCodec> {
    /// An adapter for `model` (`gemini-2.5-computer-use-preview-10-2025`).
    /// Needs `options.api_key`.
    pub fn new(model: &str, options: AdapterOptions) -> Result<Self> {
        check_model_id("model", model)?;
        if let Some(summary) = &options.summary_model {
            check_model_id("summary_model", summary)?;
        }
        let own = prompt::OwnTools::of(&options);
        options.computer_tools_only(PROVIDER)?;
        let key = options.api_key.clone().ok_or_else(|| {
            LumenError::config(
                "google api key",
                "no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass AdapterOptions::api_key",
            )
        })?;
        let http = options.http(PROVIDER, key.clone())?;
        let spec = registry::spec(Provider::Google, model);
        let effort = options.wanted_effort();
        let codec = GoogleCodec {
            model: model.to_owned(),
            key,
            spec,
            base_url: options
                .base_url
                .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            max_tokens: options.max_tokens.unwrap_or(spec.max_output),
            effort,
            thinking_budget: options.thinking_budget,
            own,
            summary_model: options
                .summary_model
                .unwrap_or_else(|| DEFAULT_SUMMARY_MODEL.to_owned()),
        };
        Ok(Self {
            info: spec.info(model, 56, true),
            http,
            codec,
        })
    }

    /// The request body for one step (public so tests can pin it).
    pub fn request_body(&self, ctx: &StepContext<'_>) -> Value {
        self.codec.request_body(ctx)
    }
}

/// A model id goes into the request's path: nothing in it may reach
/// another path of the host (`../`, `?`, `#`), where the key goes too.
fn check_model_id(setting: &'static str, id: &str) -> Result<()> {
    let fine = !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if fine {
        Ok(())
    } else {
        Err(LumenError::config(
            setting,
            format!("{id:?} is not a Gemini model id (letters, digits, -, _ and . only)"),
        ))
    }
}

impl GoogleCodec {
    fn model_url(&self, model: &str, stream: bool) -> String {
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        join_url(&self.base_url, &format!("v1beta/models/{model}:{method}"))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![("x-goog-api-key", self.key.expose().to_owned())]
    }

    fn request_body(&self, ctx: &StepContext<'_>) -> Value {
        // `navigate` is one of Gemini's own computer-use functions.
        let functions: Vec<Value> = prompt::own_tools(self.own)
            .into_iter()
            .filter(|(name, _, _)| *name != "navigate")
            .map(|(name, description, schema)| {
                // Gemini refuses an OBJECT without properties: a tool with
                // no arguments declares no parameters.
                let empty = schema["properties"].as_object().is_none_or(|p| p.is_empty());
                match empty {
                    true => json!({"name": name, "description": description}),
                    false => {
                        json!({"name": name, "description": description, "parameters": gemini_schema(&schema)})
                    }
                }
            })
            .collect();
        let mut contents = build_contents(ctx);
        if !ctx.system_prompt.trim().is_empty() {
            push_part(&mut contents, "user", json!({"text": ctx.system_prompt}));
        }
        let mut config = json!({"maxOutputTokens": self.max_tokens});
        match self.spec.thinking {
            ThinkingStyle::GeminiBudget => {
                if let Some(budget) = self.thinking_budget {
                    config["thinkingConfig"] =
                        json!({"thinkingBudget": budget, "includeThoughts": true});
                }
            }
            // Gemini 3 takes a level; a budget alongside it is a 400.
            ThinkingStyle::GeminiLevel => {
                let mut thinking = json!({"includeThoughts": true});
                if let Some(effort) = self.effort {
                    thinking["thinkingLevel"] = json!(effort.gemini());
                }
                config["thinkingConfig"] = thinking;
            }
            _ => {}
        }
        match self.spec.temperature {
            // Gemini 3's guidance: keep 1.0; lower values make it loop.
            Temperature::Fixed(t) => config["temperature"] = crate::temperature_json(t),
            _ => {
                if let Some(t) = ctx.temperature {
                    config["temperature"] = crate::temperature_json(t);
                }
            }
        }
        let mut computer = json!({"environment": "ENVIRONMENT_BROWSER"});
        if self.spec.tools == ToolFamily::GeminiExtended {
            // The 3.x computer-use models screen pages for injected
            // instructions when asked (`ComputerUse` in google-genai 3.6.1).
            computer["enablePromptInjectionDetection"] = json!(true);
        }
        json!({
            "systemInstruction": {"parts": [{"text": prompt::MECHANICS}]},
            "contents": contents,
            "tools": [
                {"computerUse": computer},
                {"functionDeclarations": functions},
            ],
            "generationConfig": config,
        })
    }
}

impl Codec for GoogleCodec {
    type Parser = StreamParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn url(&self, stream: bool) -> String {
        self.model_url(&self.model, stream)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        GoogleCodec::headers(self)
    }

    /// Gemini's request has no `stream` field: the URL says it.
    fn body(&self, ctx: &StepContext<'_>, _stream: bool) -> Value {
        self.request_body(ctx)
    }

    fn parser(&self, decoder: ActionDecoder) -> StreamParser {
        StreamParser::new(decoder)
    }

    fn answer(&self, decoder: ActionDecoder, answer: Value) -> Result<ModelResponse> {
        parse_answer(decoder, answer)
    }

    /// Gemini's tile rule (see [`image_tokens`]).
    fn image_tokens(&self, width: u32, height: u32) -> u64 {
        image_tokens(width, height)
    }

    fn overhead_chars(&self) -> usize {
        1000
    }

    fn summary_request(&self, text: String) -> (String, Vec<(&'static str, String)>, Value) {
        let body = json!({
            "systemInstruction": {"parts": [{"text": prompt::SUMMARIZE}]},
            "contents": [{"role": "user", "parts": [{"text": text}]}],
        });
        (
            self.model_url(&self.summary_model, false),
            self.headers(),
            body,
        )
    }

    fn summary_text(&self, answer: Value) -> Result<String> {
        Ok(answer["candidates"][0]["content"]["parts"]
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p["thought"] != true)
                    .filter_map(|p| p["text"].as_str())
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// Gemini's image rule: 258 tokens when both sides are ≤384 px, else 258
/// per 768×768 tile.
pub fn image_tokens(width: u32, height: u32) -> u64 {
    if width <= 384 && height <= 384 {
        return 258;
    }
    let tiles = width.div_ceil(768).max(1) as u64 * height.div_ceil(768).max(1) as u64;
    tiles * 258
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiKey;

    #[test]
    fn partial_args_assemble() {
        let mut args = json!({});
        for item in [
            json!({"jsonPath": "$.text", "stringValue": "hel", "willContinue": true}),
            json!({"jsonPath": "$.text", "stringValue": "lo"}),
            json!({"jsonPath": "$.x", "numberValue": 500}),
            json!({"jsonPath": "$.press_enter", "boolValue": false}),
            json!({"jsonPath": "$.list[1].a", "stringValue": "z"}),
        ] {
            apply_partial(&mut args, &item).unwrap();
        }
        assert_eq!(
            args,
            json!({"text": "hello", "x": 500, "press_enter": false, "list": [null, {"a": "z"}]})
        );
    }

    /// A model id is part of the request's path, and the key goes with
    /// it: an id that would reach another path of the host is refused.
    #[test]
    fn a_model_id_cannot_leave_its_path() {
        let options = || AdapterOptions {
            api_key: Some(ApiKey::new("k")),
            ..AdapterOptions::default()
        };
        assert!(GoogleAdapter::new("gemini-3-pro-preview", options()).is_ok());
        assert!(GoogleAdapter::new("gemini-3.5-flash", options()).is_ok());
        for bad in ["../../v1beta/other#", "x?key=1", "a/b", "", ".."] {
            let err = GoogleAdapter::new(bad, options()).unwrap_err();
            assert!(
                err.to_string().contains("not a Gemini model id"),
                "{bad}: {err}"
            );
        }
        let mut o = options();
        o.summary_model = Some("../x".into());
        assert!(GoogleAdapter::new("gemini-3.5-flash", o).is_err());
    }
}

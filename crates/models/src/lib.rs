//! Model adapters for Lumen (Anthropic, OpenAI, Google and any
//! OpenAI-compatible server) and the [`ActionDecoder`] that turns each
//! provider's tool calls into [`lumen_core::Action`]s in viewport pixels.
//!
//! An adapter is a stateless codec (see [`lumen_core::ModelAdapter`]): it
//! turns the loop's wire history into one provider request and the
//! provider's answer into [`ModelEvent`]s, yielding
//! each action as soon as its arguments are complete. Coordinates are
//! converted once, in the [`decoder`].
//!
//! - [`create_adapter`] picks an adapter from a model string
//!   (`anthropic/…`, `openai/…`, `google/…`, anything else → an
//!   OpenAI-compatible server at a base URL) and reads keys and base URLs
//!   from [`AdapterOptions`] or the usual environment variables.
//! - [`anthropic::AnthropicAdapter`]: Messages API with the computer tool.
//! - [`openai::OpenAiAdapter`]: Responses API with `computer_use_preview`
//!   or `computer`.
//! - [`google::GoogleAdapter`]: Gemini with the `computerUse` tool.
//! - [`compatible::CompatibleAdapter`]: Chat Completions with Lumen's
//!   action set as function tools.
//! - [`create_adapter_chain`] adds fallback models tried in order when a
//!   model is retired, not found or overloaded ([`fallback`]).
//! - [`decode_recording`] replays a recorded SSE stream through a parser
//!   (tests and `cargo xtask decode-stream`).
//!
//! Each provider is a folder (`mod.rs`: its codec; `request.rs`;
//! `answer.rs`; `actions.rs`), and [`adapter::HttpAdapter`] implements
//! `ModelAdapter` once over any provider's [`adapter::Codec`]. HTTP (retries
//! with backoff and jitter, Retry-After, typed errors, deadlines) lives in
//! [`http`]; what each model needs in [`registry`]; how much of an answer
//! is ever held (SSE events, tool-call arguments, Gemini paths) in
//! [`limits`]. Keys are [`ApiKey`]s, which never print. An
//! optional [`WireObserver`] sees the raw traffic (for recording streams).
//!
//! May depend on: `lumen-core`, `reqwest`, `tokio`.
//! Must never be named by `lumen-perception`, `lumen-memory` or `lumen-safety`: the
//! loop sees models only through the `ModelAdapter` trait.
//!
//! # Example
//! ```no_run
//! use lumen_models::{AdapterOptions, create_adapter};
//!
//! // Reads ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL when set).
//! let adapter = create_adapter("anthropic/claude-sonnet-4-6", AdapterOptions::default())?;
//! assert_eq!(adapter.info().provider, "anthropic");
//! # Ok::<(), lumen_core::LumenError>(())
//! ```
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]

pub mod adapter;
pub mod anthropic;
pub mod compatible;
pub mod decoder;
pub mod fallback;
pub mod google;
pub mod http;
pub mod limits;
pub mod openai;
mod prompt;
pub mod registry;
pub mod stream;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use lumen_core::{LumenError, ModelAdapter, ModelEvent, Result, Screenshot};

pub use decoder::{ActionDecoder, CoordinateSpace, base_call_id, call_ids};
pub use http::{
    ApiKey, Deadlines, RetryPolicy, SseEvent, WireEvent, WireObserver, reframe_recording,
};

/// Options for building an adapter. Everything is optional: keys and base
/// URLs fall back to the environment, the rest to sensible defaults.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    /// The API key; else the provider's environment variable.
    pub api_key: Option<ApiKey>,
    /// The API base URL (`https://api.anthropic.com`); else the provider's
    /// environment variable, else the provider's public endpoint.
    pub base_url: Option<String>,
    /// Retries before the first byte of an answer.
    pub retry: RetryPolicy,
    /// How long a call may take: to its response headers, between two
    /// stream events, and in all.
    pub deadlines: Deadlines,
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// Output token limit per call (thinking comes on top); `None` takes
    /// the model's default from the [`registry`].
    pub max_tokens: Option<u32>,
    /// Reasoning budget in tokens, for models with a manual budget
    /// (Anthropic `budget_tokens`, raised to the model's minimum; Gemini
    /// `thinkingBudget`). Models that take an effort instead get one from
    /// it (≤2048 low, ≤8192 medium, else high) unless [`effort`] is set.
    /// `None` (and no `effort`) leaves the provider's default.
    ///
    /// [`effort`]: AdapterOptions::effort
    pub thinking_budget: Option<u32>,
    /// Reasoning effort, for models that take one (Anthropic adaptive
    /// thinking, OpenAI reasoning, Gemini 3 thinking levels). Overrides the
    /// effort derived from `thinking_budget`.
    pub effort: Option<Effort>,
    /// The model `summarize` uses (a cheap one); default per provider.
    pub summary_model: Option<String>,
    /// Coordinate space of the compatible adapter's tools.
    pub coordinate_space: CoordinateSpace,
    /// OpenAI: send only the new items with `previous_response_id` instead
    /// of the full history (the provider keeps the conversation).
    pub openai_chain_responses: bool,
    /// OpenAI: use the current `computer` tool (an `actions` batch per call)
    /// instead of `computer_use_preview`. Default: `computer` for models
    /// other than `computer-use-preview*`.
    pub openai_batched_computer_tool: Option<bool>,
    /// Which tool family drives the browser: `None` takes the registry's
    /// choice for the model. [`Tools::Browser`] is Anthropic's browser
    /// toolset; other providers refuse it.
    pub tools: Option<Tools>,
    /// The browser toolset's opt-in members to offer the model (with
    /// [`Tools::Browser`]). `lumen::Agent` sets them from the session
    /// policy and the browser's upload folder; the policy
    /// and the tab refuse a member that is off whatever is declared here.
    pub browser_opt_ins: BrowserOptIns,
    /// Offer `request_human` (hand the browser to a person). `lumen::Agent`
    /// sets it when the session has a handoff policy: without a person to
    /// ask, the tool would only cost tokens.
    pub request_human: bool,
    /// OpenAI-compatible servers: the most images one request may carry
    /// (vLLM's `--limit-mm-per-prompt`, llama.cpp and LM Studio limits);
    /// older screenshots become a text marker. `None`: no limit.
    pub max_images: Option<usize>,
    /// Sees every request (secret headers masked) and every byte of every
    /// answer as received, for recording provider streams (`cargo xtask
    /// record`). `None` (the default): nothing is observed and nothing
    /// changes.
    pub wire_observer: Option<WireObserver>,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        Self {
            api_key: None,
            base_url: None,
            retry: RetryPolicy::default(),
            deadlines: Deadlines::default(),
            connect_timeout: Duration::from_secs(15),
            max_tokens: None,
            thinking_budget: None,
            effort: None,
            summary_model: None,
            coordinate_space: CoordinateSpace::default(),
            openai_chain_responses: false,
            openai_batched_computer_tool: None,
            tools: None,
            browser_opt_ins: BrowserOptIns::default(),
            request_human: false,
            max_images: None,
            wire_observer: None,
        }
    }
}

/// The browser toolset's members that are dangerous enough to be the
/// operator's choice. Both default to off; `read_console` and
/// `read_network` (read-only) are always offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BrowserOptIns {
    /// Offer `javascript_exec` (the policy must allow
    /// `allowModelJavascript` too).
    pub javascript_exec: bool,
    /// Offer `file_upload` (the tab must have an upload folder too).
    pub file_upload: bool,
}

/// A tool family to drive the browser with (`--tools computer|browser`;
/// `"computer"` / `"browser"` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tools {
    /// Pixels: the provider's computer-use tool.
    Computer,
    /// Anthropic's browser toolset: refs from the accessibility tree, tabs,
    /// form input, and clicks on a coordinate or a ref.
    Browser,
}

impl std::str::FromStr for Tools {
    type Err = LumenError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "computer" => Ok(Tools::Computer),
            "browser" => Ok(Tools::Browser),
            other => Err(LumenError::config(
                "tools",
                format!("unknown tool family `{other}`: use computer or browser"),
            )),
        }
    }
}

/// How hard a model should think. Each provider maps it onto its own
/// scale (see [`Effort::anthropic`], [`Effort::openai`], [`Effort::gemini`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// As little as the model allows.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high (Anthropic and OpenAI `xhigh`; Gemini's high).
    XHigh,
    /// The most the model offers (`max`; Gemini's high).
    Max,
}

impl Effort {
    /// The effort a token budget stands for: ≤2048 low, ≤8192 medium, else
    /// high.
    pub fn from_budget(budget: u32) -> Self {
        match budget {
            0..=2048 => Effort::Low,
            2049..=8192 => Effort::Medium,
            _ => Effort::High,
        }
    }

    /// Anthropic `output_config.effort`.
    pub fn anthropic(self) -> &'static str {
        match self {
            Effort::Minimal | Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh => "xhigh",
            Effort::Max => "max",
        }
    }

    /// OpenAI `reasoning.effort`.
    pub fn openai(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh => "xhigh",
            Effort::Max => "max",
        }
    }

    /// Gemini 3 `thinkingConfig.thinkingLevel` (the SDK's enum names).
    pub fn gemini(self) -> &'static str {
        match self {
            Effort::Minimal => "MINIMAL",
            Effort::Low => "LOW",
            Effort::Medium => "MEDIUM",
            Effort::High | Effort::XHigh | Effort::Max => "HIGH",
        }
    }
}

impl std::str::FromStr for Effort {
    type Err = LumenError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "minimal" => Effort::Minimal,
            "low" => Effort::Low,
            "medium" => Effort::Medium,
            "high" => Effort::High,
            "xhigh" => Effort::XHigh,
            "max" => Effort::Max,
            other => {
                return Err(LumenError::config(
                    "effort",
                    format!(
                        "unknown effort `{other}`: use minimal, low, medium, high, xhigh or max"
                    ),
                ));
            }
        })
    }
}

impl AdapterOptions {
    /// Refuses the browser toolset for a provider that has none.
    pub(crate) fn computer_tools_only(&self, provider: &str) -> Result<()> {
        if self.tools == Some(Tools::Browser) {
            return Err(LumenError::config(
                "tools",
                format!(
                    "the browser toolset is Anthropic's; {provider} drives the browser with its \
                     computer tool (use --tools computer)"
                ),
            ));
        }
        Ok(())
    }

    /// The HTTP client these options describe, for `provider` with `key`.
    pub(crate) fn http(&self, provider: &'static str, key: ApiKey) -> Result<http::Http> {
        Ok(http::Http::new(
            provider,
            key,
            self.retry,
            self.deadlines,
            self.connect_timeout,
        )?
        .observed(self.wire_observer.clone()))
    }

    /// The effort asked for, from `effort` or else `thinking_budget`.
    pub(crate) fn wanted_effort(&self) -> Option<Effort> {
        self.effort.or_else(|| {
            self.thinking_budget
                .filter(|b| *b > 0)
                .map(Effort::from_budget)
        })
    }
}

/// The wire protocols Lumen speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Responses API.
    OpenAi,
    /// Google Gemini `streamGenerateContent`.
    Google,
    /// OpenAI-compatible Chat Completions.
    Compatible,
}

impl Provider {
    /// The provider's name (`anthropic`, `openai`, `google`, `compatible`).
    pub fn name(&self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Google => "google",
            Provider::Compatible => "compatible",
        }
    }
}

impl std::str::FromStr for Provider {
    type Err = LumenError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "anthropic" => Provider::Anthropic,
            "openai" => Provider::OpenAi,
            "google" | "gemini" => Provider::Google,
            "compatible" => Provider::Compatible,
            other => {
                return Err(LumenError::config(
                    "provider",
                    format!(
                        "unknown provider `{other}`: use anthropic, openai, google or compatible"
                    ),
                ));
            }
        })
    }
}

/// Builds the adapter a model string names, reading missing keys and base
/// URLs from the process environment.
///
/// `anthropic/<model>` (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL),
/// `openai/<model>` (OPENAI_API_KEY, OPENAI_BASE_URL), `google/<model>` or
/// `gemini/<model>` (GEMINI_API_KEY or GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL). Any other
/// string (optionally prefixed `compatible/`) is a model on an
/// OpenAI-compatible server, which needs a base URL (options or
/// OPENAI_BASE_URL; the key, OPENAI_API_KEY, is optional). A missing key or
/// base URL is a [`LumenError::Config`] naming what to set.
pub fn create_adapter(model: &str, options: AdapterOptions) -> Result<Arc<dyn ModelAdapter>> {
    create_adapter_with_env(model, options, |name| std::env::var(name).ok())
}

/// [`create_adapter`] for `model` with `fallbacks` tried in order after it
/// (see [`fallback`]); without fallbacks, exactly [`create_adapter`].
///
/// A fallback of the primary's provider shares `options`; one of another
/// provider takes its key, base URL and summary model from that provider's
/// environment variables. A retired primary is skipped (the switch is told
/// with the first call); any other model that cannot be built is an error.
pub fn create_adapter_chain(
    model: &str,
    fallbacks: &[String],
    options: AdapterOptions,
) -> Result<Arc<dyn ModelAdapter>> {
    create_adapter_chain_with_env(model, fallbacks, options, |name| std::env::var(name).ok())
}

/// [`create_adapter_chain`] with an explicit environment.
pub fn create_adapter_chain_with_env(
    model: &str,
    fallbacks: &[String],
    options: AdapterOptions,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ModelAdapter>> {
    if fallbacks.is_empty() {
        return create_adapter_with_env(model, options, env);
    }
    let provider = registry::split_model(model).0;
    let mut chain = Vec::new();
    let mut skipped = None;
    for (i, m) in std::iter::once(model)
        .chain(fallbacks.iter().map(String::as_str))
        .enumerate()
    {
        let own = if registry::split_model(m).0 == provider {
            options.clone()
        } else {
            AdapterOptions {
                api_key: None,
                base_url: None,
                summary_model: None,
                ..options.clone()
            }
        };
        match create_adapter_with_env(m, own, &env) {
            Ok(adapter) => chain.push((m.to_owned(), adapter)),
            Err(e) if i == 0 && registry::retirement(m).is_some() => {
                skipped = Some(e.to_string());
            }
            Err(e) => return Err(e),
        }
    }
    let chain = fallback::FallbackAdapter::new(chain)?;
    Ok(Arc::new(match skipped {
        Some(reason) => chain.skipped(model, reason),
        None => chain,
    }))
}

/// [`create_adapter`] with an explicit environment (tests, embedding).
pub fn create_adapter_with_env(
    model: &str,
    mut options: AdapterOptions,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ModelAdapter>> {
    let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let need_key = |options: &mut AdapterOptions, vars: &[&str], provider: &str| -> Result<()> {
        if options.api_key.is_none() {
            options.api_key = vars.iter().find_map(|v| env(v)).map(ApiKey::new);
        }
        if options.api_key.is_none() {
            return Err(LumenError::config(
                format!("{provider} api key"),
                format!(
                    "no API key: set {} or pass AdapterOptions::api_key",
                    vars.join(" or ")
                ),
            ));
        }
        Ok(())
    };
    // A retired model is refused before any request. A custom endpoint
    // (Azure OpenAI, a gateway) keeps its own retirement schedule, so
    // there it is only a warning.
    if let Some(retired) = registry::retirement(model) {
        if options.base_url.is_none() && env(base_url_var(model)).is_none() {
            return Err(LumenError::config("model", retired.to_string()));
        }
        tracing::warn!(%model, "{retired}; calling the configured endpoint all the same");
    }
    // The registry's reading of the prefix, so that what is checked (an
    // operator's model list, the provider behind a base URL) is what runs:
    // `gemini/…` is a Google model here too.
    match registry::split_model(model) {
        (Provider::Anthropic, id) => {
            need_key(&mut options, &["ANTHROPIC_API_KEY"], "anthropic")?;
            if options.base_url.is_none() {
                options.base_url = env(base_url_var(model));
            }
            Ok(Arc::new(anthropic::AnthropicAdapter::new(id, options)?))
        }
        (Provider::OpenAi, id) => {
            need_key(&mut options, &["OPENAI_API_KEY"], "openai")?;
            if options.base_url.is_none() {
                options.base_url = env(base_url_var(model));
            }
            Ok(Arc::new(openai::OpenAiAdapter::new(id, options)?))
        }
        (Provider::Google, id) => {
            need_key(
                &mut options,
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                "google",
            )?;
            if options.base_url.is_none() {
                options.base_url = env(base_url_var(model));
            }
            Ok(Arc::new(google::GoogleAdapter::new(id, options)?))
        }
        // Anything else: a model on an OpenAI-compatible server.
        (Provider::Compatible, id) => {
            if options.base_url.is_none() {
                options.base_url = env(base_url_var(model));
            }
            if options.api_key.is_none() {
                options.api_key = env("OPENAI_API_KEY").map(ApiKey::new);
            }
            Ok(Arc::new(compatible::CompatibleAdapter::new(id, options)?))
        }
    }
}

/// The variable that points a provider's adapter at another endpoint.
fn base_url_var(model: &str) -> &'static str {
    match registry::split_model(model).0 {
        Provider::Anthropic => "ANTHROPIC_BASE_URL",
        Provider::Google => "GOOGLE_GEMINI_BASE_URL",
        Provider::OpenAi | Provider::Compatible => "OPENAI_BASE_URL",
    }
}

/// A temperature as JSON, without f32 noise (0.2, not 0.20000000298…).
pub(crate) fn temperature_json(t: f32) -> serde_json::Value {
    t.to_string()
        .parse::<f64>()
        .map(serde_json::Value::from)
        .unwrap_or(serde_json::Value::Null)
}

/// Joins a base URL and a path without doubling or dropping the slash.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Replays a recorded stream through `provider`'s parser, as if it had come
/// over HTTP, decoding coordinates against `screenshot`.
///
/// `chunks` are the raw bytes in arrival order (split them anyhow: the
/// result must not depend on it). Returns every event, in order; the last
/// item is `Completed` or the error the stream ended with.
pub async fn decode_recording(
    provider: Provider,
    screenshot: &Screenshot,
    chunks: Vec<Vec<u8>>,
) -> Result<Vec<Result<ModelEvent>>> {
    let name = provider.name();
    let bytes = futures::stream::iter(chunks.into_iter().map(Ok::<_, http::ApiFailure>));
    let events = http::sse_events(name, bytes);
    let decoder = ActionDecoder::new(screenshot);
    let model_stream = match provider {
        Provider::Anthropic => stream::drive(events, anthropic::StreamParser::new(decoder)),
        Provider::OpenAi => stream::drive(events, openai::StreamParser::new(decoder)),
        Provider::Google => stream::drive(events, google::StreamParser::new(decoder)),
        Provider::Compatible => stream::drive(events, compatible::StreamParser::new(decoder)),
    };
    Ok(model_stream.collect().await)
}

/// [`decode_recording`] on the calling thread (no runtime needed: replaying
/// bytes involves no timers or sockets). For `cargo xtask decode-stream`.
pub fn decode_recording_blocking(
    provider: Provider,
    screenshot: &Screenshot,
    chunks: Vec<Vec<u8>>,
) -> Result<Vec<Result<ModelEvent>>> {
    futures::executor::block_on(decode_recording(provider, screenshot, chunks))
}

//! One table of what each model needs: its provider, tool family, beta
//! headers, thinking style, whether it takes a temperature, the largest
//! image it uses without shrinking it, its context window, a default output
//! budget and its list prices.
//!
//! Adapters build requests from it, the loop sizes screenshots with it, the
//! CLI and the eval price runs with it (`lumen models` prints it). Sources
//! are the providers' SDK types and model documentation as of late 2026.
//!
//! # Lookup
//! [`spec`] parses a model id into a family and version
//! (`claude-opus-4-7` → `claude-opus` 4.7, `gpt-5.4-mini` → `gpt-mini`
//! 5.4, `gemini-3.5-flash` → `gemini-flash` 3.5) and takes the entry of
//! that family with the highest version not above the id's. So a new model
//! id of a known family gets that family's newest rules, never the oldest:
//! `claude-opus-6` is treated as the newest Opus we know. An id of an
//! unknown family is matched by version among the provider's entries.

use std::fmt;

use crate::Provider;
use crate::anthropic::ComputerTool;

/// How a model is told to think.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingStyle {
    /// No reasoning control.
    None,
    /// Anthropic `thinking: {type: enabled, budget_tokens}`, at least `min`.
    Budget {
        /// The smallest budget the API accepts.
        min: u32,
    },
    /// Anthropic `thinking: {type: adaptive}` with `output_config.effort`;
    /// a manual budget is rejected.
    Adaptive,
    /// OpenAI `reasoning: {effort, summary}`.
    ReasoningEffort,
    /// Gemini `thinkingConfig.thinkingBudget`.
    GeminiBudget,
    /// Gemini 3 `thinkingConfig.thinkingLevel`.
    GeminiLevel,
}

/// When a request may carry `temperature`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Temperature {
    /// Always (Anthropic drops it itself when thinking is on).
    Allowed,
    /// Only without reasoning (GPT-5.x: only with effort `none`).
    WithoutReasoning,
    /// Never: the API answers 400 (Claude Opus 4.7 and later, 5.x).
    Rejected,
    /// Accepted, but the provider's guidance is to leave it at this value
    /// (Gemini 3: 1.0; lower values make it loop).
    Fixed(f32),
}

/// Which tool protocol the model is driven with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFamily {
    /// Anthropic's beta `computer` tool of this version.
    AnthropicComputer(ComputerTool),
    /// OpenAI's `computer_use_preview` tool (one action per call).
    OpenAiComputerPreview,
    /// OpenAI's GA `computer` tool (an `actions` batch per call).
    OpenAiComputer,
    /// Gemini's `computerUse` tool with the 13 legacy functions.
    GeminiLegacy,
    /// Gemini's `computerUse` tool with the extended 3.5 action set.
    GeminiExtended,
    /// No native tool: Lumen's own action set as function tools.
    LumenFunctions,
}

impl ToolFamily {
    /// A short name for tables.
    pub fn name(&self) -> &'static str {
        match self {
            ToolFamily::AnthropicComputer(t) => t.tool_type(),
            ToolFamily::OpenAiComputerPreview => "computer_use_preview",
            ToolFamily::OpenAiComputer => "computer",
            ToolFamily::GeminiLegacy => "computerUse (legacy)",
            ToolFamily::GeminiExtended => "computerUse (3.5)",
            ToolFamily::LumenFunctions => "lumen functions",
        }
    }
}

/// The largest image a model uses as it is. Larger images are shrunk by the
/// provider, and the model then answers in the coordinates of the image it
/// saw, not the one we sent: so we never send more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Longest edge, pixels.
    pub long_edge: u32,
    /// Width × height, pixels.
    pub pixels: u64,
}

/// List prices, US dollars per million tokens. An estimate, never a bill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output, reasoning included.
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Input written to the prompt cache.
    pub cache_write: f64,
}

impl Price {
    /// The cost of `usage` in dollars.
    pub fn cost(&self, usage: &lumen_core::TokenUsage) -> f64 {
        (usage.input_tokens as f64 * self.input
            + usage.output_tokens as f64 * self.output
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write)
            / 1_000_000.0
    }
}

/// What one model (or family, from a version on) needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelSpec {
    /// The id this row was written for (`claude-opus-4-7`).
    pub id: &'static str,
    /// The wire protocol.
    pub provider: Provider,
    /// The family (`claude-opus`, `gpt`, `gpt-mini`, `gemini-flash`…).
    pub family: &'static str,
    /// The family version this row starts at.
    pub version: (u32, u32),
    /// The tool protocol.
    pub tools: ToolFamily,
    /// Beta headers to send (Anthropic), beyond the tool's own.
    pub betas: &'static [&'static str],
    /// How thinking is asked for.
    pub thinking: ThinkingStyle,
    /// Whether a temperature may be sent.
    pub temperature: Temperature,
    /// Image limits.
    pub images: ImageLimits,
    /// Context window, tokens.
    pub context_window: u64,
    /// Output budget per call when none is configured (thinking excluded).
    pub max_output: u32,
    /// List prices, when published.
    pub price: Option<Price>,
}

impl ModelSpec {
    /// The loop's view of this model for `model_id`.
    pub fn info(&self, model_id: &str, patch_size: u32, native: bool) -> lumen_core::ModelInfo {
        lumen_core::ModelInfo {
            model_id: model_id.to_owned(),
            provider: self.provider.name().to_owned(),
            patch_size: Some(patch_size),
            max_image_dimension: Some(self.images.long_edge),
            max_image_pixels: Some(self.images.pixels),
            supports_thinking: self.thinking != ThinkingStyle::None,
            native_computer_use: native,
            context_window_tokens: self.context_window,
            tab_inventory: false,
        }
    }

    /// Whether a request may carry a temperature, given whether it asks
    /// for reasoning.
    pub fn takes_temperature(&self, reasoning: bool) -> bool {
        match self.temperature {
            Temperature::Allowed => true,
            Temperature::WithoutReasoning => !reasoning,
            Temperature::Rejected | Temperature::Fixed(_) => false,
        }
    }
}

const fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Option<Price> {
    Some(Price {
        input,
        output,
        cache_read,
        cache_write,
    })
}

/// Claude models up to Opus 4.6 / Sonnet 4.6: 1568 px and about 1.15 MP
/// (1568 image tokens at w×h/750).
const CLAUDE_IMAGES: ImageLimits = ImageLimits {
    long_edge: 1568,
    pixels: 1_176_000,
};
/// Claude Opus 4.7 and later: 2576 px and 4784 image tokens.
const CLAUDE_LARGE_IMAGES: ImageLimits = ImageLimits {
    long_edge: 2576,
    pixels: 3_588_000,
};
/// OpenAI `detail: "original"` (computer use): up to 10.24 MP, 6000 px.
const OPENAI_ORIGINAL: ImageLimits = ImageLimits {
    long_edge: 6000,
    pixels: 10_240_000,
};
/// OpenAI `detail: "high"` (the preview tool): 2048 px, 2048 × 768 tiles.
const OPENAI_HIGH: ImageLimits = ImageLimits {
    long_edge: 2048,
    pixels: 2048 * 768,
};
/// Gemini: coordinates are on a 0–999 grid, so shrinking cannot shift them;
/// past 1568 px the extra tiles cost tokens and add little.
const GEMINI_IMAGES: ImageLimits = ImageLimits {
    long_edge: 1568,
    pixels: 1568 * 1568,
};

const V20250124: ToolFamily = ToolFamily::AnthropicComputer(ComputerTool::V20250124);
const V20251124: ToolFamily = ToolFamily::AnthropicComputer(ComputerTool::V20251124);
/// The GA computer toolset, for the 5.x generation.
const TOOLSET: ToolFamily = ToolFamily::AnthropicComputer(ComputerTool::Toolset20260801);
const BUDGET: ThinkingStyle = ThinkingStyle::Budget { min: 1024 };

macro_rules! claude {
    ($id:literal, $family:literal, $v:expr, $tools:expr, $thinking:expr, $images:expr, $out:literal, $price:expr) => {
        ModelSpec {
            id: $id,
            provider: Provider::Anthropic,
            family: $family,
            version: $v,
            tools: $tools,
            betas: &[],
            thinking: $thinking,
            temperature: Temperature::Rejected,
            images: $images,
            context_window: 200_000,
            max_output: $out,
            price: $price,
        }
    };
}

/// Every model Lumen has rules for, grouped by provider, oldest first
/// within a family.
pub static MODELS: &[ModelSpec] = &[
    // ----- Anthropic ------------------------------------------------------
    // No Claude row takes a temperature: Opus 4.7 and later answer 400, and
    // the SDK's request types (anthropic 2.12.0) no longer have the field
    // at all, for any model.
    claude!(
        "claude-3-7-sonnet",
        "claude-sonnet",
        (3, 7),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
        8192,
        price(3.0, 15.0, 0.3, 3.75)
    ),
    claude!(
        "claude-sonnet-4",
        "claude-sonnet",
        (4, 0),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
        8192,
        price(3.0, 15.0, 0.3, 3.75)
    ),
    claude!(
        "claude-sonnet-4-6",
        "claude-sonnet",
        (4, 6),
        V20251124,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
        8192,
        price(3.0, 15.0, 0.3, 3.75)
    ),
    claude!(
        "claude-sonnet-5",
        "claude-sonnet",
        (5, 0),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
        8192,
        price(3.0, 15.0, 0.3, 3.75)
    ),
    claude!(
        "claude-opus-4",
        "claude-opus",
        (4, 0),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
        8192,
        price(15.0, 75.0, 1.5, 18.75)
    ),
    claude!(
        "claude-opus-4-5",
        "claude-opus",
        (4, 5),
        V20251124,
        BUDGET,
        CLAUDE_IMAGES,
        8192,
        price(5.0, 25.0, 0.5, 6.25)
    ),
    claude!(
        "claude-opus-4-6",
        "claude-opus",
        (4, 6),
        V20251124,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
        8192,
        price(5.0, 25.0, 0.5, 6.25)
    ),
    claude!(
        "claude-opus-4-7",
        "claude-opus",
        (4, 7),
        V20251124,
        ThinkingStyle::Adaptive,
        CLAUDE_LARGE_IMAGES,
        8192,
        price(5.0, 25.0, 0.5, 6.25)
    ),
    claude!(
        "claude-opus-5",
        "claude-opus",
        (5, 0),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_LARGE_IMAGES,
        8192,
        price(5.0, 25.0, 0.5, 6.25)
    ),
    claude!(
        "claude-haiku-4-5",
        "claude-haiku",
        (4, 5),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
        8192,
        price(1.0, 5.0, 0.1, 1.25)
    ),
    claude!(
        "claude-haiku-5-5",
        "claude-haiku",
        (5, 5),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
        8192,
        price(1.0, 5.0, 0.1, 1.25)
    ),
    // ----- OpenAI ---------------------------------------------------------
    ModelSpec {
        id: "computer-use-preview",
        provider: Provider::OpenAi,
        family: "computer-use-preview",
        version: (0, 0),
        tools: ToolFamily::OpenAiComputerPreview,
        betas: &[],
        thinking: ThinkingStyle::ReasoningEffort,
        temperature: Temperature::WithoutReasoning,
        images: OPENAI_HIGH,
        context_window: 8_192,
        max_output: 4096,
        price: price(3.0, 12.0, 3.0, 3.0),
    },
    ModelSpec {
        id: "gpt-5",
        provider: Provider::OpenAi,
        family: "gpt",
        version: (5, 0),
        tools: ToolFamily::OpenAiComputer,
        betas: &[],
        thinking: ThinkingStyle::ReasoningEffort,
        temperature: Temperature::WithoutReasoning,
        images: OPENAI_ORIGINAL,
        context_window: 400_000,
        max_output: 16_384,
        price: price(1.25, 10.0, 0.125, 1.25),
    },
    ModelSpec {
        id: "gpt-5.4",
        provider: Provider::OpenAi,
        family: "gpt",
        version: (5, 4),
        tools: ToolFamily::OpenAiComputer,
        betas: &[],
        thinking: ThinkingStyle::ReasoningEffort,
        temperature: Temperature::WithoutReasoning,
        images: OPENAI_ORIGINAL,
        context_window: 1_000_000,
        max_output: 16_384,
        price: price(2.5, 15.0, 0.25, 2.5),
    },
    ModelSpec {
        id: "gpt-5-mini",
        provider: Provider::OpenAi,
        family: "gpt-mini",
        version: (5, 0),
        tools: ToolFamily::OpenAiComputer,
        betas: &[],
        thinking: ThinkingStyle::ReasoningEffort,
        temperature: Temperature::WithoutReasoning,
        images: OPENAI_ORIGINAL,
        context_window: 400_000,
        max_output: 16_384,
        price: price(0.25, 2.0, 0.025, 0.25),
    },
    // ----- Google ---------------------------------------------------------
    ModelSpec {
        id: "gemini-2.5-computer-use-preview-10-2025",
        provider: Provider::Google,
        family: "gemini-computer-use",
        version: (2, 5),
        tools: ToolFamily::GeminiLegacy,
        betas: &[],
        thinking: ThinkingStyle::GeminiBudget,
        temperature: Temperature::Allowed,
        images: GEMINI_IMAGES,
        context_window: 131_072,
        max_output: 8192,
        price: price(1.25, 10.0, 0.31, 1.25),
    },
    ModelSpec {
        id: "gemini-2.5-flash",
        provider: Provider::Google,
        family: "gemini-flash",
        version: (2, 5),
        tools: ToolFamily::GeminiLegacy,
        betas: &[],
        thinking: ThinkingStyle::GeminiBudget,
        temperature: Temperature::Allowed,
        images: GEMINI_IMAGES,
        context_window: 1_048_576,
        max_output: 8192,
        price: price(0.3, 2.5, 0.03, 0.3),
    },
    ModelSpec {
        id: "gemini-3-flash-preview",
        provider: Provider::Google,
        family: "gemini-flash",
        version: (3, 0),
        tools: ToolFamily::GeminiLegacy,
        betas: &[],
        thinking: ThinkingStyle::GeminiLevel,
        temperature: Temperature::Fixed(1.0),
        images: GEMINI_IMAGES,
        context_window: 1_048_576,
        max_output: 8192,
        price: price(0.5, 3.0, 0.05, 0.5),
    },
    ModelSpec {
        id: "gemini-3.5-flash",
        provider: Provider::Google,
        family: "gemini-flash",
        version: (3, 5),
        tools: ToolFamily::GeminiExtended,
        betas: &[],
        thinking: ThinkingStyle::GeminiLevel,
        temperature: Temperature::Fixed(1.0),
        images: GEMINI_IMAGES,
        context_window: 1_048_576,
        max_output: 8192,
        price: price(0.5, 3.0, 0.05, 0.5),
    },
    ModelSpec {
        id: "gemini-3.1-pro-preview",
        provider: Provider::Google,
        family: "gemini-pro",
        version: (3, 1),
        tools: ToolFamily::GeminiLegacy,
        betas: &[],
        thinking: ThinkingStyle::GeminiLevel,
        temperature: Temperature::Fixed(1.0),
        images: GEMINI_IMAGES,
        context_window: 1_048_576,
        max_output: 8192,
        price: price(2.0, 12.0, 0.2, 2.0),
    },
    // ----- OpenAI-compatible servers --------------------------------------
    ModelSpec {
        id: "compatible",
        provider: Provider::Compatible,
        family: "compatible",
        version: (0, 0),
        tools: ToolFamily::LumenFunctions,
        betas: &[],
        thinking: ThinkingStyle::None,
        temperature: Temperature::Allowed,
        images: ImageLimits {
            long_edge: 1344,
            pixels: 1344 * 1344,
        },
        context_window: 32_768,
        max_output: 4096,
        price: None,
    },
];

/// The rules for `model` on `provider` (see the module docs). Never fails:
/// an id nothing matches gets the provider's newest rules.
pub fn spec(provider: Provider, model: &str) -> &'static ModelSpec {
    let model = model.rsplit('/').next().unwrap_or(model);
    let of_provider = || MODELS.iter().filter(|m| m.provider == provider);
    // An id of no known scheme is matched as "newer than everything".
    let (family, version) = parse(provider, model).unwrap_or(("", (u32::MAX, u32::MAX)));
    let same_family: Vec<&'static ModelSpec> =
        of_provider().filter(|m| m.family == family).collect();
    let candidates: Vec<&'static ModelSpec> = if same_family.is_empty() {
        of_provider().collect()
    } else {
        same_family
    };
    let best = candidates
        .iter()
        .filter(|m| m.version <= version)
        .max_by_key(|m| m.version)
        .or_else(|| candidates.iter().min_by_key(|m| m.version))
        .copied();
    // Every provider has at least one row, so `best` is always found; the
    // compatible row is the last resort all the same.
    best.unwrap_or(&MODELS[MODELS.len() - 1])
}

/// The rules for a `provider/model` string as `create_adapter` takes it.
pub fn spec_for(model: &str) -> &'static ModelSpec {
    let (provider, id) = split_model(model);
    spec(provider, id)
}

/// Splits `anthropic/claude-…` into its provider and id; anything without
/// a known prefix is a model on an OpenAI-compatible server.
pub fn split_model(model: &str) -> (Provider, &str) {
    for (prefix, provider) in [
        ("anthropic/", Provider::Anthropic),
        ("openai/", Provider::OpenAi),
        ("google/", Provider::Google),
        ("gemini/", Provider::Google),
        ("compatible/", Provider::Compatible),
    ] {
        if let Some(id) = model.strip_prefix(prefix) {
            return (provider, id);
        }
    }
    (Provider::Compatible, model)
}

/// The estimated cost of `usage` on a `provider/model`; `None` when the
/// model has no published price (local servers).
pub fn cost(model: &str, usage: &lumen_core::TokenUsage) -> Option<f64> {
    let (provider, id) = split_model(model);
    // A bare id (as traces may hold) is priced by its name.
    let provider = match provider {
        Provider::Compatible if !model.starts_with("compatible/") => infer_provider(id),
        p => p,
    };
    if provider == Provider::Compatible {
        return None;
    }
    spec(provider, id).price.map(|p| p.cost(usage))
}

/// The provider a bare model id names by itself (`claude-…`, `gpt-…`,
/// `gemini-…`); anything else is a local or compatible model.
fn infer_provider(id: &str) -> Provider {
    if id.starts_with("claude") {
        Provider::Anthropic
    } else if id.starts_with("gpt-") || id.starts_with("computer-use") {
        Provider::OpenAi
    } else if id.starts_with("gemini") {
        Provider::Google
    } else {
        Provider::Compatible
    }
}

/// Family and version of a model id, by the provider's naming scheme.
fn parse(provider: Provider, model: &str) -> Option<(&'static str, (u32, u32))> {
    match provider {
        Provider::Anthropic => {
            let (family, major, minor) = crate::anthropic::claude_version(model)?;
            let family = match family {
                "opus" => "claude-opus",
                "sonnet" => "claude-sonnet",
                "haiku" => "claude-haiku",
                _ => "",
            };
            Some((family, (major, minor)))
        }
        Provider::OpenAi => {
            if model.starts_with("computer-use-preview") {
                return Some(("computer-use-preview", (0, 0)));
            }
            let rest = model.strip_prefix("gpt-")?;
            let mut parts = rest.split('-');
            let version = dotted(parts.next()?)?;
            let family = match parts.next() {
                Some("mini") | Some("nano") => "gpt-mini",
                _ => "gpt",
            };
            Some((family, version))
        }
        Provider::Google => {
            let rest = model.strip_prefix("gemini-")?;
            let mut parts = rest.split('-');
            let version = dotted(parts.next()?)?;
            let family = if rest.contains("computer-use") {
                "gemini-computer-use"
            } else if rest.contains("flash") {
                "gemini-flash"
            } else if rest.contains("pro") {
                "gemini-pro"
            } else {
                ""
            };
            Some((family, version))
        }
        Provider::Compatible => Some(("compatible", (0, 0))),
    }
}

/// `5.4` → (5, 4); `5` → (5, 0).
fn dotted(s: &str) -> Option<(u32, u32)> {
    let mut it = s.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = match it.next() {
        Some(m) => m.parse().ok()?,
        None => 0,
    };
    Some((major, minor))
}

impl fmt::Display for ThinkingStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThinkingStyle::None => f.write_str("none"),
            ThinkingStyle::Budget { min } => write!(f, "budget (min {min})"),
            ThinkingStyle::Adaptive => f.write_str("adaptive + effort"),
            ThinkingStyle::ReasoningEffort => f.write_str("reasoning effort"),
            ThinkingStyle::GeminiBudget => f.write_str("thinkingBudget"),
            ThinkingStyle::GeminiLevel => f.write_str("thinkingLevel"),
        }
    }
}

impl fmt::Display for Temperature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Temperature::Allowed => f.write_str("yes"),
            Temperature::WithoutReasoning => f.write_str("without reasoning"),
            Temperature::Rejected => f.write_str("no"),
            Temperature::Fixed(t) => write!(f, "fixed {t}"),
        }
    }
}

/// The registry as a Markdown table (for `lumen models` and docs).
pub fn table() -> String {
    let mut out = String::from(
        "| model (and newer of its family) | provider | tools | thinking | temperature | image edge / pixels | context | output | $/M in / out |\n\
         |---|---|---|---|---|---|---:|---:|---|\n",
    );
    for m in MODELS {
        let price = m
            .price
            .map(|p| format!("{} / {}", p.input, p.output))
            .unwrap_or_else(|| "—".into());
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} / {:.2} MP | {} | {} | {} |\n",
            m.id,
            m.provider.name(),
            m.tools.name(),
            m.thinking,
            m.temperature,
            m.images.long_edge,
            m.images.pixels as f64 / 1e6,
            m.context_window,
            m.max_output,
            price,
        ));
    }
    out
}

// ----- request rules the SDK types cannot express ---------------------------

/// Why a provider would refuse `body` for rules its SDK's types cannot
/// express: which thinking a model takes, whether it takes a temperature,
/// its image limits, and a few value constraints. Empty when none apply.
/// The mock provider runs this next to the SDK schema check (see
/// `lumen_mock::mock_provider::conformance`), so every end-to-end test is a
/// conformance test too.
pub fn request_violations(provider: Provider, body: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let model = body["model"].as_str().unwrap_or("");
    match provider {
        Provider::Anthropic => anthropic_rules(spec(provider, model), body, &mut out),
        Provider::OpenAi => openai_rules(spec(provider, model), body, &mut out),
        Provider::Google => gemini_rules(body, &mut out),
        Provider::Compatible => {}
    }
    out
}

fn anthropic_rules(spec: &ModelSpec, body: &serde_json::Value, out: &mut Vec<String>) {
    let thinking = body["thinking"]["type"].as_str();
    if spec.thinking == ThinkingStyle::Adaptive && thinking == Some("enabled") {
        out.push(format!(
            "{} takes only adaptive thinking, not a manual budget",
            spec.id
        ));
    }
    if thinking == Some("enabled") {
        let budget = body["thinking"]["budget_tokens"].as_u64().unwrap_or(0);
        let max = body["max_tokens"].as_u64().unwrap_or(0);
        if budget < 1024 {
            out.push(format!(
                "thinking.budget_tokens {budget} is below the minimum of 1024"
            ));
        }
        if budget >= max {
            out.push(format!(
                "thinking.budget_tokens {budget} must be less than max_tokens {max}"
            ));
        }
    }
    if body.get("temperature").is_some() {
        if spec.temperature == Temperature::Rejected {
            out.push(format!("`temperature` is deprecated for {}", spec.id));
        }
        if matches!(thinking, Some("enabled") | Some("adaptive")) {
            out.push("`temperature` may not be set together with thinking".into());
        }
    }
    for (m, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        blank_text_blocks(&message["content"], &format!("messages[{m}]"), out);
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if let (Some(w), Some(h)) = (
            tool["display_width_px"].as_u64(),
            tool["display_height_px"].as_u64(),
        ) {
            image_within(spec, w, h, "the computer tool's display", out);
        }
    }
}

/// Anthropic refuses text blocks that are empty or white space only.
fn blank_text_blocks(content: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    for (b, block) in content.as_array().into_iter().flatten().enumerate() {
        if block["type"] == "text" && block["text"].as_str().is_some_and(|t| t.trim().is_empty()) {
            out.push(format!(
                "{path}.content[{b}]: text content blocks must be non-empty"
            ));
        }
        if block["type"] == "tool_result" {
            blank_text_blocks(&block["content"], &format!("{path}.content[{b}]"), out);
        }
    }
}

fn image_within(spec: &ModelSpec, w: u64, h: u64, what: &str, out: &mut Vec<String>) {
    let limits = spec.images;
    if w.max(h) > limits.long_edge as u64 || w * h > limits.pixels {
        out.push(format!(
            "{what} is {w}x{h}, over {}'s limits ({} px edge, {} pixels): the API would \
             shrink it and the model's coordinates would drift",
            spec.id, limits.long_edge, limits.pixels
        ));
    }
}

fn openai_rules(spec: &ModelSpec, body: &serde_json::Value, out: &mut Vec<String>) {
    let effort = body["reasoning"]["effort"].as_str();
    if body.get("temperature").is_some()
        && spec.thinking == ThinkingStyle::ReasoningEffort
        && effort != Some("none")
    {
        out.push(format!(
            "`temperature` is only accepted with reasoning effort `none` on {}",
            spec.id
        ));
    }
    if spec.tools == ToolFamily::OpenAiComputerPreview
        && let Some(summary) = body["reasoning"]["summary"].as_str()
        && summary != "concise"
    {
        out.push(format!(
            "{} supports reasoning.summary \"concise\" only, not {summary:?}",
            spec.id
        ));
    }
    if body["store"] == false {
        for (i, item) in body["input"].as_array().into_iter().flatten().enumerate() {
            // Stateless requests cannot refer to stored items.
            if item["type"] == "item_reference"
                || (item["type"] == "reasoning" && !item["encrypted_content"].is_string())
            {
                out.push(format!(
                    "input[{i}] ({}) refers to a stored item, but items are not persisted \
                     when `store` is false: the API answers 'Item not found'",
                    item["type"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if let (Some(w), Some(h)) = (
            tool["display_width"].as_u64(),
            tool["display_height"].as_u64(),
        ) {
            image_within(spec, w, h, "the computer tool's display", out);
        }
    }
}

fn gemini_rules(body: &serde_json::Value, out: &mut Vec<String>) {
    let thinking = &body["generationConfig"]["thinkingConfig"];
    if thinking.get("thinkingLevel").is_some() && thinking.get("thinkingBudget").is_some() {
        out.push("thinkingLevel and thinkingBudget may not be set together".into());
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        for function in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let name = function["name"].as_str().unwrap_or("?");
            gemini_schema_rules(&function["parameters"], name, out);
        }
    }
}

/// The Developer API refuses `additionalProperties` and OBJECT schemas
/// without properties in function parameters.
fn gemini_schema_rules(schema: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    if map.contains_key("additionalProperties") {
        out.push(format!(
            "{at}: `additionalProperties` is not supported by the Gemini API"
        ));
    }
    let is_object = map
        .get("type")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|t| t.eq_ignore_ascii_case("object"));
    let props = map.get("properties").and_then(serde_json::Value::as_object);
    if is_object && props.is_none_or(|p| p.is_empty()) {
        out.push(format!(
            "{at}: an OBJECT schema needs non-empty `properties`"
        ));
    }
    for (key, sub) in props.into_iter().flatten() {
        gemini_schema_rules(sub, &format!("{at}.{key}"), out);
    }
    if let Some(items) = map.get("items") {
        gemini_schema_rules(items, &format!("{at}[]"), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(provider: Provider, model: &str) -> &'static str {
        spec(provider, model).id
    }

    #[test]
    fn ids_find_their_family_and_newer_ids_the_newest_rules() {
        use Provider::*;
        for (provider, model, expected) in [
            (Anthropic, "claude-opus-4-7", "claude-opus-4-7"),
            (Anthropic, "claude-opus-4-8", "claude-opus-4-7"),
            (Anthropic, "claude-opus-5-5", "claude-opus-5"),
            (Anthropic, "claude-opus-4-5-20251101", "claude-opus-4-5"),
            (Anthropic, "claude-opus-4-1-20250805", "claude-opus-4"),
            (Anthropic, "claude-sonnet-4-5-20250929", "claude-sonnet-4"),
            (Anthropic, "claude-sonnet-5-5", "claude-sonnet-5"),
            (Anthropic, "claude-3-7-sonnet-20250219", "claude-3-7-sonnet"),
            (Anthropic, "claude-haiku-4-5", "claude-haiku-4-5"),
            // An unknown family is matched by version (ties: the later row).
            (Anthropic, "claude-fable-5", "claude-opus-5"),
            (OpenAi, "gpt-5.4", "gpt-5.4"),
            (OpenAi, "gpt-5.5", "gpt-5.4"),
            (OpenAi, "gpt-5.1", "gpt-5"),
            (OpenAi, "gpt-5.4-mini", "gpt-5-mini"),
            (
                OpenAi,
                "computer-use-preview-2025-03-11",
                "computer-use-preview",
            ),
            (
                Google,
                "gemini-2.5-computer-use-preview-10-2025",
                "gemini-2.5-computer-use-preview-10-2025",
            ),
            (Google, "gemini-3-flash-preview", "gemini-3-flash-preview"),
            (Google, "gemini-3.5-flash", "gemini-3.5-flash"),
            (Google, "gemini-4-flash", "gemini-3.5-flash"),
            (Compatible, "qwen2.5-vl:7b", "compatible"),
        ] {
            assert_eq!(id(provider, model), expected, "{model}");
        }
    }

    #[test]
    fn the_newest_claude_models_take_adaptive_thinking_and_no_temperature() {
        for model in ["claude-opus-4-7", "claude-opus-5", "claude-sonnet-5-5"] {
            let s = spec(Provider::Anthropic, model);
            assert_eq!(s.thinking, ThinkingStyle::Adaptive, "{model}");
            assert_eq!(s.temperature, Temperature::Rejected, "{model}");
        }
        let old = spec(Provider::Anthropic, "claude-sonnet-4-5");
        assert_eq!(old.thinking, ThinkingStyle::Budget { min: 1024 });
    }

    #[test]
    fn one_price_table_for_everyone() {
        let usage = lumen_core::TokenUsage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            ..Default::default()
        };
        assert_eq!(cost("openai/gpt-5", &usage), Some(11.25));
        assert_eq!(cost("gpt-5", &usage), Some(11.25));
        assert_eq!(cost("qwen2.5-vl:7b", &usage), None);
        assert!(table().contains("| `claude-opus-4-7` |"));
    }

    #[test]
    fn docs_show_the_registry_as_it_is() {
        let docs = include_str!("../../../docs/models.md");
        assert!(
            docs.contains(&table()),
            "docs/models.md's registry table is stale: paste the output of `lumen models`"
        );
    }
}

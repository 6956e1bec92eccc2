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
//! [`lookup`] finds a model id's row: a row naming the id (a dated snapshot
//! such as `claude-haiku-4-5-20251001` is its model) is [`Known::Exact`].
//! Otherwise the id is parsed into a family and version (`claude-opus-4-9`
//! → `claude-opus` 4.9, `gpt-6.3-sol` → `gpt-sol` 6.3, `gemini-4-flash` →
//! `gemini-flash` 4.0) and runs with the rules of that family's callable row
//! with the highest version not above its own ([`Known::Family`]); an id of
//! an unknown family or tier (`gpt-6-pro`) runs with the provider's nearest
//! callable row by version ([`Known::Unknown`]). Neither is priced as the
//! row it borrows rules from: [`cost`] estimates only a row's own price,
//! and `lumen models MODEL`, `lumen run` and `result.json` say so.
//!
//! # Status
//! A row is current, deprecated (with a shutdown date) or retired. A run on
//! a retired model, or on a deprecated one past its date, is refused before
//! any request with the replacement named ([`retirement`]). The pinned
//! SDKs' model lists are committed as `crates/mock/sdk/schemas/models.json`
//! (`cargo xtask sdk-schemas`), and a test fails when a computer-use model
//! they list has no row, or a row they no longer list is not retired.

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

/// Whether a model can still be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Offered, with no announced end.
    Current,
    /// Offered until `shutdown` (ISO date), then retired.
    Deprecated {
        /// The announced shutdown date, `YYYY-MM-DD`.
        shutdown: &'static str,
        /// The model the provider recommends instead (a registry id).
        replacement: &'static str,
        /// Where the date comes from.
        source: &'static str,
    },
    /// Shut down: a run on it is refused before any request is sent.
    Retired {
        /// The shutdown date when one was published, `YYYY-MM-DD`.
        since: Option<&'static str>,
        /// The model the provider recommends instead (a registry id).
        replacement: &'static str,
        /// Where the retirement is recorded.
        source: &'static str,
    },
}

/// A retired model, as a run refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retirement {
    /// The retired id.
    pub model: &'static str,
    /// When, if published.
    pub since: Option<&'static str>,
    /// What to use instead.
    pub replacement: &'static str,
    /// Where the retirement is recorded.
    pub source: &'static str,
}

impl fmt::Display for Retirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} was retired", self.model)?;
        if let Some(since) = self.since {
            write!(f, " on {since}")?;
        }
        write!(f, " ({}); use {} instead", self.source, self.replacement)
    }
}

/// Where a row's model is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// In the pinned SDK's model list (`crates/mock/sdk/schemas/models.json`);
    /// a test fails when the SDK drops it and the row is not retired.
    Sdk,
    /// Not in the SDK's list (Google's SDK has none of its own): named by
    /// this provider document or notice.
    Docs(&'static str),
}

/// A figure of a row that could not be confirmed offline; `lumen models`
/// marks it, and an unconfirmed price is never used to estimate a cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// List prices (the row has none: cost is not estimated).
    Price,
    /// The context window (the row's is the family's smallest, so
    /// compaction starts early rather than late).
    Context,
    /// The image limits (the row's are the provider's smallest, which the
    /// provider never shrinks).
    Images,
    /// The tool protocol (the row's is the family's newest).
    Tools,
}

impl Figure {
    /// The figure's name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Figure::Price => "price",
            Figure::Context => "context",
            Figure::Images => "images",
            Figure::Tools => "tools",
        }
    }
}

/// What one model needs. A row also gives the rules for ids of its family
/// it does not name (see [`lookup`]).
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
    /// List prices, when published and confirmed.
    pub price: Option<Price>,
    /// Whether it can still be called.
    pub status: Status,
    /// Where the model is named.
    pub listed: Listed,
    /// Figures not confirmed offline.
    pub unconfirmed: &'static [Figure],
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

    /// The retirement in force on `today` (`YYYY-MM-DD`): a retired row, or
    /// a deprecated one whose shutdown date has come.
    pub fn retired_on(&self, today: &str) -> Option<Retirement> {
        match self.status {
            Status::Current => None,
            Status::Deprecated {
                shutdown,
                replacement,
                source,
            } => (shutdown <= today).then_some(Retirement {
                model: self.id,
                since: Some(shutdown),
                replacement,
                source,
            }),
            Status::Retired {
                since,
                replacement,
                source,
            } => Some(Retirement {
                model: self.id,
                since,
                replacement,
                source,
            }),
        }
    }

    /// Whether `figure` could not be confirmed offline.
    pub fn is_unconfirmed(&self, figure: Figure) -> bool {
        self.unconfirmed.contains(&figure)
    }

    const fn priced(mut self, input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        self.price = Some(Price {
            input,
            output,
            cache_read,
            cache_write,
        });
        self
    }

    const fn unconfirmed(mut self, figures: &'static [Figure]) -> Self {
        self.unconfirmed = figures;
        self
    }

    const fn deprecated(
        mut self,
        shutdown: &'static str,
        replacement: &'static str,
        source: &'static str,
    ) -> Self {
        self.status = Status::Deprecated {
            shutdown,
            replacement,
            source,
        };
        self
    }

    const fn retired(
        mut self,
        since: Option<&'static str>,
        replacement: &'static str,
        source: &'static str,
    ) -> Self {
        self.status = Status::Retired {
            since,
            replacement,
            source,
        };
        self
    }

    const fn listed(mut self, by: &'static str) -> Self {
        self.listed = Listed::Docs(by);
        self
    }
}

/// What every row starts from; each provider's helper sets the rest.
const BASE: ModelSpec = ModelSpec {
    id: "",
    provider: Provider::Compatible,
    family: "",
    version: (0, 0),
    tools: ToolFamily::LumenFunctions,
    betas: &[],
    thinking: ThinkingStyle::None,
    temperature: Temperature::Allowed,
    images: ImageLimits {
        long_edge: 0,
        pixels: 0,
    },
    context_window: 0,
    max_output: 0,
    price: None,
    status: Status::Current,
    listed: Listed::Sdk,
    unconfirmed: &[],
};

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

/// Anthropic's retirement dates in the pinned SDK.
const ANTHROPIC_EOL: &str = "anthropic 2.15.0 _data/deprecated_models.py";
/// OpenAI's shutdown dates in the pinned SDK's model literals.
const OPENAI_EOL: &str = "openai 3.57.0 chat_model.py, developers.openai.com/api/docs/deprecations";
/// Third-party mirrors of the providers' deprecation pages, as gathered in
/// late 2026 (the date is not in an SDK).
const PUBLIC_NOTICE: &str = "public deprecation notices, late 2026";
/// Claude 5.x: a 1M-token context window, as the provider documents.
const CLAUDE_5_CONTEXT: u64 = 1_000_000;
/// Figures of a new model copied from its family: not confirmed offline.
const NEW: &[Figure] = &[Figure::Price, Figure::Images];
/// A new model whose price and context window are not confirmed offline.
const UNSIZED: &[Figure] = &[Figure::Price, Figure::Context];

const fn claude(
    id: &'static str,
    family: &'static str,
    version: (u32, u32),
    tools: ToolFamily,
    thinking: ThinkingStyle,
    images: ImageLimits,
) -> ModelSpec {
    let context = if version.0 >= 5 {
        CLAUDE_5_CONTEXT
    } else {
        200_000
    };
    ModelSpec {
        id,
        provider: Provider::Anthropic,
        family,
        version,
        tools,
        thinking,
        temperature: Temperature::Rejected,
        images,
        context_window: context,
        max_output: 8192,
        ..BASE
    }
}

/// A GPT model on the GA `computer` tool with reasoning effort.
const fn gpt(
    id: &'static str,
    family: &'static str,
    version: (u32, u32),
    context: u64,
) -> ModelSpec {
    ModelSpec {
        id,
        provider: Provider::OpenAi,
        family,
        version,
        tools: ToolFamily::OpenAiComputer,
        thinking: ThinkingStyle::ReasoningEffort,
        temperature: Temperature::WithoutReasoning,
        images: OPENAI_ORIGINAL,
        context_window: context,
        max_output: 16_384,
        ..BASE
    }
}

const fn gemini(
    id: &'static str,
    family: &'static str,
    version: (u32, u32),
    tools: ToolFamily,
    thinking: ThinkingStyle,
    temperature: Temperature,
    context: u64,
) -> ModelSpec {
    ModelSpec {
        id,
        provider: Provider::Google,
        family,
        version,
        tools,
        thinking,
        temperature,
        images: GEMINI_IMAGES,
        context_window: context,
        max_output: 8192,
        ..BASE
    }
}

const G3: ThinkingStyle = ThinkingStyle::GeminiLevel;
const G3_TEMPERATURE: Temperature = Temperature::Fixed(1.0);
const GEMINI_CONTEXT: u64 = 1_048_576;

/// Every model Lumen has rules for, grouped by provider, oldest first
/// within a family. docs/models.md names each field's source.
pub static MODELS: &[ModelSpec] = &[
    // ----- Anthropic ------------------------------------------------------
    // No Claude row takes a temperature: Opus 4.7 and later answer 400, and
    // the SDK's request types (anthropic 2.15.0) no longer have the field
    // at all, for any model.
    claude(
        "claude-3-7-sonnet",
        "claude-sonnet",
        (3, 7),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
    )
    .priced(3.0, 15.0, 0.3, 3.75)
    .retired(
        None,
        "claude-sonnet-4-6",
        "absent from anthropic 2.15.0 model_param.py",
    ),
    claude(
        "claude-sonnet-4",
        "claude-sonnet",
        (4, 0),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
    )
    .priced(3.0, 15.0, 0.3, 3.75)
    .retired(Some("2026-06-15"), "claude-sonnet-4-6", PUBLIC_NOTICE),
    claude(
        "claude-sonnet-4-5",
        "claude-sonnet",
        (4, 5),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
    )
    .priced(3.0, 15.0, 0.3, 3.75)
    .retired(
        None,
        "claude-sonnet-4-6",
        "absent from anthropic 2.15.0 model_param.py",
    ),
    claude(
        "claude-sonnet-4-6",
        "claude-sonnet",
        (4, 6),
        V20251124,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .priced(3.0, 15.0, 0.3, 3.75),
    claude(
        "claude-sonnet-5",
        "claude-sonnet",
        (5, 0),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .priced(3.0, 15.0, 0.3, 3.75),
    claude(
        "claude-sonnet-5-5",
        "claude-sonnet",
        (5, 5),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    claude(
        "claude-opus-4",
        "claude-opus",
        (4, 0),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
    )
    .priced(15.0, 75.0, 1.5, 18.75)
    .retired(Some("2026-06-15"), "claude-opus-4-7", PUBLIC_NOTICE),
    claude(
        "claude-opus-4-5",
        "claude-opus",
        (4, 5),
        V20251124,
        BUDGET,
        CLAUDE_IMAGES,
    )
    .priced(5.0, 25.0, 0.5, 6.25)
    .deprecated("2027-01-22", "claude-opus-4-7", ANTHROPIC_EOL),
    claude(
        "claude-opus-4-6",
        "claude-opus",
        (4, 6),
        V20251124,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .priced(5.0, 25.0, 0.5, 6.25),
    claude(
        "claude-opus-4-7",
        "claude-opus",
        (4, 7),
        V20251124,
        ThinkingStyle::Adaptive,
        CLAUDE_LARGE_IMAGES,
    )
    .priced(5.0, 25.0, 0.5, 6.25),
    claude(
        "claude-opus-4-8",
        "claude-opus",
        (4, 8),
        V20251124,
        ThinkingStyle::Adaptive,
        CLAUDE_LARGE_IMAGES,
    )
    .unconfirmed(&[Figure::Price]),
    claude(
        "claude-opus-5",
        "claude-opus",
        (5, 0),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_LARGE_IMAGES,
    )
    .priced(5.0, 25.0, 0.5, 6.25),
    claude(
        "claude-opus-5-5",
        "claude-opus",
        (5, 5),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    claude(
        "claude-haiku-4-5",
        "claude-haiku",
        (4, 5),
        V20250124,
        BUDGET,
        CLAUDE_IMAGES,
    )
    .priced(1.0, 5.0, 0.1, 1.25),
    claude(
        "claude-haiku-5-5",
        "claude-haiku",
        (5, 5),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .priced(1.0, 5.0, 0.1, 1.25),
    claude(
        "claude-fable-5",
        "claude-fable",
        (5, 0),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    claude(
        "claude-fable-5-1",
        "claude-fable",
        (5, 1),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    claude(
        "claude-fable-5-2",
        "claude-fable",
        (5, 2),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    claude(
        "claude-mythos-preview",
        "claude-mythos-preview",
        (0, 0),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW)
    .deprecated("2026-06-30", "claude-mythos-5", ANTHROPIC_EOL),
    claude(
        "claude-mythos-5",
        "claude-mythos",
        (5, 0),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    claude(
        "claude-mythos-5-1",
        "claude-mythos",
        (5, 1),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    claude(
        "claude-mythos-5-2",
        "claude-mythos",
        (5, 2),
        TOOLSET,
        ThinkingStyle::Adaptive,
        CLAUDE_IMAGES,
    )
    .unconfirmed(NEW),
    // ----- OpenAI ---------------------------------------------------------
    ModelSpec {
        id: "computer-use-preview",
        provider: Provider::OpenAi,
        family: "computer-use-preview",
        version: (0, 0),
        tools: ToolFamily::OpenAiComputerPreview,
        thinking: ThinkingStyle::ReasoningEffort,
        temperature: Temperature::WithoutReasoning,
        images: OPENAI_HIGH,
        context_window: 8_192,
        max_output: 4096,
        ..BASE
    }
    .priced(3.0, 12.0, 3.0, 3.0)
    .retired(Some("2026-07-23"), "gpt-5.4-mini", PUBLIC_NOTICE),
    gpt("gpt-5", "gpt", (5, 0), 400_000)
        .priced(1.25, 10.0, 0.125, 1.25)
        .deprecated("2026-12-11", "gpt-6.1-sol", OPENAI_EOL),
    gpt("gpt-5.1", "gpt", (5, 1), 400_000)
        .unconfirmed(UNSIZED)
        .deprecated("2027-04-01", "gpt-6.1-sol", OPENAI_EOL),
    gpt("gpt-5.2", "gpt", (5, 2), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-5.4", "gpt", (5, 4), 1_000_000).priced(2.5, 15.0, 0.25, 2.5),
    gpt("gpt-5.5", "gpt", (5, 5), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-5-mini", "gpt-mini", (5, 0), 400_000)
        .priced(0.25, 2.0, 0.025, 0.25)
        .deprecated("2026-12-11", "gpt-6.1-terra", OPENAI_EOL),
    gpt("gpt-5.1-mini", "gpt-mini", (5, 1), 400_000).retired(
        None,
        "gpt-5.4-mini",
        "openai 3.57.0 chat_model.py: not a supported model ID",
    ),
    gpt("gpt-5.4-mini", "gpt-mini", (5, 4), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-5-nano", "gpt-nano", (5, 0), 400_000)
        .unconfirmed(&[Figure::Price])
        .deprecated("2026-12-11", "gpt-6-luna", OPENAI_EOL),
    gpt("gpt-5.4-nano", "gpt-nano", (5, 4), 400_000)
        .unconfirmed(UNSIZED)
        .deprecated("2027-04-01", "gpt-6-luna", OPENAI_EOL),
    gpt("gpt-5.6-sol", "gpt-sol", (5, 6), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-6-sol", "gpt-sol", (6, 0), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-6.1-sol", "gpt-sol", (6, 1), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-6.2-sol", "gpt-sol", (6, 2), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-5.6-terra", "gpt-terra", (5, 6), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-6.1-terra", "gpt-terra", (6, 1), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-5.6-luna", "gpt-luna", (5, 6), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-6-luna", "gpt-luna", (6, 0), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-6-astra", "gpt-astra", (6, 0), 400_000).unconfirmed(UNSIZED),
    gpt("gpt-6.2-astra", "gpt-astra", (6, 2), 400_000).unconfirmed(UNSIZED),
    // ----- Google ---------------------------------------------------------
    gemini(
        "gemini-2.5-computer-use-preview-10-2025",
        "gemini-computer-use",
        (2, 5),
        ToolFamily::GeminiLegacy,
        ThinkingStyle::GeminiBudget,
        Temperature::Allowed,
        131_072,
    )
    .priced(1.25, 10.0, 0.31, 1.25)
    .listed("Gemini API computer-use docs"),
    gemini(
        "gemini-2.5-flash",
        "gemini-flash",
        (2, 5),
        ToolFamily::GeminiLegacy,
        ThinkingStyle::GeminiBudget,
        Temperature::Allowed,
        GEMINI_CONTEXT,
    )
    .priced(0.3, 2.5, 0.03, 0.3)
    .retired(None, "gemini-3.6-flash", PUBLIC_NOTICE),
    gemini(
        "gemini-2.5-pro",
        "gemini-pro",
        (2, 5),
        ToolFamily::GeminiLegacy,
        ThinkingStyle::GeminiBudget,
        Temperature::Allowed,
        GEMINI_CONTEXT,
    )
    .unconfirmed(&[Figure::Price])
    .retired(None, "gemini-3.6-flash", PUBLIC_NOTICE),
    gemini(
        "gemini-3-flash-preview",
        "gemini-flash",
        (3, 0),
        ToolFamily::GeminiLegacy,
        G3,
        G3_TEMPERATURE,
        GEMINI_CONTEXT,
    )
    .priced(0.5, 3.0, 0.05, 0.5),
    gemini(
        "gemini-3.5-flash",
        "gemini-flash",
        (3, 5),
        ToolFamily::GeminiExtended,
        G3,
        G3_TEMPERATURE,
        GEMINI_CONTEXT,
    )
    .priced(0.5, 3.0, 0.05, 0.5),
    gemini(
        "gemini-3.6-flash",
        "gemini-flash",
        (3, 6),
        ToolFamily::GeminiExtended,
        G3,
        G3_TEMPERATURE,
        GEMINI_CONTEXT,
    )
    .unconfirmed(UNSIZED)
    .listed("public notices: GA, computer use built in"),
    gemini(
        "gemini-3.8-flash",
        "gemini-flash",
        (3, 8),
        ToolFamily::GeminiExtended,
        G3,
        G3_TEMPERATURE,
        GEMINI_CONTEXT,
    )
    .unconfirmed(&[Figure::Price, Figure::Context, Figure::Tools]),
    gemini(
        "gemini-3-pro-preview",
        "gemini-pro",
        (3, 0),
        ToolFamily::GeminiLegacy,
        G3,
        G3_TEMPERATURE,
        GEMINI_CONTEXT,
    )
    .unconfirmed(&[Figure::Price]),
    gemini(
        "gemini-3.1-pro-preview",
        "gemini-pro",
        (3, 1),
        ToolFamily::GeminiLegacy,
        G3,
        G3_TEMPERATURE,
        GEMINI_CONTEXT,
    )
    .priced(2.0, 12.0, 0.2, 2.0),
    // ----- OpenAI-compatible servers --------------------------------------
    ModelSpec {
        id: "compatible",
        provider: Provider::Compatible,
        family: "compatible",
        version: (0, 0),
        tools: ToolFamily::LumenFunctions,
        thinking: ThinkingStyle::None,
        temperature: Temperature::Allowed,
        images: ImageLimits {
            long_edge: 1344,
            pixels: 1344 * 1344,
        },
        context_window: 32_768,
        max_output: 4096,
        ..BASE
    }
    .listed("any server speaking Chat Completions"),
];

/// How a model id was found in the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// A row names it (a dated snapshot of a row's id counts).
    Exact,
    /// A version of a known family no row names: the rules of the
    /// family's nearest row, and no cost estimate.
    Family,
    /// An unknown family or tier: the provider's nearest row by version,
    /// and no cost estimate.
    Unknown,
    /// Any model on an OpenAI-compatible server: the one generic row.
    Compatible,
}

impl Known {
    /// The word `lumen models` and `result.json` use.
    pub fn name(self) -> &'static str {
        match self {
            Known::Exact => "known",
            Known::Family => "family",
            Known::Unknown => "unknown",
            Known::Compatible => "compatible",
        }
    }
}

/// A model id looked up in the registry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lookup {
    /// The rules it runs with.
    pub spec: &'static ModelSpec,
    /// How they were found.
    pub known: Known,
}

impl Lookup {
    /// The list prices to estimate its cost with: only a row's own,
    /// confirmed ones.
    pub fn price(&self) -> Option<Price> {
        match self.known {
            Known::Exact => self.spec.price,
            _ => None,
        }
    }

    /// A sentence for the user when the id is not a row of its own; `None`
    /// for a known model.
    pub fn warning(&self, model: &str) -> Option<String> {
        match self.known {
            Known::Exact | Known::Compatible => None,
            Known::Family => Some(format!(
                "{model} is not in Lumen's model registry: it runs with the rules of {} (its \
                 family's nearest model), and its cost is not estimated",
                self.spec.id
            )),
            Known::Unknown => Some(format!(
                "{model} is of a family Lumen's model registry does not know: it runs with the \
                 rules of {} (the provider's nearest model), and its cost is not estimated",
                self.spec.id
            )),
        }
    }
}

/// `claude-haiku-4-5-20251001` → `claude-haiku-4-5`; `gpt-5.4-mini-2026-03-17`
/// → `gpt-5.4-mini`: a dated snapshot is its model.
fn undated(id: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((head, tail)) = id.rsplit_once('-')
        && tail.len() == 8
        && digits(tail)
    {
        return head;
    }
    let parts: Vec<&str> = id.rsplitn(4, '-').collect();
    if let [day, month, year, head] = parts.as_slice()
        && year.len() == 4
        && month.len() == 2
        && day.len() == 2
        && digits(year)
        && digits(month)
        && digits(day)
    {
        return head;
    }
    id
}

/// Looks `model` up on `provider` (see the module docs). Never fails: an
/// id nothing names gets the rules of the provider's nearest current row.
pub fn lookup(provider: Provider, model: &str) -> Lookup {
    let model = model.rsplit('/').next().unwrap_or(model);
    if provider == Provider::Compatible {
        return Lookup {
            spec: &MODELS[MODELS.len() - 1],
            known: Known::Compatible,
        };
    }
    let of_provider = || MODELS.iter().filter(|m| m.provider == provider);
    let id = undated(model);
    if let Some(exact) = of_provider().find(|m| m.id == id) {
        return Lookup {
            spec: exact,
            known: Known::Exact,
        };
    }
    // Rules for an id no row names come from rows that can still be called.
    let callable = || of_provider().filter(|m| !matches!(m.status, Status::Retired { .. }));
    // An id of no known scheme is matched as "newer than everything".
    let (family, version) = parse(provider, id).unwrap_or(("", (u32::MAX, u32::MAX)));
    let same_family: Vec<&'static ModelSpec> = callable().filter(|m| m.family == family).collect();
    let known = if same_family.is_empty() {
        Known::Unknown
    } else {
        Known::Family
    };
    let candidates: Vec<&'static ModelSpec> = if same_family.is_empty() {
        callable().collect()
    } else {
        same_family
    };
    let best = candidates
        .iter()
        .filter(|m| m.version <= version)
        .max_by_key(|m| m.version)
        .or_else(|| candidates.iter().min_by_key(|m| m.version))
        .copied();
    // Every provider has a callable row, so `best` is always found; the
    // compatible row is the last resort all the same.
    Lookup {
        spec: best.unwrap_or(&MODELS[MODELS.len() - 1]),
        known,
    }
}

/// The rules for `model` on `provider`: [`lookup`]'s row.
pub fn spec(provider: Provider, model: &str) -> &'static ModelSpec {
    lookup(provider, model).spec
}

/// The rules for a `provider/model` string as `create_adapter` takes it.
pub fn spec_for(model: &str) -> &'static ModelSpec {
    let (provider, id) = split_model(model);
    spec(provider, id)
}

/// The retirement in force today for a `provider/model` string, when a row
/// names it; a run on it is refused before any request is sent.
pub fn retirement(model: &str) -> Option<Retirement> {
    retirement_on(model, &today())
}

/// [`retirement`] on a given day (`YYYY-MM-DD`).
pub fn retirement_on(model: &str, today: &str) -> Option<Retirement> {
    let (provider, id) = split_model(model);
    let found = lookup(provider, id);
    match found.known {
        Known::Exact => found.spec.retired_on(today),
        _ => None,
    }
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    lumen_core::Date::today_utc().iso()
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
    let (provider, id) = named(model);
    if provider == Provider::Compatible {
        return None;
    }
    lookup(provider, id).price().map(|p| p.cost(usage))
}

/// Why [`cost`] estimates nothing for a `provider/model` string, when the
/// registry knows why: an id no row names, or a row whose price is
/// unconfirmed. `None` for priced models and local servers.
pub fn cost_note(model: &str) -> Option<String> {
    let (provider, id) = named(model);
    let found = lookup(provider, id);
    match found.known {
        Known::Compatible => None,
        Known::Exact if found.spec.price.is_some() => None,
        Known::Exact => Some(format!(
            "{id}'s list price is not confirmed in Lumen's model registry, so its cost is not \
             estimated"
        )),
        Known::Family | Known::Unknown => found.warning(id),
    }
}

/// [`split_model`], with a bare id (as traces may hold) read by its name.
fn named(model: &str) -> (Provider, &str) {
    match split_model(model) {
        (Provider::Compatible, id) if !model.starts_with("compatible/") => (infer_provider(id), id),
        found => found,
    }
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
                "fable" => "claude-fable",
                "mythos" => "claude-mythos",
                _ => "",
            };
            Some((family, (major, minor)))
        }
        Provider::OpenAi => {
            if model.starts_with("computer-use-preview") {
                return Some(("computer-use-preview", (0, 0)));
            }
            let rest = model.strip_prefix("gpt-")?;
            let (version, tier) = rest
                .split_once('-')
                .map_or((rest, None), |(v, t)| (v, Some(t)));
            let version = dotted(version)?;
            // A tier the registry does not know (`-pro`, `-codex`…) is an
            // unknown family, never silently the base model.
            let family = match tier {
                None => "gpt",
                Some("mini") => "gpt-mini",
                Some("nano") => "gpt-nano",
                Some("sol") => "gpt-sol",
                Some("terra") => "gpt-terra",
                Some("luna") => "gpt-luna",
                Some("astra") => "gpt-astra",
                Some(_) => "",
            };
            Some((family, version))
        }
        Provider::Google => {
            let rest = model.strip_prefix("gemini-")?;
            let mut parts = rest.split('-');
            let version = dotted(parts.next()?)?;
            let family = if rest.contains("computer-use") {
                "gemini-computer-use"
            } else if rest.contains("flash-lite") || rest.contains("live") {
                ""
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

/// The registry as a Markdown table (for `lumen models` and docs). A
/// figure not confirmed offline is marked `?`; a row's status names its
/// shutdown date and replacement.
pub fn table() -> String {
    let mut out = String::from(
        "| model (and newer of its family) | provider | tools | thinking | temperature | image edge / pixels | context | output | $/M in / out | status |\n\
         |---|---|---|---|---|---|---:|---:|---|---|\n",
    );
    for m in MODELS {
        let mark = |figure: Figure| if m.is_unconfirmed(figure) { " ?" } else { "" };
        let price = m
            .price
            .map(|p| format!("{} / {}", p.input, p.output))
            .unwrap_or_else(|| {
                if m.is_unconfirmed(Figure::Price) {
                    "?"
                } else {
                    "—"
                }
                .into()
            });
        out.push_str(&format!(
            "| `{}` | {} | {}{} | {} | {} | {} / {:.2} MP{} | {}{} | {} | {} | {} |\n",
            m.id,
            m.provider.name(),
            m.tools.name(),
            mark(Figure::Tools),
            m.thinking,
            m.temperature,
            m.images.long_edge,
            m.images.pixels as f64 / 1e6,
            mark(Figure::Images),
            m.context_window,
            mark(Figure::Context),
            m.max_output,
            price,
            status_cell(&m.status),
        ));
    }
    out
}

fn status_cell(status: &Status) -> String {
    match status {
        Status::Current => "current".into(),
        Status::Deprecated {
            shutdown,
            replacement,
            ..
        } => format!("shuts down {shutdown} → `{replacement}`"),
        Status::Retired {
            since, replacement, ..
        } => match since {
            Some(date) => format!("retired {date} → `{replacement}`"),
            None => format!("retired → `{replacement}`"),
        },
    }
}

/// What `lumen models MODEL` prints: the rules `model` runs with, how they
/// were found, which figures are unconfirmed, and its status today.
pub fn describe(model: &str) -> String {
    let (provider, id) = named(model);
    let found = lookup(provider, id);
    let m = found.spec;
    let mut out = format!("model: {}/{id}\n", provider.name());
    out.push_str(&format!("registry: {}", found.known.name()));
    match found.known {
        Known::Exact => out.push_str(&format!(" (row `{}`)\n", m.id)),
        Known::Compatible => out.push_str(" (any model on an OpenAI-compatible server)\n"),
        _ => out.push_str(&format!(
            "\nwarning: {}\n",
            found.warning(id).unwrap_or_default()
        )),
    }
    out.push_str(&format!("rules of: {}\n", m.id));
    out.push_str(&format!("tools: {}\n", m.tools.name()));
    out.push_str(&format!("thinking: {}\n", m.thinking));
    out.push_str(&format!("temperature: {}\n", m.temperature));
    out.push_str(&format!(
        "images: {} px edge, {:.2} MP\n",
        m.images.long_edge,
        m.images.pixels as f64 / 1e6
    ));
    out.push_str(&format!("context: {} tokens\n", m.context_window));
    out.push_str(&format!("output: {} tokens per call\n", m.max_output));
    match found.price() {
        Some(p) => out.push_str(&format!(
            "price: ${} in / ${} out per million tokens (list price, an estimate)\n",
            p.input, p.output
        )),
        None => out.push_str("price: not estimated\n"),
    }
    if found.known == Known::Exact && !m.unconfirmed.is_empty() {
        let names: Vec<&str> = m.unconfirmed.iter().map(|f| f.name()).collect();
        out.push_str(&format!(
            "unconfirmed: {} (not confirmed offline; see docs/models.md)\n",
            names.join(", ")
        ));
    }
    match m.listed {
        Listed::Sdk => out.push_str(&format!(
            "listed by: the {} SDK's model list\n",
            provider.name()
        )),
        Listed::Docs(by) => out.push_str(&format!("listed by: {by}\n")),
    }
    if found.known == Known::Exact {
        let status = match (m.retired_on(&today()), m.status) {
            (Some(r), _) => format!("retired: {r}"),
            (
                None,
                Status::Deprecated {
                    shutdown,
                    replacement,
                    source,
                },
            ) => {
                format!("deprecated: shuts down {shutdown} ({source}); move to {replacement}")
            }
            _ => "current".into(),
        };
        out.push_str(&format!("status: {status}\n"));
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

    fn found(provider: Provider, model: &str) -> (&'static str, Known) {
        let l = lookup(provider, model);
        (l.spec.id, l.known)
    }

    #[test]
    fn ids_find_their_row_family_or_nearest_rules() {
        use Known::*;
        use Provider::*;
        for (provider, model, expected, known) in [
            (Anthropic, "claude-opus-4-7", "claude-opus-4-7", Exact),
            (Anthropic, "claude-opus-4-8", "claude-opus-4-8", Exact),
            (Anthropic, "claude-opus-4-9", "claude-opus-4-8", Family),
            (Anthropic, "claude-opus-5-5", "claude-opus-5-5", Exact),
            (
                Anthropic,
                "claude-opus-4-5-20251101",
                "claude-opus-4-5",
                Exact,
            ),
            (
                Anthropic,
                "claude-haiku-4-5-20251001",
                "claude-haiku-4-5",
                Exact,
            ),
            // Rules never come from a retired row.
            (
                Anthropic,
                "claude-opus-4-1-20250805",
                "claude-opus-4-5",
                Family,
            ),
            (
                Anthropic,
                "claude-sonnet-4-5-20250929",
                "claude-sonnet-4-5",
                Exact,
            ),
            (
                Anthropic,
                "claude-3-7-sonnet-20250219",
                "claude-3-7-sonnet",
                Exact,
            ),
            (Anthropic, "claude-fable-5-2", "claude-fable-5-2", Exact),
            (Anthropic, "claude-mythos-6", "claude-mythos-5-2", Family),
            // An unknown family is matched by version among callable rows.
            (Anthropic, "claude-epic-5", "claude-mythos-5", Unknown),
            (OpenAi, "gpt-5.4", "gpt-5.4", Exact),
            (OpenAi, "gpt-5.5-2026-04-23", "gpt-5.5", Exact),
            (OpenAi, "gpt-6.1-sol", "gpt-6.1-sol", Exact),
            (OpenAi, "gpt-6.3-sol", "gpt-6.2-sol", Family),
            (OpenAi, "gpt-5.4-mini-2026-03-17", "gpt-5.4-mini", Exact),
            (OpenAi, "gpt-5.5-pro", "gpt-5.5", Unknown),
            (OpenAi, "gpt-6.2-astra-law", "gpt-6.2-astra", Unknown),
            (
                OpenAi,
                "computer-use-preview-2025-03-11",
                "computer-use-preview",
                Exact,
            ),
            (
                Google,
                "gemini-2.5-computer-use-preview-10-2025",
                "gemini-2.5-computer-use-preview-10-2025",
                Exact,
            ),
            (
                Google,
                "gemini-3-flash-preview",
                "gemini-3-flash-preview",
                Exact,
            ),
            (Google, "gemini-3.6-flash", "gemini-3.6-flash", Exact),
            (Google, "gemini-4-flash", "gemini-3.8-flash", Family),
            (
                Provider::Compatible,
                "qwen2.5-vl:7b",
                "compatible",
                Known::Compatible,
            ),
        ] {
            assert_eq!(found(provider, model), (expected, known), "{model}");
        }
    }

    #[test]
    fn the_newest_claude_models_take_adaptive_thinking_and_no_temperature() {
        for model in [
            "claude-opus-4-7",
            "claude-opus-5",
            "claude-sonnet-5-5",
            "claude-fable-5",
        ] {
            let s = spec(Provider::Anthropic, model);
            assert_eq!(s.thinking, ThinkingStyle::Adaptive, "{model}");
            assert_eq!(s.temperature, Temperature::Rejected, "{model}");
        }
        let old = spec(Provider::Anthropic, "claude-sonnet-4-5");
        assert_eq!(old.thinking, ThinkingStyle::Budget { min: 1024 });
        // Claude 5 has the 1M context the provider documents.
        assert_eq!(
            spec(Provider::Anthropic, "claude-mythos-5-1").context_window,
            1_000_000
        );
    }

    #[test]
    fn only_a_rows_own_price_estimates_a_cost() {
        let usage = lumen_core::TokenUsage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            ..Default::default()
        };
        assert_eq!(cost("openai/gpt-5.4", &usage), Some(17.5));
        assert_eq!(cost("gpt-5.4", &usage), Some(17.5));
        assert_eq!(cost("qwen2.5-vl:7b", &usage), None);
        // Once priced as gpt-5.4; now unknown, so not estimated.
        assert_eq!(cost("openai/gpt-6.1-sol", &usage), None);
        assert_eq!(cost("openai/gpt-5.4-pro", &usage), None);
        assert_eq!(cost("anthropic/claude-opus-4-9", &usage), None);
        assert!(table().contains("| `claude-opus-4-7` |"));
    }

    #[test]
    fn unknown_ids_carry_a_warning_and_known_ones_none() {
        let unknown = lookup(Provider::OpenAi, "gpt-6-pro");
        let text = unknown.warning("gpt-6-pro").unwrap();
        assert!(
            text.contains("does not know") && text.contains("not estimated"),
            "{text}"
        );
        assert!(
            lookup(Provider::OpenAi, "gpt-5.4")
                .warning("gpt-5.4")
                .is_none()
        );
        let described = describe("openai/gpt-6-pro");
        assert!(described.contains("registry: unknown"), "{described}");
        assert!(described.contains("price: not estimated"), "{described}");
        let described = describe("anthropic/claude-opus-4-8");
        assert!(described.contains("unconfirmed: price"), "{described}");
    }

    #[test]
    fn retirement_follows_the_calendar_and_names_the_replacement() {
        assert_eq!(retirement_on("openai/gpt-5-mini", "2026-12-10"), None);
        let r = retirement_on("openai/gpt-5-mini", "2026-12-11").unwrap();
        assert_eq!(r.replacement, "gpt-6.1-terra");
        assert!(r.to_string().contains("retired on 2026-12-11"), "{r}");
        let r = retirement_on("anthropic/claude-sonnet-4-20250514", "2026-01-01").unwrap();
        assert_eq!(
            (r.model, r.replacement),
            ("claude-sonnet-4", "claude-sonnet-4-6")
        );
        assert!(retirement_on("openai/computer-use-preview", "2026-01-01").is_some());
        // An id no row names is never refused: nothing says it is retired.
        assert_eq!(retirement_on("openai/gpt-9", "2030-01-01"), None);
        // Every replacement is a row that outlives the one it replaces.
        for m in MODELS {
            if let Status::Deprecated { replacement, .. } | Status::Retired { replacement, .. } =
                m.status
            {
                let r = lookup(m.provider, replacement);
                assert_eq!(
                    r.known,
                    Known::Exact,
                    "{}'s replacement {replacement}",
                    m.id
                );
                assert!(
                    !matches!(r.spec.status, Status::Retired { .. }),
                    "{}'s replacement {replacement} is retired",
                    m.id
                );
            }
        }
    }

    #[test]
    fn dated_snapshots_are_their_model() {
        assert_eq!(undated("gpt-5.4"), "gpt-5.4");
        assert_eq!(undated("claude-sonnet-4-20250514"), "claude-sonnet-4");
        assert_eq!(
            undated("gemini-2.5-computer-use-preview-10-2025"),
            "gemini-2.5-computer-use-preview-10-2025"
        );
    }

    #[test]
    fn docs_show_the_registry_as_it_is() {
        let docs = include_str!("../../../docs/models.md");
        assert!(
            docs.contains(&table()),
            "docs/models.md's registry table is stale: paste the output of `lumen models`"
        );
    }

    /// The pinned SDKs' model lists (`cargo xtask sdk-schemas` writes them).
    const SDK_MODELS: &str = include_str!("../../mock/sdk/schemas/models.json");

    /// Whether an SDK id is of a family that drives a computer: the ones a
    /// Lumen user can pick. Chat-only, audio, search, codex, pro and
    /// research variants are not.
    fn computer_use_family(provider: Provider, id: &str) -> bool {
        match provider {
            Provider::Anthropic => {
                crate::anthropic::claude_version(id)
                    .is_some_and(|(_, major, minor)| (major, minor) >= (4, 5))
                    || id.starts_with("claude-mythos")
                    || id.starts_with("claude-fable")
            }
            Provider::OpenAi => {
                id.starts_with("computer-use-preview")
                    || parse(provider, id)
                        .is_some_and(|(family, (major, _))| !family.is_empty() && major >= 5)
            }
            Provider::Google => parse(provider, id)
                .is_some_and(|(family, (major, _))| !family.is_empty() && major >= 3),
            Provider::Compatible => false,
        }
    }

    #[test]
    fn the_registry_keeps_up_with_the_pinned_sdks() {
        let sdk: serde_json::Value = serde_json::from_str(SDK_MODELS).unwrap();
        let today = today();
        let mut problems = Vec::new();
        for (provider, key) in [
            (Provider::Anthropic, "anthropic"),
            (Provider::OpenAi, "openai"),
            (Provider::Google, "google"),
        ] {
            let listed: Vec<&str> = sdk[key]["models"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|m| m.as_str())
                .collect();
            assert!(listed.len() > 5, "{key}: the SDK lists too few models");
            for id in &listed {
                if computer_use_family(provider, id) && lookup(provider, id).known != Known::Exact {
                    problems.push(format!(
                        "{key}: the SDK lists {id}, the registry has no row"
                    ));
                }
            }
            for row in MODELS.iter().filter(|m| m.provider == provider) {
                let in_sdk = listed.iter().any(|id| undated(id) == row.id);
                if row.listed == Listed::Sdk && !in_sdk && row.retired_on(&today).is_none() {
                    problems.push(format!(
                        "{key}: {} is no longer in the SDK's list: mark it retired",
                        row.id
                    ));
                }
            }
            for (id, date) in sdk[key]["end_of_life"].as_object().unwrap() {
                let found = lookup(provider, id);
                if found.known != Known::Exact {
                    continue;
                }
                let recorded = match found.spec.status {
                    Status::Deprecated { shutdown, .. } => Some(shutdown),
                    Status::Retired { since, .. } => since,
                    Status::Current => None,
                };
                if recorded != date.as_str() {
                    problems.push(format!(
                        "{key}: the SDK says {id} shuts down {date}, the registry says {recorded:?}"
                    ));
                }
            }
        }
        assert!(
            problems.is_empty(),
            "the registry lags the pinned SDKs:\n{}",
            problems.join("\n")
        );
    }
}

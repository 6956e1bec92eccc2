//! What model calls cost in tokens: [`TokenUsage`], summed across calls.
//!
//! Its own module because both sides of the model boundary name it: the
//! adapters report it (`model`) and the history and run results keep it
//! (`history`, `run`), and neither of those should import the other for it.

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Tokens used by one or more model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Input tokens billed at the normal rate (excluding cache reads/writes).
    pub input_tokens: u64,
    /// Output tokens (including reasoning).
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl TokenUsage {
    /// All input tokens, cached or not.
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

impl Add for TokenUsage {
    type Output = TokenUsage;
    fn add(self, o: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens + o.input_tokens,
            output_tokens: self.output_tokens + o.output_tokens,
            cache_read_tokens: self.cache_read_tokens + o.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens + o.cache_write_tokens,
        }
    }
}

impl AddAssign for TokenUsage {
    fn add_assign(&mut self, o: TokenUsage) {
        *self = *self + o;
    }
}

impl TokenUsage {
    /// Every token, input (cached or not) and output: what a token budget
    /// counts.
    pub fn total(&self) -> u64 {
        self.total_input() + self.output_tokens
    }

    /// `self` minus `o`, field by field, never below zero.
    pub fn saturating_sub(self, o: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens.saturating_sub(o.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(o.output_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_sub(o.cache_read_tokens),
            cache_write_tokens: self.cache_write_tokens.saturating_sub(o.cache_write_tokens),
        }
    }

    /// Whether no token was used.
    pub fn is_zero(&self) -> bool {
        *self == TokenUsage::default()
    }
}

/// A run's usage by where it was spent. The sources add up to the run's
/// total ([`total`](Self::total), the same as `RunResult::usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageBreakdown {
    /// The main loop's model calls (with a confidence gate, the chosen
    /// candidate). A resumed run counts everything spent before it was
    /// saved here, since a snapshot keeps only the total.
    pub main: TokenUsage,
    /// Tier-2 compaction summaries.
    #[serde(default)]
    pub summaries: TokenUsage,
    /// The completion verifier.
    #[serde(default)]
    pub verifier: TokenUsage,
    /// The planner pass.
    #[serde(default)]
    pub planner: TokenUsage,
    /// The confidence gate's other candidates (beyond the chosen one).
    #[serde(default)]
    pub gate: TokenUsage,
    /// Delegated sub-tasks (child loops), everything they spent.
    #[serde(default)]
    pub children: TokenUsage,
}

impl UsageBreakdown {
    /// All sources together.
    pub fn total(&self) -> TokenUsage {
        self.main + self.summaries + self.verifier + self.planner + self.gate + self.children
    }
}

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

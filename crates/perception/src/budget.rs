//! A run's budgets beyond its steps: tokens, dollars and consecutive failed
//! actions ([`LoopConfig::max_tokens`], [`LoopConfig::max_cost_usd`],
//! [`LoopConfig::max_failures`]). The loop checks them before each step,
//! that is before the step's first model call (a summary, the gate's
//! samples or the main call); a budget reached ends the run with
//! `RunStatus::BudgetExceeded` and a result naming the budget and the
//! figures.
//!
//! Prices are not known here (the loop never depends on the model
//! registry): the caller gives a [`Pricing`], which the `lumen` facade
//! builds from `lumen_models::registry::cost`.

use std::fmt;
use std::sync::Arc;

use lumen_core::TokenUsage;

use crate::LoopConfig;

/// A function from tokens to dollars.
type CostFn = dyn Fn(&TokenUsage) -> Option<f64> + Send + Sync;

/// Turns tokens into an estimated cost in US dollars; `None` when the
/// price is not known.
#[derive(Clone)]
pub struct Pricing(Arc<CostFn>);

impl Pricing {
    /// A pricing that asks `cost`.
    pub fn new(cost: impl Fn(&TokenUsage) -> Option<f64> + Send + Sync + 'static) -> Self {
        Self(Arc::new(cost))
    }

    /// A flat price per million input and output tokens (cache reads and
    /// writes at the input price). Mostly for tests.
    pub fn per_million(input: f64, output: f64) -> Self {
        Self::new(move |u| {
            Some((u.total_input() as f64 * input + u.output_tokens as f64 * output) / 1_000_000.0)
        })
    }

    /// The estimated cost of `usage`.
    pub fn cost(&self, usage: &TokenUsage) -> Option<f64> {
        (self.0)(usage).filter(|c| c.is_finite() && *c >= 0.0)
    }
}

impl fmt::Debug for Pricing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pricing(..)")
    }
}

/// What a run has spent, as the budgets see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spent {
    /// Every token of the run so far, sub-tasks included.
    pub(crate) usage: TokenUsage,
    /// Its estimated cost, when priced.
    pub(crate) cost_usd: Option<f64>,
    /// Failed actions in a row, up to now.
    pub(crate) failures: u32,
}

/// The budget `spent` has reached, as the run's result text, or `None`.
/// A cost budget without a price cannot be checked and never stops a run
/// (the facade refuses to set one up).
pub(crate) fn exceeded(config: &LoopConfig, spent: &Spent) -> Option<String> {
    if let Some(max) = config.max_tokens
        && spent.usage.total() >= max
    {
        return Some(format!(
            "budget exceeded: the token budget of {max} tokens was reached ({} tokens used: \
             {} input, {} output)",
            spent.usage.total(),
            spent.usage.total_input(),
            spent.usage.output_tokens
        ));
    }
    if let (Some(max), Some(cost)) = (config.max_cost_usd, spent.cost_usd)
        && cost >= max
    {
        return Some(format!(
            "budget exceeded: the cost budget of ${max:.4} was reached (${cost:.4} spent on {} \
             tokens)",
            spent.usage.total()
        ));
    }
    if let Some(max) = config.max_failures
        && max > 0
        && spent.failures >= max
    {
        return Some(format!(
            "budget exceeded: {} actions failed in a row (max_failures {max})",
            spent.failures
        ));
    }
    None
}

/// The budgets a sub-task may spend: what is left of this run's.
pub(crate) fn for_child(config: &mut LoopConfig, spent: &Spent) {
    config.max_tokens = config
        .max_tokens
        .map(|max| max.saturating_sub(spent.usage.total()));
    if let (Some(max), Some(cost)) = (config.max_cost_usd, spent.cost_usd) {
        config.max_cost_usd = Some((max - cost).max(0.0));
    }
}

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

use lumen_core::{TokenUsage, UsageBreakdown};

use crate::LoopConfig;

/// A function from tokens to dollars.
type CostFn = dyn Fn(&TokenUsage) -> Option<f64> + Send + Sync;
type NoteFn = dyn Fn() -> Option<String> + Send + Sync;

/// Turns tokens into an estimated cost in US dollars; `None` when the
/// price is not known.
///
/// A run may use more than one model: the verifier and the planner can be
/// other models than the main loop's. [`with_verifier`](Self::with_verifier)
/// and [`with_planner`](Self::with_planner) give their prices, and
/// [`cost_by_source`](Self::cost_by_source) prices each source of a
/// [`UsageBreakdown`] at its own model's price (the main model's where no
/// other is given: summaries, the confidence gate and sub-tasks use the
/// main model).
#[derive(Clone)]
pub struct Pricing {
    main: Arc<CostFn>,
    verifier: Option<Arc<CostFn>>,
    planner: Option<Arc<CostFn>>,
    /// Why a cost may be missing (the registry does not price the model).
    note: Option<Arc<NoteFn>>,
}

impl Pricing {
    /// A pricing that asks `cost`.
    pub fn new(cost: impl Fn(&TokenUsage) -> Option<f64> + Send + Sync + 'static) -> Self {
        Self {
            main: Arc::new(cost),
            verifier: None,
            planner: None,
            note: None,
        }
    }

    /// Says why this pricing may have no price (a model the registry does
    /// not know), asked when a cost is missing; a run without a cost
    /// carries the answer as `cost_note`.
    pub fn with_note(mut self, note: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        self.note = Some(Arc::new(note));
        self
    }

    /// The note to carry beside `cost`: only when there is no cost.
    pub fn note_for(&self, cost: Option<f64>) -> Option<String> {
        match cost {
            Some(_) => None,
            None => self.note.as_ref().and_then(|note| note()),
        }
    }

    /// A flat price per million input and output tokens (cache reads and
    /// writes at the input price). Mostly for tests.
    pub fn per_million(input: f64, output: f64) -> Self {
        Self::new(move |u| {
            Some((u.total_input() as f64 * input + u.output_tokens as f64 * output) / 1_000_000.0)
        })
    }

    /// Prices the verifier's tokens with `verifier`'s main price.
    pub fn with_verifier(mut self, verifier: &Pricing) -> Self {
        self.verifier = Some(verifier.main.clone());
        self
    }

    /// Prices the planner's tokens with `planner`'s main price.
    pub fn with_planner(mut self, planner: &Pricing) -> Self {
        self.planner = Some(planner.main.clone());
        self
    }

    /// The estimated cost of `usage` at the main model's price.
    pub fn cost(&self, usage: &TokenUsage) -> Option<f64> {
        priced(&self.main, usage)
    }

    /// The estimated cost of a run's `usage`, each source at its model's
    /// price; `None` when a source that spent tokens has no known price.
    pub fn cost_by_source(&self, usage: &UsageBreakdown) -> Option<f64> {
        let verifier = self.verifier.as_ref().unwrap_or(&self.main);
        let planner = self.planner.as_ref().unwrap_or(&self.main);
        let rest = usage.total().saturating_sub(usage.verifier + usage.planner);
        Some(
            priced(&self.main, &rest)?
                + priced(verifier, &usage.verifier)?
                + priced(planner, &usage.planner)?,
        )
    }
}

/// `usage` priced by `cost`; nothing spent costs nothing, priced or not.
fn priced(cost: &Arc<CostFn>, usage: &TokenUsage) -> Option<f64> {
    if usage.total() == 0 {
        return Some(0.0);
    }
    cost(usage).filter(|c| c.is_finite() && *c >= 0.0)
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

//! Estimated cost of a run, for the progress line and the report: the
//! model registry's list prices (`lumen models` prints them). An estimate,
//! never a bill.

use lumen::TokenUsage;

/// The estimated cost of `usage` on `model` (`provider/id`) in dollars;
/// `None` for models without a published price (local servers).
pub(crate) fn cost(model: &str, usage: &TokenUsage) -> Option<f64> {
    lumen::models::registry::cost(model, usage)
}

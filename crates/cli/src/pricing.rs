//! Rough list prices for the models people run Lumen with, for the
//! progress line and the report. An estimate, never a bill.

use lumen::TokenUsage;

/// Dollars per million tokens (input, cached input, output) for the models
/// we know.
fn price(model: &str) -> Option<(f64, f64, f64)> {
    let m = model.to_ascii_lowercase();
    let p = if m.contains("opus-4-5") || m.contains("opus-4.5") {
        (5.0, 0.5, 25.0)
    } else if m.contains("opus") {
        (15.0, 1.5, 75.0)
    } else if m.contains("haiku") {
        (1.0, 0.1, 5.0)
    } else if m.contains("sonnet") || m.contains("claude") {
        (3.0, 0.3, 15.0)
    } else if m.contains("computer-use-preview") {
        (3.0, 3.0, 12.0)
    } else if m.contains("gpt-5") {
        (1.25, 0.125, 10.0)
    } else if m.contains("flash") {
        (0.3, 0.03, 2.5)
    } else if m.contains("gemini") {
        (1.25, 0.125, 10.0)
    } else {
        return None;
    };
    Some(p)
}

/// The estimated cost of `usage` on `model` in dollars; `None` for models
/// whose prices we do not know. Cache writes are priced at 1.25× input.
pub fn cost(model: &str, usage: &TokenUsage) -> Option<f64> {
    let (input, cached, output) = price(model)?;
    Some(
        (usage.input_tokens as f64 * input
            + usage.cache_write_tokens as f64 * input * 1.25
            + usage.cache_read_tokens as f64 * cached
            + usage.output_tokens as f64 * output)
            / 1_000_000.0,
    )
}

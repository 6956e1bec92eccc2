//! The confidence gate: several samples on hard steps, majority vote.
//!
//! On an easy step the loop makes one streaming call (zero overhead). A step
//! is *hard* when a nudge is pending or the last action failed; then the gate
//! asks the adapter for `samples` single-shot answers at different
//! temperatures, concurrently, and keeps the answer whose action sequence the
//! most candidates agree on (pointer coordinates compared in the same 64 px
//! buckets as repeat detection). Ties go to the lowest temperature. The
//! *chosen* candidate's turn (actions, tool-call ids, thinking) is what the
//! loop records and executes, and the usage of every candidate is summed.

use futures::future::join_all;
use lumen_core::{LumenError, ModelAdapter, ModelResponse, Result, StepContext, TokenUsage};

use crate::repeat::action_hash;

/// Options of the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfidenceGate {
    temperatures: Vec<f32>,
}

impl Default for ConfidenceGate {
    fn default() -> Self {
        Self::new(3)
    }
}

/// The gate's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct GateChoice {
    /// The chosen answer.
    pub response: ModelResponse,
    /// Usage of all candidates together.
    pub usage: TokenUsage,
    /// How many candidates agreed with the chosen one (itself included).
    pub votes: usize,
    /// How many candidates answered.
    pub candidates: usize,
}

impl ConfidenceGate {
    /// A gate drawing `samples` candidates (at least 1) at temperatures
    /// spread evenly from 0.0 to 1.0.
    pub fn new(samples: usize) -> Self {
        let n = samples.max(1);
        let temperatures = (0..n)
            .map(|i| {
                if n == 1 {
                    0.0
                } else {
                    i as f32 / (n - 1) as f32
                }
            })
            .collect();
        Self { temperatures }
    }

    /// Whether a step is hard enough to sample several candidates.
    pub fn is_hard(pending_nudge: bool, last_action_failed: bool) -> bool {
        pending_nudge || last_action_failed
    }

    /// The temperatures the candidates are drawn at.
    pub fn temperatures(&self) -> &[f32] {
        &self.temperatures
    }

    /// Samples the candidates and votes. Fails only when every candidate
    /// failed (with the first error).
    pub async fn choose(
        &self,
        adapter: &dyn ModelAdapter,
        ctx: &StepContext<'_>,
    ) -> Result<GateChoice> {
        let calls = self.temperatures.iter().map(|t| {
            let mut c = *ctx;
            c.temperature = Some(*t);
            async move { adapter.step(&c).await }
        });
        let results = join_all(calls).await;
        let mut first_error: Option<LumenError> = None;
        let mut answers = Vec::new();
        for r in results {
            match r {
                Ok(resp) => answers.push(resp),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        vote(answers).ok_or_else(|| {
            first_error.unwrap_or_else(|| {
                LumenError::invalid_data("confidence gate", "no candidate was sampled")
            })
        })
    }
}

/// Majority vote over candidates in temperature order; `None` when empty.
pub fn vote(candidates: Vec<ModelResponse>) -> Option<GateChoice> {
    let usage = candidates
        .iter()
        .fold(TokenUsage::default(), |acc, r| acc + r.usage);
    let signatures: Vec<Vec<u64>> = candidates
        .iter()
        .map(|r| {
            r.turn
                .calls
                .iter()
                .map(|c| action_hash(&c.action))
                .collect()
        })
        .collect();
    let mut best: Option<(usize, usize)> = None; // (index, votes)
    for (i, sig) in signatures.iter().enumerate() {
        let votes = signatures.iter().filter(|s| *s == sig).count();
        if best.is_none_or(|(_, v)| votes > v) {
            best = Some((i, votes));
        }
    }
    let (index, votes) = best?;
    let n = candidates.len();
    let response = candidates.into_iter().nth(index)?;
    Some(GateChoice {
        response,
        usage,
        votes,
        candidates: n,
    })
}

#[cfg(test)]
mod tests {
    use lumen_core::{Action, ActionCall, AssistantTurn, Modifiers, MouseButton};

    use super::*;

    fn answer(id: &str, x: i32, tokens: u64) -> ModelResponse {
        ModelResponse {
            turn: AssistantTurn {
                calls: vec![ActionCall::new(
                    id,
                    Action::Click {
                        x,
                        y: 10,
                        button: MouseButton::Left,
                        modifiers: Modifiers::NONE,
                    },
                )],
                ..AssistantTurn::default()
            },
            usage: TokenUsage {
                input_tokens: tokens,
                output_tokens: 1,
                ..TokenUsage::default()
            },
            stop_reason: None,
        }
    }

    #[test]
    fn majority_wins_and_records_the_chosen_candidates_ids() {
        // Candidates 2 and 3 agree (same 64 px bucket); the chosen turn is the
        // first of the majority, with its own tool-call id.
        let c = vote(vec![
            answer("a", 500, 10),
            answer("b", 100, 20),
            answer("c", 110, 30),
        ])
        .unwrap();
        assert_eq!(c.response.turn.calls[0].id, "b");
        assert_eq!((c.votes, c.candidates), (2, 3));
        assert_eq!(
            c.usage.input_tokens, 60,
            "usage is summed over all candidates"
        );
        assert_eq!(c.usage.output_tokens, 3);
    }

    #[test]
    fn ties_go_to_the_lowest_temperature() {
        let c = vote(vec![answer("a", 500, 1), answer("b", 100, 1)]).unwrap();
        assert_eq!(c.response.turn.calls[0].id, "a");
        assert!(vote(vec![]).is_none());
    }

    #[test]
    fn temperatures_spread_and_hardness() {
        assert_eq!(ConfidenceGate::new(3).temperatures(), &[0.0, 0.5, 1.0]);
        assert_eq!(ConfidenceGate::new(0).temperatures(), &[0.0]);
        assert!(ConfidenceGate::is_hard(true, false) && ConfidenceGate::is_hard(false, true));
        assert!(!ConfidenceGate::is_hard(false, false));
    }
}

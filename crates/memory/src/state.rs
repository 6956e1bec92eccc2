//! [`StateStore`]: the task state the model writes with `writeState`.
//!
//! It holds only the latest value (a JSON object), lives outside the wire
//! history so tier-2 compaction never summarises it away, and is re-injected
//! into every step's prompt. Its size is capped so a model cannot grow the
//! prompt without bound by writing ever larger state.

use lumen_core::{LumenError, TaskState};

/// The default cap on the state's JSON size: 16 KiB.
pub const DEFAULT_MAX_STATE_BYTES: usize = 16 * 1024;

/// Why a state write was refused. Its message is written for the model,
/// which reads it as the `writeState` failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The new state is larger than the cap; the previous state is kept.
    #[error(
        "the state is {bytes} bytes of JSON, over the {limit}-byte limit; the previous state was kept. Keep only what you still need"
    )]
    TooLarge {
        /// Size of the refused state, as compact JSON.
        bytes: usize,
        /// The cap.
        limit: usize,
    },
}

impl From<StateError> for LumenError {
    fn from(e: StateError) -> Self {
        LumenError::invalid_data("task state", e.to_string())
    }
}

/// The latest task state, size-capped.
#[derive(Debug, Clone, PartialEq)]
pub struct StateStore {
    state: Option<TaskState>,
    bytes: usize,
    max_bytes: usize,
}

impl Default for StateStore {
    fn default() -> Self {
        Self::new()
    }
}

impl StateStore {
    /// An empty store with the default cap ([`DEFAULT_MAX_STATE_BYTES`]).
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_STATE_BYTES)
    }

    /// An empty store that refuses states larger than `max_bytes` of compact
    /// JSON.
    pub fn with_limit(max_bytes: usize) -> Self {
        Self {
            state: None,
            bytes: 0,
            max_bytes,
        }
    }

    /// The cap, in bytes of compact JSON.
    pub fn limit(&self) -> usize {
        self.max_bytes
    }

    /// Replaces the state. On error the previous state is kept unchanged.
    pub fn write(&mut self, state: TaskState) -> Result<(), StateError> {
        let bytes = json_len(&state);
        if bytes > self.max_bytes {
            return Err(StateError::TooLarge {
                bytes,
                limit: self.max_bytes,
            });
        }
        self.state = Some(state);
        self.bytes = bytes;
        Ok(())
    }

    /// Restores a state read back from a serialized session (`None` clears),
    /// under the same cap as [`write`](Self::write).
    pub fn restore(&mut self, state: Option<TaskState>) -> Result<(), StateError> {
        match state {
            Some(s) => self.write(s),
            None => {
                self.clear();
                Ok(())
            }
        }
    }

    /// The current state, if one was written.
    pub fn get(&self) -> Option<&TaskState> {
        self.state.as_ref()
    }

    /// Size of the current state as compact JSON (0 when empty).
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets the state.
    pub fn clear(&mut self) {
        self.state = None;
        self.bytes = 0;
    }

    /// The block re-injected into every step's prompt, or `None` when no
    /// state was written (or it is an empty object).
    pub fn prompt_block(&self) -> Option<String> {
        let state = self.state.as_ref().filter(|s| !s.is_empty())?;
        let json = serde_json::to_string(state).unwrap_or_default();
        Some(format!(
            "Task state (your own notes from writeState; kept when older history is summarised):\n{json}"
        ))
    }
}

fn json_len(state: &TaskState) -> usize {
    // Serialising a map of JSON values cannot fail; count 0 if it ever did.
    serde_json::to_vec(state).map(|v| v.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: serde_json::Value) -> TaskState {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn keeps_only_the_latest_state() {
        let mut s = StateStore::new();
        assert_eq!(s.get(), None);
        assert_eq!(s.prompt_block(), None);
        s.write(obj(json!({"a": 1}))).unwrap();
        s.write(obj(json!({"b": 2}))).unwrap();
        assert_eq!(s.get(), Some(&obj(json!({"b": 2}))));
        assert_eq!(s.size_bytes(), r#"{"b":2}"#.len());
        let block = s.prompt_block().unwrap();
        assert!(block.ends_with(r#"{"b":2}"#), "{block}");
    }

    #[test]
    fn oversized_state_is_refused_and_the_previous_one_kept() {
        let mut s = StateStore::with_limit(20);
        s.write(obj(json!({"k": "short"}))).unwrap();
        let err = s
            .write(obj(json!({"k": "a value that is much too long"})))
            .unwrap_err();
        assert_eq!(
            err,
            StateError::TooLarge {
                bytes: r#"{"k":"a value that is much too long"}"#.len(),
                limit: 20
            }
        );
        assert!(err.to_string().contains("20-byte limit"));
        assert_eq!(s.get(), Some(&obj(json!({"k": "short"}))));
        let lumen: LumenError = err.into();
        assert_eq!(lumen.code(), lumen_core::ErrorCode::InvalidData);
    }

    #[test]
    fn a_state_exactly_at_the_limit_is_accepted() {
        let exact = obj(json!({"k": "v"}));
        let mut s = StateStore::with_limit(r#"{"k":"v"}"#.len());
        s.write(exact.clone()).unwrap();
        assert_eq!(s.get(), Some(&exact));
    }

    #[test]
    fn empty_object_is_stored_but_not_injected() {
        let mut s = StateStore::new();
        s.write(TaskState::new()).unwrap();
        assert_eq!(s.get(), Some(&TaskState::new()));
        assert_eq!(s.prompt_block(), None);
        s.restore(None).unwrap();
        assert_eq!(s.get(), None);
    }
}

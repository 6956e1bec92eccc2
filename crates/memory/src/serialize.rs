//! [`SerializedHistory`]: a saved run that can be resumed.
//!
//! The file is JSON with a `version` field. Reading checks the version before
//! anything else, so a file written by a newer Lumen is refused with a clear
//! message instead of being half understood, and a corrupt file is an
//! [`LumenError::InvalidData`] naming the file and the position of the
//! problem, never a panic. Writes are atomic (temporary file, sync, rename).

use std::path::Path;

use lumen_core::{LumenError, Result, SemanticStep, TaskState, TokenUsage, WireRecord};
use serde::{Deserialize, Serialize};

use crate::fsutil;

/// The format version this build writes, and the newest it reads.
pub const CURRENT_VERSION: u32 = 1;

const WHAT: &str = "history file";

/// A saved history: everything needed to continue a run from its next step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SerializedHistory {
    /// Format version ([`CURRENT_VERSION`] when written by this build).
    pub version: u32,
    /// The wire history, as compressed when saved.
    pub wire: Vec<WireRecord>,
    /// The semantic history, when it was saved too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic: Option<Vec<SemanticStep>>,
    /// The task state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    /// Steps completed: the run resumes at this step index.
    pub step_count: u32,
    /// Tokens used so far.
    #[serde(default)]
    pub usage: TokenUsage,
    /// Folded sub-goals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folds: Vec<FoldRecord>,
}

impl SerializedHistory {
    /// The snapshot as a JSON value.
    pub fn to_value(&self) -> Result<serde_json::Value> {
        serde_json::to_value(self)
            .map_err(|e| LumenError::invalid_data("history", format!("cannot serialise: {e}")))
    }

    /// The snapshot as JSON text.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self)
            .map_err(|e| LumenError::invalid_data("history", format!("cannot serialise: {e}")))
    }

    /// Reads a snapshot from JSON text, checking the version first.
    pub fn from_json(text: &str) -> Result<Self> {
        Self::parse(text, "history")
    }

    fn parse(text: &str, what: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            LumenError::invalid_data(what, format!("not valid JSON ({e}); the file is corrupt"))
        })?;
        let Some(obj) = value.as_object() else {
            return Err(LumenError::invalid_data(what, "expected a JSON object"));
        };
        let version = match obj.get("version") {
            None => return Err(LumenError::invalid_data(what, "it has no `version` field")),
            Some(v) => v.as_u64().ok_or_else(|| {
                LumenError::invalid_data(what, format!("`version` is {v}, not a whole number"))
            })?,
        };
        if version > u64::from(CURRENT_VERSION) {
            return Err(LumenError::invalid_data(
                what,
                format!(
                    "it is format version {version}, written by a newer Lumen; this build reads versions 1 to {CURRENT_VERSION}. Upgrade Lumen to resume it"
                ),
            ));
        }
        if version == 0 {
            return Err(LumenError::invalid_data(
                what,
                "format version 0 does not exist",
            ));
        }
        serde_json::from_value(value)
            .map_err(|e| LumenError::invalid_data(what, format!("unreadable content: {e}")))
    }

    /// Writes the snapshot to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.save_with(path, |_| {})
    }

    /// Writes the snapshot to `path` atomically after `scrub` has edited its
    /// JSON form (pass a secrets redactor so no secret value reaches the
    /// disk).
    pub fn save_with(&self, path: &Path, scrub: impl FnOnce(&mut serde_json::Value)) -> Result<()> {
        let mut value = self.to_value()?;
        scrub(&mut value);
        let text = serde_json::to_vec(&value)
            .map_err(|e| LumenError::invalid_data("history", format!("cannot serialise: {e}")))?;
        fsutil::write_atomic(path, &text, WHAT)
    }

    /// Reads a snapshot from `path`. A missing, unreadable, corrupt or
    /// future-version file is an [`LumenError::InvalidData`] naming the file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = fsutil::read_required(path, WHAT)?;
        Self::parse(&text, &format!("{WHAT} {}", path.display()))
    }
}

/// A finished sub-goal the model folded away: one line that stays in every
/// later prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FoldRecord {
    /// The step at which the model folded.
    pub step: u32,
    /// The one-line summary.
    pub summary: String,
}

#[cfg(test)]
#[path = "serialize_tests.rs"]
mod tests;

//! Request bodies: `POST /v1/runs` and the control calls' optional bodies,
//! validated into typed values or refused with a 4xx naming the field.

use lumen::safety::{PolicyConfig, PolicyErrorKind, SessionPolicy};
use serde_json::{Map, Value};

use super::{RunManager, policy_denied};
use crate::error::ApiError;
use crate::store::Mode;

/// A validated `POST /v1/runs` body.
#[derive(Debug, Clone)]
pub(super) struct NewRun {
    pub(super) instruction: String,
    pub(super) start_url: Option<String>,
    pub(super) model: String,
    pub(super) max_steps: u32,
    pub(super) mode: Mode,
    pub(super) attempts: u32,
    pub(super) policy: PolicyConfig,
    pub(super) system_prompt: Option<String>,
}

const CREATE_FIELDS: &[&str] = &[
    "instruction",
    "startUrl",
    "model",
    "maxSteps",
    "mode",
    "attempts",
    "policy",
    "systemPrompt",
];

/// The object fields of `body`, refusing anything else and unknown fields.
fn object<'a>(body: &'a Value, known: &[&str]) -> Result<&'a Map<String, Value>, ApiError> {
    let obj = body
        .as_object()
        .ok_or_else(|| ApiError::invalid_json("the body must be a JSON object"))?;
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::unknown_field(k));
    }
    Ok(obj)
}

pub(super) fn opt_string(
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Option<String>, ApiError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid_field(
            field,
            format!("`{field}` must be a string"),
        )),
    }
}

fn opt_u32(
    obj: &Map<String, Value>,
    field: &str,
    min: u32,
    max: u32,
) -> Result<Option<u32>, ApiError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (min as u64..=max as u64).contains(n))
            .map(|n| Some(n as u32))
            .ok_or_else(|| {
                ApiError::invalid_field(
                    field,
                    format!("`{field}` must be an integer from {min} to {max}"),
                )
            }),
    }
}

/// Parses an optional body of a control request (`{"reason"}`, `{"text"}`).
pub(super) fn control_body(body: &[u8], known: &[&str]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_json(format!("the body is not valid JSON: {e}")))?;
    object(&value, known).cloned()
}

impl RunManager {
    pub(super) async fn validate(&self, body: &Value) -> Result<NewRun, ApiError> {
        let obj = object(body, CREATE_FIELDS)?;
        let instruction = opt_string(obj, "instruction")?
            .ok_or_else(|| ApiError::missing_field("instruction"))?;
        if instruction.trim().is_empty() {
            return Err(ApiError::invalid_field(
                "instruction",
                "`instruction` must not be empty",
            ));
        }
        let start_url = opt_string(obj, "startUrl")?;
        let model = opt_string(obj, "model")?.unwrap_or_else(|| self.options.default_model.clone());
        if let Err(e) = lumen::models::create_adapter(&model, self.options.adapter.clone()) {
            return Err(ApiError::invalid_field("model", e.to_string()));
        }
        let max_steps = opt_u32(obj, "maxSteps", 1, self.options.max_steps_limit)?
            .unwrap_or(self.options.default_max_steps);
        let mode = match opt_string(obj, "mode")?.as_deref() {
            None | Some("agent") => Mode::Agent,
            Some("plan") => Mode::Plan,
            Some("exec") => Mode::Exec,
            Some(_) => {
                return Err(ApiError::invalid_field(
                    "mode",
                    "`mode` must be \"agent\", \"plan\" or \"exec\"",
                ));
            }
        };
        let attempts = opt_u32(obj, "attempts", 1, 10)?.unwrap_or(1);
        let requested = match obj.get("policy") {
            None | Some(Value::Null) => PolicyConfig::default(),
            Some(v) => serde_json::from_value::<PolicyConfig>(v.clone())
                .map_err(|e| ApiError::invalid_field("policy", format!("invalid policy: {e}")))?,
        };
        // The run gets the operator policy, narrowed by the request's.
        let policy = self
            .operator_policy()
            .narrowed_by(&requested)
            .map_err(|e| match e.kind {
                PolicyErrorKind::Widens => policy_denied(&e.setting, e.message),
                _ => ApiError::invalid_field(&e.setting, e.message),
            })?;
        let session_policy = SessionPolicy::new(&policy)
            .map_err(|e| ApiError::invalid_field("policy", e.to_string()))?;
        if let Some(u) = &start_url {
            Self::judge_url(&session_policy, "startUrl", u).await?;
        }
        Ok(NewRun {
            instruction,
            start_url,
            model,
            max_steps,
            mode,
            attempts,
            policy,
            system_prompt: opt_string(obj, "systemPrompt")?,
        })
    }
}

//! The JSON schema of every run option, and a value with every option set
//! (the two the drift tests compare).

use std::collections::BTreeMap;

use lumen_core::ImageFormat;
use lumen_models::{Effort, Tools};
use lumen_safety::PolicyConfig;
use serde_json::{Value, json};

use super::{PathSetting, RunOptions, SecretValues, TaskMode, Viewport};

pub(super) type SchemaFn = fn() -> Value;

/// Each option's JSON schema, in the order of the fields.
pub(super) const SCHEMA: &[(&str, SchemaFn)] = &[
    (
        "startUrl",
        || json!({"type": "string", "description": "The page to open first (http(s) URL or about:blank)."}),
    ),
    (
        "model",
        || json!({"type": "string", "description": "The model, e.g. anthropic/claude-sonnet-4-6 (the server's default when absent; a server accepts only the models its operator allows with --allow-model)."}),
    ),
    (
        "plannerModel",
        || json!({"type": "string", "description": "A separate model for a planning pass before the run."}),
    ),
    (
        "fallbackModels",
        || json!({"type": "array", "items": {"type": "string"}, "maxItems": 4, "description": "Models to switch to, in order, when the model is retired, not found or overloaded after every retry (each one the operator allows)."}),
    ),
    (
        "tools",
        || json!({"type": "string", "enum": ["computer", "browser"], "description": "The tool family (default: the model registry's)."}),
    ),
    (
        "effort",
        || json!({"type": "string", "enum": ["minimal", "low", "medium", "high", "xhigh", "max"], "description": "How hard the model thinks."}),
    ),
    (
        "thinkingBudget",
        || json!({"type": "integer", "minimum": 1, "maximum": 1_000_000, "description": "A thinking budget in tokens."}),
    ),
    (
        "systemPrompt",
        || json!({"type": "string", "description": "Extra system instructions."}),
    ),
    (
        "mode",
        || json!({"type": "string", "enum": ["agent", "plan", "exec"], "description": "agent (default), plan (only plan) or exec (the loop with retries)."}),
    ),
    (
        "attempts",
        || json!({"type": "integer", "minimum": 1, "maximum": 10, "description": "Attempts in exec mode (default 3); only with mode exec."}),
    ),
    (
        "maxSteps",
        || json!({"type": "integer", "minimum": 1, "description": "The step budget (capped by the operator's limit)."}),
    ),
    (
        "maxTokens",
        || json!({"type": "integer", "minimum": 1, "description": "Stop before the next model call once the run used this many tokens."}),
    ),
    (
        "maxCost",
        || json!({"type": "number", "exclusiveMinimum": 0, "description": "Stop once the estimated cost reaches this many US dollars (priced models only)."}),
    ),
    (
        "maxFailures",
        || json!({"type": "integer", "minimum": 1, "description": "Stop after this many failed actions in a row."}),
    ),
    (
        "maxActionsPerTurn",
        || json!({"type": "integer", "minimum": 1, "maximum": 1000, "description": "The most actions one model turn may ask for (default 25); the rest are answered ok: false without running."}),
    ),
    (
        "maxWait",
        || json!({"type": "integer", "minimum": 1, "maximum": 3600, "description": "The longest one model call waits in all before its retries, seconds."}),
    ),
    (
        "verifyUrl",
        || json!({"type": "string", "description": "Completion is refused until the URL matches this regular expression."}),
    ),
    (
        "verifierModel",
        || json!({"type": "string", "description": "Completion is confirmed by asking this model."}),
    ),
    (
        "confidenceGate",
        || json!({"type": "integer", "minimum": 2, "maximum": 8, "description": "Sample this many candidate actions on hard steps."}),
    ),
    (
        "checkpointInterval",
        || json!({"type": "integer", "minimum": 0, "maximum": 1000, "description": "Save a checkpoint every N steps for backtracking (0: off; default 5)."}),
    ),
    (
        "siteTips",
        || json!({"type": "boolean", "description": "Show the built-in site tips for matching URLs."}),
    ),
    (
        "workflows",
        || json!({"type": ["boolean", "string"], "description": "Workflow memory: true for the server's workflow file (a path only on the CLI)."}),
    ),
    (
        "cache",
        || json!({"type": ["boolean", "string"], "description": "The action cache of run scripts (a successful run reruns from its script without model calls while the page matches): true for the operator's cache folder, or a subfolder of it."}),
    ),
    (
        "cdpUrl",
        || json!({"type": "string", "description": "Attach to a running browser (ws:// or http://host:port); a server accepts only the endpoints its operator listed with --allow-cdp-url."}),
    ),
    (
        "browserbase",
        || json!({"type": "boolean", "description": "Run in a Browserbase session (the operator's key; servers need --allow-browserbase)."}),
    ),
    (
        "viewport",
        || json!({"type": "string", "pattern": "^[0-9]+[xX][0-9]+$", "description": "The viewport, WIDTHxHEIGHT (each 200-4096)."}),
    ),
    (
        "screenshotFormat",
        || json!({"type": "string", "enum": ["jpeg", "png"], "description": "Screenshot encoding."}),
    ),
    (
        "screenshotQuality",
        || json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "JPEG quality."}),
    ),
    (
        "screenshotMaxEdge",
        || json!({"type": "integer", "minimum": 64, "maximum": 8192, "description": "Downscale screenshots to at most this longer edge."}),
    ),
    (
        "imagesKept",
        || json!({"type": "integer", "minimum": 0, "maximum": 50, "description": "How many of the newest screenshots a request carries as images."}),
    ),
    (
        "downloadDir",
        || json!({"type": ["boolean", "string"], "description": "Downloads: true for the operator's folder, or a subfolder of it."}),
    ),
    (
        "uploadDir",
        || json!({"type": ["boolean", "string"], "description": "Uploads: true for the operator's folder, or a subfolder of it."}),
    ),
    (
        "policy",
        || json!({"type": "object", "description": "The safety policy (allowedDomains, blockedDomains, allowedActions, allowedSchemes, blockPrivateNetwork…); narrows the operator's."}),
    ),
    (
        "secrets",
        || json!({"type": "object", "additionalProperties": {"type": "string"}, "description": "Secret name to value, typed as <secret:NAME>; kept in memory only."}),
    ),
    (
        "secretDomains",
        || json!({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}, "description": "Secret name to the sites it may be typed on."}),
    ),
    ("handoff", || {
        json!({
            "type": "object",
            "additionalProperties": false,
            "description": "Hand the browser to a person through a live view: offers the model request_human; triggers hand over by themselves.",
            "properties": {
                "timeoutSecs": {"type": "integer", "minimum": 1, "maximum": 86400, "description": "How long to wait for the person (default 600); then the run ends with handoffTimeout."},
                "urls": {"type": "array", "items": {"type": "string"}, "description": "Hand over when a step starts on a matching URL (* matches anything), once per URL."},
                "beforePayment": {"type": "boolean", "description": "Hand over instead of a click or Enter on a page with a payment field."},
                "afterRejections": {"type": "integer", "minimum": 0, "description": "Hand over once the verifier rejected this many answers (0: never)."}
            }
        })
    }),
];

/// A value for every option (for tests that compare schemas with the
/// type).
#[doc(hidden)]
pub fn every_option_set() -> RunOptions {
    RunOptions {
        start_url: Some("https://example.com".into()),
        model: Some("anthropic/claude-sonnet-4-6".into()),
        planner_model: Some("anthropic/claude-haiku-4-5".into()),
        fallback_models: Some(vec!["openai/gpt-5.4".into()]),
        tools: Some(Tools::Browser),
        effort: Some(Effort::High),
        thinking_budget: Some(4096),
        system_prompt: Some("be brief".into()),
        mode: Some(TaskMode::Exec),
        attempts: Some(2),
        max_steps: Some(10),
        max_tokens: Some(1000),
        max_cost: Some(0.5),
        max_failures: Some(3),
        max_actions_per_turn: Some(10),
        max_wait: Some(120),
        verify_url: Some("done".into()),
        verifier_model: Some("anthropic/claude-haiku-4-5".into()),
        confidence_gate: Some(3),
        checkpoint_interval: Some(5),
        site_tips: Some(true),
        workflows: Some(PathSetting::On),
        cache: Some(PathSetting::On),
        cdp_url: Some("http://127.0.0.1:9222".into()),
        browserbase: Some(false),
        viewport: Some(Viewport {
            width: 1024,
            height: 768,
        }),
        screenshot_format: Some(ImageFormat::Png),
        screenshot_quality: Some(70),
        screenshot_max_edge: Some(1024),
        images_kept: Some(3),
        download_dir: Some(PathSetting::On),
        upload_dir: Some(PathSetting::Off),
        policy: Some(PolicyConfig::default()),
        secrets: Some(SecretValues(BTreeMap::from([("PW".into(), "v".into())]))),
        secret_domains: Some(BTreeMap::from([("PW".into(), vec!["a.test".into()])])),
        handoff: Some(lumen_core::HandoffPolicy::default()),
    }
}

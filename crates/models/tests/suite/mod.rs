mod anthropic;
mod bounds;
mod compatible;
mod conformance;
mod defaults;
mod faults;
mod google;
mod openai;
mod props;
mod recorded;

use std::path::PathBuf;

use lumen_core::{
    ActionCall, AssistantTurn, Image, ImageFormat, ImageScale, LumenError, ModelEvent, Screenshot,
    Size, ThinkingBlock, ToolResult, WireRecord, WireScreenshot,
};
use serde_json::{Value, json};

/// `fixtures/provider-streams/` of the workspace.
pub(crate) fn streams_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/provider-streams")
}

/// Bytes standing in for an encoded screenshot (adapters never decode it).
pub(crate) fn image_bytes(step: u32) -> Vec<u8> {
    format!("PNG-BYTES-OF-STEP-{step}").into_bytes()
}

/// A screenshot of a `viewport` shown to the model as an `image`-sized picture.
pub(crate) fn screenshot(viewport: Size, image: Size, step: u32) -> Screenshot {
    Screenshot {
        image: Image::new(
            ImageFormat::Png,
            image.width,
            image.height,
            image_bytes(step),
        ),
        viewport,
        scale: ImageScale::between(viewport, image),
    }
}

pub(crate) fn shot_1280() -> Screenshot {
    screenshot(Size::new(1280, 720), Size::new(1280, 720), 5)
}

/// One event as plain JSON, for snapshots and comparisons.
pub(crate) fn normalise(item: &Result<ModelEvent, LumenError>) -> Value {
    match item {
        Ok(ModelEvent::Action(call)) => json!({"action": call}),
        Ok(ModelEvent::TextDelta(t)) => json!({"text": t}),
        Ok(ModelEvent::ThinkingDelta(t)) => json!({"thinking": t}),
        Ok(ModelEvent::Completed(r)) => json!({"completed": r}),
        Ok(other) => json!({"other": format!("{other:?}")}),
        Err(e) => json!({"error": {"code": e.code(), "message": e.to_string()}}),
    }
}

/// The same events with consecutive text and thinking deltas merged (how a
/// reader sees them; snapshots stay short).
pub(crate) fn normalise_all(items: &[Result<ModelEvent, LumenError>]) -> Vec<Value> {
    let key_of = |v: &Value| {
        ["text", "thinking"]
            .into_iter()
            .find(|k| v.get(*k).is_some_and(Value::is_string))
    };
    let mut out: Vec<Value> = Vec::new();
    for item in items {
        let v = normalise(item);
        if let (Some(last), Some(k)) = (out.last_mut(), key_of(&v))
            && key_of(last) == Some(k)
        {
            let joined = format!("{}{}", last[k].as_str().unwrap(), v[k].as_str().unwrap());
            *last = json!({k: joined});
            continue;
        }
        out.push(v);
    }
    out
}

/// Replaces base64 screenshots and data URLs with `<IMG step N>`.
pub(crate) fn redact_images(v: &mut Value) {
    use base64::Engine as _;
    match v {
        Value::String(s) => {
            for step in 0..10 {
                let b64 = base64::engine::general_purpose::STANDARD.encode(image_bytes(step));
                if s.contains(&b64) {
                    *s = format!("<IMG step {step}>");
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_images),
        Value::Object(map) => map.values_mut().for_each(redact_images),
        _ => {}
    }
}

/// The three-step history every adapter's request snapshot is built from:
/// a summary anchor, compressed screenshots, signed thinking, a call that
/// decoded into two actions, a failed action, and the current screenshot.
pub(crate) fn three_step_history() -> Vec<WireRecord> {
    use lumen_core::{Action, Modifiers, MouseButton};
    let compressed = |step: u32| {
        WireRecord::Screenshot(WireScreenshot {
            step,
            image: None,
            compressed: true,
            url: Some("http://127.0.0.1/shop/".into()),
            tabs: Vec::new(),
        })
    };
    let ok = |id: &str, action: &str| {
        WireRecord::ToolResult(ToolResult {
            call_id: id.into(),
            action: action.into(),
            ok: true,
            error: None,
            hints: vec![],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        })
    };
    vec![
        WireRecord::Summary {
            content:
                "Opened the shop and searched for desk lamps; the results list shows 12 items."
                    .into(),
            compacted_at: 2,
        },
        compressed(3),
        WireRecord::Assistant(AssistantTurn {
            calls: vec![ActionCall::new(
                "call_click",
                Action::Click {
                    x: 200,
                    y: 150,
                    button: MouseButton::Left,
                    modifiers: Modifiers::NONE,
                },
            )],
            thinking: vec![ThinkingBlock {
                text: "The first result looks right; open it.".into(),
                signature: Some("sig-step-3".into()),
                redacted: false,
            }],
            text: Some("Opening the first lamp.".into()),
            provider: None,
        }),
        WireRecord::ToolResult(ToolResult {
            call_id: "call_click".into(),
            action: "click".into(),
            ok: true,
            error: None,
            hints: vec!["the page navigated to /shop/lamp-1".into()],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        }),
        compressed(4),
        WireRecord::Assistant(AssistantTurn {
            calls: vec![
                ActionCall::new(
                    "call_type",
                    Action::Click {
                        x: 400,
                        y: 90,
                        button: MouseButton::Left,
                        modifiers: Modifiers::NONE,
                    },
                ),
                ActionCall::new("call_type#2", Action::Type { text: "2".into() }),
                ActionCall::new("call_wait", Action::Wait { ms: 1000 }),
            ],
            thinking: vec![],
            text: None,
            provider: None,
        }),
        ok("call_type", "click"),
        WireRecord::ToolResult(ToolResult {
            call_id: "call_type#2".into(),
            action: "type".into(),
            ok: false,
            error: Some("no editable element has focus".into()),
            hints: vec![],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        }),
        ok("call_wait", "wait"),
        WireRecord::Screenshot(WireScreenshot {
            step: 5,
            image: Some(shot_1280().image),
            compressed: false,
            url: Some("http://127.0.0.1/shop/lamp-1".into()),
            tabs: Vec::new(),
        }),
    ]
}

pub(crate) const SYSTEM_PROMPT: &str =
    "Task: buy two desk lamps.\n\nCurrent URL: http://127.0.0.1/shop/lamp-1\nStep 6 of 30.";

//! Property tests of the saved session ([`SerializedHistory`]): whatever
//! is in the file (arbitrary bytes, a valid file with bytes changed, cut or
//! added, a valid file with any field replaced by any JSON), loading is a
//! snapshot or an `InvalidData` error naming the file, never a panic, and a
//! loaded snapshot resumes without one; valid files round-trip exactly.

use lumen_core::{
    Action, ActionCall, ActionExecution, ActionRecord, AssistantTurn, ErrorCode, Image,
    ImageFormat, SemanticStep, TokenUsage, ToolResult,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::{HistoryConfig, HistoryManager, StateStore};

/// A history of `steps` steps with the given texts (any Unicode).
fn history(steps: u32, texts: &[String]) -> SerializedHistory {
    let mut h = HistoryManager::new(HistoryConfig {
        keep_recent: 2,
        ..HistoryConfig::default()
    });
    let mut state = StateStore::new();
    let text = |i: u32| {
        texts
            .get(i as usize % texts.len().max(1))
            .cloned()
            .unwrap_or_default()
    };
    for step in 0..steps {
        let image = Image::new(ImageFormat::Png, 4, 3, vec![step as u8; 16]);
        h.push_screenshot(step, image.clone(), Some(format!("https://a.test/{step}")));
        let call = ActionCall::new(format!("c{step}"), Action::Type { text: text(step) });
        h.push_assistant(AssistantTurn {
            calls: vec![call.clone()],
            text: Some(text(step + 1)),
            ..AssistantTurn::default()
        });
        h.push_tool_result(ToolResult {
            call_id: call.id.clone(),
            action: "type".into(),
            ok: step % 2 == 0,
            error: (step % 2 == 1).then(|| text(step + 2)),
            hints: vec![],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        });
        let mut next = state.get().cloned().unwrap_or_default();
        next.insert(format!("k{step}"), json!(text(step)));
        state.write(next).unwrap();
        if step == 2 {
            h.fold(step, "did the first part").unwrap();
        }
        h.record_step(SemanticStep {
            step,
            url: format!("https://a.test/{step}"),
            screenshot: Some(image),
            thinking: vec![],
            text: Some(text(step)),
            actions: vec![ActionRecord {
                call,
                execution: ActionExecution::ok(),
                blocked: None,
            }],
            usage: TokenUsage::default(),
            started_at_ms: 1_700_000_000_000,
            duration_ms: 900,
            model_ms: 600,
        });
    }
    h.to_serialized(state.get(), true)
}

/// What loading `text` gives must be a snapshot that resumes, or a typed
/// error naming what it read.
fn check(text: &str) -> Result<(), TestCaseError> {
    match SerializedHistory::from_json(text) {
        Ok(snapshot) => {
            let (resumed, state) = HistoryManager::resume(snapshot, HistoryConfig::default());
            let _ = resumed.unanswered_calls();
            let _ = resumed.to_serialized(state.as_ref(), true).to_json()?;
        }
        Err(e) => {
            prop_assert_eq!(e.code(), ErrorCode::InvalidData);
            prop_assert!(e.to_string().contains("history"), "{}", e);
        }
    }
    Ok(())
}

/// Every JSON pointer into `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                pointers(
                    child,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// Any JSON a hostile or broken writer might put in a field.
fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        ".{0,8}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"role": "screenshot", "step": 1})),
        Just(json!([[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_are_an_error_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn a_valid_file_with_bytes_changed_cut_or_added_is_an_error_or_resumes(
        steps in 0u32..5,
        at in any::<prop::sample::Index>(),
        len in 0usize..40,
        insert in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let text = history(steps, &["hello".into()]).to_json()?;
        let mut bytes = text.into_bytes();
        let start = at.index(bytes.len());
        let end = (start + len).min(bytes.len());
        bytes.splice(start..end, insert);
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn a_valid_file_with_any_field_replaced_is_an_error_or_resumes(
        steps in 1u32..5,
        at in any::<prop::sample::Index>(),
        replacement in any_json(),
    ) {
        let mut value = history(steps, &["hello".into()]).to_value()?;
        let mut all = Vec::new();
        pointers(&value, String::new(), &mut all);
        let pointer = &all[at.index(all.len())];
        match value.pointer_mut(pointer) {
            Some(slot) => *slot = replacement,
            None => prop_assert!(false, "no {}", pointer),
        }
        check(&value.to_string())?;
    }

    #[test]
    fn valid_files_round_trip_exactly(
        steps in 0u32..6,
        texts in proptest::collection::vec(any::<String>(), 1..4),
    ) {
        let snapshot = history(steps, &texts);
        let text = snapshot.to_json()?;
        let back = SerializedHistory::from_json(&text)?;
        prop_assert_eq!(&back, &snapshot);
        prop_assert_eq!(back.to_json()?, text);
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("run.json");
        snapshot.save(&path)?;
        prop_assert_eq!(SerializedHistory::load(&path)?, snapshot);
    }
}

/// A file that is not UTF-8 is an error naming the file.
#[test]
fn a_file_that_is_not_text_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    std::fs::write(&path, [0xff, 0xfe, b'{', 0x80]).unwrap();
    let e = SerializedHistory::load(&path).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidData);
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

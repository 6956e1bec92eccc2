//! No input bytes make a stream parser panic: whatever arrives, the stream
//! ends with `Completed` or an error.

use lumen_models::{Provider, decode_recording};
use proptest::prelude::*;

use super::shot_1280;

fn run(provider: Provider, chunks: Vec<Vec<u8>>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let items = rt
        .block_on(decode_recording(provider, &shot_1280(), chunks))
        .unwrap();
    // The stream always ends, with exactly one terminal item.
    let last = items.last();
    prop_assert!(last.is_some());
    let completed = items
        .iter()
        .filter(|i| matches!(i, Ok(lumen_core::ModelEvent::Completed(_))))
        .count();
    prop_assert!(completed <= 1);
    prop_assert!(completed == 1 || last.is_some_and(|l| l.is_err()));
    Ok(())
}

/// Arbitrary bytes, and event-shaped noise that reaches deeper into the
/// parsers (valid SSE framing around random or almost-valid JSON).
fn inputs() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let noise = proptest::collection::vec(any::<u8>(), 0..400);
    let json_bits = proptest::sample::select(vec![
        r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"computer","input":{}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"action\":\"left_click\",\"coordinate\":[1"}}"#,
        r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}"#,
        r#"{"type":"message_stop"}"#,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
        r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"computer_call","call_id":"c","action":{"type":"click","x":1e400,"y":-5}}}"#,
        r#"{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":3}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text"}}"#,
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"click_at","willContinue":true}}]}}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.x[99999999999]","numberValue":5}],"willContinue":true}}]}}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{}}]},"finishReason":"STOP"}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"hi","thought":true,"thoughtSignature":"s"}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"click","arguments":"{\"x\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":7,"function":{"arguments":"1}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"error":{"code":503,"message":"busy"}}"#,
        "[DONE]",
        "{\"type\":",
        "[]",
        "null",
    ]);
    let events = proptest::collection::vec(json_bits, 0..12).prop_map(|bits| {
        bits.iter()
            .map(|b| format!("data: {b}\n\n"))
            .collect::<String>()
            .into_bytes()
    });
    (
        prop_oneof![noise, events],
        proptest::collection::vec(1usize..50, 1..8),
    )
        .prop_map(|(bytes, sizes)| {
            let mut out = Vec::new();
            let mut at = 0;
            let mut i = 0;
            while at < bytes.len() {
                let end = (at + sizes[i % sizes.len()]).min(bytes.len());
                out.push(bytes[at..end].to_vec());
                at = end;
                i += 1;
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_parser_panics_on_any_bytes(chunks in inputs()) {
        for provider in [Provider::Anthropic, Provider::OpenAi, Provider::Google, Provider::Compatible] {
            run(provider, chunks.clone())?;
        }
    }
}

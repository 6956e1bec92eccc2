//! The one boundary between what pages and models produce and what the
//! next model request carries: every record entering a run's wire history
//! has the session's secrets replaced by their placeholders
//! ([`lumen_memory::WireScrub`], set by the loop on each run). Every
//! adapter builds its requests from the wire, so a block an adapter adds
//! (Anthropic's `browser_state` with the tabs' titles and URLs, download
//! names and paths, page text, console lines, receipts) cannot miss it.
//!
//! Left as they are: image bytes (masked at capture instead), and a model
//! turn's thinking and provider data, which go back to the provider as it
//! wrote them (a changed signed block is refused) and can hold no value
//! the model was never shown.

use std::sync::Arc;

use lumen_core::WireRecord;
use lumen_memory::WireScrub;
use lumen_safety::Secrets;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The scrub for a session's secrets.
pub(crate) fn wire_scrub(secrets: Arc<Secrets>) -> WireScrub {
    WireScrub::new(move |record| scrub_record(&secrets, record))
}

/// Redacts one record in place.
pub(crate) fn scrub_record(secrets: &Secrets, record: &mut WireRecord) {
    if secrets.is_empty() {
        return;
    }
    match record {
        WireRecord::Screenshot(shot) => {
            let image = shot.image.take();
            if !redact_in_place(secrets, shot) {
                // Nothing of the page may go out unredacted.
                shot.url = None;
                shot.tabs.clear();
            }
            shot.image = image;
        }
        WireRecord::ToolResult(result) => {
            let image = result.image.take();
            if !redact_in_place(secrets, result) {
                result.ok = false;
                result.error = Some("the result quoted a secret and could not be redacted".into());
                result.hints.clear();
                result.output = None;
                result.download = None;
            }
            result.image = image;
        }
        WireRecord::Assistant(turn) => {
            let thinking = std::mem::take(&mut turn.thinking);
            let provider = turn.provider.take();
            redact_in_place(secrets, turn);
            turn.thinking = thinking;
            turn.provider = provider;
        }
        WireRecord::Summary { content, .. } => {
            if let std::borrow::Cow::Owned(r) = secrets.redact(content) {
                *content = r;
            }
        }
        // A kind of record added later: all of it.
        other => {
            redact_in_place(secrets, other);
        }
    }
}

/// Redacts every string of `value` through its JSON form; false when it
/// could not make the round trip (it is then left as it was).
fn redact_in_place<T: Serialize + DeserializeOwned + Clone>(
    secrets: &Secrets,
    value: &mut T,
) -> bool {
    match secrets.redact_serde(value.clone()) {
        Ok(v) => {
            *value = v;
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use lumen_core::{
        Action, ActionCall, AssistantTurn, DownloadInfo, Image, ImageFormat, TabInfo,
        ThinkingBlock, ToolResult, WireScreenshot,
    };

    use super::*;

    const VALUE: &str = "Vq8Lm2Zx-s3cr3t";

    fn secrets() -> Secrets {
        Secrets::new().with("token", VALUE).unwrap()
    }

    #[test]
    fn every_text_field_of_every_record_is_redacted() {
        let planted = format!("…{VALUE}…");
        let image = Image::new(ImageFormat::Png, 1, 1, vec![1, 2, 3]);
        let mut records = vec![
            WireRecord::Screenshot(WireScreenshot {
                step: 0,
                image: Some(image.clone()),
                compressed: false,
                url: Some(format!("https://a.test/?q={VALUE}")),
                tabs: vec![TabInfo {
                    id: "t1".into(),
                    url: format!("https://a.test/?q={VALUE}"),
                    title: planted.clone(),
                    followed: true,
                }],
            }),
            WireRecord::ToolResult(ToolResult {
                call_id: "c1".into(),
                action: "page_text".into(),
                ok: true,
                error: Some(planted.clone()),
                hints: vec![planted.clone()],
                acknowledged_safety_checks: vec![serde_json::json!({"message": planted})],
                image: Some(image),
                output: Some(planted.clone()),
                download: Some(DownloadInfo {
                    url: format!("https://a.test/{VALUE}.pdf"),
                    suggested_filename: format!("{VALUE}.pdf"),
                    path: Some(format!("/tmp/{VALUE}.pdf")),
                    completed: true,
                    failed: false,
                    error: Some(format!("{VALUE} failed")),
                }),
            }),
            WireRecord::Assistant(AssistantTurn {
                calls: vec![ActionCall::new(
                    "c2",
                    Action::Type {
                        text: planted.clone(),
                    },
                )],
                thinking: vec![ThinkingBlock {
                    text: "signed".into(),
                    signature: Some("sig".into()),
                    redacted: false,
                }],
                text: Some(planted.clone()),
                provider: None,
            }),
            WireRecord::Summary {
                content: planted,
                compacted_at: 1,
            },
        ];
        let secrets = secrets();
        for r in &mut records {
            scrub_record(&secrets, r);
        }
        let text = serde_json::to_string(&records).unwrap();
        assert!(secrets.leaks(&text).is_empty(), "{text}");
        assert!(text.contains("<secret:token>"));
        // Images and signed thinking are kept.
        match (&records[0], &records[2]) {
            (WireRecord::Screenshot(s), WireRecord::Assistant(t)) => {
                assert!(s.image.is_some());
                assert_eq!(t.thinking[0].signature.as_deref(), Some("sig"));
            }
            _ => unreachable!(),
        }
    }
}

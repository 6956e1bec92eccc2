//! Every recorded provider stream in `fixtures/provider-streams`, parsed
//! whole, split into 1-byte and random-sized chunks, and with CRLF line
//! endings: the events must not depend on the framing. The normalised
//! events are snapshots.

use std::path::Path;

use lumen_models::{Provider, decode_recording, reframe_recording};
use pretty_assertions::assert_eq;
use serde_json::Value;

use super::{normalise, normalise_all, shot_1280, streams_dir};

/// Splits `bytes` into chunks of random sizes (1..=max) from a fixed seed.
fn random_chunks(bytes: &[u8], seed: u64, max: usize) -> Vec<Vec<u8>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let end = (at + rng.usize(1..=max)).min(bytes.len());
        out.push(bytes[at..end].to_vec());
        at = end;
    }
    out
}

async fn decode(provider: Provider, chunks: Vec<Vec<u8>>) -> Vec<Value> {
    let items = decode_recording(provider, &shot_1280(), chunks)
        .await
        .unwrap();
    items.iter().map(normalise).collect()
}

/// Parses one recording in every framing and returns the merged events.
async fn parse_every_way(provider: Provider, path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let sse = reframe_recording(&text);
    let bytes = sse.as_bytes();
    let crlf = sse.replace('\n', "\r\n").into_bytes();

    let whole = decode(provider, vec![bytes.to_vec()]).await;
    let one_byte = decode(provider, bytes.iter().map(|b| vec![*b]).collect()).await;
    assert_eq!(whole, one_byte, "{}: 1-byte chunks", path.display());
    for seed in 1..=5 {
        let random = decode(provider, random_chunks(bytes, seed, 64)).await;
        assert_eq!(
            whole,
            random,
            "{}: random chunks, seed {seed}",
            path.display()
        );
    }
    let crlf_whole = decode(provider, vec![crlf.clone()]).await;
    assert_eq!(whole, crlf_whole, "{}: CRLF", path.display());
    let crlf_bytes = decode(provider, crlf.iter().map(|b| vec![*b]).collect()).await;
    assert_eq!(
        whole,
        crlf_bytes,
        "{}: CRLF in 1-byte chunks",
        path.display()
    );
    let crlf_random = decode(provider, random_chunks(&crlf, 99, 17)).await;
    assert_eq!(
        whole,
        crlf_random,
        "{}: CRLF in random chunks",
        path.display()
    );

    let items = decode_recording(provider, &shot_1280(), vec![bytes.to_vec()])
        .await
        .unwrap();
    normalise_all(&items)
}

fn files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(streams_dir().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "LICENSE"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no recordings in {dir}");
    files
}

async fn snapshot_dir(provider: Provider, dir: &str) {
    for path in files(dir) {
        let events = parse_every_way(provider, &path).await;
        snapshot(&path, events);
    }
}

fn snapshot(path: &Path, events: Vec<Value>) {
    {
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "_");
        insta::with_settings!({snapshot_suffix => name, description => path.file_name().unwrap().to_string_lossy().to_string()}, {
            insta::assert_json_snapshot!(events);
        });
    }
}

#[tokio::test]
async fn anthropic_sdk_recordings() {
    snapshot_dir(Provider::Anthropic, "anthropic-sdk-python").await;
}

#[tokio::test]
async fn vercel_anthropic_recordings() {
    snapshot_dir(Provider::Anthropic, "vercel-ai/anthropic").await;
}

/// vercel/ai's OpenAI recordings may hold several responses back to back:
/// each `response.created` starts a new stream.
fn split_responses(text: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let starts = serde_json::from_str::<Value>(line)
            .ok()
            .is_some_and(|v| v["type"] == "response.created");
        if starts || parts.is_empty() {
            parts.push(String::new());
        }
        let last = parts.last_mut().unwrap();
        last.push_str(line);
        last.push('\n');
    }
    parts
}

#[tokio::test]
async fn vercel_openai_responses_recordings() {
    let dir = tempfile::tempdir().unwrap();
    for path in files("vercel-ai/openai-responses") {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut all = Vec::new();
        for (i, part) in split_responses(&text).into_iter().enumerate() {
            let part_path = dir.path().join(format!("{i}"));
            std::fs::write(&part_path, part).unwrap();
            all.push(Value::Array(
                parse_every_way(Provider::OpenAi, &part_path).await,
            ));
        }
        snapshot(&path, all);
    }
}

#[tokio::test]
async fn vercel_google_recordings() {
    snapshot_dir(Provider::Google, "vercel-ai/google").await;
}

#[tokio::test]
async fn openai_python_chat_recordings() {
    snapshot_dir(Provider::Compatible, "openai-python-chat").await;
}

/// Recorded-style streams for the shapes no public recording holds yet:
/// Anthropic's computer and browser toolsets, Gemini 3.5's actions with
/// call ids, OpenAI's drag paths as pairs with held keys. Synthetic, built
/// from the SDKs' published types; the file name's prefix names the
/// protocol.
#[tokio::test]
async fn lumen_shape_recordings() {
    for path in files("lumen-shapes") {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let provider = match name.split('-').next() {
            Some("anthropic") => Provider::Anthropic,
            Some("openai") => Provider::OpenAi,
            Some("google") => Provider::Google,
            _ => panic!("{name}: no protocol prefix"),
        };
        let events = parse_every_way(provider, &path).await;
        // Every call decodes to a real action, none to `invalid`.
        let text = serde_json::to_string(&events).unwrap();
        assert!(!text.contains("\"invalid\""), "{name}: {text}");
        snapshot(&path, events);
    }
}

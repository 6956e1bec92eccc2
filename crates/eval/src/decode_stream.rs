//! `cargo xtask decode-stream`: replays a recorded provider stream through
//! the adapter's parser and prints the normalised events and decoded
//! actions as JSON lines.
//!
//! The file may be raw SSE (`event:`/`data:` lines) or one JSON payload per
//! line (the `data:` bodies, as vercel/ai records them). Coordinates are
//! decoded against a screenshot of `--screen` pixels that covers a viewport
//! of the same size.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use lumen_core::{Image, ImageFormat, ImageScale, ModelEvent, Screenshot, Size};
use lumen_models::{Provider, decode_recording_blocking, reframe_recording};
use serde_json::json;

/// Arguments of `cargo xtask decode-stream`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// The protocol: anthropic, openai, google or compatible.
    #[arg(long)]
    provider: String,
    /// The screenshot size for coordinate conversion, WIDTHxHEIGHT.
    #[arg(long, default_value = "1280x720")]
    screen: String,
    /// The recorded stream.
    file: PathBuf,
}

pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    let provider: Provider = options
        .provider
        .parse()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let size = parse_screen(&options.screen)?;
    let text = std::fs::read_to_string(&options.file)
        .with_context(|| format!("cannot read {}", options.file.display()))?;
    if text.trim().is_empty() {
        bail!("{} is empty", options.file.display());
    }
    let screenshot = Screenshot {
        image: Image::new(ImageFormat::Png, size.width, size.height, Vec::new()),
        viewport: size,
        scale: ImageScale::IDENTITY,
    };
    let sse = reframe_recording(&text);
    let events = decode_recording_blocking(provider, &screenshot, vec![sse.into_bytes()])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut failure = None;
    for item in &events {
        let line = match item {
            Ok(ModelEvent::Action(call)) => json!({"event": "action", "call": call}),
            Ok(ModelEvent::TextDelta(t)) => json!({"event": "text", "text": t}),
            Ok(ModelEvent::ThinkingDelta(t)) => json!({"event": "thinking", "text": t}),
            Ok(ModelEvent::Completed(r)) => json!({"event": "completed", "response": r}),
            Ok(other) => json!({"event": "other", "debug": format!("{other:?}")}),
            Err(e) => {
                failure = Some(e.to_string());
                json!({"event": "error", "code": e.code(), "message": e.to_string()})
            }
        };
        println!("{line}");
    }
    if let Some(message) = failure {
        bail!(
            "{}: the stream does not decode: {message}",
            options.file.display()
        );
    }
    Ok(())
}

fn parse_screen(s: &str) -> anyhow::Result<Size> {
    let parsed = s
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse::<u32>().ok()?, h.trim().parse::<u32>().ok()?)));
    match parsed {
        Some((w, h)) if w > 0 && h > 0 => Ok(Size::new(w, h)),
        _ => {
            bail!("--screen must be WIDTHxHEIGHT with positive integers (e.g. 1280x720), not `{s}`")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_sizes_parse_or_explain() {
        assert_eq!(parse_screen("1280x720").unwrap(), Size::new(1280, 720));
        assert_eq!(parse_screen("1000X565").unwrap(), Size::new(1000, 565));
        for bad in ["", "1280", "0x720", "axb", "1280x-1"] {
            let e = parse_screen(bad).unwrap_err().to_string();
            assert!(e.contains("WIDTHxHEIGHT"), "{bad}: {e}");
        }
    }
}

//! `cargo xtask record`: runs one real task with a real model and saves the
//! provider's raw answers as conformance fixtures for `lumen-models`.
//!
//! The capture is `lumen-models`' own seam: an
//! [`AdapterOptions::wire_observer`] sees every request (secret headers
//! already masked) and every byte of every answer as it arrives. Nothing
//! sits between Lumen and the provider, so what is saved is what the parser
//! was given.
//!
//! Before anything is written it is sanitized (see [`Sanitizer`]): API keys
//! (every key variable in the environment) and auth headers, cookies,
//! organisation and project ids (headers, and their values wherever they
//! appear), response request ids, and the screenshots inside requests
//! (replaced by a short placeholder, each one listed in the metadata). The
//! answer streams are otherwise kept byte for byte.
//!
//! The folder (default
//! `fixtures/provider-streams/lumen-recorded/<provider>/<date>-<name>/`):
//!
//! - `streams/call-NN.sse`: each streamed answer, raw SSE, one file a call
//!   (only streams here, so the conformance tests' folder reader takes the
//!   folder as it is);
//! - `answers/call-NN.json`: non-streamed answers (summaries), if any;
//! - `requests/call-NN.json`: what was sent (path, headers, body);
//! - `metadata.json`: provider, model, date, task, the screen size to
//!   decode with, each call (status, attempts, bytes, whether it decodes),
//!   and what was redacted.
//!
//! Every saved stream is replayed through the same decoder the conformance
//! tests and `cargo xtask decode-stream` use before the command reports
//! success. See `docs/eval.md`, "Recording provider streams".

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, bail};
use lumen::{BrowserTab as _, SessionOptions};
use lumen_core::{Image, ImageFormat, ImageScale, ModelEvent, Screenshot, Size};
use lumen_models::{AdapterOptions, WireEvent, WireObserver, create_adapter_with_env};
use lumen_models::{Provider, decode_recording_blocking, reframe_recording};
use serde_json::{Value, json};

use crate::eval::catalogue::Dataset;
use crate::eval::dates::{Date, shift_dates};
use crate::eval::runner;
use crate::util;

/// Environment variables that may hold an API key; every value found is
/// scrubbed from everything saved, whichever provider runs.
const KEY_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// Request headers whose values are never saved.
const SECRET_REQUEST_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
    "openai-organization",
    "openai-project",
    "x-goog-user-project",
];

/// Response headers whose values are never saved: cookies, account ids and
/// the ids that find this exact request in the provider's logs.
const SECRET_RESPONSE_HEADERS: &[&str] = &[
    "set-cookie",
    "openai-organization",
    "openai-project",
    "anthropic-organization-id",
    "request-id",
    "x-request-id",
    "anthropic-request-id",
    "x-goog-request-id",
    "cf-ray",
    "x-cloud-trace-context",
];

/// Response headers whose values name the account: also scrubbed from
/// every body where they appear.
const ACCOUNT_HEADERS: &[&str] = &[
    "openai-organization",
    "openai-project",
    "anthropic-organization-id",
];

/// What replaces a screenshot's base64 in a saved request.
pub(crate) const IMAGE_PLACEHOLDER: &str = "LUMEN-RECORD-IMAGE-REMOVED";

/// Options of `cargo xtask record`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    /// The model (`provider/model`), as for `lumen run`.
    #[arg(long)]
    pub(crate) model: String,
    /// The API base URL (default: the provider's environment variable, then
    /// its public endpoint).
    #[arg(long)]
    pub(crate) base_url: Option<String>,
    /// Where the run starts (with an instruction).
    #[arg(long)]
    pub(crate) url: Option<String>,
    /// A WebVoyager task id (`Allrecipes--3`) instead of an instruction: its
    /// question (dates shifted as in `cargo xtask eval`) from its start page.
    #[arg(long, conflicts_with_all = ["instruction", "url"])]
    pub(crate) task: Option<String>,
    /// Step budget.
    #[arg(long, default_value_t = 8)]
    pub(crate) max_steps: u32,
    /// Time limit of the run in seconds.
    #[arg(long, default_value_t = 300)]
    pub(crate) timeout: u64,
    /// Output folder (default
    /// `fixtures/provider-streams/lumen-recorded/<provider>/<date>-<name>`).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// The run's own trace folder, kept out of the fixtures (default
    /// `target/record/<date>-<name>`).
    #[arg(long)]
    pub(crate) trace_dir: Option<PathBuf>,
    /// Replace an output folder that exists already.
    #[arg(long)]
    pub(crate) force: bool,
    /// The Chromium binary (default as for `cargo xtask eval`).
    #[arg(long)]
    pub(crate) chrome: Option<PathBuf>,
    /// The task for the agent (with `--url`), unless `--task` names one.
    pub(crate) instruction: Option<String>,
}

/// `cargo xtask record`.
pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let root = util::project_root()?;
    let recording = runtime.block_on(record(options, &root, |name| std::env::var(name).ok()))?;
    println!(
        "record: {} call(s), {} stream(s) saved in {} (trace: {})",
        recording.calls,
        recording.streams.len(),
        recording.out.display(),
        recording.trace.display()
    );
    for warning in &recording.warnings {
        println!("  warning: {warning}");
    }
    println!(
        "  replay one with: cargo xtask decode-stream --provider {} --screen {} {}",
        recording.provider.name(),
        recording.screen,
        recording
            .streams
            .first()
            .map_or_else(|| "<file>".to_owned(), |p| p.display().to_string())
    );
    Ok(())
}

/// What a recording left behind.
#[derive(Debug)]
pub(crate) struct Recording {
    pub(crate) out: PathBuf,
    pub(crate) trace: PathBuf,
    pub(crate) provider: Provider,
    /// `WIDTHxHEIGHT` of the screenshots (for `decode-stream --screen`).
    pub(crate) screen: String,
    pub(crate) calls: usize,
    /// The saved streams, in call order.
    pub(crate) streams: Vec<PathBuf>,
    /// Streams that do not decode, answers that were errors.
    pub(crate) warnings: Vec<String>,
}

/// The protocol a model string speaks (as `create_adapter` reads it).
pub(crate) fn provider_of(model: &str) -> Provider {
    match model.split_once('/').map(|(p, _)| p) {
        Some("anthropic") => Provider::Anthropic,
        Some("openai") => Provider::OpenAi,
        Some("google") => Provider::Google,
        _ => Provider::Compatible,
    }
}

/// Runs the task and writes the recording. `env` stands for the process
/// environment (keys and base URLs are read through it).
pub(crate) async fn record(
    options: &Options,
    root: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Recording> {
    let today = Date::today_utc();
    let (instruction, start_url, task_id) = match (&options.task, &options.instruction) {
        (Some(id), _) => {
            let data = Dataset::load(&root.join("fixtures/webvoyager"))?;
            let task = data
                .tasks
                .iter()
                .find(|t| &t.id == id)
                .with_context(|| format!("no WebVoyager task {id:?} in fixtures/webvoyager"))?;
            (
                shift_dates(&task.question, today).text,
                task.start_url.clone(),
                Some(id.clone()),
            )
        }
        (None, Some(instruction)) => {
            let Some(url) = &options.url else {
                bail!("pass --url with an instruction (or --task ID)");
            };
            (instruction.clone(), url.clone(), None)
        }
        (None, None) => bail!("pass an instruction and --url, or --task ID"),
    };
    let provider = provider_of(&options.model);
    let name = format!(
        "{}-{}",
        today.iso(),
        task_id
            .as_deref()
            .map_or_else(|| lumen_trace::slug(&instruction), crate::eval::slug)
    );
    let out = options.out.clone().unwrap_or_else(|| {
        root.join("fixtures/provider-streams/lumen-recorded")
            .join(provider.name())
            .join(&name)
    });
    let trace = options
        .trace_dir
        .clone()
        .unwrap_or_else(|| root.join("target/record").join(&name));
    if out.exists() && std::fs::read_dir(&out)?.next().is_some() {
        if !options.force {
            bail!(
                "{} exists already; pass --force to replace it or --out for another folder",
                out.display()
            );
        }
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }

    let tape = Arc::new(Mutex::new(Tape::default()));
    let sink = Arc::clone(&tape);
    let observer = WireObserver::new(move |event| {
        sink.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .see(event);
    });
    let adapter = create_adapter_with_env(
        &options.model,
        AdapterOptions {
            base_url: options.base_url.clone(),
            wire_observer: Some(observer),
            ..AdapterOptions::default()
        },
        &env,
    )
    .map_err(|e| anyhow::anyhow!("the model {}: {e}", options.model))?;

    let _ = std::fs::remove_dir_all(&trace);
    let tab = runner::launch(options.chrome.as_deref()).await?;
    let opened = tab
        .goto(&start_url)
        .await
        .map_err(|e| anyhow::anyhow!("opening {start_url}: {e}"));
    let run = match opened {
        Ok(o) if o.ok => {
            runner::run_task(
                Arc::clone(&tab),
                adapter,
                &instruction,
                SessionOptions {
                    max_steps: options.max_steps,
                    ..SessionOptions::default()
                },
                Duration::from_secs(options.timeout),
                &trace,
                1,
            )
            .await
        }
        Ok(o) => Err(anyhow::anyhow!(
            "opening {start_url} failed: {}",
            o.error.unwrap_or_default()
        )),
        Err(e) => Err(e),
    };
    let _ = tab.close().await;
    let run = run?;
    let shot = run.screenshots.last().map(Image::size);
    let screen = shot.unwrap_or(Size::new(1280, 720));

    let tape = std::mem::take(&mut *tape.lock().unwrap_or_else(PoisonError::into_inner));
    let keys: Vec<String> = KEY_VARS
        .iter()
        .filter_map(|v| env(v))
        .filter(|v| !v.trim().is_empty())
        .collect();
    let mut sanitizer = Sanitizer::new(keys);
    let head = Head {
        provider,
        model: &options.model,
        date: today.iso(),
        instruction: &instruction,
        task: task_id.as_deref(),
        start_url: &start_url,
        base_url_overridden: options.base_url.is_some(),
        screen,
        status: run.status(),
        steps: run.result.as_ref().map_or(run.steps, |r| r.steps),
    };
    let mut recording = write(&tape, &head, &mut sanitizer, &out)?;
    recording.trace = trace;
    Ok(recording)
}

/// One attempt of one call, as the observer saw it.
#[derive(Debug, Default)]
struct Attempt {
    url: String,
    headers: Vec<(String, String)>,
    body: Value,
    stream: bool,
    status: Option<u16>,
    response_headers: Vec<(String, String)>,
    bytes: Vec<u8>,
    /// `Some(None)`: ended cleanly; `Some(Some(e))`: ended with `e`.
    end: Option<Option<String>>,
}

/// One model call: its attempts, in order.
#[derive(Debug, Default)]
struct Call {
    id: u64,
    attempts: Vec<Attempt>,
}

/// Everything the observer saw, in call order.
#[derive(Debug, Default)]
struct Tape {
    calls: Vec<Call>,
}

impl Tape {
    fn see(&mut self, event: &WireEvent<'_>) {
        match event {
            WireEvent::Request {
                call,
                url,
                headers,
                body,
                stream,
                ..
            } => {
                let attempt = Attempt {
                    url: (*url).to_owned(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), v.clone()))
                        .collect(),
                    body: (*body).clone(),
                    stream: *stream,
                    ..Attempt::default()
                };
                match self.calls.iter_mut().find(|c| c.id == *call) {
                    Some(c) => c.attempts.push(attempt),
                    None => self.calls.push(Call {
                        id: *call,
                        attempts: vec![attempt],
                    }),
                }
            }
            WireEvent::Response {
                call,
                status,
                headers,
                ..
            } => {
                if let Some(a) = self.last(*call) {
                    a.status = Some(*status);
                    a.response_headers = headers.to_vec();
                }
            }
            WireEvent::Body { call, bytes } => {
                if let Some(a) = self.last(*call) {
                    a.bytes.extend_from_slice(bytes);
                }
            }
            WireEvent::End { call, error } => {
                if let Some(a) = self.last(*call) {
                    a.end = Some(error.map(str::to_owned));
                }
            }
            _ => {}
        }
    }

    fn last(&mut self, call: u64) -> Option<&mut Attempt> {
        self.calls
            .iter_mut()
            .find(|c| c.id == call)
            .and_then(|c| c.attempts.last_mut())
    }
}

/// Removes what must not be published from requests, headers and bodies,
/// and keeps a list of what it removed.
#[derive(Debug)]
pub(crate) struct Sanitizer {
    /// Values replaced wherever they appear, with their placeholder.
    values: Vec<(String, &'static str)>,
    /// How often each placeholder was put in.
    pub(crate) counts: std::collections::BTreeMap<&'static str, usize>,
    /// Header names whose values were withheld.
    pub(crate) headers: std::collections::BTreeSet<String>,
    /// Each screenshot taken out of a request: (file, JSON pointer, mime
    /// type, base64 length).
    pub(crate) images: Vec<Value>,
}

impl Sanitizer {
    /// A sanitizer that also scrubs each of `keys` (too short a "key" —
    /// under 8 characters — would match ordinary text and is ignored).
    pub(crate) fn new(keys: Vec<String>) -> Self {
        let mut values: Vec<(String, &'static str)> = keys
            .into_iter()
            .filter(|k| k.len() >= 8)
            .map(|k| (k, "[redacted-api-key]"))
            .collect();
        values.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        values.dedup();
        Self {
            values,
            counts: std::collections::BTreeMap::new(),
            headers: std::collections::BTreeSet::new(),
            images: Vec::new(),
        }
    }

    /// Learns the account ids a response names (so they are scrubbed from
    /// bodies too).
    fn learn(&mut self, headers: &[(String, String)]) {
        for (name, value) in headers {
            if ACCOUNT_HEADERS.contains(&name.to_ascii_lowercase().as_str())
                && value.len() >= 4
                && !self.values.iter().any(|(v, _)| v == value)
            {
                self.values.push((value.clone(), "[redacted-account-id]"));
                self.values.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
            }
        }
    }

    /// `bytes` with every known secret value replaced.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for (value, placeholder) in &self.values {
            let (replaced, n) = replace_all(&out, value.as_bytes(), placeholder.as_bytes());
            if n > 0 {
                *self.counts.entry(placeholder).or_default() += n;
                out = replaced;
            }
        }
        out
    }

    /// `text` with every known secret value replaced.
    pub(crate) fn text(&mut self, text: &str) -> String {
        String::from_utf8_lossy(&self.bytes(text.as_bytes())).into_owned()
    }

    /// Headers with secret values withheld (the name stays, so the shape of
    /// the request is still visible).
    pub(crate) fn headers(
        &mut self,
        headers: &[(String, String)],
        secret: &[&str],
    ) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(name, value)| {
                let lower = name.to_ascii_lowercase();
                if secret.contains(&lower.as_str()) || value == "[redacted]" {
                    self.headers.insert(lower);
                    (name.clone(), "[redacted]".to_owned())
                } else {
                    (name.clone(), self.text(value))
                }
            })
            .collect()
    }

    /// A request body with every embedded image replaced by the placeholder
    /// and secret values scrubbed. `file` names the request file in the
    /// image list.
    pub(crate) fn body(&mut self, body: &Value, file: &str) -> Value {
        let mut body = body.clone();
        self.strip_images(&mut body, String::new(), file);
        let text = body.to_string();
        let clean = self.text(&text);
        serde_json::from_str(&clean).unwrap_or(Value::String(clean))
    }

    fn strip_images(&mut self, value: &mut Value, pointer: String, file: &str) {
        match value {
            Value::Object(map) => {
                let mime = ["media_type", "mimeType", "mime_type"]
                    .iter()
                    .find_map(|k| map.get(*k).and_then(Value::as_str))
                    .map(str::to_owned);
                for (key, child) in map.iter_mut() {
                    let at = format!("{pointer}/{key}");
                    if key == "data"
                        && let (Some(mime), Value::String(data)) = (&mime, &*child)
                        && looks_like_base64(data)
                    {
                        self.note_image(file, &at, mime, data.len());
                        *child = Value::String(IMAGE_PLACEHOLDER.to_owned());
                    } else {
                        self.strip_images(child, at, file);
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter_mut().enumerate() {
                    self.strip_images(child, format!("{pointer}/{i}"), file);
                }
            }
            Value::String(s) => {
                if let Some(rest) = s.strip_prefix("data:")
                    && let Some((mime, data)) = rest.split_once(";base64,")
                {
                    let mime = mime.to_owned();
                    self.note_image(file, &pointer, &mime, data.len());
                    *s = format!("data:{mime};base64,{IMAGE_PLACEHOLDER}");
                } else if s.len() >= 1000 && looks_like_base64(s) {
                    self.note_image(file, &pointer, "unknown", s.len());
                    *s = IMAGE_PLACEHOLDER.to_owned();
                }
            }
            _ => {}
        }
    }

    fn note_image(&mut self, file: &str, pointer: &str, mime: &str, len: usize) {
        self.images.push(json!({
            "file": file,
            "at": pointer,
            "mime": mime,
            "base64_chars": len,
        }));
    }

    /// What was redacted, for the metadata.
    fn summary(&self) -> Value {
        json!({
            "headers_withheld": self.headers,
            "replaced_in_bodies": self.counts,
            "request_ids": "response headers naming the request (request-id, x-request-id, cf-ray, …) are withheld; ids inside the answers (msg_…, resp_…) are kept: the protocol uses them",
            "images": {
                "placeholder": IMAGE_PLACEHOLDER,
                "note": "each screenshot (base64) in a request was replaced by the placeholder",
                "removed": self.images,
            },
        })
    }
}

/// Whether `s` is plausibly base64 (non-empty, only base64 characters).
fn looks_like_base64(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
}

/// `haystack` with every `needle` replaced by `with`, and how many there
/// were.
fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> (Vec<u8>, usize) {
    if needle.is_empty() || haystack.len() < needle.len() {
        return (haystack.to_vec(), 0);
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut n = 0;
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
            n += 1;
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    (out, n)
}

/// The path and query of a URL (the host may name a private gateway).
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    match rest.find('/') {
        Some(i) => rest[i..].to_owned(),
        None => "/".to_owned(),
    }
}

/// What the metadata says about the run.
struct Head<'a> {
    provider: Provider,
    model: &'a str,
    date: String,
    instruction: &'a str,
    task: Option<&'a str>,
    start_url: &'a str,
    base_url_overridden: bool,
    screen: Size,
    status: String,
    steps: u32,
}

/// Decodes a saved stream as the conformance tests do; returns (events,
/// actions) or the first error.
pub(crate) fn check_stream(
    provider: Provider,
    text: &str,
    screen: Size,
) -> Result<(usize, usize), String> {
    let screenshot = Screenshot {
        image: Image::new(ImageFormat::Png, screen.width, screen.height, Vec::new()),
        viewport: screen,
        scale: ImageScale::IDENTITY,
    };
    let sse = reframe_recording(text);
    let events = decode_recording_blocking(provider, &screenshot, vec![sse.into_bytes()])
        .map_err(|e| e.to_string())?;
    let mut actions = 0;
    for item in &events {
        match item {
            Ok(ModelEvent::Action(_)) => actions += 1,
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    if !events
        .iter()
        .any(|e| matches!(e, Ok(ModelEvent::Completed(_))))
    {
        return Err("the stream never completes".into());
    }
    Ok((events.len(), actions))
}

/// Writes the folder from the tape.
fn write(
    tape: &Tape,
    head: &Head<'_>,
    sanitizer: &mut Sanitizer,
    out: &Path,
) -> anyhow::Result<Recording> {
    for dir in ["streams", "requests"] {
        std::fs::create_dir_all(out.join(dir))
            .with_context(|| format!("creating {}", out.join(dir).display()))?;
    }
    let save = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    // Account ids first, so every body is scrubbed of them.
    for call in &tape.calls {
        for attempt in &call.attempts {
            sanitizer.learn(&attempt.response_headers);
        }
    }
    let mut calls = Vec::new();
    let mut streams = Vec::new();
    let mut warnings = Vec::new();
    for (index, call) in tape.calls.iter().enumerate() {
        let n = format!("call-{:02}", index + 1);
        let Some(last) = call.attempts.last() else {
            continue;
        };
        let request_file = format!("requests/{n}.json");
        let request = json!({
            "method": "POST",
            "path": sanitizer.text(&path_of(&last.url)),
            "headers": sanitizer.headers(&last.headers, SECRET_REQUEST_HEADERS),
            "stream": last.stream,
            "body": sanitizer.body(&last.body, &request_file),
        });
        save(
            &out.join(&request_file),
            serde_json::to_string_pretty(&request)?.as_bytes(),
        )?;
        let mut earlier = Vec::new();
        for failed in &call.attempts[..call.attempts.len() - 1] {
            let body = sanitizer.bytes(&failed.bytes);
            let body = String::from_utf8_lossy(&body);
            earlier.push(json!({
                "status": failed.status,
                "body": body.chars().take(2000).collect::<String>(),
                "error": failed.end.clone().flatten(),
            }));
        }
        let ok = last.status.is_some_and(|s| (200..300).contains(&s));
        let body = sanitizer.bytes(&last.bytes);
        let mut entry = json!({
            "call": index + 1,
            "request": request_file,
            "status": last.status,
            "attempts": call.attempts.len(),
            "failed_attempts": earlier,
            "response_headers": sanitizer.headers(&last.response_headers, SECRET_RESPONSE_HEADERS),
            "bytes": body.len(),
            "complete": matches!(last.end, Some(None)),
            "error": last.end.clone().flatten(),
        });
        if ok && last.stream {
            let file = format!("streams/{n}.sse");
            save(&out.join(&file), &body)?;
            let check = check_stream(head.provider, &String::from_utf8_lossy(&body), head.screen);
            match &check {
                Ok((events, actions)) => {
                    entry["stream"] = json!(file);
                    entry["decodes"] = json!(true);
                    entry["events"] = json!(events);
                    entry["actions"] = json!(actions);
                }
                Err(e) => {
                    entry["stream"] = json!(file);
                    entry["decodes"] = json!(false);
                    entry["decode_error"] = json!(e);
                    warnings.push(format!("{file} does not decode: {e}"));
                }
            }
            streams.push(out.join(file));
        } else if ok {
            std::fs::create_dir_all(out.join("answers"))?;
            let file = format!("answers/{n}.json");
            save(&out.join(&file), &body)?;
            entry["answer"] = json!(file);
        } else {
            warnings.push(format!(
                "call {} ended with HTTP {}",
                index + 1,
                last.status
                    .map_or_else(|| "(no answer)".to_owned(), |s| s.to_string())
            ));
        }
        calls.push(entry);
    }
    let metadata = json!({
        "recorder": "cargo xtask record",
        "lumen_version": env!("CARGO_PKG_VERSION"),
        "provider": head.provider.name(),
        "model": head.model,
        "date": head.date,
        "task": head.task,
        "instruction": sanitizer.text(head.instruction),
        "start_url": sanitizer.text(head.start_url),
        "base_url": if head.base_url_overridden { "overridden (--base-url; host not recorded)" } else { "the provider's default or its environment variable" },
        "screen": format!("{}x{}", head.screen.width, head.screen.height),
        "decode_with": format!(
            "cargo xtask decode-stream --provider {} --screen {}x{} <stream>",
            head.provider.name(),
            head.screen.width,
            head.screen.height
        ),
        "run": {"status": head.status, "steps": head.steps},
        "calls": calls,
        "redacted": sanitizer.summary(),
        "licence": "Recorded by the Lumen project with its own prompts against the provider named above; the answers are that model's output, kept as test input for lumen-models. Add a row for this folder to fixtures/provider-streams/README.md before committing it.",
    });
    save(
        &out.join("metadata.json"),
        serde_json::to_string_pretty(&metadata)?.as_bytes(),
    )?;
    Ok(Recording {
        out: out.to_path_buf(),
        trace: PathBuf::new(),
        provider: head.provider,
        screen: format!("{}x{}", head.screen.width, head.screen.height),
        calls: tape.calls.len(),
        streams,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use lumen_mock::FixtureServer;
    use lumen_mock::mock_provider::MockProvider;
    use lumen_mock::mock_provider::trajectory::{ScriptStep, Wire};

    use super::*;

    const KEY: &str = "sk-record-TEST-KEY-5f2c9e0a7b31";

    fn parse(args: &[&str]) -> Options {
        let mut argv = vec!["record"];
        argv.extend_from_slice(args);
        <Options as clap::FromArgMatches>::from_arg_matches(
            &<Options as clap::Args>::augment_args(clap::Command::new("record"))
                .get_matches_from(argv),
        )
        .unwrap()
    }

    /// Every file under `dir`, as text (lossy), with its path.
    fn every_file(dir: &Path) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(every_file(&path));
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                out.push((path, text));
            }
        }
        out
    }

    /// A short real run (click, then finish) recorded for each of the four
    /// wire formats against the mock provider over real HTTP: each saved
    /// stream decodes through `cargo xtask decode-stream`'s own code path
    /// and the conformance tests' decoder, the key that went over the wire
    /// appears in no saved file, and the screenshots in the requests are
    /// placeholders listed in the metadata.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_a_run_for_every_wire_format_and_saves_no_key() {
        let root = util::project_root().unwrap();
        let site = FixtureServer::start_at(root.join("fixtures/sites/eval"))
            .await
            .unwrap();
        let base = std::env::temp_dir().join(format!("lumen-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for wire in Wire::ALL {
            let mock = MockProvider::start().await.unwrap();
            mock.push(
                wire.route(),
                wire.turn(0, &[ScriptStep::Click(200, 150)], (1280, 720)),
            );
            mock.push(
                wire.route(),
                wire.turn(1, &[ScriptStep::Done("v0.4.2".into())], (1280, 720)),
            );
            let out = base.join(wire.name());
            let start = site.url("repo.html");
            let base_url = wire.base_url(&mock);
            let out_arg = out.display().to_string();
            let trace_arg = base
                .join(format!("{}-trace", wire.name()))
                .display()
                .to_string();
            let options = parse(&[
                "--model",
                wire.model(),
                "--base-url",
                &base_url,
                "--url",
                &start,
                "--out",
                &out_arg,
                "--trace-dir",
                &trace_arg,
                "--max-steps",
                "4",
                "Open the repository and report its latest release.",
            ]);
            let env = |name: &str| KEY_VARS.contains(&name).then(|| KEY.to_owned());
            let recording = record(&options, &root, env).await.unwrap();
            let name = wire.name();

            // The key really went over the wire, in a header…
            let requests = mock.requests();
            assert_eq!(requests.len(), 2, "{name}: two model calls");
            assert!(
                requests.iter().all(|r| !r.key_headers.is_empty()),
                "{name}: the key was sent"
            );
            // …and is in no saved file, nor is any auth header value.
            let files = every_file(&out);
            assert!(files.len() >= 5, "{name}: {files:?}");
            for (path, text) in &files {
                assert!(!text.contains(KEY), "{name}: the key in {}", path.display());
                assert!(!text.contains("Bearer sk-"), "{}", path.display());
            }

            assert_eq!(recording.streams.len(), 2, "{name}");
            assert!(
                recording.warnings.is_empty(),
                "{name}: {:?}",
                recording.warnings
            );
            let provider = provider_of(wire.model());
            let mut actions = 0;
            for stream in &recording.streams {
                assert!(stream.starts_with(out.join("streams")));
                // decode-stream's own path: it fails on a stream that does
                // not decode.
                let path = stream.display().to_string();
                let decode =
                    <crate::decode_stream::Options as clap::FromArgMatches>::from_arg_matches(
                        &<crate::decode_stream::Options as clap::Args>::augment_args(
                            clap::Command::new("decode-stream"),
                        )
                        .get_matches_from([
                            "decode-stream",
                            "--provider",
                            provider.name(),
                            "--screen",
                            &recording.screen,
                            &path,
                        ]),
                    )
                    .unwrap();
                crate::decode_stream::run(&decode).unwrap();
                let text = std::fs::read_to_string(stream).unwrap();
                actions += check_stream(provider, &text, Size::new(1280, 720))
                    .unwrap()
                    .1;
            }
            assert!(actions >= 2, "{name}: the click and the finish decode");

            let meta: Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("metadata.json")).unwrap())
                    .unwrap();
            assert_eq!(meta["provider"], provider.name());
            assert_eq!(meta["model"], wire.model());
            assert_eq!(meta["run"]["status"], "success", "{name}: {meta}");
            assert_eq!(meta["calls"].as_array().unwrap().len(), 2);
            assert_eq!(meta["calls"][0]["decodes"], true);
            let images = meta["redacted"]["images"]["removed"].as_array().unwrap();
            assert!(images.len() >= 2, "{name}: a screenshot per call: {meta}");
            let request = std::fs::read_to_string(out.join("requests/call-01.json")).unwrap();
            assert!(request.contains(IMAGE_PLACEHOLDER), "{name}");
            assert!(
                !request.contains("/9j/") && !request.contains("iVBORw0KGgo"),
                "{name}: no JPEG or PNG base64 left"
            );
            let headers = meta["redacted"]["headers_withheld"].to_string();
            assert!(
                headers.contains("authorization") || headers.contains("api-key"),
                "{name}: {headers}"
            );
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_sanitizer_withholds_secrets_ids_and_images() {
        let mut s = Sanitizer::new(vec!["sk-live-abcdef123456".into(), "short".into()]);
        s.learn(&[("openai-organization".into(), "org-ACME42".into())]);
        let headers = s.headers(
            &[
                ("authorization".into(), "[redacted]".into()),
                ("openai-organization".into(), "org-ACME42".into()),
                ("anthropic-version".into(), "2023-06-01".into()),
            ],
            SECRET_REQUEST_HEADERS,
        );
        assert_eq!(headers[0].1, "[redacted]");
        assert_eq!(headers[1].1, "[redacted]");
        assert_eq!(headers[2].1, "2023-06-01");
        let response = s.headers(
            &[
                ("request-id".into(), "req_011CUX".into()),
                ("set-cookie".into(), "__cf_bm=xyz".into()),
                ("content-type".into(), "text/event-stream".into()),
            ],
            SECRET_RESPONSE_HEADERS,
        );
        assert_eq!(
            response.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>(),
            ["[redacted]", "[redacted]", "text/event-stream"]
        );
        let body = s.bytes(
            b"data: {\"org\":\"org-ACME42\",\"echo\":\"sk-live-abcdef123456\",\"t\":\"short\"}\n\n",
        );
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "data: {\"org\":\"[redacted-account-id]\",\"echo\":\"[redacted-api-key]\",\"t\":\"short\"}\n\n"
        );
        let png = "iVBORw0KGgoAAAANSUhEUgAA".repeat(60);
        let request = json!({
            "messages": [{"content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                {"type": "image_url", "image_url": {"url": format!("data:image/jpeg;base64,{png}")}},
                {"inlineData": {"mimeType": "image/png", "data": png}},
                {"type": "text", "text": "Click the button"},
            ]}]
        });
        let clean = s.body(&request, "requests/call-01.json").to_string();
        assert!(!clean.contains("iVBORw0KGgo"), "{clean}");
        assert_eq!(clean.matches(IMAGE_PLACEHOLDER).count(), 3);
        assert!(clean.contains("data:image/jpeg;base64,LUMEN-RECORD-IMAGE-REMOVED"));
        assert!(clean.contains("Click the button"));
        assert_eq!(s.images.len(), 3);
        assert_eq!(s.images[0]["at"], "/messages/0/content/0/source/data");
        assert_eq!(s.counts["[redacted-api-key]"], 1);
        assert_eq!(
            path_of("https://gw.example.com/v1/messages?x=1"),
            "/v1/messages?x=1"
        );
        assert_eq!(provider_of("gpt-4o"), Provider::Compatible);
    }
}

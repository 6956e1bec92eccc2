//! Completion verifiers: a terminate is a request, and these decide whether
//! to accept it.
//!
//! - [`UrlMatchesGate`]: the current URL must match a regular expression.
//! - [`CustomGate`]: an async closure over the screenshot and URL.
//! - [`ModelVerifier`]: asks a model, through any [`ModelAdapter`], whether
//!   the task is complete; reads YES/NO from whatever form the adapter
//!   returns and accepts without asking once `max_attempts` terminates were
//!   rejected, so a run can never loop on its verifier.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};

use lumen_core::{
    Action, LumenError, ModelAdapter, ModelInfo, ModelResponse, Result, Screenshot, StepContext,
    TerminateStatus, Verifier, VerifyInput, VerifyResult, WireRecord, WireScreenshot,
};
use regex::Regex;

/// Passes when the current URL matches a regular expression.
#[derive(Debug, Clone)]
pub struct UrlMatchesGate {
    pattern: Regex,
}

impl UrlMatchesGate {
    /// A gate on `pattern` (Rust `regex` syntax, unanchored: use `^…$` to
    /// match the whole URL).
    pub fn new(pattern: &str) -> Result<Self> {
        let pattern = Regex::new(pattern)
            .map_err(|e| LumenError::config("verifier.urlPattern", e.to_string()))?;
        Ok(Self { pattern })
    }
}

#[async_trait::async_trait]
impl Verifier for UrlMatchesGate {
    async fn verify(&self, input: &VerifyInput<'_>) -> Result<VerifyResult> {
        if self.pattern.is_match(input.url) {
            Ok(VerifyResult::pass())
        } else {
            Ok(VerifyResult::reject(format!(
                "the task is not finished: the page should be at a URL matching `{}`, but it is {}",
                self.pattern.as_str(),
                input.url
            )))
        }
    }
}

/// Passes when every verifier passes, asked in order; the first rejection
/// is the answer (later ones are not asked). Usage is summed, so a model
/// verifier's tokens count even behind a URL gate.
#[derive(Clone)]
pub struct AllOf(pub Vec<Arc<dyn Verifier>>);

impl fmt::Debug for AllOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AllOf({} verifiers)", self.0.len())
    }
}

#[async_trait::async_trait]
impl Verifier for AllOf {
    async fn verify(&self, input: &VerifyInput<'_>) -> Result<VerifyResult> {
        let mut usage = lumen_core::TokenUsage::default();
        let mut last = VerifyResult::pass();
        for v in &self.0 {
            let mut r = v.verify(input).await?;
            usage += r.usage;
            r.usage = usage;
            if !r.passed {
                return Ok(r);
            }
            last = r;
        }
        last.usage = usage;
        Ok(last)
    }
}

type GateFuture = Pin<Box<dyn Future<Output = bool> + Send>>;
type GateFn = dyn Fn(Screenshot, String) -> GateFuture + Send + Sync;

/// Passes when a user-supplied async check over the screenshot and the URL
/// returns `true`; otherwise rejects with a fixed reason.
#[derive(Clone)]
pub struct CustomGate {
    check: Arc<GateFn>,
    failure_reason: String,
}

impl fmt::Debug for CustomGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomGate")
            .field("failure_reason", &self.failure_reason)
            .finish_non_exhaustive()
    }
}

impl CustomGate {
    /// A gate running `check(screenshot, url)`; `failure_reason` is what the
    /// model is told when it returns `false`.
    pub fn new<F, Fut>(failure_reason: impl Into<String>, check: F) -> Self
    where
        F: Fn(Screenshot, String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        Self {
            check: Arc::new(move |shot, url| Box::pin(check(shot, url))),
            failure_reason: failure_reason.into(),
        }
    }
}

#[async_trait::async_trait]
impl Verifier for CustomGate {
    async fn verify(&self, input: &VerifyInput<'_>) -> Result<VerifyResult> {
        if (self.check)(input.screenshot.clone(), input.url.to_owned()).await {
            Ok(VerifyResult::pass())
        } else {
            Ok(VerifyResult::reject(self.failure_reason.clone()))
        }
    }
}

/// The default number of rejections after which [`ModelVerifier`] accepts
/// without asking.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 2;

/// The task a verifier model is given; the details are in the prompt.
const VERIFY_INSTRUCTION: &str =
    "Check whether the browser agent's claim is correct; answer YES or NO.";

/// Asks a model whether the task is complete.
///
/// It calls [`ModelAdapter::step`] once per verification with a one-step
/// context: the question as the system prompt, the current screenshot as
/// the only wire record, temperature 0. The call's usage comes back in
/// [`VerifyResult::usage`], so the run counts it as the verifier's.
#[derive(Clone)]
pub struct ModelVerifier {
    adapter: Arc<dyn ModelAdapter>,
    max_attempts: u32,
}

impl fmt::Debug for ModelVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelVerifier")
            .field("model", &self.adapter.info().model_id)
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}

impl ModelVerifier {
    /// A verifier asking `adapter`, accepting without asking after
    /// [`DEFAULT_MAX_ATTEMPTS`] rejections.
    pub fn new(adapter: Arc<dyn ModelAdapter>) -> Self {
        Self {
            adapter,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// Sets how many rejections are allowed before it accepts without
    /// asking (0: never asks).
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The question put to the model.
    pub fn prompt(input: &VerifyInput<'_>) -> String {
        let claim = match input.status {
            TerminateStatus::Success => format!(
                "The agent reports that it has finished, with this answer:\n{}",
                input.result
            ),
            TerminateStatus::Failure => format!(
                "The agent reports that the task cannot be done, because:\n{}",
                input.result
            ),
        };
        format!(
            "You are checking the work of a browser agent; you do not act on the page.\n\n\
             Task given to the agent:\n{}\n\n{claim}\n\nCurrent URL: {}\n\n\
             The screenshot shows the page as it is now. Judge only from it, the URL and the \
             claim: is the claim correct and supported by what is visible? Reply with YES or NO \
             as the very first word, then one sentence saying why.",
            input.instruction, input.url
        )
    }
}

#[async_trait::async_trait]
impl Verifier for ModelVerifier {
    fn model(&self) -> Option<&ModelInfo> {
        Some(self.adapter.info())
    }

    async fn verify(&self, input: &VerifyInput<'_>) -> Result<VerifyResult> {
        if input.attempt >= self.max_attempts {
            return Ok(VerifyResult {
                reason: Some(format!(
                    "accepted without model verification after {} rejected attempt(s)",
                    input.attempt
                )),
                ..VerifyResult::pass()
            });
        }
        let prompt = Self::prompt(input);
        let wire = [WireRecord::Screenshot(WireScreenshot {
            step: 0,
            image: Some(input.screenshot.image.clone()),
            compressed: false,
            url: Some(input.url.to_owned()),
            tabs: Vec::new(),
        })];
        let ctx = StepContext {
            step: 0,
            max_steps: 1,
            instruction: VERIFY_INSTRUCTION,
            system_prompt: &prompt,
            screenshot: input.screenshot,
            wire: &wire,
            state: input.state,
            url: input.url,
            temperature: Some(0.0),
            cursor: None,
        };
        let response = self.adapter.step(&ctx).await?;
        let verdict = match verdict_of(&response) {
            Some(Verdict {
                complete: true,
                why,
            }) => VerifyResult {
                reason: (!why.is_empty()).then_some(why),
                ..VerifyResult::pass()
            },
            Some(Verdict {
                complete: false,
                why,
            }) => VerifyResult::reject(if why.is_empty() {
                "an independent check found the task not complete yet; look at the page again before terminating".to_owned()
            } else {
                format!("an independent check found the task not complete yet: {why}")
            }),
            None => VerifyResult::reject(
                "an independent check could not confirm the task is complete; make sure the answer is visible on the page, then terminate again",
            ),
        };
        Ok(verdict.with_usage(response.usage))
    }
}

/// A model's judgement, as read from its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// YES (true) or NO (false).
    pub complete: bool,
    /// The explanation that came with it (may be empty).
    pub why: String,
}

/// Reads a verdict from a model answer, whatever form the adapter gave it:
/// the text of a terminate call (adapters turn a text-only answer into
/// one), the turn's text, then the reasoning, newest block first. When
/// none of them holds a YES or NO, the status of a terminate call decides
/// (`success` as YES); otherwise `None`.
pub fn verdict_of(response: &ModelResponse) -> Option<Verdict> {
    let turn = &response.turn;
    let mut texts: Vec<&str> = Vec::new();
    for call in &turn.calls {
        if let Action::Terminate { result, .. } = &call.action {
            texts.push(result);
        }
    }
    if let Some(t) = &turn.text {
        texts.push(t);
    }
    for block in turn.thinking.iter().rev() {
        texts.push(&block.text);
    }
    if let Some(v) = texts.iter().find_map(|t| parse_verdict(t)) {
        return Some(v);
    }
    turn.calls.iter().find_map(|c| match &c.action {
        Action::Terminate { status, result } => Some(Verdict {
            complete: *status == TerminateStatus::Success,
            why: result.trim().to_owned(),
        }),
        _ => None,
    })
}

static LABELLED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:verdict|answer|evaluation|decision|complete|completed)\b\s*[:=\-]\s*[*_`\x22']*\s*(yes|no|true|false)\b").ok()
});

static STANDALONE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\b(YES|NO)\b").ok());

/// Reads YES or NO from one piece of model text.
///
/// In order: a JSON object with a verdict-like key (`verdict`, `answer`,
/// `evaluation`, `complete`, `passed`…; string or boolean), a line that
/// starts with the verdict (after markdown and labels like `Answer:`), a
/// labelled verdict anywhere (`Verdict: NO`, the last one wins), and
/// finally a single upper-case YES or NO standing alone in the text.
pub fn parse_verdict(text: &str) -> Option<Verdict> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Some(v) = parse_json_verdict(text) {
        return Some(v);
    }
    for line in text.lines() {
        let cleaned = strip_decoration(line);
        if cleaned.is_empty() {
            continue;
        }
        if let Some(v) = leading_verdict(cleaned, text) {
            return Some(v);
        }
        // Only the first non-empty line may start with the verdict; later
        // lines are explanation ("No errors were shown…").
        break;
    }
    if let Some(re) = LABELLED.as_ref()
        && let Some(caps) = re.captures_iter(text).last()
        && let Some(word) = caps.get(1)
    {
        let complete = matches!(word.as_str().to_ascii_lowercase().as_str(), "yes" | "true");
        let why = text[word.end()..].trim_start_matches(|c: char| !c.is_alphanumeric());
        return Some(Verdict {
            complete,
            why: first_sentence(why),
        });
    }
    if let Some(re) = STANDALONE.as_ref() {
        let words: Vec<_> = re.find_iter(text).map(|m| m.as_str()).collect();
        let yes = words.contains(&"YES");
        let no = words.contains(&"NO");
        if yes != no {
            return Some(Verdict {
                complete: yes,
                why: String::new(),
            });
        }
    }
    None
}

fn strip_decoration(line: &str) -> &str {
    let mut s = line.trim();
    loop {
        let before = s;
        s = s
            .trim_start_matches(['*', '_', '#', '>', '`', '"', '\'', '-', ' '])
            .trim_start();
        let lower = s.to_ascii_lowercase();
        for label in [
            "final answer",
            "answer",
            "verdict",
            "evaluation",
            "decision",
            "result",
        ] {
            if lower.starts_with(label) {
                let rest = s[label.len()..].trim_start();
                if let Some(r) = rest.strip_prefix([':', '=', '-']) {
                    s = r.trim_start();
                }
            }
        }
        if s == before {
            return s;
        }
    }
}

fn leading_verdict(line: &str, whole: &str) -> Option<Verdict> {
    let end = line
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(line.len());
    let word = line[..end].to_ascii_lowercase();
    let complete = match word.as_str() {
        "yes" | "true" | "correct" => true,
        "no" | "false" | "incorrect" => false,
        _ => return None,
    };
    // The explanation: the rest of the line, else the next lines.
    let rest = line[end..].trim_start_matches(|c: char| !c.is_alphanumeric());
    // "YES or NO?" restates the question; it is not an answer.
    let lower_rest = rest.to_ascii_lowercase();
    if ["or no", "or yes", "/no", "/yes"]
        .iter()
        .any(|p| lower_rest.starts_with(p))
        || line[end..].starts_with('/')
    {
        return None;
    }
    let why = if rest.is_empty() {
        let after_first = whole.split_once('\n').map(|(_, r)| r).unwrap_or("");
        first_sentence(after_first.trim())
    } else {
        first_sentence(rest)
    };
    Some(Verdict { complete, why })
}

fn parse_json_verdict(text: &str) -> Option<Verdict> {
    let body = text
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let obj = value.as_object()?;
    let find = |keys: &[&str]| {
        obj.iter()
            .find(|(k, _)| keys.contains(&k.to_ascii_lowercase().as_str()))
            .map(|(_, v)| v)
    };
    let complete = match find(&[
        "verdict",
        "answer",
        "evaluation",
        "complete",
        "completed",
        "passed",
        "done",
        "success",
    ])? {
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "yes" | "true" | "pass" | "passed" | "complete" => true,
            "no" | "false" | "fail" | "failed" | "incomplete" => false,
            _ => return None,
        },
        _ => return None,
    };
    let why = find(&["reason", "reasoning", "explanation", "why"])
        .and_then(|v| v.as_str())
        .map(|s| first_sentence(s.trim()))
        .unwrap_or_default();
    Some(Verdict { complete, why })
}

/// Up to the end of the first sentence, at most 300 characters.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '.' | '!' | '?')
                && text[i + c.len_utf8()..]
                    .chars()
                    .next()
                    .is_none_or(char::is_whitespace)
        })
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(text.len());
    text[..end].chars().take(300).collect()
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;

//! Model fallback: a chain of adapters tried in order, moving on when a
//! model cannot answer at all (retired, not found, overloaded after every
//! retry), as browser-use's `fallback_llm` and Anthropic's server-side
//! fallbacks do, but across providers.
//!
//! The history is provider-neutral ([`lumen_core::WireRecord`]); each
//! adapter builds its own wire format from it and ignores the
//! provider-native replay data of another provider's turns, so a run that
//! started on Claude goes on on GPT with everything it saw and did. A
//! switch is told as a [`ModelNotice::Fallback`] (an event, a progress line
//! and a receipt in the report) and lasts for the rest of the run.
//!
//! Only a failure before an answer starts moves on: a stream that broke
//! after actions were yielded is the loop's to handle, as without a chain.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use lumen_core::{
    LumenError, ModelAdapter, ModelErrorKind, ModelInfo, ModelNotice, ModelResponse, ModelStream,
    NoticeSink, NoticeSlot, Result, StepContext, TaskState, TokenUsage, WireRecord,
};

/// One model of a chain.
struct Link {
    /// `provider/id`, as the user named it.
    model: String,
    adapter: Arc<dyn ModelAdapter>,
    /// The adapter's info with the chain's tightest image limits and
    /// context window, so a switch never meets a screenshot or a history
    /// sized for another model.
    info: ModelInfo,
}

/// Adapters tried in order; see the module docs.
pub struct FallbackAdapter {
    chain: Vec<Link>,
    active: AtomicUsize,
    notices: NoticeSlot,
    /// A switch made before the first call (a retired primary), told with
    /// the first call, when someone listens.
    pending: Mutex<Option<ModelNotice>>,
}

impl std::fmt::Debug for FallbackAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let models: Vec<&str> = self.chain.iter().map(|l| l.model.as_str()).collect();
        f.debug_struct("FallbackAdapter")
            .field("chain", &models)
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish()
    }
}

impl FallbackAdapter {
    /// A chain of `(provider/id, adapter)`, tried in order. Refuses an
    /// empty chain.
    pub fn new(chain: Vec<(String, Arc<dyn ModelAdapter>)>) -> Result<Self> {
        if chain.is_empty() {
            return Err(LumenError::config(
                "model",
                "a fallback chain needs a model",
            ));
        }
        let edge = chain
            .iter()
            .filter_map(|(_, a)| a.info().max_image_dimension)
            .min();
        let pixels = chain
            .iter()
            .filter_map(|(_, a)| a.info().max_image_pixels)
            .min();
        let context = chain
            .iter()
            .map(|(_, a)| a.info().context_window_tokens)
            .min()
            .unwrap_or_default();
        let chain = chain
            .into_iter()
            .map(|(model, adapter)| {
                let mut info = adapter.info().clone();
                info.max_image_dimension = edge.or(info.max_image_dimension);
                info.max_image_pixels = pixels.or(info.max_image_pixels);
                info.context_window_tokens = context;
                Link {
                    model,
                    adapter,
                    info,
                }
            })
            .collect();
        Ok(Self {
            chain,
            active: AtomicUsize::new(0),
            notices: NoticeSlot::default(),
            pending: Mutex::new(None),
        })
    }

    /// Remembers that the chain starts past a model that could not be built
    /// (`reason`: a retired primary); the switch is told with the first
    /// call.
    pub(crate) fn skipped(self, model: &str, reason: String) -> Self {
        let to = self.chain[0].model.clone();
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(ModelNotice::Fallback {
                from: model.to_owned(),
                to,
                reason,
            });
        self
    }

    /// The model in use now, as `provider/id`.
    pub fn active_model(&self) -> &str {
        &self.chain[self.active.load(Ordering::Relaxed)].model
    }

    fn tell(&self, notice: ModelNotice) {
        tracing::warn!(target: lumen_core::logs::ADAPTER, "{notice}");
        self.notices.tell(notice);
    }

    /// Runs `call` on the active model, moving down the chain while it
    /// fails in a way the next model can help with.
    async fn attempt<'a, T>(
        &'a self,
        call: impl Fn(&'a dyn ModelAdapter) -> BoxFuture<'a, Result<T>>,
    ) -> Result<T> {
        if self.notices.is_set()
            && let Some(notice) = self
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        {
            self.tell(notice);
        }
        let mut at = self.active.load(Ordering::Relaxed);
        loop {
            let error = match call(self.chain[at].adapter.as_ref()).await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            let Some(reason) = fallback_reason(&error) else {
                return Err(error);
            };
            if at + 1 >= self.chain.len() {
                return Err(error);
            }
            self.tell(ModelNotice::Fallback {
                from: self.chain[at].model.clone(),
                to: self.chain[at + 1].model.clone(),
                reason,
            });
            at += 1;
            self.active.store(at, Ordering::Relaxed);
        }
    }
}

/// Why another model may answer where this one failed: it is gone
/// (retired, not found: 404, or a 400 saying so) or overloaded after every
/// retry (529, 503). `None` for failures another model would share (a bad
/// key, a bad request, a broken stream, a cancel).
pub fn fallback_reason(error: &LumenError) -> Option<String> {
    match error {
        LumenError::MaxRetriesExceeded { attempts, last } => match last.as_ref() {
            LumenError::ModelApi {
                kind: ModelErrorKind::Overloaded,
                ..
            }
            | LumenError::ModelApi {
                status: Some(503 | 529),
                ..
            } => Some(format!("overloaded after {attempts} attempts: {last}")),
            _ => None,
        },
        LumenError::ModelApi {
            kind: ModelErrorKind::Overloaded,
            ..
        } => Some(format!("overloaded: {error}")),
        LumenError::ModelApi {
            status: Some(404), ..
        } => Some(format!("model not found: {error}")),
        LumenError::ModelApi {
            kind: ModelErrorKind::BadRequest,
            message,
            ..
        } if says_model_is_gone(message) => Some(format!("model retired: {error}")),
        _ => None,
    }
}

/// A provider's words for a model that no longer answers.
fn says_model_is_gone(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("model")
        && [
            "not found",
            "does not exist",
            "deprecated",
            "retired",
            "no longer",
            "shut down",
        ]
        .iter()
        .any(|w| m.contains(w))
}

#[async_trait::async_trait]
impl ModelAdapter for FallbackAdapter {
    fn info(&self) -> &ModelInfo {
        &self.chain[self.active.load(Ordering::Relaxed)].info
    }

    async fn stream(&self, ctx: &StepContext<'_>) -> Result<ModelStream> {
        self.attempt(|a| Box::pin(a.stream(ctx))).await
    }

    async fn step(&self, ctx: &StepContext<'_>) -> Result<ModelResponse> {
        self.attempt(|a| Box::pin(a.step(ctx))).await
    }

    fn estimate_tokens(&self, ctx: &StepContext<'_>) -> u64 {
        self.chain[self.active.load(Ordering::Relaxed)]
            .adapter
            .estimate_tokens(ctx)
    }

    async fn summarize(&self, wire: &[WireRecord], state: Option<&TaskState>) -> Result<String> {
        self.attempt(|a| Box::pin(a.summarize(wire, state))).await
    }

    async fn summarize_counted(
        &self,
        wire: &[WireRecord],
        state: Option<&TaskState>,
    ) -> Result<(String, TokenUsage)> {
        self.attempt(|a| Box::pin(a.summarize_counted(wire, state)))
            .await
    }

    fn set_notices(&self, sink: Option<NoticeSink>) {
        for link in &self.chain {
            link.adapter.set_notices(sink.clone());
        }
        self.notices.set(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: Option<u16>, kind: ModelErrorKind, message: &str) -> LumenError {
        LumenError::ModelApi {
            provider: "anthropic".into(),
            status,
            kind,
            retryable: false,
            message: message.into(),
            body: None,
            retry_after: None,
        }
    }

    #[test]
    fn only_failures_another_model_can_help_with_move_on() {
        let overloaded = api(Some(529), ModelErrorKind::Overloaded, "Overloaded");
        let moves = [
            api(Some(404), ModelErrorKind::BadRequest, "model: claude-x"),
            api(
                Some(400),
                ModelErrorKind::BadRequest,
                "The model `gpt-5` has been deprecated",
            ),
            LumenError::MaxRetriesExceeded {
                attempts: 5,
                last: Box::new(overloaded),
            },
            LumenError::MaxRetriesExceeded {
                attempts: 5,
                last: Box::new(api(Some(503), ModelErrorKind::Server, "unavailable")),
            },
        ];
        for e in &moves {
            assert!(fallback_reason(e).is_some(), "{e}");
        }
        let stays = [
            api(Some(401), ModelErrorKind::Auth, "invalid x-api-key"),
            api(
                Some(400),
                ModelErrorKind::BadRequest,
                "messages: field required",
            ),
            api(None, ModelErrorKind::Stream, "stream ended early"),
            LumenError::MaxRetriesExceeded {
                attempts: 5,
                last: Box::new(api(Some(429), ModelErrorKind::RateLimited, "slow down")),
            },
            LumenError::Cancelled {
                reason: "user".into(),
            },
        ];
        for e in &stays {
            assert!(fallback_reason(e).is_none(), "{e}");
        }
    }
}

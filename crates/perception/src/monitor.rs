//! Observing a run: the event bus the loop emits through, ready-made
//! monitors, and a bounded live event stream.
//!
//! Every event the loop emits is numbered and timestamped once (a
//! [`RecordedEvent`]) and then handed to each [`LoopMonitor`] (synchronous,
//! must not block) and to an optional bounded [`EventStream`]. The stream
//! applies backpressure to the loop for ordinary events, but screenshots are
//! dropped rather than waited for when the consumer is behind, so a slow
//! consumer slows a run down a little instead of growing memory without
//! bound.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::Stream;
use lumen_core::{ErrorInfo, LoopMonitor, RecordedEvent, StreamEvent};
use lumen_safety::Secrets;
use tokio::sync::mpsc;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A monitor that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMonitor;

impl LoopMonitor for NoopMonitor {
    fn on_event(&self, _event: &StreamEvent) {}
}

/// A monitor that logs each event through `tracing` (target `lumen::loop`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ConsoleMonitor;

impl LoopMonitor for ConsoleMonitor {
    fn on_event(&self, event: &StreamEvent) {
        match event {
            StreamEvent::RunStarted {
                instruction,
                model,
                max_steps,
            } => {
                tracing::info!(target: "lumen::loop", %model, max_steps, "run started: {instruction}")
            }
            StreamEvent::StepStarted { step, url } => {
                tracing::info!(target: "lumen::loop", step, %url, "step")
            }
            StreamEvent::Action { step, call } => {
                tracing::info!(target: "lumen::loop", step, action = call.action.kind(), "action {:?}", call.action)
            }
            StreamEvent::ActionResult {
                step,
                call,
                execution,
            } if !execution.ok => tracing::warn!(
                target: "lumen::loop", step, action = call.action.kind(),
                "action failed: {}", execution.error.as_deref().unwrap_or("")
            ),
            StreamEvent::ActionBlocked { step, call, reason } => {
                tracing::warn!(target: "lumen::loop", step, action = call.action.kind(), "blocked: {reason}")
            }
            StreamEvent::TerminationRejected { step, reason } => {
                tracing::warn!(target: "lumen::loop", step, "terminate rejected: {reason}")
            }
            StreamEvent::Nudge { step, level, .. } => {
                tracing::info!(target: "lumen::loop", step, level, "nudge")
            }
            StreamEvent::Compaction {
                step,
                tokens_before,
                tokens_after,
            } => {
                tracing::info!(target: "lumen::loop", step, tokens_before, tokens_after, "compacted")
            }
            StreamEvent::Error { error } => {
                tracing::error!(target: "lumen::loop", code = ?error.code, "{}", error.message)
            }
            StreamEvent::Done { status, steps, .. } => {
                tracing::info!(target: "lumen::loop", ?status, steps, "run finished")
            }
            _ => tracing::debug!(target: "lumen::loop", "{event:?}"),
        }
    }
}

/// The sending half of a bounded live event stream (held by the loop).
#[derive(Debug, Clone)]
pub struct EventSender {
    tx: mpsc::Sender<RecordedEvent>,
}

/// The receiving half: a `Stream` of recorded events, ending when the run's
/// bus is dropped.
#[derive(Debug)]
pub struct EventStream {
    rx: mpsc::Receiver<RecordedEvent>,
}

impl Stream for EventStream {
    type Item = RecordedEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RecordedEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// A bounded live event stream holding at most `capacity` undelivered events.
pub fn event_stream(capacity: usize) -> (EventSender, EventStream) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    (EventSender { tx }, EventStream { rx })
}

pub use lumen_core::Recorder;

/// Where the loop emits events: numbering, timestamps, redaction, monitors,
/// recorders and the optional live stream in one place.
///
/// Every event is redacted here, before any consumer sees it: whatever a
/// page, a model or an error message quotes of a secret reaches monitors,
/// logs, the server's streams and reports as its `<secret:NAME>`
/// placeholder.
#[derive(Clone, Default)]
pub struct EventBus {
    monitors: Vec<Arc<dyn LoopMonitor>>,
    recorders: Vec<Recorder>,
    stream: Option<EventSender>,
    seq: Arc<AtomicU64>,
    secrets: Option<Arc<Secrets>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("monitors", &self.monitors.len())
            .field("recorders", &self.recorders.len())
            .field("stream", &self.stream.is_some())
            .field("seq", &self.seq.load(Ordering::Relaxed))
            .finish()
    }
}

impl EventBus {
    /// A bus with no consumers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a monitor.
    pub fn with_monitor(mut self, monitor: Arc<dyn LoopMonitor>) -> Self {
        self.monitors.push(monitor);
        self
    }

    /// Adds a recorder.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorders.push(recorder);
        self
    }

    /// Attaches a live stream.
    pub fn with_stream(mut self, sender: EventSender) -> Self {
        self.stream = Some(sender);
        self
    }

    /// Redacts every event with `secrets` before delivering it. The loop
    /// sets this from its router, so a bus cannot miss the run's secrets.
    pub fn with_secrets(mut self, secrets: Arc<Secrets>) -> Self {
        self.secrets = (!secrets.is_empty()).then_some(secrets);
        self
    }

    /// Continues numbering from `next_seq` (a resumed run).
    pub fn starting_at(self, next_seq: u64) -> Self {
        self.seq.store(next_seq, Ordering::Relaxed);
        self
    }

    /// Numbers, timestamps and delivers one event. Waits while the live
    /// stream is full, except for screenshots, which are dropped instead; a
    /// closed stream (consumer gone) is ignored.
    pub async fn emit(&self, event: StreamEvent) -> RecordedEvent {
        let event = match &self.secrets {
            Some(secrets) => redacted(secrets, event),
            None => event,
        };
        let recorded = RecordedEvent {
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            timestamp_ms: now_ms(),
            event,
        };
        for m in &self.monitors {
            m.on_event(&recorded.event);
        }
        for r in &self.recorders {
            r(&recorded);
        }
        if let Some(s) = &self.stream {
            if matches!(recorded.event, StreamEvent::Screenshot { .. }) {
                let _ = s.tx.try_send(recorded.clone());
            } else {
                let _ = s.tx.send(recorded.clone()).await;
            }
        }
        recorded
    }
}

/// `event` with every secret value replaced by its placeholder. Images are
/// left alone (pixels are masked at capture); every text field, however
/// deeply nested, is covered because the event is redacted as JSON.
fn redacted(secrets: &Secrets, event: StreamEvent) -> StreamEvent {
    if matches!(event, StreamEvent::Screenshot { .. }) {
        return event;
    }
    // The round trip is lossless for every variant (tested); if it ever is
    // not, the event is withheld rather than delivered unredacted.
    secrets.redact_serde(event).unwrap_or_else(|_| withheld())
}

fn withheld() -> StreamEvent {
    StreamEvent::Error {
        error: ErrorInfo {
            code: lumen_core::ErrorCode::InvalidData,
            message: "an event quoting a secret could not be redacted and was withheld".into(),
            retryable: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use futures::StreamExt;
    use lumen_core::{Image, ImageFormat, ImageScale, Screenshot, Size};

    use super::*;

    #[derive(Default)]
    struct Collect(Mutex<Vec<StreamEvent>>);
    impl LoopMonitor for Collect {
        fn on_event(&self, e: &StreamEvent) {
            self.0.lock().unwrap().push(e.clone());
        }
    }

    fn step(step: u32) -> StreamEvent {
        StreamEvent::StepStarted {
            step,
            url: "about:blank".into(),
        }
    }

    fn shot(step: u32) -> StreamEvent {
        StreamEvent::Screenshot {
            step,
            screenshot: Screenshot {
                image: Image::new(ImageFormat::Png, 1, 1, vec![0u8; 4]),
                viewport: Size::new(1, 1),
                scale: ImageScale::IDENTITY,
            },
        }
    }

    #[tokio::test]
    async fn events_are_numbered_in_order_and_reach_monitors() {
        let collect = Arc::new(Collect::default());
        let bus = EventBus::new().with_monitor(collect.clone()).starting_at(7);
        let a = bus.emit(step(0)).await;
        let b = bus.emit(step(1)).await;
        assert_eq!((a.seq, b.seq), (7, 8));
        assert!(b.timestamp_ms >= a.timestamp_ms);
        assert_eq!(collect.0.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn every_subscriber_gets_redacted_events() {
        use lumen_core::{Action, ActionCall, ActionExecution, RunStatus, TaskState, TokenUsage};
        // Longer than any cut the loop makes (60/80 characters), with
        // characters that change under URL and JSON encoding.
        let secret = "s3cr3t-\"long&value/".repeat(4);
        assert!(secret.len() >= 70);
        let secrets = Arc::new(Secrets::new().with("pw", secret.clone()).unwrap());
        let collect = Arc::new(Collect::default());
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let log = recorded.clone();
        let (tx, rx) = event_stream(64);
        let bus = EventBus::new()
            .with_monitor(collect.clone())
            .with_recorder(Arc::new(move |e: &RecordedEvent| {
                log.lock().unwrap().push(serde_json::to_string(e).unwrap())
            }))
            .with_stream(tx)
            .with_secrets(secrets.clone());
        let encoded = secret
            .replace('"', "%22")
            .replace('&', "%26")
            .replace('/', "%2F");
        let mut execution = ActionExecution::failed(format!("the page said {secret}"));
        execution
            .hints
            .push(format!("now at https://a.test/?pw={encoded}"));
        execution.output = Some(format!("label: {secret}"));
        let call = ActionCall::new(
            "c1",
            Action::Type {
                text: secret.clone(),
            },
        );
        let mut state = TaskState::default();
        state.insert(
            "note".into(),
            serde_json::json!({ secret.clone(): [secret.clone()] }),
        );
        let events = vec![
            StreamEvent::RunStarted {
                instruction: format!("log in with {secret}"),
                model: "m".into(),
                max_steps: 3,
            },
            StreamEvent::StepStarted {
                step: 0,
                url: format!("https://a.test/?pw={encoded}"),
            },
            StreamEvent::Thinking {
                step: 0,
                text: secret.clone(),
            },
            StreamEvent::Action {
                step: 0,
                call: call.clone(),
            },
            StreamEvent::ActionResult {
                step: 0,
                call: call.clone(),
                execution,
            },
            StreamEvent::ActionBlocked {
                step: 0,
                call,
                reason: secret.clone(),
            },
            StreamEvent::StateWritten {
                step: 0,
                state: state.clone(),
            },
            StreamEvent::Done {
                status: RunStatus::Success,
                result: Some(secret.clone()),
                steps: 1,
                usage: TokenUsage::default(),
                usage_by_source: Default::default(),
                cost_usd: None,
                state: Some(state),
            },
        ];
        let n = events.len();
        for e in events {
            bus.emit(e).await;
        }
        drop(bus);
        let streamed: Vec<RecordedEvent> = rx.collect().await;
        let monitored = collect.0.lock().unwrap().clone();
        assert_eq!((streamed.len(), monitored.len()), (n, n));
        for (what, text) in [
            ("monitors", serde_json::to_string(&monitored).unwrap()),
            ("recorders", recorded.lock().unwrap().join("\n")),
            ("the stream", serde_json::to_string(&streamed).unwrap()),
        ] {
            assert!(secrets.leaks(&text).is_empty(), "{what}: {text}");
            assert!(!text.contains("s3cr3t"), "{what}: {text}");
            assert!(text.contains("<secret:pw>"), "{what}: {text}");
            assert!(
                !text.contains("withheld"),
                "every variant round-trips: {text}"
            );
        }
        // Nothing else changes: a clean event is delivered as it was.
        assert_eq!(
            monitored[0],
            StreamEvent::RunStarted {
                instruction: "log in with <secret:pw>".into(),
                model: "m".into(),
                max_steps: 3,
            }
        );
    }

    #[tokio::test]
    async fn full_stream_drops_screenshots_but_waits_for_other_events() {
        let (tx, mut rx) = event_stream(2);
        let bus = EventBus::new().with_stream(tx);
        bus.emit(step(0)).await;
        bus.emit(step(1)).await;
        // Full: a screenshot is dropped without waiting...
        tokio::time::timeout(Duration::from_secs(5), bus.emit(shot(1)))
            .await
            .expect("screenshots never wait");
        // ...but an ordinary event waits for room (backpressure).
        let pending = tokio::spawn({
            let bus = bus.clone();
            async move { bus.emit(step(2)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !pending.is_finished(),
            "the loop is held back while the consumer is behind"
        );
        let got: Vec<_> = vec![rx.next().await.unwrap(), rx.next().await.unwrap()];
        pending.await.unwrap();
        let third = rx.next().await.unwrap();
        let steps: Vec<_> = got
            .iter()
            .chain([&third])
            .map(|e| e.event.clone())
            .collect();
        assert_eq!(
            steps,
            vec![step(0), step(1), step(2)],
            "the screenshot was dropped, nothing else"
        );
        drop(bus);
        assert!(rx.next().await.is_none(), "the stream ends with the bus");
    }

    #[tokio::test]
    async fn a_gone_consumer_does_not_stall_the_loop() {
        let (tx, rx) = event_stream(1);
        drop(rx);
        let bus = EventBus::new().with_stream(tx);
        for i in 0..5 {
            tokio::time::timeout(Duration::from_secs(5), bus.emit(step(i)))
                .await
                .unwrap();
        }
    }
}

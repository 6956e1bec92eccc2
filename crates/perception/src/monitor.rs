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

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::Stream;
use lumen_core::{ErrorInfo, LoopMonitor, ModelNotice, NoticeSink, RecordedEvent, StreamEvent};
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
///
/// Live-only deltas ([`StreamEvent::is_live_only`]) take no `seq` of their
/// own (they repeat the last logged event's). With secrets set, a secret
/// may arrive split across two deltas, so a delta kind keeps back a tail
/// shorter than the longest secret until its next delta; a delta of the
/// other kind or any other event lets it out first, so the order holds.
/// (Providers stream reasoning and text as blocks, one after the other; a
/// provider switching kinds in the middle of a secret would defeat this.)
#[derive(Clone, Default)]
pub struct EventBus {
    monitors: Vec<Arc<dyn LoopMonitor>>,
    recorders: Vec<Recorder>,
    stream: Option<EventSender>,
    seq: Arc<AtomicU64>,
    secrets: Option<Arc<Secrets>>,
    tails: Arc<Mutex<Tails>>,
    /// Notices told by a model call in flight, not yet delivered.
    notices: Arc<Mutex<VecDeque<ModelNotice>>>,
    /// Held while an event is delivered, so a notice delivered from its own
    /// task and the loop's next event keep the order they happened in.
    order: Arc<tokio::sync::Mutex<()>>,
    /// The step of the last `step_started`, for notices.
    step: Arc<AtomicU32>,
}

/// The held-back tails of the two delta kinds: (step, text).
#[derive(Debug, Default)]
struct Tails {
    reasoning: Option<(u32, String)>,
    assistant: Option<(u32, String)>,
}

impl Tails {
    fn slot(&mut self, reasoning: bool) -> &mut Option<(u32, String)> {
        match reasoning {
            true => &mut self.reasoning,
            false => &mut self.assistant,
        }
    }
}

/// A delta event of the kind, step and text.
fn delta(reasoning: bool, step: u32, text: String) -> StreamEvent {
    match reasoning {
        true => StreamEvent::ReasoningDelta { step, text },
        false => StreamEvent::AssistantDelta { step, text },
    }
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
    /// closed stream (consumer gone) is ignored. Returns the event as
    /// delivered, or `None` for a delta held back whole (it may be the
    /// start of a secret; it goes out with the next delta or event).
    pub async fn emit(&self, event: StreamEvent) -> Option<RecordedEvent> {
        let _order = self.order.lock().await;
        self.deliver_notices().await;
        if let StreamEvent::StepStarted { step, .. } = &event {
            self.step.store(*step, Ordering::Relaxed);
        }
        self.emit_in_order(event).await
    }

    /// Where a model call tells what it waits for (see
    /// [`ModelAdapter::set_notices`](lumen_core::ModelAdapter::set_notices)):
    /// each notice becomes a [`StreamEvent::ModelNotice`] of the current
    /// step, delivered at once from its own task (a wait is shown while it
    /// lasts), and always before the loop's next event.
    pub fn notice_sink(&self) -> NoticeSink {
        let bus = self.clone();
        NoticeSink::new(move |notice| {
            bus.notices
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(notice);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let bus = bus.clone();
                runtime.spawn(async move {
                    let _order = bus.order.lock().await;
                    bus.deliver_notices().await;
                });
            }
        })
    }

    /// Delivers the queued notices; the caller holds `order`.
    async fn deliver_notices(&self) {
        loop {
            let next = self
                .notices
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front();
            let Some(notice) = next else { return };
            let step = self.step.load(Ordering::Relaxed);
            self.emit_in_order(StreamEvent::ModelNotice { step, notice })
                .await;
        }
    }

    /// [`emit`](Self::emit) once `order` is held.
    async fn emit_in_order(&self, event: StreamEvent) -> Option<RecordedEvent> {
        let (reasoning, step, text) = match event {
            StreamEvent::ReasoningDelta { step, text } => (true, step, text),
            StreamEvent::AssistantDelta { step, text } => (false, step, text),
            other => {
                self.flush_deltas().await;
                let event = match &self.secrets {
                    Some(secrets) => redacted(secrets, other),
                    None => other,
                };
                let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                return Some(self.deliver(seq, event).await);
            }
        };
        let Some(secrets) = &self.secrets else {
            return self.deliver_delta(reasoning, step, text).await;
        };
        let (other, earlier, shown) = {
            let mut tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner);
            // The model moved on from the other kind (reasoning, then
            // text): its tail goes first, so the pieces keep their order.
            let other = tails
                .slot(!reasoning)
                .take()
                .map(|(s, mut tail)| (s, secrets.redact_piece(&mut tail, "", true)));
            let slot = tails.slot(reasoning);
            // A new step's delta first lets the last step's tail out.
            let earlier = match slot.take() {
                Some((s, mut tail)) if s != step => {
                    Some((s, secrets.redact_piece(&mut tail, "", true)))
                }
                Some((_, tail)) => {
                    *slot = Some((step, tail));
                    None
                }
                None => None,
            };
            let (_, tail) = slot.get_or_insert_with(|| (step, String::new()));
            (other, earlier, secrets.redact_piece(tail, &text, false))
        };
        if let Some((s, text)) = other {
            self.deliver_delta(!reasoning, s, text).await;
        }
        if let Some((s, text)) = earlier {
            self.deliver_delta(reasoning, s, text).await;
        }
        self.deliver_delta(reasoning, step, shown).await
    }

    /// Lets out the held-back delta tails, reasoning first.
    async fn flush_deltas(&self) {
        let Some(secrets) = &self.secrets else { return };
        let tails = {
            let mut tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner);
            [true, false].map(|reasoning| {
                tails.slot(reasoning).take().map(|(step, mut tail)| {
                    (reasoning, step, secrets.redact_piece(&mut tail, "", true))
                })
            })
        };
        for (reasoning, step, text) in tails.into_iter().flatten() {
            self.deliver_delta(reasoning, step, text).await;
        }
    }

    /// Delivers a (redacted) delta unless it is empty, with the last
    /// logged event's `seq`.
    async fn deliver_delta(
        &self,
        reasoning: bool,
        step: u32,
        text: String,
    ) -> Option<RecordedEvent> {
        if text.is_empty() {
            return None;
        }
        let seq = self.seq.load(Ordering::Relaxed).saturating_sub(1);
        Some(self.deliver(seq, delta(reasoning, step, text)).await)
    }

    async fn deliver(&self, seq: u64, event: StreamEvent) -> RecordedEvent {
        let recorded = RecordedEvent {
            seq,
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
        let a = bus.emit(step(0)).await.unwrap();
        let b = bus.emit(step(1)).await.unwrap();
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
    async fn a_secret_split_across_deltas_never_reaches_a_subscriber() {
        let secret = "pa55-WORD-xyz";
        let secrets = Arc::new(Secrets::new().with("pw", secret).unwrap());
        let collect = Arc::new(Collect::default());
        let (tx, rx) = event_stream(256);
        let bus = EventBus::new()
            .with_monitor(collect.clone())
            .with_stream(tx)
            .with_secrets(secrets.clone());
        bus.emit(step(0)).await;
        // The secret arrives in three deltas, with other text around it;
        // then the text block, the secret split again.
        let reasoning = ["I will type pa5", "5-WO", "RD-xyz now, then ", "check."];
        for piece in reasoning {
            bus.emit(StreamEvent::ReasoningDelta {
                step: 0,
                text: piece.into(),
            })
            .await;
        }
        for piece in ["pa", "55-WORD", "-xy", "z!"] {
            bus.emit(StreamEvent::AssistantDelta {
                step: 0,
                text: piece.into(),
            })
            .await;
        }
        // A non-delta event lets the held-back tails out first.
        bus.emit(StreamEvent::Thinking {
            step: 0,
            text: reasoning.concat(),
        })
        .await;
        drop(bus);
        let streamed: Vec<RecordedEvent> = rx.collect().await;
        let monitored = collect.0.lock().unwrap().clone();
        let joined = |events: &[StreamEvent], reasoning: bool| -> String {
            events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ReasoningDelta { text, .. } if reasoning => Some(text.as_str()),
                    StreamEvent::AssistantDelta { text, .. } if !reasoning => Some(text.as_str()),
                    _ => None,
                })
                .collect()
        };
        let events: Vec<StreamEvent> = streamed.iter().map(|e| e.event.clone()).collect();
        assert_eq!(events, monitored);
        for e in &events {
            let text = serde_json::to_string(e).unwrap();
            assert!(!text.contains("55-WO") && !text.contains("pa5"), "{text}");
            assert!(!text.contains("RD-x") && !text.contains("-xy"), "{text}");
        }
        assert_eq!(
            joined(&events, true),
            "I will type <secret:pw> now, then check."
        );
        assert_eq!(joined(&events, false), "<secret:pw>!");
        // Deltas take no number: they repeat the step's, and the
        // complete thinking (after every delta) takes the next one.
        assert!(streamed[1..streamed.len() - 1].iter().all(|e| e.seq == 0));
        assert_eq!(streamed.last().unwrap().seq, 1);
        assert!(matches!(events.last(), Some(StreamEvent::Thinking { .. })));
        // In order: all the reasoning, then the text.
        let first_text = events
            .iter()
            .position(|e| matches!(e, StreamEvent::AssistantDelta { .. }))
            .unwrap();
        assert!(
            events[first_text..]
                .iter()
                .all(|e| !matches!(e, StreamEvent::ReasoningDelta { .. }))
        );
        // Text without a secret goes out as it comes, less the held tail.
        assert!(
            matches!(&events[1], StreamEvent::ReasoningDelta { text, .. } if text == "I w"),
            "{events:?}"
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

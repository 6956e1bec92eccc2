//! The writer of one execution: the recorder the loop calls hands events
//! and snapshots over without touching the store; a task saves
//! screenshots (files), stores events in batches, snapshots and the record,
//! and only then publishes the events to live followers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lumen::perception::monitor::{Recorder, now_ms};
use lumen::{RecordedEvent, StreamEvent};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use super::{Live, RunEntry, lock, off_thread};
use crate::db::Fenced;
use crate::db::queue::EVENTS;
use crate::store;

/// What the recorder hands to the writer.
enum Write {
    Event(Box<RecordedEvent>),
    /// The session snapshot after a step (secret values redacted).
    Snapshot(Value),
    /// Stop (events a stray recorder clone sends later are dropped).
    End,
}

/// The writer of one execution (see the module docs).
pub(super) struct Writer {
    tx: mpsc::UnboundedSender<Write>,
    task: tokio::task::JoinHandle<()>,
    /// One past the last `seq` handed to the writer.
    pub(super) next_seq: Arc<AtomicU64>,
    /// While `Some`, the session's `error` and `done` events are held here
    /// instead of written: an execution on a pool's browser may fail over,
    /// and then the run has not ended ([`release`](Self::release)). Any
    /// other event written after them shows they ended a part of the
    /// execution, and they are written first.
    held: Arc<std::sync::Mutex<Option<Vec<RecordedEvent>>>>,
}

impl Writer {
    /// Starts the writer for `entry`'s log, numbering from `offset`.
    pub(super) fn start(
        entry: Arc<RunEntry>,
        (offset, shots): (u64, BTreeMap<u32, usize>),
        hub: broadcast::Sender<Live>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move { write_events(&entry, shots, rx, &hub).await });
        Writer {
            tx,
            task,
            next_seq: Arc::new(AtomicU64::new(offset)),
            held: Arc::default(),
        }
    }

    /// The recorder the session calls (on the loop's thread: no disk).
    pub(super) fn recorder(&self, entry: Arc<RunEntry>, panic_at_step: Option<u32>) -> Recorder {
        let tx = std::sync::Mutex::new(self.tx.clone());
        let next_seq = self.next_seq.clone();
        let offset = next_seq.load(Ordering::SeqCst);
        let held = self.held.clone();
        Arc::new(move |e: &RecordedEvent| {
            if let StreamEvent::StepStarted { step, .. } = &e.event
                && panic_at_step == Some(*step)
            {
                injected_panic(*step);
            }
            let mut e = e.clone();
            e.seq += offset;
            next_seq.fetch_max(e.seq + 1, Ordering::SeqCst);
            let tx = lock(&tx);
            if let Some(held) = lock(&held).as_mut() {
                if matches!(
                    e.event,
                    StreamEvent::Error { .. } | StreamEvent::Done { .. }
                ) {
                    held.push(e);
                    return;
                }
                // More events after an ending: it ended a part (an exec
                // attempt, a task), not the execution. It stands, in order.
                for ending in held.drain(..) {
                    entry.observe(&ending.event);
                    let _ = tx.send(Write::Event(Box::new(ending)));
                }
            }
            entry.observe(&e.event);
            let _ = tx.send(Write::Event(Box::new(e)));
        })
    }

    /// Holds the session's `error` and `done` events back from now on.
    pub(super) fn hold_endings(&self) {
        lock(&self.held).get_or_insert_with(Vec::new);
    }

    /// Whether endings are held (the execution drives a pool's browser).
    pub(super) fn holds_endings(&self) -> bool {
        lock(&self.held).is_some()
    }

    /// Writes the held endings (`keep`: the run ended) or drops them (it
    /// fails over: it has not ended, and the resumed execution cuts the log
    /// back to its last completed step anyway).
    pub(super) fn release(&self, entry: &RunEntry, keep: bool) {
        let held = lock(&self.held).take().unwrap_or_default();
        if keep {
            for e in held {
                entry.observe(&e.event);
                let _ = self.tx.send(Write::Event(Box::new(e)));
            }
        }
    }

    /// Appends an event after the session's last one.
    pub(super) fn append(&self, event: StreamEvent) {
        let e = RecordedEvent {
            seq: self.next_seq.fetch_add(1, Ordering::SeqCst),
            timestamp_ms: now_ms(),
            event,
        };
        let _ = self.tx.send(Write::Event(Box::new(e)));
    }

    /// The sink the session hands its snapshot to after each step.
    pub(super) fn snapshots(&self) -> Arc<dyn Fn(Value) + Send + Sync> {
        let tx = std::sync::Mutex::new(self.tx.clone());
        Arc::new(move |v| {
            let _ = lock(&tx).send(Write::Snapshot(v));
        })
    }

    /// Waits until everything handed over is stored and published.
    pub(super) async fn finish(self) {
        let _ = self.tx.send(Write::End);
        if let Err(e) = self.task.await {
            tracing::warn!("the event writer failed: {e}");
        }
    }
}

/// The test hook of [`crate::TestHooks::panic_at_step`].
#[allow(clippy::panic, reason = "fault injection for the server's tests")]
fn injected_panic(step: u32) -> ! {
    panic!("injected panic at step {step} (ServeOptions::test_hooks)")
}

/// The writer's loop. Screenshots are saved under lumen-trace's names
/// ([`lumen_trace::screenshot_name`]: the loop's step, then the how-manyth
/// screenshot of that step in the whole log), counting on from `shots`, the
/// screenshots the log already holds: a follow-on task (whose steps start
/// at 0 again), resumed or not, never replaces an earlier task's files, and
/// `report.html` finds each one. Events waiting together are stored in one
/// transaction; a snapshot is stored after the events before it, then the
/// record.
async fn write_events(
    entry: &RunEntry,
    mut shots: BTreeMap<u32, usize>,
    mut rx: mpsc::UnboundedReceiver<Write>,
    hub: &broadcast::Sender<Live>,
) {
    let run: Arc<str> = entry.id.as_str().into();
    let mut open = true;
    while open {
        let Some(first) = rx.recv().await else { break };
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let mut events = Vec::new();
        for w in batch {
            match w {
                Write::Event(mut e) => {
                    if let StreamEvent::Screenshot { step, screenshot } = &mut e.event {
                        let nth = shots.entry(*step).or_insert(0);
                        let name = lumen_trace::screenshot_name(
                            *step,
                            *nth,
                            screenshot.image.format.extension(),
                        );
                        // Counted even when the write fails, as `render`
                        // counts events.
                        *nth += 1;
                        let (path, data) =
                            (entry.dir.dir().join(name), screenshot.image.data.clone());
                        if let Err(err) =
                            off_thread(move || store::write_atomic(&path, &data)).await
                        {
                            tracing::warn!(run = %run, "a screenshot could not be saved: {err}");
                        }
                        screenshot.image.data = Arc::from(Vec::new());
                    }
                    events.push(*e);
                }
                Write::Snapshot(v) => {
                    store_events(entry, &mut events, hub).await;
                    save_snapshot(entry, &v).await;
                    entry.persist().await;
                }
                Write::End => open = false,
            }
        }
        store_events(entry, &mut events, hub).await;
    }
}

/// Stores `events` (taking them), announces them and publishes them.
async fn store_events(
    entry: &RunEntry,
    events: &mut Vec<RecordedEvent>,
    hub: &broadcast::Sender<Live>,
) {
    if events.is_empty() {
        return;
    }
    let events = std::mem::take(events);
    match entry
        .db
        .append_events(&entry.id, &entry.worker, &events)
        .await
    {
        Ok(Fenced::Done) => {}
        Ok(Fenced::Lost) => entry.lost(),
        Err(e) => tracing::warn!(run = %entry.id, "events could not be stored: {e}"),
    }
    if let (Some(first), Some(last)) = (events.first(), events.last()) {
        let payload = format!("{} {} {}", entry.id, first.seq, last.seq);
        entry.db.notify(EVENTS, &payload).await;
    }
    let run: Arc<str> = entry.id.as_str().into();
    for e in events {
        let _ = hub.send(Live::Event {
            run: run.clone(),
            event: Arc::new(e),
        });
    }
}

/// Stores a session snapshot (already redacted by the session).
pub(super) async fn save_snapshot(entry: &RunEntry, snapshot: &Value) {
    let saved = match serde_json::to_string(snapshot) {
        Ok(text) => entry.db.save_session(&entry.id, &entry.worker, &text).await,
        Err(e) => Err(crate::db::DbError::Corrupt(e.to_string())),
    };
    match saved {
        Ok(Fenced::Done) => {}
        Ok(Fenced::Lost) => entry.lost(),
        Err(e) => tracing::warn!(run = %entry.id, "the session snapshot could not be saved: {e}"),
    }
}

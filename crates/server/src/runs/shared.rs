//! A server on a shared queue (PostgreSQL): the claim loop, the lease
//! keeper and the notification listener ([`crate::db::queue`]); and the
//! import of a file-based data directory into the store, at any start.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lumen::RecordedEvent;

use super::{LEASE_LOST, Live, RunManager, SERVER_RESTART, lock, off_thread};
use crate::db::queue::{CONTROL, ENDED, EVENTS, QUEUE};
use crate::db::{Db, DbError};
use crate::store::{self, RunDir, RunInfo, RunState};

/// How often a worker looks at the queue, control rows and expired leases
/// without being notified.
const POLL: Duration = Duration::from_secs(1);

impl RunManager {
    /// Starts the shared queue's background tasks.
    pub(super) fn join_queue(self: &Arc<Self>) {
        let tasks = vec![
            tokio::spawn(self.clone().claim_loop()),
            tokio::spawn(self.clone().keep_leases()),
            tokio::spawn(self.clone().listen()),
        ];
        lock(&self.background).extend(tasks);
        tracing::info!(worker = %self.worker, "joined the shared run queue");
    }

    /// Claims runs while this server has free slots.
    async fn claim_loop(self: Arc<Self>) {
        loop {
            let Ok(permit) = self.slots.clone().acquire_owned().await else {
                return;
            };
            let claims = self.claims.lock().await;
            let claimed = self
                .db
                .claim(
                    &self.worker,
                    self.lease_until(),
                    self.options.global_max_concurrent,
                )
                .await;
            match claimed {
                Ok(Some(c)) => {
                    tracing::info!(run = %c.info.id, resume = c.resume, "claimed a run");
                    self.adopted(c, Some(permit));
                    drop(claims);
                }
                Ok(None) => {
                    drop((claims, permit));
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(POLL) => {}
                    }
                }
                Err(e) => {
                    drop((claims, permit));
                    tracing::warn!("the run queue could not be read: {e}");
                    tokio::time::sleep(POLL).await;
                }
            }
        }
    }

    /// Renews the lease of every run held here, every third of the lease;
    /// a run whose hold was lost (this server was cut off longer than the
    /// lease, and another worker took it over) stops here.
    async fn keep_leases(self: Arc<Self>) {
        let every = (self.options.lease / 3).max(Duration::from_millis(100));
        loop {
            tokio::time::sleep(every).await;
            let mine: Vec<String> = lock(&self.runs).keys().cloned().collect();
            match self.db.renew(&self.worker, &mine, self.lease_until()).await {
                Ok(held) => {
                    let lost: Vec<_> = {
                        let runs = lock(&self.runs);
                        lost_holds(&mine, &held)
                            .filter_map(|id| runs.get(id))
                            .filter(|e| e.is_active())
                            .cloned()
                            .collect()
                    };
                    for e in lost {
                        tracing::warn!(run = %e.id(), "the run's lease was lost; stopping it here");
                        e.control().cancel(LEASE_LOST);
                    }
                }
                Err(e) => tracing::warn!("leases could not be renewed: {e}"),
            }
        }
    }

    /// Follows the store's notifications: wakes the claim loop, relays
    /// other workers' events to this server's followers, answers control
    /// rows. Reconnects when the connection drops; polls meanwhile.
    async fn listen(self: Arc<Self>) {
        loop {
            let mut listener = match self.db.listen().await {
                Ok(Some(l)) => l,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("cannot listen to the run store: {e}");
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            };
            loop {
                let note = tokio::select! {
                    n = listener.try_recv() => n,
                    _ = tokio::time::sleep(POLL) => {
                        self.answer_controls().await;
                        self.wake.notify_one();
                        continue;
                    }
                };
                let note = match note {
                    Ok(Some(n)) => n,
                    // The connection dropped: notifications may be lost,
                    // so look at everything once.
                    Ok(None) => {
                        self.answer_controls().await;
                        self.wake.notify_one();
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("the run store's notifications stopped: {e}");
                        break;
                    }
                };
                match note.channel() {
                    QUEUE => self.wake.notify_one(),
                    CONTROL if note.payload() == &*self.worker => self.answer_controls().await,
                    EVENTS => self.relay_events(note.payload()).await,
                    ENDED => {
                        let run = note.payload();
                        if self.local(run).is_none() {
                            let _ = self.hub.send(Live::Ended { run: run.into() });
                        }
                    }
                    _ => {}
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Publishes events another worker stored (`<run> <first> <last>`) to
    /// this server's followers of that run.
    async fn relay_events(&self, payload: &str) {
        let mut parts = payload.split(' ');
        let (Some(run), Some(first)) = (
            parts.next(),
            parts.next().and_then(|f| f.parse::<u64>().ok()),
        ) else {
            return;
        };
        if self.local(run).is_some() || self.hub.receiver_count() == 0 {
            return;
        }
        match self.db.events(run, first.checked_sub(1)).await {
            Ok(log) => {
                let id: Arc<str> = run.into();
                for e in log.events {
                    let _ = self.hub.send(Live::Event {
                        run: id.clone(),
                        event: Arc::new(e),
                    });
                }
            }
            Err(e) => tracing::debug!(run, "relayed events could not be read: {e}"),
        }
    }
}

/// Imports the runs of a file-based data directory (a `run.json`, with
/// `events.jsonl`, `session.json` and `result.json`, in each run folder)
/// that the store does not hold yet. Each run is imported in one
/// transaction; its `run.json` is then moved to `run.json.imported`, so a
/// later start does not read it again. Nothing else is touched: the
/// screenshots, report and GIF stay where they are, and the event log stays
/// as the trace's copy. An unreadable folder is logged and left as it is.
pub(crate) async fn import_files(db: &Db, data_dir: &Path) -> Result<usize, DbError> {
    let dir = data_dir.to_path_buf();
    let found = off_thread(move || Ok(read_file_runs(&dir)))
        .await
        .unwrap_or_default();
    let mut imported = 0;
    for (mut info, events, session, result) in found {
        if db.run(&info.id).await?.is_some() {
            continue;
        }
        // Whatever was executing when the files were last written stopped.
        restart_fixup(&mut info);
        db.import_run(&info, &events, session.as_deref(), result.as_deref())
            .await?;
        let record = RunDir::new(data_dir, &info.id).info();
        let moved = off_thread(move || {
            let mut done = record.clone().into_os_string();
            done.push(".imported");
            store::write_atomic(std::path::Path::new(&done), &std::fs::read(&record)?)?;
            std::fs::remove_file(&record)
        })
        .await;
        if let Err(e) = moved {
            tracing::warn!(run = %info.id, "imported, but its run.json could not be set aside: {e}");
        }
        imported += 1;
    }
    if imported > 0 {
        tracing::info!(
            "imported {imported} run(s) from the data directory's files into the run store"
        );
    }
    Ok(imported)
}

type FileRun = (RunInfo, Vec<RecordedEvent>, Option<String>, Option<String>);

fn read_file_runs(data_dir: &Path) -> Vec<FileRun> {
    store::load_runs(data_dir)
        .into_iter()
        .filter_map(|info| {
            let dir = RunDir::new(data_dir, &info.id);
            let events = match store::read_events(&dir.events(), None) {
                Ok(log) => log.events,
                Err(e) => {
                    tracing::warn!(run = %info.id, "not imported: its event log cannot be read: {e}");
                    return None;
                }
            };
            let text = |p: std::path::PathBuf| std::fs::read_to_string(p).ok();
            Some((info, events, text(dir.session()), text(dir.result())))
        })
        .collect()
}

/// The lock of a data directory another process holds (carried through
/// the blocking start as an I/O error).
#[derive(Debug)]
pub(super) struct LockHeld(pub(super) std::path::PathBuf, pub(super) Option<u32>);

impl std::fmt::Display for LockHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is held", self.0.display())
    }
}

impl std::error::Error for LockHeld {}

/// What a start makes of a run a stopped server left: one that was
/// executing is `interrupted` (resumable), and one that can still resume
/// says which secrets it will not have (values are never written).
/// Returns whether the record changed.
pub(super) fn restart_fixup(info: &mut RunInfo) -> bool {
    let mut changed = false;
    if info.status.is_active() {
        info.status = RunState::Interrupted;
        info.cancel_reason = Some(SERVER_RESTART.into());
        info.worker = None;
        changed = true;
    }
    if !info.status.is_terminal() && info.missing_secrets != info.secret_names {
        info.missing_secrets = info.secret_names.clone();
        changed = true;
    }
    changed
}

/// `host-pid-random`: this process's default name in a shared queue.
pub(super) fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "lumen".into());
    // A random part: a restarted container keeps its host name and pid.
    let mut salt = [0u8; 3];
    let _ = getrandom::fill(&mut salt);
    let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
    format!("{host}-{}-{salt}", std::process::id())
}

/// The runs asked to be renewed (`asked`) whose hold was not (`held`).
/// Only those: a run claimed while the renewal was under way was not
/// asked about, and its hold is fresh.
fn lost_holds<'a>(asked: &'a [String], held: &[String]) -> impl Iterator<Item = &'a str> {
    let held: HashSet<&str> = held.iter().map(String::as_str).collect();
    asked
        .iter()
        .map(String::as_str)
        .filter(move |id| !held.contains(id))
}

#[cfg(test)]
mod tests {
    use super::lost_holds;

    #[test]
    fn a_run_claimed_during_a_renewal_is_not_lost() {
        // "a" and "b" were asked about; "b" was taken over. "c", claimed
        // here while the renewal ran, is in memory but was not asked about,
        // so it can never come out as lost.
        let asked = vec!["a".to_owned(), "b".to_owned()];
        let held = vec!["a".to_owned()];
        let lost: Vec<_> = lost_holds(&asked, &held).collect();
        assert_eq!(lost, vec!["b"]);
        assert!(!lost.contains(&"c"));
        assert_eq!(lost_holds(&[], &held).count(), 0);
    }
}

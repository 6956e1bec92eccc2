//! The run store: run records, event logs, session snapshots and results
//! in a database. SQLite by default (one file, `<data-dir>/lumen.db`,
//! embedded: nothing to install), PostgreSQL when the server is given a
//! `postgres://` URL ([`crate::ServeOptions::database_url`]); then several
//! servers share one run queue ([`queue`]). Screenshots, reports and GIFs
//! stay files in the data directory (see [`crate::store::RunDir`]); the
//! event log names them.
//!
//! ```text
//! runs      id, status, created_at_ms, info (the RunInfo as JSON),
//!           worker and lease_until_ms (who executes it, until when),
//!           resume_next (the next execution resumes from the snapshot),
//!           session (the snapshot after the last step), result
//! events    run_id, seq, event (a RecordedEvent as JSON, screenshots
//!           stripped)
//! controls  steering requests for a run another worker holds, and their
//!           answers (PostgreSQL)
//! ```
//!
//! One schema for both, migrated at start ([`schema`]). Every write a
//! worker makes for a run is fenced by the run's `worker`: it writes a run
//! it holds or one nobody holds, so a worker that lost its lease (another
//! took the run over) writes nothing more (the write reports
//! [`Fenced::Lost`]).

use std::path::Path;
use std::str::FromStr as _;

use lumen::RecordedEvent;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use crate::store::{EventLog, RunInfo, RunState};

pub mod queue;
pub(crate) mod schema;

/// The SQLite file in the data directory.
pub const SQLITE_FILE: &str = "lumen.db";

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The database refused or failed a statement, or could not be reached.
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    /// The database was migrated by a newer Lumen.
    #[error(
        "the database's schema is version {found}, newer than this Lumen knows ({known}); \
         run the newer Lumen, or give this one another database"
    )]
    Newer {
        /// The version found.
        found: i64,
        /// The newest this binary knows.
        known: i64,
    },
    /// A stored value is not what this Lumen writes.
    #[error("database: {0}")]
    Corrupt(String),
}

/// A database URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// Whether a fenced write took place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fenced {
    /// Written.
    Done,
    /// The run is no longer this worker's: nothing was written.
    Lost,
}

/// Milliseconds since the epoch, as the store keeps times.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(lumen::perception::monitor::now_ms()).unwrap_or(i64::MAX)
}

/// A stored record with where it is held.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// The record.
    pub info: RunInfo,
    /// The worker executing (or steering) it.
    pub worker: Option<String>,
    /// Until when the worker's lease holds, ms since the epoch.
    pub lease_until_ms: Option<i64>,
}

impl RunRow {
    /// Whether a worker holds the run now (its lease has not run out).
    pub fn held(&self, now: i64) -> bool {
        self.worker.is_some() && self.lease_until_ms.is_some_and(|l| l >= now)
    }
}

/// The store: a pool over SQLite or PostgreSQL.
#[derive(Debug, Clone)]
pub enum Db {
    /// One file, one process.
    Sqlite(SqlitePool),
    /// Shared by many workers.
    Postgres(PgPool),
}

/// Runs the same statement code on either pool.
macro_rules! on_pool {
    ($db:expr, $p:ident => $body:expr) => {
        match $db {
            Db::Sqlite($p) => $body,
            Db::Postgres($p) => $body,
        }
    };
}
pub(crate) use on_pool;

fn corrupt(what: &str, e: impl std::fmt::Display) -> DbError {
    DbError::Corrupt(format!("{what}: {e}"))
}

fn to_json<T: serde::Serialize>(what: &str, v: &T) -> Result<String, DbError> {
    serde_json::to_string(v).map_err(|e| corrupt(what, e))
}

/// The rows of `events` as stored: `(seq, JSON)`, live-only deltas left
/// out (they are never logged).
fn event_rows(events: &[RecordedEvent]) -> Result<Vec<(i64, String)>, DbError> {
    events
        .iter()
        .filter(|e| !e.event.is_live_only())
        .map(|e| Ok((to_i64(e.seq), to_json("event", e)?)))
        .collect()
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Db {
    /// Opens the store: PostgreSQL at `url` when given (`postgres://` or
    /// `postgresql://`), else SQLite in `data_dir` (created 0600), and
    /// applies the missing migrations.
    pub async fn open(data_dir: &Path, url: Option<&str>) -> Result<Db, DbError> {
        let db = match url {
            Some(url) => {
                let options = PgConnectOptions::from_str(url)?.application_name("lumen");
                let pool = PgPoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(std::time::Duration::from_secs(10))
                    .connect_with(options)
                    .await?;
                Db::Postgres(pool)
            }
            None => {
                let path = data_dir.join(SQLITE_FILE);
                let options = SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
                    .busy_timeout(std::time::Duration::from_secs(10))
                    .foreign_keys(true);
                let pool = SqlitePoolOptions::new()
                    .max_connections(4)
                    .connect_with(options)
                    .await?;
                Db::Sqlite(pool)
            }
        };
        schema::migrate(&db).await?;
        if !db.is_shared() {
            // The database holds every client's instructions and pages; its
            // journal files exist once it was written.
            for file in [SQLITE_FILE, "lumen.db-wal", "lumen.db-shm"] {
                let p = data_dir.join(file);
                if p.exists() {
                    let _ = crate::store::private_file(&p);
                }
            }
        }
        Ok(db)
    }

    /// Whether several servers may share this store (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// Closes the pool.
    pub async fn close(&self) {
        on_pool!(self, p => p.close().await)
    }

    /// Whether the store holds no run (a data directory's files may be
    /// imported, [`import_files`](Self::import_files)).
    pub async fn is_empty(&self) -> Result<bool, DbError> {
        let (n,): (i64,) =
            on_pool!(self, p => sqlx::query_as("SELECT COUNT(*) FROM runs").fetch_one(p).await)?;
        Ok(n == 0)
    }

    /// Stores a new run, held by `worker` (when given) until `lease_until`.
    pub async fn insert_run(
        &self,
        info: &RunInfo,
        worker: Option<&str>,
        lease_until: Option<i64>,
    ) -> Result<(), DbError> {
        let text = to_json("run record", info)?;
        on_pool!(self, p => sqlx::query(
            "INSERT INTO runs (id, status, created_at_ms, info, worker, lease_until_ms) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&info.id)
        .bind(info.status.as_str())
        .bind(to_i64(info.created_at_ms))
        .bind(text)
        .bind(worker)
        .bind(lease_until)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Saves the record of a run `worker` holds (fenced).
    pub async fn save_run(&self, info: &RunInfo, worker: &str) -> Result<Fenced, DbError> {
        let text = to_json("run record", info)?;
        let done = on_pool!(self, p => sqlx::query(
            "UPDATE runs SET status = $2, info = $3 WHERE id = $1 AND (worker = $4 OR worker IS NULL)",
        )
        .bind(&info.id)
        .bind(info.status.as_str())
        .bind(text)
        .bind(worker)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(if done > 0 { Fenced::Done } else { Fenced::Lost })
    }

    /// The record of run `id` and who holds it.
    pub async fn run(&self, id: &str) -> Result<Option<RunRow>, DbError> {
        let row: Option<(String, Option<String>, Option<i64>)> = on_pool!(self, p => sqlx::query_as(
            "SELECT info, worker, lease_until_ms FROM runs WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(p)
        .await)?;
        row.map(|(info, worker, lease_until_ms)| {
            Ok(RunRow {
                info: serde_json::from_str(&info).map_err(|e| corrupt(id, e))?,
                worker,
                lease_until_ms,
            })
        })
        .transpose()
    }

    /// Every record, oldest first; unreadable ones are logged and skipped.
    pub async fn runs(&self) -> Result<Vec<RunRow>, DbError> {
        let rows: Vec<(String, String, Option<String>, Option<i64>)> = on_pool!(self, p => sqlx::query_as(
            "SELECT id, info, worker, lease_until_ms FROM runs ORDER BY created_at_ms, id",
        )
        .fetch_all(p)
        .await)?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, info, worker, lease_until_ms)| {
                match serde_json::from_str::<RunInfo>(&info) {
                    Ok(info) => Some(RunRow {
                        info,
                        worker,
                        lease_until_ms,
                    }),
                    Err(e) => {
                        tracing::warn!(run = %id, "skipping an unreadable run record: {e}");
                        None
                    }
                }
            })
            .collect())
    }

    /// How many runs wait in the queue (`queued`, held by nobody).
    pub async fn queued(&self) -> Result<usize, DbError> {
        let (n,): (i64,) = on_pool!(self, p => sqlx::query_as(
            "SELECT COUNT(*) FROM runs WHERE status = 'queued' AND worker IS NULL",
        )
        .fetch_one(p)
        .await)?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Appends events of a run `worker` holds, in one transaction (fenced).
    /// Live-only deltas are never stored.
    pub async fn append_events(
        &self,
        run: &str,
        worker: &str,
        events: &[RecordedEvent],
    ) -> Result<Fenced, DbError> {
        let rows = event_rows(events)?;
        if rows.is_empty() {
            return Ok(Fenced::Done);
        }
        // Each insert checks the fence itself. The first statement of the
        // transaction writes, so SQLite takes its write lock (waiting for
        // another writer) at once, never upgrading a read snapshot that
        // another connection's commit made stale (which fails at once).
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            for (seq, text) in rows {
                let n = sqlx::query(
                    "INSERT INTO events (run_id, seq, event) SELECT $1, $2, $3 \
                     WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1 AND (worker = $4 OR worker IS NULL))",
                )
                .bind(run)
                .bind(seq)
                .bind(text)
                .bind(worker)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n == 0 {
                    return Ok(Fenced::Lost);
                }
            }
            tx.commit().await?;
            Ok(Fenced::Done)
        })
    }

    /// The events of run `run` with `seq` after `after` (all when `None`),
    /// in order. A row that is not an event is skipped and counted.
    pub async fn events(&self, run: &str, after: Option<u64>) -> Result<EventLog, DbError> {
        let from = after.map_or(-1, to_i64);
        let rows: Vec<(String,)> = on_pool!(self, p => sqlx::query_as(
            "SELECT event FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(run)
        .bind(from)
        .fetch_all(p)
        .await)?;
        let mut log = EventLog::default();
        for (text,) in rows {
            match serde_json::from_str::<RecordedEvent>(&text) {
                Ok(e) => log.events.push(e),
                Err(_) => log.skipped += 1,
            }
        }
        if log.skipped > 0 {
            tracing::warn!(run, "skipped {} unreadable event(s)", log.skipped);
        }
        Ok(log)
    }

    /// Drops the events of run `run` from `seq` on (a resumed execution
    /// does the step they belong to again).
    pub async fn cut_events(&self, run: &str, from: u64) -> Result<(), DbError> {
        on_pool!(self, p => sqlx::query("DELETE FROM events WHERE run_id = $1 AND seq >= $2")
            .bind(run)
            .bind(to_i64(from))
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Drops every event of run `run` (a fresh execution).
    pub async fn clear_events(&self, run: &str) -> Result<(), DbError> {
        self.cut_events(run, 0).await
    }

    /// Saves the session snapshot of a run `worker` holds (fenced).
    pub async fn save_session(
        &self,
        run: &str,
        worker: &str,
        snapshot: &str,
    ) -> Result<Fenced, DbError> {
        self.set_column(run, worker, "session", snapshot).await
    }

    /// Saves the result of a run `worker` holds (fenced).
    pub async fn save_result(
        &self,
        run: &str,
        worker: &str,
        result: &str,
    ) -> Result<Fenced, DbError> {
        self.set_column(run, worker, "result", result).await
    }

    async fn set_column(
        &self,
        run: &str,
        worker: &str,
        column: &'static str,
        value: &str,
    ) -> Result<Fenced, DbError> {
        // `column` is one of two constants, never input.
        let sql = format!(
            "UPDATE runs SET {column} = $2 WHERE id = $1 AND (worker = $3 OR worker IS NULL)"
        );
        let done = on_pool!(self, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(run)
            .bind(value)
            .bind(worker)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(if done > 0 { Fenced::Done } else { Fenced::Lost })
    }

    /// The session snapshot of run `run`, if one was saved.
    pub async fn session(&self, run: &str) -> Result<Option<String>, DbError> {
        self.column(run, "session").await
    }

    /// The result of run `run`, once it ended.
    pub async fn result(&self, run: &str) -> Result<Option<String>, DbError> {
        self.column(run, "result").await
    }

    async fn column(&self, run: &str, column: &'static str) -> Result<Option<String>, DbError> {
        let sql = format!("SELECT {column} FROM runs WHERE id = $1");
        let row: Option<(Option<String>,)> = on_pool!(self, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(run)
            .fetch_optional(p)
            .await)?;
        Ok(row.and_then(|(v,)| v))
    }

    /// Stores a run read from a file-based data directory: its record,
    /// events, snapshot and result, in one transaction, held by nobody.
    pub async fn import_run(
        &self,
        info: &RunInfo,
        events: &[RecordedEvent],
        session: Option<&str>,
        result: Option<&str>,
    ) -> Result<(), DbError> {
        let text = to_json("run record", info)?;
        let events = event_rows(events)?;
        let resume = i64::from(info.status == RunState::Interrupted);
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            sqlx::query(
                "INSERT INTO runs (id, status, created_at_ms, info, resume_next, session, result) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&info.id)
            .bind(info.status.as_str())
            .bind(to_i64(info.created_at_ms))
            .bind(text)
            .bind(resume)
            .bind(session)
            .bind(result)
            .execute(&mut *tx)
            .await?;
            for (seq, text) in events {
                sqlx::query("INSERT INTO events (run_id, seq, event) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
                    .bind(&info.id)
                    .bind(seq)
                    .bind(text)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }
}

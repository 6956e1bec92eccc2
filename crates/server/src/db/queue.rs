//! Many workers, one queue (PostgreSQL).
//!
//! - **Claims.** A worker with a free slot claims the oldest run that is
//!   `queued` and held by nobody, or held by a worker whose lease ran out
//!   (that worker died or lost the database), with `FOR UPDATE SKIP
//!   LOCKED`: two workers never claim the same run, and neither waits for
//!   the other. A run taken over from a lost worker resumes from its last
//!   completed step (`resume_next`).
//! - **Leases.** The holder renews the lease of every run it holds
//!   ([`Db::renew`]); every write it makes for a run is fenced by the
//!   `worker` column, so a worker that lost a run writes nothing more.
//! - **Steering.** A worker asked to cancel, pause, resume, message or hand
//!   back a run another worker holds posts a control row, notifies, and
//!   waits for the holder's answer ([`Db::post_control`]).
//! - **Notifications.** `lumen_queue` (a run was queued), `lumen_events`
//!   (`<run> <first> <last>`: events were stored), `lumen_ended` (`<run>`:
//!   an execution ended) and `lumen_control` (`<worker>`: a control row
//!   waits for it). They only wake workers up: every worker also polls, so
//!   a lost notification delays, never loses, anything.

use super::{Db, DbError, RunRow, corrupt, now_ms};
use crate::store::RunInfo;

/// The channel a queued run is announced on.
pub const QUEUE: &str = "lumen_queue";
/// The channel stored events are announced on.
pub const EVENTS: &str = "lumen_events";
/// The channel an execution's end is announced on.
pub const ENDED: &str = "lumen_ended";
/// The channel a control row is announced on (payload: the holder).
pub const CONTROL: &str = "lumen_control";

/// The statuses of a run an execution is queued for or under way.
const ACTIVE: &str = "('queued', 'running', 'paused', 'waiting_for_human')";

/// A run a worker claimed.
#[derive(Debug)]
pub struct Claimed {
    /// Its record.
    pub info: RunInfo,
    /// Whether it resumes from its snapshot (taken over, or requeued).
    pub resume: bool,
}

/// A steering request for a run another worker holds.
#[derive(Debug, Clone)]
pub struct Control {
    /// The row.
    pub id: i64,
    /// The run.
    pub run: String,
    /// The operation (`cancel`, `pause`…).
    pub op: String,
    /// The request body.
    pub body: String,
}

fn parse(id: &str, text: &str) -> Result<RunInfo, DbError> {
    serde_json::from_str(text).map_err(|e| corrupt(id, e))
}

impl Db {
    /// Claims the oldest claimable run for `worker` until `lease_until`
    /// (see the module docs); `None` when there is none, or when `global`
    /// runs are already held across all workers.
    pub async fn claim(
        &self,
        worker: &str,
        lease_until: i64,
        global: Option<usize>,
    ) -> Result<Option<Claimed>, DbError> {
        let Db::Postgres(p) = self else {
            return Ok(None);
        };
        let now = now_ms();
        let mut tx = p.begin().await?;
        if let Some(global) = global {
            // Claims are serialised only to keep the global count exact.
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(0x006c_756d_656f_i64)
                .execute(&mut *tx)
                .await?;
            let (held,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT COUNT(*) FROM runs WHERE status IN {ACTIVE} AND status <> 'queued' \
                 AND worker IS NOT NULL AND lease_until_ms >= $1"
            )))
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            if usize::try_from(held).unwrap_or(usize::MAX) >= global {
                return Ok(None);
            }
        }
        // A queued run claimed here counts as running from the claim on:
        // until its executor saves `running`, the count above would
        // otherwise miss it and another worker could start a run past the
        // global limit. (A waiting run a steer holds keeps `queued` and
        // is not counted.)
        let row: Option<(String, String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "UPDATE runs SET worker = $1, lease_until_ms = $2, \
                 status = CASE WHEN status = 'queued' THEN 'running' ELSE status END, \
                 resume_next = CASE WHEN worker IS NULL THEN resume_next ELSE 1 END \
             WHERE id = (SELECT id FROM runs \
                 WHERE (status = 'queued' AND worker IS NULL) \
                    OR (status IN {ACTIVE} AND worker IS NOT NULL AND lease_until_ms < $3) \
                 ORDER BY created_at_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
             RETURNING id, info, resume_next"
        )))
        .bind(worker)
        .bind(lease_until)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        row.map(|(id, info, resume)| {
            Ok(Claimed {
                info: parse(&id, &info)?,
                resume: resume != 0,
            })
        })
        .transpose()
    }

    /// Takes run `id` for `worker` until `lease_until` if nobody holds it
    /// (or its holder's lease ran out, or `worker` holds it already): to
    /// execute it or steer it here. `None` when another worker holds it.
    pub async fn adopt(
        &self,
        id: &str,
        worker: &str,
        lease_until: i64,
    ) -> Result<Option<Claimed>, DbError> {
        let row: Option<(String, i64)> = super::on_pool!(self, p => sqlx::query_as(
            "UPDATE runs SET worker = $2, lease_until_ms = $3, \
                 resume_next = CASE WHEN worker IS NULL OR worker = $2 THEN resume_next ELSE 1 END \
             WHERE id = $1 AND (worker IS NULL OR worker = $2 OR lease_until_ms < $4) \
             RETURNING info, resume_next",
        )
        .bind(id)
        .bind(worker)
        .bind(lease_until)
        .bind(now_ms())
        .fetch_optional(p)
        .await)?;
        row.map(|(info, resume)| {
            Ok(Claimed {
                info: parse(id, &info)?,
                resume: resume != 0,
            })
        })
        .transpose()
    }

    /// Lets go of run `id` without changing it (steered, not executed).
    pub async fn let_go(&self, id: &str, worker: &str) -> Result<(), DbError> {
        super::on_pool!(self, p => sqlx::query(
            "UPDATE runs SET worker = NULL, lease_until_ms = NULL WHERE id = $1 AND worker = $2",
        )
        .bind(id)
        .bind(worker)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Renews the lease of runs `ids` that `worker` still holds; returns
    /// those. Only the runs a worker has in memory are renewed: a worker
    /// restarted under the same name does not keep alive the runs its
    /// previous process held (they are taken over when their lease runs
    /// out).
    pub async fn renew(
        &self,
        worker: &str,
        ids: &[String],
        lease_until: i64,
    ) -> Result<Vec<String>, DbError> {
        let Db::Postgres(p) = self else {
            return Ok(ids.to_vec());
        };
        let rows: Vec<(String,)> = sqlx::query_as(
            "UPDATE runs SET lease_until_ms = $2 WHERE worker = $1 AND id = ANY($3) RETURNING id",
        )
        .bind(worker)
        .bind(lease_until)
        .bind(ids)
        .fetch_all(p)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// Saves the record of an execution that ended and lets go of the run:
    /// fenced by `worker` when given (an execution), unfenced when `None`
    /// (a start fixing up what a crash left). `resume_next`: the next
    /// execution resumes from the snapshot.
    pub async fn end_run(
        &self,
        info: &RunInfo,
        worker: Option<&str>,
        resume_next: bool,
    ) -> Result<super::Fenced, DbError> {
        let text = super::to_json("run record", info)?;
        let done = super::on_pool!(self, p => sqlx::query(
            "UPDATE runs SET status = $2, info = $3, worker = NULL, lease_until_ms = NULL, resume_next = $4 \
             WHERE id = $1 AND (CAST($5 AS TEXT) IS NULL OR worker = $5 OR worker IS NULL)",
        )
        .bind(&info.id)
        .bind(info.status.as_str())
        .bind(text)
        .bind(i64::from(resume_next))
        .bind(worker)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(if done > 0 {
            super::Fenced::Done
        } else {
            super::Fenced::Lost
        })
    }

    /// Posts a steering request for run `run` (held by another worker);
    /// returns the row's id.
    pub async fn post_control(&self, run: &str, op: &str, body: &str) -> Result<i64, DbError> {
        let (id,): (i64,) = super::on_pool!(self, p => sqlx::query_as(
            "INSERT INTO controls (run_id, op, body, created_at_ms) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(run)
        .bind(op)
        .bind(body)
        .bind(now_ms())
        .fetch_one(p)
        .await)?;
        Ok(id)
    }

    /// The answer to control row `id`, once given; the row is removed when
    /// it is read.
    pub async fn take_answer(&self, id: i64) -> Result<Option<String>, DbError> {
        let row: Option<(String,)> = super::on_pool!(self, p => sqlx::query_as(
            "DELETE FROM controls WHERE id = $1 AND answer IS NOT NULL RETURNING answer",
        )
        .bind(id)
        .fetch_optional(p)
        .await)?;
        Ok(row.map(|(a,)| a))
    }

    /// Withdraws control row `id` (nobody answered in time). False when it
    /// was answered meanwhile: read the answer.
    pub async fn withdraw(&self, id: i64) -> Result<bool, DbError> {
        let n = super::on_pool!(self, p => sqlx::query("DELETE FROM controls WHERE id = $1 AND answer IS NULL")
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n > 0)
    }

    /// The unanswered control rows of runs `worker` holds, oldest first.
    pub async fn controls_for(&self, worker: &str) -> Result<Vec<Control>, DbError> {
        let rows: Vec<(i64, String, String, String)> = super::on_pool!(self, p => sqlx::query_as(
            "SELECT c.id, c.run_id, c.op, c.body FROM controls c JOIN runs r ON r.id = c.run_id \
             WHERE c.answer IS NULL AND r.worker = $1 ORDER BY c.id",
        )
        .bind(worker)
        .fetch_all(p)
        .await)?;
        Ok(rows
            .into_iter()
            .map(|(id, run, op, body)| Control { id, run, op, body })
            .collect())
    }

    /// Answers control row `id`.
    pub async fn answer(&self, id: i64, answer: &str) -> Result<(), DbError> {
        super::on_pool!(self, p => sqlx::query("UPDATE controls SET answer = $2 WHERE id = $1")
            .bind(id)
            .bind(answer)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Sends a notification (PostgreSQL; nothing on SQLite, whose one
    /// process needs none).
    pub async fn notify(&self, channel: &str, payload: &str) {
        if let Db::Postgres(p) = self {
            let sent = sqlx::query("SELECT pg_notify($1, $2)")
                .bind(channel)
                .bind(payload)
                .execute(p)
                .await;
            if let Err(e) = sent {
                tracing::debug!("notification on {channel} not sent: {e}");
            }
        }
    }

    /// A listener on every channel of the module (PostgreSQL).
    pub async fn listen(&self) -> Result<Option<sqlx::postgres::PgListener>, DbError> {
        let Db::Postgres(p) = self else {
            return Ok(None);
        };
        let mut l = sqlx::postgres::PgListener::connect_with(p).await?;
        l.listen_all([QUEUE, EVENTS, ENDED, CONTROL]).await?;
        Ok(Some(l))
    }
}

impl RunRow {
    /// The worker holding the run now, if any.
    pub fn holder(&self) -> Option<&str> {
        self.held(now_ms())
            .then_some(())
            .and(self.worker.as_deref())
    }
}

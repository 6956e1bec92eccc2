//! The store's schema and its migrations, applied at start.
//!
//! Each migration has a version, a description and its SQL, shared by
//! both backends (they differ only where the dialects do: an
//! auto-numbered key, `{serial}`). Applied versions are recorded in `lumen_schema`; a start applies
//! the missing ones in order, in one transaction. On PostgreSQL the
//! transaction first takes an advisory lock, so workers starting together
//! migrate once; on SQLite the data directory's lock already allows one
//! process. A database migrated by a newer Lumen (a version this binary
//! does not know) is refused rather than guessed at.

use super::{Db, DbError, now_ms};

/// One step of the schema: SQL both backends run, with `{serial}` standing
/// for an auto-numbered key (the one place the dialects differ here).
struct Migration {
    version: i64,
    description: &'static str,
    sql: &'static str,
}

impl Migration {
    /// The SQL for `db`'s backend.
    fn sql_for(&self, db: &Db) -> String {
        let serial = match db {
            Db::Sqlite(_) => "INTEGER PRIMARY KEY AUTOINCREMENT",
            Db::Postgres(_) => "BIGSERIAL PRIMARY KEY",
        };
        self.sql.replace("{serial}", serial)
    }
}

/// The schema, oldest first. Never edit a released migration: add one.
const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    description: "runs, events, controls",
    sql: "
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            status TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            info TEXT NOT NULL,
            worker TEXT,
            lease_until_ms BIGINT,
            resume_next BIGINT NOT NULL DEFAULT 0,
            session TEXT,
            result TEXT
        );
        CREATE INDEX runs_by_status ON runs (status, created_at_ms);
        CREATE TABLE events (
            run_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            event TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        );
        CREATE TABLE controls (
            id {serial},
            run_id TEXT NOT NULL,
            op TEXT NOT NULL,
            body TEXT NOT NULL,
            answer TEXT,
            created_at_ms BIGINT NOT NULL
        );
    ",
}];

/// The newest schema version this binary knows.
pub(crate) fn latest() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

const CREATE_SCHEMA_TABLE: &str = "CREATE TABLE IF NOT EXISTS lumen_schema (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at_ms BIGINT NOT NULL
)";

/// A key for PostgreSQL's advisory lock around migrations ("lumen" in
/// ASCII).
const MIGRATION_LOCK: i64 = 0x006c_756d_656e;

/// Applies the missing migrations; returns the versions applied.
pub(crate) async fn migrate(db: &Db) -> Result<Vec<i64>, DbError> {
    macro_rules! run {
        ($pool:expr, $lock:expr) => {{
            let mut tx = $pool.begin().await?;
            if let Some(lock) = $lock {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(lock)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::raw_sql(CREATE_SCHEMA_TABLE).execute(&mut *tx).await?;
            let (current,): (Option<i64>,) =
                sqlx::query_as("SELECT MAX(version) FROM lumen_schema")
                    .fetch_one(&mut *tx)
                    .await?;
            let current = current.unwrap_or(0);
            if current > latest() {
                return Err(DbError::Newer {
                    found: current,
                    known: latest(),
                });
            }
            let mut applied = Vec::new();
            for m in MIGRATIONS.iter().filter(|m| m.version > current) {
                sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql_for(db)))
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO lumen_schema (version, description, applied_at_ms) VALUES ($1, $2, $3)",
                )
                .bind(m.version)
                .bind(m.description)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
                applied.push(m.version);
            }
            tx.commit().await?;
            Ok(applied)
        }};
    }
    match db {
        Db::Sqlite(p) => run!(p, None::<i64>),
        Db::Postgres(p) => run!(p, Some(MIGRATION_LOCK)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_database_from_a_newer_lumen_is_refused_and_a_current_one_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), None).await.unwrap();
        db.close().await;
        // Opening again applies nothing and keeps what is there.
        let db = Db::open(dir.path(), None).await.unwrap();
        assert!(db.is_empty().await.unwrap());
        let Db::Sqlite(p) = &db else { unreachable!() };
        sqlx::query("INSERT INTO lumen_schema (version, description, applied_at_ms) VALUES (999, 'future', 0)")
            .execute(p)
            .await
            .unwrap();
        db.close().await;
        let err = Db::open(dir.path(), None).await.unwrap_err();
        assert!(matches!(err, DbError::Newer { found: 999, .. }), "{err}");
        assert!(err.to_string().contains("newer"), "{err}");
    }

    #[test]
    fn versions_only_grow() {
        assert!(MIGRATIONS.windows(2).all(|w| w[0].version < w[1].version));
        assert!(MIGRATIONS.first().is_some_and(|m| m.version == 1));
    }
}

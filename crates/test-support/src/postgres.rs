//! A real, throwaway PostgreSQL for tests: [`database`] returns the URL of a
//! fresh, empty database made for the caller, so tests never see each
//! other's tables.
//!
//! # Where the database lives
//!
//! - **`LUMEN_TEST_DATABASE_URL` set** (a URL such as
//!   `postgres://lumen:pw@db.example:5432/postgres` whose user may
//!   `CREATE DATABASE`): each call creates a database on that server with
//!   `psql` (the password goes through `PGPASSWORD`, never the command
//!   line). Nothing is started; the databases are not dropped afterwards.
//! - **Otherwise** one cluster per test process, started on first use and
//!   shared by every call in the process: `initdb` into a temporary folder
//!   (password authentication, scram-sha-256, a random password for the
//!   user `lumen`), then `postgres` in the foreground on `127.0.0.1` and a
//!   free port, its Unix socket inside that folder, durability off
//!   (`fsync`, `synchronous_commit`, `full_page_writes`) and
//!   `max_connections=200`, room for several servers with pools.
//!
//! The binaries are looked for in `LUMEN_POSTGRES_BIN` (a folder holding
//! `initdb` and `postgres`; when set, nowhere else), then on `PATH`, then in
//! Debian's `/usr/lib/postgresql/<version>/bin`, highest version first
//! (Debian's `postgresql` package puts them there, off `PATH`). `psql` is
//! looked for the same way. When nothing is found the error says what to
//! install (`apt-get install -y postgresql`) or which variable to set.
//!
//! PostgreSQL refuses to run as root: when the test process does, `initdb`
//! and `postgres` run as `nobody` through `setpriv` (util-linux), and the
//! temporary folder is handed to that user.
//!
//! # Cost
//!
//! `initdb` and the start take about a second, once per test process
//! (nextest runs every test in a process of its own, so each test that asks
//! for a database pays it; `cargo test` pays it once per test binary). Each
//! further [`database`] is a `CREATE DATABASE`, a few hundred milliseconds
//! at most. Set `LUMEN_TEST_DATABASE_URL` to share one running server
//! instead.
//!
//! # Clean-up
//!
//! The server does not outlive the test process, however it ends (a panic,
//! an abort, `kill -9`); it gets a fast shutdown within moments. `postgres`
//! is spawned with a parent-death signal (`setpriv --pdeathsig INT`, when
//! `setpriv` is there) from a thread that lives as long as the process, and
//! a small watcher (`sh`) reading a pipe only this
//! process holds sees it close when the process ends, stops the server if it
//! still runs and removes the temporary folder. Folders a killed watcher
//! left behind are removed by the next start.
//!
//! # Example
//!
//! ```no_run
//! let url = lumen_test_support::postgres::database()?;
//! assert!(url.starts_with("postgres://"));
//! let one = lumen_test_support::postgres::psql(&url, "select 1")?;
//! assert_eq!(one, "1");
//! # Ok::<(), lumen_test_support::postgres::PostgresError>(())
//! ```
//!
//! [`database`] blocks (it runs processes); from async code it is fine in a
//! test, or call it through `tokio::task::spawn_blocking`.

mod cluster;
mod conn_url;

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use conn_url::ConnUrl;

/// The environment variable naming an existing server to create the
/// databases on (a `postgres://` URL whose user may `CREATE DATABASE`).
pub const DATABASE_URL_ENV: &str = "LUMEN_TEST_DATABASE_URL";

/// The environment variable naming the folder holding `initdb` and
/// `postgres` (and, usually, `psql` and `pg_isready`).
pub const BIN_ENV: &str = "LUMEN_POSTGRES_BIN";

/// The user the local cluster is created with.
const USER: &str = "lumen";

/// Why no database could be had: the message names what to install, set or
/// fix, and for a server that did not start, the end of its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresError {
    message: String,
}

impl PostgresError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl fmt::Display for PostgresError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PostgresError {}

/// Creates a fresh, empty database and returns its URL,
/// `postgres://USER:PASSWORD@HOST:PORT/NAME`. The name is new at every call
/// (`lumen_t_<pid>_<counter>_<random>`).
///
/// On the server of `LUMEN_TEST_DATABASE_URL` when it is set, else on this
/// process's own cluster, started at the first call (see the
/// [module documentation](self)).
///
/// # Errors
///
/// When the binaries are missing (the message says what to install), the
/// server does not start (with its log's last lines) or `CREATE DATABASE`
/// fails.
pub fn database() -> Result<String, PostgresError> {
    let name = fresh_name();
    if let Some(url) = std::env::var_os(DATABASE_URL_ENV) {
        let url = url
            .into_string()
            .map_err(|_| PostgresError::new(format!("{DATABASE_URL_ENV} is not valid UTF-8")))?;
        let server = ConnUrl::parse(&url)
            .map_err(|why| PostgresError::new(format!("{DATABASE_URL_ENV}: {why}")))?;
        psql(&url, &format!("CREATE DATABASE {name}")).map_err(|e| {
            PostgresError::new(format!(
                "could not create a database on the server of {DATABASE_URL_ENV} (its user \
                 needs CREATEDB): {e}"
            ))
        })?;
        return Ok(server.with_database(&name));
    }
    let cluster = cluster::local()?;
    psql(&cluster.url("postgres"), &format!("CREATE DATABASE {name}"))?;
    Ok(cluster.url(&name))
}

/// Runs `sql` with `psql` on the database of `url` and returns what it
/// printed, unaligned and without headers (`select 1` → `"1"`), trimmed.
/// The password is passed through `PGPASSWORD`, not the command line.
///
/// # Errors
///
/// When `url` is not a `postgres://` URL, `psql` is not found, or it fails
/// (with its error output).
pub fn psql(url: &str, sql: &str) -> Result<String, PostgresError> {
    let conn = ConnUrl::parse(url).map_err(|why| PostgresError::new(format!("{url:?}: {why}")))?;
    let program = find_tool("psql").ok_or_else(|| {
        PostgresError::new(format!(
            "psql was not found in {BIN_ENV}, on PATH or in /usr/lib/postgresql/*/bin: install \
             it (Debian: `apt-get install -y postgresql-client`, or `postgresql` for the server \
             too)"
        ))
    })?;
    let mut cmd = Command::new(&program);
    cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
        .arg(conn.without_password())
        .arg("-c")
        .arg(sql)
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null());
    if let Some(password) = &conn.password {
        cmd.env("PGPASSWORD", password);
    }
    let out = cmd
        .output()
        .map_err(|e| PostgresError::new(format!("could not run {}: {e}", program.display())))?;
    if !out.status.success() {
        return Err(PostgresError::new(format!(
            "psql `{sql}` on {} failed ({}): {}",
            conn.without_password(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A client tool (`psql`): in `LUMEN_POSTGRES_BIN`, the running cluster's
/// folder, on `PATH`, or in `/usr/lib/postgresql/*/bin`.
fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os(BIN_ENV) {
        dirs.push(dir.into());
    }
    dirs.extend(cluster::started_bin().map(Path::to_path_buf));
    dirs.extend(
        std::env::var_os("PATH")
            .map_or_else(Vec::new, |p| std::env::split_paths(&p).collect::<Vec<_>>()),
    );
    dirs.extend(debian_bin_dirs());
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|path| is_executable(path))
}

/// `/usr/lib/postgresql/<version>/bin`, highest version first.
fn debian_bin_dirs() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir("/usr/lib/postgresql") else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name
                .split('.')
                .map(|part| part.parse::<u32>().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path: OsString = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `bytes` random bytes from `/dev/urandom`, as lowercase hex.
fn random_hex(bytes: usize) -> Result<String, PostgresError> {
    let mut buf = vec![0u8; bytes];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| PostgresError::new(format!("could not read /dev/urandom: {e}")))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// `lumen_t_<pid>_<counter>_<random>`: unique in the process, and across
/// runs sharing one server.
fn fresh_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let salt = random_hex(3).unwrap_or_else(|_| format!("{:06x}", n & 0xff_ffff));
    format!("lumen_t_{}_{n}_{salt}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_fresh_and_valid_identifiers() {
        let (a, b) = (fresh_name(), fresh_name());
        assert_ne!(a, b);
        for name in [a, b] {
            assert!(name.len() < 63, "{name}");
            assert!(
                name.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'),
                "{name}"
            );
        }
    }

    #[test]
    fn debian_versions_sort_highest_first() {
        // Whatever is installed here, the order is by number, not text.
        let dirs = debian_bin_dirs();
        let versions: Vec<u32> = dirs
            .iter()
            .filter_map(|d| {
                d.parent()?
                    .file_name()?
                    .to_str()?
                    .split('.')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        assert!(versions.windows(2).all(|w| w[0] >= w[1]), "{dirs:?}");
    }
}

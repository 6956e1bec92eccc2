//! This process's own cluster: `initdb` into a temporary folder, `postgres`
//! in the foreground, a watcher that cleans up when the process ends.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{
    BIN_ENV, DATABASE_URL_ENV, PostgresError, USER, debian_bin_dirs, find_on_path, is_executable,
    psql, random_hex,
};

/// How long the local server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// This process's cluster, started by the first [`super::database`] call.
static CLUSTER: OnceLock<Result<Cluster, PostgresError>> = OnceLock::new();

/// A running local cluster. Kept in a static, so never dropped: the
/// watcher's pipe closes only when the process ends.
#[derive(Debug)]
pub(super) struct Cluster {
    /// The folder of its binaries (`psql` is taken from there first).
    bin: PathBuf,
    port: u16,
    password: String,
    /// The write end of the watcher's stdin; its closing (the process
    /// ending) makes the watcher stop the server and remove the folder.
    _watcher: ChildStdin,
    _server: Child,
}

impl Cluster {
    pub(super) fn url(&self, database: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{database}",
            self.password, self.port
        )
    }
}

/// The cluster, started by the first call in the process; every later call
/// gets the same one, or the same error.
pub(super) fn local() -> Result<&'static Cluster, PostgresError> {
    CLUSTER
        .get_or_init(start_cluster)
        .as_ref()
        .map_err(Clone::clone)
}

/// The binaries' folder of the cluster, once it runs.
pub(super) fn started_bin() -> Option<&'static Path> {
    CLUSTER
        .get()
        .and_then(|started| started.as_ref().ok())
        .map(|cluster| cluster.bin.as_path())
}

/// Starts the cluster on a thread of its own that then lives as long as
/// the process: `postgres`'s parent-death signal fires when the *thread*
/// that spawned it ends, not the process.
fn start_cluster() -> Result<Cluster, PostgresError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("lumen-test-postgres".into())
        .spawn(move || {
            // The receiver waits for this answer; if it is gone there is
            // nobody to tell.
            let _ = tx.send(start());
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| PostgresError::new(format!("could not start a thread: {e}")))?;
    rx.recv()
        .map_err(|_| PostgresError::new("the thread starting PostgreSQL ended without an answer"))?
}

/// The folder, user and tools of one start.
#[derive(Debug)]
struct Setup {
    bin: PathBuf,
    dir: PathBuf,
    /// `setpriv` and the ids to run as, when we are root.
    drop_to: Option<(PathBuf, u32, u32)>,
}

impl Setup {
    /// `program` from the bin folder, as the unprivileged user when we are
    /// root, dying with its parent thread when `pdeathsig` is given.
    fn command(&self, program: &str, pdeathsig: bool) -> Command {
        let setpriv = match &self.drop_to {
            Some((setpriv, _, _)) => Some(setpriv.clone()),
            None if pdeathsig => find_on_path("setpriv"),
            None => None,
        };
        let mut cmd = match setpriv {
            Some(setpriv) => {
                let mut cmd = Command::new(setpriv);
                if let Some((_, uid, gid)) = &self.drop_to {
                    cmd.arg(format!("--reuid={uid}"))
                        .arg(format!("--regid={gid}"))
                        .arg("--clear-groups");
                }
                if pdeathsig {
                    cmd.args(["--pdeathsig", "INT"]);
                }
                cmd.arg("--").arg(self.bin.join(program));
                cmd
            }
            None => Command::new(self.bin.join(program)),
        };
        // The unprivileged user may not be able to enter our folder.
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        cmd
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        if tail.is_empty() {
            "(the server log is empty)".into()
        } else {
            format!("server log, last lines:\n{tail}")
        }
    }
}

fn start() -> Result<Cluster, PostgresError> {
    let bin = find_server_bin()?;
    remove_stale_folders();
    let drop_to = if effective_uid() == Some(0) {
        let setpriv = find_on_path("setpriv").ok_or_else(|| {
            PostgresError::new(
                "running as root, and PostgreSQL refuses to: setpriv (util-linux) is needed to \
                 run it as `nobody` but was not found on PATH; install util-linux, run the tests \
                 as another user, or set LUMEN_TEST_DATABASE_URL",
            )
        })?;
        let (uid, gid) = nobody_ids().ok_or_else(|| {
            PostgresError::new(
                "running as root, and PostgreSQL refuses to: no user `nobody` in /etc/passwd to \
                 run it as; run the tests as another user or set LUMEN_TEST_DATABASE_URL",
            )
        })?;
        Some((setpriv, uid, gid))
    } else {
        None
    };
    let dir = std::env::temp_dir().join(format!(
        "lumen-pg-{}-{}",
        std::process::id(),
        random_hex(4)?
    ));
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| PostgresError::new(format!("could not create {}: {e}", dir.display())))?;
    // From here on the folder is removed when the process ends.
    let watcher = spawn_watcher(&dir)?;
    let setup = Setup { bin, dir, drop_to };
    if let Some((_, uid, gid)) = &setup.drop_to {
        std::os::unix::fs::chown(&setup.dir, Some(*uid), Some(*gid)).map_err(|e| {
            PostgresError::new(format!("could not chown {}: {e}", setup.dir.display()))
        })?;
    }
    let password = random_hex(16)?;
    initdb(&setup, &password)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let port = free_port()?;
        let mut server = spawn_server(&setup, port)?;
        match wait_ready(&setup, &mut server, port, &password) {
            Ok(()) => {
                return Ok(Cluster {
                    bin: setup.bin,
                    port,
                    password,
                    _watcher: watcher,
                    _server: server,
                });
            }
            // Another process took the free port first: try another.
            Err(_) if attempt < 3 && setup.log_tail().contains("could not bind") => {}
            Err(e) => return Err(e),
        }
    }
}

/// `initdb` with a random password for `lumen`, no locale, no sync.
fn initdb(setup: &Setup, password: &str) -> Result<(), PostgresError> {
    let pwfile = setup.dir.join("pwfile");
    write_pwfile(setup, &pwfile, password)
        .map_err(|e| PostgresError::new(format!("could not write {}: {e}", pwfile.display())))?;
    let out = setup
        .command("initdb", false)
        .arg("-D")
        .arg(setup.dir.join("data"))
        .args(["-U", USER, "--auth=scram-sha-256", "--pwfile"])
        .arg(&pwfile)
        .args(["--no-locale", "-E", "UTF8", "--no-sync"])
        .output();
    let _ = fs::remove_file(&pwfile);
    let out = out.map_err(|e| {
        PostgresError::new(format!(
            "could not run initdb from {}: {e}",
            setup.bin.display()
        ))
    })?;
    if !out.status.success() {
        return Err(PostgresError::new(format!(
            "initdb ({}) failed ({}):\n{}\n{}",
            setup.bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The password file `initdb` reads, readable by the user it runs as only.
fn write_pwfile(setup: &Setup, path: &Path, password: &str) -> std::io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(password.as_bytes())?;
    if let Some((_, uid, gid)) = &setup.drop_to {
        std::os::unix::fs::chown(path, Some(*uid), Some(*gid))?;
    }
    Ok(())
}

/// `postgres` in the foreground, logging to `postgres.log` in the folder.
fn spawn_server(setup: &Setup, port: u16) -> Result<Child, PostgresError> {
    let log_path = setup.dir.join("postgres.log");
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| PostgresError::new(format!("could not open {}: {e}", log_path.display())))?;
    let log_err = log
        .try_clone()
        .map_err(|e| PostgresError::new(format!("could not open {}: {e}", log_path.display())))?;
    setup
        .command("postgres", true)
        .arg("-D")
        .arg(setup.dir.join("data"))
        .arg("-k")
        .arg(&setup.dir)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", "fsync=off"])
        .args(["-c", "synchronous_commit=off"])
        .args(["-c", "full_page_writes=off"])
        .args(["-c", "max_connections=200"])
        .args(["-c", "shared_buffers=32MB"])
        .args(["-c", "logging_collector=off"])
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| {
            PostgresError::new(format!(
                "could not start postgres from {}: {e}",
                setup.bin.display()
            ))
        })
}

/// Waits until the server accepts connections: `pg_isready` when it is
/// there, else a TCP connection followed by a `select 1`.
fn wait_ready(
    setup: &Setup,
    server: &mut Child,
    port: u16,
    password: &str,
) -> Result<(), PostgresError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let isready = Some(setup.bin.join("pg_isready")).filter(|p| is_executable(p));
    loop {
        if let Ok(Some(status)) = server.try_wait() {
            return Err(PostgresError::new(format!(
                "postgres ({}) exited at start ({status}); {}",
                setup.bin.display(),
                setup.log_tail()
            )));
        }
        let ready = match &isready {
            Some(isready) => Command::new(isready)
                .args(["-q", "-t", "1", "-h", "127.0.0.1", "-p", &port.to_string()])
                .args(["-d", "postgres", "-U", USER])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            None => {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                    && psql(
                        &format!("postgres://{USER}:{password}@127.0.0.1:{port}/postgres"),
                        "select 1",
                    )
                    .is_ok()
            }
        };
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = server.kill();
            return Err(PostgresError::new(format!(
                "postgres ({}) did not accept connections on 127.0.0.1:{port} within {}s; {}",
                setup.bin.display(),
                START_TIMEOUT.as_secs(),
                setup.log_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The watcher: blocks reading a pipe only this process writes to, so it
/// reads end-of-file when the process ends, however it ends; it then stops
/// the server if it still runs (fast shutdown, then SIGKILL after 5 s; only
/// a process named `postgres` with the pid of `postmaster.pid`) and removes
/// the folder. It ignores the signals a test harness sends the process
/// group, so it outlives the test process. Its output goes nowhere, so a
/// harness waiting for the test's pipes to close does not wait for it.
fn spawn_watcher(dir: &Path) -> Result<ChildStdin, PostgresError> {
    const SCRIPT: &str = r#"
trap '' HUP INT TERM QUIT
read -r _ignored
pidfile="$1/data/postmaster.pid"
i=0
while [ -f "$pidfile" ] && [ "$i" -lt 100 ]; do
  pid=$(head -n 1 "$pidfile" 2>/dev/null)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ]; then
    if [ "$i" -lt 50 ]; then kill -INT "$pid" 2>/dev/null; else kill -KILL "$pid" 2>/dev/null; fi
  else
    break
  fi
  sleep 0.1
  i=$((i + 1))
done
rm -rf "$1"
"#;
    let mut child = Command::new("sh")
        .args(["-c", SCRIPT, "lumen-pg-watcher"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            let _ = fs::remove_dir_all(dir);
            PostgresError::new(format!(
                "could not start sh to watch {}: {e}",
                dir.display()
            ))
        })?;
    child
        .stdin
        .take()
        .ok_or_else(|| PostgresError::new("the watcher has no stdin"))
}

/// Removes the folders of test processes that are gone (when their watcher
/// was killed before it could).
fn remove_stale_folders() {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("lumen-pg-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// The folder holding both `initdb` and `postgres`: `LUMEN_POSTGRES_BIN`,
/// else `PATH` (symlinks followed, so a link in `/usr/local/bin` gives the
/// real folder), else the highest `/usr/lib/postgresql/<version>/bin`.
fn find_server_bin() -> Result<PathBuf, PostgresError> {
    let has_both =
        |dir: &Path| is_executable(&dir.join("initdb")) && is_executable(&dir.join("postgres"));
    if let Some(dir) = std::env::var_os(BIN_ENV) {
        let dir = PathBuf::from(dir);
        if has_both(&dir) {
            return Ok(dir);
        }
        return Err(PostgresError::new(format!(
            "{BIN_ENV} is {}, which holds no initdb and postgres: point it at the folder of \
             PostgreSQL's server binaries (Debian: /usr/lib/postgresql/<version>/bin)",
            dir.display()
        )));
    }
    let on_path = find_on_path("initdb")
        .and_then(|initdb| fs::canonicalize(initdb).ok())
        .and_then(|initdb| initdb.parent().map(Path::to_path_buf))
        .filter(|dir| has_both(dir));
    if let Some(dir) = on_path {
        return Ok(dir);
    }
    debian_bin_dirs().into_iter().find(|d| has_both(d)).ok_or_else(|| {
        PostgresError::new(format!(
            "PostgreSQL's server binaries (initdb, postgres) were not found in {BIN_ENV}, on PATH \
             or in /usr/lib/postgresql/*/bin: install them (Debian: `apt-get install -y \
             postgresql`), point {BIN_ENV} at the folder holding initdb, or set \
             {DATABASE_URL_ENV} to a server where the user may CREATE DATABASE"
        ))
    })
}

/// The effective user id, from `/proc/self/status`, else `id -u`.
fn effective_uid() -> Option<u32> {
    if let Ok(status) = fs::read_to_string("/proc/self/status") {
        let euid = status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            .and_then(|id| id.parse().ok());
        if euid.is_some() {
            return euid;
        }
    }
    let out = Command::new("id").arg("-u").output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The uid and gid of `nobody`, from `/etc/passwd`.
fn nobody_ids() -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != "nobody" {
            return None;
        }
        let uid = fields.nth(1)?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        Some((uid, gid))
    })
}

/// A free port on 127.0.0.1 (bound, then released for the server).
fn free_port() -> Result<u16, PostgresError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| PostgresError::new(format!("could not find a free port on 127.0.0.1: {e}")))
}

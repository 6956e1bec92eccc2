//! Spawning and owning a local Chromium process.
//!
//! We spawn Chromium ourselves (rather than through chromiumoxide's launcher)
//! so its stderr stays ours and its whole process group can be killed. Three
//! layers make sure no Chromium outlives its owner:
//! 1. [`ChromiumProcess::kill`] (called by `close` and on drop) kills the
//!    process group synchronously;
//! 2. the child is spawned with tokio's `kill_on_drop`;
//! 3. a tiny watchdog shell holds a pipe from us and kills the group when the
//!    pipe closes, which happens however our process ends (even `SIGKILL`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lumen_core::LumenError;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;

use crate::options::LaunchOptions;

/// Flags every launch gets (see DEVELOPERS.md): quiet, deterministic, no
/// first-run UI, no background traffic.
const BASE_FLAGS: &[&str] = &[
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-dev-shm-usage",
    "--mute-audio",
    "--password-store=basic",
    "--use-mock-keychain",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--disable-hang-monitor",
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--disable-smooth-scrolling",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
];

/// A Chromium process we spawned and own.
#[derive(Debug)]
pub(crate) struct ChromiumProcess {
    pid: Option<u32>,
    /// Closing this pipe tells the watchdog to kill the process group.
    watchdog: Option<ChildStdin>,
    _watchdog_child: Option<Child>,
    /// `Some(exit description)` once the process has exited.
    exited: watch::Receiver<Option<String>>,
    kill_tx: Option<tokio::sync::oneshot::Sender<()>>,
    /// The profile folder, deleted on drop when we created it.
    temp_profile: Option<PathBuf>,
    pub(crate) user_data_dir: PathBuf,
    pub(crate) executable: PathBuf,
    pub(crate) ws_url: String,
}

/// Finds the binary to launch, following the same rules as the test
/// support's locator: `LUMEN_CHROME`, `CHROME_PATH`, then (when headless and
/// preferred) `chromium-headless-shell`, then `/usr/bin/chromium` and
/// `chromium`, `chromium-browser`, `google-chrome` on `PATH`.
pub(crate) fn locate(options: &LaunchOptions) -> Result<(PathBuf, bool), LumenError> {
    if let Some(path) = &options.executable {
        let shell = is_headless_shell(path);
        return Ok((path.clone(), shell));
    }
    for var in ["LUMEN_CHROME", "CHROME_PATH"] {
        if let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let path = PathBuf::from(value);
            if path.is_file() {
                let shell = is_headless_shell(&path);
                return Ok((path, shell));
            }
            return Err(LumenError::config(
                var,
                format!("{} is not an executable file", path.display()),
            ));
        }
    }
    if options.headless
        && options.prefer_headless_shell
        && let Some(p) = find_binary(
            &["/usr/bin/chromium-headless-shell"],
            &["chromium-headless-shell"],
        )
    {
        return Ok((p, true));
    }
    find_binary(
        &["/usr/bin/chromium"],
        &["chromium", "chromium-browser", "google-chrome"],
    )
    .map(|p| (p, false))
    .ok_or_else(|| {
        LumenError::config(
            "chromium",
            "no Chromium found: install it (sudo apt-get install -y chromium) or set LUMEN_CHROME",
        )
    })
}

fn is_headless_shell(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains("headless-shell") || n.contains("headless_shell"))
}

fn find_binary(absolute: &[&str], names: &[&str]) -> Option<PathBuf> {
    for a in absolute {
        let p = PathBuf::from(a);
        if p.is_file() {
            return Some(p);
        }
    }
    let path_var = std::env::var_os("PATH")?;
    for name in names {
        for dir in std::env::split_paths(&path_var) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

fn unique_profile_dir() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "lumen-chromium-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

impl ChromiumProcess {
    /// Spawns Chromium and waits for its DevTools endpoint.
    pub(crate) async fn spawn(options: &LaunchOptions) -> Result<Self, LumenError> {
        let (executable, shell) = locate(options)?;
        let (user_data_dir, temp_profile) = match &options.user_data_dir {
            Some(dir) => (dir.clone(), None),
            None => {
                let dir = unique_profile_dir();
                (dir.clone(), Some(dir))
            }
        };
        std::fs::create_dir_all(&user_data_dir).map_err(|e| {
            LumenError::config(
                "user_data_dir",
                format!("cannot create {}: {e}", user_data_dir.display()),
            )
        })?;
        // A stale port file from an earlier run would point us at a dead port.
        let port_file = user_data_dir.join("DevToolsActivePort");
        let _ = std::fs::remove_file(&port_file);

        let mut cmd = Command::new(&executable);
        cmd.args(BASE_FLAGS)
            .arg(format!("--user-data-dir={}", user_data_dir.display()))
            .arg(format!(
                "--window-size={},{}",
                options.window.width, options.window.height
            ));
        if options.headless && !shell {
            cmd.arg("--headless");
        }
        if options.no_sandbox {
            cmd.arg("--no-sandbox");
        }
        cmd.args(&options.args)
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            LumenError::config(
                "chromium",
                format!("cannot start {}: {e}", executable.display()),
            )
        })?;
        let pid = child.id();

        // Chromium's stderr goes to our tracing at debug level.
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(target: "lumen_browser::chromium", "{line}");
                }
            });
        }

        let (watchdog, watchdog_child) = match pid {
            Some(pid) => spawn_watchdog(pid, temp_profile.as_deref()),
            None => (None, None),
        };

        let (exit_tx, exited) = watch::channel(None);
        let (kill_tx, kill_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status,
                _ = kill_rx => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            };
            let text = match status {
                Ok(s) => format!("Chromium exited ({s})"),
                Err(e) => format!("Chromium could not be waited for: {e}"),
            };
            let _ = exit_tx.send(Some(text));
        });

        let mut process = Self {
            pid,
            watchdog,
            _watchdog_child: watchdog_child,
            exited,
            kill_tx: Some(kill_tx),
            temp_profile,
            user_data_dir,
            executable,
            ws_url: String::new(),
        };
        match process
            .read_port_file(&port_file, options.launch_timeout)
            .await
        {
            Ok(url) => {
                process.ws_url = url;
                Ok(process)
            }
            Err(e) => {
                process.kill();
                Err(e)
            }
        }
    }

    async fn read_port_file(
        &self,
        port_file: &Path,
        timeout: Duration,
    ) -> Result<String, LumenError> {
        let start = Instant::now();
        loop {
            if let Ok(text) = tokio::fs::read_to_string(port_file).await {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next())
                    && let Ok(port) = port.trim().parse::<u16>()
                {
                    return Ok(format!("ws://127.0.0.1:{port}{}", path.trim()));
                }
            }
            if let Some(exit) = self.exited.borrow().clone() {
                return Err(LumenError::disconnected(format!(
                    "{exit} before opening its DevTools port ({})",
                    self.executable.display()
                )));
            }
            if start.elapsed() > timeout {
                return Err(LumenError::SessionTimeout {
                    what: format!("Chromium's DevTools port ({})", self.executable.display()),
                    after: timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    }

    /// Resolves with a description once the process has exited.
    pub(crate) async fn wait_exit(&self) -> String {
        let mut rx = self.exited.clone();
        match rx.wait_for(|e| e.is_some()).await {
            Ok(e) => e.clone().unwrap_or_default(),
            Err(_) => "Chromium exited".to_owned(),
        }
    }

    /// A receiver that turns `Some` when the process exits.
    pub(crate) fn exit_watch(&self) -> watch::Receiver<Option<String>> {
        self.exited.clone()
    }

    /// The process id of the browser process.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Kills the whole process group now (idempotent, synchronous).
    pub(crate) fn kill(&mut self) {
        if let Some(tx) = self.kill_tx.take() {
            let _ = tx.send(());
        }
        if let Some(pid) = self.pid {
            // The group id is the browser's pid (`process_group(0)`).
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        // Closing the pipe releases the watchdog (its kill is then a no-op).
        self.watchdog.take();
    }

    /// Deletes the temporary profile, if we created one.
    pub(crate) fn remove_profile(&mut self) {
        if let Some(dir) = self.temp_profile.take() {
            // Chromium may still be flushing for a moment after exit.
            for _ in 0..5 {
                if std::fs::remove_dir_all(&dir).is_ok() || !dir.exists() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            tracing::debug!("could not delete the temporary profile {}", dir.display());
        }
    }
}

impl Drop for ChromiumProcess {
    fn drop(&mut self) {
        self.kill();
        self.remove_profile();
    }
}

/// Starts `sh` in its own process group (so a terminal's Ctrl-C reaches it
/// only through us): it blocks reading our pipe and, when the pipe closes
/// (however our process ends), kills Chromium's group and deletes the
/// temporary profile, if there is one.
fn spawn_watchdog(pid: u32, temp_profile: Option<&Path>) -> (Option<ChildStdin>, Option<Child>) {
    let profile = temp_profile
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        // dash's `kill` takes no `--`; the group id is written `-PID`.
        "while read -r _; do :; done; kill -KILL \"-$1\" 2>/dev/null; \
         if [ -n \"$2\" ]; then sleep 0.3; rm -rf -- \"$2\"; fi",
        "lumen-chromium-watchdog",
        &pid.to_string(),
        &profile,
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .process_group(0);
    match cmd.spawn() {
        Ok(mut child) => (child.stdin.take(), Some(child)),
        Err(e) => {
            tracing::warn!("could not start the Chromium watchdog: {e}");
            (None, None)
        }
    }
}

//! The owned launch behind [`CdpTab::launch`](crate::CdpTab::launch): a
//! Chromium that lives and dies with its owner.
//!
//! We spawn Chromium ourselves (rather than through chromiumoxide's launcher)
//! so its stderr stays ours and its whole process group can be killed. Three
//! layers make sure no Chromium outlives its owner:
//! 1. [`ChromiumProcess::kill`] (called by `close` and on drop) kills the
//!    process group synchronously;
//! 2. the child is spawned with tokio's `kill_on_drop`;
//! 3. a tiny watchdog shell holds a pipe from us and kills the group when the
//!    pipe closes, which happens however our process ends (even `SIGKILL`).
//!    It is the one place a shell's `kill` remains: it must act after our
//!    process is gone.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lumen_core::LumenError;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;

use super::group::kill_process_group;
use super::locate::{is_headless_shell, locate, locate_preferring_headless_shell};
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
    // No --remote-allow-origins: our clients send no Origin header, and
    // without the flag Chromium refuses a DevTools WebSocket opened by a
    // web page (which always sends one), so no page can drive the browser.
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

/// The binary to launch and whether it is a headless shell: the explicit
/// [`LaunchOptions::executable`], else [`locate_preferring_headless_shell`]
/// for a headless launch that prefers it, else [`locate`].
fn executable(options: &LaunchOptions) -> Result<(PathBuf, bool), LumenError> {
    let path = match &options.executable {
        Some(path) => path.clone(),
        None if options.headless && options.prefer_headless_shell => {
            locate_preferring_headless_shell()?
        }
        None => locate()?,
    };
    let shell = is_headless_shell(&path);
    Ok((path, shell))
}

/// Fails as a launch would when there is no Chromium to start: none is
/// found, or the path given is not a file (a bare name is left to `PATH`
/// at spawn time).
pub(crate) fn check_executable(options: &LaunchOptions) -> Result<(), LumenError> {
    let (path, _) = executable(options)?;
    if path.components().count() > 1 && !path.is_file() {
        return Err(LumenError::config(
            "chromium",
            format!("cannot start {}: no such file", path.display()),
        ));
    }
    Ok(())
}

/// The DevTools WebSocket URL in the text of a `DevToolsActivePort` file
/// (the port on the first line, the browser's path on the second), or
/// `None` while the file is incomplete.
pub(super) fn devtools_url(port_file: &str) -> Option<String> {
    let mut lines = port_file.lines();
    let port = lines.next()?.trim().parse::<u16>().ok()?;
    let path = lines.next()?.trim();
    path.starts_with('/')
        .then(|| format!("ws://127.0.0.1:{port}{path}"))
}

/// Says in the log that a launch runs without Chromium's sandbox, and why
/// when the machine is the reason.
pub(super) fn log_no_sandbox() {
    match super::sandbox_unavailable() {
        Some(why) => tracing::info!("starting Chromium without its sandbox: {why}"),
        None => tracing::warn!(
            "starting Chromium without its sandbox because the options ask for it, although \
             it could run here"
        ),
    }
}

/// Creates the profile folder `dir` if missing and removes a stale
/// `DevToolsActivePort` (an earlier run's would point at a dead port).
/// Returns the port file's path, which Chromium writes once it listens.
pub(super) fn prepare_profile(dir: &Path) -> Result<PathBuf, LumenError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        LumenError::config(
            "user_data_dir",
            format!("cannot create {}: {e}", dir.display()),
        )
    })?;
    let port_file = dir.join("DevToolsActivePort");
    let _ = std::fs::remove_file(&port_file);
    Ok(port_file)
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
        let (executable, shell) = executable(options)?;
        let (user_data_dir, temp_profile) = match &options.user_data_dir {
            Some(dir) => (dir.clone(), None),
            None => {
                let dir = unique_profile_dir();
                (dir.clone(), Some(dir))
            }
        };
        let port_file = prepare_profile(&user_data_dir)?;

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
            log_no_sandbox();
            cmd.arg("--no-sandbox");
        }
        cmd.args(&options.args)
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                // Nothing else will delete the profile folder made above.
                if let Some(dir) = &temp_profile {
                    let _ = std::fs::remove_dir_all(dir);
                }
                return Err(LumenError::config(
                    "chromium",
                    format!("cannot start {}: {e}", executable.display()),
                ));
            }
        };
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
            if let Ok(text) = tokio::fs::read_to_string(port_file).await
                && let Some(url) = devtools_url(&text)
            {
                return Ok(url);
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
            if let Err(e) = kill_process_group(pid) {
                tracing::debug!("killing Chromium's process group {pid}: {e}");
            }
        }
        // Closing the pipe releases the watchdog (its kill is then a no-op).
        self.watchdog.take();
    }

    /// Deletes the temporary profile, if we created one, and the folder of
    /// its single-instance socket.
    pub(crate) fn remove_profile(&mut self) {
        let Some(dir) = self.temp_profile.take() else {
            return;
        };
        let socket_dir = singleton_dir(&dir);
        // Chromium may still be flushing for a moment after exit.
        let mut removed = false;
        for _ in 0..5 {
            if std::fs::remove_dir_all(&dir).is_ok() || !dir.exists() {
                removed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !removed {
            tracing::debug!("could not delete the temporary profile {}", dir.display());
        }
        if let Some(socket_dir) = socket_dir {
            remove_singleton_dir(&socket_dir);
        }
    }
}

/// Deletes the single-instance socket folder a browser on `profile` left
/// behind when it was killed (one that quit in order deleted its own).
/// Call it only once that browser is gone: a live one needs the socket.
pub fn remove_socket_folder(profile: &Path) {
    if let Some(dir) = singleton_dir(profile) {
        remove_singleton_dir(&dir);
    }
}

/// The folder Chromium keeps its single-instance socket in: one of its own
/// in the temporary directory (`org.chromium.Chromium.XXXXXX`), linked from
/// the profile as `SingletonSocket`. Chromium deletes it when it quits in
/// order, never when it is killed, so a killed browser's folder is ours to
/// delete, or every killed launch leaves one behind in `/tmp`.
///
/// Only a link of that shape is followed: a socket named `SingletonSocket`
/// in a folder directly inside the temporary directory.
fn singleton_dir(profile: &Path) -> Option<PathBuf> {
    let socket = std::fs::read_link(profile.join("SingletonSocket")).ok()?;
    let dir = socket.parent()?;
    (socket.file_name()? == "SingletonSocket" && dir.parent()? == std::env::temp_dir())
        .then(|| dir.to_owned())
}

/// Deletes the socket and cookie Chromium keeps in `dir`, then `dir`
/// itself if nothing else is in it.
fn remove_singleton_dir(dir: &Path) {
    for name in ["SingletonSocket", "SingletonCookie"] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!(
            "could not delete Chromium's socket folder {}: {e}",
            dir.display()
        );
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
/// temporary profile, if there is one, with its socket folder (the shape
/// [`singleton_dir`] accepts).
fn spawn_watchdog(pid: u32, temp_profile: Option<&Path>) -> (Option<ChildStdin>, Option<Child>) {
    let profile = temp_profile
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = std::env::temp_dir().to_string_lossy().into_owned();
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        // dash's `kill` takes no `--`; the group id is written `-PID`.
        "while read -r _; do :; done; kill -KILL \"-$1\" 2>/dev/null; \
         if [ -n \"$2\" ]; then sleep 0.3; \
           s=$(readlink -- \"$2/SingletonSocket\" 2>/dev/null); \
           case $s in \"$3\"/*/SingletonSocket) d=${s%/SingletonSocket}; \
             case ${d#\"$3\"/} in */*) ;; *) rm -f -- \"$s\" \"$d/SingletonCookie\"; \
               rmdir -- \"$d\" 2>/dev/null;; esac;; esac; \
           rm -rf -- \"$2\"; fi",
        "lumen-chromium-watchdog",
        &pid.to_string(),
        &profile,
        &temp,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_file_gives_the_websocket_url_once_complete() {
        assert_eq!(
            devtools_url("40123\n/devtools/browser/abc-def\n").as_deref(),
            Some("ws://127.0.0.1:40123/devtools/browser/abc-def")
        );
        assert_eq!(
            devtools_url(" 9222 \r\n/devtools/browser/x").as_deref(),
            Some("ws://127.0.0.1:9222/devtools/browser/x")
        );
        for partial in [
            "",
            "40123",
            "40123\n",
            "port\n/devtools/browser/x",
            "99999\n/x",
            "1\nx",
        ] {
            assert_eq!(devtools_url(partial), None, "{partial:?}");
        }
    }

    /// This process's temporary profile folders.
    fn own_profiles() -> Vec<PathBuf> {
        let prefix = format!("lumen-chromium-{}-", std::process::id());
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        dirs.sort();
        dirs
    }

    #[tokio::test]
    async fn a_chromium_that_cannot_be_spawned_leaves_no_profile_folder() {
        let dir = tempfile::tempdir().unwrap();
        // A file, but not an executable one: the spawn itself fails.
        let not_executable = dir.path().join("chromium");
        std::fs::write(&not_executable, "").unwrap();
        let before = own_profiles();
        let err = ChromiumProcess::spawn(&LaunchOptions {
            executable: Some(not_executable),
            ..LaunchOptions::default()
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("cannot start"), "{err}");
        assert_eq!(own_profiles(), before);
    }
}

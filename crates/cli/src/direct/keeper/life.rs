//! The keeper's life as commands see it: starting it (and recording it in
//! the state file), asking it, finding a keeper whose start was interrupted
//! by the lock every keeper holds, and ending it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lumen::browser::chromium;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ANSWER, ENV, SUBCOMMAND};
use crate::direct::State;
use crate::direct::socket::exchange;
use crate::exit::CliError;

/// The keeper process, as the state file remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::direct) struct KeeperProc {
    pid: u32,
    started: Option<u64>,
}

/// The keeper's private folder: its socket and its log.
pub(in crate::direct) fn dir(session: &str) -> PathBuf {
    crate::direct::state_dir().join(format!("{session}.keeper"))
}

/// Saves `state` (the session's settings with one change) and has the
/// session's keeper apply it (starting the keeper if needed). Only a
/// change the browser took stays saved: when it refuses one, or the
/// keeper cannot apply it, the settings as they were (`before`) are saved
/// again and re-applied, so a refused setting is neither kept nor applied
/// again by a later command. The caller holds the session's lock.
pub(in crate::direct) async fn apply(
    session: &str,
    state: &mut State,
    before: &State,
) -> Result<(), CliError> {
    crate::direct::save(session, state)?;
    let refused = match ask(session, state, json!({"op": "reload"})).await {
        Ok(answer) if answer["ok"] == true => return Ok(()),
        Ok(answer) => CliError::failure(format!(
            "the browser refused a setting: {}; the session keeps its earlier settings",
            answer["error"].as_str().unwrap_or("no reason given")
        )),
        Err(e) => e,
    };
    if let Some(restored) = restore(session, before) {
        *state = restored;
        // Undo what the browser did take of the refused change (a keeper
        // that is not running applies the restored file when it starts).
        if state.keeper.is_some_and(|k| is_ours(session, k))
            && let Err(e) = exchange(session, &json!({"op": "reload"})).await
        {
            tracing::debug!("re-applying the earlier settings: {e}");
        }
    }
    Err(refused)
}

/// Saves the settings of `before` again, with the keeper the state file
/// names now; `None` (nothing saved) when the session was closed or its
/// browser replaced meanwhile.
fn restore(session: &str, before: &State) -> Option<State> {
    let now = crate::direct::load(session).ok().flatten()?;
    if now.ws_url != before.ws_url {
        return None;
    }
    let mut restored = before.clone();
    restored.keeper = now.keeper;
    match crate::direct::save(session, &restored) {
        Ok(()) => Some(restored),
        Err(e) => {
            tracing::debug!("restoring the earlier settings: {}", e.message);
            None
        }
    }
}

/// Sends one question to the session's keeper (starting it if needed) and
/// returns its answer.
pub(in crate::direct) async fn ask(
    session: &str,
    state: &mut State,
    question: Value,
) -> Result<Value, CliError> {
    let mut fresh = false;
    if !state.keeper.is_some_and(|k| is_ours(session, k)) {
        start(session, state).await?;
        fresh = true;
    }
    match exchange(session, &question).await {
        Ok(answer) if answer["stale"] != true => Ok(answer),
        Ok(_) | Err(_) if !fresh => {
            // A keeper that is there but does not answer, or keeps another
            // browser than the state file names, is replaced.
            end(session, Some(state));
            start(session, state).await?;
            exchange(session, &question)
                .await
                .map_err(|e| CliError::failure(format!("the session's keeper: {e}")))
        }
        Err(e) => Err(CliError::failure(format!("the session's keeper: {e}"))),
        Ok(answer) => Err(CliError::failure(format!(
            "the session's keeper: {}",
            answer["error"]
                .as_str()
                .unwrap_or("it keeps another browser")
        ))),
    }
}

/// Starts the session's keeper unless it is running. The caller holds the
/// session's lock.
pub(in crate::direct) async fn ensure(session: &str, state: &mut State) -> Result<(), CliError> {
    if state.keeper.is_some_and(|k| is_ours(session, k)) {
        return Ok(());
    }
    start(session, state).await
}

/// Whether the saved keeper process is still this session's keeper.
fn is_ours(session: &str, k: KeeperProc) -> bool {
    let Some(id) = chromium::process_identity(k.pid) else {
        // No `/proc` to read: the keeper is known by the lock it holds,
        // its pid inside (a pid the system gave to another program since
        // holds no such lock).
        return cfg!(not(target_os = "linux")) && lock_holder(session) == Some(k.pid);
    };
    id.cmdline.contains(SUBCOMMAND)
        && id.cmdline.contains(&format!("--session {session} "))
        && k.started.is_none_or(|t| t == id.start_time)
}

/// Starts the keeper, waits until it answers, and records it.
async fn start(session: &str, state: &mut State) -> Result<(), CliError> {
    // A browser that is gone is said so (and its state removed), rather
    // than a keeper failing to start.
    if let Err(e) = lumen::browser::page_tabs(&state.ws_url, crate::direct::CALL_TIMEOUT).await {
        return Err(crate::direct::unreachable_session(session, state, e));
    }
    let dir = dir(session);
    private_dir(&dir)?;
    end_unrecorded(session);
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failure(format!("cannot find the lumen binary: {e}")))?;
    let log_path = dir.join("log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", log_path.display())))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["browser", "--session", session, SUBCOMMAND])
        .env(ENV, session)
        .env("LUMEN_STATE_DIR", crate::direct::state_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::failure(format!("cannot start the session's keeper: {e}")))?;
    let deadline = Instant::now() + ANSWER;
    let pid = loop {
        // Only the process just started counts: another that answers on
        // the socket (one whose start was interrupted) is not recorded.
        if let Ok(answer) = exchange(session, &json!({"op": "ping"})).await
            && answer["pid"].as_u64() == Some(u64::from(child.id()))
        {
            break child.id();
        }
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(CliError::failure(format!(
                "the session's keeper stopped at start ({status}): {}",
                said.trim()
            )));
        }
        if Instant::now() > deadline {
            let _ = chromium::end_process_group(child.id(), Duration::from_secs(1));
            return Err(CliError::failure(
                "the session's keeper did not start in time",
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    state.keeper = Some(KeeperProc {
        pid,
        started: chromium::process_identity(pid).map(|id| id.start_time),
    });
    crate::direct::save(session, state)
}

/// The file a running keeper holds an exclusive lock on, its pid inside.
fn lock_path(session: &str) -> PathBuf {
    dir(session).join("lock")
}

/// Takes the session's keeper lock, for as long as the returned file is
/// open (the keeper's life), and writes this process's id into it.
pub(super) fn hold_lock(session: &str) -> Result<std::fs::File, CliError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = lock_path(session);
    let fail = |e: String| CliError::failure(format!("the keeper's lock {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| fail(e.to_string()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(fail("another keeper of this session holds it".into()));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(fail(format!(
                "cannot lock it ({e}); is the state folder on a file system without locks? Set LUMEN_STATE_DIR to a local folder"
            )));
        }
    }
    // The session may have been closed between the open and the lock (its
    // folder removed under the lock, see `end`): a lock on a file that no
    // longer has this name is nobody's to find.
    if !same_file(&file, &path) {
        return Err(fail(
            "the session was closed while the keeper started".into(),
        ));
    }
    file.set_len(0)
        .and_then(|()| write!(file, "{}", std::process::id()))
        .map_err(|e| fail(e.to_string()))?;
    Ok(file)
}

/// Whether `path` still names the file `file` has open.
fn same_file(file: &std::fs::File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The pid in the session's keeper lock, while a process holds the lock.
fn lock_holder(session: &str) -> Option<u32> {
    holder(&lock_path(session)).flatten()
}

/// Whether a process holds the lock file at `path` (`None`: nobody does,
/// or there is no such file), and the pid written in it, once written.
fn holder(path: &std::path::Path) -> Option<Option<u32>> {
    let file = std::fs::File::open(path).ok()?;
    if file.try_lock_shared().is_ok() {
        return None;
    }
    Some(
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok()),
    )
}

/// Ends a keeper that still runs although the state file does not name it:
/// one whose start was interrupted (the command that started it stopped
/// before recording it). Found by the lock it holds, it would otherwise
/// follow the page beside the next keeper, both answering its dialogs and
/// both handling its routes. The caller holds the session's lock.
fn end_unrecorded(session: &str) {
    let path = lock_path(session);
    // A keeper that has just taken the lock writes its pid a moment later.
    let deadline = Instant::now() + Duration::from_millis(500);
    let pid = loop {
        match holder(&path) {
            // Nobody holds it: no keeper runs.
            None => return,
            Some(Some(pid)) => break Some(pid),
            Some(None) if Instant::now() > deadline => break None,
            Some(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    if let Some(pid) = pid
        && is_ours(session, KeeperProc { pid, started: None })
    {
        tracing::debug!("ending the unrecorded keeper {pid}");
        if let Err(e) = chromium::end_process_group(pid, Duration::from_secs(2)) {
            tracing::debug!("ending the unrecorded keeper {pid}: {e}");
        }
    }
}

/// Ends the session's keeper, if it is still there, and removes its folder.
pub(in crate::direct) fn end(session: &str, state: Option<&State>) {
    if let Some(k) = state.and_then(|s| s.keeper)
        && is_ours(session, k)
        && let Err(e) = chromium::end_process_group(k.pid, Duration::from_secs(2))
    {
        tracing::debug!("ending the keeper {}: {e}", k.pid);
    }
    // A keeper whose start was interrupted is found by its lock. The
    // folder is then removed under that lock: a keeper starting meanwhile
    // finds the lock taken, or, taking it after, its file gone (it checks,
    // `hold_lock`), and gives up rather than run where nothing finds it.
    use std::os::unix::fs::OpenOptionsExt as _;
    for _ in 0..2 {
        end_unrecorded(session);
        let Ok(lock) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(lock_path(session))
        else {
            // No folder: nothing to remove.
            return;
        };
        if lock.try_lock().is_ok() {
            let _ = std::fs::remove_dir_all(dir(session));
            return;
        }
    }
    tracing::debug!("a keeper of session {session} holds its lock; its folder stays");
}

/// Creates `dir` readable by its owner only (and makes it so if it exists),
/// by the workspace's one check ([`lumen_trace::own_dir`]): another user's
/// folder (one made first in a shared temporary folder, or a link of theirs
/// to one of ours) is not taken over; the user's own is made private.
pub(in crate::direct) fn private_dir(dir: &std::path::Path) -> Result<(), CliError> {
    lumen_trace::own_dir(dir).map_err(|e| match e.get_ref() {
        Some(why) if why.is::<lumen_trace::NotOwned>() => CliError::config(format!(
            "{} is not a folder of yours (another user made it): remove it, or set \
             LUMEN_STATE_DIR to a folder of your own",
            dir.display()
        )),
        _ => CliError::failure(format!("cannot create {}: {e}", dir.display())),
    })
}

/// Whether `meta` belongs to this user.
pub(in crate::direct) fn mine(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    meta.uid() == rustix::process::geteuid().as_raw()
}

/// Whether `meta` belongs to this user and no one else may write to it.
pub(in crate::direct) fn owned_by_me(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    mine(meta) && meta.mode() & 0o022 == 0
}

#[cfg(test)]
mod tests {
    use super::{holder, same_file};

    /// Where `/proc` cannot be read, a keeper is known by its held lock
    /// and the pid in it; a pid in a lock nobody holds is nobody's.
    #[test]
    fn a_keeper_is_known_by_the_lock_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        std::fs::write(&path, "4242").unwrap();
        assert_eq!(holder(&path), None, "a lock nobody holds");
        let held = std::fs::File::open(&path).unwrap();
        held.lock().unwrap();
        assert_eq!(holder(&path), Some(Some(4242)));
        std::fs::write(&path, "").unwrap();
        assert_eq!(holder(&path), Some(None), "held, its pid not written yet");
        drop(held);
        assert_eq!(holder(&path), None);
        assert_eq!(holder(&dir.path().join("missing")), None);
    }

    /// A lock taken on a file whose name was removed (its session closed
    /// meanwhile), or given to a new file since, is told apart.
    #[test]
    fn a_lock_file_removed_or_replaced_is_not_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let file = std::fs::File::create(&path).unwrap();
        assert!(same_file(&file, &path));
        std::fs::remove_file(&path).unwrap();
        assert!(!same_file(&file, &path), "removed");
        std::fs::write(&path, "").unwrap();
        assert!(!same_file(&file, &path), "another file under its name");
    }
}

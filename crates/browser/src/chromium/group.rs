//! Ending a process group: signals sent with `rustix`, never a `kill`
//! subprocess.
//!
//! Chromium is always started as the leader of its own process group (its
//! pid is the group id), so one signal reaches the browser, its zygotes,
//! renderers and GPU process together.

use std::io;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::{Pid, Signal};

/// How often [`end_process_group`] looks whether the group has gone.
const POLL: Duration = Duration::from_millis(20);

/// Kills every process in group `pgid` with `SIGKILL`, at once.
///
/// A group that no longer exists is not an error: there is nothing left to
/// kill.
///
/// # Errors
///
/// [`io::ErrorKind::InvalidInput`] for a `pgid` that cannot be a browser's
/// group (0, 1, above `i32::MAX`, or this process's own group: each of those
/// would reach far more than a browser), and the system's error when the
/// signal is refused (`EPERM`: the group belongs to another user).
pub fn kill_process_group(pgid: u32) -> io::Result<()> {
    signal_group(pgid, Signal::KILL)
}

/// Ends every process in group `pgid`: `SIGTERM` (Chromium's orderly
/// shutdown, which flushes the profile), then `SIGKILL` if a process other
/// than a zombie is still in the group after `grace`.
///
/// Blocks the calling thread for up to `grace` (plus one poll of 20 ms).
///
/// # Errors
///
/// As [`kill_process_group`].
pub fn end_process_group(pgid: u32, grace: Duration) -> io::Result<()> {
    signal_group(pgid, Signal::TERM)?;
    let deadline = Instant::now() + grace;
    while process_group_alive(pgid) {
        if Instant::now() > deadline {
            return kill_process_group(pgid);
        }
        std::thread::sleep(POLL);
    }
    Ok(())
}

/// Whether a live process (not a zombie) is in process group `pgid`.
///
/// Asks the kernel with signal 0 first: a group with no process at all is
/// gone. When some process is there, Linux's `/proc` tells whether any of
/// them is more than a zombie: an exited browser whose parent has gone
/// stays a zombie until something reaps it, which in a container without
/// an init process may be never, and a zombie holds no files. Where `/proc`
/// cannot be read the kernel's answer stands.
///
/// Returns `false` for a `pgid` that is no group id (0 or above
/// `i32::MAX`).
pub fn process_group_alive(pgid: u32) -> bool {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match rustix::process::test_kill_process_group(pid) {
        Err(Errno::SRCH) => false,
        // Ok, or EPERM: a process is there (maybe another user's).
        _ => live_member_in_proc(pgid).unwrap_or(true),
    }
}

/// Sends `signal` to group `pgid`; a group that is gone counts as done.
fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    let group = group_id(pgid)?;
    match rustix::process::kill_process_group(group, signal) {
        Ok(()) | Err(Errno::SRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `pgid` as a group that may be signalled: never 0 (our own group), 1
/// (`kill(-1)` reaches every process we may signal) or our own group.
fn group_id(pgid: u32) -> io::Result<Pid> {
    let refuse = |why: &str| {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("process group {pgid} {why}"),
        ))
    };
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .filter(|raw| *raw > 1)
        .and_then(Pid::from_raw)
    else {
        return refuse("is not a browser's process group");
    };
    if pid == rustix::process::getpgrp() {
        return refuse("is this process's own group");
    }
    Ok(pid)
}

/// Whether `/proc` lists a process in group `pgid` that is not a zombie;
/// `None` when `/proc` cannot be read.
#[cfg(target_os = "linux")]
fn live_member_in_proc(pgid: u32) -> Option<bool> {
    let dir = std::fs::read_dir("/proc").ok()?;
    Some(dir.flatten().any(|entry| {
        std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            parse_stat(&stat)
                .is_some_and(|(state, group)| group == pgid && state != "Z" && state != "X")
        })
    }))
}

#[cfg(not(target_os = "linux"))]
fn live_member_in_proc(_pgid: u32) -> Option<bool> {
    None
}

/// What tells a process apart from a later one that reused its pid: its
/// start time (clock ticks after boot, `/proc/<pid>/stat` field 22) and its
/// command line (arguments joined by spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// When it started, in clock ticks after boot.
    pub start_time: u64,
    /// Its arguments, joined by spaces.
    pub cmdline: String,
}

/// The identity of process `pid`; `None` when it does not exist (or a
/// zombie), or where `/proc` cannot be read.
#[cfg(target_os = "linux")]
pub fn process_identity(pid: u32) -> Option<ProcessIdentity> {
    let dir = std::path::Path::new("/proc").join(pid.to_string());
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let (state, _) = parse_stat(&stat)?;
    if state == "Z" || state == "X" {
        return None;
    }
    let start_time = start_time_of(&stat)?;
    let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    Some(ProcessIdentity {
        start_time,
        cmdline,
    })
}

/// Where `/proc` does not exist, nothing can be told: `None`.
#[cfg(not(target_os = "linux"))]
pub fn process_identity(_pid: u32) -> Option<ProcessIdentity> {
    None
}

/// The start time of a `/proc/<pid>/stat` line (field 22, the 20th after
/// `comm`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn start_time_of(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The state and process group of a `/proc/<pid>/stat` line
/// (`pid (comm) state ppid pgrp …`; `comm` may hold spaces and parentheses,
/// so the fields are counted from the last `)`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_stat(stat: &str) -> Option<(&str, u32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_the_start_time() {
        let stat = "4242 (chro me) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 2 0 0 20 0 \
                    9 0 987654 123456 789 18446744073709551615";
        assert_eq!(start_time_of(stat), Some(987_654));
        assert_eq!(start_time_of("4242 (x) S 1"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_an_identity_and_a_missing_one_has_none() {
        let me = process_identity(std::process::id()).expect("our own identity");
        assert!(me.start_time > 0);
        assert!(!me.cmdline.is_empty());
        assert_eq!(process_identity(std::process::id()), Some(me));
        assert_eq!(process_identity(u32::MAX - 1), None);
    }

    #[test]
    fn stat_lines_give_state_and_group() {
        assert_eq!(
            parse_stat("4242 (chromium) S 1 4242 4242 0 -1 4194560"),
            Some(("S", 4242))
        );
        assert_eq!(
            parse_stat("77 (a (b) c) Z 1 70 70 0"),
            Some(("Z", 70)),
            "a name with parentheses and spaces"
        );
        assert_eq!(parse_stat("77 (x) S 1"), None);
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn groups_that_would_reach_more_than_a_browser_are_refused() {
        for pgid in [0, 1, u32::MAX, i32::MAX as u32 + 1] {
            let error = kill_process_group(pgid).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{pgid}");
            let error = end_process_group(pgid, Duration::ZERO).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{pgid}");
        }
        let own = rustix::process::getpgrp().as_raw_pid().unsigned_abs();
        let error = kill_process_group(own).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(process_group_alive(own), "our own group is alive");
        assert!(!process_group_alive(0));
        assert!(!process_group_alive(u32::MAX));
    }

    #[test]
    fn a_group_is_ended_and_reaped_children_leave_it_empty() {
        use std::os::unix::process::CommandExt as _;

        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        assert!(process_group_alive(pgid));
        end_process_group(pgid, Duration::from_secs(5)).unwrap();
        // Our own child stays a zombie until reaped; the group counts as
        // ended either way.
        assert!(!process_group_alive(pgid));
        child.wait().unwrap();
        assert!(!process_group_alive(pgid));
    }
}

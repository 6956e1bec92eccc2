//! Whether Chromium's sandbox can run here. It is on unless it cannot
//! start: Chromium refuses to run its sandbox as root, and without
//! unprivileged user namespaces (and no setuid helper) it has nothing to
//! build the sandbox from. Only then do launches pass `--no-sandbox`, and
//! they say why in the log.

/// Why the sandbox cannot start on this machine, or `None` when it can.
pub fn sandbox_unavailable() -> Option<&'static str> {
    why_unavailable(
        rustix::process::geteuid().is_root(),
        read_trimmed("/proc/sys/kernel/unprivileged_userns_clone").as_deref(),
        read_trimmed("/proc/sys/user/max_user_namespaces").as_deref(),
    )
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The decision, from what [`sandbox_unavailable`] reads: running as root,
/// `kernel.unprivileged_userns_clone` (Debian's switch; absent elsewhere)
/// and `user.max_user_namespaces`.
fn why_unavailable(
    root: bool,
    userns_clone: Option<&str>,
    max_namespaces: Option<&str>,
) -> Option<&'static str> {
    if root {
        return Some("running as root, where Chromium refuses to start its sandbox");
    }
    if userns_clone == Some("0") || max_namespaces == Some("0") {
        return Some(
            "unprivileged user namespaces are disabled, so the sandbox has nothing to run in",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_is_off_only_where_it_cannot_start() {
        assert!(why_unavailable(true, None, None).unwrap().contains("root"));
        assert!(why_unavailable(false, Some("0"), Some("1000")).is_some());
        assert!(why_unavailable(false, None, Some("0")).is_some());
        assert_eq!(why_unavailable(false, Some("1"), Some("63000")), None);
        assert_eq!(why_unavailable(false, None, None), None);
    }
}

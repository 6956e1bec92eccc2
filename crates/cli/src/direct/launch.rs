//! `--profile` and `--proxy`: how `open` starts a session's browser.
//!
//! `--profile DIR` gives Chromium a user data folder of the user's, kept
//! across `close` and `open` (`close` never deletes it), instead of the
//! throwaway `<session>-profile`. A profile that another running Chromium
//! holds is refused up front (Chromium would hand the URL to that browser
//! and exit).
//!
//! `--proxy URL` becomes `--proxy-server` (and `--proxy-bypass` becomes
//! `--proxy-bypass-list`). A proxy URL with a user name or password is
//! refused: Chromium does not take credentials on its command line, and
//! anything there is readable by every local user in `ps`.

use std::path::{Path, PathBuf};

use super::BrowserArgs;
use crate::exit::CliError;

/// The proxy flags for Chromium.
pub(super) fn proxy_flags(args: &BrowserArgs) -> Result<Vec<String>, CliError> {
    let mut out = Vec::new();
    if let Some(proxy) = &args.proxy {
        check_proxy(proxy)?;
        out.push(format!("--proxy-server={proxy}"));
    }
    if let Some(list) = &args.proxy_bypass {
        if args.proxy.is_none() {
            return Err(CliError::config("--proxy-bypass needs --proxy"));
        }
        if list.is_empty() || list.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(CliError::config(
                "--proxy-bypass takes a list like `*.internal;10.0.0.0/8` (no spaces)",
            ));
        }
        out.push(format!("--proxy-bypass-list={list}"));
    }
    Ok(out)
}

/// `[scheme://]host:port`, scheme one Chromium knows, no credentials.
fn check_proxy(proxy: &str) -> Result<(), CliError> {
    let (scheme, rest) = proxy.split_once("://").unwrap_or(("http", proxy));
    if !matches!(scheme, "http" | "https" | "socks4" | "socks5") {
        return Err(CliError::config(format!(
            "--proxy scheme {scheme:?} is not one of http, https, socks4, socks5"
        )));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err(CliError::config(
            "--proxy must not hold a user name or password: Chromium takes none on its command \
             line, and every local user could read them there (`ps`). Use a proxy that needs no \
             login, such as a local forwarder that adds the credentials",
        ));
    }
    let host_ok = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !host_ok
        || rest.len() != authority.len() && rest != format!("{authority}/")
        || proxy.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(CliError::config(format!(
            "--proxy {proxy:?} is not a proxy URL like http://host:port or socks5://host:port"
        )));
    }
    Ok(())
}

/// The `--profile` folder, created if missing, as an absolute path;
/// refused while another Chromium holds it.
pub(super) fn profile_dir(dir: &Path) -> Result<PathBuf, CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::config(format!("cannot create {}: {e}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| CliError::config(format!("cannot use {}: {e}", dir.display())))?;
    // Chromium's lock: a symbolic link to `host-pid`.
    if let Ok(target) = std::fs::read_link(dir.join("SingletonLock"))
        && let Some(pid) = target
            .to_string_lossy()
            .rsplit_once('-')
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        && lumen::browser::chromium::process_identity(pid).is_some()
    {
        return Err(CliError::config(format!(
            "the profile {} is in use by another Chromium (pid {pid}); close that browser \
             (`lumen browser close` for its session) or pick another --profile",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Asks the browser of a session with a `--profile` to quit by itself
/// (`Browser.close`) and waits up to five seconds for it: a `SIGTERM` to
/// its process group reaches the network process too, which then dies
/// before it writes the cookies to the profile.
pub(super) async fn close_gracefully(state: &super::State) {
    if !state.persistent_profile {
        return;
    }
    // The browser may quit before it answers: the answer does not matter.
    let _ = lumen::browser::browser_command(
        &state.ws_url,
        "Browser.close",
        serde_json::json!({}),
        super::CALL_TIMEOUT,
    )
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while lumen::browser::chromium::process_group_alive(state.pid)
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Tells, on stderr, that `--profile`/`--proxy` do nothing for a session
/// whose browser already runs.
pub(super) fn note_running(args: &BrowserArgs) {
    if args.profile.is_some() || args.proxy.is_some() || args.proxy_bypass.is_some() {
        eprintln!(
            "note: the session's browser is already running; --profile and --proxy apply when \
             `open` starts it (run `lumen browser close` first)"
        );
    }
}

/// The launch flags as words, for the lines of a batch.
pub(super) fn global_flags(args: &BrowserArgs, out: &mut Vec<String>) {
    if let Some(dir) = &args.profile {
        out.push("--profile".into());
        out.push(dir.display().to_string());
    }
    for (flag, value) in [
        ("--proxy", &args.proxy),
        ("--proxy-bypass", &args.proxy_bypass),
    ] {
        if let Some(v) = value {
            out.push(flag.into());
            out.push(v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_proxy;

    #[test]
    fn proxies_are_checked_and_credentials_refused() {
        assert!(check_proxy("http://127.0.0.1:8080").is_ok());
        assert!(check_proxy("socks5://proxy.internal:1080").is_ok());
        assert!(check_proxy("127.0.0.1:3128").is_ok());
        let err = check_proxy("http://user:secret@127.0.0.1:8080").unwrap_err();
        assert!(
            err.message.contains("user name or password"),
            "{}",
            err.message
        );
        assert!(!err.message.contains("secret"));
        assert!(check_proxy("ftp://h:1").is_err());
        assert!(check_proxy("http://h").is_err());
        assert!(check_proxy("http://h:1/path").is_err());
        assert!(check_proxy("http://h:1 --evil").is_err());
    }
}

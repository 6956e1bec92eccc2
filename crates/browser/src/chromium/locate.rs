//! Finding a Chromium binary: the one locator of the workspace.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

use lumen_core::LumenError;

/// Environment variables that name a browser explicitly, in order.
const ENV_VARS: [&str; 2] = ["LUMEN_CHROME", "CHROME_PATH"];
/// Where Debian's `chromium` package puts its launcher.
const SYSTEM_CHROMIUM: &str = "/usr/bin/chromium";
/// Names tried on `PATH`, in order, after [`SYSTEM_CHROMIUM`].
const PATH_NAMES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];
/// Where Debian's `chromium-headless-shell` package puts its binary.
const SYSTEM_HEADLESS_SHELL: &str = "/usr/bin/chromium-headless-shell";
/// The headless shell's name on `PATH`.
const HEADLESS_SHELL_NAME: &str = "chromium-headless-shell";

/// Why [`locate`] found no browser. Its `Display` text says what was looked
/// at and how to fix that.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChromiumNotFound {
    /// An environment variable names a browser, but no executable file is
    /// there. This is an error rather than a reason to search on: a run
    /// should not silently use another browser than the one asked for.
    BadEnvPath {
        /// The variable, `LUMEN_CHROME` or `CHROME_PATH`.
        var: &'static str,
        /// Its value.
        path: PathBuf,
    },
    /// No candidate exists.
    NotInstalled {
        /// Every place that was checked, in order, as readable text.
        looked_at: Vec<String>,
    },
}

impl fmt::Display for ChromiumNotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadEnvPath { var, path } => write!(
                f,
                "{var} is set to {}, which is not an executable file. \
                 Point {var} at a Chromium binary (such as {SYSTEM_CHROMIUM}) or unset it. \
                 To install Chromium: sudo apt-get install -y chromium",
                path.display()
            ),
            Self::NotInstalled { looked_at } => write!(
                f,
                "Chromium was not found (looked at: {}). \
                 Install it with: sudo apt-get install -y chromium   \
                 (or set LUMEN_CHROME=/path/to/chrome)",
                looked_at.join(", ")
            ),
        }
    }
}

impl std::error::Error for ChromiumNotFound {}

impl From<ChromiumNotFound> for LumenError {
    /// A configuration error naming the setting to fix: the variable for
    /// [`ChromiumNotFound::BadEnvPath`], `chromium` otherwise.
    fn from(error: ChromiumNotFound) -> Self {
        let setting = match &error {
            ChromiumNotFound::BadEnvPath { var, .. } => *var,
            ChromiumNotFound::NotInstalled { .. } => "chromium",
        };
        LumenError::config(setting, error.to_string())
    }
}

/// Finds the Chromium to run.
///
/// Looks, in order, at:
/// 1. the `LUMEN_CHROME` environment variable,
/// 2. the `CHROME_PATH` environment variable,
/// 3. `/usr/bin/chromium`,
/// 4. `chromium`, `chromium-browser` and `google-chrome` on `PATH` (each name
///    in every `PATH` folder before the next name).
///
/// An empty variable counts as unset. Only executable files count.
///
/// # Errors
///
/// [`ChromiumNotFound::BadEnvPath`] if a variable is set to something that
/// is not an executable file, and [`ChromiumNotFound::NotInstalled`] if
/// nothing is found.
pub fn locate() -> Result<PathBuf, ChromiumNotFound> {
    find_chromium(
        |name| std::env::var_os(name),
        None,
        Path::new(SYSTEM_CHROMIUM),
        std::env::var_os("PATH").as_deref(),
    )
}

/// [`locate`] with the headless shell tried between the environment
/// variables and `/usr/bin/chromium`: what a headless launch uses.
///
/// Debian's `chromium-headless-shell` starts 2–3× faster, uses about half
/// the memory and gives the exact window size. An explicit choice
/// (`LUMEN_CHROME`, `CHROME_PATH`) still wins.
///
/// # Errors
///
/// As [`locate`].
pub fn locate_preferring_headless_shell() -> Result<PathBuf, ChromiumNotFound> {
    find_chromium(
        |name| std::env::var_os(name),
        Some(Path::new(SYSTEM_HEADLESS_SHELL)),
        Path::new(SYSTEM_CHROMIUM),
        std::env::var_os("PATH").as_deref(),
    )
}

/// Finds `chromium-headless-shell` (Debian's package of that name installs
/// `/usr/bin/chromium-headless-shell`), looking there first and then on
/// `PATH`.
///
/// This ignores `LUMEN_CHROME` and `CHROME_PATH`; a caller that honours an
/// explicit choice uses [`locate_preferring_headless_shell`] instead.
pub fn locate_headless_shell() -> Option<PathBuf> {
    find_headless_shell(
        Path::new(SYSTEM_HEADLESS_SHELL),
        std::env::var_os("PATH").as_deref(),
    )
}

/// Whether `path` names a headless shell (which is headless already and
/// takes no `--headless` flag), judged by its file name.
pub fn is_headless_shell(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains("headless-shell") || n.contains("headless_shell"))
}

/// [`locate`] with its inputs passed in, so tests need not touch the
/// process environment or the real `/usr/bin`. `headless_shell` is where
/// the system's headless shell would be, when it is preferred.
fn find_chromium(
    env: impl Fn(&str) -> Option<OsString>,
    headless_shell: Option<&Path>,
    system: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, ChromiumNotFound> {
    let mut looked_at = Vec::new();
    for var in ENV_VARS {
        match env(var).filter(|value| !value.is_empty()) {
            Some(value) => {
                let path = PathBuf::from(value);
                if is_executable(&path) {
                    return Ok(path);
                }
                return Err(ChromiumNotFound::BadEnvPath { var, path });
            }
            None => looked_at.push(format!("{var} (unset)")),
        }
    }

    if let Some(shell) = headless_shell {
        if let Some(found) = find_headless_shell(shell, path_var) {
            return Ok(found);
        }
        looked_at.push(shell.display().to_string());
        if path_var.is_some() {
            looked_at.push(format!("{HEADLESS_SHELL_NAME} on PATH"));
        }
    }

    if is_executable(system) {
        return Ok(system.to_path_buf());
    }
    looked_at.push(system.display().to_string());

    match path_var {
        Some(path_var) => {
            for name in PATH_NAMES {
                if let Some(found) = search_path(path_var, name) {
                    return Ok(found);
                }
                looked_at.push(format!("{name} on PATH"));
            }
        }
        None => looked_at.push("PATH (unset)".to_owned()),
    }
    Err(ChromiumNotFound::NotInstalled { looked_at })
}

/// [`locate_headless_shell`] with its inputs passed in.
fn find_headless_shell(system: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if is_executable(system) {
        return Some(system.to_path_buf());
    }
    search_path(path_var?, HEADLESS_SHELL_NAME)
}

/// The first executable file called `name` in the folders of `path_var`.
///
/// Empty entries are skipped: POSIX reads them as the working folder, which
/// is not a place to pick a browser up from by accident.
fn search_path(path_var: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|folder| !folder.as_os_str().is_empty())
        .map(|folder| folder.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;

    // `metadata` follows symlinks, as Debian's /usr/bin entries often are.
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

// The tests set permission bits, which only Unix has; Lumen's CI is Linux.
#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::collections::HashMap;
    use std::fs;

    use tempfile::TempDir;

    use super::*;

    /// A scratch folder standing in for the file system the locator sees.
    struct Scratch {
        dir: TempDir,
    }

    impl Scratch {
        fn new() -> Self {
            Self {
                dir: TempDir::new().unwrap(),
            }
        }

        fn path(&self, relative: &str) -> PathBuf {
            self.dir.path().join(relative)
        }

        /// Creates an executable file and returns its path.
        fn executable(&self, relative: &str) -> PathBuf {
            let path = self.file(relative);
            set_mode(&path, 0o755);
            path
        }

        /// Creates a file that is not executable and returns its path.
        fn file(&self, relative: &str) -> PathBuf {
            let path = self.path(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "#!/bin/sh\n").unwrap();
            set_mode(&path, 0o644);
            path
        }

        fn path_var(&self, folders: &[&str]) -> OsString {
            std::env::join_paths(folders.iter().map(|folder| self.path(folder))).unwrap()
        }
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn env_of(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.as_os_str().to_owned()))
            .collect();
        move |key| map.get(key).cloned()
    }

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    #[test]
    fn lumen_chrome_comes_first() {
        let s = Scratch::new();
        let lumen = s.executable("lumen/chrome");
        let chrome_path = s.executable("chrome-path/chrome");
        let system = s.executable("usr/bin/chromium");
        let path_var = s.path_var(&["bin"]);
        s.executable("bin/chromium");

        let env = env_of(&[("LUMEN_CHROME", &lumen), ("CHROME_PATH", &chrome_path)]);
        let found = find_chromium(env, None, &system, Some(&path_var));
        assert_eq!(found, Ok(lumen));
    }

    #[test]
    fn chrome_path_comes_second() {
        let s = Scratch::new();
        let chrome_path = s.executable("chrome-path/chrome");
        let system = s.executable("usr/bin/chromium");

        let env = env_of(&[("CHROME_PATH", &chrome_path)]);
        assert_eq!(
            find_chromium(env, None, &system, None),
            Ok(chrome_path.clone())
        );

        let empty = PathBuf::new();
        let env = env_of(&[("LUMEN_CHROME", &empty), ("CHROME_PATH", &chrome_path)]);
        assert_eq!(
            find_chromium(env, None, &system, None),
            Ok(chrome_path),
            "an empty LUMEN_CHROME counts as unset"
        );
    }

    #[test]
    fn a_missing_env_path_is_an_error_naming_the_variable() {
        let s = Scratch::new();
        let system = s.executable("usr/bin/chromium");
        let missing = s.path("nowhere/chrome");

        let env = env_of(&[("LUMEN_CHROME", &missing)]);
        let error = find_chromium(env, None, &system, None).unwrap_err();
        assert_eq!(
            error,
            ChromiumNotFound::BadEnvPath {
                var: "LUMEN_CHROME",
                path: missing.clone(),
            }
        );

        let env = env_of(&[("CHROME_PATH", &missing)]);
        let error = find_chromium(env, None, &system, None).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "CHROME_PATH is set to {}, which is not an executable file. \
                 Point CHROME_PATH at a Chromium binary (such as /usr/bin/chromium) or unset it. \
                 To install Chromium: sudo apt-get install -y chromium",
                missing.display()
            )
        );
    }

    #[test]
    fn an_env_path_that_is_not_executable_is_an_error() {
        let s = Scratch::new();
        let plain = s.file("plain/chrome");
        let folder = s.path("plain");

        for value in [&plain, &folder] {
            let env = env_of(&[("LUMEN_CHROME", value)]);
            let error = find_chromium(env, None, &s.path("none"), None).unwrap_err();
            assert!(
                matches!(
                    error,
                    ChromiumNotFound::BadEnvPath {
                        var: "LUMEN_CHROME",
                        ..
                    }
                ),
                "{error}"
            );
        }
    }

    #[test]
    fn the_system_path_comes_before_path() {
        let s = Scratch::new();
        let system = s.executable("usr/bin/chromium");
        s.executable("bin/chromium");
        let path_var = s.path_var(&["bin"]);
        assert_eq!(
            find_chromium(no_env, None, &system, Some(&path_var)),
            Ok(system)
        );
    }

    #[test]
    fn path_names_are_tried_in_order() {
        let s = Scratch::new();
        let system = s.path("usr/bin/chromium");
        let google = s.executable("first/google-chrome");
        let browser = s.executable("second/chromium-browser");
        let chromium = s.executable("third/chromium");
        let path_var = s.path_var(&["first", "second", "third"]);

        assert_eq!(
            find_chromium(no_env, None, &system, Some(&path_var)),
            Ok(chromium.clone()),
            "chromium wins over names found in earlier folders"
        );
        fs::remove_file(&chromium).unwrap();
        assert_eq!(
            find_chromium(no_env, None, &system, Some(&path_var)),
            Ok(browser.clone())
        );
        fs::remove_file(&browser).unwrap();
        assert_eq!(
            find_chromium(no_env, None, &system, Some(&path_var)),
            Ok(google)
        );
    }

    #[test]
    fn earlier_path_folders_win_and_non_executables_are_skipped() {
        let s = Scratch::new();
        let system = s.path("usr/bin/chromium");
        s.file("a/chromium");
        fs::create_dir_all(s.path("b/chromium")).unwrap();
        let wanted = s.executable("c/chromium");
        s.executable("d/chromium");
        let path_var = s.path_var(&["a", "b", "c", "d"]);

        assert_eq!(
            find_chromium(no_env, None, &system, Some(&path_var)),
            Ok(wanted)
        );
    }

    #[test]
    fn nothing_found_lists_every_place_and_the_fix() {
        let s = Scratch::new();
        let system = s.path("usr/bin/chromium");
        let path_var = s.path_var(&["bin"]);

        let error = find_chromium(no_env, None, &system, Some(&path_var)).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "Chromium was not found (looked at: LUMEN_CHROME (unset), CHROME_PATH (unset), {}, \
                 chromium on PATH, chromium-browser on PATH, google-chrome on PATH). \
                 Install it with: sudo apt-get install -y chromium   \
                 (or set LUMEN_CHROME=/path/to/chrome)",
                system.display()
            )
        );

        let error = find_chromium(no_env, None, &system, None).unwrap_err();
        assert_eq!(
            error,
            ChromiumNotFound::NotInstalled {
                looked_at: vec![
                    "LUMEN_CHROME (unset)".to_owned(),
                    "CHROME_PATH (unset)".to_owned(),
                    system.display().to_string(),
                    "PATH (unset)".to_owned(),
                ],
            }
        );
    }

    #[test]
    fn headless_shell_prefers_the_system_path_then_path() {
        let s = Scratch::new();
        let system = s.path("usr/bin/chromium-headless-shell");
        let on_path = s.executable("bin/chromium-headless-shell");
        let path_var = s.path_var(&["bin"]);

        assert_eq!(find_headless_shell(&system, Some(&path_var)), Some(on_path));
        let system = s.executable("usr/bin/chromium-headless-shell");
        assert_eq!(
            find_headless_shell(&system, Some(&path_var)),
            Some(system.clone())
        );
        assert_eq!(
            find_headless_shell(&s.path("none"), Some(&s.path_var(&["empty"]))),
            None
        );
        assert_eq!(find_headless_shell(&s.path("none"), None), None);
    }

    #[test]
    fn empty_path_entries_are_skipped() {
        let s = Scratch::new();
        let path_var = OsString::from(format!(":{}", s.path("bin").display()));
        let wanted = s.executable("bin/chromium");
        assert_eq!(search_path(&path_var, "chromium"), Some(wanted));
        assert_eq!(search_path(OsStr::new(""), "chromium"), None);
    }

    #[test]
    fn a_preferred_headless_shell_comes_after_the_variables_and_before_chromium() {
        let s = Scratch::new();
        let system = s.executable("usr/bin/chromium");
        let shell_system = s.path("usr/bin/chromium-headless-shell");
        let shell_on_path = s.executable("bin/chromium-headless-shell");
        let path_var = s.path_var(&["bin"]);

        assert_eq!(
            find_chromium(no_env, Some(&shell_system), &system, Some(&path_var)),
            Ok(shell_on_path.clone())
        );
        let explicit = s.executable("explicit/chrome");
        let env = env_of(&[("CHROME_PATH", &explicit)]);
        assert_eq!(
            find_chromium(env, Some(&shell_system), &system, Some(&path_var)),
            Ok(explicit),
            "an explicit choice wins over the headless shell"
        );
        fs::remove_file(&shell_on_path).unwrap();
        assert_eq!(
            find_chromium(no_env, Some(&shell_system), &system, Some(&path_var)),
            Ok(system),
            "without a headless shell, Chromium"
        );
    }

    #[test]
    fn nothing_found_with_the_shell_preferred_lists_the_shell_places_too() {
        let s = Scratch::new();
        let system = s.path("usr/bin/chromium");
        let shell = s.path("usr/bin/chromium-headless-shell");
        let path_var = s.path_var(&["bin"]);

        let error = find_chromium(no_env, Some(&shell), &system, Some(&path_var)).unwrap_err();
        assert_eq!(
            error,
            ChromiumNotFound::NotInstalled {
                looked_at: vec![
                    "LUMEN_CHROME (unset)".to_owned(),
                    "CHROME_PATH (unset)".to_owned(),
                    shell.display().to_string(),
                    "chromium-headless-shell on PATH".to_owned(),
                    system.display().to_string(),
                    "chromium on PATH".to_owned(),
                    "chromium-browser on PATH".to_owned(),
                    "google-chrome on PATH".to_owned(),
                ],
            }
        );
    }

    #[test]
    fn a_lumen_error_names_the_setting_to_fix() {
        let bad = ChromiumNotFound::BadEnvPath {
            var: "LUMEN_CHROME",
            path: PathBuf::from("/nowhere/chrome"),
        };
        let LumenError::Config { setting, message } = LumenError::from(bad.clone()) else {
            unreachable!("a configuration error");
        };
        assert_eq!(setting, "LUMEN_CHROME");
        assert_eq!(message, bad.to_string());

        let missing = ChromiumNotFound::NotInstalled { looked_at: vec![] };
        let LumenError::Config { setting, .. } = LumenError::from(missing) else {
            unreachable!("a configuration error");
        };
        assert_eq!(setting, "chromium");
    }

    #[test]
    fn headless_shells_are_told_by_their_file_name() {
        assert!(is_headless_shell(Path::new(
            "/usr/bin/chromium-headless-shell"
        )));
        assert!(is_headless_shell(Path::new("/opt/chrome/headless_shell")));
        assert!(!is_headless_shell(Path::new("/usr/bin/chromium")));
        assert!(!is_headless_shell(Path::new("/headless-shell/chromium")));
        assert!(!is_headless_shell(Path::new("")));
    }
}

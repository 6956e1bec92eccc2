//! `cargo xtask ci`: everything CI runs, in order, stopping at the first
//! failure.
//!
//! 1. chromium: find Chromium (the browser tests drive a real one), and
//!    install it with apt-get when running as root;
//! 2. fmt: `cargo fmt --all -- --check`;
//! 3. clippy: `cargo clippy --workspace --all-targets -- -D warnings`;
//! 4. tidy: the checks of `cargo xtask tidy`, in-process;
//!    sdk: `cargo xtask sdk-schemas --check`, the mock provider's request
//!    schemas against the pinned SDKs (installed with pip when missing);
//! 5. eval: `cargo xtask eval --offline --quick`, the whole engine on the
//!    replica sites and MiniWoB++ for all four adapters (scripted models);
//!    sdk and eval run in the lumen-eval binary (see `forward`);
//! 6. tests: `cargo nextest run` when nextest is installed, else `cargo test`;
//! 7. doctests: `cargo test --doc`, which nextest does not run.
//!
//! Tests run with `INSTA_UPDATE=no`, so a changed snapshot fails instead of
//! being written, and with `LUMEN_CHROME` set to the Chromium found in step 1.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::{forward, tidy, util};

/// The install command we suggest when Chromium is missing.
const INSTALL_HINT: &str = "sudo apt-get install -y chromium";

/// Where Chromium is usually installed, after the environment variables.
const CHROMIUM_PATH: &str = "/usr/bin/chromium";

/// Chromium's usual names on PATH, in order of preference.
const CHROMIUM_NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome"];

/// Options of `cargo xtask ci`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// Never install Chromium; stop with the install command instead.
    #[arg(long)]
    skip_install: bool,
}

/// `cargo xtask demo`: the README's main job. Makes sure Chromium is there
/// (installing it as `ci` does), then runs `lumen demo` with `args`.
pub(crate) fn demo(options: &Options, args: &[String]) -> anyhow::Result<()> {
    let root = util::project_root()?;
    let chromium = ensure_chromium(options)?;
    util::run(
        util::cargo()
            .current_dir(&root)
            .env("LUMEN_CHROME", &chromium)
            .args(["run", "--quiet", "-p", "lumen-cli", "--", "demo"])
            .args(args),
    )
}

/// Runs every step, then prints how long each took (also after a failure).
pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    let root = util::project_root()?;
    let mut timings = Vec::new();
    let result = run_steps(options, &root, &mut timings);
    println!("==> timings");
    for (name, elapsed) in &timings {
        println!("    {name:<9} {:>7.1}s", elapsed.as_secs_f64());
    }
    if result.is_ok() {
        println!("ci: all steps passed");
    }
    result
}

fn run_steps(
    options: &Options,
    root: &Path,
    timings: &mut Vec<(&'static str, Duration)>,
) -> anyhow::Result<()> {
    let chromium = step(timings, "chromium", || ensure_chromium(options))?;
    step(timings, "fmt", || {
        util::run(
            util::cargo()
                .current_dir(root)
                .args(["fmt", "--all", "--", "--check"]),
        )
    })?;
    step(timings, "clippy", || {
        util::run(util::cargo().current_dir(root).args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    step(timings, "tidy", tidy::run)?;
    step(timings, "sdk", || {
        util::run(forward::command("sdk-schemas", &["--check".into()], false)?.current_dir(root))
    })?;
    step(timings, "eval", || {
        let args = ["--offline", "--quick", "--concurrency", "2"].map(OsString::from);
        util::run(
            forward::command("eval", &args, false)?
                .current_dir(root)
                .env("LUMEN_CHROME", &chromium),
        )
    })?;
    let nextest = util::succeeds(
        util::cargo()
            .current_dir(root)
            .args(["nextest", "--version"]),
    );
    let [mut tests, mut doctests] = test_commands(nextest);
    for cmd in [&mut tests, &mut doctests] {
        cmd.current_dir(root)
            .env("INSTA_UPDATE", "no")
            .env("LUMEN_CHROME", &chromium);
    }
    step(timings, "tests", || util::run(&mut tests))?;
    step(timings, "doctests", || util::run(&mut doctests))?;
    Ok(())
}

/// Runs one step under a `==> name` header and records its elapsed time.
fn step<T>(
    timings: &mut Vec<(&'static str, Duration)>,
    name: &'static str,
    body: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    println!("==> {name}");
    let start = Instant::now();
    let result = body();
    timings.push((name, start.elapsed()));
    result.with_context(|| format!("ci step `{name}` failed"))
}

/// The test run (nextest when available) and the doctest run.
fn test_commands(nextest: bool) -> [Command; 2] {
    let mut tests = util::cargo();
    if nextest {
        tests.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
    } else {
        tests.args(["test", "--workspace", "--no-fail-fast"]);
    }
    let mut doctests = util::cargo();
    doctests.args(["test", "--workspace", "--doc"]);
    [tests, doctests]
}

/// Finds Chromium, or installs it with apt-get when that is possible and
/// allowed, or fails with the command to run.
pub(crate) fn ensure_chromium(options: &Options) -> anyhow::Result<PathBuf> {
    let env = |name: &str| std::env::var_os(name);
    if let Some(path) = locate_chromium(&env, &is_executable)? {
        println!("Chromium: {}", path.display());
        return Ok(path);
    }
    let missing = format!(
        "Chromium not found (looked at $LUMEN_CHROME, $CHROME_PATH, {CHROMIUM_PATH}, \
         and {} on PATH); install it with `{INSTALL_HINT}` or set LUMEN_CHROME to its path",
        CHROMIUM_NAMES.join(", ")
    );
    let apt_get = env("PATH").and_then(|path| find_on_path(&path, "apt-get", &is_executable));
    let Some(apt_get) = apt_get.filter(|_| !options.skip_install && is_root()) else {
        bail!(missing);
    };
    println!("Chromium not found; running as root, so installing it with apt-get");
    util::run(Command::new(&apt_get).arg("update"))?;
    util::run(
        Command::new(&apt_get)
            .args(["install", "-y", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    let path = locate_chromium(&env, &is_executable)?
        .with_context(|| format!("apt-get installed chromium, but still: {missing}"))?;
    println!("Chromium: {}", path.display());
    Ok(path)
}

// TODO(17): this is a second Chromium locator; lumen-browser's is the one.
// xtask stays on clap and anyhow, so wire `ensure_chromium` to it through
// the lumen-eval binary rather than a dependency.
/// Looks for Chromium in `LUMEN_CHROME`, then `CHROME_PATH`, then
/// [`CHROMIUM_PATH`], then [`CHROMIUM_NAMES`] on `PATH`. A variable that is
/// set but names no executable is an error rather than silently skipped.
fn locate_chromium(
    env: &dyn Fn(&str) -> Option<OsString>,
    is_executable: &dyn Fn(&Path) -> bool,
) -> anyhow::Result<Option<PathBuf>> {
    for var in ["LUMEN_CHROME", "CHROME_PATH"] {
        if let Some(value) = env(var).filter(|value| !value.is_empty()) {
            let path = PathBuf::from(value);
            if !is_executable(&path) {
                bail!(
                    "{var} is {}, which is not an executable file",
                    path.display()
                );
            }
            return Ok(Some(path));
        }
    }
    if is_executable(Path::new(CHROMIUM_PATH)) {
        return Ok(Some(CHROMIUM_PATH.into()));
    }
    let Some(path_var) = env("PATH") else {
        return Ok(None);
    };
    Ok(CHROMIUM_NAMES
        .iter()
        .find_map(|name| find_on_path(&path_var, name, is_executable)))
}

fn find_on_path(
    path_var: &OsString,
    name: &str,
    is_executable: &dyn Fn(&Path) -> bool,
) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// Whether we run as root, from `id -u`; false if that cannot be run.
fn is_root() -> bool {
    util::output(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn fake_env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn fake_fs(files: &[&str]) -> impl Fn(&Path) -> bool {
        let files: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
        move |path| files.iter().any(|file| file == path)
    }

    fn locate(vars: &[(&str, &str)], files: &[&str]) -> anyhow::Result<Option<PathBuf>> {
        locate_chromium(&fake_env(vars), &fake_fs(files))
    }

    #[test]
    fn lumen_chrome_wins_over_everything() {
        let found = locate(
            &[
                ("LUMEN_CHROME", "/opt/c/chrome"),
                ("CHROME_PATH", "/x/chrome"),
                ("PATH", "/bin"),
            ],
            &["/opt/c/chrome", "/x/chrome", CHROMIUM_PATH, "/bin/chromium"],
        );
        assert_eq!(found.unwrap(), Some(PathBuf::from("/opt/c/chrome")));
    }

    #[test]
    fn chrome_path_comes_next_and_empty_values_are_unset() {
        let found = locate(
            &[("LUMEN_CHROME", ""), ("CHROME_PATH", "/x/chrome")],
            &["/x/chrome", CHROMIUM_PATH],
        );
        assert_eq!(found.unwrap(), Some(PathBuf::from("/x/chrome")));
    }

    #[test]
    fn a_variable_naming_no_executable_is_an_error() {
        let err = locate(&[("CHROME_PATH", "/gone/chrome")], &[CHROMIUM_PATH]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CHROME_PATH is /gone/chrome, which is not an executable file"
        );
    }

    #[test]
    fn usr_bin_chromium_comes_before_path() {
        let found = locate(&[("PATH", "/bin")], &[CHROMIUM_PATH, "/bin/chromium"]);
        assert_eq!(found.unwrap(), Some(PathBuf::from(CHROMIUM_PATH)));
    }

    #[test]
    fn path_is_searched_by_name_preference_then_directory_order() {
        let found = locate(
            &[("PATH", "/a:/b")],
            &["/a/google-chrome", "/b/chromium-browser"],
        );
        assert_eq!(found.unwrap(), Some(PathBuf::from("/b/chromium-browser")));
        let found = locate(&[("PATH", "/a:/b")], &["/a/chromium", "/b/chromium"]);
        assert_eq!(found.unwrap(), Some(PathBuf::from("/a/chromium")));
    }

    #[test]
    fn nothing_found_is_none() {
        assert_eq!(locate(&[("PATH", "/a")], &[]).unwrap(), None);
        assert_eq!(locate(&[], &[]).unwrap(), None);
    }

    #[test]
    fn tests_use_nextest_when_available() {
        let shown = |nextest| test_commands(nextest).map(|cmd| util::display(&cmd));
        assert_eq!(
            shown(true),
            [
                "cargo nextest run --workspace --no-fail-fast",
                "cargo test --workspace --doc",
            ]
        );
        assert_eq!(
            shown(false),
            [
                "cargo test --workspace --no-fail-fast",
                "cargo test --workspace --doc",
            ]
        );
    }

    #[test]
    fn a_failing_step_is_named_and_timed() {
        let mut timings = Vec::new();
        let err = step(&mut timings, "fmt", || -> anyhow::Result<()> {
            bail!("diff")
        })
        .unwrap_err();
        assert_eq!(format!("{err:#}"), "ci step `fmt` failed: diff");
        assert_eq!(timings.len(), 1);
        assert_eq!(timings[0].0, "fmt");
    }
}

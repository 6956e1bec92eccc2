//! `cargo xtask ci`: everything CI runs, in order, stopping at the first
//! failure.
//!
//! 1. chromium: find Chromium (the browser tests drive a real one) with
//!    lumen-browser's locator, through `lumen-eval chromium` (so this step
//!    also builds lumen-eval, which the eval step needs anyway), and
//!    install it with apt-get when running as root;
//! 2. postgres: find PostgreSQL's server binaries (`initdb`, `postgres`;
//!    the run store's tests start a throwaway server with them), and
//!    install them with `apt-get install -y postgresql` when running as
//!    root ([`postgres`]); no server is started here;
//! 3. fmt: `cargo fmt --all -- --check`;
//! 4. clippy: `cargo clippy --workspace --all-targets -- -D warnings`;
//! 5. tidy: the checks of `cargo xtask tidy`, in-process;
//!    sdk: `cargo xtask sdk-schemas --check`, the mock provider's request
//!    schemas against the pinned SDKs (installed with pip when missing);
//! 6. eval: `cargo xtask eval --offline --quick`, the whole engine on the
//!    replica sites and MiniWoB++ for all four adapters (scripted models);
//!    sdk and eval run in the lumen-eval binary (see `forward`);
//! 7. tests: `cargo nextest run` when nextest is installed, else `cargo test`;
//! 8. doctests: `cargo test --doc`, which nextest does not run;
//! 9. python: the `lumen` wheel built with maturin and its pytest suite,
//!    real offline runs in Chromium through Python ([`python`]).
//!
//! Tests run with `INSTA_UPDATE=no`, so a changed snapshot fails instead of
//! being written, with `LUMEN_CHROME` set to the Chromium found in step 1
//! and `LUMEN_POSTGRES_BIN` to the folder of PostgreSQL's binaries found in
//! step 2.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::{forward, tidy, util};

mod postgres;
mod python;

/// Options of `cargo xtask ci`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// Never install Chromium or PostgreSQL; stop with the install command
    /// instead.
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
    let postgres_bin = step(timings, "postgres", || postgres::ensure(options))?;
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
            .env("LUMEN_CHROME", &chromium)
            .env(postgres::BIN_ENV, &postgres_bin);
    }
    step(timings, "tests", || util::run(&mut tests))?;
    step(timings, "doctests", || util::run(&mut doctests))?;
    step(timings, "python", || python::run(root, &chromium))?;
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

/// Finds Chromium with lumen-browser's locator (asked through
/// `lumen-eval chromium`, so xtask keeps building from clap and anyhow
/// alone), or installs it with apt-get when that is possible and allowed,
/// or fails with the locator's message, which names what it looked at and
/// the command to run.
pub(crate) fn ensure_chromium(options: &Options) -> anyhow::Result<PathBuf> {
    let missing = match locate_chromium()? {
        Located::Found(path) => {
            println!("Chromium: {}", path.display());
            return Ok(path);
        }
        Located::NotInstalled(why) => why,
    };
    let path_var = std::env::var_os("PATH");
    let apt_get = path_var.and_then(|path| find_on_path(&path, "apt-get", &is_executable));
    let Some(apt_get) = apt_get.filter(|_| !options.skip_install && is_root()) else {
        bail!("{missing}");
    };
    println!("Chromium not found; running as root, so installing it with apt-get");
    util::run(Command::new(&apt_get).arg("update"))?;
    util::run(
        Command::new(&apt_get)
            .args(["install", "-y", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    match locate_chromium()? {
        Located::Found(path) => {
            println!("Chromium: {}", path.display());
            Ok(path)
        }
        Located::NotInstalled(why) => bail!("apt-get installed chromium, but still: {why}"),
    }
}

/// What `lumen-eval chromium` answered.
#[derive(Debug, PartialEq, Eq)]
enum Located {
    Found(PathBuf),
    /// Nothing installed (exit code 3), with the locator's message.
    NotInstalled(String),
}

/// Runs `lumen-eval chromium`: exit 0 prints the path, 3 means none is
/// installed; anything else (a variable naming no executable) is an error.
fn locate_chromium() -> anyhow::Result<Located> {
    let mut cmd = forward::command("chromium", &[], false)?;
    let line = util::display(&cmd);
    let out = cmd
        .output()
        .with_context(|| format!("could not start `{line}`"))?;
    interpret(out.status.code(), &out.stdout, &out.stderr)
        .with_context(|| format!("`{line}` failed"))
}

fn interpret(code: Option<i32>, stdout: &[u8], stderr: &[u8]) -> anyhow::Result<Located> {
    let stderr = String::from_utf8_lossy(stderr).trim().to_owned();
    match code {
        Some(0) => {
            let path = String::from_utf8_lossy(stdout).trim().to_owned();
            if path.is_empty() {
                bail!("it printed no path");
            }
            Ok(Located::Found(PathBuf::from(path)))
        }
        Some(3) => Ok(Located::NotInstalled(stderr)),
        _ => bail!("{stderr}"),
    }
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
    use super::*;

    #[test]
    fn the_locator_answers_a_path_nothing_or_an_error() {
        assert_eq!(
            interpret(Some(0), b"/usr/bin/chromium\n", b"").unwrap(),
            Located::Found(PathBuf::from("/usr/bin/chromium"))
        );
        assert_eq!(
            interpret(Some(3), b"", b"no Chromium found\n").unwrap(),
            Located::NotInstalled("no Chromium found".into())
        );
        let err = interpret(Some(1), b"", b"error: LUMEN_CHROME is /x").unwrap_err();
        assert!(err.to_string().contains("LUMEN_CHROME is /x"), "{err}");
        assert!(interpret(Some(0), b"  \n", b"").is_err(), "an empty path");
        assert!(interpret(None, b"", b"").is_err(), "killed by a signal");
    }
}

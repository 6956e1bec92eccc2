//! The `python` step of `cargo xtask ci`: builds the `lumen` wheel from
//! `bindings/python` with maturin (dev profile, in the workspace's target
//! folder, so the engine's dependencies are shared with the rest of the
//! build) and runs its pytest suite, which drives real offline runs in
//! Chromium through Python.
//!
//! Everything lands under `target/python/`: the pinned tools (maturin,
//! pytest) installed with `pip --target` (no virtual environment needed,
//! as the sdk step), the wheel, and the installed package. It needs
//! `python3` (3.9 or newer) with pip, and PyPI the first time.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util;

/// The tools, pinned.
const PINS: &[&str] = &["maturin==1.16.0", "pytest==9.2.0"];

/// The interpreter the step uses (and builds the wheel for).
const PYTHON: &str = "python3";

/// Builds and installs the wheel, then runs pytest with `chromium`.
pub(super) fn run(root: &Path, chromium: &Path) -> anyhow::Result<()> {
    check_python()?;
    let dir = root.join("target").join("python");
    let tools = dir.join("tools");
    ensure_tools(&tools)?;
    let wheels = dir.join("wheels");
    fresh(&wheels)?;
    util::run(
        Command::new(tools.join("bin").join("maturin"))
            .current_dir(root)
            .args(["build", "--profile", "dev", "--out"])
            .arg(&wheels)
            .args(["-m", "bindings/python/Cargo.toml", "-i", PYTHON]),
    )?;
    let wheel = only_wheel(&wheels)?;
    let site = dir.join("site");
    fresh(&site)?;
    util::run(
        pip(&["install", "--no-deps", "--target"])
            .arg(&site)
            .arg(&wheel),
    )?;
    let path = std::env::join_paths([&site, &tools]).context("joining PYTHONPATH")?;
    util::run(
        Command::new(PYTHON)
            .current_dir(root)
            .args([
                "-m",
                "pytest",
                "bindings/python/tests",
                "-q",
                "-p",
                "no:cacheprovider",
            ])
            .env("PYTHONPATH", path)
            .env("LUMEN_CHROME", chromium),
    )
}

/// Fails with what to install when there is no usable `python3`.
fn check_python() -> anyhow::Result<()> {
    let check = "import sys, pip; sys.exit(0 if sys.version_info >= (3, 9) else 1)";
    if util::succeeds(Command::new(PYTHON).args(["-c", check])) {
        return Ok(());
    }
    bail!(
        "the python step needs python3 (3.9 or newer) with pip on PATH to build and test the \
         Python bindings; install them (Debian: `apt-get install python3 python3-pip`)"
    )
}

/// `python3 -m pip <command> --quiet … <rest>`: the flags go right after
/// the command, so the caller's last flag can take the next argument.
fn pip(args: &[&str]) -> Command {
    let mut cmd = Command::new(PYTHON);
    cmd.args(["-m", "pip"])
        .args(args.iter().take(1))
        .args(["--quiet", "--disable-pip-version-check"])
        .args(args.iter().skip(1))
        // CI runs as root; pip's warning about that says nothing useful here.
        .env("PIP_ROOT_USER_ACTION", "ignore");
    cmd
}

/// Installs the pinned tools into `dir` unless they are there already.
fn ensure_tools(dir: &Path) -> anyhow::Result<()> {
    let marker = dir.join(".lumen-pins");
    let wanted = PINS.join("\n");
    if std::fs::read_to_string(&marker).is_ok_and(|pins| pins == wanted) {
        return Ok(());
    }
    println!(
        "python: installing {} into {}",
        PINS.join(", "),
        dir.display()
    );
    fresh(dir)?;
    util::run(pip(&["install", "--target"]).arg(dir).args(PINS))
        .context("installing maturin and pytest needs pip and access to PyPI")?;
    std::fs::write(&marker, wanted).context("marking the tools install")
}

/// Empties `dir` (creating it).
fn fresh(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

/// The one wheel maturin wrote into `dir`.
fn only_wheel(dir: &Path) -> anyhow::Result<PathBuf> {
    let wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .collect();
    match wheels.as_slice() {
        [wheel] => Ok(wheel.clone()),
        _ => bail!(
            "expected one wheel in {}, found {}",
            dir.display(),
            wheels.len()
        ),
    }
}

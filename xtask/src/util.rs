//! Helpers shared by the tasks: the project root and running commands.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

/// The workspace root: the parent of xtask's own manifest directory.
pub(crate) fn project_root() -> anyhow::Result<PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .with_context(|| format!("{} has no parent directory", manifest_dir.display()))
}

/// The cargo that runs us (so the pinned toolchain is used), else `cargo`.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// A command as the user would type it, for headers and error messages.
pub(crate) fn display(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program())
        .file_name()
        .unwrap_or(cmd.get_program())
        .to_string_lossy()
        .into_owned();
    cmd.get_args().fold(program, |mut line, arg| {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
        line
    })
}

/// Runs `cmd` with inherited stdio and fails unless it exits successfully.
pub(crate) fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let line = display(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{line}`; is it installed?"))?;
    if !status.success() {
        bail!("`{line}` failed ({status})");
    }
    Ok(())
}

/// Runs `cmd` and returns its standard output; stderr is passed through so
/// the user sees why it failed.
pub(crate) fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let line = display(cmd);
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not start `{line}`; is it installed?"))?;
    if !out.status.success() {
        bail!("`{line}` failed ({})", out.status);
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{line}` printed invalid UTF-8"))
}

/// Whether `cmd` starts and exits successfully, with its output discarded.
/// For probes such as `cargo nextest --version`.
pub(crate) fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_shows_program_name_and_arguments() {
        let mut cmd = Command::new("/usr/bin/cargo");
        cmd.args(["fmt", "--all", "--", "--check"]);
        assert_eq!(display(&cmd), "cargo fmt --all -- --check");
    }

    #[test]
    fn project_root_holds_the_workspace_manifest() {
        let root = project_root().unwrap();
        assert!(root.join("Cargo.toml").is_file());
        assert!(root.join("xtask").is_dir());
    }
}

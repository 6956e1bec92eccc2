//! Helpers shared by the tasks: the project root, running commands, and
//! reading a process tree's memory from `/proc`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// The workspace root, two levels above this crate's manifest directory
/// (`crates/eval`).
pub(crate) fn project_root() -> anyhow::Result<PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .nth(2)
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

/// A process's `field` (`VmRSS:`, `VmHWM:`) from `/proc/<pid>/status`, in
/// KiB.
pub(crate) fn status_kb(field: &str, pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// RSS of process `root` and all its descendants, in MiB.
pub(crate) fn tree_rss_mib(root: u32) -> f64 {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()
                        .and_then(|r| r.split_whitespace().nth(1))
                        .and_then(|p| p.parse::<u32>().ok())
                });
            if let Some(ppid) = ppid {
                parents.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree.iter()
        .filter_map(|p| status_kb("VmRSS:", *p))
        .sum::<u64>() as f64
        / 1024.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_a_resident_size_and_so_does_its_tree() {
        let me = std::process::id();
        let own = super::status_kb("VmRSS:", me).unwrap();
        assert!(own > 0);
        assert!(super::tree_rss_mib(me) > 0.0);
        assert_eq!(super::status_kb("NoSuchField:", me), None);
    }

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
        assert!(root.join("crates/eval").is_dir());
    }
}

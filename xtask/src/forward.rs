//! The tasks that need the whole engine live in the `lumen-eval` binary
//! (crates/eval); xtask hands them over unchanged, so xtask itself builds
//! from clap and anyhow alone.
//!
//! `cargo xtask <task> <args>` becomes
//! `cargo run --quiet --manifest-path <root>/Cargo.toml -p lumen-eval -- <task> <args>`
//! in the caller's directory (relative paths mean what they meant), with
//! stdin, stdout and stderr inherited and the exit code passed back.
//! `bench` runs the release build, as it always has: benchmarks time
//! optimised code unless `LUMEN_BENCH_DEBUG` is set.

use std::ffi::OsString;
use std::process::{Command, ExitCode};

use anyhow::Context as _;

use crate::util;

/// The arguments after a forwarded task's name, `--help` included, passed
/// on untouched for lumen-eval's own parser.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub(crate) args: Vec<OsString>,
}

/// Whether `task` with `args` runs the release build of lumen-eval: a
/// benchmark does, unless `LUMEN_BENCH_DEBUG` is set; asking for help (or
/// for no benchmark at all, which prints the usage) does not wait for a
/// release build, as it did not when xtask parsed `bench` itself.
pub(crate) fn wants_release(task: &str, args: &[OsString], bench_debug: bool) -> bool {
    let asks_for_help = args.first().is_none_or(|first| first == "help")
        || args.iter().any(|arg| arg == "--help" || arg == "-h");
    task == "bench" && !bench_debug && !asks_for_help
}

/// `cargo run` of lumen-eval with `task` and `args`.
pub(crate) fn command(task: &str, args: &[OsString], release: bool) -> anyhow::Result<Command> {
    let manifest = util::project_root()?.join("Cargo.toml");
    let mut cmd = util::cargo();
    cmd.arg("run");
    if release {
        cmd.arg("--release");
    }
    cmd.arg("--quiet")
        .arg("--manifest-path")
        .arg(manifest)
        .args(["--package", "lumen-eval", "--", task])
        .args(args);
    Ok(cmd)
}

/// Runs `task` in lumen-eval and returns its exit code.
pub(crate) fn run(task: &str, args: &Args) -> anyhow::Result<ExitCode> {
    let release = wants_release(
        task,
        &args.args,
        std::env::var_os("LUMEN_BENCH_DEBUG").is_some(),
    );
    if release {
        eprintln!(
            "cargo xtask bench: timing a release build (the first build takes a few minutes; LUMEN_BENCH_DEBUG=1 measures the debug build)"
        );
    }
    let mut cmd = command(task, &args.args, release)?;
    let line = util::display(&cmd);
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{line}`"))?;
    // A code that does not fit (or none: killed by a signal) is a failure.
    Ok(status
        .code()
        .and_then(|code| u8::try_from(code).ok())
        .map_or(ExitCode::FAILURE, ExitCode::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_run_lumen_eval_through_cargo_with_their_arguments() {
        let args = ["--offline", "--quick"].map(OsString::from);
        let cmd = command("eval", &args, false).unwrap();
        let root = util::project_root().unwrap();
        assert_eq!(
            util::display(&cmd),
            format!(
                "cargo run --quiet --manifest-path {} --package lumen-eval -- eval --offline --quick",
                root.join("Cargo.toml").display()
            )
        );
        let cmd = command("bench", &[OsString::from("agent")], true).unwrap();
        assert!(
            util::display(&cmd).starts_with("cargo run --release --quiet "),
            "{}",
            util::display(&cmd)
        );
    }

    #[test]
    fn only_bench_runs_in_release_unless_debug_or_help_is_asked_for() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        let agent = args(&["agent", "--samples", "3"]);
        assert!(wants_release("bench", &agent, false));
        assert!(!wants_release("bench", &agent, true));
        for help in [&[][..], &["help"], &["--help"], &["agent", "-h"]] {
            assert!(!wants_release("bench", &args(help), false), "{help:?}");
        }
        for task in ["eval", "record", "decode-stream", "sdk-schemas"] {
            assert!(!wants_release(task, &agent, false), "{task}");
        }
    }

    #[test]
    fn help_and_flags_reach_lumen_eval_untouched() {
        use clap::Parser as _;
        let cli =
            crate::Cli::try_parse_from(["cargo xtask", "eval", "--offline", "--help", "--", "x"])
                .unwrap();
        let crate::Task::Eval(forwarded) = cli.task else {
            panic!("eval expected: {:?}", cli.task);
        };
        assert_eq!(forwarded.args, ["--offline", "--help", "--", "x"]);
        let cli = crate::Cli::try_parse_from(["cargo xtask", "bench", "agent", "--samples", "3"])
            .unwrap();
        let crate::Task::Bench(forwarded) = cli.task else {
            panic!("bench expected: {:?}", cli.task);
        };
        assert_eq!(forwarded.args, ["agent", "--samples", "3"]);
    }
}

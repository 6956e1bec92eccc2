//! `lumen-eval`: the project tasks that need the whole engine, split out of
//! xtask so that `cargo xtask tidy` and `cargo xtask ci` build in seconds.
//! `cargo xtask eval|record|bench|decode-stream|sdk-schemas …` forwards here
//! unchanged (`cargo run --quiet -p lumen-eval -- …`).
//!
//! It holds:
//! - [`eval`]: `eval`, the live WebVoyager runs and the offline suites
//!   (task catalogues, oracles, judge, reports);
//! - [`record`]: `record`, real runs saved as sanitized provider-stream
//!   fixtures;
//! - [`bench`]: `bench browser|agent|server|cli`, latency against the raw
//!   floor;
//! - [`decode_stream`]: `decode-stream`, a recording replayed through its
//!   parser;
//! - [`sdk_schemas`]: `sdk-schemas`, the mock provider's request schemas
//!   against the pinned official SDKs.
//!
//! A tool, not a library: it may depend on any crate of the workspace
//! (the engine, the server, the mock, the CLI's trace renderer), and no
//! crate may depend on it (`cargo xtask tidy` enforces both). `publish =
//! false`.

// lumen-eval is a command-line tool: printing to the terminal is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod decode_stream;
mod eval;
mod record;
mod sdk_schemas;
mod util;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Lumen's evals, fixture recording and benchmarks (run through
/// `cargo xtask …`).
#[derive(Debug, Parser)]
#[command(name = "lumen-eval", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Replay a recorded provider stream through its parser and print the
    /// events and decoded actions as JSON lines.
    DecodeStream(decode_stream::Options),
    /// Run WebVoyager tasks live, or the offline replica suites with a
    /// scripted model (`cargo xtask eval --offline --quick`).
    Eval(Box<eval::Options>),
    /// Run one real task with a real model and save its sanitized raw
    /// provider streams as conformance fixtures (docs/eval.md).
    Record(Box<record::Options>),
    /// Derive the mock provider's request schemas from the pinned official
    /// SDKs (installed into target/sdk with pip); `--check` compares them
    /// with the committed ones.
    SdkSchemas(sdk_schemas::Options),
    /// Measure latency against the raw floor (`cargo xtask bench browser`).
    #[command(subcommand)]
    Bench(bench::Bench),
    /// Print the Chromium binary Lumen would launch, found by lumen-browser's
    /// locator (`LUMEN_CHROME`, `CHROME_PATH`, /usr/bin/chromium, PATH).
    /// Exits with 3 when none is installed and 1 when a variable names no
    /// executable; `cargo xtask ci` and `demo` ask this before installing.
    Chromium,
}

/// Benchmarks must time optimised code: a debug build hands a `bench`
/// command to a release build of itself (set `LUMEN_BENCH_DEBUG=1` to
/// measure the debug build instead). `cargo xtask bench` already asks cargo
/// for the release build, so this only matters when run directly.
fn bench_in_release() -> anyhow::Result<()> {
    eprintln!(
        "cargo xtask bench: timing a release build (the first build takes a few minutes; LUMEN_BENCH_DEBUG=1 measures the debug build)"
    );
    let mut cmd = util::cargo();
    cmd.args([
        "run",
        "--release",
        "--quiet",
        "--package",
        "lumen-eval",
        "--",
    ])
    .args(std::env::args_os().skip(1));
    util::run(&mut cmd)
}

/// Exit code of `chromium` when no Chromium is installed (xtask installs it).
const CHROMIUM_NOT_INSTALLED: u8 = 3;

/// `lumen-eval chromium`: the path on stdout, or why not on stderr.
fn chromium() -> ExitCode {
    use lumen::browser::chromium::{ChromiumNotFound, locate};
    match locate() {
        Ok(path) => {
            println!("{}", path.display());
            ExitCode::SUCCESS
        }
        Err(err @ ChromiumNotFound::NotInstalled { .. }) => {
            eprintln!("{err}");
            ExitCode::from(CHROMIUM_NOT_INSTALLED)
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let task = Cli::parse().task;
    let release_wanted = matches!(task, Task::Bench(_))
        && cfg!(debug_assertions)
        && std::env::var_os("LUMEN_BENCH_DEBUG").is_none();
    let result = match task {
        Task::Chromium => return chromium(),
        _ if release_wanted => bench_in_release(),
        Task::DecodeStream(options) => decode_stream::run(&options),
        Task::Eval(options) => eval::run(&options),
        Task::Record(options) => record::run(&options),
        Task::SdkSchemas(options) => sdk_schemas::run(&options),
        Task::Bench(bench) => bench::run(bench),
    };
    // Print the error chain on one line ourselves: returning the error from
    // `main` would add a backtrace whenever RUST_BACKTRACE is set.
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

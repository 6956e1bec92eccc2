//! Lumen's project automation (`cargo xtask …`).
//!
//! One module per task:
//! - `tidy`: the workspace's dependency direction and manifest/doc rules;
//! - `ci`: everything CI runs, in order, stopping at the first failure.
//!
//! `cargo xtask` is an alias (see `.cargo/config.toml`) for
//! `cargo run --quiet --package xtask --`.

// xtask is a command-line tool: printing to the terminal is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench_agent;
mod bench_browser;
mod bench_cli;
mod bench_server;
mod ci;
mod decode_stream;
mod eval;
mod record;
mod sdk_schemas;
mod tidy;
mod util;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Lumen's project automation.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Check the dependency direction between crates, `[lints] workspace =
    /// true` in every manifest and a `//!` doc on every crate root.
    Tidy,
    /// Run what CI runs: Chromium check, fmt, clippy, tidy, tests, doctests.
    Ci(ci::Options),
    /// The main job: make sure Chromium is installed, then run `lumen demo`
    /// (an offline task on a fixture site with a scripted mock model).
    Demo {
        #[command(flatten)]
        options: ci::Options,
        /// Arguments passed on to `lumen demo`.
        #[arg(last = true)]
        args: Vec<String>,
    },
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
    Bench(Bench),
}

/// What `cargo xtask bench` measures.
#[derive(Debug, Subcommand)]
enum Bench {
    /// lumen-browser against raw CDP: screenshots, input, settling.
    Browser(bench_browser::Options),
    /// A 20-step scripted run through the whole engine: per-step overhead
    /// against the raw CDP floor, tokens against a naive loop, memory, cold
    /// start, concurrency.
    Agent(bench_agent::Options),
    /// `lumen serve` under a bounded loopback load: runs/min, step latency,
    /// peak memory, nothing lost.
    Server(bench_server::Options),
    /// `lumen browser` commands against agent-browser's native binary, as
    /// whole processes: click, fill, snapshot -i, screenshot, url, cold open.
    Cli(bench_cli::Options),
}

/// Benchmarks must time optimised code: a debug build of xtask hands a
/// `bench` command to a release build of itself (set `LUMEN_BENCH_DEBUG=1` to
/// measure the debug build instead).
fn bench_in_release() -> anyhow::Result<()> {
    eprintln!(
        "cargo xtask bench: timing a release build (the first build takes a few minutes; LUMEN_BENCH_DEBUG=1 measures the debug build)"
    );
    let mut cmd = util::cargo();
    cmd.args(["run", "--release", "--quiet", "--package", "xtask", "--"])
        .args(std::env::args_os().skip(1));
    util::run(&mut cmd)
}

fn main() -> ExitCode {
    let task = Cli::parse().task;
    let release_wanted = matches!(task, Task::Bench(_))
        && cfg!(debug_assertions)
        && std::env::var_os("LUMEN_BENCH_DEBUG").is_none();
    let result = match task {
        _ if release_wanted => bench_in_release(),
        Task::Tidy => tidy::run(),
        Task::Ci(options) => ci::run(&options),
        Task::Demo { options, args } => ci::demo(&options, &args),
        Task::DecodeStream(options) => decode_stream::run(&options),
        Task::Eval(options) => eval::run(&options),
        Task::Record(options) => record::run(&options),
        Task::SdkSchemas(options) => sdk_schemas::run(&options),
        Task::Bench(Bench::Browser(options)) => bench_browser::run(&options),
        Task::Bench(Bench::Agent(options)) => bench_agent::run(&options),
        Task::Bench(Bench::Server(options)) => bench_server::run(&options),
        Task::Bench(Bench::Cli(options)) => bench_cli::run(&options),
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

//! Lumen's project automation (`cargo xtask …`).
//!
//! One module per task:
//! - `tidy`: the workspace's dependency direction and manifest/doc rules
//!   (`json` reads the `cargo metadata` it needs);
//! - `ci`: everything CI runs, in order, stopping at the first failure;
//!   `demo` shares its Chromium check;
//! - `forward`: `eval`, `record`, `bench`, `decode-stream` and
//!   `sdk-schemas` need the whole engine and run in the `lumen-eval`
//!   binary (crates/eval); xtask hands them over unchanged.
//!
//! xtask depends on clap and anyhow only (tidy checks it), so `cargo xtask
//! tidy` builds in seconds. `cargo xtask` is an alias (see
//! `.cargo/config.toml`) for `cargo run --quiet --package xtask --`.

// xtask is a command-line tool: printing to the terminal is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod ci;
mod forward;
mod json;
mod tidy;
mod util;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Lumen's project automation.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    after_help = "eval, record, bench, decode-stream and sdk-schemas run in the lumen-eval \
                  binary (crates/eval); `cargo xtask <task> --help` shows their options."
)]
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
    #[command(disable_help_flag = true)]
    DecodeStream(forward::Args),
    /// Run WebVoyager tasks live, or the offline replica suites with a
    /// scripted model (`cargo xtask eval --offline --quick`).
    #[command(disable_help_flag = true)]
    Eval(forward::Args),
    /// Run one real task with a real model and save its sanitized raw
    /// provider streams as conformance fixtures (docs/eval.md).
    #[command(disable_help_flag = true)]
    Record(forward::Args),
    /// Derive the mock provider's request schemas from the pinned official
    /// SDKs (installed into target/sdk with pip); `--check` compares them
    /// with the committed ones.
    #[command(disable_help_flag = true)]
    SdkSchemas(forward::Args),
    /// Measure latency against the raw floor (`cargo xtask bench browser`;
    /// also agent, server, cli), timing a release build.
    #[command(disable_help_flag = true)]
    Bench(forward::Args),
}

fn main() -> ExitCode {
    let result = match Cli::parse().task {
        Task::Tidy => tidy::run().map(|()| ExitCode::SUCCESS),
        Task::Ci(options) => ci::run(&options).map(|()| ExitCode::SUCCESS),
        Task::Demo { options, args } => ci::demo(&options, &args).map(|()| ExitCode::SUCCESS),
        Task::DecodeStream(args) => forward::run("decode-stream", &args),
        Task::Eval(args) => forward::run("eval", &args),
        Task::Record(args) => forward::run("record", &args),
        Task::SdkSchemas(args) => forward::run("sdk-schemas", &args),
        Task::Bench(args) => forward::run("bench", &args),
    };
    // Print the error chain on one line ourselves: returning the error from
    // `main` would add a backtrace whenever RUST_BACKTRACE is set.
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

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

mod ci;
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
}

fn main() -> ExitCode {
    let result = match Cli::parse().task {
        Task::Tidy => tidy::run(),
        Task::Ci(options) => ci::run(&options),
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

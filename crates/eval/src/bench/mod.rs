//! `cargo xtask bench …`: latency and resources against the raw floor, one
//! module per subject. Results go to `target/bench` and docs/benchmarks.md.
//!
//! - [`browser`]: lumen-browser against raw CDP;
//! - [`agent`]: a scripted run through the whole engine;
//! - [`server`]: `lumen serve` under a bounded loopback load;
//! - [`cli`]: `lumen browser` commands against agent-browser.

pub(crate) mod agent;
pub(crate) mod browser;
pub(crate) mod cli;
pub(crate) mod server;

/// What `cargo xtask bench` measures.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Bench {
    /// lumen-browser against raw CDP: screenshots, input, settling.
    Browser(browser::Options),
    /// A 20-step scripted run through the whole engine: per-step overhead
    /// against the raw CDP floor, tokens against a naive loop, memory, cold
    /// start, concurrency.
    Agent(agent::Options),
    /// `lumen serve` under a bounded loopback load: runs/min, step latency,
    /// peak memory, nothing lost.
    Server(server::Options),
    /// `lumen browser` commands against agent-browser's native binary, as
    /// whole processes: click, fill, snapshot -i, screenshot, url, cold open.
    Cli(cli::Options),
}

/// Runs the chosen benchmark.
pub(crate) fn run(bench: Bench) -> anyhow::Result<()> {
    match bench {
        Bench::Browser(options) => browser::run(&options),
        Bench::Agent(options) => agent::run(&options),
        Bench::Server(options) => server::run(&options),
        Bench::Cli(options) => cli::run(&options),
    }
}

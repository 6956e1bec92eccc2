//! The `lumen` command-line tool.
//!
//! Status: the commands (`run`, `demo`, `replay`, `browser …`) land with the
//! CLI issue. Until then this binary only says so.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "lumen {}: the command-line interface is not built yet; see README.md for what works today",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::from(2)
}

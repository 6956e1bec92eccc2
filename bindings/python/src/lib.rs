//! Lumen from Python: the native module `lumen._native` of the `lumen`
//! package (PyO3, built into an abi3 wheel by maturin; see
//! `bindings/python/pyproject.toml` and docs/python.md).
//!
//! The Python side (`bindings/python/python/lumen/`) holds the public API:
//! `lumen.Agent` with `run()`, `arun()` and `stream()`, the result and event
//! types and the exception classes. This module does the work underneath:
//!
//! - [`agent`]: the native agent; every run executes on one shared tokio
//!   runtime ([`runtime`]), with the GIL released while it waits;
//! - [`options`]: keyword options into [`lumen::RunOptions`], the one
//!   options model every surface of Lumen fills;
//! - [`stream`]: the live events of a run as a blocking iterator;
//! - [`errors`]: [`lumen::LumenError`]s (and panics) raised as the
//!   `lumen.errors` class for their code;
//! - [`testing`]: the offline environment of `lumen._testing` (the demo
//!   site and the mock provider), for tests only.
//!
//! May depend on `lumen` (the facade, which re-exports the layers) and, for
//! [`testing`] only, on `lumen-mock`.

mod agent;
mod convert;
mod errors;
mod options;
mod runtime;
mod stream;
mod testing;

use pyo3::prelude::*;

/// The `lumen._native` module.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<agent::NativeAgent>()?;
    m.add_class::<stream::NativeStream>()?;
    m.add_class::<testing::MockEnvironment>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

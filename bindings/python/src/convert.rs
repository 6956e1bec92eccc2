//! Rust values into Python ones: serde types become dicts and lists with
//! `pythonize` (the JSON spelling the event log and the server use), and a
//! run's outcome becomes its result or the exception it ended with.

use lumen::{RecordedEvent, RunResult};
use pyo3::prelude::*;
use serde::Serialize;

use crate::errors;

/// `value` as plain Python objects (dicts, lists, str, int, float, None).
pub(crate) fn to_py<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<Py<PyAny>> {
    Ok(pythonize::pythonize(py, value)?.unbind())
}

/// A run's result as a dict, or the exception for how it failed: an error
/// before the run (setup, the start page) or the fatal error that ended
/// it, which carries the result so far as `.result`.
pub(crate) fn outcome(py: Python<'_>, outcome: lumen::Result<RunResult>) -> PyResult<Py<PyAny>> {
    let result = outcome.map_err(|e| errors::lumen_error(py, &e))?;
    let dict = to_py(py, &result)?;
    match &result.error {
        Some(info) => Err(errors::from_info(py, info, Some(dict))),
        None => Ok(dict),
    }
}

/// One live event as a dict: `seq`, `timestampMs`, `type` and its fields.
pub(crate) fn event(py: Python<'_>, event: &RecordedEvent) -> PyResult<Py<PyAny>> {
    to_py(py, event)
}

//! Lumen's errors as Python exceptions.
//!
//! The classes live in Python (`lumen/errors.py`): `LumenError` with
//! `.code` (the stable [`lumen::ErrorCode`] spelling, `CONFIG_ERROR`,
//! `MODEL_API_ERROR`…), `.retryable` and `.result`, and one subclass per
//! code. This module asks `lumen.errors._from_native` for the instance, so
//! the mapping from code to class is written once, in Python.
//!
//! Two codes are the bindings' own: `AGENT_BUSY` (a second call on an
//! agent that is running a task) and `INTERNAL_ERROR` (a panic inside the
//! engine, caught at the task boundary instead of reaching the
//! interpreter).

use lumen::{ErrorInfo, LumenError};
use pyo3::prelude::*;
use tokio::task::JoinError;

/// The code of a call on an agent that is already running a task.
pub(crate) const AGENT_BUSY: &str = "AGENT_BUSY";
/// The code of a panic inside the engine.
pub(crate) const INTERNAL_ERROR: &str = "INTERNAL_ERROR";

/// The `lumen.errors` exception for `code`, with `message`; `result` (a
/// Python `RunResult` dict) is attached when a run ended with the error.
pub(crate) fn raise(
    py: Python<'_>,
    code: &str,
    message: &str,
    retryable: bool,
    result: Option<Py<PyAny>>,
) -> PyErr {
    let built = py
        .import("lumen.errors")
        .and_then(|m| m.getattr("_from_native"))
        .and_then(|make| make.call1((code, message, retryable, result)));
    match built {
        Ok(exception) => PyErr::from_value(exception),
        // `lumen.errors` itself failed to load: that error says more.
        Err(e) => e,
    }
}

/// The exception for a [`LumenError`].
pub(crate) fn lumen_error(py: Python<'_>, err: &LumenError) -> PyErr {
    from_info(py, &ErrorInfo::from(err), None)
}

/// The exception for an [`ErrorInfo`] (a run's `error`), with the run's
/// result attached.
pub(crate) fn from_info(py: Python<'_>, info: &ErrorInfo, result: Option<Py<PyAny>>) -> PyErr {
    let code = serde_json::to_value(info.code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| INTERNAL_ERROR.to_owned());
    raise(py, &code, &info.message, info.retryable, result)
}

/// A `CONFIG_ERROR` naming the option to fix.
pub(crate) fn config(py: Python<'_>, setting: &str, message: &str) -> PyErr {
    lumen_error(py, &LumenError::config(setting, message))
}

/// The exception for a run task that did not finish: a panic becomes
/// `INTERNAL_ERROR` with the panic's message.
pub(crate) fn join(py: Python<'_>, err: JoinError) -> PyErr {
    let message = if err.is_panic() {
        let payload = err.into_panic();
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        format!("the Lumen engine panicked (a bug; please report it): {text}")
    } else {
        "the run's task was cancelled before it ended".to_owned()
    };
    raise(py, INTERNAL_ERROR, &message, false, None)
}

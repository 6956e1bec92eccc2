//! The one tokio runtime every run of the module executes on, and waiting
//! for it from Python threads without holding the GIL.
//!
//! The runtime is pyo3-async-runtimes' (a multi-thread runtime built on
//! first use), so `arun()`'s awaitables and the blocking `run()` and
//! `stream()` share the same worker threads.

use std::future::Future;
use std::time::Duration;

use lumen::perception::control::RunControl;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

/// How often a blocking wait looks for a pending signal (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// The shared runtime.
pub(crate) fn runtime() -> &'static Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// Waits for `fut` on the runtime with the GIL released, so other Python
/// threads run meanwhile. A signal handler that raises (Ctrl-C's
/// `KeyboardInterrupt`) cancels the run through `control`; the wait then
/// goes on until the run has ended, and the handler's exception is
/// returned instead of the run's outcome.
pub(crate) fn wait<F>(py: Python<'_>, control: &RunControl, fut: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let (output, interrupted) = py.detach(|| {
        runtime().block_on(async {
            let mut interrupted = None;
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    output = &mut fut => return (output, interrupted),
                    () = tokio::time::sleep(SIGNAL_POLL), if interrupted.is_none() => {
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            control.cancel("interrupted from Python");
                            interrupted = Some(e);
                        }
                    }
                }
            }
        })
    });
    match interrupted {
        Some(e) => Err(e),
        None => Ok(output),
    }
}

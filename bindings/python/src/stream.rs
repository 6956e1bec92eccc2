//! `Agent.stream()`: a run's live events as a blocking iterator.
//!
//! [`lumen::Agent::stream`] runs the task in the background and hands over
//! its events; each `__next__` waits (GIL released) for the next one and
//! returns `("event", dict)`. After the run's last event it returns
//! `("result", dict)` (or raises what the run ended with), then stops.
//! Dropping the iterator before the end cancels the run; the agent goes
//! back to its slot either way.

use std::pin::Pin;
use std::sync::Mutex;

use futures::{Stream, StreamExt as _};
use lumen::perception::control::RunControl;
use lumen::{RecordedEvent, RunResult};
use pyo3::prelude::*;
use tokio::task::{JoinError, JoinHandle};

use crate::agent::{SharedSlot, give_back, lost};
use crate::runtime::{runtime, wait};
use crate::{convert, errors};

type Events = Pin<Box<dyn Stream<Item = RecordedEvent> + Send>>;

enum State {
    /// Events still to come, then the result.
    Running {
        events: Events,
        result: JoinHandle<Result<lumen::Result<RunResult>, JoinError>>,
    },
    /// The result has been handed over.
    Finished,
}

/// `lumen._native.Stream`: see `lumen.Agent.stream` for the documented API.
#[pyclass(module = "lumen._native", name = "Stream")]
pub(crate) struct NativeStream {
    state: Mutex<State>,
    slot: SharedSlot,
    control: RunControl,
}

impl std::fmt::Debug for NativeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeStream").finish_non_exhaustive()
    }
}

impl NativeStream {
    /// Starts `agent` on the task; the run gives it back to `slot`.
    pub(crate) fn start(
        agent: lumen::Agent,
        slot: SharedSlot,
        control: RunControl,
        instruction: String,
        start_url: Option<String>,
    ) -> Self {
        let _inside = runtime().enter();
        let (events, handle) = agent.stream(instruction, start_url);
        let back = slot.clone();
        let result = runtime().spawn(async move {
            match handle.await {
                Ok((agent, result)) => {
                    give_back(&back, agent);
                    Ok(result)
                }
                Err(e) => {
                    lost(&back);
                    Err(e)
                }
            }
        });
        Self {
            state: Mutex::new(State::Running {
                events: Box::pin(events),
                result,
            }),
            slot,
            control,
        }
    }
}

#[pymethods]
impl NativeStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next `("event", dict)`, then `("result", dict)`, then the end.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<(&'static str, Py<PyAny>)>> {
        let mut state = self.state.lock().map_err(|_| {
            errors::raise(
                py,
                errors::INTERNAL_ERROR,
                "stream state poisoned",
                false,
                None,
            )
        })?;
        let State::Running { events, .. } = &mut *state else {
            return Ok(None);
        };
        if let Some(event) = wait(py, &self.control, events.next())? {
            return Ok(Some(("event", convert::event(py, &event)?)));
        }
        let State::Running { result, .. } = std::mem::replace(&mut *state, State::Finished) else {
            return Ok(None);
        };
        match wait(py, &self.control, result)? {
            Ok(Ok(outcome)) => Ok(Some(("result", convert::outcome(py, outcome)?))),
            Ok(Err(e)) | Err(e) => {
                lost(&self.slot);
                Err(errors::join(py, e))
            }
        }
    }

    /// Cancels the run if it has not ended (it then ends with status
    /// `cancelled`; the remaining events still arrive).
    fn cancel(&self) {
        self.control
            .cancel("the event stream was closed before the run ended");
    }
}

impl Drop for NativeStream {
    fn drop(&mut self) {
        let running = self
            .state
            .lock()
            .is_ok_and(|s| matches!(*s, State::Running { .. }));
        if running {
            self.control
                .cancel("the event stream was dropped before the run ended");
        }
        let _inside = runtime().enter();
        if let Ok(mut state) = self.state.lock() {
            *state = State::Finished;
        }
    }
}

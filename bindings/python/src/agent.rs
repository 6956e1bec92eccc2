//! The native agent behind `lumen.Agent`.
//!
//! The engine's [`lumen::Agent`] sits in a slot while idle. A run takes it
//! out, runs on the shared runtime in a task of its own, and the task puts
//! it back when the run ends, however the caller stopped waiting (an
//! interrupted `run()`, a cancelled `arun()`, an abandoned `stream()`). A
//! call while the agent is out raises `AGENT_BUSY`; a panic inside the
//! engine loses the agent, and later calls say so.

use std::sync::{Arc, Mutex};

use lumen::perception::control::RunControl;
use lumen::{RunMode, RunResult};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::task::JoinHandle;

use crate::runtime::{runtime, wait};
use crate::stream::NativeStream;
use crate::{convert, errors, options};

/// Where the engine's agent is between runs.
#[derive(Debug)]
pub(crate) enum Slot {
    /// Ready for a run.
    Idle(Box<lumen::Agent>),
    /// A run has it.
    Busy,
    /// Closed, or lost to a panic.
    Gone(&'static str),
}

/// The slot, shared with the run tasks that give the agent back.
pub(crate) type SharedSlot = Arc<Mutex<Slot>>;

/// Puts `agent` back into `slot`.
pub(crate) fn give_back(slot: &SharedSlot, agent: lumen::Agent) {
    if let Ok(mut s) = slot.lock() {
        *s = Slot::Idle(Box::new(agent));
    }
}

/// Marks the agent as lost after its task panicked.
pub(crate) fn lost(slot: &SharedSlot) {
    if let Ok(mut s) = slot.lock() {
        *s = Slot::Gone("the agent was lost when the engine panicked; create a new Agent");
    }
}

/// `lumen._native.Agent`: see `lumen.Agent` for the documented API.
#[pyclass(module = "lumen._native", name = "Agent")]
#[derive(Debug)]
pub(crate) struct NativeAgent {
    slot: SharedSlot,
    control: RunControl,
    mode: RunMode,
    start_url: Option<String>,
    model: String,
}

impl NativeAgent {
    /// The agent's slot, locked (a poisoned lock is an internal error).
    fn slot(&self, py: Python<'_>) -> PyResult<std::sync::MutexGuard<'_, Slot>> {
        self.slot.lock().map_err(|_| {
            errors::raise(
                py,
                errors::INTERNAL_ERROR,
                "agent state poisoned",
                false,
                None,
            )
        })
    }

    /// Takes the agent out of its slot for a run.
    fn take(&self, py: Python<'_>) -> PyResult<lumen::Agent> {
        if let Some(why) = self.control.cancel_reason() {
            return Err(errors::raise(
                py,
                "CANCELLED",
                &format!("this agent's run was cancelled ({why}); create a new Agent to run again"),
                false,
                None,
            ));
        }
        let mut slot = self.slot(py)?;
        match std::mem::replace(&mut *slot, Slot::Busy) {
            Slot::Idle(agent) => Ok(*agent),
            Slot::Busy => Err(errors::raise(
                py,
                errors::AGENT_BUSY,
                "this agent is already running a task; wait for it to end, or create a second \
                 Agent to run tasks at the same time",
                false,
                None,
            )),
            Slot::Gone(why) => {
                *slot = Slot::Gone(why);
                Err(errors::raise(py, errors::AGENT_BUSY, why, false, None))
            }
        }
    }

    /// Starts a run in a task of its own that gives the agent back.
    fn start(
        &self,
        py: Python<'_>,
        instruction: String,
        start_url: Option<String>,
    ) -> PyResult<JoinHandle<lumen::Result<RunResult>>> {
        let mut agent = self.take(py)?;
        let start_url = start_url.or_else(|| self.start_url.clone());
        let (mode, slot) = (self.mode, self.slot.clone());
        Ok(runtime().spawn(async move {
            let result = agent
                .run_mode(&instruction, start_url.as_deref(), mode)
                .await;
            give_back(&slot, agent);
            result
        }))
    }
}

/// Cancels a run when the future waiting for it is dropped before the end
/// (a cancelled asyncio task).
struct CancelOnDrop {
    control: RunControl,
    armed: bool,
}

impl CancelOnDrop {
    /// The run has ended: nothing to cancel.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.control
                .cancel("the awaiting asyncio task was cancelled");
        }
    }
}

#[pymethods]
impl NativeAgent {
    /// An agent for `model`; reads and checks every option, does no I/O.
    #[new]
    #[pyo3(signature = (model, **options))]
    fn new(py: Python<'_>, model: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let prepared = options::prepare(py, model, options)?;
        let agent = lumen::Agent::new(prepared.agent);
        Ok(Self {
            control: agent.control(),
            slot: Arc::new(Mutex::new(Slot::Idle(Box::new(agent)))),
            mode: prepared.mode,
            start_url: prepared.start_url,
            model: model.to_owned(),
        })
    }

    /// The model id.
    #[getter]
    fn model(&self) -> &str {
        &self.model
    }

    /// Runs a task to its end; returns the result as a dict.
    #[pyo3(signature = (instruction, start_url = None))]
    fn run(
        &self,
        py: Python<'_>,
        instruction: String,
        start_url: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let handle = self.start(py, instruction, start_url)?;
        let joined = wait(py, &self.control, handle)?;
        match joined {
            Ok(outcome) => convert::outcome(py, outcome),
            Err(e) => {
                lost(&self.slot);
                Err(errors::join(py, e))
            }
        }
    }

    /// Runs a task; returns an awaitable of the result dict.
    #[pyo3(signature = (instruction, start_url = None))]
    fn arun<'py>(
        &self,
        py: Python<'py>,
        instruction: String,
        start_url: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.start(py, instruction, start_url)?;
        let mut guard = CancelOnDrop {
            control: self.control.clone(),
            armed: true,
        };
        let slot = self.slot.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let joined = handle.await;
            guard.disarm();
            Python::attach(|py| match joined {
                Ok(outcome) => convert::outcome(py, outcome),
                Err(e) => {
                    lost(&slot);
                    Err(errors::join(py, e))
                }
            })
        })
    }

    /// Runs a task in agent mode and returns its live events.
    #[pyo3(signature = (instruction, start_url = None))]
    fn stream(
        &self,
        py: Python<'_>,
        instruction: String,
        start_url: Option<String>,
    ) -> PyResult<NativeStream> {
        if self.mode != RunMode::Agent {
            return Err(errors::config(
                py,
                "mode",
                "stream() runs in agent mode; use run() for `mode` plan or exec",
            ));
        }
        let agent = self.take(py)?;
        let start_url = start_url.or_else(|| self.start_url.clone());
        Ok(NativeStream::start(
            agent,
            self.slot.clone(),
            self.control.clone(),
            instruction,
            start_url,
        ))
    }

    /// The hand-over the running task waits on, as `{id, reason, trigger}`;
    /// `None` when it waits for nobody.
    #[getter]
    fn handoff(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.control
            .handoff()
            .map(|h| {
                let value =
                    serde_json::json!({"id": h.id, "reason": h.reason, "trigger": h.trigger});
                convert::to_py(py, &value)
            })
            .transpose()
    }

    /// The person is done with the hand-over the task waits on; `note`
    /// goes to the model. `False` when nothing waits.
    #[pyo3(signature = (note = None))]
    fn finish_handoff(&self, note: Option<String>) -> bool {
        self.control.finish_handoff(None, note)
    }

    /// Cancels the running task, if any (it ends with status `cancelled`).
    fn cancel(&self) {
        self.control.cancel("cancelled from Python");
    }

    /// Closes the browser; the agent cannot run again.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let agent = {
            let mut slot = self.slot(py)?;
            match std::mem::replace(&mut *slot, Slot::Gone("this agent is closed")) {
                Slot::Idle(agent) => *agent,
                Slot::Busy => {
                    *slot = Slot::Busy;
                    return Err(errors::raise(
                        py,
                        errors::AGENT_BUSY,
                        "the agent is running a task; cancel() it and wait for the end first",
                        false,
                        None,
                    ));
                }
                Slot::Gone(_) => return Ok(()),
            }
        };
        let closed = wait(py, &self.control, agent.close())?;
        closed.map_err(|e| errors::lumen_error(py, &e))
    }
}

impl Drop for NativeAgent {
    fn drop(&mut self) {
        // Dropping the engine's agent ends a browser it launched, which
        // needs the runtime.
        let _inside = runtime().enter();
        if let Ok(mut slot) = self.slot.lock() {
            *slot = Slot::Gone("dropped");
        }
    }
}

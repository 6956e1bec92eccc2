//! The offline environment behind `lumen._testing` (tests only): the
//! demo's bakery site (or any folder) served on 127.0.0.1 and a mock
//! Anthropic endpoint answering with a scripted trajectory in the real
//! Messages wire format, both from `lumen-mock`, so a Python test drives
//! the real engine and a real Chromium without a network or a key.
//!
//! Not part of the public API: `lumen._testing` documents it.

use std::path::PathBuf;

use lumen_mock::FixtureServer;
use lumen_mock::StatusCode;
use lumen_mock::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_mock::mock_provider::{MockProvider, Reply};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;
use crate::runtime::runtime;

/// The demo's pages (`lumen demo` embeds the same files).
const DEMO_SITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../crates/cli/assets/demo");

/// The wire the mock speaks, and so the model the agent must be given.
const WIRE: Wire = Wire::Anthropic;

/// A placeholder key; it never leaves this machine.
const OFFLINE_KEY: &str = "lumen-offline-test-key";

/// The viewport the trajectory's coordinates refer to.
const VIEWPORT: (u32, u32) = (1280, 720);

/// `lumen._native.MockEnvironment`.
#[pyclass(module = "lumen._native", name = "MockEnvironment")]
#[derive(Debug)]
pub(crate) struct MockEnvironment {
    site: Option<FixtureServer>,
    mock: Option<MockProvider>,
    turns: std::sync::atomic::AtomicUsize,
}

impl MockEnvironment {
    fn site(&self, py: Python<'_>) -> PyResult<&FixtureServer> {
        self.site.as_ref().ok_or_else(|| closed(py))
    }

    fn mock(&self, py: Python<'_>) -> PyResult<&MockProvider> {
        self.mock.as_ref().ok_or_else(|| closed(py))
    }
}

fn closed(py: Python<'_>) -> PyErr {
    errors::config(py, "environment", "the offline environment is closed")
}

fn bad_step(py: Python<'_>, why: &str) -> PyErr {
    errors::config(
        py,
        "script",
        &format!(
            "{why}; a step is a dict with one key: navigate (URL), key (name), type (text), \
             click ([x, y]), request_human (reason) or done (answer)"
        ),
    )
}

/// One step of a scripted turn.
fn step(py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<ScriptStep> {
    let dict = item
        .cast::<PyDict>()
        .map_err(|_| bad_step(py, "a step is not a dict"))?;
    let (key, value) = match dict.iter().next() {
        Some(kv) if dict.len() == 1 => kv,
        _ => return Err(bad_step(py, "a step must have exactly one key")),
    };
    let key: String = key
        .extract()
        .map_err(|_| bad_step(py, "a key is not a string"))?;
    let text = || {
        value
            .extract::<String>()
            .map_err(|_| bad_step(py, &format!("`{key}` takes a string")))
    };
    Ok(match key.as_str() {
        "navigate" => ScriptStep::Goto(text()?),
        "key" => ScriptStep::Key(text()?),
        "type" => ScriptStep::Type(text()?),
        "done" => ScriptStep::Done(text()?),
        "request_human" => ScriptStep::RequestHuman(text()?),
        "click" => {
            let (x, y): (i32, i32) = value
                .extract()
                .map_err(|_| bad_step(py, "`click` takes [x, y] in CSS pixels"))?;
            ScriptStep::Click(x, y)
        }
        other => return Err(bad_step(py, &format!("unknown step `{other}`"))),
    })
}

#[pymethods]
impl MockEnvironment {
    /// Serves `site_dir` (default: the demo's bakery) and starts the mock.
    #[new]
    #[pyo3(signature = (site_dir = None))]
    fn new(py: Python<'_>, site_dir: Option<PathBuf>) -> PyResult<Self> {
        let dir = site_dir.unwrap_or_else(|| PathBuf::from(DEMO_SITE));
        let started = py.detach(|| {
            runtime().block_on(async {
                let site = FixtureServer::start_at(&dir).await?;
                let mock = MockProvider::start().await?;
                Ok::<_, std::io::Error>((site, mock))
            })
        });
        let (site, mock) = started.map_err(|e| {
            errors::config(
                py,
                "site_dir",
                &format!("cannot serve {} offline: {e}", dir.display()),
            )
        })?;
        Ok(Self {
            site: Some(site),
            mock: Some(mock),
            turns: Default::default(),
        })
    }

    /// The URL of `path` on the site.
    fn url(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        Ok(self.site(py)?.url(path))
    }

    /// The model to give the agent (the mock speaks its wire format).
    #[getter]
    fn model(&self) -> &'static str {
        WIRE.model()
    }

    /// The mock's base URL (the agent's `base_url`).
    #[getter]
    fn base_url(&self, py: Python<'_>) -> PyResult<String> {
        Ok(WIRE.base_url(self.mock(py)?))
    }

    /// The placeholder key (the agent's `api_key`).
    #[getter]
    fn api_key(&self) -> &'static str {
        OFFLINE_KEY
    }

    /// Queues model turns: a list of turns, each a list of step dicts.
    fn script(&self, py: Python<'_>, turns: Vec<Vec<Bound<'_, PyAny>>>) -> PyResult<()> {
        let mock = self.mock(py)?;
        for turn in turns {
            let steps = turn
                .iter()
                .map(|item| step(py, item))
                .collect::<PyResult<Vec<_>>>()?;
            let n = self
                .turns
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            mock.push(WIRE.route(), WIRE.turn(n, &steps, VIEWPORT));
        }
        Ok(())
    }

    /// Queues a provider error as the next model answer (HTTP `status`,
    /// the provider's error `kind`, and its message).
    fn fail_next(&self, py: Python<'_>, status: u16, kind: &str, message: &str) -> PyResult<()> {
        let status = StatusCode::from_u16(status)
            .map_err(|_| errors::config(py, "status", "not an HTTP status"))?;
        self.mock(py)?
            .push(WIRE.route(), Reply::error(status, kind, message, None));
        Ok(())
    }

    /// Scripted answers not yet asked for.
    fn pending(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.mock(py)?.pending(WIRE.route()))
    }

    /// Every request the site served: `path` or `path?query`.
    fn site_requests(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self
            .site(py)?
            .requests()
            .into_iter()
            .map(|r| match r.query {
                Some(q) => format!("{}?{q}", r.path),
                None => r.path,
            })
            .collect())
    }

    /// The body of every request the model provider received, as JSON text.
    fn provider_requests(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self
            .mock(py)?
            .requests()
            .into_iter()
            .map(|r| r.body.to_string())
            .collect())
    }

    /// The mock's checks of the requests against the provider's schema:
    /// empty when every request was well formed.
    fn violations(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.mock(py)?.violations())
    }

    /// Stops the site and the mock.
    fn close(&mut self) {
        let _inside = runtime().enter();
        self.site = None;
        self.mock = None;
    }
}

impl Drop for MockEnvironment {
    fn drop(&mut self) {
        self.close();
    }
}

//! `Agent(model=…, **options)`: keyword options into Lumen's options.
//!
//! Every option of [`RunOptions`] is a keyword, spelled in snake_case
//! (`max_steps`, `secret_domains`, `policy`…); the names are turned into
//! the options' JSON keys and read by [`RunOptions::from_json_object`],
//! so the checks and defaults are those of every other surface. Three
//! keywords are the bindings' own, for what a library caller sets but a
//! network client may not: `api_key`, `base_url` and `headless`.
//!
//! The keys of the `policy` dict are turned the same way
//! (`blocked_domains`). An option given as `None` is left out. Errors are `CONFIG_ERROR`s
//! naming the option as Python spells it, and never quote a secret.

use lumen::models::ApiKey;
use lumen::{AgentOptions, BrowserSource, LumenError, OptionError, RunMode, RunOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Map, Value};

use crate::errors;
use crate::runtime::runtime;

/// What an agent is built from.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The engine's options.
    pub(crate) agent: AgentOptions,
    /// The mode every `run()` uses (`mode`, `attempts`).
    pub(crate) mode: RunMode,
    /// The page a run opens when `run()` is given none (`start_url`).
    pub(crate) start_url: Option<String>,
}

/// The bindings' own keywords, beside those of [`RunOptions`].
const OWN: &[&str] = &["api_key", "base_url", "headless"];

/// Reads `model` and the keyword options.
pub(crate) fn prepare(
    py: Python<'_>,
    model: &str,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Prepared> {
    let mut json = Map::new();
    json.insert("model".into(), Value::String(model.to_owned()));
    let mut own = Own::default();
    for (key, value) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let key: String = key
            .extract()
            .map_err(|_| errors::config(py, "options", "option names must be strings"))?;
        if value.is_none() {
            continue;
        }
        if OWN.contains(&key.as_str()) {
            own.read(py, &key, &value)?;
            continue;
        }
        let name = json_key(&key);
        if !RunOptions::keys().contains(&name.as_str()) {
            return Err(unknown(py, &key));
        }
        let mut value: Value = pythonize::depythonize(&value)
            .map_err(|e| errors::config(py, &key, &invalid_value(&key, &e.to_string())))?;
        if matches!(key.as_str(), "policy" | "handoff")
            && let Value::Object(fields) = &mut value
        {
            // The policy's and hand-over's own keys are snake_case in
            // Python too.
            *fields = std::mem::take(fields)
                .into_iter()
                .map(|(k, v)| (json_key(&k), v))
                .collect();
        }
        json.insert(name, value);
    }
    let run = RunOptions::from_json_object(&json).map_err(|e| option_error(py, &e))?;
    // Applying may open the cache or the workflow file and build clients:
    // done inside the runtime, as the engine expects.
    let mut agent = {
        let _inside = runtime().enter();
        run.agent_options(model)
    }
    .map_err(|e| errors::lumen_error(py, &pythonic_error(e)))?;
    own.apply(&mut agent);
    Ok(Prepared {
        agent,
        mode: run.run_mode(),
        start_url: run.start_url,
    })
}

/// The bindings' own options.
#[derive(Default)]
struct Own {
    api_key: Option<String>,
    base_url: Option<String>,
    headless: Option<bool>,
}

impl Own {
    fn read(&mut self, py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let text = || {
            value
                .extract::<String>()
                .map_err(|_| errors::config(py, key, &format!("`{key}` must be a string")))
        };
        match key {
            "api_key" => self.api_key = Some(text()?),
            "base_url" => self.base_url = Some(text()?),
            _ => {
                self.headless = Some(
                    value
                        .extract::<bool>()
                        .map_err(|_| errors::config(py, key, "`headless` must be True or False"))?,
                )
            }
        }
        Ok(())
    }

    fn apply(self, agent: &mut AgentOptions) {
        if let Some(key) = self.api_key {
            agent.adapter.api_key = Some(ApiKey::new(key));
        }
        if let Some(url) = self.base_url {
            agent.adapter.base_url = Some(url);
        }
        if let (Some(headless), BrowserSource::Local(launch)) = (self.headless, &mut agent.browser)
        {
            launch.headless = headless;
        }
    }
}

/// `max_steps` → `maxSteps`.
fn json_key(python: &str) -> String {
    let mut out = String::with_capacity(python.len());
    let mut upper = false;
    for c in python.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `maxSteps` → `max_steps` (the engine's own conversion).
fn python_name(json: &str) -> String {
    lumen::snake_case(json)
}

/// `text` with every option's JSON name in backquotes replaced by its
/// Python name.
fn pythonic(text: &str) -> String {
    RunOptions::keys().iter().fold(text.to_owned(), |t, key| {
        t.replace(&format!("`{key}`"), &format!("`{}`", python_name(key)))
    })
}

/// A configuration error spelled with Python's option names.
fn pythonic_error(err: LumenError) -> LumenError {
    match err {
        LumenError::Config { setting, message } => {
            LumenError::config(python_name(&setting), pythonic(&message))
        }
        other => other,
    }
}

fn unknown(py: Python<'_>, key: &str) -> PyErr {
    let mut known: Vec<String> = RunOptions::keys()
        .iter()
        .map(|k| python_name(k))
        .chain(OWN.iter().map(|k| (*k).to_owned()))
        .filter(|k| k != "model")
        .collect();
    known.sort();
    errors::config(
        py,
        key,
        &format!(
            "unknown option `{key}`; the options are: {}",
            known.join(", ")
        ),
    )
}

/// Why a value cannot be read; a secret's own value is never quoted.
fn invalid_value(key: &str, why: &str) -> String {
    if key == "secrets" {
        "`secrets` must be a dict of secret names to string values".to_owned()
    } else {
        format!("`{key}`: {}", pythonic(why))
    }
}

fn option_error(py: Python<'_>, err: &OptionError) -> PyErr {
    match err {
        OptionError::Unknown(k) => unknown(py, &python_name(k)),
        OptionError::Invalid(k, why) => {
            let key = if k.is_empty() {
                "options".to_owned()
            } else {
                python_name(k)
            };
            errors::config(py, &key, &invalid_value(&key, why))
        }
    }
}

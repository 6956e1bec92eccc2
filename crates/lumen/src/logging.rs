//! Logging: levels, the per-surface switches and a logger callback, on
//! `tracing`.
//!
//! Nothing is logged unless asked for: the library never installs a
//! subscriber by itself. [`init`] (or [`layers`], to add to a subscriber
//! of your own) sets one up from [`LogOptions`]:
//!
//! - **`LUMEN_LOG`** (highest priority): `debug`, `info`, `warn`, `error`
//!   or `silent` (also `trace`, `off`) sets the level of Lumen's own logs
//!   (other crates log warnings and errors only); anything else is read as
//!   a full `tracing` filter (`lumen_browser=debug,hyper=info`) and used
//!   as is.
//! - **`verbose`** when `LUMEN_LOG` is unset: 0 silent, 1 info (the
//!   default), 2 info and every surface.
//! - **The surfaces** ([`Surface`]: CDP wire traffic, action dispatch,
//!   tab operations, history compaction, adapter calls, loop internals)
//!   are off unless turned on one by one with `LUMEN_LOG_<SURFACE>` (`1`,
//!   `true`, `on` or a level; `0`, `false`, `off` turn one off), or all
//!   together by verbose 2. They log at debug level.
//! - **The callback** ([`LogOptions::callback`]) receives every line
//!   Lumen emits as a [`LogLine`] (level, surface, target, message,
//!   fields), at every level down to debug and whatever the console shows;
//!   the surfaces it gets are the ones switched on.
//!
//! Console lines go to stderr.
//!
//! **Secrets.** Every line, on the console and to the callback, is
//! scrubbed of the secrets of the live sessions (a [`Session`] registers
//! its own; [`scrub`] adds others), so a page read back at the CDP
//! surface or an error quoting a field shows `<secret:NAME>`. Text typed
//! into the page is never logged at all, only its length.
//!
//! [`Session`]: crate::Session

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use lumen_safety::Secrets;

pub use lumen_core::logs::{
    ACTIONS, ADAPTER, BROWSER, CDP, HISTORY, LOOP, LogLevel, LogLine, Surface,
};
use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Receives every log line as structured data.
pub type LogCallback = Arc<dyn Fn(&LogLine) + Send + Sync>;

/// How logs are shown and where they go.
#[derive(Clone)]
pub struct LogOptions {
    /// 0 silent, 1 info (the default), 2 info and every surface; used
    /// when `LUMEN_LOG` is unset.
    pub verbose: u8,
    /// Receives every line (see the module docs).
    pub callback: Option<LogCallback>,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self {
            verbose: 1,
            callback: None,
        }
    }
}

impl std::fmt::Debug for LogOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogOptions")
            .field("verbose", &self.verbose)
            .field("callback", &self.callback.is_some())
            .finish()
    }
}

/// What the environment and the options ask for, resolved into filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPlan {
    /// The console's `tracing` filter (`None`: no console output).
    pub console: Option<String>,
    /// The callback's filter.
    pub callback: String,
    /// The surfaces switched on.
    pub surfaces: Vec<Surface>,
}

/// The level words of `LUMEN_LOG` as a `tracing` level (`off` for
/// `silent`), or `None` for anything else (a filter).
fn level_word(value: &str) -> Option<&'static str> {
    Some(match value.trim().to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "info" => "info",
        "warn" | "warning" => "warn",
        "error" => "error",
        "silent" | "off" | "none" => "off",
        _ => return None,
    })
}

/// A `LUMEN_LOG_<SURFACE>` value: `Some(level)` on, `Some("off")` off,
/// `None` unset or not understood (the default applies).
fn switch(value: Option<String>) -> Option<&'static str> {
    let v = value?;
    match v.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" => Some("off"),
        "1" | "true" | "yes" | "on" => Some("debug"),
        other => level_word(other),
    }
}

impl LogPlan {
    /// Resolves `options` with the environment read through `env`
    /// (`std::env::var` in [`init`]; a map in tests).
    pub fn resolve(options: &LogOptions, env: impl Fn(&str) -> Option<String>) -> LogPlan {
        let all = options.verbose >= 2;
        let lumen_log = env("LUMEN_LOG").filter(|v| !v.trim().is_empty());
        let mut surfaces = Vec::new();
        let mut surface_directives = Vec::new();
        for s in Surface::ALL {
            let level = switch(env(s.env_var())).unwrap_or(match all && lumen_log.is_none() {
                true => "debug",
                false => "off",
            });
            if level != "off" {
                surfaces.push(s);
            }
            surface_directives.push(format!("{}={level}", s.target()));
        }
        let surface_directives = surface_directives.join(",");
        let console = match &lumen_log {
            Some(v) => match level_word(v) {
                Some(level) => Some(format!(
                    "{},lumen={level},{surface_directives}",
                    deps(level)
                )),
                // A full filter is the user's own: only the surfaces
                // switched on explicitly are added.
                None => Some(
                    std::iter::once(v.trim().to_owned())
                        .chain(
                            Surface::ALL
                                .into_iter()
                                .filter_map(|s| Some((s, switch(env(s.env_var()))?)))
                                .map(|(s, level)| format!("{}={level}", s.target())),
                        )
                        .collect::<Vec<_>>()
                        .join(","),
                ),
            },
            None => {
                let level = match options.verbose {
                    0 => "off",
                    _ => "info",
                };
                Some(format!(
                    "{},lumen={level},{surface_directives}",
                    deps(level)
                ))
            }
        };
        // No console at all when it would show nothing.
        let console = console.filter(|c| {
            c.split(',')
                .any(|d| !d.trim().is_empty() && !d.trim_end().ends_with("off"))
        });
        LogPlan {
            console,
            callback: format!("warn,lumen=debug,{surface_directives}"),
            surfaces,
        }
    }
}

/// The level other crates log at when Lumen's is `level`: warnings and
/// errors at most.
fn deps(level: &str) -> &'static str {
    match level {
        "off" => "off",
        "error" => "error",
        _ => "warn",
    }
}

/// The console and callback layers of `plan` and `options`, to add to a
/// subscriber of your own.
pub fn layers<S>(plan: &LogPlan, options: &LogOptions) -> Vec<Box<dyn Layer<S> + Send + Sync>>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let mut out: Vec<Box<dyn Layer<S> + Send + Sync>> = Vec::new();
    if let Some(console) = &plan.console {
        let filter = EnvFilter::try_new(console).unwrap_or_else(|_| EnvFilter::new("off"));
        out.push(
            tracing_subscriber::fmt::layer()
                .with_writer(|| ScrubbedStderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(filter)
                .boxed(),
        );
    }
    if let Some(callback) = &options.callback {
        let filter = EnvFilter::try_new(&plan.callback).unwrap_or_else(|_| EnvFilter::new("off"));
        out.push(
            CallbackLayer {
                callback: callback.clone(),
            }
            .with_filter(filter)
            .boxed(),
        );
    }
    out
}

/// Installs the global subscriber for `options` and the environment.
/// Returns the plan, or `None` when nothing would be logged (no subscriber
/// is installed then, which costs nothing) or a subscriber was already
/// installed.
pub fn init(options: &LogOptions) -> Option<LogPlan> {
    init_with(options, None)
}

/// [`init`], also exporting Lumen's spans to `telemetry` when given
/// ([`crate::telemetry`]). With telemetry the subscriber is installed even
/// when nothing is logged.
pub fn init_with(
    options: &LogOptions,
    telemetry: Option<&crate::telemetry::Telemetry>,
) -> Option<LogPlan> {
    let plan = LogPlan::resolve(options, |name| std::env::var(name).ok());
    if plan.console.is_none() && options.callback.is_none() && telemetry.is_none() {
        return None;
    }
    let mut all = layers(&plan, options);
    if let Some(t) = telemetry {
        all.push(t.layer());
    }
    tracing_subscriber::registry()
        .with(all)
        .try_init()
        .ok()
        .map(|()| plan)
}

/// The secrets every log line is scrubbed of: those of the live sessions.
static SCRUBBED: Mutex<Vec<Weak<Secrets>>> = Mutex::new(Vec::new());

/// Scrubs `secrets` from every log line for as long as they live (held
/// weakly: dropping the last `Arc` ends it). A [`Session`](crate::Session)
/// registers its own.
pub fn scrub(secrets: &Arc<Secrets>) {
    if secrets.is_empty() {
        return;
    }
    let mut all = SCRUBBED.lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(secrets));
}

/// `text` with every registered secret replaced by its placeholder.
fn scrubbed(text: &str) -> String {
    let all: Vec<Arc<Secrets>> = SCRUBBED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    let mut out = text.to_owned();
    for s in all {
        // `… (` is where the CDP surface cut a long payload (it cuts before
        // this scrub): a secret's beginning left there goes too.
        if let std::borrow::Cow::Owned(r) = s.redact_cut(&out, "… (") {
            out = r;
        }
    }
    out
}

/// Stderr, each formatted line scrubbed of secrets before it is written.
struct ScrubbedStderr;

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = scrubbed(&String::from_utf8_lossy(buf));
        std::io::stderr().lock().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The layer that hands each event to the callback.
struct CallbackLayer {
    callback: LogCallback,
}

impl<S: tracing::Subscriber> Layer<S> for CallbackLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = match *meta.level() {
            tracing::Level::TRACE => LogLevel::Trace,
            tracing::Level::DEBUG => LogLevel::Debug,
            tracing::Level::INFO => LogLevel::Info,
            tracing::Level::WARN => LogLevel::Warn,
            tracing::Level::ERROR => LogLevel::Error,
        };
        (self.callback)(&LogLine {
            timestamp_ms: lumen_perception::monitor::now_ms(),
            level,
            surface: Surface::of_target(meta.target()),
            target: meta.target().to_owned(),
            message: scrubbed(&fields.message),
            fields: fields
                .rest
                .into_iter()
                .map(|(k, v)| (k, scrubbed(&v)))
                .collect(),
        });
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: BTreeMap<String, String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            name => {
                self.rest.insert(name.to_owned(), value.to_owned());
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            name => {
                self.rest.insert(name.to_owned(), format!("{value:?}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    fn plan(verbose: u8, vars: &[(&str, &str)]) -> LogPlan {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        LogPlan::resolve(
            &LogOptions {
                verbose,
                callback: None,
            },
            |k| vars.get(k).cloned(),
        )
    }

    #[test]
    fn the_environment_and_verbose_resolve_as_the_seed_says() {
        // Silent: no console at all (no subscriber cost).
        assert_eq!(plan(0, &[]).console, None);
        assert_eq!(plan(1, &[("LUMEN_LOG", "silent")]).console, None);
        // Info by default; the surfaces stay off.
        let p = plan(1, &[]);
        assert!(p.console.as_deref().unwrap().contains("lumen=info"));
        assert!(p.surfaces.is_empty());
        // Verbose 2: every surface.
        assert_eq!(plan(2, &[]).surfaces, Surface::ALL.to_vec());
        // LUMEN_LOG wins over verbose, in words or as a filter.
        let p = plan(0, &[("LUMEN_LOG", "debug")]);
        assert!(p.console.as_deref().unwrap().contains("lumen=debug"));
        assert!(p.surfaces.is_empty());
        let p = plan(2, &[("LUMEN_LOG", "lumen_browser=trace")]);
        assert_eq!(p.console.as_deref(), Some("lumen_browser=trace"));
        // One surface alone, even when everything else is silent.
        let p = plan(0, &[("LUMEN_LOG_CDP", "1")]);
        assert_eq!(p.surfaces, vec![Surface::Cdp]);
        assert!(p.console.as_deref().unwrap().contains("lumen::cdp=debug"));
        assert!(p.console.as_deref().unwrap().contains("lumen=off"));
        let p = plan(2, &[("LUMEN_LOG_LOOP", "off")]);
        assert!(!p.surfaces.contains(&Surface::Loop));
        let p = plan(
            0,
            &[("LUMEN_LOG", "warn,x=info"), ("LUMEN_LOG_ACTIONS", "trace")],
        );
        assert_eq!(
            p.console.as_deref(),
            Some("warn,x=info,lumen::actions=trace")
        );
    }

    #[test]
    fn the_callback_gets_lines_of_an_enabled_surface_and_none_of_a_disabled_one() {
        let lines = Arc::new(Mutex::new(Vec::<LogLine>::new()));
        let sink = lines.clone();
        let options = LogOptions {
            // The console is silent: the callback still gets every line.
            verbose: 0,
            callback: Some(Arc::new(move |l: &LogLine| {
                sink.lock().unwrap().push(l.clone())
            })),
        };
        let vars: HashMap<&str, &str> = [("LUMEN_LOG_ACTIONS", "1")].into();
        let plan = LogPlan::resolve(&options, |k| vars.get(k).map(|v| (*v).to_owned()));
        let secrets = Arc::new(Secrets::new().with("pw", "s3cr3t-value").unwrap());
        scrub(&secrets);
        let subscriber = tracing_subscriber::registry().with(layers(&plan, &options));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: ACTIONS, x = 120, y = 48, ms = 7, "click dispatched");
            tracing::debug!(target: ACTIONS, read = "value s3cr3t-value", "read s3cr3t-value back");
            tracing::debug!(target: CDP, method = "Page.navigate", "command");
            tracing::debug!(target: LOOP, step = 1, "step internals");
            tracing::info!(target: "lumen_browser::tab", "an ordinary line");
            tracing::debug!(target: "hyper::proto", "a dependency's detail");
        });
        let lines = lines.lock().unwrap();
        let shown: Vec<(Option<Surface>, &str)> = lines
            .iter()
            .map(|l| (l.surface, l.message.as_str()))
            .collect();
        assert_eq!(
            shown,
            vec![
                (Some(Surface::Actions), "click dispatched"),
                (Some(Surface::Actions), "read <secret:pw> back"),
                (None, "an ordinary line"),
            ]
        );
        let click = &lines[0];
        assert_eq!(click.level, LogLevel::Debug);
        assert_eq!(click.target, ACTIONS);
        assert_eq!(click.fields.get("x").map(String::as_str), Some("120"));
        assert_eq!(click.fields.get("ms").map(String::as_str), Some("7"));
        assert_eq!(
            lines[1].fields.get("read").map(String::as_str),
            Some("value <secret:pw>")
        );
    }
}

//! OpenTelemetry traces of runs, exported with OTLP over HTTP.
//!
//! Off unless an endpoint is given: [`TelemetryOptions::endpoint`], else
//! the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL; `/v1/traces` is appended).
//! With none of them nothing is built or installed, and the spans the loop
//! opens cost what a `tracing` span without a subscriber costs.
//!
//! The span tree of a run (the loop's spans, bridged from `tracing` by
//! `tracing-opentelemetry`):
//!
//! - `lumen.run` (the trace's root): `lumen.run.id` (the server's run id,
//!   `SessionOptions::run_id`), `lumen.model`, `lumen.instruction`,
//!   `lumen.max_steps`, and at the end `lumen.run.status`,
//!   `lumen.run.steps`;
//!   - `lumen.step`: `lumen.step`, `url.full`, `lumen.step.replayed`;
//!     - `chat {model}` for each model call, after the GenAI semantic
//!       conventions: `gen_ai.operation.name`, `gen_ai.provider.name`,
//!       `gen_ai.request.model`, `gen_ai.usage.input_tokens`,
//!       `gen_ai.usage.output_tokens`, `gen_ai.response.finish_reasons`;
//!     - `lumen.action` for each action: `lumen.action.kind`,
//!       `lumen.action.ok`, `lumen.action.error`, `lumen.action.blocked`,
//!       `lumen.action.navigated`, `lumen.action.page_changed`.
//!
//! Every text attribute (instruction, URL, error) is redacted with the
//! run's secrets before it is recorded. Only these spans are exported
//! (target [`lumen_core::logs::TELEMETRY`]), never log events: page text
//! and CDP traffic stay out. The console and callback filters do not enable
//! them, so log lines look the same with or without telemetry.
//!
//! ```no_run
//! # async fn demo() -> lumen::Result<()> {
//! use lumen::logging::{LogOptions, init_with};
//! use lumen::telemetry::{Telemetry, TelemetryOptions};
//!
//! let telemetry = Telemetry::new(&TelemetryOptions::default())?; // None: no endpoint set
//! init_with(&LogOptions::default(), telemetry.as_ref());
//! // … run agents …
//! if let Some(t) = telemetry {
//!     t.shutdown(); // flushes what is still buffered
//! }
//! # Ok(()) }
//! ```

use std::time::Duration;

use lumen_core::{LumenError, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The base URL of an OTLP collector (`/v1/traces` is appended).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The full URL traces are posted to (used as is).
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// Where traces go.
#[derive(Debug, Clone, Default)]
pub struct TelemetryOptions {
    /// The collector's base URL (`http://127.0.0.1:4318`); `/v1/traces`
    /// is appended. Unset: the environment decides.
    pub endpoint: Option<String>,
    /// `service.name` of the traces (default `lumen`).
    pub service_name: Option<String>,
}

/// An OTLP trace exporter. Give its [`layer`](Self::layer) to a
/// subscriber (or pass it to [`crate::logging::init_with`]); call
/// [`shutdown`](Self::shutdown) before the process exits so the last spans
/// are sent.
pub struct Telemetry {
    provider: SdkTracerProvider,
    endpoint: String,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// The exporter for `options` and the environment, or `None` when no
    /// endpoint is set. A malformed endpoint is a configuration error
    /// naming it.
    pub fn new(options: &TelemetryOptions) -> Result<Option<Self>> {
        Self::with_env(options, |name| std::env::var(name).ok())
    }

    fn with_env(
        options: &TelemetryOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>> {
        let set = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
        let endpoint = match (
            options.endpoint.clone(),
            set(env(TRACES_ENDPOINT_ENV)),
            set(env(ENDPOINT_ENV)),
        ) {
            (Some(base), _, _) | (None, None, Some(base)) => {
                format!("{}/v1/traces", base.trim().trim_end_matches('/'))
            }
            (None, Some(full), _) => full.trim().to_owned(),
            (None, None, None) => return Ok(None),
        };
        let bad = |e: String| LumenError::config("telemetry endpoint", e);
        let parsed = url::Url::parse(&endpoint).map_err(|e| bad(format!("{endpoint}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad(format!(
                "{endpoint}: only http and https are supported"
            )));
        }
        // The exporter's reqwest client needs the TLS provider the model
        // clients use (reqwest is built without one).
        lumen_models::http::install_tls_provider();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint.clone())
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let service = options
            .service_name
            .clone()
            .unwrap_or_else(|| "lumen".to_owned());
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build();
        Ok(Some(Self { provider, endpoint }))
    }

    /// Where traces are posted.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The layer that turns the run's spans (target
    /// [`lumen_core::logs::TELEMETRY`]) into OpenTelemetry spans; nothing
    /// else reaches it, no log event either.
    pub fn layer<S>(&self) -> Box<dyn Layer<S> + Send + Sync>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("lumen");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                m.is_span() && m.target() == lumen_core::logs::TELEMETRY
            }))
            .boxed()
    }

    /// Sends every span ended so far. Blocks until the collector answered
    /// (or the export timed out): call it off the async threads.
    pub fn flush(&self) -> Result<()> {
        self.provider
            .force_flush()
            .map_err(|e| LumenError::config("telemetry endpoint", e.to_string()))
    }

    /// Flushes and stops the exporter. Blocks like [`flush`](Self::flush).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("telemetry: the last spans could not be sent: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[tokio::test]
    async fn off_without_an_endpoint_and_the_endpoint_rules_follow_the_spec() {
        let none = TelemetryOptions::default();
        assert!(Telemetry::with_env(&none, env(&[])).unwrap().is_none());
        assert!(
            Telemetry::with_env(&none, env(&[(ENDPOINT_ENV, "  ")]))
                .unwrap()
                .is_none()
        );
        let base = Telemetry::with_env(&none, env(&[(ENDPOINT_ENV, "http://127.0.0.1:4318/")]))
            .unwrap()
            .unwrap();
        assert_eq!(base.endpoint(), "http://127.0.0.1:4318/v1/traces");
        let full = Telemetry::with_env(
            &none,
            env(&[
                (ENDPOINT_ENV, "http://ignored:1"),
                (TRACES_ENDPOINT_ENV, "http://127.0.0.1:9/custom"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(full.endpoint(), "http://127.0.0.1:9/custom");
        let option = TelemetryOptions {
            endpoint: Some("http://127.0.0.1:5".into()),
            ..TelemetryOptions::default()
        };
        let given = Telemetry::with_env(&option, env(&[(TRACES_ENDPOINT_ENV, "http://x:1")]))
            .unwrap()
            .unwrap();
        assert_eq!(given.endpoint(), "http://127.0.0.1:5/v1/traces");
        for bad in ["not a url", "ftp://127.0.0.1:21"] {
            let err = Telemetry::with_env(&none, env(&[(ENDPOINT_ENV, bad)])).unwrap_err();
            assert_eq!(err.code(), lumen_core::ErrorCode::ConfigError, "{bad}");
            assert!(err.to_string().contains("telemetry endpoint"), "{err}");
        }
        for t in [base, full, given] {
            // Nothing was ended, so nothing is sent; shutting down is quick.
            tokio::task::spawn_blocking(move || t.shutdown())
                .await
                .unwrap();
        }
    }
}

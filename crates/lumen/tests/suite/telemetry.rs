//! OpenTelemetry: a real offline run (real Chromium on a fixture page, the
//! Anthropic adapter over real HTTP to the mock provider) exports its span
//! tree with OTLP/HTTP to a receiver on 127.0.0.1, which decodes the
//! protobuf requests with the protocol's own types.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::routing::post;
use lumen::browser::{CdpTab, LaunchOptions};
use lumen::safety::Secrets;
use lumen::telemetry::{Telemetry, TelemetryOptions};
use lumen::{BrowserTab, RunStatus, Session, SessionOptions};
use lumen_test_support::mock_provider::trajectory::{ScriptStep, Wire};
use lumen_test_support::{FixtureServer, element_center};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use tracing_subscriber::layer::SubscriberExt as _;

const SECRET: &str = "hunter2-otel-secret";

/// An OTLP/HTTP trace receiver: keeps every request body.
async fn receiver() -> (String, Arc<Mutex<Vec<Bytes>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                kept.lock().unwrap().push(body);
                // An empty ExportTraceServiceResponse.
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), bodies)
}

fn attr(span: &Span, key: &str) -> Option<String> {
    let v = span.attributes.iter().find(|a| a.key == key)?;
    Some(match v.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

// One thread: the test's subscriber (set_default) sees every span the run
// opens, since every task of the run is polled on it.
#[tokio::test(flavor = "current_thread")]
async fn a_run_exports_its_span_tree_with_otlp_and_no_secret() {
    let (endpoint, bodies) = receiver().await;
    let telemetry = Telemetry::new(&TelemetryOptions {
        endpoint: Some(endpoint),
        service_name: Some("lumen-test".into()),
    })
    .unwrap()
    .expect("an endpoint was given");
    let subscriber = tracing_subscriber::registry().with(telemetry.layer());
    let guard = tracing::subscriber::set_default(subscriber);

    let site = FixtureServer::start().await.unwrap();
    let mock = lumen_test_support::mock_provider().await.unwrap();
    let tab = Arc::new(CdpTab::launch(LaunchOptions::default()).await.unwrap());
    let url = format!("{}?token={SECRET}", site.url("form.html"));
    assert!(tab.goto(&url).await.unwrap().ok);
    let name = element_center(tab.as_ref(), "#name")
        .await
        .unwrap()
        .unwrap();
    let wire = Wire::Anthropic;
    let turns = [
        vec![ScriptStep::TypeAt(
            name.x,
            name.y,
            "<secret:password>".into(),
        )],
        vec![ScriptStep::Done("typed".into())],
    ];
    for (i, t) in turns.iter().enumerate() {
        mock.push(wire.route(), wire.turn(i, t, (1280, 720)));
    }
    let adapter = super::adapter(wire, &mock);
    let options = SessionOptions {
        max_steps: 5,
        secrets: Secrets::new().with("password", SECRET).unwrap(),
        run_id: Some("run-42".into()),
        ..SessionOptions::default()
    };
    let mut session = Session::new(tab.clone(), adapter, options).unwrap();
    let result = session
        .run(&format!(
            "Type the password into the name field ({SECRET} is not for you)"
        ))
        .await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.error);
    let typed = tab
        .evaluate("document.querySelector('#name').value")
        .await
        .unwrap();
    assert_eq!(typed, SECRET, "the secret really was typed");
    drop(guard);
    let telemetry = tokio::task::spawn_blocking(move || {
        telemetry.flush().unwrap();
        telemetry
    })
    .await
    .unwrap();

    let bodies = bodies.lock().unwrap().clone();
    assert!(!bodies.is_empty(), "nothing reached the receiver");
    for body in &bodies {
        let raw = String::from_utf8_lossy(body);
        assert!(!raw.contains(SECRET), "a secret was exported: {raw}");
    }
    let spans: Vec<Span> = bodies
        .iter()
        .flat_map(|b| {
            ExportTraceServiceRequest::decode(b.as_ref())
                .unwrap()
                .resource_spans
        })
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect();
    let by_id: HashMap<Vec<u8>, &Span> = spans.iter().map(|s| (s.span_id.clone(), s)).collect();
    let parent = |s: &Span| by_id.get(&s.parent_span_id).copied();
    let named = |name: &'static str| spans.iter().filter(move |s| s.name == name);

    // One root: the run, with its model, outcome and redacted instruction.
    let runs: Vec<&Span> = named("lumen.run").collect();
    assert_eq!(
        runs.len(),
        1,
        "{:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let run = runs[0];
    assert!(run.parent_span_id.is_empty(), "the run is the trace's root");
    assert_eq!(attr(run, "lumen.run.id").as_deref(), Some("run-42"));
    assert_eq!(attr(run, "lumen.run.status").as_deref(), Some("success"));
    assert_eq!(attr(run, "lumen.run.steps").as_deref(), Some("2"));
    assert_eq!(
        attr(run, "lumen.model").as_deref(),
        Some("claude-sonnet-4-6")
    );
    assert!(
        attr(run, "lumen.instruction")
            .unwrap()
            .contains("<secret:password>")
    );
    assert!(
        spans.iter().all(|s| s.trace_id == run.trace_id),
        "one trace"
    );

    // Two steps under the run, each with one model call under it.
    let steps: Vec<&Span> = named("lumen.step").collect();
    assert_eq!(steps.len(), 2);
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(parent(step).map(|p| p.name.as_str()), Some("lumen.run"));
        assert_eq!(
            attr(step, "lumen.step").as_deref(),
            Some(i.to_string().as_str())
        );
        assert!(
            attr(step, "url.full")
                .unwrap()
                .contains("token=<secret:password>")
        );
    }
    let chats: Vec<&Span> = named("chat claude-sonnet-4-6").collect();
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        assert_eq!(parent(chat).map(|p| p.name.as_str()), Some("lumen.step"));
        assert_eq!(attr(chat, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(
            attr(chat, "gen_ai.provider.name").as_deref(),
            Some("anthropic")
        );
        assert_eq!(
            attr(chat, "gen_ai.request.model").as_deref(),
            Some("claude-sonnet-4-6")
        );
        let input: u64 = attr(chat, "gen_ai.usage.input_tokens")
            .unwrap()
            .parse()
            .unwrap();
        assert!(input > 0, "usage recorded");
        assert!(attr(chat, "gen_ai.usage.output_tokens").is_some());
        assert!(attr(chat, "gen_ai.response.finish_reasons").is_some());
    }

    // The actions (a click, the typing, the answer) under their steps.
    let actions: Vec<(String, String, &str)> = named("lumen.action")
        .map(|a| {
            (
                attr(a, "lumen.action.kind").unwrap(),
                attr(a, "lumen.action.ok").unwrap(),
                parent(a).map_or("", |p| p.name.as_str()),
            )
        })
        .collect();
    assert_eq!(
        actions,
        vec![
            ("click".into(), "true".into(), "lumen.step"),
            ("type".into(), "true".into(), "lumen.step"),
            ("terminate".into(), "true".into(), "lumen.step"),
        ]
    );
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap();
}

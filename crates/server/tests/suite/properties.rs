//! Property tests on the real server: whatever bytes or JSON a client sends
//! to the create and control endpoints, the answer is a created run or a
//! typed 4xx error, never a panic, a 5xx or a hang.

use std::time::Duration;

use lumen_server::Server;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Client, Env};

/// Field names the endpoints know, mixed with others.
const KEYS: &[&str] = &[
    "instruction",
    "startUrl",
    "model",
    "maxSteps",
    "mode",
    "attempts",
    "policy",
    "systemPrompt",
    "reason",
    "text",
    "allowedSchemes",
    "blockPrivateNetwork",
    "x",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z:/.0-9 *-]{0,16}".prop_map(Value::from),
        Just(json!("agent")),
        Just(json!("file:///etc/passwd")),
        Just(json!("http://127.0.0.1:9/")),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..5).prop_map(
                |kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            ),
        ]
    })
}

/// An object with a string `instruction` and any known fields: the bodies
/// that get past the first checks.
fn near_valid() -> impl Strategy<Value = Value> {
    (
        "[a-zA-Z ]{0,12}",
        proptest::collection::vec((proptest::sample::select(KEYS), json_value()), 0..4),
    )
        .prop_map(|(instruction, fields)| {
            let mut obj: serde_json::Map<String, Value> = fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            obj.insert("instruction".into(), Value::from(instruction));
            Value::Object(obj)
        })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        json_value().prop_map(|v| v.to_string().into_bytes()),
        near_valid().prop_map(|v| v.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

#[test]
fn arbitrary_bodies_get_a_run_or_a_typed_4xx() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (env, server) = rt.block_on(async {
        let env = Env::new().await;
        let mut options = env.options();
        // A run that validates is created, then fails at once (no browser
        // to launch), so the property runs without Chromium; only
        // example.test is reachable, so no start URL is looked up in DNS.
        options.launch.executable = Some("/nonexistent/chromium".into());
        options.policy.allowed_domains = vec!["example.test".into()];
        options.queue_limit = 64;
        let server = Server::start(options).await.unwrap();
        (env, server)
    });
    let c = Client::new(server.local_addr());
    let existing = rt.block_on(c.create(json!({"instruction": "exists"})));
    let config = ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    };
    proptest!(config, |(bytes in body(), op in 0usize..5)| {
        let path = match op {
            0 => "/v1/runs".to_string(),
            1 => format!("/v1/runs/{existing}/cancel"),
            2 => format!("/v1/runs/{existing}/pause"),
            3 => format!("/v1/runs/{existing}/resume"),
            _ => format!("/v1/runs/{existing}/message"),
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let (status, answer) = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), c.post_raw(&path, text))
                .await
                .expect("the server did not answer")
        });
        match status {
            200..=202 => prop_assert!(answer.is_object(), "{status} {answer}"),
            400..=499 => {
                let code = answer["error"]["code"].as_str().unwrap_or_default();
                prop_assert!(!code.is_empty(), "{status} without a code: {answer}");
            }
            _ => prop_assert!(false, "{path}: {status} {answer}"),
        }
    });
    // Still serving.
    let (status, health) = rt.block_on(c.get("/health"));
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    rt.block_on(server.shutdown());
    drop(env);
}

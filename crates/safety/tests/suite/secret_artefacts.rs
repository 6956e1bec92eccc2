//! A secret typed during a run must not reach any artefact the run leaves
//! behind. The run here is recorded by hand with the real core types (the
//! loop that will write these files lands later): the page echoes the typed
//! value back in a URL, an error and the model's own text, exactly the
//! routes by which a value leaks in practice. Every artefact goes through
//! the redactor, then the files are searched for the value in every form.

use std::fs;

use lumen_core::{
    Action, ActionCall, ActionExecution, ActionRecord, AssistantTurn, EffectReceipt, ErrorInfo,
    LumenError, RecordedEvent, RunResult, RunStatus, SemanticStep, StreamEvent, ThinkingBlock,
    TokenUsage, ToolResult, WireRecord,
};
use lumen_safety::Secrets;

const PASSWORD: &str = "Tr0ub4dor&3 x";
const EMAIL: &str = "alice@example.test";
/// Every spelling the values can come back in, written out independently of
/// the redactor under test.
const FORBIDDEN: &[&str] = &[
    "Tr0ub4dor&3 x",
    "Tr0ub4dor%263%20x",
    "Tr0ub4dor%263+x",
    "alice@example.test",
    "alice%40example.test",
];

#[test]
fn a_typed_secret_never_reaches_the_run_artefacts() {
    let secrets = Secrets::new()
        .with("password", PASSWORD)
        .unwrap()
        .with("email", EMAIL)
        .unwrap();

    // The model only ever writes placeholders; the router fills them in at
    // type time and that value goes to the browser alone.
    let call = ActionCall::new(
        "call_1",
        Action::Type {
            text: "<secret:password>".into(),
        },
    );
    let Action::Type { text } = &call.action else {
        unreachable!()
    };
    assert_eq!(
        secrets.substitute(text, "https://login.test/").unwrap(),
        PASSWORD
    );

    // What came back from the page: a GET form put both values in the URL,
    // the tab's error quoted the text, the model read the greeting.
    let echoed_url =
        "https://login.test/welcome?email=alice%40example.test&password=Tr0ub4dor%263+x";
    let mut execution =
        ActionExecution::failed(format!("typed \"{PASSWORD}\" but the field rejected it"));
    execution.effect = Some(Box::new(EffectReceipt {
        url_before: Some("https://login.test/".into()),
        url_after: Some(echoed_url.into()),
        navigated: true,
        ..EffectReceipt::default()
    }));
    let turn = AssistantTurn {
        calls: vec![call.clone()],
        thinking: vec![ThinkingBlock {
            text: format!("The page says Welcome {EMAIL}."),
            signature: None,
            redacted: false,
        }],
        text: Some(format!("Signed in as {EMAIL}")),
        provider: None,
    };
    let step = SemanticStep {
        step: 0,
        url: echoed_url.into(),
        screenshot: None,
        thinking: turn.thinking.clone(),
        text: turn.text.clone(),
        actions: vec![ActionRecord {
            call: call.clone(),
            execution: execution.clone(),
            blocked: None,
        }],
        usage: TokenUsage::default(),
        started_at_ms: 0,
        duration_ms: 10,
        model_ms: 5,
    };
    let wire = vec![
        WireRecord::Assistant(turn),
        WireRecord::ToolResult(ToolResult {
            call_id: "call_1".into(),
            action: "type".into(),
            ok: false,
            error: execution.error.clone(),
            hints: vec![format!("now at {echoed_url}")],
            acknowledged_safety_checks: vec![],
            image: None,
            output: None,
            download: None,
        }),
    ];
    let fatal = LumenError::invalid_data("page", format!("unexpected text {PASSWORD}"));
    let events = [
        StreamEvent::StepStarted {
            step: 0,
            url: echoed_url.into(),
        },
        StreamEvent::ActionResult {
            step: 0,
            call,
            execution,
        },
        StreamEvent::Error {
            error: ErrorInfo::from(&fatal),
        },
        StreamEvent::Done {
            status: RunStatus::Failure,
            result: Some(format!("could not log in as {EMAIL}")),
            steps: 1,
            usage: TokenUsage::default(),
            usage_by_source: Default::default(),
            cost_usd: None,
            state: None,
        },
    ];
    let result = RunResult {
        status: RunStatus::Failure,
        result: Some(format!("could not log in as {EMAIL}")),
        steps: 1,
        history: vec![step.clone()],
        state: Some(
            serde_json::json!({ "user": EMAIL })
                .as_object()
                .unwrap()
                .clone(),
        ),
        usage: TokenUsage::default(),
        usage_by_source: Default::default(),
        cost_usd: None,
        cost_note: None,
        error: Some(ErrorInfo::from(&fatal)),
    };

    // Unredacted, the artefacts do leak: the test can fail.
    let raw = serde_json::to_string(&result).unwrap();
    assert!(FORBIDDEN.iter().any(|f| raw.contains(f)));

    // Write the artefacts as a run would, each through the redactor.
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for (seq, event) in events.into_iter().enumerate() {
        let recorded = RecordedEvent {
            seq: seq as u64,
            timestamp_ms: 0,
            event,
        };
        log.push_str(&secrets.redacted_json(&recorded).unwrap().to_string());
        log.push('\n');
    }
    fs::write(dir.path().join("events.jsonl"), log).unwrap();
    fs::write(
        dir.path().join("result.json"),
        secrets.redacted_json(&result).unwrap().to_string(),
    )
    .unwrap();
    let session = serde_json::json!({
        "version": 1,
        "wire": wire,
        "semantic": [step],
        "stepCount": 1,
        "state": result.state,
    });
    let mut session = session;
    secrets.redact_json(&mut session);
    fs::write(dir.path().join("session.json"), session.to_string()).unwrap();
    fs::write(
        dir.path().join("lumen.log"),
        format!("{}\n{:?}\n", secrets.redact(&fatal.to_string()), secrets),
    )
    .unwrap();

    // Search every file for every spelling.
    let mut files = 0;
    for entry in fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        files += 1;
        for forbidden in FORBIDDEN {
            assert!(
                !text.contains(forbidden),
                "{} contains {forbidden:?}",
                path.display()
            );
        }
        assert!(secrets.leaks(&text).is_empty());
        // Redaction replaced the values; it did not drop the records.
        assert!(
            text.contains("<secret:password>") || text.contains("<secret:email>"),
            "{}",
            path.display()
        );
    }
    assert_eq!(files, 4);

    // The redacted files are still the same shapes.
    let back: RunResult =
        serde_json::from_str(&fs::read_to_string(dir.path().join("result.json")).unwrap()).unwrap();
    assert_eq!(back.steps, 1);
    assert_eq!(back.history[0].actions[0].call.action.kind(), "type");
}

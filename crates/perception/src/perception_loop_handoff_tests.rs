//! Hand-overs in the loop, with the in-memory tab: the model's
//! `request_human` with and without a person to ask, the timeout, a stop
//! while waiting, and the rejection trigger. The live view, the URL and
//! payment triggers on real Chromium are tested through the server.

use lumen_core::HandoffPolicy;

use super::*;

fn ask(reason: &str) -> Action {
    Action::RequestHuman {
        reason: reason.into(),
    }
}

fn with_handoff(l: PerceptionLoop, policy: HandoffPolicy) -> PerceptionLoop {
    let config = LoopConfig {
        handoff: Some(policy),
        ..l.config().clone()
    };
    l.with_config(config)
}

fn tool_result(state: &RunState, call_id: &str) -> lumen_core::ToolResult {
    state
        .history
        .wire()
        .iter()
        .find_map(|w| match w {
            WireRecord::ToolResult(t) if t.call_id == call_id => Some(t.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

#[tokio::test]
async fn without_a_handoff_policy_request_human_fails_and_the_run_goes_on() {
    let (_, _, l) = setup(vec![vec![ask("a code")], vec![done("ok")]], 3);
    let (r, state) = run(&l, "x").await;
    assert_eq!(r.status, RunStatus::Success);
    let t = tool_result(&state, "call_1_0");
    assert!(!t.ok);
    assert!(t.error.unwrap().contains("no person can take over"));
}

#[tokio::test]
async fn the_person_finishes_and_the_model_gets_the_note_with_a_fresh_step() {
    let (tab, adapter, l) = setup(
        vec![vec![ask("Enter the <code>"), click(5, 5)], vec![done("in")]],
        4,
    );
    let (tx, rx) = event_stream(256);
    let l = with_handoff(l, HandoffPolicy::default()).with_bus(EventBus::new().with_stream(tx));
    let control = l.control().clone();
    let task = tokio::spawn(async move { run(&l, "sign in").await });
    let pending = tokio::time::timeout(Duration::from_secs(5), control.handoff_opened())
        .await
        .expect("the run hands over");
    assert_eq!(pending.reason, "Enter the <code>");
    assert_eq!(pending.trigger, lumen_core::HandoffTrigger::Model);
    assert!(
        !control.finish_handoff(Some(pending.id + 1), None),
        "another hand-over"
    );
    assert!(control.finish_handoff(Some(pending.id), Some(" typed 1234 ".into())));
    assert!(control.handoff().is_none());
    let (r, state) = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, RunStatus::Success);
    let t = tool_result(&state, "call_1_0");
    assert!(t.ok);
    assert!(t.output.unwrap().ends_with("Their note: typed 1234"));
    // The rest of the turn still ran, and the next step saw the page anew.
    assert!(tab.calls().iter().any(|c| c.starts_with("click 5,5")));
    assert_eq!(adapter.seen.lock().unwrap().len(), 2);
    let events: Vec<RecordedEvent> = rx.collect().await;
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            StreamEvent::WaitingForHuman { .. } => Some("waiting"),
            StreamEvent::HumanDone { note, .. } => {
                assert_eq!(note.as_deref(), Some("typed 1234"));
                Some("done")
            }
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["waiting", "done"]);
}

#[tokio::test]
async fn nobody_answering_ends_the_run_and_the_rest_of_the_turn_is_not_run() {
    let (tab, adapter, l) = setup(vec![vec![ask("a CAPTCHA"), click(5, 5)]], 4);
    let l = with_handoff(
        l,
        HandoffPolicy {
            timeout_secs: 1,
            ..HandoffPolicy::default()
        },
    );
    let (r, state) = run(&l, "x").await;
    assert_eq!(r.status, RunStatus::HandoffTimeout);
    assert!(r.result.unwrap().contains("nobody took over within 1 s"));
    assert!(!tab.calls().iter().any(|c| c.starts_with("click")));
    assert!(!tool_result(&state, "call_1_1").ok);
    assert_eq!(adapter.seen.lock().unwrap().len(), 1);
    assert!(l.control().handoff().is_none());
}

#[tokio::test]
async fn a_stop_withdraws_the_hand_over() {
    let (_, _, l) = setup(vec![vec![ask("a code")], vec![done("never")]], 4);
    let l = with_handoff(l, HandoffPolicy::default());
    let control = l.control().clone();
    let task = tokio::spawn(async move { run(&l, "x").await });
    tokio::time::timeout(Duration::from_secs(5), control.handoff_opened())
        .await
        .unwrap();
    control.stop();
    let (r, state) = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, RunStatus::Cancelled);
    assert!(
        tool_result(&state, "call_1_0")
            .error
            .unwrap()
            .contains("withdrawn")
    );
}

#[tokio::test]
async fn repeated_rejections_hand_over_once_before_the_next_step() {
    let (_, adapter, l) = setup(vec![vec![done("a")], vec![done("b")], vec![done("c")]], 3);
    let gate = Arc::new(UrlMatchesGate::new("/never-matches$").unwrap());
    let l = with_handoff(
        l,
        HandoffPolicy {
            after_rejections: 1,
            // A failed assertion in the helper leaves the run to time out
            // soon, not in ten minutes.
            timeout_secs: 20,
            ..HandoffPolicy::default()
        },
    )
    .with_verifier(gate);
    let control = l.control().clone();
    let helper = tokio::spawn(async move {
        let h = control.handoff_opened().await;
        assert_eq!(h.trigger, lumen_core::HandoffTrigger::Rejections);
        control.finish_handoff(Some(h.id), Some("fixed the form".into()));
        // Once only: no second hand-over comes.
        tokio::time::timeout(Duration::from_millis(300), control.handoff_opened())
            .await
            .is_err()
    });
    let (r, _) = run(&l, "x").await;
    assert_eq!(r.status, RunStatus::MaxSteps);
    assert!(helper.await.unwrap(), "a second hand-over was opened");
    let seen = adapter.seen.lock().unwrap();
    assert!(
        seen[1].2.contains("Their note: fixed the form"),
        "{}",
        seen[1].2
    );
    assert!(
        !seen[2].2.contains("fixed the form"),
        "the notice is shown once"
    );
}

#[tokio::test]
async fn a_sub_tasks_timeout_ends_the_whole_run() {
    let (_, adapter, l) = setup(
        vec![
            vec![Action::Delegate {
                instruction: "sign in".into(),
                max_steps: Some(3),
            }],
            vec![ask("a code")],
            vec![done("never asked")],
        ],
        6,
    );
    let l = with_handoff(
        l,
        HandoffPolicy {
            timeout_secs: 1,
            ..HandoffPolicy::default()
        },
    );
    let (r, _) = run(&l, "x").await;
    assert_eq!(r.status, RunStatus::HandoffTimeout, "{r:?}");
    assert_eq!(
        adapter.seen.lock().unwrap().len(),
        2,
        "no model call after it"
    );
}

#[test]
fn every_way_to_submit_a_form_counts_for_the_payment_trigger() {
    use super::super::handoff::submits;
    let key = |k: &str| Action::KeyPress {
        keys: vec![k.into()],
    };
    for a in [
        click(1, 1),
        Action::TripleClick {
            x: 1,
            y: 1,
            modifiers: Modifiers::NONE,
        },
        key("Return"),
        key("ctrl+Enter"),
        Action::KeyDown {
            key: "Enter".into(),
        },
        Action::HoldKey {
            keys: vec!["KP_Enter".into()],
            duration_ms: 10,
        },
        Action::Type {
            text: "4242\r".into(),
        },
        Action::JavascriptExec {
            text: "document.forms[0].submit()".into(),
        },
    ] {
        assert!(submits(&a), "{a:?}");
    }
    for a in [
        key("Tab"),
        Action::Type {
            text: "4242".into(),
        },
        Action::Wait { ms: 1 },
    ] {
        assert!(!submits(&a), "{a:?}");
    }
}

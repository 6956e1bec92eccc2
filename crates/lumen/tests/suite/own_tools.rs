//! What a computer tool cannot do, through the pipeline on real Chromium:
//! answering the page's next dialog and choosing the files for its next
//! file chooser (the own tools `answer_dialog` and `choose_files`).

use lumen::browser::{CdpTab, LaunchOptions, TabOptions};
use lumen::perception::pipeline::{ActionContext, ActionPipeline};
use lumen::perception::router::ActionRouter;
use lumen::safety::ActionGuard;
use lumen::{Action, ActionCall, ActionExecution, BrowserTab, Modifiers, MouseButton, Size};
use lumen_test_support::FixtureServer;

async fn run(tab: &CdpTab, action: Action) -> ActionExecution {
    let pipeline = ActionPipeline::new(ActionGuard::default(), ActionRouter::new());
    let at = ActionContext {
        step: 0,
        instruction: "test",
        viewport: Size::new(1280, 720),
    };
    let call = ActionCall::new("c", action);
    pipeline.run(&call, tab, at).await.unwrap().execution
}

fn click(x: i32, y: i32) -> Action {
    Action::Click {
        x,
        y,
        button: MouseButton::Left,
        modifiers: Modifiers::NONE,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_answers_the_next_dialog_and_a_prompt_gets_its_text() {
    let site = FixtureServer::start().await.unwrap();
    let tab = CdpTab::launch(LaunchOptions::default()).await.unwrap();
    assert!(tab.goto(&site.url("dialogs.html")).await.unwrap().ok);
    // Unarmed, the default policy dismisses a confirm.
    assert!(run(&tab, click(140, 169)).await.ok);
    assert_eq!(
        tab.evaluate("window.lumen.confirmResult").await.unwrap(),
        false
    );
    // Armed: the next one is accepted, and only the next one.
    let armed = run(
        &tab,
        Action::AnswerDialog {
            accept: true,
            text: None,
        },
    )
    .await;
    assert!(armed.ok, "{armed:?}");
    assert!(run(&tab, click(140, 169)).await.ok);
    assert_eq!(
        tab.evaluate("window.lumen.confirmResult").await.unwrap(),
        true
    );
    assert!(run(&tab, click(140, 169)).await.ok);
    assert_eq!(
        tab.evaluate("window.lumen.confirmResult").await.unwrap(),
        false,
        "the answer was used once"
    );
    // A prompt gets the text.
    run(
        &tab,
        Action::AnswerDialog {
            accept: true,
            text: Some("Ada".into()),
        },
    )
    .await;
    assert!(run(&tab, click(140, 234)).await.ok);
    assert_eq!(
        tab.evaluate("window.lumen.promptResult").await.unwrap(),
        "Ada"
    );
    tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_chooses_files_from_the_upload_folder_only() {
    let site = FixtureServer::start().await.unwrap();
    let uploads = tempfile::tempdir().unwrap();
    std::fs::write(uploads.path().join("notes.txt"), "twelve bytes").unwrap();
    let tab = CdpTab::launch(LaunchOptions {
        tab: TabOptions {
            upload_dir: Some(uploads.path().to_path_buf()),
            ..TabOptions::default()
        },
        ..LaunchOptions::default()
    })
    .await
    .unwrap();
    assert!(tab.goto(&site.url("upload.html")).await.unwrap().ok);
    let outside = run(
        &tab,
        Action::ChooseFiles {
            paths: vec!["../../etc/passwd".into()],
        },
    )
    .await;
    assert!(!outside.ok, "{outside:?}");
    let chosen = run(
        &tab,
        Action::ChooseFiles {
            paths: vec!["notes.txt".into()],
        },
    )
    .await;
    assert!(chosen.ok, "{chosen:?}");
    assert!(run(&tab, click(220, 104)).await.ok);
    let mut name = serde_json::Value::Null;
    for _ in 0..50 {
        name = tab
            .evaluate("window.lumen.files.length ? window.lumen.files[0].name : null")
            .await
            .unwrap();
        if !name.is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(name, "notes.txt");
    tab.close().await.unwrap();
}

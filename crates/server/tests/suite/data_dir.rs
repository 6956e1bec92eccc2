//! The data directory: one process at a time, private files, and an event
//! log that survives a corrupt line.

use std::io::BufRead as _;
use std::path::Path;
use std::time::Duration;

use lumen_server::{ServeError, ServeOptions, Server};
use serde_json::{Value, json};

use super::{Client, Env, Stored};

/// The environment variable that turns [`holds_a_data_dir_for_another_test`]
/// into a lock holder.
const HOLD_ENV: &str = "LUMEN_TEST_HOLD_DATA_DIR";

fn options_on(dir: &Path) -> ServeOptions {
    let mut o = ServeOptions::new(dir);
    o.port = 0;
    o.token = Some(super::TOKEN.into());
    o
}

/// Not a test on its own: run by [`a_second_server_on_one_data_dir_is_refused`]
/// as a separate process (this test binary, with `HOLD_ENV` set), it
/// starts a server on that directory, says so, and waits to be killed.
#[tokio::test]
#[allow(clippy::print_stdout, reason = "the parent test reads it")]
async fn holds_a_data_dir_for_another_test() {
    let Ok(dir) = std::env::var(HOLD_ENV) else {
        return;
    };
    let server = Server::start(options_on(Path::new(&dir))).await.unwrap();
    println!("HOLDING {}", server.local_addr());
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn a_second_server_on_one_data_dir_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let first = Server::start(options_on(data.path())).await.unwrap();
    let err = Server::start(options_on(data.path())).await.unwrap_err();
    let ServeError::DataDirInUse { pid, .. } = &err else {
        panic!("not refused for the lock: {err}");
    };
    assert_eq!(*pid, Some(std::process::id()));
    let message = err.to_string();
    assert!(
        message.contains(&format!("pid {}", std::process::id())) && message.contains("--data-dir"),
        "{message}"
    );
    // IPC and MCP take the same lock.
    let (_, server_in) = tokio::io::duplex(64);
    let (server_out, _) = tokio::io::duplex(64);
    let err = lumen_server::ipc(options_on(data.path()), server_in, server_out)
        .await
        .unwrap_err();
    assert!(matches!(err, ServeError::DataDirInUse { .. }), "{err}");
    // A shutdown releases it.
    first.shutdown().await;
    let again = Server::start(options_on(data.path())).await.unwrap();
    again.shutdown().await;

    // Across processes: another process holds it, is named, and when it
    // dies (SIGKILL: nothing graceful) the directory is free again.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::data_dir::holds_a_data_dir_for_another_test",
            "--nocapture",
        ])
        .env(HOLD_ENV, data.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let ready = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.starts_with("HOLDING"))
    });
    let ready = tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .expect("the other process did not start its server")
        .unwrap();
    assert!(
        ready,
        "the other process exited without holding the directory"
    );
    let err = Server::start(options_on(data.path())).await.unwrap_err();
    match &err {
        ServeError::DataDirInUse { pid, .. } => assert_eq!(*pid, Some(child.id()), "{err}"),
        other => panic!("not refused for the lock: {other}"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let server = Server::start(options_on(data.path())).await.unwrap();
    server.shutdown().await;
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every file and folder under `dir` that is not private, with its mode.
#[cfg(unix)]
fn not_private(dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        let m = mode(&path);
        if e.file_type().unwrap().is_dir() {
            if m != 0o700 {
                out.push(format!("{} {m:o}", path.display()));
            }
            not_private(&path, out);
        } else if m != 0o600 {
            out.push(format!("{} {m:o}", path.display()));
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_run_folder_is_private_and_its_log_survives_a_corrupt_line() {
    let env = Env::new().await;
    let data = env.data.path().join("fresh");
    let mut options = env.options();
    options.data_dir = data.clone();
    let server = Server::start(options).await.unwrap();
    let c = Client::new(server.local_addr());
    env.click();
    env.click();
    env.done("done");
    let id = c
        .create(json!({"instruction": "Click twice", "startUrl": env.counter(), "maxSteps": 4}))
        .await;
    c.wait_status(&id, "completed").await;
    let run_dir = data.join("runs").join(&id);
    // The report is drawn after the end; wait for it, then look.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut loose = Vec::new();
        not_private(&data, &mut loose);
        let drawn = run_dir.join("report.html").is_file() && run_dir.join("run.gif").is_file();
        if drawn && loose.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not private: {loose:?} (report drawn: {drawn})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("lock")), 0o600);
    assert!(run_dir.join("screenshots").read_dir().unwrap().count() >= 3);

    // A stored event goes bad (a disk error, a bad edit): it is skipped
    // and counted, and nothing else is lost.
    let before = c.events(&id).await;
    let stored = Stored::open(&data).await;
    let lumen_server::db::Db::Sqlite(pool) = &stored.0 else {
        unreachable!("the default store is SQLite")
    };
    sqlx::query("UPDATE events SET event = '{\"seq\": 9999, \"type\": \"step_sta' WHERE run_id = $1 AND seq = 0")
        .bind(&id)
        .execute(pool)
        .await
        .unwrap();
    let before: Vec<Value> = before.into_iter().filter(|e| e["seq"] != 0).collect();
    let after = c.events(&id).await;
    assert_eq!(after, before);
    let (status, trace) = c.get(&format!("/v1/runs/{id}/trace")).await;
    assert_eq!(status, 200);
    assert_eq!(trace["skippedLines"], 1, "{trace}");
    assert_eq!(trace["steps"].as_array().unwrap().len(), 3);
    server.shutdown().await;
}

/// A data directory of files (what Lumen kept before the store: `run.json`,
/// `events.jsonl`, `session.json`, `result.json` in each run folder) is
/// imported at the first start: the runs read the same through the API, a
/// run that was executing when the files were written is `interrupted`,
/// and each `run.json` is set aside, not deleted.
#[tokio::test]
async fn a_file_based_data_dir_is_imported_at_the_first_start() {
    use lumen::{RecordedEvent, StreamEvent, TokenUsage};
    let env = Env::new().await;
    let data = env.data.path();
    let record = |id: &str, status: &str| {
        json!({"id": id, "status": status, "instruction": "Click", "model": super::MODEL,
            "maxSteps": 5, "mode": "agent", "attempts": 1, "createdAtMs": 1_700_000_000_000u64,
            "stepsCompleted": 1, "result": "done it"})
    };
    let events: Vec<String> = [
        StreamEvent::StepStarted {
            step: 0,
            url: "about:blank".into(),
        },
        StreamEvent::StepCompleted {
            step: 0,
            usage: TokenUsage::default(),
            duration_ms: 5,
            model_ms: 1,
        },
    ]
    .into_iter()
    .enumerate()
    .map(|(i, event)| {
        serde_json::to_string(&RecordedEvent {
            seq: i as u64,
            timestamp_ms: 1,
            event,
        })
        .unwrap()
    })
    .collect();
    for (id, status) in [("run_old_done", "completed"), ("run_old_live", "running")] {
        let dir = data.join("runs").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.json"), record(id, status).to_string()).unwrap();
        std::fs::write(dir.join("events.jsonl"), events.join("\n") + "\n").unwrap();
        std::fs::write(dir.join("result.json"), r#"{"status":"success"}"#).unwrap();
    }
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let done = c.run("run_old_done").await;
    assert_eq!(
        (&done["status"], &done["result"]),
        (&json!("completed"), &json!("done it"))
    );
    let live = c.run("run_old_live").await;
    assert_eq!(live["status"], "interrupted", "{live}");
    let (status, trace) = c.get("/v1/runs/run_old_done/trace").await;
    assert_eq!(status, 200);
    assert_eq!(trace["steps"].as_array().unwrap().len(), 1, "{trace}");
    let folder = data.join("runs").join("run_old_done");
    assert!(!folder.join("run.json").exists());
    assert!(folder.join("run.json.imported").is_file());
    server.shutdown().await;
    // Imported once: a second start finds the runs in the store only.
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    let (_, list) = c.get("/v1/runs").await;
    assert_eq!(list["runs"].as_array().unwrap().len(), 2, "{list}");
    let stored = Stored::open(data).await;
    assert_eq!(
        stored.result("run_old_done").await.as_deref(),
        Some(r#"{"status":"success"}"#)
    );
    server.shutdown().await;
}

/// Links and folders another user planted in or as the data directory
/// are refused before anything is written or chmod-ed through them.
/// (Red team: a root `lumen ipc` on a data dir holding another user's
/// `lock` and `runs` links truncated a root-owned file and chmod-ed a
/// root directory.) Runs as root in CI, so "another user" is `nobody`
/// (65534), made the owner with `lchown`; skipped where that cannot be.
#[tokio::test]
async fn links_and_folders_another_user_planted_are_refused() {
    use std::os::unix::fs::{PermissionsExt as _, lchown, symlink};
    const NOBODY: u32 = 65534;
    let root = tempfile::tempdir().unwrap();
    let probe = root.path().join("probe");
    std::fs::write(&probe, "").unwrap();
    if lchown(&probe, Some(NOBODY), None).is_err() {
        eprintln!("cannot give files to another user here (not root): skipped");
        return;
    }
    let victim = root.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let victim_dir = root.path().join("victim-dir");
    std::fs::create_dir(&victim_dir).unwrap();
    std::fs::set_permissions(&victim_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let refused = |err: ServeError| {
        let text = err.to_string();
        assert!(
            text.contains("not a folder of this user's") || text.contains("link"),
            "{text}"
        );
    };

    // 1. The data dir is another user's link to a folder of ours.
    let ours = root.path().join("ours");
    std::fs::create_dir(&ours).unwrap();
    let linked = root.path().join("linked");
    symlink(&ours, &linked).unwrap();
    lchown(&linked, Some(NOBODY), None).unwrap();
    refused(Server::start(options_on(&linked)).await.unwrap_err());

    // 2. The data dir is another user's folder.
    let theirs = root.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
    lchown(&theirs, Some(NOBODY), None).unwrap();
    refused(Server::start(options_on(&theirs)).await.unwrap_err());

    // 3. Our folder, left writable, where another user planted `lock`
    // and `runs` links: neither is followed, by the server, IPC or MCP.
    let loose = root.path().join("loose");
    std::fs::create_dir(&loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o777)).unwrap();
    symlink(&victim, loose.join("lock")).unwrap();
    lchown(loose.join("lock"), Some(NOBODY), None).unwrap();
    assert!(Server::start(options_on(&loose)).await.is_err());
    let (_, server_in) = tokio::io::duplex(64);
    let (server_out, _) = tokio::io::duplex(64);
    assert!(
        lumen_server::ipc(options_on(&loose), server_in, server_out)
            .await
            .is_err()
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    std::fs::remove_file(loose.join("lock")).unwrap();
    symlink(&victim_dir, loose.join("runs")).unwrap();
    lchown(loose.join("runs"), Some(NOBODY), None).unwrap();
    refused(Server::start(options_on(&loose)).await.unwrap_err());
    assert_eq!(
        mode(&victim_dir),
        0o755,
        "the link's target was not chmod-ed"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

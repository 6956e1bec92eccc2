//! `lumen browser upload|download|console|errors|wait --load|pdf|screenshot
//! --annotate|state` and two named sessions side by side, on real Chromium.

use std::path::PathBuf;

use serde_json::Value;

use super::direct::Session;
use super::harness::{code, text};

fn sample() -> PathBuf {
    lumen_test_support::fixtures_root().join("data/sample.txt")
}

impl Session {
    async fn value(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all).await).unwrap()
    }

    /// Runs a command that must fail with exit code `expected`; its stderr.
    async fn refused(&self, args: &[&str], expected: i32) -> String {
        let out = self.cmd(args).await;
        assert_eq!(code(&out), expected, "{args:?}: {}", text(&out.stdout));
        text(&out.stderr)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_sets_an_inputs_files_and_download_saves_or_reports_failure() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("upload.html")]).await;
    let sample = sample();
    let v = s
        .value(&["upload", "#file", sample.to_str().unwrap()])
        .await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(s.eval("window.lumen.files[0].name").await, "sample.txt");
    assert_eq!(s.eval("window.lumen.events.join(' ')").await, "change:1");
    // By ref, two files at once (the input is `multiple`).
    let input = s.value(&["snapshot", "-i"]).await["nodes"]
        .as_array()
        .unwrap()
        .first()
        .map(|n| n["ref"].as_str().unwrap().to_owned())
        .expect("the file input has a ref");
    let other = lumen_test_support::fixtures_root().join("downloads/report.csv");
    s.ok(&[
        "upload",
        &input,
        sample.to_str().unwrap(),
        other.to_str().unwrap(),
    ])
    .await;
    assert_eq!(s.eval("window.lumen.files.length").await, 2);
    // A file that is not there: nothing is set, the message names it.
    let err = s
        .refused(&["upload", "#file", "/no/such/file.txt"], 2)
        .await;
    assert!(err.contains("/no/such/file.txt"), "{err}");
    let err = s
        .refused(&["upload", "h1", sample.to_str().unwrap()], 1)
        .await;
    assert!(err.contains("not a file input"), "{err}");

    s.ok(&["open", &s.site.url("download.html")]).await;
    let dir = s.state.path().join("got");
    let v = s
        .value(&["download", "#csv-link", "--dir", dir.to_str().unwrap()])
        .await;
    let saved = PathBuf::from(v["path"].as_str().unwrap());
    assert!(saved.starts_with(dir.canonicalize().unwrap()), "{v}");
    assert_eq!(
        std::fs::read(&saved).unwrap(),
        std::fs::read(lumen_test_support::fixtures_root().join("downloads/report.csv")).unwrap()
    );
    assert_eq!(v["bytes"], 103, "{v}");
    let blob = s
        .ok(&["download", "#blob-btn", "--dir", dir.to_str().unwrap()])
        .await;
    assert!(blob.ends_with("lumen-generated.txt"), "{blob}");
    assert_eq!(std::fs::metadata(&blob).unwrap().len(), 59);
    // The server drops the connection after 16 bytes: reported as failed.
    let err = s
        .refused(
            &["download", "#broken-link", "--dir", dir.to_str().unwrap()],
            1,
        )
        .await;
    assert!(err.contains("failed"), "{err}");
    // A click that downloads nothing says so.
    let err = s.refused(&["download", "h1", "--timeout", "500"], 1).await;
    assert!(err.contains("started no download"), "{err}");
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_errors_and_load_states_are_read_without_a_daemon() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("console.html")]).await;
    s.ok(&["wait", "--load", "networkidle"]).await;
    s.ok(&["wait", "--text", "fetched"]).await;
    let v = s.value(&["console"]).await;
    let messages = v["messages"].as_array().unwrap();
    let find = |t: &str| {
        messages
            .iter()
            .find(|m| m["text"].as_str().unwrap().contains(t))
            .unwrap_or_else(|| panic!("no {t:?} in {v}"))
    };
    assert_eq!(find("low stock: 2 left")["level"], "warning");
    assert_eq!(find("payment widget failed")["level"], "error");
    // An object argument is shown by its description.
    assert_eq!(
        find("console.html loaded")["text"],
        "console.html loaded Object"
    );
    find("fetched");
    assert!(
        messages.iter().all(|m| m["level"] != "exception"),
        "exceptions are `errors`: {v}"
    );
    let plain = s.ok(&["console"]).await;
    assert!(plain.contains("[warning] low stock: 2 left"), "{plain}");

    let errors = s.ok(&["errors"]).await;
    assert!(errors.contains("boom from the page"), "{errors}");
    // --clear shows them once; later calls show only newer ones.
    assert!(s.ok(&["console", "--clear"]).await.contains("low stock"));
    assert_eq!(
        s.value(&["console"]).await["messages"],
        Value::Array(vec![])
    );
    s.ok(&["eval", "console.info('after the clear')"]).await;
    let after = s.ok(&["console"]).await;
    assert!(
        after.contains("[info] after the clear") && !after.contains("low stock"),
        "{after}"
    );
    assert!(
        s.ok(&["errors"]).await.contains("boom"),
        "errors keep their own list"
    );
    s.ok(&["errors", "--clear"]).await;
    assert_eq!(s.ok(&["errors"]).await, "");

    // slow.html: `load` fires at ~1 s while a fetch runs until ~1.5 s.
    s.ok(&["open", &s.site.url("slow.html")]).await;
    s.ok(&["wait", "load", "networkidle"]).await;
    assert_eq!(s.eval("window.lumen.dataLoaded").await, true);
    s.ok(&["wait", "--load", "domcontentloaded"]).await;
    let v = s.value(&["wait", "--load", "load"]).await;
    assert_eq!(v["load"], "load", "{v}");
    let err = s.refused(&["wait", "--load", "soon"], 2).await;
    assert!(err.contains("networkidle"), "{err}");
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdf_annotated_screenshot_and_storage_state() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let pdf = s.state.path().join("page.pdf");
    let v = s.value(&["pdf", pdf.to_str().unwrap()]).await;
    assert!(v["bytes"].as_u64().unwrap() > 1000, "{v}");
    assert!(std::fs::read(&pdf).unwrap().starts_with(b"%PDF"));

    let plain = s.state.path().join("plain.png");
    let marked = s.state.path().join("marked.png");
    s.ok(&["screenshot", plain.to_str().unwrap()]).await;
    let v = s
        .value(&["screenshot", "--annotate", marked.to_str().unwrap()])
        .await;
    let refs = v["refs"].as_array().unwrap();
    let subscribe = refs
        .iter()
        .find(|r| r["role"] == "checkbox")
        .unwrap_or_else(|| panic!("no checkbox among {v}"));
    assert!(subscribe["box"]["width"].as_f64().unwrap() > 0.0, "{v}");
    let png = std::fs::read(&marked).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    assert_ne!(png, std::fs::read(&plain).unwrap(), "boxes were drawn");
    // Its refs are the session's refs now.
    s.ok(&["click", subscribe["ref"].as_str().unwrap()]).await;
    assert_eq!(
        s.eval("document.querySelector('#subscribe').checked").await,
        true
    );

    s.ok(&[
        "eval",
        "localStorage.setItem('theme', 'dark'); sessionStorage.setItem('cart', '3 items'); 1",
    ])
    .await;
    s.ok(&["cookies", "set", "token=abc123"]).await;
    let file = s.state.path().join("state.json");
    let v = s.value(&["state", "save", file.to_str().unwrap()]).await;
    assert_eq!(v["localStorage"], 1, "{v}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the state file holds tokens");
    }
    s.ok(&["eval", "localStorage.clear(); sessionStorage.clear(); 1"])
        .await;
    s.ok(&["cookies", "clear"]).await;
    let v = s.value(&["state", "load", file.to_str().unwrap()]).await;
    assert_eq!(v["restored"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(s.eval("localStorage.getItem('theme')").await, "dark");
    assert_eq!(s.eval("sessionStorage.getItem('cart')").await, "3 items");
    assert!(s.ok(&["cookies"]).await.contains("token=abc123"));
    // On another origin the storage is not restored, and that is said.
    s.ok(&["open", "about:blank"]).await;
    let v = s.value(&["state", "load", file.to_str().unwrap()]).await;
    assert_eq!(v["skipped"].as_array().unwrap().len(), 1, "{v}");
    // A cookie-only file of an older version still loads.
    let old = s.state.path().join("old.json");
    std::fs::write(
        &old,
        r#"{"cookies":[{"name":"legacy","value":"1","domain":"127.0.0.1","path":"/"}]}"#,
    )
    .unwrap();
    s.ok(&["open", &s.site.url("form.html")]).await;
    assert_eq!(
        s.value(&["state", "load", old.to_str().unwrap()]).await["loaded"],
        1
    );
    assert!(s.ok(&["cookies"]).await.contains("legacy=1"));
    let err = s
        .refused(&["state", "load", "/no/such/state.json"], 2)
        .await;
    assert!(err.contains("cannot read"), "{err}");
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_named_sessions_work_side_by_side() {
    let s = Session::new().await;
    s.ok(&["--session", "a", "open", &s.site.url("form.html")])
        .await;
    s.ok(&["--session", "b", "open", &s.site.url("scroll.html")])
        .await;
    // The state (DevTools endpoint, headers, mock bodies) is the user's
    // alone.
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(s.state.path()), 0o700);
        assert_eq!(mode(&s.state.path().join("a.json")), 0o600);
    }
    // Interleaved: each session sees its own page and its own refs.
    let name = s.ok(&["--session", "a", "--json", "snapshot", "-i"]).await;
    assert!(name.contains("Name"), "{name}");
    assert!(
        s.ok(&["--session", "b", "url"])
            .await
            .ends_with("/scroll.html")
    );
    assert!(
        s.ok(&["--session", "a", "url"])
            .await
            .ends_with("/form.html")
    );
    s.ok(&["--session", "a", "check", "#subscribe"]).await;
    s.ok(&["--session", "b", "eval", "document.title = 'bee'"])
        .await;
    s.ok(&["--session", "a", "eval", "document.title = 'ay'"])
        .await;
    assert_eq!(s.ok(&["--session", "b", "title"]).await, "bee");
    assert_eq!(s.ok(&["--session", "a", "title"]).await, "ay");
    s.ok(&["--session", "b", "console"]).await;
    // Closing one leaves the other working.
    s.ok(&["--session", "a", "close"]).await;
    let err = s.refused(&["--session", "a", "url"], 2).await;
    assert!(err.contains("no browser session"), "{err}");
    s.ok(&["--session", "b", "open", &s.site.url("form.html")])
        .await;
    assert!(
        s.ok(&["--session", "b", "url"])
            .await
            .ends_with("/form.html")
    );
    s.ok(&["--session", "b", "close"]).await;
    assert_eq!(s.profile_processes(), 0);
}

//! `lumen browser check|uncheck|select|get|is|find|wait`: the element
//! commands on real Chromium, by ref and by CSS selector, with their
//! `--json` answers and their errors.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::direct::Session;
use super::harness::{code, text};

impl Session {
    /// Runs a command with `--json` that must succeed; its answer.
    pub(super) async fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all).await).unwrap()
    }

    /// Runs a command that must fail with `expected` as its exit code;
    /// returns its stderr.
    async fn fails(&self, args: &[&str], expected: i32) -> String {
        let out = self.cmd(args).await;
        assert_eq!(code(&out), expected, "{args:?}: {}", text(&out.stdout));
        text(&out.stderr)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_uncheck_and_select_set_form_controls_by_ref_and_selector() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;

    let subscribe = s.find("checkbox", "Subscribe").await;
    let v = s.json(&["check", &subscribe]).await;
    assert_eq!(v["changed"], true, "{v}");
    assert_eq!(
        s.eval("document.querySelector('#subscribe').checked").await,
        true
    );
    // A real click: the page saw the change event.
    let events = s.eval("window.lumen.events.join(' ')").await;
    assert!(
        events.as_str().unwrap().contains("change:subscribe"),
        "{events}"
    );
    // Already checked: nothing is clicked.
    let v = s.json(&["check", "#subscribe"]).await;
    assert_eq!(v["changed"], false, "{v}");
    assert_eq!(s.ok(&["is", "checked", &subscribe]).await, "true");
    s.ok(&["uncheck", "#subscribe"]).await;
    assert_eq!(
        s.json(&["is", "checked", "#subscribe"]).await["checked"],
        false
    );
    s.ok(&["check", "#subscribe"]).await;

    s.ok(&["check", "#contact-phone"]).await;
    let err = s.fails(&["uncheck", "#contact-phone"], 1).await;
    assert!(err.contains("cannot be unchecked"), "{err}");
    let err = s.fails(&["check", "#name"], 1).await;
    assert!(err.contains("no checkbox"), "{err}");

    // By label, then by value through a ref.
    assert_eq!(
        s.json(&["select", "#country", "Japan"]).await["values"][0],
        "jp"
    );
    let country = s.find("combobox", "Country").await;
    s.ok(&["select", &country, "br"]).await;
    assert_eq!(s.ok(&["get", "value", &country]).await, "br");
    let events = s.eval("window.lumen.events.join(' ')").await;
    assert!(
        events.as_str().unwrap().contains("change:country"),
        "{events}"
    );
    let err = s.fails(&["select", "#country", "Mars"], 1).await;
    assert!(
        err.contains("no option \"Mars\"") && err.contains("\"Kenya\""),
        "{err}"
    );
    let err = s.fails(&["select", "#name", "x"], 1).await;
    assert!(err.contains("not a <select>"), "{err}");
    let err = s.fails(&["select", "#country", "fr", "jp"], 1).await;
    assert!(err.contains("one choice"), "{err}");

    s.ok(&["click", &s.find("button", "Submit").await]).await;
    let sent = s.eval("window.lumen.submitted").await;
    assert_eq!(sent["subscribe"], true, "{sent}");
    assert_eq!(sent["contact"], "phone", "{sent}");
    assert_eq!(sent["country"], "br", "{sent}");
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_is_read_elements_and_the_page() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    s.ok(&["fill", &s.find("textbox", "Name").await, "Ada"])
        .await;

    assert_eq!(s.ok(&["get", "text", "h1"]).await, "Form fixture");
    assert_eq!(s.json(&["get", "value", "#name"]).await["value"], "Ada");
    let v = s.json(&["get", "attribute", "type", "#email"]).await;
    assert_eq!(
        v,
        serde_json::json!({"attribute": "type", "value": "email"})
    );
    let v = s.json(&["get", "attribute", "data-none", "#email"]).await;
    assert_eq!(v["value"], Value::Null, "{v}");
    let b = s.json(&["get", "box", "#country"]).await["box"].clone();
    let want = s
        .eval("(() => { const r = document.querySelector('#country').getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; })()")
        .await;
    assert_eq!(b, want);
    assert_eq!(s.ok(&["get", "title"]).await, "Lumen fixtures: form");
    assert!(
        s.json(&["get", "url"]).await["url"]
            .as_str()
            .unwrap()
            .ends_with("/form.html")
    );

    s.eval("(() => { document.querySelector('#submit').disabled = true; document.querySelector('#editor').style.display = 'none'; return 0; })()")
        .await;
    assert_eq!(s.ok(&["is", "visible", "#name"]).await, "true");
    assert_eq!(
        s.json(&["is", "visible", "#editor"]).await["visible"],
        false
    );
    assert_eq!(s.ok(&["is", "enabled", "#name"]).await, "true");
    assert_eq!(
        s.json(&["is", "enabled", "#submit"]).await["enabled"],
        false
    );

    // Errors name what to fix.
    let err = s.fails(&["get", "text", "##bad"], 1).await;
    assert!(err.contains("not a valid CSS selector"), "{err}");
    let err = s.fails(&["get", "text", "#nothing"], 1).await;
    assert!(err.contains("no element matches \"#nothing\""), "{err}");
    let err = s.fails(&["get", "value", "h1"], 1).await;
    assert!(err.contains("has no value"), "{err}");
    let err = s.fails(&["is", "checked", "#name"], 1).await;
    assert!(err.contains("no checkbox"), "{err}");
    let err = s.fails(&["get", "text", "@x"], 2).await;
    assert!(err.contains("not a ref"), "{err}");
    let name = s.find("textbox", "Name").await;
    s.ok(&["reload"]).await;
    let err = s.fails(&["get", "value", &name], 1).await;
    assert!(
        err.contains("stale") && err.contains("has navigated"),
        "{err}"
    );
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_into_an_element_by_ref_or_selector_keeps_its_text() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    let name = s.find("textbox", "Name").await;
    s.ok(&["fill", &name, "Ada"]).await;
    // Another field has focus: the caret goes to the end of Name's text.
    s.ok(&["type", "#message", "note"]).await;
    s.ok(&["type", &name, " Lovelace"]).await;
    assert_eq!(s.ok(&["get", "value", &name]).await, "Ada Lovelace");
    assert_eq!(s.eval("document.activeElement.id").await, "name");
    // One word alone types into the focused element, as before.
    s.ok(&["type", "!"]).await;
    assert_eq!(s.ok(&["get", "value", "#name"]).await, "Ada Lovelace!");
    // Several lines go through the keyboard, Enter between them.
    s.ok(&["type", "#message", "\nsecond"]).await;
    assert_eq!(s.ok(&["get", "value", "#message"]).await, "note\nsecond");
    // A contenteditable element gets the page's input events.
    s.ok(&["type", "#editor", "hi"]).await;
    assert_eq!(s.eval("window.lumen.editorText").await, "hi");

    let err = s.fails(&["type", "#subscribe", "x"], 1).await;
    assert!(err.contains("takes no text"), "{err}");
    let err = s.fails(&["type", "#nothing", "x"], 1).await;
    assert!(err.contains("no element matches \"#nothing\""), "{err}");
    let err = s.fails(&["type", "#name", ""], 2).await;
    assert!(err.contains("no text"), "{err}");
    s.ok(&["reload"]).await;
    let err = s.fails(&["type", &name, "x"], 1).await;
    assert!(
        err.contains("stale") && err.contains("has navigated"),
        "{err}"
    );
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_gives_refs_that_later_commands_use() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;

    let v = s.json(&["find", "label", "email"]).await;
    assert_eq!(v["count"], 2, "the Email field and the Email radio: {v}");
    let email = v["matches"][0]["ref"].as_str().unwrap().to_owned();
    assert_eq!(v["matches"][0]["role"], "textbox");
    s.ok(&["fill", &email, "ada@example.com"]).await;
    assert_eq!(s.ok(&["get", "value", "#email"]).await, "ada@example.com");

    let radios = s.json(&["find", "role", "radio"]).await;
    assert_eq!(radios["count"], 3, "{radios}");
    let line = s.ok(&["find", "role", "button", "--name", "submit"]).await;
    assert!(line.starts_with("- button \"Submit\" [@e"), "{line}");
    let post = s.json(&["find", "text", "post"]).await["matches"][0]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    s.ok(&["check", &post]).await;
    assert_eq!(s.ok(&["is", "checked", "#contact-post"]).await, "true");

    let err = s.fails(&["find", "role", "dialog"], 1).await;
    assert!(err.contains("nothing on the page has role dialog"), "{err}");
    s.ok(&["close"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_an_element_text_and_url() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    s.eval("(() => { setTimeout(() => { const p = document.createElement('p'); p.id = 'late'; p.textContent = 'Arrived late'; document.body.append(p); history.pushState(null, '', '#later'); }, 400); return 0; })()")
        .await;
    let err = s
        .fails(&["wait", "selector", "#late", "--timeout", "50"], 1)
        .await;
    assert!(
        err.contains("gave up after 50 ms") && err.contains("#late"),
        "{err}"
    );
    assert_eq!(s.json(&["wait", "selector", "#late"]).await["ok"], true);
    assert_eq!(s.ok(&["wait", "text", "Arrived late"]).await, "ok");
    s.ok(&["wait", "url", "#later"]).await;
    s.ok(&["wait", "#late"]).await;

    // A hidden element is not there yet.
    s.eval("(() => { document.querySelector('#late').style.display = 'none'; return 0; })()")
        .await;
    let started = Instant::now();
    let err = s.fails(&["wait", "#late", "--timeout", "300"], 1).await;
    assert!(err.contains("to show"), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let err = s
        .fails(&["wait", "text", "Never there", "--timeout", "100"], 1)
        .await;
    assert!(err.contains("the text \"Never there\""), "{err}");
    let err = s.fails(&["wait", "selector", "##bad"], 1).await;
    assert!(err.contains("not a valid CSS selector"), "{err}");
    let err = s.fails(&["wait", "a", "b", "c"], 2).await;
    assert!(err.contains("usage"), "{err}");
    s.ok(&["close"]).await;
}

impl Session {
    /// Runs `lumen browser [flags] batch` with `lines` on stdin.
    async fn batch(&self, flags: &[&str], lines: &str) -> std::process::Output {
        use tokio::io::AsyncWriteExt as _;
        let mut child = super::harness::lumen(self.state.path())
            .env("LUMEN_STATE_DIR", self.state.path())
            .arg("browser")
            .args(flags)
            .arg("batch")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(lines.as_bytes()).await.unwrap();
        drop(stdin);
        child.wait_with_output().await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_runs_one_command_a_line_and_stops_at_the_first_failure() {
    let s = Session::new().await;
    let lines = format!(
        "open {}\n\n# fill the form\nfill '#name' x\nfind label Name\nselect '#country' \"Japan\"\ncheck \
         '#subscribe'\nget value '#country'\nis checked '#subscribe'\n",
        s.site.url("form.html")
    );
    let out = s.batch(&["--json"], &lines).await;
    assert_eq!(code(&out), 2, "fill takes a ref: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("line 4 (fill '#name' x)") && err.contains("not a ref"),
        "{err}"
    );
    // The open before it ran; nothing after it did. With --json the
    // failure is the last line, once, naming the line.
    let stdout = text(&out.stdout);
    let printed: Vec<&str> = stdout.lines().collect();
    assert_eq!(printed.len(), 2, "{stdout}");
    let failure: serde_json::Value = serde_json::from_str(printed[1]).unwrap();
    assert_eq!(failure["success"], false, "{failure}");
    assert!(
        failure["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 4 (fill '#name' x)"),
        "{failure}"
    );
    assert_eq!(s.eval("document.querySelector('#country').value").await, "");

    let out = s
        .batch(&["--json"], &lines.replace("fill '#name' x\n", ""))
        .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let answers: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 6, "{answers:?}");
    assert_eq!(answers[1]["matches"][0]["role"], "textbox");
    assert_eq!(answers[2]["values"][0], "jp");
    assert_eq!(answers[4], serde_json::json!({"value": "jp"}));
    assert_eq!(answers[5], serde_json::json!({"checked": true}));

    let out = s.batch(&[], "wait text 'not closed\n").await;
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("line 1: a ' quote is not closed"),
        "{}",
        text(&out.stderr)
    );
    let out = s.batch(&[], "frobnicate\n").await;
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("line 1"),
        "{}",
        text(&out.stderr)
    );
    s.ok(&["close"]).await;
}

/// Page text that carries terminal escapes (a clipboard write, a forged
/// hyperlink, a screen clear, a bidi override) is printed as visible
/// escapes; `--raw` prints it byte for byte; `--json` escapes it as JSON
/// does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_text_cannot_drive_the_terminal() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("form.html")]).await;
    s.eval(
        "(() => { document.querySelector('h1').textContent = \
         '\\x1b]52;c;ZXZpbA==\\x07\\x1b[2Jhi\\u202e'; return 0; })()",
    )
    .await;
    let shown = s.ok(&["get", "text", "h1"]).await;
    assert_eq!(shown, "\\x1b]52;c;ZXZpbA==\\x07\\x1b[2Jhi\\u{202e}");
    let raw = s.ok(&["--raw", "get", "text", "h1"]).await;
    assert_eq!(raw, "\x1b]52;c;ZXZpbA==\x07\x1b[2Jhi\u{202e}");
    let json = s.json(&["get", "text", "h1"]).await;
    assert_eq!(json["text"], "\x1b]52;c;ZXZpbA==\x07\x1b[2Jhi\u{202e}");
    // A bad key name in an error is shown the same way.
    let err = s.fails(&["press", "\x1b[2Jnope"], 2).await;
    assert!(err.contains("\\x1b[2Jnope"), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
    s.ok(&["close"]).await;
}

//! `lumen browser` on the patterns real pages use and our first fixtures
//! did not (`fixtures/sites/real/`): page text, nested shadow roots, an
//! editable region, targets below the fold and inside scrolled containers,
//! drags, a popup on load, pages listening for keys, and `--json` errors.
//! Each check reads the effect back through the page itself.

use serde_json::Value;

use super::direct::Session;
use super::harness::{code, text};

impl Session {
    /// The snapshot's nodes (`-i` or not).
    async fn nodes(&self, interactive: bool) -> Vec<Value> {
        let args: &[&str] = if interactive {
            &["snapshot", "-i"]
        } else {
            &["snapshot"]
        };
        self.json(args).await["nodes"].as_array().unwrap().clone()
    }
}

/// The ref of the first node with this role whose name contains `name`.
fn ref_of(nodes: &[Value], role: &str, name: &str) -> String {
    nodes
        .iter()
        .find(|n| n["role"] == role && n["name"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no {role} {name:?} in {nodes:?}"))["ref"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_says_what_the_page_says() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/article.html")]).await;
    let outline = s.ok(&["snapshot"]).await;
    for said in [
        "text \"Total due: $42.50\"",
        "text \"Card number is invalid\"",
        "text \"fourteen days\"",
        "text \"Questions? Write to the billing team; we answer within a day.\"",
    ] {
        assert!(outline.contains(said), "{said} missing from\n{outline}");
    }
    // A label is not said twice: the button's name is its text.
    assert!(outline.contains("button \"Pay\""), "{outline}");
    assert!(!outline.contains("text \"Pay\""), "{outline}");
    assert!(!outline.contains("text \"Invoice 7\""), "{outline}");
    // Inline markup is no node of its own.
    assert!(!outline.contains("- strong"), "{outline}");

    // -i is what a person acts on, and only that.
    let interactive = s.nodes(true).await;
    assert!(
        interactive.iter().all(|n| n["role"] != "text"),
        "{interactive:?}"
    );
    assert!(ref_of(&interactive, "button", "Pay").starts_with("@e"));

    // A text node's ref reads its words.
    let nodes = s.nodes(false).await;
    let price = ref_of(&nodes, "text", "Total due");
    assert_eq!(s.ok(&["get", "text", &price]).await, "Total due: $42.50");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_in_nested_shadow_roots_are_filled_and_typed_into() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/shadow.html")]).await;
    let nodes = s.nodes(false).await;
    for words in ["Outer words", "Middle words", "Deepest words"] {
        ref_of(&nodes, "text", words);
    }
    let deep = ref_of(&nodes, "textbox", "Deep field");
    s.ok(&["fill", &deep, "three"]).await;
    assert_eq!(s.eval("window.lumen.deep()").await, "three");
    s.ok(&["type", &deep, "ab"]).await;
    assert_eq!(s.eval("window.lumen.deep()").await, "threeab");
    let mid = ref_of(&nodes, "textbox", "Middle field");
    s.ok(&["fill", &mid, "two"]).await;
    assert_eq!(
        s.eval(
            "document.querySelector('#outer').shadowRoot.querySelector('#middle')\
             .shadowRoot.querySelector('#mid-field').value"
        )
        .await,
        "two"
    );
    assert_eq!(
        s.eval("window.lumen.keys.join(' ')").await,
        "keydown:a keypress:a keyup:a keydown:b keypress:b keyup:b"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editable_region_gets_a_ref_and_takes_text_and_keys() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/editor.html")]).await;
    let nodes = s.nodes(true).await;
    let editor = nodes
        .iter()
        .find(|n| n["role"] == "textbox" && n["value"] == "Draft")
        .unwrap_or_else(|| panic!("the editor has no ref: {nodes:?}"))["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    s.ok(&["fill", &editor, "Dear Ada"]).await;
    assert_eq!(
        s.eval("document.getElementById('editor').textContent")
            .await,
        "Dear Ada"
    );
    s.ok(&["type", &editor, ", hi"]).await;
    assert_eq!(
        s.eval("document.getElementById('editor').textContent")
            .await,
        "Dear Ada, hi"
    );
    // Four keys, three events each; the page saw input for each.
    assert_eq!(s.eval("window.lumen.keys.length").await, 12);
    assert!(s.eval("window.lumen.inputs").await.as_u64().unwrap() >= 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_sends_the_keys_a_keyboard_would() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/editor.html")]).await;
    let field = s.find("textbox", "Key field").await;
    // `é` has no key on a US layout: it is inserted as text between keys.
    s.ok(&["type", &field, "Hé!"]).await;
    assert_eq!(
        s.eval("document.getElementById('log-field').value").await,
        "Hé!"
    );
    assert_eq!(
        s.eval("window.lumen.keys.join(' ')").await,
        "keydown:H keypress:H keyup:H keydown:! keypress:! keyup:!"
    );
    // Typing into the focused element is key by key too.
    s.ok(&["type", "x"]).await;
    assert!(
        s.eval("window.lumen.keys.join(' ')")
            .await
            .as_str()
            .unwrap()
            .ends_with("keydown:x keypress:x keyup:x")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targets_below_the_fold_and_in_scrolled_boxes_are_scrolled_into_view() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/below-fold.html")]).await;
    let nodes = s.nodes(true).await;
    let send = ref_of(&nodes, "button", "Send");
    let save = ref_of(&nodes, "button", "Save row");
    let late = ref_of(&nodes, "textbox", "Late field");
    let name = ref_of(&nodes, "textbox", "Name");

    let v = s.json(&["click", &send]).await;
    assert_eq!(v["scrolled"], true, "{v}");
    assert_eq!(s.eval("window.lumen.sent").await, true);
    assert!(s.eval("scrollY").await.as_f64().unwrap() > 1000.0);

    // Inside a box that scrolls on its own, at the box's far end.
    let v = s.json(&["click", &save]).await;
    assert_eq!(v["scrolled"], true, "{v}");
    assert_eq!(s.eval("window.lumen.saved").await, true);
    assert!(
        s.eval("document.getElementById('box').scrollTop")
            .await
            .as_f64()
            .unwrap()
            > 0.0
    );

    // A field: scrolled to, then filled.
    let v = s.json(&["fill", &late, "end"]).await;
    assert_eq!(v["scrolled"], true, "{v}");
    assert_eq!(s.eval("document.getElementById('late').value").await, "end");

    // By hand, and a second time it is in view already.
    let v = s.json(&["scrollintoview", &name]).await;
    assert_eq!(v["scrolled"], true, "{v}");
    assert_eq!(s.eval("scrollY").await, 0);
    let v = s.json(&["scrollintoview", "#name"]).await;
    assert_eq!(v["scrolled"], false, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drags_work_for_drag_and_drop_and_for_pages_that_follow_the_mouse() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/drag.html")]).await;
    let nodes = s.nodes(false).await;
    let card = ref_of(&nodes, "text", "Card");
    let done = ref_of(&nodes, "text", "Done");
    let v = s.json(&["drag", &card, &done]).await;
    assert_eq!(v["dragAndDrop"], true, "{v}");
    assert_eq!(s.eval("window.lumen.dropped").await, "card");
    assert_eq!(
        s.eval("document.getElementById('card').parentElement.id")
            .await,
        "done"
    );

    // The knob: grabbed at its centre (35, 315), dropped 300 px on.
    let v = s.json(&["drag", "35", "315", "335", "315"]).await;
    assert_eq!(v["dragAndDrop"], false, "{v}");
    assert_eq!(s.eval("window.lumen.knob").await, 320);

    // By hand, over four commands: the pointer and the held button
    // outlive each one.
    s.ok(&["mouse", "move", "335", "315"]).await;
    s.ok(&["mouse", "down"]).await;
    s.ok(&["mouse", "move", "135", "315"]).await;
    s.ok(&["mouse", "up"]).await;
    assert_eq!(s.eval("window.lumen.knob").await, 120);
    let err = s.cmd(&["mouse", "down", "sideways"]).await;
    assert_eq!(code(&err), 2, "{}", text(&err.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_popup_opened_on_load_is_a_tab_to_switch_to() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/popup-onload.html")]).await;
    assert_eq!(s.eval("window.lumen.opened").await, true);
    let tabs = s.json(&["tabs"]).await;
    let list = tabs.as_array().unwrap_or_else(|| panic!("{tabs}"));
    let popup = list
        .iter()
        .position(|t| {
            t["url"]
                .as_str()
                .unwrap_or("")
                .ends_with("/real/article.html")
        })
        .unwrap_or_else(|| panic!("the popup is not listed: {tabs}"));
    s.ok(&["tab", &popup.to_string()]).await;
    assert!(s.ok(&["url"]).await.ends_with("/real/article.html"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_json_a_failure_is_one_json_object_on_stdout() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/article.html")]).await;
    for (args, exit, kind) in [
        (&["--json", "click", "@e999"][..], 1, "failed"),
        (&["--json", "clik", "@e1"][..], 2, "usage"),
        (&["--json", "scroll", "sideways"][..], 2, "usage"),
    ] {
        let out = s.cmd(args).await;
        assert_eq!(code(&out), exit, "{args:?}");
        let stdout = text(&out.stdout);
        let v: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout:?}"));
        assert_eq!(v["ok"], false, "{v}");
        assert_eq!(v["success"], false, "{v}");
        assert_eq!(v["error"]["code"], kind, "{v}");
        assert_eq!(v["error"]["exit"], exit, "{v}");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty(), "{v}");
    }
    // Without --json, stdout stays empty.
    let out = s.cmd(&["click", "@e999"]).await;
    assert_eq!(text(&out.stdout), "");
}

impl Session {
    /// The messages the page's frames posted to it (`window.lumen.messages`,
    /// joined by spaces), once there are at least `count`: a frame's
    /// `postMessage` arrives a task later, from another process for a
    /// frame of another site. Gives up after 5 s and answers what came.
    async fn messages(&self, count: u64) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while self
            .eval("window.lumen.messages.length")
            .await
            .as_u64()
            .is_some_and(|n| n < count)
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        self.eval("window.lumen.messages.join(' ')").await
    }

    /// The snapshot's nodes once the page shows `text` (frames load after
    /// their page may have).
    async fn nodes_showing(&self, text: &str) -> Vec<Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let nodes = self.nodes(false).await;
            if nodes.iter().any(|n| n["name"] == text) {
                return nodes;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{text:?} never showed: {nodes:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_three_deep_are_read_and_acted_in() {
    let s = Session::new().await;
    s.ok(&["open", &s.site.url("real/frames-nested.html")])
        .await;
    let nodes = s.nodes_showing("Level three text").await;
    // Each frame's document sits under its Iframe node.
    let depth = |name: &str| {
        nodes.iter().find(|n| n["name"] == name).unwrap()["depth"]
            .as_u64()
            .unwrap()
    };
    assert!(depth("Level one text") < depth("Level two text"));
    assert!(depth("Level two text") < depth("Level three text"));
    let button = ref_of(&nodes, "button", "Deep button");
    let field = ref_of(&nodes, "textbox", "Deep name");
    // The click lands on the button through three offset, bordered frames.
    s.ok(&["click", &button]).await;
    s.ok(&["fill", &field, "Ada"]).await;
    s.ok(&["type", &field, "!"]).await;
    assert_eq!(
        s.messages(3).await,
        "click:Deep button input:Ada input:Ada!"
    );
    let words = ref_of(&nodes, "text", "Level three text");
    assert_eq!(s.ok(&["get", "text", &words]).await, "Level three text");

    // Scoped to the innermost frame; its refs are the page's.
    let inner = ref_of(&nodes, "Iframe", "Level three");
    s.ok(&["frame", &inner]).await;
    let scoped = s.nodes(false).await;
    assert_eq!(scoped[0]["role"], "RootWebArea", "{scoped:?}");
    assert_eq!(scoped[0]["depth"], 0);
    assert!(
        scoped.iter().all(|n| n["name"] != "Outer text"),
        "{scoped:?}"
    );
    assert_eq!(ref_of(&scoped, "button", "Deep button"), button);
    s.ok(&["mainframe"]).await;
    ref_of(&s.nodes(false).await, "text", "Outer text");
    let err = s.cmd(&["frame", &button]).await;
    assert_eq!(code(&err), 1);
    assert!(
        text(&err.stderr).contains("not a frame"),
        "{}",
        text(&err.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_of_another_site_and_the_frame_inside_it_are_acted_in() {
    let s = Session::new().await;
    // 127.0.0.1 frames localhost: another site, so another process.
    s.ok(&["open", &s.site.url("real/frames-cross.html")]).await;
    let nodes = s.nodes_showing("Level three text").await;
    ref_of(&nodes, "text", "Cross text");
    let cross_button = ref_of(&nodes, "button", "Cross button");
    let cross_field = ref_of(&nodes, "textbox", "Cross name");
    let deep_button = ref_of(&nodes, "button", "Deep button");
    s.ok(&["click", &cross_button]).await;
    s.ok(&["fill", &cross_field, "Bo"]).await;
    s.ok(&["type", &cross_field, "b"]).await;
    s.ok(&["click", &deep_button]).await;
    assert_eq!(
        s.messages(4).await,
        "click:Cross button input:Bo input:Bob click:Deep button"
    );
    // The refs hold across commands and a second snapshot.
    let again = s.nodes(false).await;
    assert_eq!(ref_of(&again, "button", "Cross button"), cross_button);
    s.kill_keeper().await;
    s.ok(&["click", &cross_button]).await;
    assert!(
        s.messages(5)
            .await
            .as_str()
            .unwrap()
            .ends_with("click:Deep button click:Cross button"),
        "the click without the keeper did not land"
    );
}

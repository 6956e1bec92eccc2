//! What the loop keeps of a page: its form fields and its scroll offset.

use lumen_core::BrowserTab;
use lumen_core::browser::{FormField, ScrollOffset};

use super::common::env;

fn field(label: &str, value: &str) -> FormField {
    FormField {
        label: label.into(),
        value: value.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_fields_list_visible_controls_with_their_values() {
    let e = env().await;
    e.open("form.html").await;
    // A value longer than the prompt shows comes back whole, so the loop
    // can redact a secret in it before shortening (a value cut in the page
    // would leave a prefix the redaction no longer recognises).
    let long = "k".repeat(70);
    e.tab
        .evaluate(&format!(
            "document.querySelector('#name').value = '{long}'; \
             document.querySelector('#password').value = 'secret'; \
             document.querySelector('#subscribe').checked = true; 0"
        ))
        .await
        .unwrap();
    let fields = e.tab.form_fields().await.unwrap().expect("fields");
    assert_eq!(fields[0], field("Name", &long));
    assert_eq!(fields[1], field("Email", ""));
    assert!(fields.contains(&field("Subscribe to the newsletter", "checked")));
    assert!(
        !fields.iter().any(|f| f.label == "Password"),
        "password fields are left out: {fields:?}"
    );
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scroll_offset_is_read_and_restored() {
    let e = env().await;
    e.open("scroll.html").await;
    let top = e.tab.scroll_offset().await.unwrap().expect("offset");
    assert_eq!(top, ScrollOffset::default());
    let out = e
        .tab
        .set_scroll_offset(ScrollOffset { x: 0.0, y: 600.0 })
        .await
        .unwrap();
    assert!(out.ok, "{out:?}");
    let now = e.tab.scroll_offset().await.unwrap().expect("offset");
    assert_eq!(now.y, 600.0);
    e.close().await;
}

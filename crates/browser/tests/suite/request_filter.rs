//! The request filter at the network layer: a page cannot make the browser
//! send a request the filter refuses — not by meta refresh, timer, form
//! post, popup (a second one, or one that starts at about:blank), subframe
//! or redirect. "Never sent" is proven by the blocked host's own server:
//! `blocked.test` is mapped to 127.0.0.1 inside Chromium
//! (`--host-resolver-rules`) and served by a second fixture server whose
//! request log must stay empty. Each attack is first shown to reach that
//! server when no filter is installed.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lumen_browser::{CdpTab, LaunchOptions, TabOptions};
use lumen_core::{
    ActionOutcome, BlockKind, BrowserTab, ClickOptions, Point, RequestFilter, RequestVerdict,
};
use lumen_test_support::{FixtureServer, locate_chromium};

/// Refuses every URL on `blocked.test` and, after the fact, any response
/// that came from 127.0.0.1 for `rebind.test`.
struct DenyBlockedTest;

impl RequestFilter for DenyBlockedTest {
    fn judge(&self, url: &str) -> RequestVerdict {
        if url.contains("://blocked.test") {
            RequestVerdict::Deny {
                reason: "blocked.test is blocked in this test".into(),
            }
        } else {
            RequestVerdict::Allow
        }
    }

    fn judge_address(&self, url: &str, ip: IpAddr) -> RequestVerdict {
        if url.contains("://rebind.test") && ip.is_loopback() {
            RequestVerdict::Deny {
                reason: format!("rebind.test answered from {ip}"),
            }
        } else {
            RequestVerdict::Allow
        }
    }
}

struct Rig {
    site: FixtureServer,
    blocked: FixtureServer,
    tab: CdpTab,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// The big button every attack page has: the whole top-left 400x200.
const BUTTON: Point = Point { x: 100, y: 100 };

fn page(body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>t</title></head><body style=margin:0>\
         <button id=b style='position:absolute;left:0;top:0;width:400px;height:200px'>go</button>{body}</body></html>"
    )
}

async fn rig(filter: bool) -> Rig {
    let site_dir = tempfile::tempdir().unwrap();
    let blocked_dir = tempfile::tempdir().unwrap();
    let blocked = FixtureServer::start_at(blocked_dir.path()).await.unwrap();
    for name in [
        "meta",
        "timer",
        "form",
        "popup2",
        "blank",
        "frame",
        "redirected",
        "oopif",
        "same",
        "worker",
    ] {
        std::fs::write(blocked_dir.path().join(format!("{name}.html")), page("")).unwrap();
    }
    let b = |p: &str| format!("http://blocked.test:{}/{p}.html", blocked.port());
    let pages = [
        (
            "meta.html",
            format!(
                r#"<meta http-equiv="refresh" content="0;url={}">"#,
                b("meta")
            ),
        ),
        (
            "timer.html",
            format!(
                "<script>setTimeout(() => {{ location = '{}'; }}, 50)</script>",
                b("timer")
            ),
        ),
        (
            "form.html",
            format!(
                "<form id=f method=post action='{}'><input name=q value=secret></form>\
                 <script>b.onclick = () => f.submit()</script>",
                b("form")
            ),
        ),
        (
            "popups.html",
            format!(
                "<script>b.onclick = () => {{ window.open('ok.html'); window.open('{}'); }}</script>",
                b("popup2")
            ),
        ),
        (
            "blank.html",
            format!(
                "<script>b.onclick = () => {{ const w = window.open('about:blank'); \
                 setTimeout(() => {{ w.location = '{}'; }}, 100); }}</script>",
                b("blank")
            ),
        ),
        (
            "frame.html",
            format!("<iframe src='{}'></iframe>", b("frame")),
        ),
        (
            "oopif.html",
            format!(
                "<iframe src='http://localhost:{}/inner.html'></iframe>",
                "PORT"
            ),
        ),
        ("inner.html", format!("<img src='{}'>", b("oopif"))),
        // A same-site frame lives in its parent's process: no target of
        // its own.
        ("same_site.html", "<iframe src='same_inner.html'></iframe>".to_owned()),
        ("same_inner.html", format!("<img src='{}'>", b("same"))),
        // A dedicated worker's fetch.
        (
            "worker.html",
            format!(
                "<script>new Worker(URL.createObjectURL(new Blob([\"fetch('{}', {{ mode: 'no-cors' }})\"], \
                 {{ type: 'text/javascript' }})))</script>",
                b("worker")
            ),
        ),
        (
            "armed.html",
            "<script>b.onclick = () => { addEventListener('beforeunload', e => { e.preventDefault(); \
             e.returnValue = 'stay'; }); fetch('http://rebind.test:PORT/ok.html', { mode: 'no-cors' }); }</script>"
                .to_owned(),
        ),
        ("ok.html", String::new()),
    ];
    for (name, body) in pages {
        std::fs::write(site_dir.path().join(name), page(&body)).unwrap();
    }
    let site = FixtureServer::start_at(site_dir.path()).await.unwrap();
    // The frame of oopif.html is on another site (localhost): its own
    // process and CDP target.
    for name in ["oopif.html", "armed.html"] {
        let path = site_dir.path().join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("PORT", &site.port().to_string())).unwrap();
    }
    site.redirect("/hop", &b("redirected"));
    let tab = CdpTab::launch(LaunchOptions {
        executable: Some(locate_chromium().unwrap()),
        args: vec![
            "--host-resolver-rules=MAP blocked.test 127.0.0.1, MAP rebind.test 127.0.0.1".into(),
        ],
        tab: TabOptions::default(),
        ..LaunchOptions::default()
    })
    .await
    .unwrap();
    if filter {
        assert!(
            tab.install_request_filter(Arc::new(DenyBlockedTest))
                .await
                .unwrap()
        );
    }
    Rig {
        site,
        blocked,
        tab,
        _dirs: (site_dir, blocked_dir),
    }
}

impl Rig {
    /// Runs attack `name` on `tab` with the action that sets it off, and
    /// returns the outcomes plus a receipt-bearing action after a pause
    /// (for what fires later).
    async fn attack(&self, tab: &CdpTab, name: &str) -> Vec<ActionOutcome> {
        let mut outs = Vec::new();
        match name {
            "redirect" => outs.push(tab.goto(&self.site.url("hop")).await.unwrap()),
            _ => outs.push(
                tab.goto(&self.site.url(&format!("{name}.html")))
                    .await
                    .unwrap(),
            ),
        }
        if matches!(name, "form" | "popups" | "blank") {
            outs.push(tab.click(BUTTON, ClickOptions::default()).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        outs.push(tab.hover(Point { x: 500, y: 500 }).await.unwrap());
        outs
    }

    /// Waits (at most 3 s) until the blocked server has seen `path`.
    async fn reached(&self, path: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(3);
        while !self.arrived().iter().any(|p| p == path) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.arrived().iter().any(|p| p == path)
    }

    /// Paths the blocked server saw.
    fn arrived(&self) -> Vec<String> {
        self.blocked
            .requests()
            .into_iter()
            .map(|r| r.path)
            .collect()
    }
}

const ATTACKS: [(&str, &str); 10] = [
    ("meta", "/meta.html"),
    ("timer", "/timer.html"),
    ("form", "/form.html"),
    ("popups", "/popup2.html"),
    ("blank", "/blank.html"),
    ("frame", "/frame.html"),
    ("redirect", "/redirected.html"),
    ("oopif", "/oopif.html"),
    ("same_site", "/same.html"),
    ("worker", "/worker.html"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_filter_every_attack_reaches_the_blocked_host() {
    let rig = rig(false).await;
    for (name, path) in ATTACKS {
        rig.attack(&rig.tab, name).await;
        assert!(
            rig.reached(path).await,
            "{name}: the attack did not reach the blocked server: {:?}",
            rig.arrived()
        );
    }
    rig.tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_blocks_every_attack_before_the_request_leaves() {
    let rig = rig(true).await;
    for (name, path) in ATTACKS {
        let outs = rig.attack(&rig.tab, name).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            rig.arrived().is_empty(),
            "{name}: requests reached the blocked server: {:?}",
            rig.arrived()
        );
        assert_reported(name, path, &outs);
        close_popups(&rig.tab).await;
    }
    // Allowed requests still flow, and the tab is usable.
    let out = rig.tab.goto(&rig.site.url("ok.html")).await.unwrap();
    assert!(out.ok, "{out:?}");
    if let Some((n, micros)) = rig.tab.request_filter_stats() {
        eprintln!("request filter: {n} requests, mean {micros} µs from pause to answer sent");
    }
    rig.tab.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_from_a_forbidden_address_takes_the_tab_away() {
    // rebind.test passes `judge` (it is not blocked.test) but the browser
    // reaches it on 127.0.0.1, which `judge_address` refuses: the backstop
    // against a name that resolves differently for the browser.
    let rig = rig(true).await;
    let url = format!("http://rebind.test:{}/ok.html", rig.site.port());
    let out = rig.tab.goto(&url).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = rig.tab.hover(Point { x: 10, y: 10 }).await.unwrap();
    let blocked: Vec<_> = [&out, &later]
        .iter()
        .filter_map(|o| o.effect.as_deref())
        .flat_map(|e| e.blocked_requests.clone())
        .collect();
    assert!(
        blocked
            .iter()
            .any(|b| b.kind == BlockKind::Rebinding && b.url.starts_with(&url)),
        "{out:#?} {later:#?}"
    );
    wait_for_blank(&rig.tab).await;

    // A page the agent clicked (so its beforeunload handler would show a
    // dialog, which the default policy dismisses) fetches from the
    // forbidden address: it is taken away all the same.
    assert!(rig.tab.goto(&rig.site.url("armed.html")).await.unwrap().ok);
    let out = rig
        .tab
        .click(BUTTON, ClickOptions::default())
        .await
        .unwrap();
    wait_for_blank(&rig.tab).await;
    let later = rig.tab.hover(Point { x: 10, y: 10 }).await.unwrap();
    let reported = [&out, &later]
        .iter()
        .flat_map(|o| o.hints.iter())
        .any(|h| h.contains("rebind.test") && h.contains("taken away"));
    assert!(reported, "{out:#?} {later:#?}");
    rig.tab.close().await.unwrap();
}

/// The refusal of `path` is reported in the receipt of the action it
/// happened during, or as "before this action" by the next one.
fn assert_reported(name: &str, path: &str, outs: &[ActionOutcome]) {
    let blocked: Vec<_> = outs
        .iter()
        .filter_map(|o| o.effect.as_deref())
        .flat_map(|e| e.blocked_requests.clone())
        .collect();
    let hinted = outs
        .iter()
        .flat_map(|o| o.hints.iter())
        .any(|h| h.contains("blocked by policy") && h.contains(path));
    assert!(hinted, "{name}: no hint for the model: {outs:#?}");
    let expected = match name {
        "frame" => BlockKind::Subframe,
        "oopif" | "same_site" | "worker" => BlockKind::Subresource,
        _ => BlockKind::Navigation,
    };
    if let Some(b) = blocked.iter().find(|b| b.url.ends_with(path)) {
        assert_eq!(b.kind, expected, "{name}");
    }
}

/// Back to the tab's own page for the next attack.
async fn close_popups(tab: &CdpTab) {
    for t in tab.tabs().await.unwrap() {
        if !t.followed {
            tab.close_tab(&t.id).await.unwrap();
        }
    }
}

/// Records every URL it judges; refuses blocked.test when `deny`.
struct Recording {
    deny: bool,
    seen: std::sync::Mutex<Vec<String>>,
}

impl Recording {
    fn new(deny: bool) -> Arc<Self> {
        Arc::new(Self {
            deny,
            seen: Default::default(),
        })
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl RequestFilter for Recording {
    fn judge(&self, url: &str) -> RequestVerdict {
        self.seen.lock().unwrap().push(url.to_owned());
        match self.deny {
            true => DenyBlockedTest.judge(url),
            false => RequestVerdict::Allow,
        }
    }
}

/// Two browser contexts of one Chromium, each with its own filter: the
/// guard of each sees every request of the browser (`Fetch` on the
/// browser session), and must judge and report only its own context's.
/// B allows blocked.test and A refuses it: every attack page run in B
/// (popups, a same-site frame, out-of-process frames, redirects) still
/// reaches the blocked server, A's filter is never asked about any of it,
/// and A still refuses every attack of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_context_of_a_shared_browser_judges_only_its_own_requests() {
    let rig = rig(false).await;
    let a = rig.tab.open_isolated().await.unwrap();
    let b = rig.tab.open_isolated().await.unwrap();
    let (strict, open) = (Recording::new(true), Recording::new(false));
    assert!(a.install_request_filter(strict.clone()).await.unwrap());
    assert!(b.install_request_filter(open.clone()).await.unwrap());

    for (name, path) in ATTACKS {
        let outs = rig.attack(&b, name).await;
        assert!(
            rig.reached(path).await,
            "{name}: A's policy stopped B's request: {:?} {outs:#?}",
            rig.arrived()
        );
        let hints: Vec<_> = outs.iter().flat_map(|o| o.hints.iter()).collect();
        assert!(
            !hints.iter().any(|h| h.contains("blocked")),
            "{name}: {hints:?}"
        );
        close_popups(&b).await;
    }
    assert!(
        strict.seen().is_empty(),
        "A's filter judged B's requests: {:?}",
        strict.seen()
    );
    assert!(open.seen().iter().any(|u| u.ends_with("/same.html")));

    let (arrived, b_saw) = (rig.arrived().len(), open.seen().len());
    for (name, path) in ATTACKS {
        let outs = rig.attack(&a, name).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(rig.arrived().len(), arrived, "{name}: {:?}", rig.arrived());
        assert_reported(name, path, &outs);
        close_popups(&a).await;
    }
    assert_eq!(
        open.seen().len(),
        b_saw,
        "B's filter judged A's requests: {:?}",
        &open.seen()[b_saw..]
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
    rig.tab.close().await.unwrap();
}

/// A run's tab closed while something still holds it (the server's live
/// view of a hand-over does): its connection's interception must not keep
/// the requests of another context paused, which nobody would answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_context_still_held_does_not_stall_another_contexts_requests() {
    let rig = rig(false).await;
    let a = rig.tab.open_isolated().await.unwrap();
    let b = rig.tab.open_isolated().await.unwrap();
    assert!(
        a.install_request_filter(Recording::new(false))
            .await
            .unwrap()
    );
    assert!(
        b.install_request_filter(Recording::new(false))
            .await
            .unwrap()
    );
    let held = a.clone();
    a.close().await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(15), b.goto(&rig.site.url("ok.html")))
        .await
        .expect("B's navigation waited on the closed context's interception")
        .unwrap();
    assert!(out.ok, "{out:?}");
    drop(held);
    b.close().await.unwrap();
    rig.tab.close().await.unwrap();
}

async fn wait_for_blank(tab: &CdpTab) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while tab.url().await.unwrap() != "about:blank" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(tab.url().await.unwrap(), "about:blank");
}

/// The loop undoes a forbidden navigation with `back` (then `goto`): a page
/// whose `beforeunload` handler asks to stay (armed by a real click, so
/// Chromium shows the dialog) must not trap it, whatever the dialog policy
/// says about dialogs the page raises on its own (the default dismisses
/// them, which kept the tab and made the command wait 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beforeunload_handler_cannot_trap_goto_or_back() {
    let server = FixtureServer::start().await.unwrap();
    let tab = CdpTab::launch(LaunchOptions {
        executable: Some(locate_chromium().unwrap()),
        ..LaunchOptions::default()
    })
    .await
    .unwrap();
    let arm = || async {
        tab.click(Point { x: 50, y: 295 }, ClickOptions::default())
            .await
            .unwrap();
        assert_eq!(
            tab.evaluate("window.lumen.beforeunloadArmed")
                .await
                .unwrap(),
            true
        );
    };
    tab.goto(&server.url("links/page2.html")).await.unwrap();
    tab.goto(&server.url("dialogs.html")).await.unwrap();
    arm().await;
    let started = Instant::now();
    let out = tab.goto(&server.url("links/page1.html")).await.unwrap();
    assert!(out.ok, "{out:?}");
    assert!(tab.url().await.unwrap().ends_with("/links/page1.html"));
    let dialog = out.effect.as_ref().and_then(|e| e.dialog.clone()).unwrap();
    assert_eq!(
        (dialog.kind.as_str(), dialog.accepted),
        ("beforeunload", true)
    );

    tab.goto(&server.url("dialogs.html")).await.unwrap();
    arm().await;
    let out = tab.back().await.unwrap();
    assert!(out.ok, "{out:?}");
    assert!(tab.url().await.unwrap().ends_with("/links/page1.html"));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "no navigation waited for its deadline"
    );
    tab.close().await.unwrap();
}

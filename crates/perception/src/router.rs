//! The ActionRouter: the one place where actions (already in viewport CSS
//! pixels) reach the browser.
//!
//! It dispatches each [`Action`] to the matching [`BrowserTab`] method, waits
//! for the page to settle, fills `<secret:NAME>` placeholders at type time,
//! and answers control actions (terminate, delegate, screenshot, fold,
//! cursor position, invalid calls) without touching the browser. Page-level
//! failures come back as `ok: false` executions; only fatal browser errors
//! are `Err`. `writeState` is not handled here: the loop owns the state store
//! and answers it.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lumen_core::{
    Action, ActionCall, ActionExecution, BrowserTab, ClickOptions, Point, Rect, Result,
    ScreenshotOptions, SettleOptions, Size,
};
use lumen_safety::Secrets;

/// Fixed post-action delays, for callers who want the original's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterTiming {
    /// After clicks, double clicks, drags and hovers.
    pub after_click: Duration,
    /// After typing.
    pub after_type: Duration,
    /// After scrolling.
    pub after_scroll: Duration,
    /// After navigation (goto, back, forward).
    pub after_navigation: Duration,
}

impl Default for RouterTiming {
    fn default() -> Self {
        Self {
            after_click: Duration::from_millis(200),
            after_type: Duration::from_millis(500),
            after_scroll: Duration::from_millis(300),
            after_navigation: Duration::from_millis(1000),
        }
    }
}

/// How the router waits after an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleMode {
    /// Ask the tab to wait until the page is actually ready (the default).
    Adaptive(SettleOptions),
    /// Sleep fixed delays.
    Fixed(RouterTiming),
}

impl Default for SettleMode {
    /// Adaptive, with the stability check left to the next screenshot
    /// ([`SettleOptions::stable_at_capture`]): the loop captures next.
    fn default() -> Self {
        SettleMode::Adaptive(SettleOptions {
            stable_at_capture: true,
            ..SettleOptions::default()
        })
    }
}

/// The most characters a reading action answers with (the browser
/// toolset's own cap on `read_page`).
pub const MAX_OUTPUT: usize = 50_000;

/// The most matches a search answers with.
pub const MAX_FIND_MATCHES: usize = 20;

/// The outline a `ReadPage` asks for.
fn outline(
    snapshot: &lumen_core::AxSnapshot,
    interactive_only: bool,
    root: Option<&str>,
    depth: Option<u32>,
) -> std::result::Result<String, String> {
    let nodes = &snapshot.nodes;
    let (start, end, base) = match root {
        None => (0, nodes.len(), 0),
        Some(r) => {
            let Some(i) = nodes.iter().position(|n| n.reference == r) else {
                return Err(stale_ref(r));
            };
            let base = nodes[i].depth;
            let end = nodes[i + 1..]
                .iter()
                .position(|n| n.depth <= base)
                .map_or(nodes.len(), |p| i + 1 + p);
            (i, end, base)
        }
    };
    let lines: Vec<String> = nodes[start..end]
        .iter()
        .filter(|n| depth.is_none_or(|d| n.depth.saturating_sub(base) <= d))
        // A cut snapshot's note is kept: the model must know it is cut.
        .filter(|n| {
            !interactive_only
                || n.is_interactive()
                || n.reference == lumen_core::AxSnapshot::OMITTED_REF
        })
        .map(|n| n.line(base))
        .collect();
    Ok(lines.join("\n"))
}

/// Has the tab mask the field a secret was just typed into in every later
/// screenshot. A browser that cannot is logged, not fatal; a lost one is.
async fn mask_secret_field(tab: &dyn BrowserTab, reference: Option<&str>) -> Result<()> {
    match tab.mask_secret_field(reference).await {
        Ok(true) => {}
        Ok(false) => tracing::debug!("the field a secret was typed into could not be masked"),
        Err(
            e @ (lumen_core::LumenError::BrowserDisconnected { .. }
            | lumen_core::LumenError::Cancelled { .. }),
        ) => {
            return Err(e);
        }
        Err(e) => tracing::warn!("masking the secret field failed: {e}"),
    }
    Ok(())
}

fn stale_ref(reference: &str) -> String {
    format!(
        "ref {reference} is unknown or stale (refs last until the page navigates): read the page \
         again for fresh refs"
    )
}

/// The longest `wait` the model may ask for in one action.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// Dispatches actions to a tab.
#[derive(Clone, Default)]
pub struct ActionRouter {
    settle: SettleMode,
    secrets: Arc<Secrets>,
    /// How a zoom is captured: format and the model's image limits.
    capture: ScreenshotOptions,
}

impl fmt::Debug for ActionRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionRouter")
            .field("settle", &self.settle)
            .field("secrets", &self.secrets)
            .field("capture", &self.capture)
            .finish()
    }
}

impl ActionRouter {
    /// A router with adaptive settling and no secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how to wait after actions.
    pub fn with_settle(mut self, settle: SettleMode) -> Self {
        self.settle = settle;
        self
    }

    /// Sets how zooms are captured (the loop passes its screenshot options,
    /// sized to the model's image limits).
    pub fn with_capture(mut self, capture: ScreenshotOptions) -> Self {
        self.capture = capture;
        self
    }

    /// A successful reading action answering with `text`: secrets the page
    /// shows are redacted, and the text is capped.
    fn answer(&self, text: String) -> ActionExecution {
        let mut text = self.secrets.redact(&text).into_owned();
        if text.len() > MAX_OUTPUT {
            let mut end = MAX_OUTPUT;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str("\n… (cut at 50,000 characters: read a subtree with `ref`)");
        }
        let mut exec = ActionExecution::ok();
        exec.output = Some(text);
        exec
    }

    /// Sets the secrets used to fill `<secret:NAME>` in typed text.
    pub fn with_secrets(mut self, secrets: Arc<Secrets>) -> Self {
        self.secrets = secrets;
        self
    }

    /// The secrets, so whatever the page reflects back (form values,
    /// messages) can be scrubbed before the model or a log sees it.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// `text` with its `<secret:NAME>` placeholders filled for the page the
    /// tab is on now (a scoped secret is refused elsewhere). The page URL
    /// is read only when there is something to fill.
    /// Fills the secret placeholders of `text` for typing into the page:
    /// judged by the document the keys would reach (`focused`: the focused
    /// one, a cross-origin frame's included) or else by the page.
    async fn fill_secrets(
        &self,
        text: &str,
        tab: &dyn BrowserTab,
        focused: bool,
    ) -> Result<std::result::Result<String, lumen_safety::SecretError>> {
        if !Secrets::has_placeholder(text) {
            return Ok(Ok(text.to_owned()));
        }
        let url = match focused {
            true => tab.focused_url().await?,
            false => tab.url().await?,
        };
        Ok(self.secrets.substitute(text, &url))
    }

    /// The secrets, shared (the event bus redacts with them).
    pub fn shared_secrets(&self) -> Arc<Secrets> {
        self.secrets.clone()
    }

    /// Executes one call. `viewport` is the step's viewport (for page-sized
    /// scrolls).
    pub async fn execute(
        &self,
        call: &ActionCall,
        tab: &dyn BrowserTab,
        viewport: Size,
    ) -> Result<ActionExecution> {
        let started = Instant::now();
        let mut exec = match self.dispatch(&call.action, tab, viewport).await {
            Ok(exec) => exec,
            // A page that does not answer (busy, hung, a dialog loop, a
            // tree too big to read in time) or answers with an error fails
            // this action, not the run: only a browser that is gone ends it.
            Err(e) if !e.is_fatal() => {
                let mut exec = ActionExecution::failed(e.to_string());
                exec.hints.push(
                    "The page did not answer this action; it may be busy, hung or hostile. \
                     Try again, or go back or to another page."
                        .to_owned(),
                );
                exec
            }
            Err(e) => return Err(e),
        };
        // Observing (a zoom) changes nothing to wait for.
        let observes = call.action.category() == lumen_core::ActionCategory::Observe;
        if exec.ok && exec.control.is_none() && call.action.touches_browser() && !observes {
            // A tab that reports the navigation already happened (CdpTab
            // waits for commit and load) needs no further wait for one.
            let navigated = exec.effect.as_ref().is_some_and(|e| e.navigated);
            self.settle_after(&call.action, navigated, tab).await?;
        }
        exec.duration_ms = started.elapsed().as_millis() as u64;
        let point = call.action.point();
        tracing::debug!(
            target: lumen_core::logs::ACTIONS,
            action = call.action.kind(),
            x = point.map(|p| p.x),
            y = point.map(|p| p.y),
            ok = exec.ok,
            ms = exec.duration_ms,
            "dispatched {}",
            call.id
        );
        Ok(exec)
    }

    async fn dispatch(
        &self,
        action: &Action,
        tab: &dyn BrowserTab,
        viewport: Size,
    ) -> Result<ActionExecution> {
        let click = |button, click_count, modifiers| ClickOptions {
            button,
            click_count,
            modifiers,
        };
        let outcome = match action {
            Action::Click {
                x,
                y,
                button,
                modifiers,
            } => {
                tab.click(Point::new(*x, *y), click(*button, 1, *modifiers))
                    .await?
            }
            Action::DoubleClick { x, y, modifiers } => {
                tab.click(Point::new(*x, *y), click(Default::default(), 2, *modifiers))
                    .await?
            }
            Action::TripleClick { x, y, modifiers } => {
                tab.click(Point::new(*x, *y), click(Default::default(), 3, *modifiers))
                    .await?
            }
            Action::Drag {
                start_x,
                start_y,
                end_x,
                end_y,
                path,
            } => {
                tab.drag(
                    Point::new(*start_x, *start_y),
                    Point::new(*end_x, *end_y),
                    path,
                )
                .await?
            }
            Action::Hover { x, y } => tab.hover(Point::new(*x, *y)).await?,
            Action::MouseDown { x, y, button } => tab.mouse_down(point(*x, *y), *button).await?,
            Action::MouseUp { x, y, button } => tab.mouse_up(point(*x, *y), *button).await?,
            Action::Scroll {
                x, y, modifiers, ..
            } => {
                let (dx, dy) = action.scroll_delta(viewport).unwrap_or((0.0, 0.0));
                tab.scroll(Point::new(*x, *y), dx, dy, *modifiers).await?
            }
            // The filled text is typed and dropped, never stored.
            Action::Type { text } => match self.fill_secrets(text, tab, true).await? {
                Ok(filled) => {
                    let outcome = tab.type_text(&filled).await?;
                    if filled != *text {
                        mask_secret_field(tab, None).await?;
                    }
                    outcome
                }
                Err(e) => return Ok(ActionExecution::failed(e.to_string())),
            },
            Action::KeyPress { keys } => tab.key_press(keys).await?,
            Action::KeyDown { key } => tab.key_down(key).await?,
            Action::KeyUp { key } => tab.key_up(key).await?,
            Action::HoldKey { keys, duration_ms } => {
                tab.hold_key(keys, Duration::from_millis(*duration_ms).min(MAX_WAIT))
                    .await?
            }
            Action::Wait { ms } => {
                tokio::time::sleep(Duration::from_millis(*ms).min(MAX_WAIT)).await;
                return Ok(ActionExecution::ok());
            }
            Action::Goto { url } => tab.goto(url).await?,
            Action::Back => tab.back().await?,
            Action::Forward => tab.forward().await?,
            // The region at full resolution (rendered larger, up to the
            // model's image limits), shown to the model with the result.
            Action::Zoom { region } => {
                let (w, h) = (viewport.width as i32, viewport.height as i32);
                let clipped = Rect {
                    x0: region.x0.clamp(0, w),
                    y0: region.y0.clamp(0, h),
                    x1: region.x1.clamp(0, w),
                    y1: region.y1.clamp(0, h),
                };
                if clipped.width() == 0 || clipped.height() == 0 {
                    return Ok(ActionExecution::failed(format!(
                        "the zoom region ({}, {})-({}, {}) is empty or outside the {}x{} viewport",
                        region.x0, region.y0, region.x1, region.y1, viewport.width, viewport.height
                    )));
                }
                let region = clipped;
                let options = ScreenshotOptions {
                    region: Some(region),
                    cursor_overlay: false,
                    ..self.capture.clone()
                };
                let shot = tab.screenshot(&options).await?;
                let mut exec = ActionExecution::ok();
                exec.hints.push(format!(
                    "zoomed into ({}, {})-({}, {}): the image after this result shows that \
                     region at {}x{}; coordinates still refer to the full screenshot",
                    region.x0, region.y0, region.x1, region.y1, shot.image.width, shot.image.height
                ));
                exec.image = Some(shot.image);
                return Ok(exec);
            }
            Action::ReadPage {
                interactive_only,
                root,
                depth,
            } => {
                let Some(snapshot) = tab.accessibility().await? else {
                    return Ok(ActionExecution::failed(
                        "this browser cannot read the accessibility tree",
                    ));
                };
                let outline = outline(&snapshot, *interactive_only, root.as_deref(), *depth);
                return Ok(self.answer(match outline {
                    Ok(text) if text.is_empty() => "(nothing to list)".to_owned(),
                    Ok(text) => text,
                    Err(e) => return Ok(ActionExecution::failed(e)),
                }));
            }
            Action::FindElements { query } => {
                let Some(snapshot) = tab.accessibility().await? else {
                    return Ok(ActionExecution::failed(
                        "this browser cannot read the accessibility tree",
                    ));
                };
                let found = snapshot.search(query, MAX_FIND_MATCHES);
                if found.is_empty() {
                    return Ok(ActionExecution::failed(format!(
                        "nothing on the page matches {query:?}; read the page to see what is there"
                    )));
                }
                let lines: Vec<String> = found.iter().map(|n| n.line(n.depth)).collect();
                return Ok(self.answer(lines.join("\n")));
            }
            Action::PageText => return Ok(self.answer(tab.page_text().await?)),
            Action::FormInput { reference, value } => {
                // A secret placeholder is filled here, as for typing.
                let filled = match value.as_str() {
                    Some(text) => match self.fill_secrets(text, tab, false).await? {
                        Ok(filled) => serde_json::Value::String(filled),
                        Err(e) => return Ok(ActionExecution::failed(e.to_string())),
                    },
                    None => value.clone(),
                };
                let outcome = tab.fill_ref(reference, &filled).await?;
                if filled != *value {
                    mask_secret_field(tab, Some(reference)).await?;
                }
                outcome
            }
            Action::ScrollToRef { reference } => tab.scroll_to_ref(reference).await?,
            Action::ClickRef {
                reference,
                button,
                click_count,
                modifiers,
            } => match tab.ref_point(reference).await? {
                Some(at) => {
                    tab.click(at, click(*button, (*click_count).clamp(1, 3), *modifiers))
                        .await?
                }
                None => return Ok(ActionExecution::failed(stale_ref(reference))),
            },
            Action::HoverRef { reference } => match tab.ref_point(reference).await? {
                Some(at) => tab.hover(at).await?,
                None => return Ok(ActionExecution::failed(stale_ref(reference))),
            },
            Action::Reload => tab.reload().await?,
            Action::ListTabs => {
                let tabs = tab.tabs().await?;
                let lines: Vec<String> = tabs
                    .iter()
                    .map(|t| {
                        format!(
                            "{}{} {:?} {}",
                            if t.followed { "* " } else { "  " },
                            t.id,
                            t.title,
                            t.url
                        )
                    })
                    .collect();
                return Ok(self.answer(lines.join("\n")));
            }
            Action::FileUpload {
                reference,
                paths,
                document_ids,
            } => tab.upload_files(reference, paths, document_ids).await?,
            // The policy refused it already unless the operator allows it.
            Action::JavascriptExec { text } => match tab.evaluate(text).await {
                Ok(value) => {
                    return Ok(self.answer(match value {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    }));
                }
                Err(lumen_core::LumenError::Script { message }) => {
                    return Ok(ActionExecution::failed(format!(
                        "the script failed: {message}"
                    )));
                }
                Err(e) => return Err(e),
            },
            Action::ReadConsole | Action::ReadNetwork => {
                let console = matches!(action, Action::ReadConsole);
                let read = match console {
                    true => tab.read_console().await?,
                    false => tab.read_network().await?,
                };
                let what = if console {
                    "console messages"
                } else {
                    "network requests"
                };
                let Some(read) = read else {
                    return Ok(ActionExecution::failed(format!(
                        "this browser cannot read the page's {what}"
                    )));
                };
                return Ok(self.answer(buffered(read, what)));
            }
            Action::NewTab => tab.new_tab().await?,
            Action::AnswerDialog { accept, text } => {
                // The answer waits for the next dialog: nothing to settle.
                let outcome = tab.answer_next_dialog(*accept, text.as_deref()).await?;
                return Ok(ActionExecution::from(outcome));
            }
            Action::ChooseFiles { paths } => {
                let outcome = tab.choose_files(paths).await?;
                return Ok(ActionExecution::from(outcome));
            }
            Action::SwitchTab { id } => tab.switch_tab(id).await?,
            Action::CloseTab { id } => tab.close_tab(id).await?,
            Action::CursorPosition => {
                let mut exec = ActionExecution::ok();
                exec.hints.push(match tab.cursor() {
                    Some(p) => format!("the pointer is at ({}, {})", p.x, p.y),
                    None => "the pointer has not been moved yet".into(),
                });
                return Ok(exec);
            }
            Action::Invalid { error, .. } => return Ok(ActionExecution::failed(error.clone())),
            // Control actions are the caller's (see `Action::control`).
            other => {
                return Ok(ActionExecution::failed(format!(
                    "action `{}` is not a browser action: the loop carries it out",
                    other.kind()
                )));
            }
        };
        Ok(outcome.into())
    }

    async fn settle_after(
        &self,
        action: &Action,
        navigated: bool,
        tab: &dyn BrowserTab,
    ) -> Result<()> {
        let navigation = matches!(action, Action::Goto { .. } | Action::Back | Action::Forward);
        match self.settle {
            SettleMode::Adaptive(mut opts) => {
                opts.expect_navigation = navigation && !navigated;
                tab.settle(&opts).await?;
            }
            SettleMode::Fixed(t) => {
                let delay = match action {
                    _ if navigation => t.after_navigation,
                    Action::Type { .. } | Action::KeyPress { .. } | Action::HoldKey { .. } => {
                        t.after_type
                    }
                    Action::Scroll { .. } => t.after_scroll,
                    _ => t.after_click,
                };
                tokio::time::sleep(delay).await;
            }
        }
        Ok(())
    }
}

/// A console or network read as the model reads it: page text (redacted
/// and capped by [`ActionRouter::answer`]), saying what was dropped.
fn buffered(read: lumen_core::BufferedLines, what: &str) -> String {
    let mut text = String::new();
    if read.dropped > 0 {
        text.push_str(&format!(
            "({} older {what} were dropped: the buffer keeps the newest)\n",
            read.dropped
        ));
    }
    if read.lines.is_empty() {
        text.push_str(&format!(
            "(no {what} since the last read; an empty answer does not mean none happened \
             before the tab was attached)"
        ));
    }
    text.push_str(&read.lines.join("\n"));
    text
}

fn point(x: Option<i32>, y: Option<i32>) -> Option<Point> {
    Some(Point::new(x?, y?))
}

#[cfg(test)]
mod tests {
    use lumen_core::{Modifiers, MouseButton, Rect, ScrollDirection, ScrollUnit, TerminateStatus};

    use super::*;
    use crate::fake::FakeTab;

    const VP: Size = Size::new(1280, 800);

    async fn run(router: &ActionRouter, tab: &FakeTab, action: Action) -> ActionExecution {
        router
            .execute(&ActionCall::new("c", action), tab, VP)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn pointer_and_keyboard_actions_reach_the_tab_then_settle() {
        let tab = FakeTab::new("http://x/");
        let r = ActionRouter::new();
        let ctrl = Modifiers {
            ctrl: true,
            ..Modifiers::NONE
        };
        for a in [
            Action::Click {
                x: 1,
                y: 2,
                button: MouseButton::Right,
                modifiers: ctrl,
            },
            Action::DoubleClick {
                x: 3,
                y: 4,
                modifiers: Modifiers::NONE,
            },
            Action::TripleClick {
                x: 5,
                y: 6,
                modifiers: Modifiers::NONE,
            },
            Action::Drag {
                start_x: 0,
                start_y: 0,
                end_x: 9,
                end_y: 9,
                path: vec![Point::new(4, 4)],
            },
            Action::Hover { x: 7, y: 8 },
            Action::MouseDown {
                x: None,
                y: None,
                button: MouseButton::Left,
            },
            Action::MouseUp {
                x: Some(1),
                y: Some(1),
                button: MouseButton::Left,
            },
            Action::Scroll {
                x: 10,
                y: 20,
                direction: ScrollDirection::Up,
                amount: 1.0,
                unit: ScrollUnit::Pages,
                modifiers: Modifiers::NONE,
            },
            Action::Type { text: "hi".into() },
            Action::KeyPress {
                keys: vec!["ctrl".into(), "a".into()],
            },
            Action::Goto {
                url: "http://y/".into(),
            },
            Action::Back,
        ] {
            assert!(run(&r, &tab, a).await.ok);
        }
        assert_eq!(
            tab.calls(),
            vec![
                "click 1,2 Right x1 mods=2",
                "settle nav=false",
                "click 3,4 Left x2 mods=0",
                "settle nav=false",
                "click 5,6 Left x3 mods=0",
                "settle nav=false",
                "drag 0,0->9,9 via 1",
                "settle nav=false",
                "hover 7,8",
                "settle nav=false",
                "down None Left",
                "settle nav=false",
                "up Some(Point { x: 1, y: 1 }) Left",
                "settle nav=false",
                "scroll 10,20 by 0,-700 mods=0",
                "settle nav=false",
                "type hi",
                "settle nav=false",
                "key ctrl+a",
                "settle nav=false",
                "goto http://y/",
                "settle nav=true",
                "back",
                "settle nav=true",
            ]
        );
    }

    #[tokio::test]
    async fn a_navigation_the_tab_already_waited_for_is_not_awaited_again() {
        let tab = FakeTab::new("http://x/");
        assert!(run(&ActionRouter::new(), &tab, Action::Forward).await.ok);
        assert_eq!(tab.calls(), vec!["forward", "settle nav=false"]);
    }

    #[test]
    fn an_interactive_outline_keeps_the_note_of_a_cut_snapshot() {
        let node = |reference: &str, role: &str, focusable| lumen_core::AxNode {
            reference: reference.into(),
            role: role.into(),
            name: "x".into(),
            value: None,
            depth: 0,
            focusable,
        };
        let snapshot = lumen_core::AxSnapshot {
            url: "http://x/".into(),
            nodes: vec![
                node("@e1", "paragraph", false),
                node("@e2", "button", true),
                node(lumen_core::AxSnapshot::OMITTED_REF, "note", false),
            ],
        };
        let text = outline(&snapshot, true, None, None).unwrap();
        assert!(!text.contains("@e1") && text.contains("@e2"), "{text}");
        assert!(text.contains(lumen_core::AxSnapshot::OMITTED_REF), "{text}");
    }

    #[tokio::test]
    async fn control_actions_never_touch_the_browser() {
        let tab = FakeTab::new("http://x/");
        let r = ActionRouter::new();
        // The pipeline hands control actions back to the loop; given to the
        // router anyway, they fail without touching the tab.
        for action in [
            Action::Terminate {
                status: TerminateStatus::Success,
                result: "42".into(),
            },
            Action::Delegate {
                instruction: "sub".into(),
                max_steps: Some(3),
            },
            Action::Screenshot,
            Action::Fold {
                summary: "done".into(),
            },
            Action::WriteState {
                data: Default::default(),
            },
        ] {
            let e = run(&r, &tab, action.clone()).await;
            assert!(
                !e.ok
                    && e.error
                        .as_deref()
                        .unwrap_or("")
                        .contains("not a browser action"),
                "{action:?}: {e:?}"
            );
        }
        let z = run(
            &r,
            &tab,
            Action::Zoom {
                region: Rect {
                    x0: 0,
                    y0: 0,
                    x1: 10,
                    y1: 10,
                },
            },
        )
        .await;
        // A zoom is no control request: the router captures its region.
        assert_eq!(z.control, None);
        assert!(z.ok && z.image.is_some(), "{z:?}");
        let c = run(&r, &tab, Action::CursorPosition).await;
        assert_eq!(c.hints, vec!["the pointer has not been moved yet"]);
        let i = run(
            &r,
            &tab,
            Action::Invalid {
                name: "fly".into(),
                input: serde_json::Value::Null,
                error: "unknown action `fly`".into(),
            },
        )
        .await;
        assert_eq!(
            (i.ok, i.error.as_deref()),
            (false, Some("unknown action `fly`"))
        );
        assert!(tab.calls().is_empty(), "{:?}", tab.calls());
    }

    #[tokio::test]
    async fn failed_actions_are_data_and_skip_settling() {
        let tab = FakeTab::new("http://x/");
        *tab.fail_next.lock().unwrap() = Some("unknown key `Hyper`".into());
        let e = run(
            &ActionRouter::new(),
            &tab,
            Action::KeyPress {
                keys: vec!["Hyper".into()],
            },
        )
        .await;
        assert_eq!(
            (e.ok, e.error.as_deref()),
            (false, Some("unknown key `Hyper`"))
        );
        assert_eq!(tab.calls(), vec!["key Hyper"]);
    }

    #[tokio::test]
    async fn secrets_are_filled_at_type_time_and_unknown_names_fail() {
        let tab = FakeTab::new("http://x/");
        let secrets = lumen_safety::Secrets::new()
            .with("password", "hunter2")
            .unwrap();
        let r = ActionRouter::new().with_secrets(Arc::new(secrets));
        assert!(
            run(
                &r,
                &tab,
                Action::Type {
                    text: "pw: <secret:password>!".into()
                }
            )
            .await
            .ok
        );
        let bad = run(
            &r,
            &tab,
            Action::Type {
                text: "<secret:pin>".into(),
            },
        )
        .await;
        assert!(!bad.ok && bad.error.unwrap().contains("no secret named `pin`"));
        // No lookup configured: placeholders cannot be filled either.
        let none = run(
            &ActionRouter::new(),
            &tab,
            Action::Type {
                text: "<secret:password>".into(),
            },
        )
        .await;
        assert!(!none.ok);
        assert_eq!(tab.calls(), vec!["type pw: hunter2!", "settle nav=false"]);
    }

    #[tokio::test]
    async fn console_reads_are_redacted_drained_and_say_what_was_dropped() {
        let tab = FakeTab::new("http://x/");
        *tab.console.lock().unwrap() = vec!["[log] the token is hunter2".into()];
        let secrets = lumen_safety::Secrets::new()
            .with("password", "hunter2")
            .unwrap();
        let r = ActionRouter::new().with_secrets(Arc::new(secrets));
        let first = run(&r, &tab, Action::ReadConsole).await;
        let text = first.output.unwrap();
        assert!(first.ok);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("[log] the token is"), "{text}");
        assert!(
            text.contains("2 older console messages were dropped"),
            "{text}"
        );
        let again = run(&r, &tab, Action::ReadConsole).await.output.unwrap();
        assert!(
            again.contains("no console messages since the last read"),
            "{again}"
        );
        // A tab that cannot read its network says so.
        let net = run(&r, &tab, Action::ReadNetwork).await;
        assert!(!net.ok && net.error.unwrap().contains("network requests"));
    }

    #[tokio::test]
    async fn fixed_timing_sleeps_instead_of_settling() {
        let tab = FakeTab::new("http://x/");
        let timing = RouterTiming {
            after_click: Duration::from_millis(20),
            ..RouterTiming::default()
        };
        let r = ActionRouter::new().with_settle(SettleMode::Fixed(timing));
        let e = run(&r, &tab, Action::Hover { x: 1, y: 1 }).await;
        assert!(e.duration_ms >= 20);
        assert_eq!(tab.calls(), vec!["hover 1,1"]);
    }
}

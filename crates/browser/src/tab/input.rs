//! Input: mouse events (click, hover, drag, raw button presses, the wheel)
//! and keyboard events (typing, key chords, keys held down), built by
//! [`protocol`](crate::protocol) and sent to the driven page, each inside
//! a receipt ([`act`](CdpTab::act)).

use std::time::{Duration, Instant};

use lumen_core::{ActionOutcome, ClickOptions, Modifiers, MouseButton, Point, Result};

use super::{CdpTab, PageCtx, lock};
use crate::protocol::keys::{self, KeyDef};
use crate::protocol::mouse::{self, Press};
use crate::protocol::{Command, typing};
use crate::scripts::SCROLL_ROOM_FN;

/// Scroll positions plus the scroll-event counter, to see a wheel land.
const SCROLL_STATE: &str = "[scrollX, scrollY, (window.__lumenAgent || {}).changes]";
/// Longest `hold_key`.
const MAX_HOLD: Duration = Duration::from_secs(10);

impl CdpTab {
    async fn mouse_event(
        &self,
        ctx: &PageCtx,
        kind: &'static str,
        at: Point,
        press: Press,
    ) -> Result<()> {
        self.mouse_events(ctx, &[(kind, at, press)]).await
    }

    /// Sends mouse events in order, without waiting for each one's
    /// acknowledgement before the next: the renderer's input queue keeps
    /// their order, and a pointer move (which Chromium delivers aligned to
    /// animation frames) is flushed by the press that follows it instead of
    /// costing a frame of its own. Keys held down add their modifiers.
    async fn mouse_events(
        &self,
        ctx: &PageCtx,
        events: &[(&'static str, Point, Press)],
    ) -> Result<()> {
        let held = self.held_mask();
        let calls = events.iter().map(|&(kind, at, mut press)| {
            press.modifiers |= held;
            let (method, params) = mouse::mouse_event(kind, at, press);
            self.conn().page_raw(&ctx.page, method, params)
        });
        futures::future::try_join_all(calls).await?;
        if let Some(&(_, at, _)) = events.last() {
            *lock(&self.shared.cursor) = Some(at);
        }
        Ok(())
    }

    async fn move_to(&self, ctx: &PageCtx, at: Point, buttons: i64) -> Result<()> {
        let press = Press::new(mouse::held_button(buttons), buttons, 0, 0);
        self.mouse_event(ctx, "mouseMoved", at, press).await
    }

    /// Sends commands one after the other, each acknowledged before the
    /// next.
    async fn send_in_order(&self, ctx: &PageCtx, commands: Vec<Command>) -> Result<()> {
        for (method, params) in commands {
            self.conn().page_raw(&ctx.page, method, params).await?;
        }
        Ok(())
    }

    /// Presses keys down in order (modifiers accumulate), returning the
    /// modifier mask held.
    async fn keys_down(&self, ctx: &PageCtx, defs: &[KeyDef]) -> Result<i64> {
        let (events, mask) = keys::chord_down(defs);
        self.send_in_order(ctx, key_commands(events)).await?;
        Ok(mask)
    }

    async fn keys_up(&self, ctx: &PageCtx, defs: &[KeyDef], mask: i64) -> Result<()> {
        self.send_in_order(ctx, key_commands(keys::chord_up(defs, mask)))
            .await
    }

    /// The modifier bits of the keys held down.
    pub(super) fn held_mask(&self) -> i64 {
        lock(&self.shared.held)
            .iter()
            .fold(0, |mask, k| mask | k.modifier_bit)
    }

    pub(super) async fn click_at(&self, at: Point, options: ClickOptions) -> Result<ActionOutcome> {
        let count = options.click_count.clamp(1, 3) as i64;
        let mods = options.modifiers.cdp_mask();
        self.act(Some(at), true, |ctx| async move {
            let mut events = Vec::with_capacity(1 + 2 * count as usize);
            if self.pointer() != Some(at) {
                events.push(("mouseMoved", at, Press::NONE));
            }
            events.extend(mouse::click_events(at, options.button, count, mods));
            self.mouse_events(&ctx, &events).await
        })
        .await
    }

    pub(super) async fn hover_at(&self, at: Point) -> Result<ActionOutcome> {
        self.act(Some(at), true, |ctx| async move {
            self.move_to(&ctx, at, 0).await
        })
        .await
        .map(|mut o| {
            // Hovering over a non-interactive element is normal.
            o.hints.retain(|h| !h.starts_with("The pointer hit"));
            o
        })
    }

    pub(super) async fn drag_along(
        &self,
        from: Point,
        to: Point,
        path: &[Point],
    ) -> Result<ActionOutcome> {
        let vp = self.viewport_known();
        if let Some(vp) = vp
            && let Some(p) = path.iter().chain([&to]).find(|p| !vp.contains(**p))
        {
            return Ok(ActionOutcome::failed(format!(
                "drag point ({}, {}) is outside the {}x{} viewport; nothing was done",
                p.x, p.y, vp.width, vp.height
            )));
        }
        let path = path.to_vec();
        self.act(Some(from), true, |ctx| async move {
            self.move_to(&ctx, from, 0).await?;
            self.mouse_event(
                &ctx,
                "mousePressed",
                from,
                Press::new(Some(MouseButton::Left), 1, 1, 0),
            )
            .await?;
            // Without waypoints, interpolate so drag handlers see movement.
            let mut points = path;
            if points.is_empty() {
                let steps = 5;
                for i in 1..steps {
                    let f = i as f64 / steps as f64;
                    points.push(Point::new(
                        from.x + ((to.x - from.x) as f64 * f).round() as i32,
                        from.y + ((to.y - from.y) as f64 * f).round() as i32,
                    ));
                }
            }
            points.push(to);
            for p in points {
                self.move_to(&ctx, p, 1).await?;
            }
            self.mouse_event(
                &ctx,
                "mouseReleased",
                to,
                Press::new(Some(MouseButton::Left), 0, 1, 0),
            )
            .await
        })
        .await
    }

    pub(super) async fn press_button(
        &self,
        at: Option<Point>,
        button: MouseButton,
    ) -> Result<ActionOutcome> {
        let Some(p) = at.or_else(|| self.pointer()) else {
            return Ok(ActionOutcome::failed(
                "the pointer has no position yet: give coordinates",
            ));
        };
        let bit = mouse::button_bit(button);
        self.act(Some(p), true, |ctx| async move {
            if self.pointer() != Some(p) {
                self.move_to(&ctx, p, 0).await?;
            }
            self.mouse_event(&ctx, "mousePressed", p, Press::new(Some(button), bit, 1, 0))
                .await
        })
        .await
    }

    pub(super) async fn release_button(
        &self,
        at: Option<Point>,
        button: MouseButton,
    ) -> Result<ActionOutcome> {
        let Some(p) = at.or_else(|| self.pointer()) else {
            return Ok(ActionOutcome::failed(
                "the pointer has no position yet: give coordinates",
            ));
        };
        let bit = mouse::button_bit(button);
        self.act(Some(p), true, |ctx| async move {
            if self.pointer() != Some(p) {
                self.move_to(&ctx, p, bit).await?;
            }
            self.mouse_event(&ctx, "mouseReleased", p, Press::new(Some(button), 0, 1, 0))
                .await
        })
        .await
    }

    pub(super) async fn wheel(
        &self,
        at: Point,
        delta_x: f64,
        delta_y: f64,
        modifiers: Modifiers,
    ) -> Result<ActionOutcome> {
        if !delta_x.is_finite() || !delta_y.is_finite() {
            return Ok(ActionOutcome::failed("the scroll amount is not a number"));
        }
        let ctx0 = self.active();
        // The position to compare with is the one the page holds still at.
        self.finish_settling(&ctx0).await?;
        // A wheel with nothing under it to scroll that way (and no
        // modifier, which could turn it sideways or into a zoom) moves
        // nothing: its frames are not waited for. The page's own wheel
        // handlers still run, and settling sees what they change.
        let modified = (modifiers.cdp_mask() | self.held_mask()) != 0;
        let read = self
            .eval_in(
                &ctx0,
                &format!(
                    "[{SCROLL_STATE}, {SCROLL_ROOM_FN}({}, {}, {delta_x}, {delta_y})]",
                    at.x, at.y
                ),
            )
            .await
            .unwrap_or_default();
        let room = modified || read[1] != false;
        let before = read[0].clone();
        let mut outcome = self
            .act(Some(at), false, |ctx| async move {
                let mods = modifiers.cdp_mask() | self.held_mask();
                let (method, params) = mouse::wheel(at, delta_x, delta_y, mods);
                self.conn().page_raw(&ctx.page, method, params).await?;
                *lock(&self.shared.cursor) = Some(at);
                Ok(())
            })
            .await?;
        // The wheel scrolls asynchronously (smooth scrolling off in
        // headless, but the compositor still needs a frame): wait frame by
        // frame until the position has moved. Whether it then holds still
        // (a scroll snap animating on) is settling's to see: the scroll
        // events it set off count as a recent change. Nothing moving
        // within a few frames means nothing under the pointer can scroll
        // that way; waiting longer would only add latency.
        if outcome.ok && room {
            let deadline = Instant::now() + Duration::from_millis(400);
            let mut frames = 0;
            loop {
                let now = self
                    .eval_in(
                        &ctx0,
                        &format!(
                            "new Promise(r => requestAnimationFrame(() => r({SCROLL_STATE})))"
                        ),
                    )
                    .await
                    .unwrap_or_default();
                let moved = now != before;
                frames += 1;
                if moved || frames >= 3 || Instant::now() >= deadline {
                    if moved && let Some(e) = outcome.effect.as_mut() {
                        e.page_changed = Some(true);
                    }
                    break;
                }
            }
        }
        Ok(outcome)
    }

    pub(super) async fn type_into_focus(&self, text: &str) -> Result<ActionOutcome> {
        if text.is_empty() {
            return Ok(ActionOutcome::failed("there is no text to type"));
        }
        let per_key = self.shared.options.type_with_key_events;
        let outcome = self
            .act(None, false, |ctx| async move {
                let commands = typing::type_text(text, per_key)?;
                self.send_in_order(&ctx, commands).await
            })
            .await?;
        Ok(flag_typing_into_nothing(outcome))
    }

    pub(super) async fn press_chord(&self, keys: &[String]) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(keys) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        self.act(None, false, |ctx| async move {
            let mask = self.keys_down(&ctx, &defs).await?;
            self.keys_up(&ctx, &defs, mask).await
        })
        .await
    }

    pub(super) async fn hold_chord(
        &self,
        keys: &[String],
        duration: Duration,
    ) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(keys) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        let hold = duration.min(MAX_HOLD);
        self.act(None, false, |ctx| async move {
            let mask = self.keys_down(&ctx, &defs).await?;
            tokio::time::sleep(hold).await;
            self.keys_up(&ctx, &defs, mask).await
        })
        .await
    }

    pub(super) async fn hold_key_down(&self, key: &str) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(&[key.to_owned()]) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        let mask = self.held_mask();
        let ctx = self.active();
        for def in &defs {
            let params = keys::key_event_params(true, def, mask | def.modifier_bit, false);
            self.conn()
                .page_raw(&ctx.page, "Input.dispatchKeyEvent", params)
                .await?;
        }
        lock(&self.shared.held).extend(defs);
        Ok(ActionOutcome::ok())
    }

    pub(super) async fn release_key(&self, key: &str) -> Result<ActionOutcome> {
        let defs = match keys::parse_chord(&[key.to_owned()]) {
            Ok(d) => d,
            Err(e) => return Ok(ActionOutcome::failed(e)),
        };
        let Some(def) = defs.into_iter().next() else {
            return Ok(ActionOutcome::failed("no key given"));
        };
        let released = {
            let mut held = lock(&self.shared.held);
            held.iter()
                .position(|k| k.code == def.code)
                .map(|i| held.remove(i))
        };
        let Some(released) = released else {
            return Ok(ActionOutcome::failed(format!("{key} is not held down")));
        };
        let ctx = self.active();
        let params = keys::key_event_params(false, &released, self.held_mask(), false);
        self.conn()
            .page_raw(&ctx.page, "Input.dispatchKeyEvent", params)
            .await?;
        Ok(ActionOutcome::ok())
    }
}

/// Typing with nothing editable focused and no visible change is not a
/// success the model should believe.
fn flag_typing_into_nothing(mut outcome: ActionOutcome) -> ActionOutcome {
    if let Some(e) = &outcome.effect {
        let editable = e.focus.as_ref().is_some_and(|f| f.editable);
        // `page_changed == Some(false)` is only set where it was measured.
        if !editable && e.page_changed == Some(false) && !e.changed_anything() {
            outcome.hints.push(
                "Nothing editable has focus and the page did not change: click the field first."
                    .to_owned(),
            );
        }
    }
    outcome
}

/// `Input.dispatchKeyEvent` commands of key event parameters.
fn key_commands(events: Vec<serde_json::Value>) -> Vec<Command> {
    events
        .into_iter()
        .map(|p| ("Input.dispatchKeyEvent", p))
        .collect()
}

//! [`PageLink`]'s pointer by hand and its drags: `mouse move|down|up`
//! (the buttons held are the caller's to remember across processes) and
//! `drag SRC DST`, which works both for pages that follow the mouse
//! (`mousedown`, `mousemove`, `mouseup`) and for HTML5 drag and drop
//! (`dragstart` … `drop`).
//!
//! HTML5 drag and drop does not start from synthesized mouse events
//! alone: Chromium hands a drag it would start to the platform, which a
//! CDP client does not have. So a drag asks Chromium to hand it over
//! instead (`Input.setInterceptDrags`); when the press and the first moves
//! start one (`Input.dragIntercepted`, with the page's drag data), the
//! rest of the drag is sent as drag events (`Input.dispatchDragEvent`:
//! `dragEnter`, `dragOver`, `drop`), as a platform would. A drag the page
//! does not start is a plain mouse drag to the end.

use lumen_core::{MouseButton, Point, Result};
use serde_json::{Value, json};

use super::{NEXT_FRAME, PageLink};
use crate::protocol::mouse::{self, Press};

/// How many moves a drag makes between its ends (so that pages that
/// follow the mouse see it travel).
const DRAG_STEPS: i32 = 8;

impl PageLink {
    /// Moves the pointer to `at` with the buttons of `buttons` held (left
    /// 1, right 2, middle 4; 0 for a plain move).
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn mouse_move(&self, at: Point, buttons: i64) -> Result<()> {
        let press = Press::new(mouse::held_button(buttons), buttons, 0, 0);
        let (method, params) = mouse::mouse_event("mouseMoved", at, press);
        self.call(method, params).await.map(drop)
    }

    /// Presses (`down`) or releases `button` at `at`, with the buttons of
    /// the mask `held` held before; returns the mask held after it.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn mouse_button(
        &self,
        at: Point,
        button: MouseButton,
        down: bool,
        held: i64,
    ) -> Result<i64> {
        let bit = mouse::button_bit(button);
        let (kind, buttons) = if down {
            ("mousePressed", held | bit)
        } else {
            ("mouseReleased", held & !bit)
        };
        let (method, params) =
            mouse::mouse_event(kind, at, Press::new(Some(button), buttons, 1, 0));
        self.call(method, params).await?;
        Ok(buttons)
    }

    /// Drags with the left button from `from` to `to`: presses at `from`,
    /// moves there in steps and releases, as HTML5 drag and drop when the
    /// page starts one (see the module docs). Returns whether it was one.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn drag(&self, from: Point, to: Point) -> Result<bool> {
        let held = Press::new(Some(MouseButton::Left), 1, 1, 0);
        let step = |i: i32| {
            Point::new(
                from.x + (to.x - from.x) * i / DRAG_STEPS,
                from.y + (to.y - from.y) * i / DRAG_STEPS,
            )
        };
        self.wire.lock().await.events.clear();
        self.calls(vec![
            ("Input.setInterceptDrags", json!({ "enabled": true })),
            mouse::mouse_event("mouseMoved", from, Press::NONE),
            mouse::mouse_event("mousePressed", from, held),
            mouse::mouse_event("mouseMoved", step(1), moving()),
            (
                "Runtime.evaluate",
                json!({ "expression": NEXT_FRAME, "awaitPromise": true }),
            ),
        ])
        .await?;
        let data = self.intercepted_drag().await;
        let mut commands = Vec::new();
        match &data {
            Some(data) => {
                for (kind, at) in [("dragEnter", step(2)), ("dragOver", to), ("drop", to)] {
                    commands.push((
                        "Input.dispatchDragEvent",
                        json!({ "type": kind, "x": at.x, "y": at.y, "data": data }),
                    ));
                }
            }
            None => {
                for i in 2..=DRAG_STEPS {
                    commands.push(mouse::mouse_event("mouseMoved", step(i), moving()));
                }
            }
        }
        commands.push(mouse::mouse_event(
            "mouseReleased",
            to,
            Press::new(Some(MouseButton::Left), 0, 1, 0),
        ));
        commands.push(("Input.setInterceptDrags", json!({ "enabled": false })));
        self.calls(commands).await?;
        Ok(data.is_some())
    }

    /// The drag data of a drag Chromium handed over since the events were
    /// last cleared, if it did.
    async fn intercepted_drag(&self) -> Option<Value> {
        let wire = self.wire.lock().await;
        wire.events
            .iter()
            .find(|e| e["method"] == "Input.dragIntercepted")
            .map(|e| e["params"]["data"].clone())
    }
}

/// A move with the left button held.
fn moving() -> Press {
    Press::new(Some(MouseButton::Left), 1, 0, 0)
}

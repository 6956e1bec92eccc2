//! Mouse events: button names and bits, pointer moves, clicks and the
//! wheel, as `Input.dispatchMouseEvent` commands.

use lumen_core::{MouseButton, Point};
use serde_json::json;

use super::Command;

/// CDP's name of a button.
pub(crate) fn button_name(button: MouseButton) -> &'static str {
    match button {
        MouseButton::Left => "left",
        MouseButton::Right => "right",
        MouseButton::Middle => "middle",
    }
}

/// A button's bit in the `buttons` mask (left 1, right 2, middle 4).
pub(crate) fn button_bit(button: MouseButton) -> i64 {
    match button {
        MouseButton::Left => 1,
        MouseButton::Right => 2,
        MouseButton::Middle => 4,
    }
}

/// The button a move with `buttons` held reports (the lowest held), or
/// `None` with none held.
pub(crate) fn held_button(buttons: i64) -> Option<MouseButton> {
    match buttons {
        0 => None,
        b if b & 1 != 0 => Some(MouseButton::Left),
        b if b & 2 != 0 => Some(MouseButton::Right),
        _ => Some(MouseButton::Middle),
    }
}

/// The button state of one mouse event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Press {
    /// The button the event is about (`None` for a plain move).
    pub(crate) button: Option<MouseButton>,
    /// Bit mask of the buttons held (left 1, right 2, middle 4).
    pub(crate) buttons: i64,
    /// Click count (0 for moves).
    pub(crate) count: i64,
    /// CDP modifier mask.
    pub(crate) modifiers: i64,
}

impl Press {
    /// A press state.
    pub(crate) fn new(
        button: Option<MouseButton>,
        buttons: i64,
        count: i64,
        modifiers: i64,
    ) -> Self {
        Self {
            button,
            buttons,
            count,
            modifiers,
        }
    }

    /// No button, no modifiers: a plain move.
    pub(crate) const NONE: Press = Press {
        button: None,
        buttons: 0,
        count: 0,
        modifiers: 0,
    };
}

/// One mouse event: `kind` is `mouseMoved`, `mousePressed` or
/// `mouseReleased`, `at` in viewport CSS pixels.
pub(crate) fn mouse_event(kind: &'static str, at: Point, press: Press) -> Command {
    let name = press.button.map(button_name).unwrap_or("none");
    (
        "Input.dispatchMouseEvent",
        json!({
            "type": kind,
            "x": f64::from(at.x),
            "y": f64::from(at.y),
            "button": name,
            "buttons": press.buttons,
            "clickCount": press.count,
            "modifiers": press.modifiers,
        }),
    )
}

/// The press and release pairs of a click, `count` times (each pair
/// carries its count, so a double click fires `dblclick`), with
/// `modifiers` held.
pub(crate) fn click_events(
    at: Point,
    button: MouseButton,
    count: i64,
    modifiers: i64,
) -> Vec<(&'static str, Point, Press)> {
    let bit = button_bit(button);
    let mut events = Vec::with_capacity(2 * count.max(0) as usize);
    for n in 1..=count {
        events.push((
            "mousePressed",
            at,
            Press::new(Some(button), bit, n, modifiers),
        ));
        events.push((
            "mouseReleased",
            at,
            Press::new(Some(button), 0, n, modifiers),
        ));
    }
    events
}

/// A wheel turn at `at` by `(dx, dy)` CSS pixels.
pub(crate) fn wheel(at: Point, dx: f64, dy: f64, modifiers: i64) -> Command {
    (
        "Input.dispatchMouseEvent",
        json!({
            "type": "mouseWheel",
            "x": f64::from(at.x),
            "y": f64::from(at.y),
            "deltaX": dx,
            "deltaY": dy,
            "modifiers": modifiers,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_click_presses_and_releases_with_its_count() {
        let at = Point::new(3, 4);
        let events: Vec<Command> = click_events(at, MouseButton::Right, 2, 8)
            .into_iter()
            .map(|(kind, at, press)| mouse_event(kind, at, press))
            .collect();
        assert_eq!(events.len(), 4);
        let p = &events[2].1;
        assert_eq!(
            (&p["type"], &p["button"], &p["buttons"], &p["clickCount"]),
            (
                &json!("mousePressed"),
                &json!("right"),
                &json!(2),
                &json!(2)
            )
        );
        assert_eq!(
            (&events[3].1["buttons"], &events[3].1["modifiers"]),
            (&json!(0), &json!(8))
        );
        assert_eq!(held_button(3), Some(MouseButton::Left));
        assert_eq!(held_button(0), None);
    }
}

//! Decoder tables: every provider action → the exact action, at odd and
//! downscaled screenshot sizes.

use lumen_core::{
    Action, Modifiers, MouseButton, Point, Rect, ScrollDirection, ScrollUnit, Size, TerminateStatus,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// A 1280x720 viewport shown as a 1280x720 image.
fn same() -> ActionDecoder {
    ActionDecoder::for_screen(Size::new(1280, 720), Size::new(1280, 720))
}

/// A 2560x1440 viewport downscaled to 1280x720 for the model.
fn half() -> ActionDecoder {
    ActionDecoder::for_screen(Size::new(2560, 1440), Size::new(1280, 720))
}

/// An odd viewport (1288x728) downscaled to 1000x565.
fn odd() -> ActionDecoder {
    ActionDecoder::for_screen(Size::new(1288, 728), Size::new(1000, 565))
}

fn click(x: i32, y: i32) -> Action {
    Action::Click {
        x,
        y,
        button: MouseButton::Left,
        modifiers: Modifiers::NONE,
    }
}

fn invalid_error(actions: &[Action]) -> String {
    match actions {
        [Action::Invalid { error, .. }] => error.clone(),
        other => panic!("expected one invalid action, got {other:?}"),
    }
}

#[test]
fn anthropic_every_computer_action() {
    let d = same();
    let shift = Modifiers {
        shift: true,
        ..Modifiers::NONE
    };
    let table: Vec<(serde_json::Value, Vec<Action>)> = vec![
        (json!({"action": "screenshot"}), vec![Action::Screenshot]),
        (
            json!({"action": "cursor_position"}),
            vec![Action::CursorPosition],
        ),
        (
            json!({"action": "left_click", "coordinate": [10, 20]}),
            vec![click(10, 20)],
        ),
        (
            json!({"action": "left_click", "coordinate": [10, 20], "text": "shift"}),
            vec![Action::Click {
                x: 10,
                y: 20,
                button: MouseButton::Left,
                modifiers: shift,
            }],
        ),
        (
            json!({"action": "right_click", "coordinate": [5, 6]}),
            vec![Action::Click {
                x: 5,
                y: 6,
                button: MouseButton::Right,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"action": "middle_click", "coordinate": [5, 6]}),
            vec![Action::Click {
                x: 5,
                y: 6,
                button: MouseButton::Middle,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"action": "double_click", "coordinate": [7, 8]}),
            vec![Action::DoubleClick {
                x: 7,
                y: 8,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"action": "triple_click", "coordinate": [7, 8]}),
            vec![Action::TripleClick {
                x: 7,
                y: 8,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"action": "mouse_move", "coordinate": [30, 40]}),
            vec![Action::Hover { x: 30, y: 40 }],
        ),
        (
            json!({"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [300, 400]}),
            vec![Action::Drag {
                start_x: 1,
                start_y: 2,
                end_x: 300,
                end_y: 400,
                path: vec![],
            }],
        ),
        (
            json!({"action": "left_mouse_down"}),
            vec![Action::MouseDown {
                x: None,
                y: None,
                button: MouseButton::Left,
            }],
        ),
        (
            json!({"action": "left_mouse_up", "coordinate": [9, 9]}),
            vec![Action::MouseUp {
                x: Some(9),
                y: Some(9),
                button: MouseButton::Left,
            }],
        ),
        (
            json!({"action": "scroll", "coordinate": [640, 360], "scroll_direction": "down", "scroll_amount": 5}),
            vec![Action::Scroll {
                x: 640,
                y: 360,
                direction: ScrollDirection::Down,
                amount: 5.0,
                unit: ScrollUnit::Clicks,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"action": "scroll", "coordinate": [640, 360], "scroll_direction": "left", "scroll_amount": 2, "text": "shift"}),
            vec![Action::Scroll {
                x: 640,
                y: 360,
                direction: ScrollDirection::Left,
                amount: 2.0,
                unit: ScrollUnit::Clicks,
                modifiers: shift,
            }],
        ),
        (
            json!({"action": "type", "text": "hello"}),
            vec![Action::Type {
                text: "hello".into(),
            }],
        ),
        (
            json!({"action": "key", "text": "ctrl+a"}),
            vec![Action::KeyPress {
                keys: vec!["ctrl".into(), "a".into()],
            }],
        ),
        (
            json!({"action": "key", "text": "Page_Down"}),
            vec![Action::KeyPress {
                keys: vec!["Page_Down".into()],
            }],
        ),
        (
            json!({"action": "key", "text": "ctrl+a Delete"}),
            vec![
                Action::KeyPress {
                    keys: vec!["ctrl".into(), "a".into()],
                },
                Action::KeyPress {
                    keys: vec!["Delete".into()],
                },
            ],
        ),
        (
            json!({"action": "hold_key", "text": "shift", "duration": 1.5}),
            vec![Action::HoldKey {
                keys: vec!["shift".into()],
                duration_ms: 1500,
            }],
        ),
        (
            json!({"action": "wait", "duration": 2}),
            vec![Action::Wait { ms: 2000 }],
        ),
        (
            json!({"action": "zoom", "region": [100, 50, 0, 10]}),
            vec![Action::Zoom {
                region: Rect {
                    x0: 0,
                    y0: 10,
                    x1: 100,
                    y1: 50,
                },
            }],
        ),
    ];
    for (input, expected) in table {
        assert_eq!(d.anthropic("computer", &input), expected, "{input}");
    }
}

#[test]
fn anthropic_coordinates_scale_to_the_viewport() {
    // Downscaled: image pixel 640,360 is CSS pixel 1280,720.
    assert_eq!(
        half().anthropic(
            "computer",
            &json!({"action": "left_click", "coordinate": [640, 360]})
        ),
        vec![click(1280, 720)]
    );
    // Odd sizes: 999,564 in a 1000x565 image of a 1288x728 viewport.
    assert_eq!(
        odd().anthropic(
            "computer",
            &json!({"action": "left_click", "coordinate": [999, 564]})
        ),
        vec![click(1287, 727)]
    );
    // 500/1000*1288 = 644; 282.5/565*728 = 364 (rounded half away from zero).
    assert_eq!(
        odd().anthropic(
            "computer",
            &json!({"action": "mouse_move", "coordinate": [500, 282.5]})
        ),
        vec![Action::Hover { x: 644, y: 364 }]
    );
    // Outside the image clamps into the viewport.
    assert_eq!(
        same().anthropic(
            "computer",
            &json!({"action": "left_click", "coordinate": [5000, -3]})
        ),
        vec![click(1279, 0)]
    );
}

#[test]
fn anthropic_own_tools() {
    let d = same();
    assert_eq!(
        d.anthropic("navigate", &json!({"url": "https://example.com"})),
        vec![Action::Goto {
            url: "https://example.com".into()
        }]
    );
    let mut data = lumen_core::TaskState::new();
    data.insert("price".into(), json!(12));
    assert_eq!(
        d.anthropic("update_state", &json!({"data": {"price": 12}})),
        vec![Action::WriteState { data }]
    );
    assert_eq!(
        d.anthropic("task_complete", &json!({"result": "42"})),
        vec![Action::Terminate {
            status: TerminateStatus::Success,
            result: "42".into()
        }]
    );
    assert_eq!(
        d.anthropic(
            "task_complete",
            &json!({"result": "blocked", "status": "failure"})
        ),
        vec![Action::Terminate {
            status: TerminateStatus::Failure,
            result: "blocked".into()
        }]
    );
    assert_eq!(
        d.anthropic("fold", &json!({"summary": "logged in"})),
        vec![Action::Fold {
            summary: "logged in".into()
        }]
    );
    assert_eq!(
        d.anthropic(
            "delegate",
            &json!({"instruction": "find the price", "max_steps": 5})
        ),
        vec![Action::Delegate {
            instruction: "find the price".into(),
            max_steps: Some(5)
        }]
    );
}

/// Tabs, page text, dialogs and files, which a computer tool cannot do,
/// decode the same
/// through every adapter's own tools.
#[test]
fn own_tab_and_page_text_tools_decode_everywhere() {
    let d = same();
    let table = [
        ("get_page_text", json!({}), Action::PageText),
        ("list_tabs", json!({}), Action::ListTabs),
        ("new_tab", json!({}), Action::NewTab),
        (
            "switch_tab",
            json!({"id": "T2"}),
            Action::SwitchTab { id: "T2".into() },
        ),
        (
            "close_tab",
            json!({"id": "T2"}),
            Action::CloseTab { id: "T2".into() },
        ),
        (
            "answer_dialog",
            json!({"accept": true, "text": "Ada"}),
            Action::AnswerDialog {
                accept: true,
                text: Some("Ada".into()),
            },
        ),
        (
            "answer_dialog",
            json!({"accept": false}),
            Action::AnswerDialog {
                accept: false,
                text: None,
            },
        ),
        (
            "choose_files",
            json!({"paths": ["a.txt", "b.pdf"]}),
            Action::ChooseFiles {
                paths: vec!["a.txt".into(), "b.pdf".into()],
            },
        ),
    ];
    for (name, input, want) in table {
        assert_eq!(d.anthropic(name, &input), vec![want.clone()], "{name}");
        assert_eq!(
            d.lumen_tool(name, &input, CoordinateSpace::Normalized),
            vec![want],
            "{name}"
        );
    }
    for (name, input) in [
        ("switch_tab", json!({})),
        ("answer_dialog", json!({"accept": "yes"})),
        ("choose_files", json!({"paths": []})),
        ("choose_files", json!({"paths": [3]})),
    ] {
        let bad = d.anthropic(name, &input);
        assert!(
            matches!(bad[..], [Action::Invalid { .. }]),
            "{name}: {bad:?}"
        );
    }
}

#[test]
fn anthropic_malformed_input_is_an_invalid_action() {
    let d = same();
    let cases = [
        (json!({}), "missing the string field `action`"),
        (json!({"action": "fly"}), "unknown computer action `fly`"),
        (
            json!({"action": "left_click"}),
            "no `coordinate`, and the pointer has not been placed yet: give a coordinate",
        ),
        (
            json!({"action": "left_click", "coordinate": [1]}),
            "`coordinate` must be an [x, y] array",
        ),
        (
            json!({"action": "left_click", "coordinate": ["a", 2]}),
            "`coordinate` must hold two numbers",
        ),
        (
            json!({"action": "type", "text": 5}),
            "`text` must be a string",
        ),
        (
            json!({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "sideways", "scroll_amount": 1}),
            "unknown scroll direction `sideways` (up, down, left, right)",
        ),
        (
            json!({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "up", "scroll_amount": 0}),
            "`scroll_amount` must be a positive number of clicks",
        ),
        (
            json!({"action": "left_click", "coordinate": [1, 1], "text": "banana"}),
            "`banana` is not a modifier key",
        ),
        (
            json!({"action": "hold_key", "text": "a", "duration": 9999}),
            "`duration` must be between 0 and 600 seconds",
        ),
    ];
    for (input, error) in cases {
        assert_eq!(
            invalid_error(&d.anthropic("computer", &input)),
            error,
            "{input}"
        );
    }
    assert_eq!(
        invalid_error(&d.anthropic("teleport", &json!({}))),
        "unknown tool `teleport`"
    );
    assert_eq!(
        invalid_error(&d.anthropic("update_state", &json!({"data": [1]}))),
        "`data` must be a JSON object"
    );
    // The invalid action keeps the name and the input for the model.
    match &d.anthropic("computer", &json!({"action": "fly"}))[0] {
        Action::Invalid { name, input, .. } => {
            assert_eq!(name, "fly");
            assert_eq!(input, &json!({"action": "fly"}));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn openai_every_action() {
    let d = same();
    let table: Vec<(serde_json::Value, Vec<Action>)> = vec![
        (
            json!({"type": "click", "x": 10, "y": 20, "button": "left"}),
            vec![click(10, 20)],
        ),
        (
            json!({"type": "click", "x": 10, "y": 20, "button": "right"}),
            vec![Action::Click {
                x: 10,
                y: 20,
                button: MouseButton::Right,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"type": "click", "x": 10, "y": 20, "button": "wheel"}),
            vec![Action::Click {
                x: 10,
                y: 20,
                button: MouseButton::Middle,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"type": "click", "x": 1, "y": 1, "button": "back"}),
            vec![Action::Back],
        ),
        (
            json!({"type": "click", "x": 1, "y": 1, "button": "forward"}),
            vec![Action::Forward],
        ),
        (
            json!({"type": "double_click", "x": 3, "y": 4}),
            vec![Action::DoubleClick {
                x: 3,
                y: 4,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"type": "move", "x": 3, "y": 4}),
            vec![Action::Hover { x: 3, y: 4 }],
        ),
        (
            json!({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 5, "y": 5}, {"x": 10, "y": 20}]}),
            vec![Action::Drag {
                start_x: 1,
                start_y: 2,
                end_x: 10,
                end_y: 20,
                path: vec![Point::new(5, 5)],
            }],
        ),
        (
            json!({"type": "scroll", "x": 100, "y": 200, "scroll_x": 0, "scroll_y": 300}),
            vec![Action::Scroll {
                x: 100,
                y: 200,
                direction: ScrollDirection::Down,
                amount: 300.0,
                unit: ScrollUnit::Pixels,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            json!({"type": "scroll", "x": 100, "y": 200, "scroll_x": -50, "scroll_y": -120}),
            vec![
                Action::Scroll {
                    x: 100,
                    y: 200,
                    direction: ScrollDirection::Up,
                    amount: 120.0,
                    unit: ScrollUnit::Pixels,
                    modifiers: Modifiers::NONE,
                },
                Action::Scroll {
                    x: 100,
                    y: 200,
                    direction: ScrollDirection::Left,
                    amount: 50.0,
                    unit: ScrollUnit::Pixels,
                    modifiers: Modifiers::NONE,
                },
            ],
        ),
        (
            json!({"type": "type", "text": "hi"}),
            vec![Action::Type { text: "hi".into() }],
        ),
        (
            json!({"type": "keypress", "keys": ["CTRL", "L"]}),
            vec![Action::KeyPress {
                keys: vec!["CTRL".into(), "L".into()],
            }],
        ),
        (
            json!({"type": "wait"}),
            vec![Action::Wait { ms: OPENAI_WAIT_MS }],
        ),
        (json!({"type": "screenshot"}), vec![Action::Screenshot]),
    ];
    for (input, expected) in table {
        assert_eq!(d.openai(&input), expected, "{input}");
    }
}

#[test]
fn openai_pixels_and_distances_scale() {
    // Downscaled 2x: position and scroll distance both double.
    assert_eq!(
        half()
            .openai(&json!({"type": "scroll", "x": 640, "y": 360, "scroll_x": 0, "scroll_y": 100})),
        vec![Action::Scroll {
            x: 1280,
            y: 720,
            direction: ScrollDirection::Down,
            amount: 200.0,
            unit: ScrollUnit::Pixels,
            modifiers: Modifiers::NONE
        }]
    );
    assert_eq!(
        odd().openai(&json!({"type": "click", "x": 999, "y": 564, "button": "left"})),
        vec![click(1287, 727)]
    );
}

#[test]
fn openai_malformed_actions() {
    let d = same();
    assert_eq!(
        invalid_error(&d.openai(&json!({"type": "fly"}))),
        "unknown computer action `fly`"
    );
    assert_eq!(
        invalid_error(&d.openai(&json!({}))),
        "missing the string field `type`"
    );
    assert_eq!(
        invalid_error(&d.openai(&json!({"type": "click", "x": 1}))),
        "missing `y`"
    );
    assert_eq!(
        invalid_error(
            &d.openai(&json!({"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": 0}))
        ),
        "`scroll_x` and `scroll_y` are both 0"
    );
    assert_eq!(
        invalid_error(&d.openai(&json!({"type": "drag", "path": [{"x": 1, "y": 1}]}))),
        "`path` needs at least two points"
    );
    assert_eq!(
        invalid_error(&d.openai(&json!({"type": "keypress", "keys": []}))),
        "`keys` is empty"
    );
}

#[test]
fn gemini_every_function() {
    let d = same();
    let table: Vec<(&str, serde_json::Value, Vec<Action>)> = vec![
        ("open_web_browser", json!({}), vec![Action::Screenshot]),
        ("wait_5_seconds", json!({}), vec![Action::Wait { ms: 5000 }]),
        ("go_back", json!({}), vec![Action::Back]),
        ("go_forward", json!({}), vec![Action::Forward]),
        (
            "search",
            json!({}),
            vec![Action::Goto {
                url: SEARCH_HOME.into(),
            }],
        ),
        (
            "navigate",
            json!({"url": "https://a.test/"}),
            vec![Action::Goto {
                url: "https://a.test/".into(),
            }],
        ),
        (
            "click_at",
            json!({"x": 500, "y": 500}),
            vec![click(640, 360)],
        ),
        (
            "hover_at",
            json!({"x": 0, "y": 1000}),
            vec![Action::Hover { x: 0, y: 719 }],
        ),
        (
            "type_text_at",
            json!({"x": 500, "y": 250, "text": "lamp"}),
            vec![
                click(640, 180),
                Action::KeyPress {
                    keys: vec!["Control".into(), "a".into()],
                },
                Action::KeyPress {
                    keys: vec!["Delete".into()],
                },
                Action::Type {
                    text: "lamp".into(),
                },
                Action::KeyPress {
                    keys: vec!["Enter".into()],
                },
            ],
        ),
        (
            "type_text_at",
            json!({"x": 500, "y": 250, "text": "lamp", "press_enter": false, "clear_before_typing": false}),
            vec![
                click(640, 180),
                Action::Type {
                    text: "lamp".into(),
                },
            ],
        ),
        (
            "key_combination",
            json!({"keys": "Control+Shift+T"}),
            vec![Action::KeyPress {
                keys: vec!["Control".into(), "Shift".into(), "T".into()],
            }],
        ),
        (
            "scroll_document",
            json!({"direction": "down"}),
            vec![Action::Scroll {
                x: 640,
                y: 360,
                direction: ScrollDirection::Down,
                amount: 1.0,
                unit: ScrollUnit::Pages,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            "scroll_at",
            json!({"x": 500, "y": 500, "direction": "up", "magnitude": 500}),
            vec![Action::Scroll {
                x: 640,
                y: 360,
                direction: ScrollDirection::Up,
                amount: 360.0,
                unit: ScrollUnit::Pixels,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            "scroll_at",
            json!({"x": 500, "y": 500, "direction": "right"}),
            vec![Action::Scroll {
                x: 640,
                y: 360,
                direction: ScrollDirection::Right,
                amount: 1024.0,
                unit: ScrollUnit::Pixels,
                modifiers: Modifiers::NONE,
            }],
        ),
        (
            "drag_and_drop",
            json!({"x": 100, "y": 100, "destination_x": 900, "destination_y": 900}),
            vec![Action::Drag {
                start_x: 128,
                start_y: 72,
                end_x: 1152,
                end_y: 648,
                path: vec![],
            }],
        ),
    ];
    for (name, args, expected) in table {
        assert_eq!(d.gemini(name, &args), expected, "{name} {args}");
    }
}

#[test]
fn gemini_grid_uses_the_viewport_not_the_image() {
    // The grid covers the screenshot, which covers the whole viewport: a
    // downscaled image changes nothing.
    assert_eq!(
        half().gemini("click_at", &json!({"x": 500, "y": 500})),
        vec![click(1280, 720)]
    );
    // Odd: 333/1000*1288 = 428.9 -> 429; 777/1000*728 = 565.7 -> 566.
    assert_eq!(
        odd().gemini("click_at", &json!({"x": 333, "y": 777})),
        vec![click(429, 566)]
    );
    assert_eq!(
        invalid_error(&same().gemini("click_at", &json!({"x": "left", "y": 3}))),
        "`x` must be a number"
    );
    assert_eq!(
        invalid_error(&same().gemini("teleport", &json!({}))),
        "unknown tool `teleport`"
    );
}

#[test]
fn lumen_tools_in_both_coordinate_spaces() {
    let d = half();
    assert_eq!(
        d.lumen_tool(
            "click",
            &json!({"x": 500, "y": 500}),
            CoordinateSpace::Normalized
        ),
        vec![click(1280, 720)]
    );
    assert_eq!(
        d.lumen_tool(
            "click",
            &json!({"x": 500, "y": 300}),
            CoordinateSpace::Pixels
        ),
        vec![click(1000, 600)]
    );
    assert_eq!(
        d.lumen_tool(
            "scroll",
            &json!({"x": 0, "y": 0, "direction": "down"}),
            CoordinateSpace::Pixels
        ),
        vec![Action::Scroll {
            x: 0,
            y: 0,
            direction: ScrollDirection::Down,
            amount: 3.0,
            unit: ScrollUnit::Clicks,
            modifiers: Modifiers::NONE
        }]
    );
}

#[test]
fn call_ids_share_the_provider_id() {
    assert_eq!(
        call_ids("toolu_1", 3),
        vec!["toolu_1", "toolu_1#2", "toolu_1#3"]
    );
    assert_eq!(base_call_id("toolu_1#3"), "toolu_1");
    assert_eq!(base_call_id("toolu_1"), "toolu_1");
    assert_eq!(base_call_id("odd#id"), "odd#id");
}

#[test]
fn text_answer_terminates() {
    assert_eq!(
        ActionDecoder::text_answer("  The price is 12.  "),
        Action::Terminate {
            status: TerminateStatus::Success,
            result: "The price is 12.".into()
        }
    );
}

/// Since computer_20250124 clicks and scrolls may omit `coordinate`: they
/// act where the pointer is, as the step began or as earlier actions of the
/// same turn left it.
#[test]
fn anthropic_clicks_without_a_coordinate_act_at_the_cursor() {
    let d = same();
    // The turn moves the pointer, then clicks and scrolls where it is.
    let moved = d.anthropic(
        "computer",
        &json!({"action": "mouse_move", "coordinate": [100, 200]}),
    );
    assert_eq!(moved, vec![Action::Hover { x: 100, y: 200 }]);
    assert_eq!(d.cursor(), Some(Point::new(100, 200)));
    let click = d.anthropic(
        "computer",
        &json!({"action": "right_click", "text": "shift"}),
    );
    assert_eq!(
        click,
        vec![Action::Click {
            x: 100,
            y: 200,
            button: MouseButton::Right,
            modifiers: Modifiers {
                shift: true,
                ..Modifiers::NONE
            },
        }]
    );
    let scroll = d.anthropic(
        "computer",
        &json!({"action": "scroll", "scroll_direction": "down", "scroll_amount": 3}),
    );
    assert!(
        matches!(scroll[0], Action::Scroll { x: 100, y: 200, .. }),
        "{scroll:?}"
    );
    // With no pointer yet, a scroll goes mid-page; a click is refused.
    let fresh = same();
    let scroll = fresh.anthropic(
        "computer",
        &json!({"action": "scroll", "scroll_direction": "down", "scroll_amount": 3}),
    );
    assert!(
        matches!(scroll[0], Action::Scroll { x: 640, y: 360, .. }),
        "{scroll:?}"
    );
    // (the scroll placed the pointer; a decoder with none refuses a click)
    assert!(matches!(
        same().anthropic("computer", &json!({"action": "double_click"}))[0],
        Action::Invalid { .. }
    ));
}

/// Every predefined function of the Gemini 3.5 computer-use set maps to a
/// real action in viewport pixels (grid coordinates, pixel magnitudes,
/// seconds), and both argument shapes of `scroll` and `drag_and_drop`
/// are read.
#[test]
fn gemini_3_5_actions_decode_with_their_units() {
    let d = same();
    let one = |name: &str, args: serde_json::Value| d.gemini(name, &args);
    let at = |x, y| (x, y);
    let (x, y) = at(640, 360);
    assert_eq!(
        one("click", json!({"x": 500, "y": 500, "intent": "open"})),
        vec![Action::Click {
            x,
            y,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE
        }]
    );
    assert_eq!(
        one("right_click", json!({"x": 500, "y": 500})),
        vec![Action::Click {
            x,
            y,
            button: MouseButton::Right,
            modifiers: Modifiers::NONE
        }]
    );
    assert_eq!(
        one("middle_click", json!({"x": 500, "y": 500})),
        vec![Action::Click {
            x,
            y,
            button: MouseButton::Middle,
            modifiers: Modifiers::NONE
        }]
    );
    assert_eq!(
        one("double_click", json!({"x": 500, "y": 500})),
        vec![Action::DoubleClick {
            x,
            y,
            modifiers: Modifiers::NONE
        }]
    );
    assert_eq!(
        one("triple_click", json!({"x": 500, "y": 500})),
        vec![Action::TripleClick {
            x,
            y,
            modifiers: Modifiers::NONE
        }]
    );
    assert_eq!(
        one("move", json!({"x": 500, "y": 500})),
        vec![Action::Hover { x, y }]
    );
    assert_eq!(
        one("mouse_down", json!({"x": 500, "y": 500})),
        vec![Action::MouseDown {
            x: Some(x),
            y: Some(y),
            button: MouseButton::Left
        }]
    );
    assert_eq!(
        one("mouse_up", json!({})),
        vec![Action::MouseUp {
            x: None,
            y: None,
            button: MouseButton::Left
        }]
    );
    assert_eq!(
        one("type", json!({"text": "hi", "press_enter": true})),
        vec![
            Action::Type { text: "hi".into() },
            Action::KeyPress {
                keys: vec!["Enter".into()]
            }
        ]
    );
    assert_eq!(
        one("type", json!({"text": "hi"})),
        vec![Action::Type { text: "hi".into() }]
    );
    assert_eq!(
        one("press_key", json!({"key": "Enter"})),
        vec![Action::KeyPress {
            keys: vec!["Enter".into()]
        }]
    );
    assert_eq!(
        one("hotkey", json!({"keys": ["Control", "a"]})),
        vec![Action::KeyPress {
            keys: vec!["Control".into(), "a".into()]
        }]
    );
    assert_eq!(
        one("wait", json!({"seconds": 3})),
        vec![Action::Wait { ms: 3000 }]
    );
    assert_eq!(one("wait", json!({})), vec![Action::Wait { ms: 1000 }]);
    assert_eq!(one("take_screenshot", json!({})), vec![Action::Screenshot]);
    // A pixel magnitude is pixels; a grid magnitude is a share of the axis.
    let pixels = one(
        "scroll",
        json!({"x": 500, "y": 500, "direction": "down", "magnitude_in_pixels": 300}),
    );
    assert!(
        matches!(pixels[0], Action::Scroll { amount, unit: ScrollUnit::Pixels, .. } if amount == 300.0),
        "{pixels:?}"
    );
    let grid = one(
        "scroll",
        json!({"x": 500, "y": 500, "direction": "down", "magnitude": 500}),
    );
    assert!(
        matches!(grid[0], Action::Scroll { amount, .. } if amount == 360.0),
        "{grid:?}"
    );
    let drag = one(
        "drag_and_drop",
        json!({"start_x": 0, "start_y": 0, "end_x": 500, "end_y": 500}),
    );
    assert!(
        matches!(
            drag[0],
            Action::Drag {
                start_x: 0,
                start_y: 0,
                end_x: 640,
                end_y: 360,
                ..
            }
        ),
        "{drag:?}"
    );
    let legacy = one(
        "drag_and_drop",
        json!({"x": 0, "y": 0, "destination_x": 500, "destination_y": 500}),
    );
    assert_eq!(drag, legacy);
    assert_eq!(
        one("key_down", json!({"key": "Shift"})),
        vec![Action::KeyDown {
            key: "Shift".into()
        }]
    );
    assert_eq!(
        one("key_up", json!({"key": "Shift"})),
        vec![Action::KeyUp {
            key: "Shift".into()
        }]
    );
}

#[test]
fn openai_drag_paths_take_pairs_and_objects() {
    let d = same();
    let pairs = d.openai(&json!({"type": "drag", "path": [[10, 20], [30, 40], [50, 60]]}));
    let objects = d.openai(&json!({"type": "drag", "path": [{"x": 10, "y": 20}, {"x": 30, "y": 40}, {"x": 50, "y": 60}]}));
    assert_eq!(pairs, objects);
    assert!(
        matches!(
            pairs[0],
            Action::Drag {
                start_x: 10,
                end_y: 60,
                ..
            }
        ),
        "{pairs:?}"
    );
}

/// The computer toolset calls each member as its own tool, with the
/// computer tool's input minus `action`; `key` may repeat its chords.
#[test]
fn anthropic_toolset_members_decode_like_computer_actions() {
    let d = same();
    assert_eq!(
        d.anthropic("left_click", &json!({"coordinate": [10, 20]})),
        vec![click(10, 20)]
    );
    assert_eq!(
        d.anthropic(
            "scroll",
            &json!({"scroll_direction": "down", "scroll_amount": 2, "coordinate": [5, 5]})
        ),
        d.anthropic(
            "computer",
            &json!({"action": "scroll", "scroll_direction": "down", "scroll_amount": 2, "coordinate": [5, 5]})
        )
    );
    assert_eq!(
        d.anthropic("key", &json!({"text": "Down", "repeat": 3})),
        vec![
            Action::KeyPress {
                keys: vec!["Down".into()]
            };
            3
        ]
    );
    assert!(matches!(
        d.anthropic("key", &json!({"text": "Down", "repeat": 1000}))[0],
        Action::Invalid { .. }
    ));
    assert_eq!(
        d.anthropic("screenshot", &json!({})),
        vec![Action::Screenshot]
    );
    // Our own tools keep their names.
    assert!(matches!(
        d.anthropic("task_complete", &json!({"result": "ok"}))[0],
        Action::Terminate { .. }
    ));
}

/// The browser toolset's members: targets are a coordinate (screenshot
/// pixels) or a ref; reading members become reading actions.
#[test]
fn anthropic_browser_members_decode_to_actions() {
    let d = half();
    let b = |name: &str, input: serde_json::Value| d.anthropic_browser(name, &input);
    assert_eq!(
        b(
            "left_click",
            json!({"target": {"type": "coordinate", "x": 100, "y": 50}})
        ),
        vec![click(200, 100)]
    );
    assert_eq!(
        b(
            "double_click",
            json!({"target": {"type": "ref", "ref": "@e7"}, "modifiers": "ctrl"})
        ),
        vec![Action::ClickRef {
            reference: "@e7".into(),
            button: MouseButton::Left,
            click_count: 2,
            modifiers: Modifiers {
                ctrl: true,
                ..Modifiers::NONE
            },
        }]
    );
    assert_eq!(
        b(
            "form_input",
            json!({"target": {"type": "ref", "ref": "@e3"}, "value": true})
        ),
        vec![Action::FormInput {
            reference: "@e3".into(),
            value: json!(true)
        }]
    );
    assert_eq!(
        b("read_page", json!({"filter": "interactive", "depth": 4})),
        vec![Action::ReadPage {
            interactive_only: true,
            root: None,
            depth: Some(4)
        }]
    );
    assert_eq!(
        b("find", json!({"query": "submit"})),
        vec![Action::FindElements {
            query: "submit".into()
        }]
    );
    assert_eq!(b("get_page_text", json!({})), vec![Action::PageText]);
    // The opt-in members decode whatever the session allows: the policy
    // and the tab refuse what is off, naming the setting.
    assert_eq!(
        b(
            "file_upload",
            json!({"target": {"type": "ref", "ref": "@e9"}, "paths": ["cv.pdf"], "tab_id": "T1"})
        ),
        vec![Action::FileUpload {
            reference: "@e9".into(),
            paths: vec!["cv.pdf".into()],
            document_ids: vec![],
        }]
    );
    assert_eq!(
        b(
            "file_upload",
            json!({"target": {"type": "ref", "ref": "@e9"}, "document_ids": ["doc_1.txt"]})
        ),
        vec![Action::FileUpload {
            reference: "@e9".into(),
            paths: vec![],
            document_ids: vec!["doc_1.txt".into()],
        }]
    );
    assert_eq!(
        b("javascript_exec", json!({"text": "document.title"})),
        vec![Action::JavascriptExec {
            text: "document.title".into()
        }]
    );
    assert_eq!(b("read_console", json!({})), vec![Action::ReadConsole]);
    assert_eq!(
        b("read_network", json!({"tab_id": "T1"})),
        vec![Action::ReadNetwork]
    );
    assert_eq!(b("navigate", json!({"url": "back"})), vec![Action::Back]);
    assert_eq!(
        b("navigate", json!({"url": "reload"})),
        vec![Action::Reload]
    );
    assert_eq!(
        b("navigate", json!({"url": "example.com/a"})),
        vec![Action::Goto {
            url: "https://example.com/a".into()
        }]
    );
    assert_eq!(
        b("switch_tab", json!({"tab_id": "T2"})),
        vec![Action::SwitchTab { id: "T2".into() }]
    );
    assert_eq!(b("new_tab", json!({})), vec![Action::NewTab]);
    assert_eq!(
        b("hover", json!({"target": {"type": "ref", "ref": "@e1"}})),
        vec![Action::HoverRef {
            reference: "@e1".into()
        }]
    );
    assert!(matches!(
        b("scroll", json!({"target": {"type": "coordinate", "x": 10, "y": 10}, "scroll_direction": "down"}))[0],
        Action::Scroll { amount, unit: ScrollUnit::Clicks, .. } if amount == 3.0
    ));
    // Mistakes are told to the model, never guessed at.
    for (name, input) in [
        (
            "form_input",
            json!({"target": {"type": "coordinate", "x": 1, "y": 1}, "value": "x"}),
        ),
        ("left_click", json!({"target": {"type": "ref"}})),
        ("javascript_exec", json!({})),
        ("javascript_exec", json!({"text": "  "})),
        // A file input is named by a ref, and something must be chosen.
        (
            "file_upload",
            json!({"target": {"type": "coordinate", "x": 1, "y": 1}, "paths": ["a.txt"]}),
        ),
        (
            "file_upload",
            json!({"target": {"type": "ref", "ref": "@e2"}}),
        ),
        (
            "file_upload",
            json!({"target": {"type": "ref", "ref": "@e2"}, "paths": [], "document_ids": []}),
        ),
        (
            "file_upload",
            json!({"target": {"type": "ref", "ref": "@e2"}, "paths": [7]}),
        ),
        (
            "file_upload",
            json!({"target": {"type": "ref", "ref": "@e2"}, "paths": "a.txt"}),
        ),
        (
            "scroll",
            json!({"target": {"type": "coordinate", "x": 1, "y": 1}, "scroll_direction": "down", "scroll_amount": 50}),
        ),
        ("teleport", json!({})),
    ] {
        assert!(
            matches!(b(name, input.clone())[0], Action::Invalid { .. }),
            "{name} {input}"
        );
    }
}

/// Keys OpenAI holds during a move or a drag are pressed before it and
/// released after, in reverse.
#[test]
fn openai_keys_are_held_around_moves_and_drags() {
    let d = same();
    assert_eq!(
        d.openai(&json!({"type": "move", "x": 5, "y": 6, "keys": ["shift", "ctrl"]})),
        vec![
            Action::KeyDown {
                key: "shift".into()
            },
            Action::KeyDown { key: "ctrl".into() },
            Action::Hover { x: 5, y: 6 },
            Action::KeyUp { key: "ctrl".into() },
            Action::KeyUp {
                key: "shift".into()
            },
        ]
    );
    let drag = d.openai(&json!({"type": "drag", "path": [[1, 1], [9, 9]], "keys": ["alt"]}));
    assert_eq!(drag.len(), 3, "{drag:?}");
    assert!(matches!(drag[1], Action::Drag { .. }));
}

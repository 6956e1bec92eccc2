//! Request building: the loop's wire history as a anthropic request.

use super::*;

/// Builds `messages` from wire history (see the module docs).
pub(super) fn build_messages(ctx: &StepContext<'_>, tool: ComputerTool) -> Vec<Value> {
    let mut b = MessageBuilder {
        toolset: tool.is_toolset(),
        browser: tool == ComputerTool::BrowserToolset20260801,
        ..MessageBuilder::default()
    };
    // The tabs the model has been told of, to report the ones opened since.
    let mut known_tabs: Vec<String> = Vec::new();
    let scale = ctx.screenshot.scale;
    let mut saw_screenshot = false;
    for record in ctx.wire {
        match record {
            WireRecord::Summary {
                content,
                compacted_at,
            } => {
                b.flush_results();
                b.user_block(
                    json!({"type": "text", "text": prompt::summary_text(content, *compacted_at)}),
                );
            }
            WireRecord::Screenshot(shot) => {
                b.flush_results();
                saw_screenshot = true;
                if b.browser && !shot.tabs.is_empty() {
                    b.browser_state(&shot.tabs, &known_tabs);
                    known_tabs = shot.tabs.iter().map(|t| t.id.clone()).collect();
                }
                match &shot.image {
                    Some(img) => b.screenshot(json!({
                        "type": "image",
                        "source": {"type": "base64", "media_type": img.format.mime(), "data": img.to_base64()},
                    })),
                    None => b.marker(shot.step),
                }
            }
            WireRecord::Assistant(turn) => {
                b.flush_results();
                b.assistant(turn, scale);
            }
            WireRecord::ToolResult(r) => b.results.push(r.clone()),
            _ => {}
        }
    }
    b.flush_results();
    if !saw_screenshot {
        let img = &ctx.screenshot.image;
        b.screenshot(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": img.format.mime(), "data": img.to_base64()},
        }));
    }
    b.finish(ctx.system_prompt)
}

#[derive(Default)]
pub(super) struct MessageBuilder {
    /// Whether computer actions are toolset members (named by action).
    toolset: bool,
    /// Whether the browser toolset is in use (tool results carry a
    /// `browser_state` block; other adapters' turns are told as text).
    browser: bool,
    /// Downloads the results just emitted started, by tool-use id, for the
    /// next `browser_state` block.
    downloads: Vec<(String, lumen_core::DownloadInfo)>,
    messages: Vec<Value>,
    /// tool_use ids of the last assistant turn, each with the ids of the
    /// action calls it decoded into.
    pending: Vec<(String, Vec<String>)>,
    results: Vec<ToolResult>,
}

impl MessageBuilder {
    fn push(&mut self, role: &str, block: Value) {
        match self.messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.push(block);
                }
            }
            _ => self
                .messages
                .push(json!({"role": role, "content": [block]})),
        }
    }

    fn user_block(&mut self, block: Value) {
        self.push("user", block);
    }

    /// The screenshot goes inside the tool result it follows (the computer
    /// tool's answer), else it stands alone in the user turn.
    fn screenshot(&mut self, block: Value) {
        if let Some(last) = self.messages.last_mut()
            && last["role"] == "user"
            && let Some(content) = last["content"].as_array_mut()
            && let Some(result) = content.last_mut()
            && result["type"] == "tool_result"
            && let Some(inner) = result["content"].as_array_mut()
        {
            inner.push(block);
            return;
        }
        self.user_block(block);
    }

    /// A compressed screenshot. Inside a tool result that already says
    /// what happened, its marker would add tokens and nothing else; alone
    /// in a user turn it keeps the turn from being empty.
    fn marker(&mut self, step: u32) {
        let in_result = self.messages.last().is_some_and(|last| {
            last["role"] == "user"
                && last["content"]
                    .as_array()
                    .and_then(|c| c.last())
                    .is_some_and(|r| {
                        r["type"] == "tool_result"
                            && r["content"].as_array().is_some_and(|c| !c.is_empty())
                    })
        });
        if !in_result {
            self.user_block(json!({"type": "text", "text": prompt::screenshot_marker(step)}));
        }
    }

    fn assistant(&mut self, turn: &AssistantTurn, scale: ImageScale) {
        if self.messages.is_empty() {
            self.user_block(json!({"type": "text", "text": "(the history starts here)"}));
        }
        let native = turn
            .provider
            .as_ref()
            .filter(|p| p.provider == PROVIDER)
            .and_then(|p| p.data.get("content"))
            .and_then(Value::as_array);
        let groups = prompt::call_groups(turn);
        let mut blocks: Vec<Value> = Vec::new();
        self.pending.clear();
        match native {
            Some(content) => {
                for block in content {
                    if block["type"] == "tool_use"
                        && let Some(id) = block["id"].as_str()
                    {
                        let ids = groups
                            .iter()
                            .find(|(g, _)| g == id)
                            .map_or_else(|| vec![id.to_owned()], |(_, ids)| ids.clone());
                        self.pending.push((id.to_owned(), ids));
                    }
                    // The API refuses empty text blocks; a stream can end
                    // one with nothing in it.
                    if !is_blank_text(block) {
                        blocks.push(block.clone());
                    }
                }
            }
            None => {
                for t in &turn.thinking {
                    // Only signed thinking can be replayed; unsigned text from
                    // another provider would be rejected.
                    match (&t.signature, t.redacted) {
                        (Some(sig), true) => {
                            blocks.push(json!({"type": "redacted_thinking", "data": sig}))
                        }
                        (Some(sig), false) => blocks.push(
                            json!({"type": "thinking", "thinking": t.text, "signature": sig}),
                        ),
                        (None, _) => {}
                    }
                }
                if let Some(text) = turn.text.as_ref().filter(|t| !t.trim().is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                // The browser toolset's members take other inputs than our
                // actions: another adapter's turn is told as text, and its
                // results follow as text.
                if self.browser {
                    let told: Vec<String> = turn
                        .calls
                        .iter()
                        .filter(|c| c.id != stream::TEXT_ANSWER_ID)
                        .map(|c| {
                            let action = serde_json::to_string(&c.action).unwrap_or_default();
                            format!("[action {}] {action}", c.id)
                        })
                        .collect();
                    if !told.is_empty() {
                        blocks.push(json!({"type": "text", "text": told.join("\n")}));
                    }
                }
                // Without native data each action is its own tool call (ids
                // made safe for Anthropic's id pattern), answered on its own.
                for call in turn.calls.iter().filter(|_| !self.browser) {
                    if call.id == stream::TEXT_ANSWER_ID {
                        continue;
                    }
                    let id = safe_id(&call.id);
                    let (name, input) = encode_action(&call.action, scale, self.toolset);
                    blocks
                        .push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                    self.pending.push((id, vec![call.id.clone()]));
                }
            }
        }
        if blocks.is_empty() {
            blocks.push(json!({"type": "text", "text": "(no answer)"}));
        }
        for block in blocks {
            self.push("assistant", block);
        }
    }

    /// Adds a `browser_state` block (the open tabs, exactly one active, and
    /// the tabs opened since the model last heard) to the last successful
    /// tool result of the newest user turn: at most one per result, never
    /// on an error.
    fn browser_state(&mut self, tabs: &[lumen_core::TabInfo], known: &[String]) {
        let Some(last) = self.messages.last_mut() else {
            return;
        };
        if last["role"] != "user" {
            return;
        }
        let Some(result) = last["content"].as_array_mut().and_then(|c| {
            c.iter_mut()
                .rev()
                .find(|b| b["type"] == "tool_result" && b["is_error"] != true)
        }) else {
            return;
        };
        let active = tabs.iter().position(|t| t.followed).unwrap_or(0);
        let entries: Vec<Value> = tabs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({
                    "tab_id": cap(&t.id),
                    "title": cap(&t.title),
                    "url": cap(&t.url),
                    "active": i == active,
                })
            })
            .collect();
        let mut block = json!({"type": "browser_state", "tabs": entries});
        let mut changes: Vec<Value> = tabs
            .iter()
            .filter(|t| !known.is_empty() && !known.contains(&t.id))
            .map(|t| json!({"type": "tab_opened", "tab_id": cap(&t.id)}))
            .collect();
        // A download is known by the call that started it, and told once
        // per result: as it stands when the call ended (one that finished
        // or failed during its call needs no `download_started`).
        for (call, d) in std::mem::take(&mut self.downloads) {
            let id = format!("download_{}", safe_id(&call));
            let url = cap(&d.url);
            changes.push(if d.failed {
                let mut failed = json!({"type": "download_failed", "download_id": id, "url": url});
                if let Some(error) = &d.error {
                    failed["error"] = json!(cap(error));
                }
                failed
            } else if d.completed {
                let mut done = json!({"type": "download_completed", "download_id": id, "url": url});
                if let Some(path) = &d.path {
                    done["path"] = json!(cap(path));
                }
                done
            } else {
                json!({"type": "download_started", "download_id": id, "url": url})
            });
        }
        // An empty list of changes is never sent.
        if !changes.is_empty() {
            block["state_changes"] = json!(changes);
        }
        if let Some(content) = result["content"].as_array_mut() {
            content.push(block);
        }
    }

    /// Emits the tool results of the last assistant turn: one per tool_use
    /// id, in order; results for ids the turn did not send (a text answer's
    /// terminate) become plain text.
    fn flush_results(&mut self) {
        if self.pending.is_empty() && self.results.is_empty() {
            return;
        }
        let results = std::mem::take(&mut self.results);
        let refs: Vec<&ToolResult> = results.iter().collect();
        let pending = std::mem::take(&mut self.pending);
        self.downloads = results
            .iter()
            .filter_map(|r| r.download.clone().map(|d| (r.call_id.clone(), d)))
            .collect();
        for (id, ids) in &pending {
            let answer = prompt::answer_for(ids, &refs);
            let mut content = vec![json!({"type": "text", "text": answer.text})];
            // A zoom's region, inside the result it answers.
            for img in results
                .iter()
                .filter(|r| ids.contains(&r.call_id))
                .filter_map(|r| r.image.as_ref())
            {
                content.push(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": img.format.mime(), "data": img.to_base64()},
                }));
            }
            let mut block = json!({
                "type": "tool_result",
                "tool_use_id": id,
                "content": content,
            });
            if !answer.ok {
                block["is_error"] = json!(true);
            }
            self.user_block(block);
        }
        for r in &results {
            if pending.iter().any(|(_, ids)| ids.contains(&r.call_id)) {
                continue;
            }
            let status = match (&r.error, r.ok) {
                (_, true) => "ok".to_owned(),
                (Some(e), false) => format!("error: {e}"),
                (None, false) => "error".to_owned(),
            };
            let mut text = format!("Result of `{}`: {status}", r.action);
            for h in &r.hints {
                text.push_str(&format!("\nhint: {h}"));
            }
            self.user_block(json!({"type": "text", "text": text}));
        }
    }

    fn finish(mut self, system_prompt: &str) -> Vec<Value> {
        // Breakpoints on the last block of the two newest user turns.
        let user_turns: Vec<usize> = self
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m["role"] == "user")
            .map(|(i, _)| i)
            .collect();
        for &i in user_turns.iter().rev().take(2) {
            if let Some(block) = self.messages[i]["content"]
                .as_array_mut()
                .and_then(|c| c.last_mut())
            {
                block["cache_control"] = ephemeral();
            }
        }
        if !system_prompt.trim().is_empty() {
            self.user_block(json!({"type": "text", "text": system_prompt}));
        }
        self.messages
    }
}

/// Re-encodes one of our actions as an Anthropic tool call, for history that
/// has no native replay data (written by another adapter). Coordinates go
/// back to screenshot pixels with the current scale. With the toolset, a
/// computer action is called by its member's name, without `action`.
pub(super) fn encode_action(action: &Action, scale: ImageScale, toolset: bool) -> (String, Value) {
    let (name, mut input) = encode_computer(action, scale);
    if toolset
        && name == "computer"
        && let Some(member) = input
            .as_object_mut()
            .and_then(|m| m.remove("action"))
            .and_then(|a| a.as_str().map(str::to_owned))
    {
        return (member, input);
    }
    (name.to_owned(), input)
}

/// [`encode_action`] for the single `computer` tool.
pub(super) fn encode_computer(action: &Action, scale: ImageScale) -> (&'static str, Value) {
    let px = |x: i32, y: i32| {
        let (ix, iy) = scale.css_to_image(lumen_core::Point::new(x, y));
        json!([ix.round() as i64, iy.round() as i64])
    };
    let computer = |v: Value| ("computer", v);
    match action {
        Action::Click { x, y, button, .. } => computer(json!({
            "action": match button {
                MouseButton::Left => "left_click",
                MouseButton::Right => "right_click",
                MouseButton::Middle => "middle_click",
            },
            "coordinate": px(*x, *y),
        })),
        Action::DoubleClick { x, y, .. } => {
            computer(json!({"action": "double_click", "coordinate": px(*x, *y)}))
        }
        Action::TripleClick { x, y, .. } => {
            computer(json!({"action": "triple_click", "coordinate": px(*x, *y)}))
        }
        Action::Hover { x, y } => {
            computer(json!({"action": "mouse_move", "coordinate": px(*x, *y)}))
        }
        Action::Drag {
            start_x,
            start_y,
            end_x,
            end_y,
            ..
        } => computer(json!({
            "action": "left_click_drag",
            "start_coordinate": px(*start_x, *start_y),
            "coordinate": px(*end_x, *end_y),
        })),
        Action::MouseDown { .. } => computer(json!({"action": "left_mouse_down"})),
        Action::MouseUp { .. } => computer(json!({"action": "left_mouse_up"})),
        Action::Scroll {
            x,
            y,
            direction,
            amount,
            unit,
            ..
        } => {
            let clicks = match unit {
                ScrollUnit::Clicks => *amount,
                ScrollUnit::Pixels => amount / lumen_core::action::PIXELS_PER_WHEEL_CLICK,
                ScrollUnit::Pages => amount * 5.0,
            };
            computer(json!({
                "action": "scroll",
                "coordinate": px(*x, *y),
                "scroll_direction": match direction {
                    ScrollDirection::Up => "up",
                    ScrollDirection::Down => "down",
                    ScrollDirection::Left => "left",
                    ScrollDirection::Right => "right",
                },
                "scroll_amount": clicks.round().max(1.0) as i64,
            }))
        }
        Action::Type { text } => computer(json!({"action": "type", "text": text})),
        Action::KeyPress { keys } => computer(json!({"action": "key", "text": keys.join("+")})),
        Action::HoldKey { keys, duration_ms } => computer(json!({
            "action": "hold_key",
            "text": keys.join("+"),
            "duration": *duration_ms as f64 / 1000.0,
        })),
        Action::Wait { ms } => computer(json!({"action": "wait", "duration": *ms as f64 / 1000.0})),
        Action::Screenshot => computer(json!({"action": "screenshot"})),
        Action::CursorPosition => computer(json!({"action": "cursor_position"})),
        Action::Zoom { region } => {
            let (x0, y0) = scale.css_to_image(lumen_core::Point::new(region.x0, region.y0));
            let (x1, y1) = scale.css_to_image(lumen_core::Point::new(region.x1, region.y1));
            computer(
                json!({"action": "zoom", "region": [x0.round() as i64, y0.round() as i64, x1.round() as i64, y1.round() as i64]}),
            )
        }
        Action::Goto { url } => ("navigate", json!({"url": url})),
        Action::Back => computer(json!({"action": "key", "text": "alt+Left"})),
        Action::Forward => computer(json!({"action": "key", "text": "alt+Right"})),
        Action::WriteState { data } => ("update_state", json!({"data": data})),
        Action::Terminate { status, result } => (
            "task_complete",
            json!({"result": result, "status": match status {
                TerminateStatus::Success => "success",
                TerminateStatus::Failure => "failure",
            }}),
        ),
        Action::Delegate {
            instruction,
            max_steps,
        } => {
            let mut v = json!({"instruction": instruction});
            if let Some(n) = max_steps {
                v["max_steps"] = json!(n);
            }
            ("delegate", v)
        }
        Action::Fold { summary } => ("fold", json!({"summary": summary})),
        Action::RequestHuman { reason } => ("request_human", json!({"reason": reason})),
        // An undecodable call is replayed as the computer call it claimed to
        // be; its tool result carries the error.
        Action::Invalid { input, .. } => (
            "computer",
            if input.is_object() {
                input.clone()
            } else {
                json!({})
            },
        ),
        _ => computer(json!({"action": "screenshot"})),
    }
}

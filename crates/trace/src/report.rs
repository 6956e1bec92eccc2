//! `report.html`: one self-contained page (inline CSS and JS, screenshots
//! embedded as base64) that opens offline. A timeline of steps, each with
//! its screenshot and the step's actions drawn on it in SVG (click points,
//! drag paths, scroll arrows, typed text), blocked and failed actions and
//! verifier feedback highlighted, tokens and time per step.

use std::fmt::Write as _;

use base64::Engine as _;
use lumen_core::{Action, RunStatus, ScrollDirection};
use lumen_safety::Secrets;

use crate::folder::Pricing;
use crate::timeline::{ActionView, Outcome, StepView, Timeline, describe};

const CSS: &str = r#"
:root { --ok:#15803d; --bad:#b91c1c; --warn:#b45309; --ink:#111827; --dim:#6b7280; --line:#e5e7eb; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif; color:var(--ink); background:#f9fafb; }
header { padding:20px 28px; background:#fff; border-bottom:1px solid var(--line); }
h1 { font-size:18px; margin:0 0 6px; }
.meta { color:var(--dim); }
.badge { display:inline-block; padding:2px 10px; border-radius:999px; color:#fff; font-weight:600; }
.badge.success { background:var(--ok); } .badge.failure { background:var(--bad); }
.badge.maxSteps, .badge.cancelled, .badge.budgetExceeded, .badge.unknown { background:var(--warn); }
main { padding:20px 28px; display:flex; flex-direction:column; gap:18px; }
.step { display:grid; grid-template-columns:minmax(320px,58%) 1fr; gap:18px; background:#fff; border:1px solid var(--line); border-radius:10px; padding:14px; }
.step.problem { border-color:var(--bad); box-shadow:0 0 0 2px #fecaca; }
.shot svg { width:100%; height:auto; border:1px solid var(--line); border-radius:6px; cursor:zoom-in; background:#eee; }
.shot.zoom { position:fixed; inset:0; background:rgba(0,0,0,.85); display:flex; align-items:center; justify-content:center; z-index:9; }
.shot.zoom svg { width:96vw; max-height:96vh; cursor:zoom-out; }
h2 { font-size:15px; margin:0 0 4px; }
.url { color:var(--dim); word-break:break-all; font-size:12px; margin-bottom:8px; }
ol.actions { margin:0 0 8px; padding-left:20px; }
ol.actions li { margin:3px 0; }
li.failed, li.blocked { color:var(--bad); font-weight:600; }
li .why { display:block; font-weight:400; }
.note { border-left:4px solid var(--warn); background:#fffbeb; padding:6px 10px; margin:6px 0; }
.note.verifier { border-color:var(--bad); background:#fef2f2; }
.thinking { color:var(--dim); font-style:italic; white-space:pre-wrap; }
.stats { color:var(--dim); font-size:12px; margin-top:8px; }
footer { padding:10px 28px 30px; color:var(--dim); }
"#;

const JS: &str = r#"
document.querySelectorAll('.shot').forEach(function (s) {
  s.addEventListener('click', function () { s.classList.toggle('zoom'); });
});
document.addEventListener('keydown', function (e) {
  if (e.key === 'Escape') document.querySelectorAll('.shot.zoom').forEach(function (s) { s.classList.remove('zoom'); });
});
"#;

/// Escapes text for HTML (element content and attribute values).
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn status_name(status: Option<RunStatus>) -> &'static str {
    match status {
        Some(RunStatus::Success) => "success",
        Some(RunStatus::Failure) => "failure",
        Some(RunStatus::MaxSteps) => "maxSteps",
        Some(RunStatus::Cancelled) => "cancelled",
        Some(RunStatus::BudgetExceeded) => "budgetExceeded",
        Some(RunStatus::HandoffTimeout) => "handoffTimeout",
        None => "unknown",
    }
}

/// The whole report.
pub(crate) fn render(t: &Timeline, secrets: &Secrets, pricing: Option<Pricing>) -> String {
    let s = |text: &str| esc(&secrets.redact(text));
    let status = t.ending.as_ref().map(|e| e.status);
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>Lumen run: {}</title><style>{CSS}</style></head><body>",
        s(&t.instruction)
    );
    let usage = t.ending.as_ref().map(|e| e.usage).unwrap_or_default();
    let cost = pricing
        .and_then(|price| price(&t.model, &usage))
        .map(|c| format!(" · about ${c:.3}"))
        .unwrap_or_default();
    let seconds = match (t.started_ms, t.ended_ms) {
        (Some(a), Some(b)) => (b.saturating_sub(a)) as f64 / 1000.0,
        _ => 0.0,
    };
    let _ = write!(
        html,
        "<header><h1>{}</h1><div class=\"meta\"><span class=\"badge {st}\" id=\"status\">{st}</span> \
         · {} · <span id=\"step-count\">{}</span> steps of at most {} · {} input + {} output tokens{cost} · {seconds:.1} s</div>",
        s(&t.instruction),
        s(&t.model),
        t.steps.len(),
        t.max_steps,
        usage.total_input(),
        usage.output_tokens,
        st = status_name(status),
    );
    if let Some(result) = t.ending.as_ref().and_then(|e| e.result.as_deref()) {
        let _ = write!(html, "<p id=\"result\"><b>Result:</b> {}</p>", s(result));
    }
    for e in &t.errors {
        let _ = write!(
            html,
            "<p class=\"note verifier\"><b>Error:</b> {}</p>",
            s(e)
        );
    }
    html.push_str("</header><main id=\"timeline\">");
    for step in &t.steps {
        render_step(&mut html, step, &t.model, secrets, pricing);
    }
    let _ = writeln!(
        html,
        "</main><footer>Written by lumen {}. Screenshots are embedded; this file opens offline.</footer>\
         <script>{JS}</script></body></html>",
        env!("CARGO_PKG_VERSION")
    );
    html
}

fn render_step(
    html: &mut String,
    step: &StepView,
    model: &str,
    secrets: &Secrets,
    pricing: Option<Pricing>,
) {
    let s = |text: &str| esc(&secrets.redact(text));
    let problem = step.actions.iter().any(ActionView::is_problem) || !step.rejections.is_empty();
    let n = step.step + 1;
    let _ = write!(
        html,
        "<section class=\"step{}\" id=\"step-{n}\" data-step=\"{n}\"><div class=\"shot\">",
        if problem { " problem" } else { "" }
    );
    render_shot(html, step, secrets);
    let _ = write!(
        html,
        "</div><div class=\"detail\"><h2>Step {n}</h2><div class=\"url\">{}</div>",
        s(&step.url)
    );
    for text in &step.thinking {
        let _ = write!(html, "<p class=\"thinking\">{}</p>", s(text));
    }
    html.push_str("<ol class=\"actions\">");
    for a in &step.actions {
        let (class, why) = match &a.outcome {
            Outcome::Pending => ("pending", String::new()),
            Outcome::Ran(e) if e.ok => ("ok", String::new()),
            Outcome::Ran(e) => (
                "failed",
                format!(
                    "<span class=\"why\">failed: {}</span>",
                    s(e.error.as_deref().unwrap_or("no reason given"))
                ),
            ),
            Outcome::Blocked(reason) => (
                "blocked",
                format!("<span class=\"why\">blocked: {}</span>", s(reason)),
            ),
        };
        let _ = write!(
            html,
            "<li class=\"action {class}\">{}{why}</li>",
            s(&describe(&a.call.action))
        );
    }
    html.push_str("</ol>");
    for r in &step.rejections {
        let _ = write!(
            html,
            "<div class=\"note verifier\"><b>Verifier:</b> {}</div>",
            s(r)
        );
    }
    for nudge in &step.nudges {
        let _ = write!(html, "<div class=\"note\"><b>Nudge:</b> {}</div>", s(nudge));
    }
    for notice in &step.notices {
        let _ = write!(
            html,
            "<div class=\"note\"><b>Model:</b> {}</div>",
            s(notice)
        );
    }
    let tokens = step
        .usage
        .map(|u| {
            let c = pricing
                .and_then(|price| price(model, &u))
                .map(|c| format!(" (~${c:.4})"))
                .unwrap_or_default();
            format!("{} in / {} out tokens{c}", u.total_input(), u.output_tokens)
        })
        .unwrap_or_else(|| "no model call recorded".to_owned());
    let file = step
        .screenshot_file
        .as_deref()
        .map(|f| format!(" · <a href=\"{}\">screenshot file</a>", esc(f)))
        .unwrap_or_default();
    let _ = write!(
        html,
        "<div class=\"stats\">{tokens} · {:.2} s (model {:.2} s){file}</div></div></section>",
        step.duration_ms as f64 / 1000.0,
        step.model_ms as f64 / 1000.0
    );
}

/// The screenshot as an SVG with the step's actions drawn over it, in
/// viewport CSS pixels (the coordinates actions use).
fn render_shot(html: &mut String, step: &StepView, secrets: &Secrets) {
    let Some(shot) = &step.screenshot else {
        html.push_str("<p class=\"meta\">no screenshot</p>");
        return;
    };
    let (w, h) = (shot.viewport.width.max(1), shot.viewport.height.max(1));
    let data = base64::engine::general_purpose::STANDARD.encode(&*shot.image.data);
    let _ = write!(
        html,
        "<svg viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" \
         aria-label=\"step {} screenshot\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"8\" \
         refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" fill=\"context-stroke\"/></marker></defs>\
         <image href=\"data:{};base64,{data}\" x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\"/>",
        step.step + 1,
        shot.image.format.mime()
    );
    let mut last_point: Option<(i32, i32)> = None;
    let mut label_row = 0;
    for (i, a) in step.actions.iter().enumerate() {
        let color = match &a.outcome {
            Outcome::Blocked(_) => "#f97316",
            Outcome::Ran(e) if !e.ok => "#ef4444",
            _ => "#e11d48",
        };
        let dash = if matches!(a.outcome, Outcome::Blocked(_)) {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let num = i + 1;
        match &a.call.action {
            Action::Click { x, y, .. }
            | Action::DoubleClick { x, y, .. }
            | Action::TripleClick { x, y, .. }
            | Action::Hover { x, y } => {
                let _ = write!(
                    html,
                    "<g class=\"mark click\"><circle cx=\"{x}\" cy=\"{y}\" r=\"16\" fill=\"none\" stroke=\"{color}\" \
                     stroke-width=\"4\"{dash}/><circle cx=\"{x}\" cy=\"{y}\" r=\"4\" fill=\"{color}\"/>\
                     <text x=\"{}\" y=\"{}\" fill=\"#fff\" stroke=\"{color}\" stroke-width=\"5\" paint-order=\"stroke\" \
                     font-size=\"18\" font-weight=\"700\">{num}</text></g>",
                    x + 18,
                    y - 14
                );
                last_point = Some((*x, *y));
            }
            Action::Drag {
                start_x,
                start_y,
                end_x,
                end_y,
                path,
            } => {
                let mut points = format!("{start_x},{start_y}");
                for p in path {
                    let _ = write!(points, " {},{}", p.x, p.y);
                }
                let _ = write!(points, " {end_x},{end_y}");
                let _ = write!(
                    html,
                    "<g class=\"mark drag\"><polyline points=\"{points}\" fill=\"none\" stroke=\"{color}\" \
                     stroke-width=\"4\"{dash} marker-end=\"url(#arrow)\"/><circle cx=\"{start_x}\" cy=\"{start_y}\" \
                     r=\"6\" fill=\"{color}\"/></g>"
                );
                last_point = Some((*end_x, *end_y));
            }
            Action::Scroll {
                x, y, direction, ..
            } => {
                let (dx, dy) = match direction {
                    ScrollDirection::Up => (0, -70),
                    ScrollDirection::Down => (0, 70),
                    ScrollDirection::Left => (-70, 0),
                    ScrollDirection::Right => (70, 0),
                };
                let _ = write!(
                    html,
                    "<g class=\"mark scroll\"><line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{}\" stroke=\"{color}\" \
                     stroke-width=\"6\"{dash} marker-end=\"url(#arrow)\"/></g>",
                    x + dx,
                    y + dy
                );
            }
            Action::Type { text } => {
                let (x, y) =
                    last_point.map_or((12, 30 + 30 * label_row), |(x, y)| (x + 24, y + 30));
                label_row += 1;
                let _ = write!(
                    html,
                    "<g class=\"mark type\"><text x=\"{x}\" y=\"{y}\" fill=\"#fff\" stroke=\"{color}\" \
                     stroke-width=\"6\" paint-order=\"stroke\" font-size=\"18\" font-family=\"monospace\">⌨ {}</text></g>",
                    esc(&secrets.redact(&crate::timeline::shorten(text, 48)))
                );
            }
            other => {
                if matches!(other, Action::Terminate { .. } | Action::WriteState { .. }) {
                    continue;
                }
                let y = h as i32 - 16 - 30 * label_row;
                label_row += 1;
                let _ = write!(
                    html,
                    "<g class=\"mark other\"><text x=\"12\" y=\"{y}\" fill=\"#fff\" stroke=\"{color}\" stroke-width=\"6\" \
                     paint-order=\"stroke\" font-size=\"18\">{num}. {}</text></g>",
                    esc(&secrets.redact(&describe(other)))
                );
            }
        }
    }
    html.push_str("</svg>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }
}

//! `lumen browser screenshot --annotate [PATH]`: a snapshot of the
//! interactive elements (its refs saved as `snapshot` saves them, so
//! `click @e3` works after it), then a screenshot with each ref's box and
//! label drawn on it.

use std::path::Path;

use lumen::browser::annotate::{RefBox, annotate_png};
use lumen::browser::{ElementQuery, ElementTarget, PageLink};
use serde_json::{Value, json};

use super::{State, fail, filter, saved_ref, snapshot};
use crate::exit::CliError;

/// Takes the snapshot and the screenshot, draws, writes `path`.
pub(super) async fn screenshot(
    link: &PageLink,
    state: &mut State,
    session: &str,
    path: &Path,
) -> Result<(Value, String), CliError> {
    let snap = filter(
        snapshot(link, state, session, None).await?,
        true,
        false,
        None,
    );
    let viewport = link.viewport().await.map_err(fail)?;
    let mut drawn = Vec::new();
    let mut listed = Vec::new();
    for node in &snap.nodes {
        let Ok(saved) = saved_ref(state, &node.reference) else {
            continue;
        };
        // A ref without a box (hidden, removed since) is not drawn.
        let Ok(Ok(b)) = link
            .query(ElementTarget::Ref(saved), &ElementQuery::Box)
            .await
        else {
            continue;
        };
        let rect = ["x", "y", "width", "height"].map(|k| b[k].as_f64().unwrap_or(0.0));
        let [x, y, w, h] = rect;
        let on_screen = w > 0.0
            && h > 0.0
            && x < f64::from(viewport.width)
            && y < f64::from(viewport.height)
            && x + w > 0.0
            && y + h > 0.0;
        if !on_screen {
            continue;
        }
        listed.push(json!({
            "ref": node.reference,
            "role": node.role,
            "name": node.name,
            "box": {"x": x, "y": y, "width": w, "height": h},
        }));
        drawn.push(RefBox {
            label: node.reference.trim_start_matches('@').to_owned(),
            rect,
        });
    }
    let png = link.screenshot_png().await.map_err(fail)?;
    let width = image_width(&png);
    let scale = if viewport.width > 0 && width > 0 {
        f64::from(width) / f64::from(viewport.width)
    } else {
        1.0
    };
    let out = annotate_png(&png, &drawn, scale).map_err(fail)?;
    std::fs::write(path, out)
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", path.display())))?;
    let shown = path.display().to_string();
    let mut text = shown.clone();
    for r in &listed {
        text.push_str(&format!(
            "\n{} {} {:?}",
            r["ref"].as_str().unwrap_or(""),
            r["role"].as_str().unwrap_or(""),
            r["name"].as_str().unwrap_or("")
        ));
    }
    Ok((json!({"path": shown, "refs": listed}), text))
}

/// A PNG's width from its header (0 when it is none).
fn image_width(png: &[u8]) -> u32 {
    png.get(16..20)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

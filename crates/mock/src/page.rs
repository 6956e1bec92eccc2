//! Reading a page the way a scripted model's oracle does: where a target
//! is, in viewport CSS pixels, so a trajectory can click it.

use lumen_core::{BrowserTab, Point, Result};

/// The centre of the first element matching `selector`, in viewport CSS
/// pixels (rounded), or `None` when nothing matches.
pub async fn element_center(tab: &dyn BrowserTab, selector: &str) -> Result<Option<Point>> {
    // serde_json quotes any selector as a valid JavaScript string literal.
    let quoted = serde_json::to_string(selector).unwrap_or_else(|_| "\"\"".to_owned());
    let js = format!(
        "(() => {{ const e = document.querySelector({quoted}); if (!e) return null; \
         const r = e.getBoundingClientRect(); \
         return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; }})()"
    );
    let v = tab.evaluate(&js).await?;
    Ok(match (v[0].as_i64(), v[1].as_i64()) {
        (Some(x), Some(y)) => Some(Point::new(x as i32, y as i32)),
        _ => None,
    })
}

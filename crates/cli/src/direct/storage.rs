//! `lumen browser state save|load FILE`: the browser's cookies and the
//! current page's `localStorage` and `sessionStorage`, by origin.
//!
//! The file holds session tokens, so it is written readable by its owner
//! only (0600). Storage is read from and restored to the page's own origin
//! (a page cannot reach another origin's storage): `load` restores the
//! entries of the origin the page is on and names the others it skipped.
//! Files of older versions (cookies only) load as before.

use std::path::Path;

use lumen::browser::PageLink;
use serde_json::{Map, Value, json};

use super::fail;
use crate::exit::CliError;

/// Reads the page's origin and both storages (`{}` where a storage is
/// blocked, as on `about:blank`).
const DUMP: &str = r#"(() => {
  const dump = (get) => { const o = {}; try { const s = get(); for (let i = 0; i < s.length; i++) { const k = s.key(i); o[k] = s.getItem(k); } } catch (e) {} return o; };
  return { origin: location.origin, localStorage: dump(() => localStorage), sessionStorage: dump(() => sessionStorage) };
})()"#;

/// Writes `text` to `file`, readable and writable by its owner only.
fn write_private(file: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(0o600);
        // An existing file keeps its mode on open: narrow it first.
        if file.exists() {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    let mut f = options.open(file)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// `state save FILE` / `state load FILE`.
pub(super) async fn state(
    link: &PageLink,
    action: &str,
    file: &Path,
) -> Result<(Value, String), CliError> {
    match action {
        "save" => save(link, file).await,
        "load" => load(link, file).await,
        other => Err(CliError::config(format!(
            "unknown state action {other:?}; use save FILE or load FILE"
        ))),
    }
}

async fn save(link: &PageLink, file: &Path) -> Result<(Value, String), CliError> {
    let cookies = link
        .call("Network.getAllCookies", json!({}))
        .await
        .map_err(fail)?["cookies"]
        .take();
    let page = link.evaluate(DUMP).await.map_err(fail)?;
    let mut origins = Map::new();
    let origin = page["origin"].as_str().unwrap_or("null");
    if origin != "null" {
        origins.insert(
            origin.to_owned(),
            json!({
                "localStorage": page["localStorage"],
                "sessionStorage": page["sessionStorage"],
            }),
        );
    }
    let count = |k: &str| page[k].as_object().map_or(0, Map::len);
    let body = json!({"cookies": cookies, "origins": origins});
    write_private(file, &body.to_string())
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", file.display())))?;
    let shown = file.display().to_string();
    let n = cookies.as_array().map_or(0, Vec::len);
    Ok((
        json!({
            "saved": shown,
            "cookies": n,
            "origins": origins.keys().collect::<Vec<_>>(),
            "localStorage": count("localStorage"),
            "sessionStorage": count("sessionStorage"),
        }),
        format!(
            "{shown} ({n} cookies; {} localStorage and {} sessionStorage entries)",
            count("localStorage"),
            count("sessionStorage")
        ),
    ))
}

async fn load(link: &PageLink, file: &Path) -> Result<(Value, String), CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::config(format!("cannot read {}: {e}", file.display())))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::config(format!("{} is not a saved state: {e}", file.display())))?;
    if !v.is_object() || !(v["cookies"].is_array() || v["cookies"].is_null()) {
        return Err(CliError::config(format!(
            "{} is not a saved state (no cookie list)",
            file.display()
        )));
    }
    let cookies: Vec<Value> = v["cookies"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut c = c.clone();
            if let Some(o) = c.as_object_mut() {
                // Read-only fields of a saved cookie.
                for k in ["size", "session", "priority", "sourceScheme", "sourcePort"] {
                    o.remove(k);
                }
            }
            c
        })
        .collect();
    link.call("Network.setCookies", json!({"cookies": cookies}))
        .await
        .map_err(fail)?;
    let here = link.evaluate("location.origin").await.map_err(fail)?;
    let here = here.as_str().unwrap_or("null");
    let mut restored = Vec::new();
    let mut skipped = Vec::new();
    for (origin, stores) in v["origins"].as_object().into_iter().flatten() {
        if origin != here {
            skipped.push(origin.clone());
            continue;
        }
        let entries = |k: &str| stores[k].as_object().cloned().unwrap_or_default();
        // Marked so the CDP log surface shows only its length: it carries
        // the stored values.
        let js = format!(
            "{}(() => {{ const put = (s, o) => {{ for (const [k, v] of Object.entries(o)) if (typeof v === 'string') s.setItem(k, v); }}; \
             put(localStorage, {}); put(sessionStorage, {}); return true; }})()",
            lumen::browser::UNLOGGED,
            Value::Object(entries("localStorage")),
            Value::Object(entries("sessionStorage")),
        );
        link.evaluate(&js).await.map_err(|e| {
            CliError::failure(format!("cannot restore the storage of {origin}: {e}"))
        })?;
        restored.push(origin.clone());
    }
    let mut text = format!("loaded {} cookies", cookies.len());
    if !restored.is_empty() {
        text.push_str(&format!("; storage restored for {}", restored.join(", ")));
    }
    if !skipped.is_empty() {
        text.push_str(&format!(
            "; storage of {} not restored (open a page of that origin and load again)",
            skipped.join(", ")
        ));
    }
    Ok((
        json!({"loaded": cookies.len(), "restored": restored, "skipped": skipped}),
        text,
    ))
}

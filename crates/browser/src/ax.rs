//! Accessibility snapshots with stable element refs.
//!
//! `Accessibility.getFullAXTree` gives every node of the main frame; we keep
//! the meaningful ones (no ignored nodes, no inline text boxes, no unnamed
//! generic containers) and give each a ref such as `@e12`. Page text is
//! kept as `text` nodes (a paragraph, a price, an error message), except
//! where it only repeats the name of the node it sits in (a button's
//! label); an editable region (`contenteditable`) is listed as a
//! `textbox`, so it gets a ref and can be filled. Refs are keyed by
//! the DOM backend node id, so the same element keeps its ref across
//! snapshots for as long as the document lives; a new document starts over.
//!
//! Works on one page session ([`PageSession`]) and the ref numbering of
//! its document, so it sits below the tab: [`CdpTab`](crate::CdpTab) hands
//! it the page it drives, and [`PageLink`](crate::PageLink) uses the walk.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use lumen_core::{AxNode, AxSnapshot};
use lumen_core::{Point, Result};
use serde::Deserialize;

use crate::cdp::{CallError, PageSession};
use crate::limits::{
    MAX_AX_FIELD_CHARS, MAX_AX_NODES, MAX_AX_PAGE_TEXT_BYTES, MAX_AX_TEXT_BYTES, MAX_FRAMES,
    OMITTED_REF,
};

/// Ref numbering per document.
#[derive(Debug, Default)]
pub(crate) struct AxRefs {
    url: String,
    next: u32,
    by_node: HashMap<i64, u32>,
    by_ref: HashMap<u32, i64>,
}

#[derive(Deserialize)]
struct RawValue {
    #[serde(default)]
    value: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNode {
    node_id: String,
    #[serde(default)]
    ignored: bool,
    #[serde(default)]
    role: Option<RawValue>,
    #[serde(default)]
    name: Option<RawValue>,
    #[serde(default)]
    value: Option<RawValue>,
    #[serde(default)]
    child_ids: Vec<String>,
    #[serde(default, rename = "backendDOMNodeId")]
    backend_dom_node_id: Option<i64>,
    #[serde(default)]
    properties: Vec<serde_json::Value>,
}

fn text(v: &Option<RawValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(serde_json::Value::String(s)) => s.trim().to_owned(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Containers worth listing only when they carry a name.
const UNNAMED_NOISE: &[&str] = &[
    "generic",
    "group",
    "LabelText",
    "Legend",
    "MenuListPopup",
    "Section",
    "paragraph",
    "list",
    "listitem",
    // Inline markup inside page text.
    "strong",
    "emphasis",
    "mark",
    "code",
    "subscript",
    "superscript",
    "deletion",
    "insertion",
    "time",
];

const SKIPPED_ROLES: &[&str] = &["InlineTextBox", "LineBreak", "none", "presentation"];

/// Whether a node earns a line (and a ref) in the snapshot. Text nodes
/// (`StaticText`) are judged by [`walk`], which knows their ancestors.
fn listed(ignored: bool, role: &str, name: &str) -> bool {
    if ignored || role.is_empty() || role == "StaticText" || SKIPPED_ROLES.contains(&role) {
        return false;
    }
    !(name.is_empty() && UNNAMED_NOISE.contains(&role))
}

/// The role an editable region (`contenteditable`, whose own role is an
/// unnamed container) is listed as, so that it gets a ref and reads as a
/// field to fill.
const EDITABLE_ROLE: &str = "textbox";

/// The role page text is listed as.
pub(crate) const TEXT_ROLE: &str = "text";

/// A node's `properties` entry `name`, as its `value.value`.
fn property<'a>(node: &'a RawNode, name: &str) -> Option<&'a serde_json::Value> {
    node.properties
        .iter()
        .find(|p| p["name"] == name)
        .map(|p| &p["value"]["value"])
}

fn lock(refs: &Mutex<AxRefs>) -> MutexGuard<'_, AxRefs> {
    refs.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A snapshot of the page's accessibility tree, numbering refs with `refs`
/// (started over when the page's URL changed).
pub(crate) async fn snapshot(page: PageSession<'_>, refs: &Mutex<AxRefs>) -> Result<AxSnapshot> {
    let url = page.evaluate("location.href").await?;
    let url = url.as_str().unwrap_or_default().to_owned();
    let raw = page
        .call("Accessibility.getFullAXTree", serde_json::json!({}))
        .await?;
    let raw = with_local_frames(page, raw).await?;
    let mut refs = lock(refs);
    if refs.url != url {
        *refs = AxRefs {
            url: url.clone(),
            ..AxRefs::default()
        };
    }
    let nodes = walk(&raw, &mut refs, None)
        .into_iter()
        .map(|(node, _)| node)
        .collect();
    Ok(AxSnapshot { url, nodes })
}

/// Puts the trees of the frames that run in the page's own renderer under
/// their `Iframe` nodes, at any depth (up to [`MAX_FRAMES`] frames, 8 deep):
/// their DOM node ids are the page's, so their refs act through the page's
/// session as the main frame's do. A frame of another site runs in its own
/// process and is left an empty `Iframe` here (`PageLink` goes into those
/// too).
async fn with_local_frames(
    page: PageSession<'_>,
    mut main: serde_json::Value,
) -> Result<serde_json::Value> {
    let mut nodes = match main.get_mut("nodes") {
        Some(serde_json::Value::Array(list)) if list.iter().any(is_iframe) => std::mem::take(list),
        _ => return Ok(main),
    };
    // (index of a frame's first node, depth)
    let mut queue = vec![(0usize, 0u32)];
    let mut frames = 0usize;
    while let Some((from, depth)) = queue.pop() {
        if depth >= 8 {
            continue;
        }
        let owners: Vec<(usize, i64)> = (from..nodes.len())
            .filter(|&i| is_iframe(&nodes[i]))
            .filter_map(|i| Some((i, nodes[i]["backendDOMNodeId"].as_i64()?)))
            .collect();
        for (at, backend) in owners {
            if frames >= MAX_FRAMES || !nodes[at]["childIds"].as_array().is_none_or(Vec::is_empty) {
                continue;
            }
            let described = match page
                .call(
                    "DOM.describeNode",
                    serde_json::json!({ "backendNodeId": backend }),
                )
                .await
            {
                Ok(d) => d,
                Err(CallError::Protocol { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(frame_id) = described["node"]["frameId"].as_str() else {
                continue;
            };
            let tree = match page
                .call(
                    "Accessibility.getFullAXTree",
                    serde_json::json!({ "frameId": frame_id }),
                )
                .await
            {
                Ok(t) => t,
                // Another process's frame.
                Err(CallError::Protocol { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            frames += 1;
            let child = tree["nodes"].as_array().cloned().unwrap_or_default();
            if let Some(start) = graft(&mut nodes, at, child, &format!("f{frames}:"), |b| b) {
                queue.push((start, depth + 1));
            }
        }
    }
    Ok(serde_json::json!({ "nodes": nodes }))
}

/// Whether a raw node is an `<iframe>`'s.
pub(crate) fn is_iframe(node: &serde_json::Value) -> bool {
    node["role"]["value"] == "Iframe"
}

/// Appends a frame's nodes (`child`, a `getFullAXTree` answer's list) to
/// `nodes` with their node ids prefixed (ids are per tree) and their DOM
/// node ids mapped by `key`, and makes the first (its document) a child of
/// the `Iframe` node at `owner`; returns where the frame's nodes start, or
/// `None` for an empty frame.
pub(crate) fn graft(
    nodes: &mut Vec<serde_json::Value>,
    owner: usize,
    child: Vec<serde_json::Value>,
    prefix: &str,
    key: impl Fn(i64) -> i64,
) -> Option<usize> {
    if child.is_empty() {
        return None;
    }
    let start = nodes.len();
    let prefixed = |v: &serde_json::Value| {
        serde_json::Value::String(format!("{prefix}{}", v.as_str().unwrap_or_default()))
    };
    for mut n in child {
        n["nodeId"] = prefixed(&n["nodeId"]);
        if let Some(kids) = n["childIds"].as_array_mut() {
            for k in kids.iter_mut() {
                *k = prefixed(k);
            }
        }
        if let Some(b) = n["backendDOMNodeId"].as_i64() {
            n["backendDOMNodeId"] = serde_json::json!(key(b));
        }
        nodes.push(n);
    }
    let root = nodes[start]["nodeId"].clone();
    match nodes[owner]["childIds"].as_array_mut() {
        Some(kids) => kids.push(root),
        None => nodes[owner]["childIds"] = serde_json::json!([root]),
    }
    Some(start)
}

impl AxRefs {
    /// Numbering that goes on from earlier `(number, backend node id)`
    /// pairs of the same document.
    pub(crate) fn seeded(pairs: &[(u32, i64)]) -> Self {
        let mut refs = AxRefs::default();
        for &(num, backend) in pairs {
            refs.by_node.insert(backend, num);
            refs.by_ref.insert(num, backend);
            refs.next = refs.next.max(num);
        }
        refs
    }

    /// Every `(number, backend node id)` pair given so far.
    pub(crate) fn pairs(&self) -> Vec<(u32, i64)> {
        let mut pairs: Vec<(u32, i64)> = self.by_ref.iter().map(|(n, b)| (*n, *b)).collect();
        pairs.sort_unstable();
        pairs
    }
}

/// A node waiting in [`walk`]'s depth-first stack.
struct Frame {
    /// Its index in the answer's node list.
    node: usize,
    /// Its depth among the kept nodes.
    depth: u32,
    /// Its depth inside a scoped subtree, once inside one.
    scoped: Option<u32>,
    /// The nearest kept ancestor that is not text (its index), whose name
    /// a text node would only repeat.
    named: Option<usize>,
    /// Whether an ancestor is an editable region (its inner containers
    /// are not fields of their own).
    editable: bool,
}

/// Flattens a `getFullAXTree` answer into listed nodes in document order,
/// numbering refs with `refs`, each with its DOM backend node id.
///
/// With a `scope` (backend node ids), only the subtrees rooted at those
/// nodes are returned, their depth counted from each subtree's root; the
/// numbering still covers the whole tree, so a ref names the same element
/// in a scoped and an unscoped snapshot.
pub(crate) fn walk(
    raw: &serde_json::Value,
    refs: &mut AxRefs,
    scope: Option<&HashSet<i64>>,
) -> Vec<(AxNode, Option<i64>)> {
    let nodes: Vec<RawNode> = match raw.get("nodes") {
        Some(list) => Vec::<RawNode>::deserialize(list).unwrap_or_default(),
        None => Vec::new(),
    };
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.node_id.as_str(), i))
        .collect();
    let mut out = Vec::new();
    // Depth-first from the root(s): nodes no one lists as a child.
    let mut is_child = vec![false; nodes.len()];
    for n in &nodes {
        for c in &n.child_ids {
            if let Some(&i) = index.get(c.as_str()) {
                is_child[i] = true;
            }
        }
    }
    let mut stack: Vec<Frame> = (0..nodes.len())
        .rev()
        .filter(|i| !is_child[*i])
        .map(|i| Frame {
            node: i,
            depth: 0,
            scoped: None,
            named: None,
            editable: false,
        })
        .collect();
    let mut seen = vec![false; nodes.len()];
    // What is kept is bounded (`limits`): past a cap, nodes are counted,
    // not listed, and a marker at the end says how many.
    let mut text_bytes = 0usize;
    let mut page_text_bytes = 0usize;
    let mut omitted = 0usize;
    while let Some(frame) = stack.pop() {
        let Frame {
            node: i,
            depth,
            scoped,
            named,
            editable: in_editable,
        } = frame;
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        let n = &nodes[i];
        let scoped = match (scoped, scope, n.backend_dom_node_id) {
            (Some(d), _, _) => Some(d),
            (None, Some(roots), Some(b)) if roots.contains(&b) => Some(0),
            _ => None,
        };
        let mut role = clip(text(&n.role));
        let name = clip(text(&n.name));
        let editable = !n.ignored
            && property(n, "editable").and_then(serde_json::Value::as_str) == Some("richtext");
        let is_text = role == "StaticText";
        let keep = if is_text {
            // Page text, unless it only repeats the name of the node it
            // belongs to (a button's label, a heading's words).
            !n.ignored
                && !name.is_empty()
                && !named.is_some_and(|a: usize| clip(text(&nodes[a].name)).contains(&name))
        } else if editable && !in_editable && UNNAMED_NOISE.contains(&role.as_str()) {
            role = EDITABLE_ROLE.to_owned();
            true
        } else {
            listed(n.ignored, &role, &name)
        };
        if is_text && keep {
            role = TEXT_ROLE.to_owned();
        }
        // A document's name is its title, which its text does not repeat.
        let document = matches!(role.as_str(), "RootWebArea" | "WebArea" | "Iframe");
        let step = u32::from(keep);
        let value = if keep && !is_text {
            clip(text(&n.value))
        } else {
            String::new()
        };
        let cost = role.len() + name.len() + value.len();
        let full = out.len() >= MAX_AX_NODES
            || text_bytes + cost > MAX_AX_TEXT_BYTES
            || (is_text && page_text_bytes + name.len() > MAX_AX_PAGE_TEXT_BYTES);
        if keep && full {
            if scope.is_none() || scoped.is_some() {
                omitted += 1;
            }
        } else if keep {
            let number = match n.backend_dom_node_id {
                Some(b) => {
                    let next = refs.next + 1;
                    let num = *refs.by_node.entry(b).or_insert(next);
                    if num == next {
                        refs.next = next;
                        refs.by_ref.insert(num, b);
                    }
                    num
                }
                None => {
                    refs.next += 1;
                    refs.next
                }
            };
            let shown = match scope {
                None => Some(depth),
                Some(_) => scoped,
            };
            if let Some(depth) = shown {
                text_bytes += cost;
                if is_text {
                    page_text_bytes += name.len();
                }
                let focusable = property(n, "focusable") == Some(&serde_json::Value::Bool(true));
                out.push((
                    AxNode {
                        reference: format!("@e{number}"),
                        role,
                        name,
                        value: (!value.is_empty()).then_some(value),
                        depth,
                        focusable,
                    },
                    n.backend_dom_node_id,
                ));
            }
        }
        let named = if keep && !is_text && !document {
            Some(i)
        } else {
            named
        };
        for c in n.child_ids.iter().rev() {
            if let Some(&ci) = index.get(c.as_str()) {
                stack.push(Frame {
                    node: ci,
                    depth: depth + step,
                    scoped: scoped.map(|d| d + step),
                    named,
                    editable: editable || in_editable,
                });
            }
        }
    }
    if omitted > 0 {
        out.push((omitted_marker(omitted), None));
    }
    out
}

/// The last node of a snapshot that went over a cap: how many nodes it
/// leaves out, and which caps.
fn omitted_marker(omitted: usize) -> AxNode {
    AxNode {
        reference: OMITTED_REF.to_owned(),
        role: "note".to_owned(),
        name: format!(
            "{omitted} more nodes omitted: the snapshot is over its cap of {MAX_AX_NODES} nodes, \
             {} of text or {} of page text (MAX_AX_NODES, MAX_AX_TEXT_BYTES, \
             MAX_AX_PAGE_TEXT_BYTES); read a part of the page by the ref of its root",
            crate::limits::size(MAX_AX_TEXT_BYTES),
            crate::limits::size(MAX_AX_PAGE_TEXT_BYTES)
        ),
        value: None,
        depth: 0,
        focusable: false,
    }
}

/// A name or value cut to [`MAX_AX_FIELD_CHARS`], ending in `…` when cut.
fn clip(mut s: String) -> String {
    if let Some((at, _)) = s.char_indices().nth(MAX_AX_FIELD_CHARS) {
        s.truncate(at);
        s.push('…');
    }
    s
}

/// The centre of the element a ref names, viewport CSS pixels (`None` when
/// the ref is unknown or the element has no box).
pub(crate) async fn ref_center(
    page: PageSession<'_>,
    refs: &Mutex<AxRefs>,
    reference: &str,
) -> Result<Option<Point>> {
    let Some(backend) = backend_of(refs, reference) else {
        return Ok(None);
    };
    let Some(Some(corners)) = content_quads(page, backend)
        .await?
        .and_then(|q| q.first().copied())
    else {
        return Ok(None);
    };
    let cx = corners.iter().map(|c| c.0).sum::<f64>() / 4.0;
    let cy = corners.iter().map(|c| c.1).sum::<f64>() / 4.0;
    Ok(Some(Point::new(cx.round() as i32, cy.round() as i32)))
}

/// The four corners of one content quad, viewport CSS pixels.
pub(crate) type Quad = [(f64, f64); 4];

/// The content quads of a DOM node (`DOM.getContentQuads`), each `None`
/// when Chromium sent it malformed; `None` when the node is gone.
pub(crate) async fn content_quads(
    page: PageSession<'_>,
    backend: i64,
) -> Result<Option<Vec<Option<Quad>>>> {
    let quads = match page
        .call(
            "DOM.getContentQuads",
            serde_json::json!({ "backendNodeId": backend }),
        )
        .await
    {
        Ok(v) => v,
        Err(CallError::Protocol { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let corners = |q: &serde_json::Value| -> Option<Quad> {
        let n: Vec<f64> = q.as_array()?.iter().filter_map(|v| v.as_f64()).collect();
        match n[..] {
            [x0, y0, x1, y1, x2, y2, x3, y3] => Some([(x0, y0), (x1, y1), (x2, y2), (x3, y3)]),
            _ => None,
        }
    };
    Ok(Some(
        quads["quads"]
            .as_array()
            .into_iter()
            .flatten()
            .map(corners)
            .collect(),
    ))
}

/// The DOM backend node a ref names in the document `refs` numbers, if it
/// is still known.
pub(crate) fn backend_of(refs: &Mutex<AxRefs>, reference: &str) -> Option<i64> {
    let num = reference
        .trim()
        .trim_start_matches('@')
        .trim_start_matches('e')
        .parse::<u32>()
        .ok()?;
    lock(refs).by_ref.get(&num).copied()
}

/// The answer when a ref is not (or no longer) known.
fn stale(reference: &str) -> lumen_core::ActionOutcome {
    lumen_core::ActionOutcome::failed(format!(
        "ref {reference} is unknown or stale (refs last until the page navigates): read the \
         page again for fresh refs"
    ))
}

/// Scrolls the element a ref names into view.
pub(crate) async fn scroll_to_ref(
    page: PageSession<'_>,
    refs: &Mutex<AxRefs>,
    reference: &str,
) -> Result<lumen_core::ActionOutcome> {
    let Some(backend) = backend_of(refs, reference) else {
        return Ok(stale(reference));
    };
    match page
        .call(
            "DOM.scrollIntoViewIfNeeded",
            serde_json::json!({ "backendNodeId": backend }),
        )
        .await
    {
        Ok(_) => Ok(lumen_core::ActionOutcome::ok()),
        Err(CallError::Protocol { message, .. }) => Ok(lumen_core::ActionOutcome::failed(format!(
            "ref {reference} cannot be scrolled into view: {message}"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Sets the value of the form control a ref names, as a person would leave
/// it: text fields and text areas take the text, a select the option whose
/// value or label matches, a checkbox or radio `true`/`false`; `input` and
/// `change` events fire so the page sees it.
pub(crate) async fn fill_ref(
    page: PageSession<'_>,
    refs: &Mutex<AxRefs>,
    reference: &str,
    value: &serde_json::Value,
) -> Result<lumen_core::ActionOutcome> {
    let Some(backend) = backend_of(refs, reference) else {
        return Ok(stale(reference));
    };
    let resolved = match page
        .call(
            "DOM.resolveNode",
            serde_json::json!({ "backendNodeId": backend }),
        )
        .await
    {
        Ok(v) => v,
        Err(CallError::Protocol { .. }) => return Ok(stale(reference)),
        Err(e) => return Err(e.into()),
    };
    let Some(object) = resolved["object"]["objectId"].as_str() else {
        return Ok(stale(reference));
    };
    let answer = page
        .call(
            "Runtime.callFunctionOn",
            serde_json::json!({
                "objectId": object,
                "functionDeclaration": FILL_FUNCTION,
                "arguments": [{ "value": value }],
                "returnByValue": true,
            }),
        )
        .await;
    let answer = match answer {
        Ok(v) => v,
        Err(CallError::Protocol { message, .. }) => {
            return Ok(lumen_core::ActionOutcome::failed(format!(
                "ref {reference} could not be filled: {message}"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let result = &answer["result"]["value"];
    match result["error"].as_str() {
        Some(error) => Ok(lumen_core::ActionOutcome::failed(format!(
            "ref {reference}: {error}"
        ))),
        None => {
            let mut outcome = lumen_core::ActionOutcome::ok();
            if let Some(now) = result["now"].as_str() {
                outcome
                    .hints
                    .push(format!("ref {reference} now holds {now}"));
            }
            Ok(outcome)
        }
    }
}

/// Sets a control's value (see [`fill_ref`]); returns `{now}` or `{error}`.
const FILL_FUNCTION: &str = r#"function (value) {
  const el = this;
  const fire = () => {
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
  };
  const tag = (el.tagName || '').toLowerCase();
  if (el.disabled) return { error: 'the control is disabled' };
  if (tag === 'select') {
    const want = String(value);
    const opt = Array.from(el.options).find(o => o.value === want || o.label === want || o.text.trim() === want);
    if (!opt) return { error: 'no option ' + JSON.stringify(want) + ' (options: ' + Array.from(el.options).map(o => JSON.stringify(o.label)).join(', ') + ')' };
    el.value = opt.value; fire(); return { now: JSON.stringify(opt.label) };
  }
  if (tag === 'input' && (el.type === 'checkbox' || el.type === 'radio')) {
    const on = value === true || value === 'true' || value === 1 || value === 'on';
    if (el.checked !== on) { el.checked = on; fire(); }
    return { now: on ? 'checked' : 'unchecked' };
  }
  if (tag === 'input' || tag === 'textarea') {
    if (el.readOnly) return { error: 'the field is read-only' };
    el.focus();
    const proto = tag === 'input' ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
    const setter = Object.getOwnPropertyDescriptor(proto, 'value').set;
    setter.call(el, String(value)); fire(); return { now: JSON.stringify(el.value) };
  }
  if (el.isContentEditable) {
    el.focus(); el.textContent = String(value); fire(); return { now: JSON.stringify(el.textContent) };
  }
  return { error: 'it is a ' + tag + ', not a form field' };
}"#;

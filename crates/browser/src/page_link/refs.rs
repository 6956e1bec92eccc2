//! [`PageLink`]'s element refs: snapshots whose refs a later process can
//! use (kept by DOM node and document mark, and registered in the page),
//! finding where a ref's element can be acted on, and filling a field.

use std::collections::HashSet;

use lumen_core::{LumenError, Point, Result};
use serde::Deserialize;
use serde_json::{Value, json};

use super::PageLink;
use super::elements::ElementTarget;
use super::frames::{SnapshotFrame, unpack};
use crate::ax::{AxRefs, AxSnapshot, walk};
use crate::protocol::{keys, runtime, typing};

/// The window property holding a document's mark.
pub(super) const MARK_PROPERTY: &str = "__lumenSnapshot";
/// The window property holding the document's refs: a `Map` from ref
/// number to a `WeakRef` of its element, filled by each snapshot.
const REFS_PROPERTY: &str = "__lumenRefs";

/// A snapshot taken through a [`PageLink`], with what a later process
/// needs to use its refs.
#[derive(Debug, Clone)]
pub struct LinkedSnapshot {
    /// The snapshot (refs `@e1`, `@e2`, … in document order).
    pub snapshot: AxSnapshot,
    /// The document's mark (see [`PageLink::snapshot`]).
    pub mark: String,
    /// Every ref number given in this document so far, with the key of
    /// the node it names (its DOM backend node id, with its frame's number
    /// above it for a node inside a frame).
    pub refs: Vec<(u32, i64)>,
    /// The frames the snapshot went into (and those earlier snapshots of the
    /// document did), numbered from 1 in this order.
    pub frames: Vec<SnapshotFrame>,
}

/// A snapshot ref as a later process knows it (from a [`LinkedSnapshot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedRef<'a> {
    /// The ref's number (`3` for `@e3`).
    pub number: u32,
    /// The key of its element (see [`LinkedSnapshot::refs`]).
    pub backend: i64,
    /// The mark of the page's document the ref was given in.
    pub mark: &'a str,
    /// The frames of that snapshot ([`LinkedSnapshot::frames`]).
    pub frames: &'a [SnapshotFrame],
}

/// Where an element named by a backend node id can be acted on, or why it
/// cannot.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElementSpot {
    /// The centre of its visible part, in viewport CSS pixels; nothing
    /// covers it there.
    At(Point),
    /// The page holds another document than the one the mark was set on.
    OtherDocument,
    /// The element was removed from the page.
    Gone,
    /// The element has no box (hidden, or empty).
    NoBox,
    /// The element lies outside the viewport (its centre given).
    OffScreen(Point),
    /// Another element covers the element's centre.
    Covered {
        /// The covered point.
        at: Point,
        /// The covering element (`<div id="consent">`).
        by: String,
    },
}

/// What [`PageLink::fill`] (or [`PageLink::type_into`]) did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FillResult {
    /// The field holds the new text (or the text was typed into it).
    Filled {
        /// Whether the field was scrolled into view first (it lay outside
        /// the viewport, or a scrolled container cut it off).
        scrolled: bool,
    },
    /// The element cannot be used (why, as for [`PageLink::locate`]);
    /// nothing was typed.
    Refused(ElementSpot),
    /// The element took no text input (the element described); nothing
    /// was typed.
    NotEditable(String),
}

/// The page-side half of [`PageLink::fill`] and [`PageLink::type_into`]:
/// the checks of `LOCATE_FN`, then focus the field and either select its
/// content and replace it (`replace`), or type at the caret (at the end of
/// the content when the field did not have focus yet); `text` null only
/// focuses. On any refusal focus leaves the page's elements and nothing is
/// typed.
const TEXT_FN: &str = r#"function(mark, prop, text, replace) {
  const spot = (LOCATE).call(this, mark, prop);
  const away = () => {
    let a = document.activeElement;
    while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
    if (a && a !== document.body) a.blur();
  };
  if (spot.kind !== 'at') { away(); return spot; }
  const el = this.nodeType === 1 ? this : this.parentElement;
  const tag = el.tagName.toLowerCase();
  const isText = tag === 'textarea' || (tag === 'input' && /^(text|search|email|url|tel|password|number|)$/.test(el.type));
  if (!isText && !el.isContentEditable) {
    away();
    return { kind: 'noedit', by: '<' + tag + (el.id ? ' id="' + el.id + '"' : '') + '>' };
  }
  // Inside a shadow root, the document's active element is the host: the
  // element's own root says which element of it has focus.
  const root = el.getRootNode();
  const active = () => root.activeElement || document.activeElement;
  const has = () => { const a = active(); return a === el || el.contains(a); };
  const had = has();
  if (!had) el.focus();
  if (!has()) {
    away();
    return { kind: 'noedit', by: '<' + tag + (el.id ? ' id="' + el.id + '"' : '') + '> (it refuses focus)' };
  }
  const all = () => { const r = document.createRange(); r.selectNodeContents(el); return r; };
  const only = (r) => { const s = getSelection(); s.removeAllRanges(); s.addRange(r); };
  if (replace) {
    if (isText) el.select(); else only(all());
  } else if (!had) {
    // email and number fields have no selection API: their caret stays
    // where focus put it.
    if (isText) { try { const n = el.value.length; el.setSelectionRange(n, n); } catch (e) {} }
    else { const r = all(); r.collapse(false); only(r); }
  }
  if (text === null) return { kind: 'filled', typed: true };
  // The editing command a paste or an IME commit goes through: trusted
  // beforeinput/input events, the undo stack, frameworks' value tracking.
  const typed = text === '' ? document.execCommand('delete') : document.execCommand('insertText', false, text);
  return { kind: 'filled', typed };
}"#;

/// The page-side check behind [`PageLink::locate`].
pub(super) const LOCATE_FN: &str = r#"function(mark, prop) {
  if (window[prop] !== mark) return { kind: 'doc' };
  if (!this.isConnected) return { kind: 'gone' };
  const el = this.nodeType === 1 ? this : this.parentElement;
  if (!el) return { kind: 'nobox' };
  const rects = Array.from(el.getClientRects()).filter(r => r.width > 0 && r.height > 0);
  if (!rects.length) return { kind: 'nobox' };
  const vw = window.innerWidth, vh = window.innerHeight;
  const describe = (e) => {
    let s = '<' + e.tagName.toLowerCase();
    if (e.id) s += ' id="' + e.id + '"';
    else if (typeof e.className === 'string' && e.className.trim()) s += ' class="' + e.className.trim().split(/\s+/).slice(0, 2).join(' ') + '"';
    s += '>';
    const t = (e.innerText || e.getAttribute('aria-label') || '').trim().replace(/\s+/g, ' ');
    if (t) s += ' "' + (t.length > 40 ? t.slice(0, 40) + '…' : t) + '"';
    return s;
  };
  const inside = (hit) => {
    if (!hit) return false;
    if (hit === el || el.contains(hit) || hit.contains(el)) return true;
    for (let n = el; n; ) {
      const root = n.getRootNode();
      if (!root || !root.host) break;
      if (root.host === hit) return true;
      n = root.host;
    }
    return false;
  };
  for (const r of rects) {
    const x0 = Math.max(r.left, 0), x1 = Math.min(r.right, vw);
    const y0 = Math.max(r.top, 0), y1 = Math.min(r.bottom, vh);
    if (x1 - x0 < 1 || y1 - y0 < 1) continue;
    const x = Math.floor((x0 + x1) / 2), y = Math.floor((y0 + y1) / 2);
    const hit = document.elementFromPoint(x, y);
    if (inside(hit)) return { kind: 'at', x, y };
    return { kind: 'covered', x, y, by: hit ? describe(hit) : 'nothing' };
  }
  const r = rects[0];
  return { kind: 'off', x: Math.round(r.left + r.width / 2), y: Math.round(r.top + r.height / 2) };
}"#;

/// The page-side half of [`PageLink::scroll_into_view`]: when the element
/// (or the element holding a text node) is cut off by the viewport or by a
/// scrolled container around it, scrolls every one of them so that its
/// centre is in view. Answers whether anything moved.
const SCROLL_FN: &str = r#"function(mark, prop) {
  if (window[prop] !== mark) return { kind: 'doc' };
  if (!this.isConnected) return { kind: 'gone' };
  const el = this.nodeType === 1 ? this : this.parentElement;
  if (!el) return { kind: 'nobox' };
  const up = (n) => n.parentElement || (n.getRootNode() && n.getRootNode().host) || null;
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) return { kind: 'nobox' };
  let cut = r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth;
  for (let n = up(el); n && !cut; n = up(n)) {
    const s = getComputedStyle(n);
    if (!/(auto|scroll|hidden|clip)/.test(s.overflowX + ' ' + s.overflowY)) continue;
    const c = n.getBoundingClientRect();
    cut = r.top < c.top || r.left < c.left || r.bottom > c.bottom || r.right > c.right;
  }
  if (!cut) return { kind: 'scrolled', moved: false };
  const where = () => {
    const at = [scrollX, scrollY];
    for (let n = up(el); n; n = up(n)) at.push(n.scrollLeft, n.scrollTop);
    return at.join(',');
  };
  const before = where();
  el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
  return { kind: 'scrolled', moved: where() !== before };
}"#;

/// Registers elements under their ref numbers in the document that still
/// carries `mark` (`this` is the first element; `nodes` follow `nums`).
const REGISTER_FN: &str = r#"function(mark, prop, refsProp, nums, ...nodes) {
  if (window[prop] !== mark) return false;
  let refs = window[refsProp];
  if (!(refs instanceof Map)) {
    refs = new Map();
    Object.defineProperty(window, refsProp, { value: refs, configurable: true });
  }
  nums.forEach((n, i) => refs.set(n, new WeakRef(nodes[i])));
  return true;
}"#;

/// Calls `f(mark, prop, ...args)` on the element registered under ref `n`
/// (see `REGISTER_FN`), in the document that still carries `mark`.
const ON_REF_FN: &str = r#"(function(mark, prop, refsProp, n, f, args) {
  if (window[prop] !== mark) return { kind: 'doc' };
  const refs = window[refsProp];
  const held = refs instanceof Map ? refs.get(n) : undefined;
  const el = held && held.deref();
  if (!el) return { kind: 'unregistered' };
  return f.call(el, mark, prop, ...args);
})"#;

impl PageLink {
    /// Fills the text field `target` names (checked against its document
    /// mark as in [`locate`](Self::locate), and refused when hidden, off
    /// screen or covered): focuses it, selects its content and replaces it
    /// with `text` through the page's editing command (`insertText`, as a
    /// paste or an IME commit does: trusted `beforeinput`/`input` events),
    /// all in one call; `Input.insertText` takes over if the page refuses
    /// the command.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn fill(&self, target: SavedRef<'_>, text: &str) -> Result<FillResult> {
        let text = text.replace("\r\n", "\n");
        let (v, scrolled) = match self
            .edit(ElementTarget::Ref(target), Some(&text), true)
            .await?
        {
            Ok(v) => v,
            Err(refused) => return Ok(refused),
        };
        if v["typed"] != true {
            // The page refused the editing command: type through the input
            // pipeline instead (the content is selected, so it is replaced).
            let mut commands = typing::type_text(&text, false)?;
            if text.is_empty() {
                let delete = typing::key("Delete")?;
                commands.extend(keys::chord_commands(std::slice::from_ref(&delete)));
            }
            self.calls(commands).await?;
        }
        Ok(FillResult::Filled { scrolled })
    }

    /// Types `text` into the text field `target` names (a ref, checked and
    /// refused as [`fill`](Self::fill) does, or a CSS selector): focuses it
    /// (the caret at the end of its content, unless it had focus already),
    /// then types `text` at the caret key by key, as
    /// [`type_text`](Self::type_text) does, without clearing the field.
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for a selector that is invalid or matches
    /// nothing; otherwise as [`call`](Self::call).
    pub async fn type_into(&self, target: ElementTarget<'_>, text: &str) -> Result<FillResult> {
        let (_, scrolled) = match self.edit(target, None, false).await? {
            Ok(v) => v,
            Err(refused) => return Ok(refused),
        };
        self.type_text(text).await?;
        Ok(FillResult::Filled { scrolled })
    }

    /// Runs `TEXT_FN` on `target`: its answer once the field is focused
    /// (and `text` inserted, unless `None`), or why nothing was typed.
    async fn edit(
        &self,
        target: ElementTarget<'_>,
        text: Option<&str>,
        replace: bool,
    ) -> Result<std::result::Result<(Value, bool), FillResult>> {
        let function = TEXT_FN.replace("LOCATE", LOCATE_FN);
        let args = vec![json!(text), json!(replace)];
        let mut scrolled = false;
        loop {
            let v = match self.on_target(target, &function, args.clone()).await? {
                Ok(v) => v,
                Err(spot) => return Ok(Err(FillResult::Refused(spot))),
            };
            let spot = match v["kind"].as_str().unwrap_or_default() {
                "filled" => return Ok(Ok((v, scrolled))),
                "noedit" => {
                    return Ok(Err(FillResult::NotEditable(
                        v["by"].as_str().unwrap_or_default().to_owned(),
                    )));
                }
                _ => spot_of(v)?,
            };
            // Off screen, or cut off by a scrolled container: scrolled into
            // view once, then tried again.
            if scrolled
                || !matches!(
                    spot,
                    ElementSpot::OffScreen(_) | ElementSpot::Covered { .. }
                )
            {
                return Ok(Err(FillResult::Refused(spot)));
            }
            match self.scroll_into_view(target).await? {
                Ok(true) => scrolled = true,
                Ok(false) => return Ok(Err(FillResult::Refused(spot))),
                Err(other) => return Ok(Err(FillResult::Refused(other))),
            }
        }
    }

    /// Takes an accessibility snapshot, optionally scoped to the subtrees of
    /// the elements matching the CSS selector `scope`.
    ///
    /// The document gets a mark (a window property) the first time; while
    /// the mark is still `earlier_mark`, numbering goes on from
    /// `earlier_refs`, so an element keeps its ref across snapshots and
    /// processes. A navigation loses the mark, and numbering starts over.
    ///
    /// # Errors
    /// [`LumenError::InvalidData`] for an invalid selector or one that
    /// matches nothing in the accessibility tree; otherwise as
    /// [`call`](Self::call).
    pub async fn snapshot(
        &self,
        scope: Option<&str>,
        earlier_mark: Option<&str>,
        earlier_refs: &[(u32, i64)],
        earlier_frames: &[SnapshotFrame],
    ) -> Result<LinkedSnapshot> {
        let roots = match scope {
            Some(selector) => Some(self.matching_nodes(selector).await?),
            None => None,
        };
        let fresh = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let mark_js = format!(
            "(() => {{ if (!window.{MARK_PROPERTY}) window.{MARK_PROPERTY} = {fresh:?}; \
             return [window.{MARK_PROPERTY}, location.href]; }})()"
        );
        let mut replies = self
            .calls(vec![
                (
                    "Runtime.evaluate",
                    json!({ "expression": mark_js, "returnByValue": true }),
                ),
                ("Accessibility.getFullAXTree", json!({})),
            ])
            .await?;
        let marked = runtime::script_value(replies[0].clone())?;
        let mark = marked[0].as_str().unwrap_or_default().to_owned();
        let url = marked[1].as_str().unwrap_or_default().to_owned();
        let (mut refs, mut frames) = if earlier_mark == Some(mark.as_str()) {
            (AxRefs::seeded(earlier_refs), earlier_frames.to_vec())
        } else {
            (AxRefs::default(), Vec::new())
        };
        // Numbers go on from the highest given before in this document.
        let numbered = refs.pairs().last().map_or(0, |&(n, _)| n);
        let tree = self
            .with_frames(std::mem::take(&mut replies[1]), &mut frames, &fresh)
            .await?;
        let walked = walk(&tree, &mut refs, roots.as_ref());
        let pairs = refs.pairs();
        if let (Some(selector), Some(roots)) = (scope, &roots)
            && walked.is_empty()
        {
            return Err(LumenError::invalid_data(
                "selector",
                format!(
                    "{} element(s) match {selector:?} but nothing in them is in the \
                     accessibility tree (hidden, or no named content)",
                    roots.len()
                ),
            ));
        }
        // Older refs were registered by the snapshot that gave them (and
        // are found through their node otherwise, see `on_element`); the
        // registry holds the main frame's.
        let fresh: Vec<(u32, i64)> = pairs
            .iter()
            .filter(|&&(n, key)| n > numbered && unpack(key).0 == 0)
            .copied()
            .collect();
        if !fresh.is_empty()
            && let Err(e) = self.register(&mark, &fresh).await
        {
            tracing::debug!("registering snapshot refs: {e}");
        }
        Ok(LinkedSnapshot {
            snapshot: AxSnapshot {
                url,
                nodes: walked.into_iter().map(|(n, _)| n).collect(),
            },
            mark,
            refs: pairs,
            frames,
        })
    }

    /// The backend node ids of the elements matching a CSS selector.
    async fn matching_nodes(&self, selector: &str) -> Result<HashSet<i64>> {
        let quoted = serde_json::to_string(selector)
            .map_err(|e| LumenError::invalid_data("selector", e.to_string()))?;
        let list = self
            .call(
                "Runtime.evaluate",
                json!({
                    "expression": format!("Array.from(document.querySelectorAll({quoted}))"),
                    "returnByValue": false,
                }),
            )
            .await?;
        if let Some(ex) = list.get("exceptionDetails") {
            let why = ex["exception"]["description"]
                .as_str()
                .or_else(|| ex["text"].as_str())
                .unwrap_or("the selector is invalid");
            let why = why.lines().next().unwrap_or(why);
            return Err(LumenError::invalid_data(
                "selector",
                format!("{selector:?} is not a valid CSS selector ({why})"),
            ));
        }
        let Some(array) = list["result"]["objectId"].as_str() else {
            return Err(LumenError::invalid_data(
                "selector",
                format!("no element matches {selector:?}"),
            ));
        };
        let props = self
            .call(
                "Runtime.getProperties",
                json!({ "objectId": array, "ownProperties": true }),
            )
            .await?;
        let ids: Vec<String> = props["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["name"].as_str().is_some_and(|n| n.parse::<u32>().is_ok()))
            .filter_map(|p| p["value"]["objectId"].as_str().map(str::to_owned))
            .collect();
        if ids.is_empty() {
            let _ = self
                .call("Runtime.releaseObject", json!({ "objectId": array }))
                .await;
            return Err(LumenError::invalid_data(
                "selector",
                format!("no element matches {selector:?}"),
            ));
        }
        let mut commands: Vec<(&str, Value)> = ids
            .iter()
            .map(|id| ("DOM.describeNode", json!({ "objectId": id })))
            .collect();
        commands.push(("Runtime.releaseObject", json!({ "objectId": array })));
        let described = self.calls(commands).await?;
        Ok(described
            .iter()
            .filter_map(|d| d["node"]["backendNodeId"].as_i64())
            .collect())
    }

    /// Where the element `target` names can be acted on, provided its
    /// document still carries the ref's mark (from
    /// [`snapshot`](Self::snapshot)); checked in one step in the page, so a
    /// navigation can never make it point into another document.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn locate(&self, target: SavedRef<'_>) -> Result<ElementSpot> {
        match self
            .on_element(target, LOCATE_FN, Vec::new(), Vec::new())
            .await?
        {
            Ok(v) => spot_of(v),
            Err(spot) => Ok(spot),
        }
    }

    /// Scrolls the element `target` names into view when the viewport or a
    /// scrolled container around it cuts it off (every scrolling ancestor
    /// moves, so that its centre shows); answers whether anything scrolled,
    /// or why the element cannot be reached.
    ///
    /// # Errors
    /// As [`on_target`](Self::on_target).
    pub async fn scroll_into_view(
        &self,
        target: ElementTarget<'_>,
    ) -> Result<std::result::Result<bool, ElementSpot>> {
        match self.on_target(target, SCROLL_FN, Vec::new()).await? {
            Ok(v) if v["kind"] == "scrolled" => Ok(Ok(v["moved"] == true)),
            Ok(v) => Ok(Err(spot_of(v)?)),
            Err(spot) => Ok(Err(spot)),
        }
    }

    /// Where the element `target` names can be acted on, as
    /// [`locate`](Self::locate) says, after scrolling it into view when it
    /// lay outside the viewport or was cut off by a scrolled container;
    /// with whether it scrolled.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn locate_in_view(&self, target: SavedRef<'_>) -> Result<(ElementSpot, bool)> {
        let spot = self.locate(target).await?;
        if !matches!(
            spot,
            ElementSpot::OffScreen(_) | ElementSpot::Covered { .. }
        ) {
            return Ok((spot, false));
        }
        match self.scroll_into_view(ElementTarget::Ref(target)).await? {
            Ok(true) => Ok((self.locate(target).await?, true)),
            Ok(false) => Ok((spot, false)),
            Err(other) => Ok((other, false)),
        }
    }

    /// Runs the page function `function(mark, prop, ...args)` with `this`
    /// bound to the element `target` names and returns its value, or why
    /// the element cannot be reached (removed, or another document).
    ///
    /// The element is looked up in the page's ref registry (filled by
    /// [`snapshot`](Self::snapshot)) in one exchange, with `extra` commands
    /// sent alongside; only when the registry does not hold it (a snapshot
    /// by an older lumen, or the element was collected) is the DOM node
    /// resolved through CDP, two exchanges more.
    pub(super) async fn on_element(
        &self,
        target: SavedRef<'_>,
        function: &str,
        args: Vec<Value>,
        extra: Vec<(&str, Value)>,
    ) -> Result<std::result::Result<Value, ElementSpot>> {
        let (frame, backend) = unpack(target.backend);
        if frame != 0 {
            return self
                .on_frame_element(target, frame, backend, function, args)
                .await;
        }
        let literal = |v: &Value| v.to_string();
        let expression = format!(
            "{ON_REF_FN}({}, {}, {}, {}, {function}, {})",
            literal(&json!(target.mark)),
            literal(&json!(MARK_PROPERTY)),
            literal(&json!(REFS_PROPERTY)),
            target.number,
            literal(&Value::Array(args.clone())),
        );
        let mut commands = vec![(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        )];
        commands.extend(extra);
        match self.calls(commands).await {
            Ok(r) => {
                let v = runtime::script_value(r[0].clone())?;
                match v["kind"].as_str() {
                    Some("doc") => return Ok(Err(ElementSpot::OtherDocument)),
                    Some("unregistered") => {}
                    _ => return Ok(Ok(v)),
                }
            }
            // A document being swapped: let the node lookup decide.
            Err(LumenError::Script { .. }) => {}
            Err(e) => return Err(e),
        }
        let object = match self.resolve(target.backend, target.mark).await? {
            Ok(object) => object,
            Err(spot) => return Ok(Err(spot)),
        };
        let mut all = vec![json!(target.mark), json!(MARK_PROPERTY)];
        all.extend(args);
        Ok(Ok(self.call_on(None, &object, function, all).await?))
    }

    /// [`on_element`](Self::on_element) for an element inside frame
    /// `frame`: resolved on the frame's session, the function run in the
    /// frame's document with the frame's mark, and the point it answers
    /// (`x`, `y`) moved into the page's viewport.
    async fn on_frame_element(
        &self,
        target: SavedRef<'_>,
        frame: u32,
        backend: i64,
        function: &str,
        args: Vec<Value>,
    ) -> Result<std::result::Result<Value, ElementSpot>> {
        let Some(saved) = target.frames.get(frame as usize - 1) else {
            return Ok(Err(ElementSpot::OtherDocument));
        };
        let Ok(session) = self.session_of(target.frames, frame).await? else {
            return Ok(Err(ElementSpot::Gone));
        };
        let Some(object) = self.resolve_in(session.as_deref(), backend).await? else {
            return Ok(Err(ElementSpot::Gone));
        };
        let mut all = vec![json!(saved.mark), json!(MARK_PROPERTY)];
        all.extend(args);
        let mut v = self
            .call_on(session.as_deref(), &object, function, all)
            .await?;
        if let (Some(x), Some(y)) = (v["x"].as_f64(), v["y"].as_f64()) {
            let Some((dx, dy)) = self.frame_offset(target.frames, frame).await? else {
                return Ok(Err(ElementSpot::Gone));
            };
            v["x"] = json!(x + dx);
            v["y"] = json!(y + dy);
        }
        Ok(Ok(v))
    }

    /// Puts the elements of new refs in the page's ref registry, so that a
    /// later process reaches them in one exchange (see
    /// [`on_element`](Self::on_element)). Best effort: a ref that is not
    /// registered is still found through its DOM node.
    async fn register(&self, mark: &str, refs: &[(u32, i64)]) -> Result<()> {
        const GROUP: &str = "lumen-refs";
        let resolves = refs
            .iter()
            .map(|(_, backend)| {
                (
                    "DOM.resolveNode",
                    json!({ "backendNodeId": backend, "objectGroup": GROUP }),
                )
            })
            .collect();
        // A node already gone is refused alone; the others still resolve.
        let answers = self.exchange(resolves).await?;
        let mut nums = Vec::new();
        let mut objects = Vec::new();
        for ((num, _), answer) in refs.iter().zip(&answers) {
            if let Some(id) = answer
                .as_ref()
                .ok()
                .and_then(|a| a["object"]["objectId"].as_str())
            {
                nums.push(*num);
                objects.push(id.to_owned());
            }
        }
        let Some(first) = objects.first().cloned() else {
            return Ok(());
        };
        let mut arguments = vec![
            json!({ "value": mark }),
            json!({ "value": MARK_PROPERTY }),
            json!({ "value": REFS_PROPERTY }),
            json!({ "value": nums }),
        ];
        arguments.extend(objects.iter().map(|id| json!({ "objectId": id })));
        self.calls(vec![
            (
                "Runtime.callFunctionOn",
                json!({
                    "objectId": first,
                    "functionDeclaration": REGISTER_FN,
                    "arguments": arguments,
                    "returnByValue": true,
                }),
            ),
            (
                "Runtime.releaseObjectGroup",
                json!({ "objectGroup": GROUP }),
            ),
        ])
        .await
        .map(drop)
    }

    /// A remote object for the node, or why there is none: removed, or
    /// another document altogether.
    async fn resolve(
        &self,
        backend: i64,
        mark: &str,
    ) -> Result<std::result::Result<String, ElementSpot>> {
        let resolved = self
            .call("DOM.resolveNode", json!({ "backendNodeId": backend }))
            .await;
        let object = match resolved {
            Ok(r) => r["object"]["objectId"].as_str().map(str::to_owned),
            Err(LumenError::Script { .. }) => None,
            Err(e) => return Err(e),
        };
        if let Some(object) = object {
            return Ok(Ok(object));
        }
        let now = self
            .evaluate(&format!("window.{MARK_PROPERTY} || null"))
            .await?;
        Ok(Err(if now.as_str() == Some(mark) {
            ElementSpot::Gone
        } else {
            ElementSpot::OtherDocument
        }))
    }
}

/// Reads the answer of `LOCATE_FN`.
pub(super) fn spot_of(v: Value) -> Result<ElementSpot> {
    #[derive(Deserialize)]
    struct Spot {
        kind: String,
        #[serde(default)]
        x: f64,
        #[serde(default)]
        y: f64,
        #[serde(default)]
        by: String,
    }
    let spot: Spot = serde_json::from_value(v)
        .map_err(|e| LumenError::invalid_data("element position", e.to_string()))?;
    let at = Point::new(spot.x.round() as i32, spot.y.round() as i32);
    Ok(match spot.kind.as_str() {
        "at" => ElementSpot::At(at),
        "doc" => ElementSpot::OtherDocument,
        "gone" => ElementSpot::Gone,
        "off" => ElementSpot::OffScreen(at),
        "covered" => ElementSpot::Covered { at, by: spot.by },
        _ => ElementSpot::NoBox,
    })
}

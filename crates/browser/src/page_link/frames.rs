//! [`PageLink`]'s frames: snapshots that go into every `<iframe>` at any
//! depth, same-process and out-of-process (OOPIF) alike, and refs that act
//! in the frame they were given in.
//!
//! - **Finding frames.** An `Iframe` node of a frame's accessibility tree
//!   names its owner element; `DOM.describeNode` on it gives the frame it
//!   holds. A frame in the same renderer is read on the session of the
//!   frame around it (`Accessibility.getFullAXTree` with its `frameId`); a
//!   frame of another site runs in its own process, reached through its own
//!   target: `Target.setAutoAttach` (flattened, on the page and on each
//!   frame target in turn) attaches them on this link's one WebSocket.
//! - **One tree.** Each frame's tree is put under its `Iframe` node, so the
//!   walk (refs, caps, depth) is the same as for one document. DOM node ids
//!   are per renderer, so a frame's nodes are keyed by their id and the
//!   frame's number ([`pack`]); the frames a snapshot went into are saved
//!   with its refs ([`SnapshotFrame`]), in the order first met, so a frame
//!   keeps its number across snapshots.
//! - **Acting.** A ref of a frame is resolved on that frame's session and
//!   its page functions run in that frame's document (its own mark, its
//!   own `elementFromPoint`); the points they answer are moved by the
//!   frame's offset in the page (its owner's content box, frame by frame),
//!   so the mouse events on the page land on the element.

use std::collections::HashMap;

use lumen_core::{LumenError, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::PageLink;
use crate::ax::{graft, is_iframe};
use crate::limits::MAX_FRAMES;

/// The most frames nested inside each other a snapshot goes into.
const MAX_FRAME_DEPTH: u32 = 8;

/// Where a frame number starts in a node key.
const FRAME_SHIFT: u32 = 40;

/// A frame of the page (not its main frame) that a snapshot went into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFrame {
    /// Chromium's id of the frame (an out-of-process frame's target id too).
    pub frame_id: String,
    /// The frame its `<iframe>` is in: 0 for the main frame, `n` for the
    /// `n`th frame of the list.
    pub parent: u32,
    /// The `<iframe>`'s DOM node id, in the parent frame's renderer.
    pub owner: i64,
    /// Whether the frame runs in a process of its own (reached through its
    /// own target).
    pub isolated: bool,
    /// The mark of the frame's document when the snapshot was taken.
    pub mark: String,
}

/// The key of a node: its DOM node id, with the number of its frame (0 for
/// the main frame, `n` for the `n`th of the snapshot's frames) above it.
pub(crate) fn pack(frame: u32, backend: i64) -> i64 {
    backend | (i64::from(frame) << FRAME_SHIFT)
}

/// The frame number and DOM node id of a key made by [`pack`].
pub(crate) fn unpack(key: i64) -> (u32, i64) {
    (
        (key >> FRAME_SHIFT) as u32,
        key & ((1i64 << FRAME_SHIFT) - 1),
    )
}

/// Sets (once) and reads a document's mark; `this` is the document.
const DOC_MARK_FN: &str = "function(prop, fresh) { const w = this.defaultView; \
     if (!w) return null; if (!w[prop]) w[prop] = fresh; return w[prop]; }";

/// Where an `<iframe>`'s content box starts in its own document's viewport.
const OWNER_ORIGIN_FN: &str = "function() { const r = this.getBoundingClientRect(); \
     const s = getComputedStyle(this); \
     return [r.left + this.clientLeft + parseFloat(s.paddingLeft || 0), \
             r.top + this.clientTop + parseFloat(s.paddingTop || 0)]; }";

impl PageLink {
    /// Attaches to the page's out-of-process frames at every depth and
    /// returns their sessions by frame id (kept for later calls on this
    /// link).
    ///
    /// Attaching stays on, so a link kept between commands (the keeper's)
    /// has frames attached while nobody reads their announcements: each
    /// call turns it off (which detaches them) and on again, and takes the
    /// announcements that come before the answer.
    pub(super) async fn frame_sessions(&self) -> Result<HashMap<String, String>> {
        let attach = |on: bool| {
            (
                "Target.setAutoAttach",
                json!({ "autoAttach": on, "waitForDebuggerOnStart": false, "flatten": true }),
            )
        };
        self.frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        let mut on: Vec<Option<String>> = vec![None];
        let mut rounds = 0;
        while let Some(session) = on.pop() {
            rounds += 1;
            if rounds > MAX_FRAMES {
                break;
            }
            let commands = if session.is_none() {
                vec![attach(false), attach(true)]
            } else {
                vec![attach(true)]
            };
            let answer = self.exchange_in(session.as_deref(), commands).await?.pop();
            if let Some(Err(e)) = answer {
                tracing::debug!("attaching to frames: {e}");
                continue;
            }
            let mut wire = self.wire.lock().await;
            let mut known = self.frames.lock().unwrap_or_else(|e| e.into_inner());
            wire.events.retain(|e| match e["method"].as_str() {
                Some("Target.attachedToTarget") => {
                    let info = &e["params"]["targetInfo"];
                    if info["type"] == "iframe"
                        && let (Some(id), Some(child)) =
                            (info["targetId"].as_str(), e["params"]["sessionId"].as_str())
                        && known.insert(id.to_owned(), child.to_owned()).as_deref() != Some(child)
                    {
                        on.push(Some(child.to_owned()));
                    }
                    false
                }
                Some("Target.detachedFromTarget") => {
                    if let Some(child) = e["params"]["sessionId"].as_str() {
                        known.retain(|_, s| s != child);
                    }
                    false
                }
                _ => true,
            });
        }
        Ok(self
            .frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    /// Puts the trees of the frames inside `main` (a `getFullAXTree`
    /// answer of the main frame) under their `Iframe` nodes, at every
    /// depth; `frames` starts as the frames known from earlier snapshots
    /// and ends as every frame gone into. Node keys are [`pack`]ed; the
    /// answer is one tree for [`walk`](crate::ax::walk).
    pub(super) async fn with_frames(
        &self,
        mut main: Value,
        frames: &mut Vec<SnapshotFrame>,
        fresh_mark: &str,
    ) -> Result<Value> {
        let mut nodes = match main.get_mut("nodes") {
            Some(Value::Array(list)) if list.iter().any(is_iframe) => std::mem::take(list),
            _ => return Ok(main),
        };
        let sessions = self.frame_sessions().await?;
        // (frame number, its session, index of its first node in `nodes`,
        // depth)
        let mut queue = vec![(0u32, None::<String>, 0usize, 0u32)];
        while let Some((number, session, from, depth)) = queue.pop() {
            let owners: Vec<(usize, i64)> = nodes[from..]
                .iter()
                .enumerate()
                .filter(|(_, n)| is_iframe(n))
                .filter_map(|(i, n)| Some((from + i, n["backendDOMNodeId"].as_i64()?)))
                .filter(|&(_, key)| unpack(key).0 == number)
                .collect();
            if owners.is_empty() || depth >= MAX_FRAME_DEPTH {
                continue;
            }
            let describe = owners
                .iter()
                .map(|&(_, key)| {
                    (
                        "DOM.describeNode",
                        json!({ "backendNodeId": unpack(key).1 }),
                    )
                })
                .collect();
            let described = self.exchange_in(session.as_deref(), describe).await?;
            for (&(at, key), d) in owners.iter().zip(described) {
                let Some(frame_id) = d
                    .ok()
                    .and_then(|d| d["node"]["frameId"].as_str().map(str::to_owned))
                else {
                    continue;
                };
                let isolated = sessions.get(&frame_id).cloned();
                let child_session = isolated.clone().or_else(|| session.clone());
                let tree = match &isolated {
                    Some(_) => json!({}),
                    None => json!({ "frameId": frame_id }),
                };
                let Some(Ok(tree)) = self
                    .exchange_in(
                        child_session.as_deref(),
                        vec![("Accessibility.getFullAXTree", tree)],
                    )
                    .await?
                    .pop()
                else {
                    continue;
                };
                let child_nodes = tree["nodes"].as_array().cloned().unwrap_or_default();
                let Some(root) = child_nodes.first().cloned() else {
                    continue;
                };
                let index = match frames.iter().position(|f| f.frame_id == frame_id) {
                    Some(i) => i,
                    None if frames.len() < MAX_FRAMES => {
                        frames.push(SnapshotFrame {
                            frame_id: frame_id.clone(),
                            parent: number,
                            owner: unpack(key).1,
                            isolated: isolated.is_some(),
                            mark: String::new(),
                        });
                        frames.len() - 1
                    }
                    None => continue,
                };
                let child = index as u32 + 1;
                let mark = match root["backendDOMNodeId"].as_i64() {
                    Some(doc) => self
                        .document_mark(child_session.as_deref(), doc, fresh_mark)
                        .await?
                        .unwrap_or_default(),
                    None => String::new(),
                };
                let frame = &mut frames[index];
                frame.parent = number;
                frame.owner = unpack(key).1;
                frame.isolated = isolated.is_some();
                frame.mark = mark;
                let Some(start) = graft(&mut nodes, at, child_nodes, &format!("f{child}:"), |b| {
                    pack(child, b)
                }) else {
                    continue;
                };
                queue.push((child, child_session, start, depth + 1));
            }
        }
        // The main frame's keys are its ids as they are (frame 0).
        Ok(json!({ "nodes": nodes }))
    }

    /// The mark of the document whose node is `doc` (set to `fresh` when
    /// it has none); `None` when the document is gone.
    async fn document_mark(
        &self,
        session: Option<&str>,
        doc: i64,
        fresh: &str,
    ) -> Result<Option<String>> {
        let Some(object) = self.resolve_in(session, doc).await? else {
            return Ok(None);
        };
        let v = self
            .call_on(
                session,
                &object,
                DOC_MARK_FN,
                vec![json!(super::refs::MARK_PROPERTY), json!(fresh)],
            )
            .await?;
        Ok(v.as_str().map(str::to_owned))
    }

    /// A remote object for the DOM node `backend` on `session`; `None`
    /// when the node is gone.
    pub(super) async fn resolve_in(
        &self,
        session: Option<&str>,
        backend: i64,
    ) -> Result<Option<String>> {
        let answer = self
            .exchange_in(
                session,
                vec![("DOM.resolveNode", json!({ "backendNodeId": backend }))],
            )
            .await?
            .pop();
        Ok(match answer {
            Some(Ok(v)) => v["object"]["objectId"].as_str().map(str::to_owned),
            _ => None,
        })
    }

    /// Calls `function(...args)` on `object` (on `session`) and returns its
    /// value, releasing the object.
    pub(super) async fn call_on(
        &self,
        session: Option<&str>,
        object: &str,
        function: &str,
        args: Vec<Value>,
    ) -> Result<Value> {
        let arguments: Vec<Value> = args.into_iter().map(|v| json!({ "value": v })).collect();
        let mut answers = self
            .exchange_in(
                session,
                vec![
                    (
                        "Runtime.callFunctionOn",
                        json!({
                            "objectId": object,
                            "functionDeclaration": function,
                            "arguments": arguments,
                            "returnByValue": true,
                        }),
                    ),
                    ("Runtime.releaseObject", json!({ "objectId": object })),
                ],
            )
            .await?;
        answers.truncate(1);
        let answer = answers.pop().unwrap_or_else(|| {
            Err(LumenError::disconnected(
                "Runtime.callFunctionOn: no answer",
            ))
        })?;
        crate::protocol::runtime::script_value(answer)
    }

    /// The session a frame's nodes are reached on (`None`: the page's);
    /// `Err(())` when an out-of-process frame is no longer there.
    pub(super) async fn session_of(
        &self,
        frames: &[SnapshotFrame],
        number: u32,
    ) -> Result<std::result::Result<Option<String>, ()>> {
        let mut n = number;
        for _ in 0..=MAX_FRAME_DEPTH {
            if n == 0 {
                return Ok(Ok(None));
            }
            let Some(frame) = frames.get(n as usize - 1) else {
                return Ok(Err(()));
            };
            if frame.isolated {
                let known = self
                    .frames
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&frame.frame_id)
                    .cloned();
                let session = match known {
                    Some(s) => Some(s),
                    None => self.frame_sessions().await?.get(&frame.frame_id).cloned(),
                };
                return Ok(session.map(Some).ok_or(()));
            }
            n = frame.parent;
        }
        Ok(Err(()))
    }

    /// Where frame `number`'s viewport starts in the page's, CSS pixels
    /// (its owners' content boxes added up); `None` when one is gone.
    pub(super) async fn frame_offset(
        &self,
        frames: &[SnapshotFrame],
        number: u32,
    ) -> Result<Option<(f64, f64)>> {
        let (mut x, mut y) = (0.0, 0.0);
        let mut n = number;
        for _ in 0..=MAX_FRAME_DEPTH {
            if n == 0 {
                return Ok(Some((x, y)));
            }
            let Some(frame) = frames.get(n as usize - 1) else {
                return Ok(None);
            };
            let Ok(session) = self.session_of(frames, frame.parent).await? else {
                return Ok(None);
            };
            let Some(owner) = self.resolve_in(session.as_deref(), frame.owner).await? else {
                return Ok(None);
            };
            let at = self
                .call_on(session.as_deref(), &owner, OWNER_ORIGIN_FN, Vec::new())
                .await?;
            x += at[0].as_f64().unwrap_or(0.0);
            y += at[1].as_f64().unwrap_or(0.0);
            n = frame.parent;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_its_frame_and_node() {
        assert_eq!(unpack(pack(0, 12)), (0, 12));
        assert_eq!(unpack(pack(3, 987_654_321)), (3, 987_654_321));
        assert_eq!(pack(0, 77), 77);
    }
}

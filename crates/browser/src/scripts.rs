//! JavaScript the tab installs in pages, the probes it evaluates, and what
//! it reads of a page for the loop (form fields, the scroll offset).
//!
//! The init script runs before any page script (`Page.addScriptToEvaluateOnNewDocument`)
//! and keeps a hidden, non-enumerable `window.__lumenAgent` with:
//! - `mutations`: DOM mutation records seen (one `MutationObserver` on the
//!   document);
//! - `changes`: scroll, focus, input and change events seen;
//! - `stillFrames`: animation frames since the last DOM mutation or scroll
//!   event, counted up to 2 (a mutation or scroll starts a short chain of
//!   `requestAnimationFrame` callbacks that stops there), so settling can
//!   tell a page that has been still for two frames without trusting the
//!   clock: on a loaded machine frames come late;
//! - `timers`: pending short `setTimeout`s (≤ 1.5 s, at most two levels of
//!   chaining, so polling loops are ignored), which settling waits for;
//! - `clickable`: elements that registered pointer or key listeners, so the
//!   receipt can tell a scripted `div` from dead space.

/// Installed in every document before page scripts run.
pub(crate) const INIT_SCRIPT: &str = r#"(() => {
  if (window.__lumenAgent) return;
  const A = { mutations: 0, changes: 0, stillFrames: 2, counting: false, timers: new Map(),
              depth: 0, clickable: new WeakSet(), st: window.setTimeout.bind(window) };
  Object.defineProperty(window, '__lumenAgent', { value: A, enumerable: false });
  const raf = window.requestAnimationFrame.bind(window);
  const frame = () => {
    A.stillFrames += 1;
    if (A.stillFrames < 2) raf(frame); else A.counting = false;
  };
  const moved = () => {
    A.stillFrames = 0;
    if (!A.counting) { A.counting = true; raf(frame); }
  };
  try {
    new MutationObserver((records) => { A.mutations += records.length; moved(); })
      .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  } catch (e) {}
  for (const type of ['scroll', 'focusin', 'input', 'change']) {
    addEventListener(type, () => {
      A.changes += 1;
      if (type === 'scroll') moved();
    }, { capture: true, passive: true });
  }
  const setT = window.setTimeout, clearT = window.clearTimeout;
  window.setTimeout = function (fn, delay, ...rest) {
    const d = Number(delay) || 0;
    if (typeof fn !== 'function' || d > 1500 || A.depth >= 2) return setT.call(this, fn, delay, ...rest);
    const depth = A.depth + 1;
    let id = 0;
    id = setT.call(this, function () {
      A.timers.delete(id);
      const prev = A.depth;
      A.depth = depth;
      try { return fn.apply(this, arguments); } finally { A.depth = prev; }
    }, delay, ...rest);
    A.timers.set(id, performance.now() + d);
    return id;
  };
  window.clearTimeout = function (id) { A.timers.delete(id); return clearT.call(this, id); };
  const add = EventTarget.prototype.addEventListener;
  const pointerish = new Set(['click', 'mousedown', 'mouseup', 'pointerdown', 'pointerup', 'dblclick',
                              'contextmenu', 'auxclick', 'touchstart', 'keydown']);
  EventTarget.prototype.addEventListener = function (type, ...rest) {
    try {
      if (pointerish.has(type) && this instanceof Element && this !== document.documentElement && this !== document.body) {
        A.clickable.add(this);
      }
    } catch (e) {}
    return add.call(this, type, ...rest);
  };
})()"#;

/// `(x, y) => state`: URL, counters, focus and (when `x` is a number) the
/// element under the point, descending into same-origin frames and shadow
/// roots.
pub(crate) const PROBE_FN: &str = r#"((x, y) => {
  const A = window.__lumenAgent;
  const textOf = (s) => (s || '').replace(/\s+/g, ' ').trim().slice(0, 80) || null;
  const ROLES = { a: 'link', button: 'button', select: 'combobox', textarea: 'textbox', img: 'img',
                  h1: 'heading', h2: 'heading', h3: 'heading', h4: 'heading', h5: 'heading', h6: 'heading',
                  nav: 'navigation', main: 'main', form: 'form', li: 'listitem', ul: 'list', ol: 'list',
                  table: 'table', dialog: 'dialog', summary: 'button', option: 'option', label: null,
                  iframe: 'iframe' };
  const INPUT_ROLES = { checkbox: 'checkbox', radio: 'radio', button: 'button', submit: 'button',
                        reset: 'button', image: 'button', range: 'slider', search: 'searchbox',
                        file: 'button', hidden: null };
  const NOT_TEXT = new Set(['checkbox', 'radio', 'button', 'submit', 'reset', 'image', 'range', 'file',
                            'hidden', 'color']);
  const INTERACTIVE_ROLES = new Set(['button', 'link', 'checkbox', 'radio', 'menuitem', 'tab', 'option',
                                     'switch', 'textbox', 'combobox', 'slider', 'searchbox', 'treeitem',
                                     'menuitemcheckbox', 'menuitemradio', 'spinbutton']);
  const roleOf = (el) => {
    const explicit = el.getAttribute('role');
    if (explicit) return explicit.split(' ')[0];
    const tag = el.tagName.toLowerCase();
    if (tag === 'a') return el.hasAttribute('href') ? 'link' : null;
    if (tag === 'input') return INPUT_ROLES[el.type] === undefined ? 'textbox' : INPUT_ROLES[el.type];
    return ROLES[tag] || null;
  };
  const nameOf = (el) => {
    const label = el.getAttribute('aria-label');
    if (label) return textOf(label);
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const t = by.split(/\s+/).map((id) => { const n = document.getElementById(id); return n ? n.textContent : ''; }).join(' ');
      if (textOf(t)) return textOf(t);
    }
    if (el.labels && el.labels.length) return textOf(el.labels[0].innerText);
    for (const attr of ['alt', 'title', 'placeholder']) {
      const v = el.getAttribute(attr);
      if (v) return textOf(v);
    }
    const tag = el.tagName.toLowerCase();
    if (tag === 'input' && (el.type === 'submit' || el.type === 'button')) return textOf(el.value);
    if (tag === 'input' || tag === 'textarea' || tag === 'select') return null;
    return textOf(el.innerText || el.textContent);
  };
  const interactiveEl = (n) => {
    const tag = n.tagName.toLowerCase();
    if (tag === 'a' && n.hasAttribute('href')) return true;
    if (['button', 'select', 'textarea', 'label', 'summary', 'option', 'iframe', 'frame', 'video', 'audio'].includes(tag)) return true;
    if (tag === 'input' && n.type !== 'hidden') return true;
    const role = n.getAttribute('role');
    if (role && INTERACTIVE_ROLES.has(role)) return true;
    if (n.hasAttribute('onclick') || n.hasAttribute('onmousedown') || n.isContentEditable) return true;
    const tabindex = n.getAttribute('tabindex');
    if (tabindex !== null && Number(tabindex) >= 0) return true;
    if (n.ownerDocument.defaultView.__lumenAgent && n.ownerDocument.defaultView.__lumenAgent.clickable.has(n)) return true;
    try { if (getComputedStyle(n).cursor === 'pointer') return true; } catch (e) {}
    return false;
  };
  const describe = (el, frameUrl) => {
    if (!el || el.nodeType !== 1) return null;
    const tag = el.tagName.toLowerCase();
    let interactive = false;
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
      if (n === n.ownerDocument.body || n === n.ownerDocument.documentElement) break;
      if (interactiveEl(n)) { interactive = true; break; }
    }
    const editable = !!el.isContentEditable || tag === 'textarea' || (tag === 'input' && !NOT_TEXT.has(el.type));
    let frame = frameUrl || null;
    if (!frame && (tag === 'iframe' || tag === 'frame')) frame = el.src || null;
    const d = { tag, interactive, editable };
    const role = roleOf(el); if (role) d.role = role;
    const name = nameOf(el); if (name) d.name = name;
    if (frame) d.frameUrl = frame;
    const row = el.closest('tr, li, [role=row], [role=listitem], [role=article], article');
    if (row) { const context = textOf(row.innerText || row.textContent); if (context) d.context = context; }
    return d;
  };
  const at = (doc, px, py, frameUrl) => {
    let el = doc.elementFromPoint(px, py);
    while (el && el.shadowRoot) {
      const inner = el.shadowRoot.elementFromPoint(px, py);
      if (!inner || inner === el) break;
      el = inner;
    }
    if (el && (el.tagName === 'IFRAME' || el.tagName === 'FRAME')) {
      let innerDoc = null;
      try { innerDoc = el.contentDocument; } catch (e) {}
      if (innerDoc) {
        const r = el.getBoundingClientRect();
        const inner = at(innerDoc, px - r.left - el.clientLeft, py - r.top - el.clientTop, innerDoc.location.href);
        if (inner) return inner;
      }
    }
    return describe(el, frameUrl);
  };
  const focused = () => {
    let el = document.activeElement, frameUrl = null;
    while (el && (el.tagName === 'IFRAME' || el.tagName === 'FRAME')) {
      let d = null;
      try { d = el.contentDocument; } catch (e) {}
      if (!d) break;
      frameUrl = d.location.href;
      el = d.activeElement;
    }
    if (!el || el === el.ownerDocument.body || el === el.ownerDocument.documentElement) return null;
    return describe(el, frameUrl);
  };
  const out = { url: location.href, mutations: A ? A.mutations : -1, changes: A ? A.changes : -1,
                focus: focused() };
  if (typeof x === 'number') out.target = at(document, x, y, null);
  return out;
})"#;

/// `(defer, mark) => Promise`: resolves at the next animation frame (or
/// after 250 ms when frames are not being produced) saying whether the
/// layout signature held from now to that frame, and with the pending short
/// timers. A loaded document whose DOM and scroll positions have already
/// been still for two frames (no mutation, no scroll event; the init
/// script's `stillFrames`) answers at once: waiting one more frame could only repeat what those two
/// showed (and the screenshot that follows waits for a fresh frame anyway).
/// With `defer`, a loaded document that changed a moment ago
/// answers at once too, with its [`PAGE_MARK`] (`mark()`), and the frame's
/// check is left to the screenshot that follows
/// ([`SettleOptions::stable_at_capture`](lumen_core::SettleOptions::stable_at_capture)).
pub(crate) const SETTLE_PROBE: &str = r#"((defer, mark) => new Promise((resolve) => {
  const A = window.__lumenAgent;
  const later = A ? A.st : setTimeout;
  const sig = () => {
    const d = document.documentElement;
    return [d ? d.scrollWidth : 0, d ? d.scrollHeight : 0, scrollX, scrollY, A ? A.mutations : 0,
            document.readyState].join('|');
  };
  const before = sig();
  let done = false;
  const finish = (marked) => {
    if (done) return;
    done = true;
    const now = performance.now();
    let pending = 0, next = null;
    if (A) for (const due of A.timers.values()) { pending += 1; if (next === null || due < next) next = due; }
    resolve({ stable: sig() === before, pending, nextIn: next === null ? null : Math.max(0, next - now),
              ready: document.readyState, mark: marked });
  };
  const loaded = A && document.readyState === 'complete';
  if (loaded && A.stillFrames >= 2) {
    finish(null);
    return;
  }
  if (loaded && defer) {
    finish(mark());
    return;
  }
  requestAnimationFrame(() => finish(null));
  later(() => finish(null), 250);
}))"#;

/// `(x, y, dx, dy) => bool`: whether a wheel at the point could scroll
/// anything: a scroll container under it (shadow roots and ancestors
/// included) or the page itself with room left that way. A frame under the
/// point is taken to have room (its document may not be readable from
/// here).
pub(crate) const SCROLL_ROOM_FN: &str = r#"((x, y, dx, dy) => {
  const scrolls = (v) => v === 'auto' || v === 'scroll' || v === 'overlay';
  const fits = (pos, size, view, d) => (d > 0 && pos + view < size - 1) || (d < 0 && pos > 0);
  let el = document.elementFromPoint(x, y);
  while (el && el.shadowRoot) {
    const inner = el.shadowRoot.elementFromPoint(x, y);
    if (!inner || inner === el) break;
    el = inner;
  }
  for (; el; el = el.parentElement || (el.getRootNode() instanceof ShadowRoot ? el.getRootNode().host : null)) {
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME' || el.tagName === 'EMBED' || el.tagName === 'OBJECT') {
      return true;
    }
    const s = getComputedStyle(el);
    if ((scrolls(s.overflowY) && fits(el.scrollTop, el.scrollHeight, el.clientHeight, dy)) ||
        (scrolls(s.overflowX) && fits(el.scrollLeft, el.scrollWidth, el.clientWidth, dx))) {
      return true;
    }
  }
  const root = document.scrollingElement || document.documentElement;
  return !!root && (fits(scrollY, root.scrollHeight, innerHeight, dy) ||
                    fits(scrollX, root.scrollWidth, innerWidth, dx));
})"#;

/// The page's state as a screenshot standing in for settling's last frame
/// compares it before and after capturing: the document's scroll size and
/// position, the DOM mutations and the scroll, focus and input events seen,
/// and the ready state (`null` without the init script).
pub(crate) const PAGE_MARK: &str = r#"(() => {
  const A = window.__lumenAgent, d = document.documentElement;
  return A ? [d ? d.scrollWidth : 0, d ? d.scrollHeight : 0, scrollX, scrollY, A.mutations, A.changes,
              document.readyState].join('|') : null;
})()"#;

/// The visible form controls (inputs, selects, text areas; hidden and
/// password fields left out) in document order, at most 30, as
/// `[{label, value}]`: the label is the first `<label>`'s text, else the
/// name, id, placeholder or type (at most 200 characters); the value at
/// most 4,096 characters (the loop redacts secrets before it shortens
/// values for the prompt, so the value must reach it whole), `checked` for
/// a checked box or radio, empty when nothing is held.
pub(crate) const FORM_FIELDS: &str = r#"(() => {
  const out = [];
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden' || el.type === 'password' || el.offsetParent === null) continue;
    const label = (el.labels && el.labels[0] && el.labels[0].innerText) || el.name || el.id || el.placeholder || el.type;
    const value = el.type === 'checkbox' || el.type === 'radio' ? (el.checked ? 'checked' : '') : el.value;
    out.push({ label: label.trim().slice(0, 200), value: value ? String(value).slice(0, 4096) : '' });
    if (out.length >= 30) break;
  }
  return out;
})()"#;

/// The page's scroll offset, `[scrollX, scrollY]`.
pub(crate) const SCROLL_OFFSET: &str = "[scrollX, scrollY]";

//! MiniWoB++ for the offline eval: the task pages come from the `miniwob`
//! wheel on PyPI (MIT licence), fetched at eval time into
//! `target/miniwob/` with `pip download` (hash-pinned) and unpacked with
//! Python's own `zipfile`; no third-party JavaScript is committed. They are
//! served from 127.0.0.1.
//!
//! An episode: load `miniwob/<task>.html`, seed its PRNG with
//! `Math.seedrandom(seed)`, raise `core.EPISODE_MAX_TIME` far above any
//! run's length, call `core.startEpisodeReal()`, and take the instruction
//! from `core.getUtterance()`. Success is `WOB_DONE_GLOBAL &&
//! WOB_RAW_REWARD_GLOBAL > 0`, read after the run.
//!
//! The model is an oracle: a small script per task, asked once per model
//! turn (when the loop has taken that step's screenshot), reads the page as
//! it is then (which button, which colour, which shape, whether the date
//! picker is open yet) and returns that turn's actions as viewport points,
//! which the mock provider then sends in each provider's wire format; no
//! actions means "done". The episode's reward, computed by MiniWoB's own
//! code from what the engine really clicked and typed, is the check.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::util;

/// The pinned wheel.
const WHEEL: &str = "miniwob-1.1.0-py3-none-any.whl";
const REQUIREMENT: &str = "miniwob==1.1.0 --hash=sha256:297006e84219d56ad037e843527ed773a4a82509dc43b6031ec4a3ad3e3e61d9\n";

/// One MiniWoB task we can script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MiniWobTask {
    /// The page name (`click-test`).
    pub(crate) name: &'static str,
    /// In the `--quick` slice.
    pub(crate) quick: bool,
    /// Information only in colour or SVG (a test of screenshot grounding).
    pub(crate) visual: bool,
    /// The oracle: a JS function body that sees the page as it is when the
    /// model is asked (and `turn`, the 0-based model turn) and returns that
    /// turn's actions (see [`parse_oracle`]); an empty list means "done".
    oracle: &'static str,
}

/// Helpers every oracle can use. `c(e)`: the centre of an element (an error
/// when it is missing or not laid out); `vis(e)`: whether it is laid out;
/// `all(sel)`: the matches as an array; `utter`: the instruction; `quoted()`
/// and `quotes()`: the first and every `"…"` of the instruction;
/// `await still(e)`: waits until a scrolled element stops moving (keyboard
/// scrolling is animated), as a model would look once the page is still;
/// `shape(e)`: what an SVG item of MiniWoB's shape grid looks like (colour,
/// size, letter/digit/shape and which), read from its attributes;
/// `describes(desc, s)`: whether a query phrase ("large red circle", "small
/// item", "blue e") fits it.
const PRELUDE: &str = r#"const vis = e => { if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
const c = e => { if (!vis(e)) throw new Error('oracle: target missing or hidden'); const r = e.getBoundingClientRect(); return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; };
const all = s => [...document.querySelectorAll(s)];
const utterance0 = core.getUtterance();
const utter = typeof utterance0 === 'string' ? utterance0 : utterance0.utterance;
const quotes = () => [...document.getElementById('query').textContent.matchAll(/"([^"]*)"/g)].map(m => m[1]);
const quoted = () => quotes()[0];
const still = async e => { let last = null; for (let i = 0; i < 40; i++) { const now = e.scrollTop; if (now === last) return; last = now; await new Promise(r => setTimeout(r, 60)); } };
const shape = e => { const tag = e.tagName.toLowerCase(); const t = e.textContent.trim();
  const px = tag === 'text' ? parseFloat(e.getAttribute('font-size')) : tag === 'circle' ? 2 * Number(e.getAttribute('r'))
    : tag === 'rect' ? Number(e.getAttribute('width')) : e.getBBox().width;
  return { e, color: e.getAttribute('fill'), size: px > 15 ? 'large' : 'small',
    type: tag === 'text' ? (/^[0-9]$/.test(t) ? 'digit' : 'letter') : 'shape',
    text: tag === 'text' ? t : { rect: 'rectangle', circle: 'circle', polygon: 'triangle' }[tag] }; };
const describes = (desc, s) => { const w = desc.trim().split(/\s+/); let i = 0;
  if (w[i] === 'large' || w[i] === 'small') { if (w[i++] !== s.size) return false; }
  if (w.length - i > 1) { if (w[i++] !== s.color) return false; }
  const what = w[i]; return what === 'item' || what === s.text || what === s.type; };
"#;

/// What every oracle checks first: once the episode is over, MiniWoB puts
/// its START cover back over the page (what a model would see), and the
/// oracle says it is done.
const OVER: &str = "const cover = document.getElementById('sync-task-cover'); \
if (cover && cover.style.display !== 'none') return [];";

/// The scripted tasks: the core click/type smoke set and the pure-visual
/// set of `shared/reference/offline-eval-and-streams.md` §3.
pub(crate) const TASKS: &[MiniWobTask] = &[
    MiniWobTask {
        name: "click-test",
        quick: true,
        visual: false,
        oracle: "return [['click', ...c(document.getElementById('subbtn'))]];",
    },
    MiniWobTask {
        name: "click-test-2",
        quick: false,
        visual: false,
        oracle: "return [['click', ...c(document.getElementById('subbtn'))]];",
    },
    MiniWobTask {
        name: "click-button",
        quick: true,
        visual: false,
        oracle: "const t = quoted(); \
const b = [...document.querySelectorAll('#area button')].find(b => b.textContent === t); \
return [['click', ...c(b)]];",
    },
    MiniWobTask {
        name: "click-link",
        quick: false,
        visual: false,
        oracle: "const t = quoted(); \
const a = [...document.querySelectorAll('#area .alink')].find(a => a.textContent === t); \
return [['click', ...c(a)]];",
    },
    MiniWobTask {
        name: "focus-text",
        quick: false,
        visual: false,
        oracle: "return [['click', ...c(document.getElementById('tt'))]];",
    },
    MiniWobTask {
        name: "enter-text",
        quick: true,
        visual: false,
        oracle: "const t = document.querySelector('#query .bold').textContent; \
return [['type', ...c(document.getElementById('tt')), t], ['click', ...c(document.getElementById('subbtn'))]];",
    },
    MiniWobTask {
        name: "click-dialog",
        quick: false,
        visual: false,
        oracle: "return [['click', ...c(document.querySelector('.ui-dialog-titlebar-close'))]];",
    },
    MiniWobTask {
        name: "enter-password",
        quick: false,
        visual: false,
        oracle: "const t = document.querySelector('#query .bold').textContent; \
return [['type', ...c(document.getElementById('password')), t], ['type', ...c(document.getElementById('verify')), t], \
['click', ...c(document.getElementById('subbtn'))]];",
    },
    MiniWobTask {
        name: "login-user",
        quick: false,
        visual: false,
        oracle: "const [user, pass] = [...document.getElementById('query').textContent.matchAll(/\"([^\"]*)\"/g)].map(m => m[1]); \
return [['type', ...c(document.getElementById('username')), user], ['type', ...c(document.getElementById('password')), pass], \
['click', ...c(document.getElementById('subbtn'))]];",
    },
    MiniWobTask {
        name: "click-option",
        quick: false,
        visual: false,
        oracle: "const want = /^Select (.*) and click Submit\\.$/.exec(core.getUtterance())[1]; \
const label = [...document.querySelectorAll('#boxes label')].find(l => l.textContent === want); \
return [['click', ...c(label.querySelector('input'))], ['click', ...c(document.getElementById('subbtn'))]];",
    },
    MiniWobTask {
        name: "click-checkboxes",
        quick: false,
        visual: false,
        oracle: "const list = /^Select (.*) and click Submit\\.$/.exec(core.getUtterance())[1]; \
const want = list === 'nothing' ? [] : list.split(', '); \
const boxes = [...document.querySelectorAll('#boxes label')].filter(l => want.includes(l.textContent)); \
return [...boxes.map(l => ['click', ...c(l.querySelector('input'))]), ['click', ...c(document.getElementById('subbtn'))]];",
    },
    MiniWobTask {
        name: "click-tab",
        quick: false,
        visual: false,
        oracle: "const n = /Tab #(\\d)/.exec(core.getUtterance())[1]; \
return [['click', ...c(document.querySelector(`#area ul a[href=\"#tabs-${n}\"]`))]];",
    },
    MiniWobTask {
        name: "click-color",
        quick: true,
        visual: true,
        oracle: "const q = document.getElementById('query').children[0]; \
const want = q.tagName === 'DIV' ? /background-color: (.*);/.exec(q.getAttribute('style'))[1] : q.textContent; \
const box = [...document.querySelectorAll('#area .color')].find(b => b.dataset.color === want); \
return [['click', ...c(box)]];",
    },
    MiniWobTask {
        name: "identify-shape",
        quick: false,
        visual: true,
        oracle: "const s = document.querySelector('#area_svg').querySelector('text, rect, circle, polygon'); \
const tag = s.tagName.toLowerCase(); \
const kind = tag === 'text' ? (/^[0-9]$/.test(s.textContent.trim()) ? 'digit' : 'letter') \
  : ({rect: 'rectangle', circle: 'circle', polygon: 'triangle'})[tag]; \
return [['click', ...c(document.querySelector(`#area-buttons button[data-type=\"${kind}\"]`))]];",
    },
    // @generated-oracles-start
    MiniWobTask {
        name: "click-button-sequence",
        quick: false,
        visual: false,
        oracle: r#"return [['click', ...c(document.getElementById('subbtn'))], ['click', ...c(document.getElementById('subbtn2'))]];"#,
    },
    MiniWobTask {
        name: "click-dialog-2",
        quick: false,
        visual: false,
        oracle: r#"const want = quoted();
const b = want === 'x' ? document.querySelector('.ui-dialog-titlebar-close') : all('.ui-dialog-buttonset button').find(b => b.textContent.trim() === want);
return [['click', ...c(b)]];"#,
    },
    MiniWobTask {
        name: "click-tab-2-easy",
        quick: false,
        visual: false,
        oracle: r#"const want = quoted();
const link = all('#area .alink').find(a => a.textContent === want && vis(a));
if (link) return [['click', ...c(link)]];
const tab = all('#area ul a').find(a => { const p = document.querySelector(a.getAttribute('href')); return p && !vis(p) && [...p.querySelectorAll('.alink')].some(l => l.textContent === want); });
return [['click', ...c(tab)]];"#,
    },
    MiniWobTask {
        name: "click-collapsible-nodelay",
        quick: false,
        visual: false,
        oracle: r#"const open = all('#area .ui-accordion-content').some(vis);
if (!open) return [['click', ...c(document.querySelector('#area h3'))]];
return [['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "click-widget",
        quick: false,
        visual: false,
        oracle: r#"const want = quoted();
const w = all('#area .widget').find(w => w.querySelector('input, textarea, button').dataset.type === want);
return [['click', ...c(w.querySelector('input, textarea, button'))]];"#,
    },
    MiniWobTask {
        name: "enter-text-2",
        quick: false,
        visual: false,
        oracle: r#"const t = document.querySelector('#query .bold').textContent;
const text = /upper case/.test(utter) ? t.toUpperCase() : t.toLowerCase();
return [['type', ...c(document.getElementById('tt')), text], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "login-user-popup",
        quick: false,
        visual: false,
        oracle: r#"const [user, pass] = quotes();
const popup = document.getElementById('popup');
if (vis(popup)) return [['click', ...c(document.getElementById('popup-cancel'))]];
const u = document.getElementById('username'), p = document.getElementById('password');
if (u.value !== user) return [['type', ...c(u), user]];
if (p.value !== pass) return [['type', ...c(p), pass]];
return [['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "choose-list",
        quick: false,
        visual: false,
        oracle: r#"const want = /^Select (.*) from the list and click Submit\.$/.exec(utter)[1];
const sel = document.getElementById('options');
const button = document.querySelector('#area button');
if (sel.options[sel.selectedIndex].textContent === want) return [['click', ...c(button)]];
const from = sel.selectedIndex, to = [...sel.options].findIndex(o => o.textContent === want);
const key = to > from ? 'ArrowDown' : 'ArrowUp';
return [['click', ...c(sel)], ...Array(Math.abs(to - from)).fill(['key', key]), ['key', 'Enter']];"#,
    },
    MiniWobTask {
        name: "use-autocomplete-nodelay",
        quick: false,
        visual: false,
        oracle: r#"const [f, e] = [...document.querySelectorAll('#query .bold')].map(b => b.textContent);
const input = document.getElementById('tags');
const items = all('.ui-autocomplete li').filter(vis);
const fits = t => t.startsWith(f) && (e === undefined || t.endsWith(e));
if (fits(input.value)) return [['click', ...c(document.getElementById('subbtn'))]];
const item = items.find(li => fits(li.textContent));
if (item) return [['click', ...c(item)]];
return [['type', ...c(input), f]];"#,
    },
    MiniWobTask {
        name: "choose-date-nodelay",
        quick: false,
        visual: false,
        oracle: r#"const want = /^Select (\S+) as the date/.exec(utter)[1];
const [m, d, y] = want.split('/').map(Number);
const input = document.getElementById('datepicker');
if (input.value === want) return [['click', ...c(document.getElementById('subbtn'))]];
const picker = document.getElementById('ui-datepicker-div');
if (!vis(picker)) return [['click', ...c(input)]];
const months = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const shown = months.indexOf(picker.querySelector('.ui-datepicker-month').textContent) + 1;
const year = Number(picker.querySelector('.ui-datepicker-year').textContent);
const gap = (y - year) * 12 + (m - shown);
if (gap !== 0) return Array(Math.abs(gap)).fill(['click', ...c(picker.querySelector(gap < 0 ? '.ui-datepicker-prev' : '.ui-datepicker-next'))]);
const day = [...picker.querySelectorAll('td a')].find(a => Number(a.textContent) === d);
return [['click', ...c(day)]];"#,
    },
    MiniWobTask {
        name: "enter-date",
        quick: false,
        visual: false,
        oracle: r#"const [m, d, y] = document.querySelector('#query .bold').textContent.split('/');
const input = document.getElementById('tt'), r = input.getBoundingClientRect();
const keys = [...(m + d + y)].map(k => ['key', k]);
return [['click', Math.round(r.x + 8), Math.round(r.y + r.height / 2)], ...keys, ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "navigate-tree",
        quick: false,
        visual: false,
        oracle: r#"const want = quoted();
const spans = all('#tree span');
const hit = spans.find(s => s.textContent === want && vis(s));
if (hit) return [['click', ...c(hit)]];
const folder = spans.find(s => s.classList.contains('folder') && vis(s) && !vis(s.parentElement.querySelector('ul > li'))
  && [...s.parentElement.querySelectorAll('ul span')].some(t => t.textContent === want));
return [['click', ...c(folder)]];"#,
    },
    MiniWobTask {
        name: "search-engine",
        quick: false,
        visual: false,
        oracle: r#"const want = document.querySelector('#query .bold').textContent;
const pos = parseInt(document.querySelectorAll('#query .bold')[1].textContent, 10);
const input = document.getElementById('search-text');
const links = all('#page-content a.search-title');
if (links.length === 0) return [['type', ...c(input), want], ['click', ...c(document.getElementById('search'))]];
const page = Math.ceil(pos / 3);
const current = Number((document.querySelector('#pagination .active') || {}).textContent);
if (current !== page) return [['click', ...c(all('#pagination a').find(a => a.textContent.trim() === String(page)))]];
return [['click', ...c(links[(pos - 1) % 3])]];"#,
    },
    MiniWobTask {
        name: "social-media",
        quick: false,
        visual: false,
        oracle: r#"const user = document.querySelector('#query .bold').textContent;
const action = quoted();
const area = document.getElementById('area');
await still(area);
const box = area.getBoundingClientRect();
const free = e => { if (!vis(e)) return false; const [x, y] = c(e); return e.contains(document.elementFromPoint(x, y)); };
const inView = e => { if (!free(e)) return false; const y = c(e)[1]; return y > box.top + 4 && y < box.bottom - 4; };
const scroll = e => { const key = c(e)[1] < box.top + 4 ? 'ArrowUp' : 'ArrowDown';
  return [['click', ...c(all('#area .body, #area .name, #area .time').find(inView))], ['key', key], ['key', key], ['key', key]]; };
const post = all('#area .media').find(m => m.querySelector('.username').textContent === user);
const cls = { 'Reply': 'reply', 'Retweet': 'retweet', 'Like': 'like' }[action];
const target = post.querySelector(cls ? '.' + cls : '.more');
const item = [...post.querySelectorAll('ul li')].find(li => li.textContent === action || li.textContent.startsWith(action + ' '));
if (!cls && vis(item)) return inView(item) ? [['click', ...c(item)]] : scroll(item);
if (!inView(target)) return scroll(target);
return [['click', ...c(target)]];"#,
    },
    MiniWobTask {
        name: "email-inbox",
        quick: false,
        visual: false,
        oracle: r#"const name = document.querySelector('#query .bold').textContent;
const action = /reply to them/.test(utter) ? 'reply' : /forward/.test(utter) ? 'forward' : /trash/.test(utter) ? 'delete' : 'important';
const reply = document.getElementById('reply'), forward = document.getElementById('forward'), email = document.getElementById('email');
if (vis(reply)) {
  const text = document.getElementById('reply-text'), want = quoted();
  return text.value !== want ? [['type', ...c(text), want]] : [['click', ...c(document.getElementById('send-reply'))]];
}
if (vis(forward)) {
  const to = forward.querySelector('.forward-sender'), want = document.querySelectorAll('#query .bold')[1].textContent;
  return to.value !== want ? [['type', ...c(to), want]] : [['click', ...c(document.getElementById('send-forward'))]];
}
if (vis(email)) {
  const sel = { reply: '.email-reply', forward: '.email-forward', delete: '.email-actions .trash', important: '.email-actions .star' }[action];
  return [['click', ...c(email.querySelector(sel))]];
}
const search = document.getElementById('search');
const list = vis(search) ? search : document.getElementById('main');
const box = list.getBoundingClientRect();
const hit = [...list.querySelectorAll('.email-thread .email-sender')].find(s => {
  if (s.textContent !== name || !vis(s)) return false;
  const y = c(s)[1]; return y > box.top + 4 && y < box.bottom - 4; });
if (hit) return [['click', ...c(hit)]];
if (!vis(search)) return [['click', ...c(document.getElementById('open-search'))]];
return [['type', ...c(document.getElementById('search-input')), name], ['key', 'End']];"#,
    },
    MiniWobTask {
        name: "book-flight-nodelay",
        quick: false,
        visual: false,
        oracle: r#"const [kind, from, to, date] = [...document.querySelectorAll('#query .bold')].map(b => b.textContent);
const area = document.getElementById('area');
await still(area);
const box = area.getBoundingClientRect();
const free = e => { if (!vis(e)) return false; const [x, y] = c(e); return e.contains(document.elementFromPoint(x, y)); };
const inView = e => free(e) && c(e)[1] > box.top + 4 && c(e)[1] < box.bottom - 4;
if (vis(document.getElementById('results'))) {
  const flights = all('#results .flight');
  const cost = f => kind === 'cheapest' ? Number(f.querySelector('.flight-price').dataset.price)
    : Number(f.querySelector('.time-duration').dataset.duration);
  const best = flights.reduce((a, b) => cost(b) < cost(a) ? b : a).querySelector('.flight-price');
  if (inView(best)) return [['click', ...c(best)]];
  const key = c(best)[1] < box.top ? 'ArrowUp' : 'ArrowDown';
  return [['click', ...c(all('#results label').find(inView))], ['key', key], ['key', key], ['key', key]];
}
const typed = w => /^[A-Z]{3}$/.test(w) ? '(' + w + ')' : w;
for (const [id, want] of [['flight-from', from], ['flight-to', to]]) {
  const input = document.getElementById(id);
  if (input.value.includes(want) && / \([A-Z]{3}\)$/.test(input.value)) continue;
  const item = all('.ui-autocomplete li').filter(vis).find(li => li.textContent.includes(want));
  if (item && document.activeElement === input) return [['click', ...c(item)]];
  return [['type', ...c(input), typed(want)]];
}
const input = document.getElementById('datepicker');
if (input.value !== date) {
  const [m, d, y] = date.split('/').map(Number);
  const picker = document.getElementById('ui-datepicker-div');
  if (!vis(picker)) return [['click', ...c(input)]];
  const months = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
  const shown = months.indexOf(picker.querySelector('.ui-datepicker-month').textContent) + 1;
  const gap = (y - Number(picker.querySelector('.ui-datepicker-year').textContent)) * 12 + (m - shown);
  if (gap !== 0) return Array(Math.abs(gap)).fill(['click', ...c(picker.querySelector(gap < 0 ? '.ui-datepicker-prev' : '.ui-datepicker-next'))]);
  return [['click', ...c([...picker.querySelectorAll('td a')].find(a => Number(a.textContent) === d))]];
}
return [['click', ...c(document.getElementById('search'))]];"#,
    },
    MiniWobTask {
        name: "simple-arithmetic",
        quick: false,
        visual: false,
        oracle: r#"const [a, op, b] = document.getElementById('math-problem').textContent.trim().split(' ');
const x = Number(a), y = Number(b);
const answer = op === '+' ? x + y : op === '-' ? x - y : x * y;
return [['type', ...c(document.getElementById('math-answer')), String(answer)], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "find-word",
        quick: false,
        visual: false,
        oracle: r#"const n = parseInt(document.querySelector('#query .bold').textContent, 10);
const words = document.querySelector('#area p').textContent.trim().split(/\s+/);
const word = words[n - 1].replace(/[^a-zA-Z]/g, '');
return [['type', ...c(document.getElementById('answer-input')), word], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "read-table",
        quick: false,
        visual: false,
        oracle: r#"const key = document.querySelector('#query .bold').textContent;
const row = all('#tab tr').find(tr => tr.children[0].textContent === key);
return [['type', ...c(document.getElementById('tt')), row.children[1].textContent], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "phone-book",
        quick: false,
        visual: false,
        oracle: r#"const [, who, what] = /^Find (.*) in the contact book and click on their (phone|email|address)/.exec(utter);
const name = document.querySelector('#contact .name');
if (name && name.textContent === who) return [['click', ...c(document.querySelector('#contact .' + what))]];
const next = all('#pagination a').find(a => a.textContent.trim() === '>');
return [['click', ...c(next)]];"#,
    },
    MiniWobTask {
        name: "click-shape",
        quick: false,
        visual: true,
        oracle: r#"const desc = /^Click on a (.*)$/.exec(utter)[1];
const hit = all('#area_svg > *').map(shape).find(s => describes(desc, s));
return [['click', ...c(hit.e)]];"#,
    },
    MiniWobTask {
        name: "count-shape",
        quick: false,
        visual: true,
        oracle: r#"const desc = /^How many (.*)s are there\?/.exec(utter)[1];
const n = all('#area_svg > *').map(shape).filter(s => describes(desc, s)).length;
return [['click', ...c(all('#count-buttons button').find(b => b.textContent === String(n)))]];"#,
    },
    MiniWobTask {
        name: "count-sides",
        quick: false,
        visual: true,
        oracle: r#"const canvas = document.getElementById('c'), w = canvas.width;
const px = canvas.getContext('2d').getImageData(0, 0, w, canvas.height).data;
const ink = (x, y) => px[(Math.round(y) * w + Math.round(x)) * 4 + 3] > 60;
const edge = a => { for (let r = 45; r > 10; r -= 0.25) if (ink(75 + r * Math.cos(a), 50 + r * Math.sin(a))) return r; return 0; };
const profile = Array.from({ length: 360 }, (_, i) => edge(i * Math.PI / 180));
const power = n => { let re = 0, im = 0; profile.forEach((r, i) => { re += r * Math.cos(n * i * Math.PI / 180); im += r * Math.sin(n * i * Math.PI / 180); }); return re * re + im * im; };
const n = [3, 4, 5, 6, 7].reduce((a, b) => power(b) > power(a) ? b : a);
return [['click', ...c(document.querySelector(`#form button[data-sides="${n}"]`))]];"#,
    },
    MiniWobTask {
        name: "visual-addition",
        quick: false,
        visual: true,
        oracle: r#"const n = all('#visual-1 .addition-block').length + all('#visual-2 .addition-block').length;
return [['type', ...c(document.getElementById('math-answer')), String(n)], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "grid-coordinate",
        quick: false,
        visual: true,
        oracle: r#"const want = document.querySelector('#query .bold').textContent;
return [['click', ...c(all('#area svg circle').find(p => p.id === want))]];"#,
    },
    MiniWobTask {
        name: "click-shades",
        quick: false,
        visual: true,
        oracle: r#"const hue = { red: 0, green: 120, blue: 240 }[/shades of (\w+)/.exec(utter)[1]];
const hueOf = e => { const [r, g, b] = getComputedStyle(e).backgroundColor.match(/\d+/g).map(Number);
  const max = Math.max(r, g, b), min = Math.min(r, g, b); if (max === min) return -1;
  const h = max === r ? ((g - b) / (max - min)) % 6 : max === g ? (b - r) / (max - min) + 2 : (r - g) / (max - min) + 4;
  return Math.round((h * 60 + 360) % 360); };
const near = h => Math.min(Math.abs(h - hue), 360 - Math.abs(h - hue)) < 30;
return [...all('#area span').filter(s => near(hueOf(s))).map(s => ['click', ...c(s)]), ['click', ...c(document.getElementById('submit'))]];"#,
    },
    MiniWobTask {
        name: "find-midpoint",
        quick: false,
        visual: true,
        oracle: r#"const [a, b] = all('#svg-grid .black-circle').map(c);
return [['click', Math.round((a[0] + b[0]) / 2), Math.round((a[1] + b[1]) / 2)], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "circle-center",
        quick: false,
        visual: true,
        oracle: r#"return [['click', ...c(document.querySelector('#svg-grid .black-circle'))], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "bisect-angle",
        quick: false,
        visual: true,
        oracle: r#"const v = c(document.querySelector('#svg-grid .init-blue'));
const unit = p => { const d = Math.hypot(p[0] - v[0], p[1] - v[1]); return [(p[0] - v[0]) / d, (p[1] - v[1]) / d]; };
const [a, b] = all('#svg-grid .init-black').map(c).map(unit);
const dir = [a[0] + b[0], a[1] + b[1]], len = Math.hypot(dir[0], dir[1]);
const box = document.getElementById('svg-grid').getBoundingClientRect();
const at = d => [Math.round(v[0] + dir[0] / len * d), Math.round(v[1] + dir[1] / len * d)];
const inside = p => p[0] > box.left + 2 && p[0] < box.right - 2 && p[1] > box.top + 2 && p[1] < box.bottom - 2;
const p = [40, 30, 20, 12].map(at).find(inside);
return [['click', ...p], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    MiniWobTask {
        name: "right-angle",
        quick: false,
        visual: true,
        oracle: r#"const v = c(document.getElementById('init-blue')), a = c(document.getElementById('init-black'));
const d = Math.hypot(a[0] - v[0], a[1] - v[1]), perp = [-(a[1] - v[1]) / d, (a[0] - v[0]) / d];
const box = document.getElementById('svg-grid').getBoundingClientRect();
const inside = p => p[0] > box.left + 2 && p[0] < box.right - 2 && p[1] > box.top + 2 && p[1] < box.bottom - 2;
const p = [40, -40, 25, -25, 12, -12].map(k => [Math.round(v[0] + perp[0] * k), Math.round(v[1] + perp[1] * k)]).find(inside);
return [['click', ...p], ['click', ...c(document.getElementById('subbtn'))]];"#,
    },
    // @generated-oracles-end
];

/// Tasks of the two sets that are not scripted, and why (docs/eval.md).
pub(crate) const NOT_SCRIPTED: &[(&str, &str)] = &[
    (
        "hover-shape",
        "the page never ends its episode: it only computes a hover score every 33 ms and never calls core.endEpisode, so the only ending is the time-out with reward -1",
    ),
    (
        "click-pie-nodelay",
        "wheelnav preselects the first pie item and a pointer press on the selected item never reaches it (Chromium delivers it to the SVG root), so an episode whose answer is that item (seed 42's among them) cannot be won by clicking",
    ),
];

#[cfg(test)]
impl MiniWobTask {
    /// A task with an oracle of the test's own.
    pub(crate) const fn scripted(name: &'static str, oracle: &'static str) -> Self {
        Self {
            name,
            quick: false,
            visual: false,
            oracle,
        }
    }
}

/// The JS that starts a seeded episode and returns its instruction.
pub(crate) fn start_episode_js(seed: u64) -> String {
    format!(
        "(() => {{ Math.seedrandom('{seed}'); core.EPISODE_MAX_TIME = 1000000; core.startEpisodeReal(); \
const u = core.getUtterance(); return [typeof u === 'string' ? u : u.utterance, WOB_TASK_READY]; }})()"
    )
}

/// The JS that runs a task's oracle for model turn `turn`.
pub(crate) fn oracle_js(task: &MiniWobTask, turn: usize) -> String {
    format!(
        "(async () => {{ const turn = {turn}; {PRELUDE} {OVER} {} }})()",
        task.oracle
    )
}

/// The JS that reads the episode's outcome: `[done, raw reward, reason]`.
pub(crate) const REWARD_JS: &str = "[WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON)]";

/// One oracle step, as the oracle script returns it: `["click", x, y]`,
/// `["hover", x, y]`, `["type", x, y, text]` (click the field, then type)
/// or `["key", name]` (a DOM key name such as `Enter` or `ArrowDown`), in
/// viewport CSS pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OracleStep {
    Click(i32, i32),
    Hover(i32, i32),
    TypeAt(i32, i32, String),
    Key(String),
}

/// Reads the oracle's answer for one turn (an empty list: the task is done).
pub(crate) fn parse_oracle(value: &Value) -> anyhow::Result<Vec<OracleStep>> {
    let steps = value
        .as_array()
        .with_context(|| format!("oracle returned {value}"))?;
    steps
        .iter()
        .map(|s| {
            let coord = |i: usize| {
                s[i].as_i64()
                    .and_then(|v| i32::try_from(v).ok())
                    .with_context(|| format!("oracle step {s} has no coordinate {i}"))
            };
            let text = |i: usize| {
                s[i].as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("oracle step {s} has no text"))
            };
            match s[0].as_str() {
                Some("click") => Ok(OracleStep::Click(coord(1)?, coord(2)?)),
                Some("hover") => Ok(OracleStep::Hover(coord(1)?, coord(2)?)),
                Some("type") => Ok(OracleStep::TypeAt(coord(1)?, coord(2)?, text(3)?)),
                Some("key") => Ok(OracleStep::Key(text(1)?)),
                _ => bail!("unknown oracle step {s}"),
            }
        })
        .collect()
}

/// Whether an episode succeeded: done with a positive raw reward.
pub(crate) fn succeeded(reward: &Value) -> (bool, String) {
    let done = reward[0].as_bool().unwrap_or(false);
    let raw = reward[1].as_f64().unwrap_or(0.0);
    let reason = reward[2].as_str().unwrap_or("");
    let pass = done && raw > 0.0;
    let text = if !done {
        "the episode did not end".to_owned()
    } else if reason.is_empty() {
        format!("episode ended with raw reward {raw}")
    } else {
        format!("episode ended with raw reward {raw} ({reason})")
    };
    (pass, text)
}

/// The unpacked `html` folder of the wheel, fetching it first if needed.
pub(crate) fn ensure_pages(root: &Path) -> anyhow::Result<PathBuf> {
    let dir = root.join("target/miniwob");
    let unpacked = dir.join("miniwob-1.1.0");
    let html = unpacked.join("miniwob/html");
    if html.join("core/core.js").is_file() {
        return Ok(html);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let wheel = dir.join(WHEEL);
    if !wheel.is_file() {
        let requirement = dir.join("requirements.txt");
        std::fs::write(&requirement, REQUIREMENT)?;
        println!(
            "eval offline: fetching MiniWoB++ (the `miniwob` wheel, MIT) from PyPI into {}",
            dir.display()
        );
        util::run(
            std::process::Command::new("python3")
                .args(["-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes", "-r"])
                .arg(&requirement)
                .arg("-d")
                .arg(&dir),
        )
        .context("fetching MiniWoB++ needs python3 with pip and access to PyPI (or skip it with --suites replica)")?;
    }
    util::run(
        std::process::Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked),
    )
    .context("unpacking the miniwob wheel")?;
    if !html.join("core/core.js").is_file() {
        bail!("the miniwob wheel has no miniwob/html/core/core.js");
    }
    Ok(html)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn oracle_answers_parse_and_bad_ones_are_errors() {
        let steps = parse_oracle(&json!([["click", 10, 20], ["type", 1, 2, "Ada"]])).unwrap();
        assert_eq!(
            steps,
            [
                OracleStep::Click(10, 20),
                OracleStep::TypeAt(1, 2, "Ada".into())
            ]
        );
        assert!(parse_oracle(&json!(null)).is_err());
        assert!(parse_oracle(&json!([["drag", 1, 2]])).is_err());
        assert!(parse_oracle(&json!([["click", "x", 2]])).is_err());
        assert_eq!(
            parse_oracle(&json!([["hover", 3, 4], ["key", "Enter"]])).unwrap(),
            [OracleStep::Hover(3, 4), OracleStep::Key("Enter".into())]
        );
        assert!(parse_oracle(&json!([["key"]])).is_err());
        assert!(parse_oracle(&json!([["type", 1, 2]])).is_err());
        assert_eq!(parse_oracle(&json!([])).unwrap(), []);
    }

    #[test]
    fn success_needs_a_finished_episode_with_a_positive_raw_reward() {
        assert!(succeeded(&json!([true, 1.0, null])).0);
        assert!(!succeeded(&json!([true, -1.0, "timed out"])).0);
        assert!(
            succeeded(&json!([true, -1.0, "timed out"]))
                .1
                .contains("timed out")
        );
        assert!(!succeeded(&json!([false, 0, null])).0);
    }

    #[test]
    fn the_task_list_has_a_quick_slice_and_visual_tasks() {
        assert!(TASKS.iter().filter(|t| t.quick).count() >= 3);
        assert!(TASKS.iter().filter(|t| t.quick).count() <= 5, "CI time");
        assert!(TASKS.iter().any(|t| t.visual && t.quick));
        let mut names: Vec<&str> = TASKS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TASKS.len());
        assert!(start_episode_js(7).contains("Math.seedrandom('7')"));
    }

    /// The sets named in shared/reference/offline-eval-and-streams.md §3.
    const SMOKE: &[&str] = &[
        "click-test",
        "click-test-2",
        "click-button",
        "click-button-sequence",
        "click-link",
        "click-dialog",
        "click-dialog-2",
        "click-tab",
        "click-tab-2-easy",
        "click-option",
        "click-checkboxes",
        "click-collapsible-nodelay",
        "click-widget",
        "focus-text",
        "enter-text",
        "enter-text-2",
        "enter-password",
        "login-user",
        "login-user-popup",
        "choose-list",
        "use-autocomplete-nodelay",
        "choose-date-nodelay",
        "enter-date",
        "navigate-tree",
        "search-engine",
        "social-media",
        "email-inbox",
        "book-flight-nodelay",
        "simple-arithmetic",
        "find-word",
        "read-table",
        "phone-book",
    ];
    const VISUAL: &[&str] = &[
        "click-shape",
        "click-color",
        "identify-shape",
        "count-shape",
        "count-sides",
        "visual-addition",
        "click-pie-nodelay",
        "grid-coordinate",
        "click-shades",
        "find-midpoint",
        "circle-center",
        "bisect-angle",
        "right-angle",
        "hover-shape",
    ];

    #[test]
    fn every_task_of_both_sets_is_scripted_or_says_why_not() {
        let excluded = |name: &str| NOT_SCRIPTED.iter().any(|(n, _)| *n == name);
        for (set, visual) in [(SMOKE, false), (VISUAL, true)] {
            for name in set {
                match TASKS.iter().find(|t| t.name == *name) {
                    Some(task) => {
                        assert_eq!(task.visual, visual, "{name}");
                        assert!(!excluded(name), "{name} is both scripted and excluded");
                    }
                    None => assert!(excluded(name), "{name} is neither scripted nor excluded"),
                }
            }
        }
        assert_eq!(TASKS.len() + NOT_SCRIPTED.len(), SMOKE.len() + VISUAL.len());
        assert!(NOT_SCRIPTED.iter().all(|(_, why)| why.len() > 40));
    }

    #[test]
    fn the_oracle_script_knows_its_turn_and_stops_once_the_episode_is_over() {
        let task = TASKS.iter().find(|t| t.name == "social-media").unwrap();
        let js = oracle_js(task, 3);
        assert!(js.starts_with("(async () => { const turn = 3;"), "{js}");
        assert!(js.contains("sync-task-cover"));
        assert!(js.contains("await still(area)"));
        // The "episode over" check runs before the task's own code.
        assert!(js.find("sync-task-cover").unwrap() < js.find("await still(area)").unwrap());
        assert!(js.ends_with("})()"));
    }
}

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
//! The model is an oracle: a small script per task reads the generated
//! problem from the page (which button, which colour, which shape) and
//! returns the targets' centres, which the mock provider then sends in each
//! provider's wire format. The episode's reward, computed by MiniWoB's own
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
    /// The oracle: a JS function body returning a list of steps
    /// `["click", x, y]` or `["type", x, y, text]`.
    oracle: &'static str,
}

/// A helper every oracle starts with: the centre of an element.
const CENTRE: &str = "const c = e => { if (!e) throw new Error('oracle: target missing'); \
const r = e.getBoundingClientRect(); return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; }; \
const quoted = () => (/\"([^\"]*)\"/.exec(document.getElementById('query').textContent) || [])[1];";

/// The scripted tasks: the core click/type smoke set and visual tasks.
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
];

/// The JS that starts a seeded episode and returns its instruction.
pub(crate) fn start_episode_js(seed: u64) -> String {
    format!(
        "(() => {{ Math.seedrandom('{seed}'); core.EPISODE_MAX_TIME = 1000000; core.startEpisodeReal(); \
const u = core.getUtterance(); return [typeof u === 'string' ? u : u.utterance, WOB_TASK_READY]; }})()"
    )
}

/// The JS that runs a task's oracle.
pub(crate) fn oracle_js(task: &MiniWobTask) -> String {
    format!("(() => {{ {CENTRE} {} }})()", task.oracle)
}

/// The JS that reads the episode's outcome: `[done, raw reward, reason]`.
pub(crate) const REWARD_JS: &str = "[WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON)]";

/// One oracle step, as the oracle script returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OracleStep {
    Click(i32, i32),
    TypeAt(i32, i32, String),
}

/// Reads the oracle's answer.
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
            match s[0].as_str() {
                Some("click") => Ok(OracleStep::Click(coord(1)?, coord(2)?)),
                Some("type") => Ok(OracleStep::TypeAt(
                    coord(1)?,
                    coord(2)?,
                    s[3].as_str()
                        .context("oracle type step without text")?
                        .to_owned(),
                )),
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
        assert!(TASKS.iter().any(|t| t.visual && t.quick));
        let mut names: Vec<&str> = TASKS.iter().map(|t| t.name).collect();
        names.dedup();
        assert_eq!(names.len(), TASKS.len());
        assert!(start_episode_js(7).contains("Math.seedrandom('7')"));
    }
}

//! Repeat and stall detection: notices when the model is going round in
//! circles and raises an escalating nudge for the next step.
//!
//! Three layers, each escalating through levels 5, 8 and 12:
//! 1. **Action repeats**: each action is hashed with pointer coordinates
//!    bucketed to [`BUCKET_PX`] pixels (so "the same click, a few pixels off"
//!    counts as the same); when one hash occurs 5, 8 or 12 times in the last
//!    [`WINDOW`] actions, a nudge fires.
//! 2. **Category dominance**: a run of non-productive actions (scrolls,
//!    hovers, waits, screenshots) with no productive action in between fires
//!    at 5, 8 and 12 such actions.
//! 3. **URL stall**: steps spent on the same origin + path (query and
//!    fragment ignored, so tracking parameters do not reset it) fire at the
//!    configured thresholds (10, 15, 20 by default) as levels 5, 8, 12.
//!
//! Nudges are sticky: an action nudge stays until the model takes a
//! productive action; a URL nudge stays until the URL changes or the model
//! writes state or terminates.

use std::collections::VecDeque;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use lumen_core::{Action, ActionCategory};

/// Pointer coordinates are compared in buckets of this many pixels.
pub const BUCKET_PX: i32 = 64;
/// How many recent actions the repeat layer looks at.
pub const WINDOW: usize = 20;
/// The escalation levels.
pub const LEVELS: [u32; 3] = [5, 8, 12];

/// Where a nudge came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NudgeSource {
    /// The same action again and again.
    Repeat,
    /// Only passive actions for a while.
    Passive,
    /// Too many steps on one page.
    UrlStall,
}

/// A nudge for the next step's prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nudge {
    /// Severity: 5, 8 or 12.
    pub level: u32,
    /// What triggered it.
    pub source: NudgeSource,
    /// The text shown to the model.
    pub message: String,
}

/// Thresholds of the URL-stall layer, in steps on the same page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallThresholds {
    /// Steps before the level-5 nudge.
    pub gentle: u32,
    /// Steps before the level-8 nudge.
    pub warning: u32,
    /// Steps before the level-12 nudge.
    pub critical: u32,
}

impl Default for StallThresholds {
    fn default() -> Self {
        Self {
            gentle: 10,
            warning: 15,
            critical: 20,
        }
    }
}

/// The detector. One per loop.
#[derive(Debug, Default)]
pub struct RepeatDetector {
    window: VecDeque<u64>,
    passive_run: u32,
    action_nudge: Option<Nudge>,
    url_nudge: Option<Nudge>,
    page: Option<String>,
    steps_on_page: u32,
    stall: StallThresholds,
}

impl RepeatDetector {
    /// A detector with the default URL-stall thresholds.
    pub fn new() -> Self {
        Self::default()
    }

    /// A detector with custom URL-stall thresholds.
    pub fn with_stall_thresholds(stall: StallThresholds) -> Self {
        Self {
            stall,
            ..Self::default()
        }
    }

    /// Records one executed action; returns a nudge when this action crossed
    /// a level (the nudge is also kept as pending).
    pub fn record(&mut self, action: &Action) -> Option<Nudge> {
        let category = action.category();
        if category == ActionCategory::Productive {
            self.passive_run = 0;
            self.action_nudge = None;
            if matches!(action, Action::WriteState { .. } | Action::Terminate { .. }) {
                self.url_nudge = None;
                self.steps_on_page = 0;
            }
        } else {
            self.passive_run += 1;
        }

        let hash = action_hash(action);
        self.window.push_back(hash);
        if self.window.len() > WINDOW {
            self.window.pop_front();
        }
        let repeats = self.window.iter().filter(|h| **h == hash).count() as u32;

        let fired = if LEVELS.contains(&repeats) {
            Some(Nudge {
                level: repeats,
                source: NudgeSource::Repeat,
                message: repeat_message(repeats, action),
            })
        } else if category != ActionCategory::Productive && LEVELS.contains(&self.passive_run) {
            Some(Nudge {
                level: self.passive_run,
                source: NudgeSource::Passive,
                message: passive_message(self.passive_run),
            })
        } else {
            None
        };
        if let Some(n) = &fired {
            self.action_nudge = Some(n.clone());
        }
        fired
    }

    /// Records the URL at the start of a step; returns a nudge when the page
    /// has now been the same for a threshold number of steps.
    pub fn record_url(&mut self, url: &str) -> Option<Nudge> {
        let page = page_key(url);
        if self.page.as_deref() != Some(page.as_str()) {
            self.page = Some(page);
            self.steps_on_page = 1;
            self.url_nudge = None;
            return None;
        }
        self.steps_on_page += 1;
        let level = if self.steps_on_page == self.stall.gentle {
            5
        } else if self.steps_on_page == self.stall.warning {
            8
        } else if self.steps_on_page == self.stall.critical {
            12
        } else {
            return None;
        };
        let nudge = Nudge {
            level,
            source: NudgeSource::UrlStall,
            message: stall_message(level, self.steps_on_page),
        };
        self.url_nudge = Some(nudge.clone());
        Some(nudge)
    }

    /// The strongest pending nudge, if any.
    pub fn pending(&self) -> Option<&Nudge> {
        match (&self.action_nudge, &self.url_nudge) {
            (Some(a), Some(u)) => Some(if u.level > a.level { u } else { a }),
            (a, u) => a.as_ref().or(u.as_ref()),
        }
    }

    /// Forgets every pending nudge and the action window (after a backtrack).
    pub fn reset(&mut self) {
        let stall = self.stall;
        *self = Self {
            stall,
            ..Self::default()
        };
    }
}

/// The page identity used for stall detection: origin + path.
pub fn page_key(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    url[..end].trim_end_matches('/').to_string()
}

/// A hash of an action with pointer coordinates bucketed to [`BUCKET_PX`].
/// Exposed for the confidence gate, which votes with the same notion of
/// "the same action".
pub fn action_hash(action: &Action) -> u64 {
    let mut h = DefaultHasher::new();
    action.kind().hash(&mut h);
    let bucket = |v: i32| v.div_euclid(BUCKET_PX);
    match action {
        Action::Click { x, y, button, .. } => (bucket(*x), bucket(*y), *button).hash(&mut h),
        Action::DoubleClick { x, y, .. }
        | Action::TripleClick { x, y, .. }
        | Action::Hover { x, y } => (bucket(*x), bucket(*y)).hash(&mut h),
        Action::Scroll {
            x, y, direction, ..
        } => (bucket(*x), bucket(*y), *direction).hash(&mut h),
        Action::Drag {
            start_x,
            start_y,
            end_x,
            end_y,
            ..
        } => (
            bucket(*start_x),
            bucket(*start_y),
            bucket(*end_x),
            bucket(*end_y),
        )
            .hash(&mut h),
        // Everything else compares by its exact JSON (text, keys, URL...).
        other => serde_json::to_string(other)
            .unwrap_or_default()
            .hash(&mut h),
    }
    h.finish()
}

fn repeat_message(level: u32, action: &Action) -> String {
    let what = action.kind();
    match level {
        5 => format!(
            "You have repeated the same `{what}` action {level} times recently and the page does not seem to respond. \
             Try a different element or approach."
        ),
        8 => format!(
            "WARNING: the same `{what}` action has now been tried {level} times. It is not working. Change strategy: \
             use the keyboard (Tab, Enter, Page_Down), navigate directly by URL, or save what you know with writeState."
        ),
        _ => format!(
            "CRITICAL: `{what}` repeated {level} times. Stop doing it. Re-read the task, look at the whole screenshot, \
             and choose a completely different route to the goal, or terminate with failure if it cannot be done."
        ),
    }
}

fn passive_message(level: u32) -> String {
    match level {
        5 => "You have only scrolled, hovered, waited or looked for several actions. Act on what you can see.".into(),
        8 => "WARNING: many passive actions in a row without progress. Click, type or navigate towards the goal now."
            .into(),
        _ => "CRITICAL: a long run of passive actions. Take a decisive action or terminate with what you have.".into(),
    }
}

fn stall_message(level: u32, steps: u32) -> String {
    match level {
        5 => format!(
            "You have spent {steps} steps on this page. If the answer is here, finish; otherwise move on."
        ),
        8 => format!(
            "WARNING: {steps} steps on the same page. Record progress with writeState and try another way there \
             (search, a direct URL, a different section)."
        ),
        _ => format!(
            "CRITICAL: {steps} steps on one page. Change approach now: navigate elsewhere or terminate with the best \
             answer you have."
        ),
    }
}

#[cfg(test)]
mod tests {
    use lumen_core::{Modifiers, MouseButton, ScrollDirection, ScrollUnit};

    use super::*;

    fn click(x: i32, y: i32) -> Action {
        Action::Click {
            x,
            y,
            button: MouseButton::Left,
            modifiers: Modifiers::NONE,
        }
    }

    fn scroll() -> Action {
        Action::Scroll {
            x: 10,
            y: 10,
            direction: ScrollDirection::Down,
            amount: 3.0,
            unit: ScrollUnit::Clicks,
            modifiers: Modifiers::NONE,
        }
    }

    #[test]
    fn repeats_fire_at_5_8_12_with_bucketing() {
        let mut d = RepeatDetector::new();
        let mut fired = vec![];
        for i in 0..12 {
            // Jitter within one 64 px bucket still counts as the same click.
            if let Some(n) = d.record(&click(100 + (i % 3), 200 - (i % 2))) {
                fired.push((i + 1, n.level, n.source));
            }
        }
        assert_eq!(
            fired,
            vec![
                (5, 5, NudgeSource::Repeat),
                (8, 8, NudgeSource::Repeat),
                (12, 12, NudgeSource::Repeat)
            ]
        );
        // A click in another bucket is a different action.
        assert_ne!(action_hash(&click(100, 200)), action_hash(&click(200, 200)));
    }

    #[test]
    fn repeat_window_rolls() {
        let mut d = RepeatDetector::new();
        for _ in 0..4 {
            d.record(&click(5, 5));
        }
        // 20 different actions push the four repeats out of the window.
        for i in 0..WINDOW as i32 {
            d.record(&Action::Type {
                text: format!("t{i}"),
            });
        }
        assert_eq!(d.record(&click(5, 5)), None);
    }

    #[test]
    fn passive_runs_fire_and_productive_action_clears_sticky_nudge() {
        let mut d = RepeatDetector::new();
        let mut levels = vec![];
        for i in 0..5 {
            let a = if i % 2 == 0 {
                scroll()
            } else {
                Action::Wait { ms: 100 + i }
            };
            if let Some(n) = d.record(&a) {
                levels.push((n.level, n.source));
            }
        }
        assert_eq!(levels, vec![(5, NudgeSource::Passive)]);
        assert!(d.pending().is_some(), "nudges are sticky");
        d.record(&Action::Screenshot);
        assert!(d.pending().is_some(), "an observe action does not clear it");
        d.record(&Action::Type { text: "x".into() });
        assert!(d.pending().is_none(), "a productive action clears it");
    }

    #[test]
    fn url_stall_ignores_query_and_escalates() {
        let mut d = RepeatDetector::with_stall_thresholds(StallThresholds {
            gentle: 3,
            warning: 4,
            critical: 5,
        });
        let mut levels = vec![];
        for i in 0..5 {
            if let Some(n) = d.record_url(&format!("https://shop.example/list?page={i}#top")) {
                levels.push(n.level);
            }
        }
        assert_eq!(levels, vec![5, 8, 12]);
        assert_eq!(d.pending().map(|n| n.source), Some(NudgeSource::UrlStall));
        // A productive click does not clear a URL nudge...
        d.record(&click(1, 1));
        assert!(d.pending().is_some());
        // ...a URL change does.
        d.record_url("https://shop.example/item/3");
        assert!(d.pending().is_none());
    }

    #[test]
    fn write_state_clears_url_nudge_and_reset_clears_all() {
        let mut d = RepeatDetector::with_stall_thresholds(StallThresholds {
            gentle: 2,
            warning: 3,
            critical: 4,
        });
        d.record_url("https://a.example/");
        assert!(
            d.record_url("https://a.example").is_some(),
            "trailing slash is the same page"
        );
        d.record(&Action::WriteState {
            data: Default::default(),
        });
        assert!(d.pending().is_none());
        for _ in 0..5 {
            d.record(&scroll());
        }
        assert!(d.pending().is_some());
        d.reset();
        assert!(d.pending().is_none());
    }

    #[test]
    fn strongest_pending_nudge_wins() {
        let mut d = RepeatDetector::with_stall_thresholds(StallThresholds {
            gentle: 2,
            warning: 3,
            critical: 4,
        });
        for _ in 0..3 {
            d.record_url("https://a.example/x");
        }
        for _ in 0..5 {
            d.record(&scroll());
        }
        assert_eq!(d.pending().map(|n| n.level), Some(8));
    }
}

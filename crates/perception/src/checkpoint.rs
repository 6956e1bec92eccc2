//! Browser-state checkpoints for backtracking when the model is deeply stuck.
//!
//! Every `interval` steps the loop saves a lightweight checkpoint (URL,
//! vertical scroll, task state). When a nudge reaches level 8 or more the loop
//! restores the checkpoint *before* the latest one (the latest is usually
//! already inside the dead end), and every checkpoint after the restored one
//! is dropped. At most [`MAX_CHECKPOINTS`] are kept, oldest evicted first.

use std::collections::VecDeque;

use lumen_core::browser::ScrollOffset;
use lumen_core::{BrowserTab, Result, TaskState};

/// How many checkpoints are kept.
pub const MAX_CHECKPOINTS: usize = 10;

/// A saved browser state.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The step it was taken after.
    pub step: u32,
    /// The page.
    pub url: String,
    /// Vertical scroll offset, CSS pixels.
    pub scroll_y: f64,
    /// The task state then.
    pub state: Option<TaskState>,
}

/// Saves and restores [`Checkpoint`]s.
#[derive(Debug)]
pub struct CheckpointManager {
    interval: u32,
    saved: VecDeque<Checkpoint>,
}

impl CheckpointManager {
    /// A manager that saves every `interval` steps (0 disables saving).
    pub fn new(interval: u32) -> Self {
        Self {
            interval,
            saved: VecDeque::new(),
        }
    }

    /// Whether a checkpoint is due after `step` (0-based).
    pub fn due(&self, step: u32) -> bool {
        self.interval > 0 && (step + 1).is_multiple_of(self.interval)
    }

    /// Stores a checkpoint, evicting the oldest beyond [`MAX_CHECKPOINTS`].
    pub fn push(&mut self, checkpoint: Checkpoint) {
        self.saved.push_back(checkpoint);
        while self.saved.len() > MAX_CHECKPOINTS {
            self.saved.pop_front();
        }
    }

    /// Reads the tab's state and stores a checkpoint for `step`.
    pub async fn save(
        &mut self,
        step: u32,
        tab: &dyn BrowserTab,
        state: Option<&TaskState>,
    ) -> Result<()> {
        let url = tab.url().await?;
        // A page whose offset cannot be read still gets a checkpoint at the
        // top.
        let scroll_y = tab
            .scroll_offset()
            .await
            .ok()
            .flatten()
            .map_or(0.0, |o| o.y);
        self.push(Checkpoint {
            step,
            url,
            scroll_y,
            state: state.cloned(),
        });
        Ok(())
    }

    /// The checkpoint a backtrack restores: the second-latest (the latest is
    /// usually inside the dead end already), or the only one. Later
    /// checkpoints are dropped; the target stays so it can be restored again.
    pub fn take_backtrack_target(&mut self) -> Option<Checkpoint> {
        let index = match self.saved.len() {
            0 => return None,
            1 => 0,
            n => n - 2,
        };
        self.saved.truncate(index + 1);
        self.saved.back().cloned()
    }

    /// Restores `checkpoint` in the tab: navigates to its URL and scrolls.
    /// Returns whether the navigation succeeded.
    pub async fn restore(checkpoint: &Checkpoint, tab: &dyn BrowserTab) -> Result<bool> {
        let outcome = tab.goto(&checkpoint.url).await?;
        if outcome.ok && checkpoint.scroll_y > 0.0 {
            let offset = ScrollOffset {
                x: 0.0,
                y: checkpoint.scroll_y,
            };
            // Scrolling is best effort; the URL is what matters.
            let _ = tab.set_scroll_offset(offset).await;
        }
        Ok(outcome.ok)
    }

    /// How many checkpoints are held.
    pub fn len(&self) -> usize {
        self.saved.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.saved.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp(step: u32) -> Checkpoint {
        Checkpoint {
            step,
            url: format!("https://x.example/{step}"),
            scroll_y: 0.0,
            state: None,
        }
    }

    #[tokio::test]
    async fn save_reads_the_offset_and_restore_scrolls_back_to_it() {
        let tab = crate::fake::FakeTab::new("https://x.example/a");
        *tab.scroll.lock().unwrap() = ScrollOffset { x: 5.0, y: 420.0 };
        let mut m = CheckpointManager::new(1);
        m.save(0, &tab, None).await.unwrap();
        let target = m.take_backtrack_target().unwrap();
        assert_eq!(
            (target.url.as_str(), target.scroll_y),
            ("https://x.example/a", 420.0)
        );
        *tab.scroll.lock().unwrap() = ScrollOffset::default();
        assert!(CheckpointManager::restore(&target, &tab).await.unwrap());
        assert_eq!(
            tab.calls(),
            vec!["goto https://x.example/a", "scroll to 0,420"]
        );
    }

    #[test]
    fn due_every_interval_and_disabled_at_zero() {
        let m = CheckpointManager::new(5);
        let due: Vec<u32> = (0..15).filter(|s| m.due(*s)).collect();
        assert_eq!(due, vec![4, 9, 14]);
        assert!(!(0..100).any(|s| CheckpointManager::new(0).due(s)));
    }

    #[test]
    fn fifo_keeps_ten() {
        let mut m = CheckpointManager::new(1);
        for s in 0..13 {
            m.push(cp(s));
        }
        assert_eq!(m.len(), MAX_CHECKPOINTS);
        assert_eq!(m.saved.front().map(|c| c.step), Some(3));
    }

    #[test]
    fn backtrack_takes_second_latest_and_drops_later_ones() {
        let mut m = CheckpointManager::new(1);
        assert_eq!(m.take_backtrack_target(), None);
        m.push(cp(4));
        assert_eq!(
            m.take_backtrack_target().map(|c| c.step),
            Some(4),
            "a lone checkpoint is the target"
        );
        m.push(cp(9));
        m.push(cp(14));
        assert_eq!(m.take_backtrack_target().map(|c| c.step), Some(9));
        assert_eq!(m.len(), 2, "14 is dropped, 4 and 9 stay");
        assert_eq!(m.take_backtrack_target().map(|c| c.step), Some(4));
        assert_eq!(m.len(), 1);
    }
}

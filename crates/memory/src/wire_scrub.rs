//! [`WireScrub`]: what every record passes on its way into a run's wire
//! history (the session's secret redaction, which the loop sets).

use std::sync::Arc;

use lumen_core::WireRecord;

/// What every record passes on its way into the wire: the session's
/// secret redaction, which the loop sets ([`HistoryManager::set_scrub`](crate::HistoryManager::set_scrub)).
/// Every model request is built from the wire, so a value a page echoed
/// (a typed secret in a tab's URL or title, page text, a console line)
/// cannot reach one by a block that forgot to redact it.
#[derive(Clone, Default)]
pub struct WireScrub(Option<Arc<ScrubFn>>);

/// The function a [`WireScrub`] runs on each record.
type ScrubFn = dyn Fn(&mut WireRecord) + Send + Sync;

impl WireScrub {
    /// A scrub that runs `f` on each record.
    pub fn new(f: impl Fn(&mut WireRecord) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(f)))
    }

    pub(crate) fn apply(&self, record: &mut WireRecord) {
        if let Some(f) = &self.0 {
            f(record);
        }
    }
}

impl std::fmt::Debug for WireScrub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "WireScrub(set)"
        } else {
            "WireScrub(none)"
        })
    }
}

/// Two histories are equal by what they hold, whatever scrubs them.
impl PartialEq for WireScrub {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

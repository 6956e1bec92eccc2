//! Calendar dates from the system clock, without a date crate: the UTC
//! stamps in run-folder names and the eval's "today" for date shifting.

use std::time::{SystemTime, UNIX_EPOCH};

pub use lumen_core::Date;

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `20261122T151500Z` for Unix seconds `secs` (UTC).
pub fn compact_utc(secs: u64) -> String {
    let date = Date::from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        date.year,
        date.month,
        date.day,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_stamps_are_utc() {
        assert_eq!(compact_utc(0), "19700101T000000Z");
        assert_eq!(compact_utc(1_795_360_500), "20261122T151500Z");
        assert_eq!(compact_utc(951_782_400), "20000229T000000Z");
        assert_eq!(compact_utc(1_795_000_000), "20261118T110640Z");
    }
}

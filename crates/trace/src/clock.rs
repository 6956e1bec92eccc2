//! Calendar dates from the system clock, without a date crate: the UTC
//! stamps in run-folder names and the eval's "today" for date shifting.

use std::time::{SystemTime, UNIX_EPOCH};

/// A calendar date (proleptic Gregorian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// The year, e.g. 2026.
    pub year: i32,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
}

impl Date {
    /// A date from its parts (not validated).
    pub fn new(year: i32, month: u32, day: u32) -> Date {
        Date { year, month, day }
    }

    /// Today in UTC.
    pub fn today_utc() -> Date {
        Date::from_days(i64::try_from(unix_secs() / 86_400).unwrap_or(0))
    }

    /// The date `days` days after 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`).
    pub fn from_days(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Date::new(
            i32::try_from(year).unwrap_or(i32::MAX),
            u32::try_from(month).unwrap_or(1),
            u32::try_from(day).unwrap_or(1),
        )
    }

    /// `YYYY-MM-DD`.
    pub fn iso(self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

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
    fn days_become_calendar_dates() {
        assert_eq!(Date::from_days(0), Date::new(1970, 1, 1));
        assert_eq!(Date::from_days(19_782), Date::new(2024, 2, 29));
        assert_eq!(Date::from_days(-1), Date::new(1969, 12, 31));
        assert_eq!(Date::new(2026, 3, 7).iso(), "2026-03-07");
    }

    #[test]
    fn compact_stamps_are_utc() {
        assert_eq!(compact_utc(0), "19700101T000000Z");
        assert_eq!(compact_utc(1_795_360_500), "20261122T151500Z");
        assert_eq!(compact_utc(951_782_400), "20000229T000000Z");
        assert_eq!(compact_utc(1_795_000_000), "20261118T110640Z");
    }
}

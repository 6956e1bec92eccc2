//! Moving WebVoyager's past dates into the future.
//!
//! Many tasks were written in 2023 ("a flight on December 27, 2023"); run
//! today, they ask for something a booking site refuses. The rule:
//!
//! 1. Find every full date in the question: `December 27, 2023`,
//!    `Dec 27 2023`, `27 December 2023`, `27th Dec, 2023`, `December 2023`
//!    (a month and year counts as its first day) and ISO `2023-12-27`.
//!    Month names may be abbreviated (`Sep`, `Sept.`). Dates without a year
//!    and bare years ("the 2023 season") are not dates and stay as written.
//! 2. If the earliest date is today or later, nothing changes.
//! 3. Otherwise every date's year moves forward by the same whole number of
//!    years N, the smallest that puts the earliest date on or after today.
//!    Only the year digits are rewritten, so the format, the order of the
//!    dates and the gaps between them (trip lengths) stay the same. A
//!    February 29 landing in a common year becomes February 28.
//!
//! `--no-date-shift` turns the rule off.

pub(crate) use lumen_trace::clock::Date;

fn is_leap(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// A date found in the text: where its year (and day) digits are.
#[derive(Debug, Clone, Copy)]
struct Found {
    date: Date,
    year_at: usize,
    /// Byte range of the day digits, for the February 29 fix.
    day_at: Option<(usize, usize)>,
}

/// The result of shifting one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shifted {
    /// The question with its dates moved.
    pub(crate) text: String,
    /// How many years every date moved (0: unchanged).
    pub(crate) years: i32,
}

/// Applies the rule in the module docs, relative to `today`.
pub(crate) fn shift_dates(text: &str, today: Date) -> Shifted {
    let found = find_dates(text);
    let Some(earliest) = found.iter().map(|f| f.date).min() else {
        return unchanged(text);
    };
    if earliest >= today {
        return unchanged(text);
    }
    let mut years = today.year - earliest.year;
    if Date::new(earliest.year + years, earliest.month, earliest.day) < today {
        years += 1;
    }
    let mut out = text.to_owned();
    // Rewrite from the end so earlier byte offsets stay valid.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for f in &found {
        let year = f.date.year + years;
        edits.push((f.year_at, f.year_at + 4, format!("{year:04}")));
        if f.date.month == 2
            && f.date.day == 29
            && !is_leap(year)
            && let Some((start, end)) = f.day_at
        {
            edits.push((start, end, "28".into()));
        }
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (start, end, replacement) in edits {
        out.replace_range(start..end, &replacement);
    }
    Shifted { text: out, years }
}

fn unchanged(text: &str) -> Shifted {
    Shifted {
        text: text.to_owned(),
        years: 0,
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The month a word names: the full name or a 3+ letter prefix (`Sept`).
fn month_of(word: &str) -> Option<u32> {
    let word = word.to_ascii_lowercase();
    if word.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| *m == word || (word.len() <= 4 && m.starts_with(&word)))
        .map(|i| i as u32 + 1)
}

/// A day of month, with an optional ordinal suffix (`27`, `27th`, `1st`):
/// the day and the byte length of its digits.
fn day_of(word: &str) -> Option<(u32, usize)> {
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    let suffix = word[digits..].to_ascii_lowercase();
    if digits == 0 || digits > 2 || !["", "st", "nd", "rd", "th"].contains(&suffix.as_str()) {
        return None;
    }
    let day: u32 = word[..digits].parse().ok()?;
    (1..=31).contains(&day).then_some((day, digits))
}

fn year_of(word: &str) -> Option<i32> {
    (word.len() == 4 && word.bytes().all(|b| b.is_ascii_digit()))
        .then(|| word.parse().ok())
        .flatten()
        .filter(|y| (1900..2200).contains(y))
}

/// Words (alphanumeric runs) with their byte offsets.
fn words(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

/// Whether only spaces, commas and dots separate two words.
fn close(text: &str, left_end: usize, right_start: usize) -> bool {
    right_start >= left_end
        && right_start - left_end <= 3
        && text[left_end..right_start]
            .chars()
            .all(|c| matches!(c, ' ' | ',' | '.'))
}

fn find_dates(text: &str) -> Vec<Found> {
    let words = words(text);
    let mut found = Vec::new();
    for (i, &(at, word)) in words.iter().enumerate() {
        let Some(year) = year_of(word) else {
            continue;
        };
        // ISO: 2023-12-27.
        let rest = text.as_bytes().get(at + 4..at + 10);
        if let Some(rest) = rest
            && rest[0] == b'-'
            && rest[3] == b'-'
            && [1, 2, 4, 5].iter().all(|&k| rest[k].is_ascii_digit())
        {
            let month: u32 = text[at + 5..at + 7].parse().unwrap_or(0);
            let day: u32 = text[at + 8..at + 10].parse().unwrap_or(0);
            if (1..=12).contains(&month) && (1..=31).contains(&day) {
                found.push(Found {
                    date: Date::new(year, month, day),
                    year_at: at,
                    day_at: Some((at + 8, at + 10)),
                });
            }
            continue;
        }
        let before = |k: usize| -> Option<(usize, &str)> {
            let j = i.checked_sub(k)?;
            let (w_at, w) = words[j];
            let (next_at, next) = words[j + 1];
            close(text, w_at + w.len(), next_at)
                .then_some((w_at, w))
                .filter(|_| !next.is_empty())
        };
        let Some((_, prev)) = before(1) else {
            continue;
        };
        let date = if let Some(month) = month_of(prev) {
            // "December 2023" or "27 December 2023".
            match before(2).and_then(|(d_at, d)| day_of(d).map(|(day, len)| (d_at, day, len))) {
                Some((d_at, day, len)) => Some((month, day, Some((d_at, d_at + len)))),
                None => Some((month, 1, None)),
            }
        } else if let Some((day, len)) = day_of(prev) {
            // "December 27, 2023".
            before(2).and_then(|(_, m)| month_of(m)).map(|month| {
                let d_at = words[i - 1].0;
                (month, day, Some((d_at, d_at + len)))
            })
        } else {
            None
        };
        if let Some((month, day, day_at)) = date {
            found.push(Found {
                date: Date::new(year, month, day),
                year_at: at,
                day_at,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const TODAY: Date = Date {
        year: 2026,
        month: 11,
        day: 22,
    };

    fn shift(text: &str) -> (String, i32) {
        let s = shift_dates(text, TODAY);
        (s.text, s.years)
    }

    #[test]
    fn a_round_trip_moves_both_dates_by_the_same_years() {
        let (text, years) = shift(
            "Find the cheapest round-trip flight from New York to Paris leaving on December 27, 2023, and returning on January 10, 2024.",
        );
        assert_eq!(years, 3);
        assert!(
            text.contains("December 27, 2026") && text.contains("January 10, 2027"),
            "{text}"
        );
    }

    #[test]
    fn the_earliest_date_lands_on_or_after_today() {
        // Nov 1 2023 + 3 years is before Nov 22 2026, so it takes 4.
        assert_eq!(shift("on November 1, 2023").0, "on November 1, 2027");
        assert_eq!(shift("on 22 November 2025").0, "on 22 November 2026");
        assert_eq!(shift("on 23 Nov 2025").0, "on 23 Nov 2026");
    }

    #[test]
    fn every_supported_format_is_found() {
        assert_eq!(
            shift("check-in 2024-01-05 please").0,
            "check-in 2027-01-05 please"
        );
        assert_eq!(shift("from Dec 27 2023").0, "from Dec 27 2026");
        assert_eq!(shift("from the 3rd of March").1, 0, "no year, no date");
        assert_eq!(
            shift("27th Dec, 2023 to 2nd Jan, 2024").0,
            "27th Dec, 2026 to 2nd Jan, 2027"
        );
        assert_eq!(shift("in Sept. 2024").0, "in Sept. 2027");
        assert_eq!(shift("during December 2023").0, "during December 2026");
    }

    #[test]
    fn future_dates_bare_years_and_plain_text_are_left_alone() {
        for text in [
            "a flight on March 3, 2030",
            "the 2023 season standings",
            "May I have 2023 apples",
            "Compute 2 + 2",
            "",
        ] {
            assert_eq!(shift(text), (text.to_owned(), 0), "{text}");
        }
    }

    #[test]
    fn february_29_moves_to_the_28th_in_a_common_year() {
        assert_eq!(shift("on February 29, 2024").0, "on February 28, 2027");
        assert_eq!(shift("on 2024-02-29").0, "on 2027-02-28");
    }
}

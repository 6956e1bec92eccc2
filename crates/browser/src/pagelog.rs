//! Per-tab console and network buffers, filled by the page tracker from CDP
//! events and drained by the browser toolset's `read_console` and
//! `read_network`: bounded (the newest [`CAPACITY`] entries, each line cut
//! at [`MAX_LINE`] characters), and a read says how many were dropped.
//!
//! Everything here is page-derived text: the reader (the router) redacts
//! secrets and caps the whole answer before a model sees it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use lumen_core::BufferedLines;

/// Entries a buffer keeps; older ones are dropped and counted.
pub(crate) const CAPACITY: usize = 500;
/// Characters kept of one entry.
pub(crate) const MAX_LINE: usize = 1000;

/// Lines, oldest first, with a count of the ones dropped for room.
#[derive(Debug, Default)]
struct Lines {
    lines: VecDeque<String>,
    dropped: u64,
}

impl Lines {
    fn push(&mut self, line: String) {
        self.lines.push_back(one_line(&line));
        while self.lines.len() > CAPACITY {
            self.lines.pop_front();
            self.dropped += 1;
        }
    }

    fn drain(&mut self) -> BufferedLines {
        BufferedLines {
            lines: self.lines.drain(..).collect(),
            dropped: std::mem::take(&mut self.dropped),
        }
    }
}

/// A request seen leaving and not yet told as done.
#[derive(Debug)]
struct Pending {
    order: u64,
    method: String,
    url: String,
    started: f64,
    status: Option<i64>,
    mime: Option<String>,
    /// Finished without an error before its response was seen (the
    /// tracker's event streams are not ordered across event types): told
    /// once the response comes, or at the next read.
    finished: Option<f64>,
}

impl Pending {
    fn line(&self, end: &str, at: Option<f64>) -> String {
        let status = self
            .status
            .map_or_else(|| "---".to_owned(), |s| s.to_string());
        let mime = self
            .mime
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or("-");
        let timing = match at {
            Some(t) if t >= self.started => format!("{:.0} ms", (t - self.started) * 1000.0),
            _ => "-".to_owned(),
        };
        format!(
            "{} {} {status} {mime} {timing} {end}",
            self.method,
            shorten(&self.url, 400)
        )
        .trim_end()
        .to_owned()
    }
}

/// The console and network entries of one tab.
#[derive(Debug, Default)]
pub(crate) struct PageBuffers {
    console: Mutex<Lines>,
    network: Mutex<Network>,
}

#[derive(Debug, Default)]
struct Network {
    done: Lines,
    pending: HashMap<String, Pending>,
    next: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PageBuffers {
    /// A console entry: `[level] text`.
    pub(crate) fn console(&self, level: &str, text: &str) {
        lock(&self.console).push(format!("[{level}] {text}"));
    }

    /// The console entries since the last read.
    pub(crate) fn read_console(&self) -> BufferedLines {
        lock(&self.console).drain()
    }

    /// A request left (`at`: the protocol's monotonic seconds). A request
    /// id seen again is a redirect: the earlier hop ends with `status`.
    pub(crate) fn request(
        &self,
        id: &str,
        method: &str,
        url: &str,
        at: f64,
        redirect_status: Option<i64>,
    ) {
        let mut n = lock(&self.network);
        if let Some(mut hop) = n.pending.remove(id) {
            hop.status = redirect_status.or(hop.status);
            let line = hop.line("(redirect)", Some(at));
            n.done.push(line);
        }
        n.next += 1;
        let order = n.next;
        n.pending.insert(
            id.to_owned(),
            Pending {
                order,
                method: method.to_owned(),
                url: url.to_owned(),
                started: at,
                status: None,
                mime: None,
                finished: None,
            },
        );
        // A page that starts requests and never finishes them must not
        // grow the map without end: the oldest is told as unfinished.
        if n.pending.len() > CAPACITY
            && let Some(oldest) = n
                .pending
                .iter()
                .min_by_key(|(_, p)| p.order)
                .map(|(k, _)| k.clone())
            && let Some(p) = n.pending.remove(&oldest)
        {
            let line = p.line("(no end seen)", None);
            n.done.push(line);
        }
    }

    /// A response's headers arrived.
    pub(crate) fn response(&self, id: &str, status: i64, mime: &str) {
        let mut n = lock(&self.network);
        let Some(p) = n.pending.get_mut(id) else {
            return;
        };
        p.status = Some(status);
        p.mime = Some(mime.to_owned());
        if let Some(at) = p.finished
            && let Some(p) = n.pending.remove(id)
        {
            n.done.push(p.line("", Some(at)));
        }
    }

    /// A request finished (`error`: why it failed).
    pub(crate) fn finished(&self, id: &str, at: f64, error: Option<&str>) {
        let mut n = lock(&self.network);
        let Some(p) = n.pending.get_mut(id) else {
            return;
        };
        if error.is_none() && p.status.is_none() {
            // Its response is still on the way.
            p.finished = Some(at);
            return;
        }
        if let Some(p) = n.pending.remove(id) {
            let end = error.map(|e| format!("failed: {e}")).unwrap_or_default();
            n.done.push(p.line(&end, Some(at)));
        }
    }

    /// The requests finished since the last read, then the ones still in
    /// flight (told again once they finish).
    pub(crate) fn read_network(&self) -> BufferedLines {
        let mut n = lock(&self.network);
        // Finished ones whose response never came are done all the same.
        let mut finished: Vec<(u64, String)> = n
            .pending
            .iter()
            .filter(|(_, p)| p.finished.is_some())
            .map(|(id, p)| (p.order, id.clone()))
            .collect();
        finished.sort();
        for (_, id) in finished {
            if let Some(p) = n.pending.remove(&id) {
                n.done.push(p.line("", p.finished));
            }
        }
        let mut read = n.done.drain();
        let mut inflight: Vec<&Pending> = n.pending.values().collect();
        inflight.sort_by_key(|p| p.order);
        read.lines.extend(
            inflight
                .iter()
                .map(|p| one_line(&p.line("(in flight)", None))),
        );
        read
    }
}

/// One line of at most [`MAX_LINE`] characters: line breaks become `⏎`.
fn one_line(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { '⏎' } else { c })
        .collect();
    shorten(&flat, MAX_LINE)
}

/// `text` cut to `max` characters, saying so.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}… (cut)", &text[..end]),
    }
}

/// A console argument as text: a string as written, a primitive as its
/// value, an object by its description.
pub(crate) fn describe(
    value: Option<&serde_json::Value>,
    unserializable: Option<&str>,
    description: Option<&str>,
    kind: &str,
) -> String {
    match (value, unserializable, description) {
        (Some(serde_json::Value::String(s)), _, _) => s.clone(),
        (Some(v), _, _) if !v.is_null() || kind == "object" => v.to_string(),
        (_, Some(u), _) => u.to_owned(),
        (_, _, Some(d)) => d.to_owned(),
        _ => kind.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_keep_the_newest_entries_cut_to_one_line_and_count_the_rest() {
        let b = PageBuffers::default();
        for i in 0..CAPACITY + 7 {
            b.console("log", &format!("entry {i}"));
        }
        b.console("error", &format!("two\nlines {}", "x".repeat(5000)));
        let read = b.read_console();
        assert_eq!(read.dropped, 8);
        assert_eq!(read.lines.len(), CAPACITY);
        assert_eq!(read.lines[0], "[log] entry 8");
        let last = read.lines.last().unwrap();
        assert!(last.starts_with("[error] two⏎lines x"), "{last}");
        assert!(last.chars().count() <= MAX_LINE + 8, "{}", last.len());
        // Drained: the next read starts afresh.
        assert_eq!(b.read_console(), BufferedLines::default());
    }

    #[test]
    fn a_response_seen_after_its_request_finished_is_kept() {
        let b = PageBuffers::default();
        b.request("1", "GET", "http://x.test/data.json", 1.0, None);
        b.finished("1", 1.02, None);
        b.response("1", 200, "application/json");
        b.request("2", "GET", "http://x.test/never", 2.0, None);
        b.finished("2", 2.5, None);
        let read = b.read_network();
        assert_eq!(
            read.lines,
            vec![
                "GET http://x.test/data.json 200 application/json 20 ms",
                "GET http://x.test/never --- - 500 ms",
            ]
        );
        assert!(b.read_network().lines.is_empty(), "told once");
    }

    #[test]
    fn requests_are_told_once_done_and_while_in_flight() {
        let b = PageBuffers::default();
        b.request("1", "GET", "http://x.test/a", 1.0, None);
        b.response("1", 200, "text/html");
        b.finished("1", 1.25, None);
        b.request("2", "POST", "http://x.test/api", 2.0, None);
        b.request("3", "GET", "http://x.test/old", 3.0, None);
        b.request("3", "GET", "http://x.test/new", 3.1, Some(301));
        b.finished("3", 3.2, Some("net::ERR_CONNECTION_RESET"));
        let read = b.read_network();
        assert_eq!(
            read.lines,
            vec![
                "GET http://x.test/a 200 text/html 250 ms",
                "GET http://x.test/old 301 - 100 ms (redirect)",
                "GET http://x.test/new --- - 100 ms failed: net::ERR_CONNECTION_RESET",
                "POST http://x.test/api --- - - (in flight)",
            ]
        );
        // The request in flight is told again once it ends.
        b.finished("2", 2.5, None);
        assert_eq!(
            b.read_network().lines,
            vec!["POST http://x.test/api --- - 500 ms"]
        );
        assert!(b.read_network().lines.is_empty());
    }

    #[test]
    fn requests_that_never_end_cannot_grow_without_bound() {
        let b = PageBuffers::default();
        for i in 0..CAPACITY * 3 {
            b.request(&i.to_string(), "GET", "http://x.test/poll", 0.0, None);
        }
        let read = b.read_network();
        assert!(read.lines.len() <= CAPACITY * 2, "{}", read.lines.len());
        assert!(read.dropped > 0);
        assert!(
            read.lines[0].ends_with("(no end seen)"),
            "{}",
            read.lines[0]
        );
    }
}

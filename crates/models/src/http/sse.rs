//! Server-sent events: framing a byte stream (live or recorded) into
//! events, with the line-ending quirks real servers have.

use std::fmt;
use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use lumen_core::Result;

use super::client::stream_error;
use crate::limits::{MAX_SSE_EVENT_BYTES, MAX_STREAMED_ANSWER_BYTES, size};

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (`message` when the server sent none).
    pub event: String,
    /// The `data:` payload (lines joined with `\n`).
    pub data: String,
}

/// A stream of SSE events or typed errors.
pub(crate) type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent>> + Send>>;

/// A transport failure inside the byte stream.
#[derive(Debug)]
pub(crate) struct ApiFailure {
    pub(crate) provider: &'static str,
    pub(crate) message: String,
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.provider, self.message)
    }
}

impl std::error::Error for ApiFailure {}

/// Parses a byte stream as SSE. Used by the live client and, over
/// in-memory chunks, by the tests and `cargo xtask decode-stream`.
///
/// The parser is ours, not a crate's: it reads each byte once (a long line
/// arriving in small chunks is not rescanned per chunk), and it bounds what
/// it holds by [`MAX_SSE_EVENT_BYTES`] and [`MAX_STREAMED_ANSWER_BYTES`].
pub(crate) fn sse_events<S, B>(provider: &'static str, bytes: S) -> SseStream
where
    S: Stream<Item = std::result::Result<B, ApiFailure>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    // The end of the body is marked (`None`) so the decoder can dispatch a
    // last event that lost its closing blank line.
    let mut decoder = SseDecoder::default();
    let events = bytes
        .map(|chunk| chunk.map(Some))
        .chain(futures::stream::once(async { Ok(None) }))
        .scan(false, move |failed, chunk| {
            let mut out = Vec::new();
            let item = match chunk {
                _ if *failed => None,
                Ok(Some(b)) => Some(decoder.feed(b.as_ref(), &mut out)),
                Ok(None) => {
                    decoder.end(&mut out);
                    Some(Ok(()))
                }
                Err(e) => Some(Err(e.message)),
            };
            // Nothing is read after an error.
            *failed = !matches!(item, Some(Ok(())));
            let items: Option<Vec<Result<SseEvent>>> = item.map(|result| {
                let mut items: Vec<Result<SseEvent>> = out.into_iter().map(Ok).collect();
                if let Err(message) = result {
                    items.push(Err(stream_error(provider, message)));
                }
                items
            });
            futures::future::ready(items)
        })
        .flat_map(futures::stream::iter);
    Box::pin(events)
}

/// An SSE decoder (the WHATWG event-stream rules): fed chunks of bytes,
/// it yields events as their closing blank line arrives. Lines end with
/// LF, CR or CRLF, even when a CRLF is split between two chunks.
#[derive(Debug, Default)]
struct SseDecoder {
    /// The line being read (bytes, so a character split between chunks is
    /// whole by the time the line is decoded).
    line: Vec<u8>,
    /// The last line ended in a CR: a LF right after it belongs to it.
    skip_lf: bool,
    /// Whether the first line was read (a BOM may start it).
    started: bool,
    /// The `event:` field of the event being read.
    event: String,
    /// The `data:` lines of the event being read, each followed by LF.
    data: String,
    /// Bytes of the event being read, its complete lines so far.
    event_bytes: usize,
    /// Bytes of the whole body so far.
    body_bytes: usize,
}

impl SseDecoder {
    /// Reads a chunk, pushing the events it completes; fails when the
    /// stream is over a cap or a line is not UTF-8.
    fn feed(&mut self, b: &[u8], out: &mut Vec<SseEvent>) -> std::result::Result<(), String> {
        self.body_bytes = self.body_bytes.saturating_add(b.len());
        if self.body_bytes > MAX_STREAMED_ANSWER_BYTES {
            return Err(format!(
                "the answer is over the {} cap on a streamed answer \
                 (MAX_STREAMED_ANSWER_BYTES)",
                size(MAX_STREAMED_ANSWER_BYTES)
            ));
        }
        let mut rest = b;
        while !rest.is_empty() {
            if std::mem::take(&mut self.skip_lf) && rest[0] == b'\n' {
                rest = &rest[1..];
                continue;
            }
            match rest.iter().position(|&c| c == b'\n' || c == b'\r') {
                Some(at) => {
                    self.line.extend_from_slice(&rest[..at]);
                    self.skip_lf = rest[at] == b'\r';
                    rest = &rest[at + 1..];
                    self.end_line(out)?;
                }
                None => {
                    self.line.extend_from_slice(rest);
                    rest = &[];
                }
            }
            if self.event_bytes + self.line.len() > MAX_SSE_EVENT_BYTES {
                return Err(format!(
                    "an event is over the {} cap on one server-sent event \
                     (MAX_SSE_EVENT_BYTES): {} bytes without the blank line that ends it",
                    size(MAX_SSE_EVENT_BYTES),
                    self.event_bytes + self.line.len()
                ));
            }
        }
        Ok(())
    }

    /// One complete line.
    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> std::result::Result<(), String> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        self.event_bytes += line.len() + 1;
        let line = String::from_utf8(line)
            .map_err(|_| "malformed event stream: a line is not UTF-8".to_owned())?;
        let mut line = line.as_str();
        if !std::mem::replace(&mut self.started, true) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            // `id` and `retry` matter to reconnecting browsers, not here.
            _ => {}
        }
        Ok(())
    }

    /// A blank line: the event read so far, if it has data.
    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        self.event_bytes = 0;
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        out.push(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
        });
    }

    /// The end of the body: a last event whose lines are complete but that
    /// misses its closing blank line is still dispatched (recorded streams
    /// often lose the final newline); a half-sent line is not.
    fn end(&mut self, out: &mut Vec<SseEvent>) {
        if self.line.is_empty() {
            self.dispatch(out);
        }
    }
}

/// Re-frames a recorded stream into SSE bytes: raw SSE is returned as is;
/// a file of one JSON payload per line becomes `data: <line>\n\n` events.
pub fn reframe_recording(input: &str) -> String {
    let first = input.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let is_sse = ["data:", "event:", "id:", ":", "retry:"]
        .iter()
        .any(|p| first.starts_with(p));
    if is_sse {
        return input.to_owned();
    }
    let mut out = String::with_capacity(input.len() + input.lines().count() * 8);
    for line in input.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        out.push_str("data: ");
        out.push_str(line);
        out.push_str("\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decodes `chunks` as one body, errors as their messages.
    fn decode(chunks: Vec<Vec<u8>>) -> Vec<std::result::Result<SseEvent, String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = futures::stream::iter(chunks.into_iter().map(Ok::<_, ApiFailure>));
        rt.block_on(
            sse_events("test", bytes)
                .map(|r| r.map_err(|e| e.to_string()))
                .collect(),
        )
    }

    /// `bytes` cut at the given sizes (cycled).
    fn cut(bytes: &[u8], sizes: &[usize]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let (mut at, mut i) = (0, 0);
        while at < bytes.len() {
            let end = (at + sizes[i % sizes.len()]).min(bytes.len());
            out.push(bytes[at..end].to_vec());
            at = end;
            i += 1;
        }
        out
    }

    /// One event: a name (or none) and its data lines, with the line
    /// ending each line of it uses.
    fn event() -> impl Strategy<Value = (Option<String>, Vec<String>, Vec<&'static str>)> {
        let line = proptest::collection::vec(
            proptest::sample::select(vec!['a', 'Z', '0', ' ', ':', '{', '"', 'é', '日', '🦀']),
            0..12,
        )
        .prop_map(|c| c.into_iter().collect::<String>());
        (
            proptest::option::of("[a-z_.]{1,12}"),
            proptest::collection::vec(line, 1..4),
            proptest::collection::vec(proptest::sample::select(vec!["\n", "\r\n", "\r"]), 6),
        )
    }

    fn wire(events: &[(Option<String>, Vec<String>, Vec<&'static str>)]) -> Vec<u8> {
        let mut out = String::new();
        for (name, lines, endings) in events {
            // A CR then a LF would be one line ending (CRLF), not two.
            let mut previous = "";
            let mut eol = endings.iter().cycle().map(|&e| {
                let e = if previous == "\r" && e == "\n" {
                    "\r\n"
                } else {
                    e
                };
                previous = e;
                e
            });
            if let Some(name) = name {
                out.push_str(&format!("event: {name}{}", eol.next().unwrap()));
            }
            for line in lines {
                out.push_str(&format!("data: {line}{}", eol.next().unwrap()));
            }
            out.push_str(eol.next().unwrap());
        }
        out.into_bytes()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// However a valid stream is cut into chunks (through a CRLF, or a
        /// multi-byte character), it decodes to the events it holds.
        #[test]
        fn any_chunking_of_a_valid_stream_decodes_identically(
            events in proptest::collection::vec(event(), 0..6),
            sizes in proptest::collection::vec(1usize..40, 1..6),
        ) {
            let bytes = wire(&events);
            let expected: Vec<std::result::Result<SseEvent, String>> = events
                .iter()
                .map(|(name, lines, _)| Ok(SseEvent {
                    event: name.clone().unwrap_or_else(|| "message".into()),
                    data: lines.join("\n"),
                }))
                .collect();
            prop_assert_eq!(&decode(vec![bytes.clone()]), &expected);
            prop_assert_eq!(&decode(cut(&bytes, &sizes)), &expected);
        }

        /// Arbitrary bytes never panic, and decode the same however cut.
        #[test]
        fn any_bytes_decode_the_same_however_cut(
            bytes in proptest::collection::vec(
                prop_oneof![any::<u8>(), Just(b'\n'), Just(b'\r'), Just(b':')],
                0..300,
            ),
            sizes in proptest::collection::vec(1usize..40, 1..6),
        ) {
            prop_assert_eq!(decode(vec![bytes.clone()]), decode(cut(&bytes, &sizes)));
        }
    }

    /// An event that never ends (no blank line) stops at the cap with an
    /// error naming it, having read little more than the cap.
    #[test]
    fn an_endless_event_fails_at_the_cap() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let pulled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = std::sync::Arc::clone(&pulled);
        let chunk = vec![b'a'; 64 << 10];
        let endless = futures::stream::once(async { Ok(b"data: ".to_vec()) }).chain(
            futures::stream::repeat_with(move || {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok::<_, ApiFailure>(chunk.clone())
            }),
        );
        let items: Vec<_> = rt.block_on(sse_events("test", endless).collect());
        let [Err(e)] = items.as_slice() else {
            panic!("expected one error, got {} items", items.len());
        };
        let message = e.to_string();
        assert!(message.contains("MAX_SSE_EVENT_BYTES"), "{message}");
        assert!(message.contains("8 MiB"), "{message}");
        let read = pulled.load(std::sync::atomic::Ordering::Relaxed) * (64 << 10);
        assert!(read <= MAX_SSE_EVENT_BYTES + (64 << 10), "{read}");
    }

    /// Endless small events (each under the event cap) stop at the cap on
    /// the whole answer.
    #[test]
    fn endless_events_fail_at_the_answer_cap() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let chunk = ": keep-alive\n\n".repeat(4096).into_bytes();
        let endless = futures::stream::repeat_with(move || Ok::<_, ApiFailure>(chunk.clone()));
        let items: Vec<_> = rt.block_on(sse_events("test", endless).collect());
        let [Err(e)] = items.as_slice() else {
            panic!("expected one error, got {} items", items.len());
        };
        assert!(e.to_string().contains("MAX_STREAMED_ANSWER_BYTES"), "{e}");
    }

    /// Events just under the cap pass; the cap counts the event's bytes,
    /// not the body's.
    #[test]
    fn events_under_the_cap_pass() {
        let data = "x".repeat(MAX_SSE_EVENT_BYTES - 100);
        let body = format!("data: {data}\n\ndata: {data}\r\n\r\n");
        let items = decode(cut(body.as_bytes(), &[60_000]));
        assert_eq!(items.len(), 2);
        assert!(
            items
                .iter()
                .all(|i| i.as_ref().is_ok_and(|e| e.data.len() == data.len()))
        );
    }

    /// A CR that ends the body still ends its line.
    #[test]
    fn a_final_cr_ends_the_last_event() {
        let items = decode(vec![b"data: a\n\ndata: b\r".to_vec()]);
        let data: Vec<_> = items.into_iter().map(|i| i.unwrap().data).collect();
        assert_eq!(data, ["a", "b"]);
    }
}

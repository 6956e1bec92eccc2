//! Input bounds: the most a page can make this crate hold or pass on.
//!
//! A page is hostile: a script can return a string of hundreds of
//! megabytes, and a page can build an accessibility tree of a million
//! nodes. Going over a cap is a typed outcome naming the cap and its
//! value, never an abort or an out-of-memory:
//!
//! | cap | value | over it |
//! |---|---|---|
//! | [`MAX_EVALUATE_RESULT_BYTES`] | 4 MiB | the evaluation is a [`LumenError::Script`](lumen_core::LumenError::Script) error (`ok: false` to the model); the value never leaves the page |
//! | [`MAX_AX_NODES`] | 20,000 | the snapshot keeps the first nodes in document order and ends with a marker node counting the rest |
//! | [`MAX_AX_TEXT_BYTES`] | 1 MiB | the same |
//! | [`MAX_AX_PAGE_TEXT_BYTES`] | 64 KiB | the same, for the page's text nodes |
//! | [`MAX_AX_FIELD_CHARS`] | 2,000 | a node's name or value is cut, ending in `…` |
//! | [`MAX_FRAMES`] | 32 | a snapshot goes into the first frames (in document order, at most 8 deep) and shows the others as empty `Iframe` nodes |
//! | [`MAX_CDP_MESSAGE_BYTES`] | 256 MiB | [`PageLink`](crate::PageLink)'s socket fails with a `BrowserDisconnected` error naming the cap |
//! | [`MAX_OPEN_TABS`] | 24 | in a launched browser or a tab's own context: a tab a page opens past it is closed at once and the next receipt says so; `new_tab` is refused (`ok: false`) |
//!
//! chromiumoxide's own socket takes messages of any size (its
//! `Connection::connect` sets no limit and takes no configuration), so on
//! [`CdpTab`](crate::CdpTab) the caps above are enforced where the data is
//! made: an evaluation's value is measured in the page before it is sent.

/// The most a script's value may take as JSON text (measured in the page
/// in UTF-16 code units, which is bytes for ASCII).
pub const MAX_EVALUATE_RESULT_BYTES: usize = 4 << 20;

/// The most nodes an accessibility snapshot lists.
pub const MAX_AX_NODES: usize = 20_000;

/// The most text (roles, names and values) an accessibility snapshot
/// holds.
pub const MAX_AX_TEXT_BYTES: usize = 1 << 20;

/// The most page text (the `text` nodes' words) an accessibility snapshot
/// holds: about 16,000 tokens, so a long article still leaves a model
/// room to act; the rest is read by the ref of a part of the page.
pub const MAX_AX_PAGE_TEXT_BYTES: usize = 64 << 10;

/// The most characters of one node's name or value in a snapshot.
pub const MAX_AX_FIELD_CHARS: usize = 2_000;

/// The ref of the node that ends a snapshot cut at a cap (a `note` whose
/// name counts the nodes left out). It names no element.
pub const OMITTED_REF: &str = lumen_core::AxSnapshot::OMITTED_REF;

/// The most page tabs a [`CdpTab`](crate::CdpTab) keeps open in its
/// browser context. Every tab is a renderer, and a page can open windows
/// in a loop (a popup blocker would stop one without a click; agents run
/// without it so the popups their clicks open work): past the cap, a new
/// tab is closed as soon as Chromium announces it. Only where every page of
/// the context is the tab's (a browser it launched, or a context of its
/// own): a browser reached with [`CdpTab::connect`](crate::CdpTab::connect)
/// may hold a person's tabs, which are never closed.
pub const MAX_OPEN_TABS: usize = 24;

/// The most frames (`<iframe>`s, at any depth) a `PageLink` snapshot goes
/// into.
pub const MAX_FRAMES: usize = 32;

/// The most one CDP message may take on `PageLink`'s WebSocket.
pub const MAX_CDP_MESSAGE_BYTES: usize = 256 << 20;

/// A size for messages: `4 MiB`, or bytes.
pub(crate) fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

//! CDP commands written once, for both transports.
//!
//! [`CdpTab`](crate::CdpTab) sends commands through chromiumoxide,
//! [`PageLink`](crate::PageLink) over its own WebSocket; what they send is
//! built here, as `(method, params)` pairs, and what they read back is
//! decoded here, so the protocol knowledge exists once:
//!
//! - [`keys`]: key names, key events and chords;
//! - [`mouse`]: button names and bits, pointer, click and wheel events;
//! - [`typing`]: text as lines, with Enter between them;
//! - [`screenshot`]: capture parameters and decoding the image;
//! - [`runtime`]: evaluating an expression and reading its value;
//! - [`pages`]: the page list and history entries;
//! - [`dialogs`]: answering JavaScript dialogs by policy.
//!
//! Nothing here sends anything or knows a connection.

pub(crate) mod dialogs;
pub(crate) mod keys;
pub(crate) mod mouse;
pub(crate) mod pages;
pub(crate) mod runtime;
pub(crate) mod screenshot;
pub(crate) mod typing;

/// One CDP command, method and parameters, ready for either transport.
pub(crate) type Command = (&'static str, serde_json::Value);

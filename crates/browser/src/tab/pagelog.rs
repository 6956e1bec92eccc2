//! Console and network reads of the driven tab (the browser toolset's
//! `read_console` and `read_network`): the entries the page tracker
//! buffered since attach and since the last read.

use lumen_core::BufferedLines;

use super::CdpTab;

impl CdpTab {
    /// The driven tab's console entries (`[log] …`, `[error] …`,
    /// `[warning] …`, `[exception] …`, browser messages) since the last
    /// read, oldest first; the read drains them.
    pub async fn console_entries(&self) -> BufferedLines {
        let ctx = self.active();
        // Events already delivered are in the buffer before it is read.
        ctx.flusher.flush().await;
        ctx.buffers.read_console()
    }

    /// The driven tab's requests (`METHOD URL STATUS MIME TIMING`) finished
    /// since the last read, then those still in flight; the read drains
    /// the finished ones.
    pub async fn network_entries(&self) -> BufferedLines {
        let ctx = self.active();
        ctx.flusher.flush().await;
        ctx.buffers.read_network()
    }
}

//! The accept loop: HTTP/1.1 on hyper with a header-read timeout, an idle
//! timeout and a cap on open connections (`axum::serve` sets none of these),
//! and a graceful shutdown that lets open responses finish.

use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

/// The connection limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_connections: usize,
    pub(crate) header_read_timeout: Duration,
    pub(crate) idle_timeout: Duration,
}

/// Serves `app` on `listener` until `stop` turns true, then stops
/// accepting, asks every connection to close after its current response and
/// returns when all have closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(max));
    // Each connection task holds a sender; all gone means all ended.
    let (open, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    loop {
        // A free slot first: beyond the cap, connections wait in the
        // kernel's backlog instead of being accepted and starved.
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = stopped(&mut stop) => break,
        };
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors and the like: back off, go on.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => break,
        };
        let _ = tcp.set_nodelay(true);
        let open = open.clone();
        let task = connection(tcp, permit, app.clone(), limits, stop.clone());
        tokio::spawn(async move {
            task.await;
            drop(open);
        });
    }
    drop(listener);
    drop(open);
    // Every connection has finished its response (an upgraded WebSocket
    // goes on by itself and ends with its client).
    let _ = all_closed.recv().await;
    Ok(())
}

/// Resolves once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.is_ok();
}

async fn connection(
    tcp: TcpStream,
    permit: OwnedSemaphorePermit,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let start = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let io = Tracked {
        inner: tcp,
        start,
        last: last.clone(),
        _permit: permit,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let conn = builder
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(app))
        .with_upgrades();
    let mut conn = pin!(conn);
    let idle = limits.idle_timeout.max(Duration::from_millis(10));
    let mut check = tokio::time::interval((idle / 4).max(Duration::from_millis(5)));
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!("connection ended: {e}");
                }
                return;
            }
            _ = stopped(&mut stop), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = check.tick() => {
                let quiet = start.elapsed().saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
                if quiet >= idle {
                    tracing::debug!("closing a connection idle for {quiet:?}");
                    return;
                }
            }
        }
    }
}

/// A connection that remembers when it last moved a byte and holds its
/// slot until dropped (after an upgrade too).
struct Tracked {
    inner: TcpStream,
    start: Instant,
    last: Arc<AtomicU64>,
    _permit: OwnedSemaphorePermit,
}

impl Tracked {
    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.touch();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

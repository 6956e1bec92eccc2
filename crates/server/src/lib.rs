//! Lumen as a service: an HTTP API with server-sent events and a WebSocket
//! stream, IPC over JSON lines, and an MCP server over stdio.
//!
//! May depend on the `lumen` facade (and through it the browser and model
//! crates), `lumen-trace` (run folders follow its layout and get its
//! report), `lumen-mock` (the offline mode), `axum` and `rmcp`; nothing
//! depends on it but the CLI and `lumen-eval`.
//!
//! # Entry points (what `lumen serve`, `lumen ipc` and `lumen mcp` call)
//!
//! - [`serve`]: the HTTP server until SIGTERM or Ctrl-C, then a graceful
//!   shutdown. [`Server::start`] is the same without the signal handling
//!   (tests, embedding).
//! - [`ipc()`] / [`ipc_stdio`]: JSON lines on any reader/writer (stdin and
//!   stdout for the CLI); the protocol is in [`mod@ipc`].
//! - [`mcp()`] / [`mcp_stdio`]: an MCP server (tools in [`mod@mcp`]).
//!
//! Runs are persisted under [`ServeOptions::data_dir`] as they happen (see
//! [`store`]); a run left unfinished by a crash is `interrupted` after a
//! restart and `POST /v1/runs/{id}/resume` continues it from its last
//! completed step. See `docs/server.md`.
//!
//! # Example
//! ```no_run
//! # async fn run() -> Result<(), lumen_server::ServeError> {
//! let options = lumen_server::ServeOptions::new("/tmp/lumen-data");
//! let server = lumen_server::Server::start(options).await?;
//! println!("listening on http://{}", server.local_addr());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod db;
mod error;
mod front_door;
mod http;
pub mod ipc;
mod listen;
pub mod live;
mod lock;
pub mod mcp;
mod openapi;
mod options;
mod runs;
pub mod store;
mod tools;

use std::net::SocketAddr;
use std::sync::Arc;

pub use error::ApiError;
pub use ipc::{ipc, ipc_stdio};
pub use mcp::{mcp, mcp_stdio};
#[doc(hidden)]
pub use options::TestHooks;
pub use options::{BrowserEndpoint, EndpointSource, ServeOptions, TOKEN_ENV};
pub use runs::{
    CANCEL_REASONS, LEASE_LOST, Live, RunEntry, RunManager, SERVER_RESTART, SERVER_SHUTDOWN,
    USER_CANCEL,
};
pub use store::{Mode, RunInfo, RunState};

/// Why the service could not start or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Listening off loopback without a bearer token.
    #[error(
        "refusing to listen on {0} without a token: pass --token or set {TOKEN_ENV} (loopback addresses need none)"
    )]
    TokenRequired(std::net::IpAddr),
    /// The data directory could not be prepared.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Another process (a server, `lumen ipc` or `lumen mcp`) holds the
    /// data directory's lock.
    #[error(
        "data directory {} is in use by another Lumen process{}: stop that process or give this one another --data-dir (the lock in {} is released when its holder exits)",
        path.display(),
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        lock.display()
    )]
    DataDirInUse {
        /// The data directory.
        path: std::path::PathBuf,
        /// Its lock file.
        lock: std::path::PathBuf,
        /// The holder's pid, as it wrote it.
        pid: Option<u32>,
    },
    /// The run store could not be opened or migrated.
    #[error("run store {store}: {source}")]
    Database {
        /// The SQLite file or the PostgreSQL URL (password hidden).
        store: String,
        /// The cause.
        source: crate::db::DbError,
    },
    /// Binding or serving failed.
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
    /// The MCP transport failed.
    #[error("mcp: {0}")]
    Mcp(String),
}

/// The OpenAPI document served at `/openapi.json`.
pub fn openapi_document() -> serde_json::Value {
    openapi::document()
}

/// The action schema served at `/v1/tools`.
pub fn tools_document() -> serde_json::Value {
    tools::document()
}

/// A running HTTP server.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    token: Arc<str>,
    token_file: Option<std::path::PathBuf>,
    runs: Arc<RunManager>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Checks the options, prepares the data directory (marking unfinished
    /// runs `interrupted`), binds and starts serving in the background.
    ///
    /// Every route but `/health` needs the bearer token. Without
    /// [`ServeOptions::token`] (loopback only) one is generated and written
    /// to `<data_dir>/token`, readable by the owner only: see
    /// [`token`](Self::token) and [`token_file`](Self::token_file).
    pub async fn start(options: ServeOptions) -> Result<Server, ServeError> {
        if !options.host.is_loopback() && options.effective_token().is_none() {
            return Err(ServeError::TokenRequired(options.host));
        }
        let given = options.effective_token().map(str::to_string);
        let addr = SocketAddr::new(options.host, options.port);
        let data_dir = options.data_dir.clone();
        let allowed_hosts = options.allowed_hosts.clone();
        let max_body = options.max_body_bytes;
        let live_silence = options.test_hooks.live_silence.unwrap_or(live::SILENCE);
        let limits = listen::Limits {
            max_connections: options.max_connections,
            header_read_timeout: options.header_read_timeout,
            idle_timeout: options.idle_timeout,
        };
        let data_dir_error = |source| ServeError::DataDir {
            path: data_dir.clone(),
            source,
        };
        let runs = RunManager::new(options).await?;
        let (token, token_file) = match given {
            Some(t) => {
                front_door::remove_token_file(&data_dir);
                (t, None)
            }
            None => {
                let t = front_door::generate_token()?;
                let file = front_door::write_token_file(&data_dir, &t).map_err(data_dir_error)?;
                (t, Some(file))
            }
        };
        let token: Arc<str> = Arc::from(token);
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        // With port 0 the real port is known only now; runs must not reach it.
        runs.set_listen_port(addr.port());
        let door = front_door::FrontDoor::new(addr, &allowed_hosts, token.clone(), max_body);
        let app = http::router(http::AppState {
            runs: runs.clone(),
            door: Arc::new(door),
            tickets: Arc::new(live::Tickets::new(live_silence)),
        });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(listen::serve(listener, app, limits, stopped));
        tracing::info!("lumen server listening on http://{addr}");
        Ok(Server {
            addr,
            token,
            token_file,
            runs,
            stop,
            task,
        })
    }

    /// The bearer token every route but `/health` requires (the one given,
    /// or the one generated at start).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Where the generated token was written (`<data_dir>/token`, mode
    /// 0600); `None` when the token was given.
    pub fn token_file(&self) -> Option<&std::path::Path> {
        self.token_file.as_deref()
    }

    /// The address it listens on (with the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The run manager (for embedding).
    pub fn runs(&self) -> &Arc<RunManager> {
        &self.runs
    }

    /// Graceful shutdown: cancels every active run with reason
    /// `server_shutdown` (each becomes `interrupted`, persisted, resumable
    /// after a restart), waits for them to persist, then stops serving.
    pub async fn shutdown(self) {
        self.runs.shutdown().await;
        let _ = self.stop.send(true);
        // Open event streams end with their runs; do not wait forever for
        // an idle keep-alive connection.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.task).await;
    }
}

/// Resolves on SIGTERM or Ctrl-C. The handlers are installed when this is
/// called, before the returned future is first polled.
fn termination() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let ctrl_c = tokio::signal::ctrl_c();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = term.recv() => {}
                _ = ctrl_c => {}
            }
            return;
        }
        let _ = ctrl_c.await;
    }
}

/// `lumen serve`: serves until SIGTERM or Ctrl-C, then shuts down
/// gracefully (runs cancelled with reason `server_shutdown` and persisted
/// as `interrupted`, resumable after a restart).
pub async fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let signalled = termination();
    let server = Server::start(options).await?;
    if let Some(file) = server.token_file() {
        // Printed once, on stderr (not a log line: logs are often kept).
        eprintln!(
            "lumen serve: API token (generated; also in {}, readable by you only):\n  {}\n\
             Send it as `Authorization: Bearer <token>`; set {TOKEN_ENV} to choose your own.",
            file.display(),
            server.token()
        );
    }
    signalled.await;
    tracing::info!("shutting down: cancelling active runs");
    server.shutdown().await;
    Ok(())
}

//! [`FixtureServer`]: a static file server for the fixture sites, with fault
//! and latency injection and a request log.

mod files;

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The longest delay a `lumen_delay_ms` query parameter can ask for; larger
/// values are cut to this, so a typo cannot hang a test run.
pub const MAX_QUERY_DELAY: Duration = Duration::from_secs(30);

/// Query parameter that delays one response by this many milliseconds.
const DELAY_PARAM: &str = "lumen_delay_ms";
/// Query parameter that makes one response carry this status.
const STATUS_PARAM: &str = "lumen_status";
/// Query parameter that cuts one response's body after this many bytes:
/// the headers announce the whole file, the first bytes are sent, and the
/// connection is then aborted (a download that fails mid-body).
const ABORT_PARAM: &str = "lumen_abort_after";
/// How long an aborted body waits after its first bytes, so the client has
/// surely started on it.
const ABORT_PAUSE: Duration = Duration::from_millis(500);

/// How often to retry when `[::1]` already has our IPv4 port taken.
const BIND_ATTEMPTS: usize = 8;

/// The workspace's `fixtures/sites` folder, which [`FixtureServer::start`]
/// serves. Found from this crate's manifest folder, so it does not depend
/// on the working directory of the test.
pub fn fixtures_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/mock -> crates -> the workspace root.
    manifest_dir
        .ancestors()
        .nth(2)
        .unwrap_or(manifest_dir)
        .join("fixtures")
        .join("sites")
}

/// One request the server received, in arrival order; see
/// [`FixtureServer::requests`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestRecord {
    /// The method, such as `GET`.
    pub method: String,
    /// The path exactly as sent, still percent-encoded, e.g. `/a%20b.html`.
    pub path: String,
    /// The raw query string without the `?`, if the request had one.
    pub query: Option<String>,
}

/// A static file server for fixture pages, on `127.0.0.1` (and `[::1]`, when
/// the machine has it) at an ephemeral port.
///
/// It serves files below its root with a content type chosen by extension,
/// `index.html` for folders, 404 for missing files and 400 for paths that
/// try to leave the root. Every response carries `Cache-Control: no-store`,
/// so a browser re-fetches pages between steps of a test. Files below
/// `downloads/` carry `Content-Disposition: attachment`. Any method is
/// answered like `GET`, so a fixture form may post to a static result page.
///
/// Faults can be injected per request with the query parameters
/// `lumen_delay_ms=N` (wait N ms, at most [`MAX_QUERY_DELAY`]),
/// `lumen_status=N` (answer status N with a short text body) and
/// `lumen_abort_after=N` (send the first N bytes of the file, then abort the
/// connection), or for a path
/// prefix with [`set_delay`](Self::set_delay) and [`fail`](Self::fail). A
/// query parameter wins over a programmatic fault of the same kind. Delays
/// run before statuses, so both can be combined.
///
/// The server runs on tasks of the current tokio runtime. Dropping it stops
/// accepting connections, cuts injected delays short and lets answers in
/// flight finish; [`shutdown`](Self::shutdown) does the same and waits until
/// the port is closed.
#[derive(Debug)]
pub struct FixtureServer {
    root: PathBuf,
    port: u16,
    addrs: Vec<SocketAddr>,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// State the request handler shares with the [`FixtureServer`] handle.
#[derive(Debug)]
struct Shared {
    root: PathBuf,
    faults: Mutex<Faults>,
    requests: Mutex<Vec<RequestRecord>>,
    stop: watch::Receiver<bool>,
}

/// Programmatic faults, keyed by path prefix. A later call for the same
/// prefix replaces the earlier one; the longest matching prefix applies.
#[derive(Debug, Default)]
struct Faults {
    delays: Vec<(String, Duration)>,
    failures: Vec<(String, StatusCode)>,
    redirects: Vec<(String, String)>,
}

impl FixtureServer {
    /// Serves the workspace's `fixtures/sites` folder (see
    /// [`fixtures_root`]).
    ///
    /// # Errors
    ///
    /// Fails if the folder does not exist or no loopback port can be bound.
    pub async fn start() -> io::Result<Self> {
        Self::start_at(fixtures_root()).await
    }

    /// Serves `root`, which must be an existing folder.
    ///
    /// Must be called inside a tokio runtime; the server runs on tasks
    /// spawned there.
    ///
    /// # Errors
    ///
    /// Fails if `root` is not a folder or no loopback port can be bound.
    pub async fn start_at(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref();
        let canonical = tokio::fs::canonicalize(root).await.map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("fixture root {} is not usable: {error}", root.display()),
            )
        })?;
        if !tokio::fs::metadata(&canonical).await?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("fixture root {} is not a folder", root.display()),
            ));
        }

        let listeners = bind_loopback().await?;
        let mut addrs = Vec::with_capacity(listeners.len());
        for listener in &listeners {
            addrs.push(listener.local_addr()?);
        }
        let port = addrs.first().map(SocketAddr::port).unwrap_or_default();

        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            root: canonical.clone(),
            faults: Mutex::new(Faults::default()),
            requests: Mutex::new(Vec::new()),
            stop: stop_rx.clone(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));

        let tasks = listeners
            .into_iter()
            .map(|listener| {
                let serve = axum::serve(listener, app.clone())
                    .with_graceful_shutdown(stopped(stop_rx.clone()));
                tokio::spawn(async move {
                    if let Err(error) = serve.await {
                        tracing::warn!(%error, "fixture server stopped with an error");
                    }
                })
            })
            .collect();

        tracing::debug!(root = %canonical.display(), ?addrs, "fixture server started");
        Ok(Self {
            root: canonical,
            port,
            addrs,
            shared,
            stop,
            tasks,
        })
    }

    /// `http://127.0.0.1:PORT/path`. A leading `/` on `path` is optional.
    pub fn url(&self, path: &str) -> String {
        format!(
            "http://127.0.0.1:{}/{}",
            self.port,
            path.trim_start_matches('/')
        )
    }

    /// `http://localhost:PORT/path`: the same server under another origin,
    /// for cross-origin pages, frames and cookies. A leading `/` on `path` is
    /// optional.
    ///
    /// The server listens on `[::1]` too when the machine has IPv6 loopback,
    /// so a browser that tries `::1` first for `localhost` gets an answer
    /// instead of a refused connection and a retry.
    pub fn cross_origin_url(&self, path: &str) -> String {
        format!(
            "http://localhost:{}/{}",
            self.port,
            path.trim_start_matches('/')
        )
    }

    /// The port, the same on every address in [`addrs`](Self::addrs).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The addresses the server listens on: `127.0.0.1:PORT` first, then
    /// `[::1]:PORT` if it could be bound.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The folder being served, canonicalized.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Delays every response whose path starts with `path_prefix` (such as
    /// `/slow/`; the leading `/` is optional) by `delay`. Replaces an earlier
    /// delay for the same prefix; `Duration::ZERO` turns it off.
    pub fn set_delay(&self, path_prefix: &str, delay: Duration) {
        let prefix = normalize_prefix(path_prefix);
        let mut faults = lock(&self.shared.faults);
        faults.delays.retain(|(existing, _)| *existing != prefix);
        faults.delays.push((prefix, delay));
    }

    /// Answers every request whose path starts with `path_prefix` (the
    /// leading `/` is optional) with `status` and a short text body instead
    /// of the file. Replaces an earlier status for the same prefix.
    pub fn fail(&self, path_prefix: &str, status: StatusCode) {
        let prefix = normalize_prefix(path_prefix);
        let mut faults = lock(&self.shared.faults);
        faults.failures.retain(|(existing, _)| *existing != prefix);
        faults.failures.push((prefix, status));
    }

    /// Answers every request whose path starts with `path_prefix` with
    /// `302 Found` to `location` (any URL, another host included), after
    /// any delay. Replaces an earlier redirect for the same prefix.
    pub fn redirect(&self, path_prefix: &str, location: &str) {
        let prefix = normalize_prefix(path_prefix);
        let mut faults = lock(&self.shared.faults);
        faults.redirects.retain(|(existing, _)| *existing != prefix);
        faults.redirects.push((prefix, location.to_owned()));
    }

    /// Removes every delay, failure and redirect set with
    /// [`set_delay`](Self::set_delay), [`fail`](Self::fail) and
    /// [`redirect`](Self::redirect).
    pub fn clear_faults(&self) {
        *lock(&self.shared.faults) = Faults::default();
    }

    /// Every request received so far, oldest first, including ones that were
    /// answered with an error.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared.requests).clone()
    }

    /// Forgets the requests received so far.
    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// Stops the server and waits until it no longer listens.
    ///
    /// Dropping the server stops it too, but in the background: a
    /// connection attempted right after the drop may still be accepted
    /// until the server's tasks next run.
    pub async fn shutdown(mut self) {
        let tasks = std::mem::take(&mut self.tasks);
        drop(self);
        for task in tasks {
            if let Err(error) = task.await {
                tracing::warn!(%error, "fixture server task failed");
            }
        }
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        // Receivers see the change even if none is waiting yet; the listeners
        // close once their tasks observe it.
        self.stop.send_replace(true);
    }
}

/// Binds `127.0.0.1:0` and then `[::1]` on the same port.
///
/// If another process already holds that port on `::1`, we start over on a
/// new port rather than serve `localhost` on IPv4 only. If the machine has no
/// IPv6 loopback, IPv4 alone is fine: browsers fall back to `127.0.0.1`.
async fn bind_loopback() -> io::Result<Vec<TcpListener>> {
    for _ in 0..BIND_ATTEMPTS {
        let v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = v4.local_addr()?.port();
        match TcpListener::bind((Ipv6Addr::LOCALHOST, port)).await {
            Ok(v6) => return Ok(vec![v4, v6]),
            Err(error) if error.kind() == io::ErrorKind::AddrInUse => continue,
            Err(error) => {
                tracing::debug!(%error, "no IPv6 loopback; serving on 127.0.0.1 only");
                return Ok(vec![v4]);
            }
        }
    }
    tracing::debug!("[::1] kept colliding; serving on 127.0.0.1 only");
    Ok(vec![TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?])
}

/// Resolves once the server is told to stop or its handle is gone.
async fn stopped(mut stop: watch::Receiver<bool>) {
    // An error means the sender was dropped, which also means stop.
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Locks `mutex`, carrying on after a panic elsewhere: the data are plain
/// lists that a panicking test cannot leave half-updated in a harmful way.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn normalize_prefix(prefix: &str) -> String {
    if prefix.starts_with('/') {
        prefix.to_owned()
    } else {
        format!("/{prefix}")
    }
}

/// The value for the longest prefix of `path` in `entries`.
fn longest_match<T: Copy>(entries: &[(String, T)], path: &str) -> Option<T> {
    entries
        .iter()
        .filter(|(prefix, _)| path.starts_with(prefix.as_str()))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, value)| *value)
}

/// The one handler: every method and path ends up here.
async fn handle(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let path = uri.path();
    let query = uri.query();
    lock(&shared.requests).push(RequestRecord {
        method: method.to_string(),
        path: path.to_owned(),
        query: query.map(str::to_owned),
    });

    let response = respond(&shared, path, query).await;
    tracing::debug!(%method, path, status = %response.status(), "fixture request");
    response
}

async fn respond(shared: &Shared, path: &str, query: Option<&str>) -> Response {
    let injected = match injected_faults(query) {
        Ok(injected) => injected,
        Err(message) => return text(StatusCode::BAD_REQUEST, message),
    };
    let (delay, failure, redirect) = {
        let faults = lock(&shared.faults);
        let redirect = faults
            .redirects
            .iter()
            .filter(|(prefix, _)| path.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, location)| location.clone());
        (
            injected
                .delay
                .or_else(|| longest_match(&faults.delays, path)),
            injected
                .status
                .or_else(|| longest_match(&faults.failures, path)),
            redirect,
        )
    };

    if let Some(delay) = delay.filter(|delay| !delay.is_zero()) {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stopped(shared.stop.clone()) => {
                return text(StatusCode::SERVICE_UNAVAILABLE, "fixture server is shutting down".to_owned());
            }
        }
    }
    if let Some(status) = failure {
        return text(status, format!("injected status {status}"));
    }
    if let Some(location) = redirect
        && let Ok(value) = HeaderValue::from_str(&location)
    {
        let mut response = text(StatusCode::FOUND, format!("redirected to {location}"));
        response.headers_mut().insert(LOCATION, value);
        return response;
    }
    let response = serve_file(&shared.root, path, query).await;
    match injected.abort_after {
        Some(keep) if response.status() == StatusCode::OK => cut_short(response, keep).await,
        _ => response,
    }
}

/// `response` with only its first `keep` bytes sent before the connection
/// is aborted (its `Content-Length` still announces them all).
async fn cut_short(response: Response, keep: usize) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "unreadable body".to_owned(),
        );
    };
    let total = bytes.len();
    let head = bytes.slice(..keep.min(total));
    let stream = futures::stream::iter([Ok::<_, io::Error>(head)]).chain(futures::stream::once(
        async move {
            tokio::time::sleep(ABORT_PAUSE).await;
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "lumen_abort_after: the body was cut on purpose",
            ))
        },
    ));
    let mut response = Response::from_parts(parts, Body::from_stream(stream));
    response
        .headers_mut()
        .insert(axum::http::header::CONTENT_LENGTH, HeaderValue::from(total));
    response
}

/// Faults asked for by the request's own query string.
#[derive(Debug, Default, PartialEq, Eq)]
struct InjectedFaults {
    delay: Option<Duration>,
    status: Option<StatusCode>,
    abort_after: Option<usize>,
}

/// Reads `lumen_delay_ms` and `lumen_status` from a raw query string. A
/// malformed value is an error rather than ignored, so a typo in a test
/// shows up as a 400 instead of a fault that silently never happens.
fn injected_faults(query: Option<&str>) -> Result<InjectedFaults, String> {
    let mut injected = InjectedFaults::default();
    for pair in query.unwrap_or_default().split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            DELAY_PARAM => {
                let millis: u64 = value
                    .parse()
                    .map_err(|_| format!("{DELAY_PARAM} must be a whole number, got {value:?}"))?;
                injected.delay = Some(Duration::from_millis(millis).min(MAX_QUERY_DELAY));
            }
            STATUS_PARAM => {
                let status = value
                    .parse::<u16>()
                    .ok()
                    .and_then(|code| StatusCode::from_u16(code).ok())
                    .ok_or_else(|| {
                        format!("{STATUS_PARAM} must be a status from 100 to 999, got {value:?}")
                    })?;
                injected.status = Some(status);
            }
            ABORT_PARAM => {
                let bytes: usize = value
                    .parse()
                    .map_err(|_| format!("{ABORT_PARAM} must be a whole number, got {value:?}"))?;
                injected.abort_after = Some(bytes);
            }
            _ => {}
        }
    }
    Ok(injected)
}

async fn serve_file(root: &Path, raw_path: &str, query: Option<&str>) -> Response {
    let Some(relative) = files::relative_path(raw_path) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("path {raw_path} is not allowed"),
        );
    };
    let mut file_path = root.join(&relative.path);
    let mut served_relative = relative.path;
    let Ok(metadata) = tokio::fs::metadata(&file_path).await else {
        return not_found(raw_path);
    };
    if metadata.is_dir() {
        if !relative.trailing_slash {
            // Relative links in the folder's index.html resolve against the
            // folder only when the URL ends in `/`, as with any web server.
            return redirect_to_folder(raw_path, query);
        }
        file_path.push("index.html");
        served_relative.push("index.html");
    }

    // A symlink inside the root could still point outside it.
    match tokio::fs::canonicalize(&file_path).await {
        Ok(canonical) if canonical.starts_with(root) => {}
        Ok(_) => {
            return text(
                StatusCode::FORBIDDEN,
                format!("path {raw_path} leads outside the fixture root"),
            );
        }
        Err(_) => return not_found(raw_path),
    }
    let bytes = match tokio::fs::read(&file_path).await {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return not_found(raw_path),
        // Reading a folder named `x.html/index.html` and the like.
        Err(error) if error.kind() == io::ErrorKind::IsADirectory => {
            return not_found(raw_path);
        }
        Err(error) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading {raw_path} failed: {error}"),
            );
        }
    };

    let mut response = with_body(StatusCode::OK, bytes);
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(files::content_type(&file_path)),
    );
    if let Some(disposition) = files::download_disposition(&served_relative)
        .and_then(|value| HeaderValue::from_str(&value).ok())
    {
        headers.insert(CONTENT_DISPOSITION, disposition);
    }
    response
}

fn redirect_to_folder(raw_path: &str, query: Option<&str>) -> Response {
    let location = match query {
        Some(query) => format!("{raw_path}/?{query}"),
        None => format!("{raw_path}/"),
    };
    let Ok(location) = HeaderValue::from_str(&location) else {
        return not_found(raw_path);
    };
    let mut response = text(
        StatusCode::MOVED_PERMANENTLY,
        "this is a folder; see Location".to_owned(),
    );
    response.headers_mut().insert(LOCATION, location);
    response
}

fn not_found(raw_path: &str) -> Response {
    text(StatusCode::NOT_FOUND, format!("no fixture at {raw_path}"))
}

fn text(status: StatusCode, message: String) -> Response {
    let mut response = with_body(status, format!("{message}\n").into_bytes());
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn with_body(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_root_is_the_workspace_folder() {
        let root = fixtures_root();
        assert!(root.ends_with("fixtures/sites"), "{}", root.display());
        assert!(
            root.join("../../Cargo.toml").is_file(),
            "{}",
            root.display()
        );
    }

    #[test]
    fn query_faults_are_parsed() {
        assert_eq!(injected_faults(None), Ok(InjectedFaults::default()));
        assert_eq!(
            injected_faults(Some(
                "a=1&lumen_delay_ms=250&lumen_status=503&lumen_abort_after=9"
            )),
            Ok(InjectedFaults {
                delay: Some(Duration::from_millis(250)),
                status: Some(StatusCode::SERVICE_UNAVAILABLE),
                abort_after: Some(9),
            })
        );
    }

    #[test]
    fn query_delay_is_capped() {
        let injected = injected_faults(Some("lumen_delay_ms=99999999")).unwrap();
        assert_eq!(injected.delay, Some(MAX_QUERY_DELAY));
    }

    #[test]
    fn malformed_query_faults_are_errors() {
        for query in [
            "lumen_delay_ms=soon",
            "lumen_delay_ms=-1",
            "lumen_delay_ms",
            "lumen_status=abc",
            "lumen_status=42",
            "lumen_status=1000",
        ] {
            let error = injected_faults(Some(query)).unwrap_err();
            let key = query.split('=').next().unwrap();
            assert!(error.starts_with(key), "{query}: {error}");
        }
    }

    #[test]
    fn longest_prefix_wins() {
        let entries = vec![
            ("/".to_owned(), 1),
            ("/api/".to_owned(), 2),
            ("/api/slow".to_owned(), 3),
        ];
        assert_eq!(longest_match(&entries, "/index.html"), Some(1));
        assert_eq!(longest_match(&entries, "/api/x"), Some(2));
        assert_eq!(longest_match(&entries, "/api/slow/x"), Some(3));
        assert_eq!(longest_match(&entries[1..], "/index.html"), None);
    }

    #[test]
    fn prefixes_gain_a_leading_slash() {
        assert_eq!(normalize_prefix("api/"), "/api/");
        assert_eq!(normalize_prefix("/api/"), "/api/");
    }
}

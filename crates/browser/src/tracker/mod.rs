//! Event tracking per page and per browser: in-flight requests, navigation
//! state, dialogs, file choosers, downloads and new targets, in a log that
//! actions read back by sequence number to build their receipts.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::log::EventEntryAdded;
use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent, EventResponseReceived,
    ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    EventDomContentEventFired, EventFileChooserOpened, EventFrameAttached, EventFrameNavigated,
    EventFrameStartedLoading, EventFrameStoppedLoading, EventJavascriptDialogOpening,
    EventLoadEventFired, EventNavigatedWithinDocument, EventWindowOpen,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    EventConsoleApiCalled, EventExceptionThrown, RemoteObject,
};
use futures::FutureExt as _;
use futures::stream::{BoxStream, StreamExt as _};
use lumen_core::DialogInfo;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::cdp::{CallError, Conn};
use crate::options::DialogPolicy;
use crate::pagelog::{self, PageBuffers};
use crate::protocol::dialogs;

/// Asks a tracker task to process every event already delivered to it and
/// answer; used as a barrier after an action's last CDP round trip (events
/// are queued in wire order before that reply resolves).
#[derive(Debug, Clone)]
pub(crate) struct Flusher(mpsc::UnboundedSender<oneshot::Sender<()>>);

impl Flusher {
    pub(crate) async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.0.send(tx).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(1), rx).await;
        }
    }
}

/// Shows each of chromiumoxide's events on the CDP log surface
/// ([`crate::wirelog`]) as it passes: the events the trackers subscribe to
/// never cross our own wire.
fn wire_logged<T, S>(events: S) -> impl futures::Stream<Item = Arc<T>>
where
    T: serde::Serialize + chromiumoxide::types::Method,
    S: futures::Stream<Item = Arc<T>>,
{
    events.inspect(|e| {
        if crate::wirelog::on() {
            let params = serde_json::to_value(&**e).unwrap_or_default();
            crate::wirelog::event(&e.identifier(), &params);
        }
    })
}

/// Runs a tracker loop: events first; a flush request is answered only once
/// every stream is momentarily empty.
async fn run_tracker<T>(
    mut merged: futures::stream::SelectAll<BoxStream<'static, T>>,
    mut flushes: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    mut handle: impl FnMut(T),
) {
    loop {
        tokio::select! {
            biased;
            ev = merged.next() => match ev {
                Some(ev) => handle(ev),
                None => return,
            },
            req = flushes.recv() => match req {
                Some(ack) => {
                    while let Some(Some(ev)) = merged.next().now_or_never() {
                        handle(ev);
                    }
                    let _ = ack.send(());
                }
                None => return,
            },
        }
    }
}

/// Requests in flight longer than this (long polls, streaming) no longer
/// keep the network "busy".
const STALE_REQUEST: Duration = Duration::from_secs(10);
/// Entries kept in a log.
const LOG_CAPACITY: usize = 512;

/// Something the tracker saw.
#[derive(Debug, Clone)]
pub(crate) enum Ev {
    /// The main frame started loading a new document.
    NavStarted,
    /// The main frame committed a navigation.
    NavCommitted,
    /// A same-document navigation (hash, history API).
    NavWithinDocument,
    /// DOMContentLoaded in the main frame.
    DomReady,
    /// The load event in the main frame.
    Load,
    /// A dialog that was answered.
    Dialog(DialogInfo),
    /// A file chooser opened; what was done about it.
    FileChooser(String),
    /// The page asked for a new window.
    WindowOpen,
    /// A download began.
    DownloadBegan {
        guid: String,
        url: String,
        suggested_filename: String,
    },
    /// A download finished (`completed` false when cancelled or failed,
    /// `error` saying why when known).
    DownloadDone {
        guid: String,
        completed: bool,
        path: Option<String>,
        error: Option<String>,
    },
    /// A page target appeared.
    TargetCreated { id: String, url: String },
    /// A page target appeared past [`MAX_OPEN_TABS`](crate::limits::MAX_OPEN_TABS)
    /// and was closed at once.
    TabRefused { url: String },
}

#[derive(Debug)]
pub(crate) struct LogState {
    next_seq: u64,
    events: VecDeque<(u64, Ev)>,
    /// Requests in flight: when each started, and whether its answer can
    /// set off more work ([`starts_work`]).
    inflight: HashMap<String, (Instant, bool)>,
    /// The last start or end of a request that can set off more work.
    last_network: Instant,
    /// A main-frame navigation started and has neither committed nor stopped.
    pub(crate) nav_pending: bool,
    /// Committed but DOMContentLoaded not yet seen.
    pub(crate) awaiting_dom: bool,
    pub(crate) url: String,
    /// Targets that were destroyed (closed tabs).
    pub(crate) destroyed: HashSet<String>,
}

impl LogState {
    /// Requests that keep the network busy.
    pub(crate) fn busy_requests(&self, now: Instant) -> usize {
        self.inflight
            .values()
            .filter(|(t, _)| now.duration_since(*t) < STALE_REQUEST)
            .count()
    }

    /// How long the network has been quiet (zero while busy): since the last
    /// start or end of a request whose answer a script may act on. A
    /// document, stylesheet, image or font that finished loading sets off
    /// nothing by itself, so it keeps the network busy only while it loads:
    /// settling after a navigation does not wait out the quiet window
    /// behind the page's own resources.
    pub(crate) fn quiet_for(&self, now: Instant) -> Duration {
        if self.busy_requests(now) > 0 {
            Duration::ZERO
        } else {
            now.duration_since(self.last_network)
        }
    }

    /// Events after `seq`.
    pub(crate) fn since(&self, seq: u64) -> impl Iterator<Item = &Ev> {
        self.events
            .iter()
            .filter(move |(s, _)| *s > seq)
            .map(|(_, e)| e)
    }

    /// The sequence number of the latest event.
    pub(crate) fn seq(&self) -> u64 {
        self.next_seq
    }

    fn push(&mut self, ev: Ev) {
        self.next_seq += 1;
        self.events.push_back((self.next_seq, ev));
        while self.events.len() > LOG_CAPACITY {
            self.events.pop_front();
        }
    }
}

/// A log of events with a notifier for waiters.
#[derive(Debug)]
pub(crate) struct EventLog {
    state: Mutex<LogState>,
    pub(crate) changed: Notify,
}

impl EventLog {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(LogState {
                next_seq: 0,
                events: VecDeque::new(),
                inflight: HashMap::new(),
                last_network: Instant::now(),
                nav_pending: false,
                awaiting_dom: false,
                url: String::new(),
                destroyed: HashSet::new(),
            }),
            changed: Notify::new(),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, LogState> {
        // A poisoned lock only means a panic elsewhere; the data is plain.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn record(&self, ev: Ev) {
        self.lock().push(ev);
        self.changed.notify_waiters();
    }

    /// Records target `id` as closed before its event arrives (the
    /// browser already no longer lists it).
    pub(crate) fn mark_destroyed(&self, id: &str) {
        self.update(|s| {
            s.destroyed.insert(id.to_owned());
        });
    }

    fn update(&self, f: impl FnOnce(&mut LogState)) {
        f(&mut self.lock());
        self.changed.notify_waiters();
    }

    /// Waits until the log changes or `max` passes.
    pub(crate) async fn wait_change(&self, max: Duration) {
        let _ = tokio::time::timeout(max, self.changed.notified()).await;
    }
}

enum PageEv {
    Request(Arc<EventRequestWillBeSent>),
    Response(Arc<EventResponseReceived>),
    Finished(String, f64),
    Failed(Arc<EventLoadingFailed>),
    Console(Arc<EventConsoleApiCalled>),
    Exception(Arc<EventExceptionThrown>),
    LogEntry(Arc<EventEntryAdded>),
    StartedLoading(String),
    StoppedLoading(String),
    Navigated(Arc<EventFrameNavigated>),
    /// A child frame, with its id.
    FrameAttached(String),
    WithinDocument(Arc<EventNavigatedWithinDocument>),
    Dom,
    Load,
    Dialog(Arc<EventJavascriptDialogOpening>),
    FileChooser(Arc<EventFileChooserOpened>),
    WindowOpen,
}

/// What the model armed for the next file chooser and the next dialog of
/// the tab's pages, each used once.
#[derive(Debug, Default)]
pub(crate) struct Armed {
    /// Files for the next file chooser (already checked against the
    /// allowed folder).
    pub(crate) files: Mutex<Vec<String>>,
    /// The answer to the next dialog: accept or dismiss, and the text for
    /// a prompt.
    pub(crate) dialog: Mutex<Option<(bool, Option<String>)>>,
}

/// What page-level handlers need besides the page itself.
#[derive(Debug, Clone)]
pub(crate) struct PageHooks {
    pub(crate) conn: Arc<Conn>,
    pub(crate) dialogs: DialogPolicy,
    /// Files armed for the next file chooser (already checked against the
    /// allowed folder) and the answer armed for the next dialog.
    pub(crate) armed: Arc<Armed>,
    pub(crate) upload_allowed: bool,
    /// The tab's console and network entries.
    pub(crate) buffers: Arc<PageBuffers>,
    /// Our own navigation commands in flight (`PageCtx::leaving`).
    pub(crate) leaving: Arc<std::sync::atomic::AtomicUsize>,
    /// Claims the page's frames for the tab's browser context, so request
    /// guards of other contexts leave their requests alone
    /// (`crate::owners`).
    pub(crate) claims: Option<crate::owners::Claims>,
}

/// Subscribes to a page's events and spawns the task that feeds `log`.
pub(crate) async fn track_page(
    page: Page,
    main_frame: String,
    log: Arc<EventLog>,
    hooks: PageHooks,
) -> Result<(tokio::task::JoinHandle<()>, Flusher), CallError> {
    let t = hooks.conn.call_timeout;
    macro_rules! listen {
        ($ty:ty, $map:expr) => {
            hooks
                .conn
                .guard("event_listener", t, page.event_listener::<$ty>())
                .await
                .map(wire_logged)?
                .map($map)
                .boxed()
        };
    }
    let streams: Vec<BoxStream<'static, PageEv>> = vec![
        listen!(EventRequestWillBeSent, PageEv::Request),
        listen!(EventResponseReceived, PageEv::Response),
        listen!(EventLoadingFinished, |e| PageEv::Finished(
            e.request_id.inner().clone(),
            *e.timestamp.inner()
        )),
        listen!(EventLoadingFailed, PageEv::Failed),
        listen!(EventConsoleApiCalled, PageEv::Console),
        listen!(EventExceptionThrown, PageEv::Exception),
        listen!(EventEntryAdded, PageEv::LogEntry),
        listen!(EventFrameStartedLoading, |e| PageEv::StartedLoading(
            e.frame_id.inner().clone()
        )),
        listen!(EventFrameStoppedLoading, |e| PageEv::StoppedLoading(
            e.frame_id.inner().clone()
        )),
        listen!(EventFrameNavigated, PageEv::Navigated),
        listen!(EventFrameAttached, |e| PageEv::FrameAttached(
            e.frame_id.inner().clone()
        )),
        listen!(EventNavigatedWithinDocument, PageEv::WithinDocument),
        listen!(EventDomContentEventFired, |_| PageEv::Dom),
        listen!(EventLoadEventFired, |_| PageEv::Load),
        listen!(EventJavascriptDialogOpening, PageEv::Dialog),
        listen!(EventFileChooserOpened, PageEv::FileChooser),
        listen!(EventWindowOpen, |_| PageEv::WindowOpen),
    ];
    let merged = futures::stream::select_all(streams);
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(run_tracker(merged, rx, move |ev| {
        handle_page_event(ev, &page, &main_frame, &log, &hooks)
    }));
    Ok((task, Flusher(tx)))
}

fn handle_page_event(ev: PageEv, page: &Page, main_frame: &str, log: &EventLog, hooks: &PageHooks) {
    match ev {
        PageEv::FrameAttached(frame) => {
            if let Some(c) = &hooks.claims {
                c.claim(&frame);
            }
        }
        PageEv::Request(e) => {
            if let (Some(c), Some(frame)) = (&hooks.claims, &e.frame_id) {
                c.claim(frame.inner());
            }
            hooks.buffers.request(
                e.request_id.inner(),
                &e.request.method,
                &e.request.url,
                *e.timestamp.inner(),
                e.redirect_response.as_ref().map(|r| r.status),
            );
            let long_lived = matches!(
                e.r#type,
                Some(ResourceType::EventSource | ResourceType::WebSocket)
            );
            // A child frame's document may load in another process (an
            // out-of-process iframe), whose completion this session never
            // hears about: child documents do not hold the network busy.
            let child_document = matches!(e.r#type, Some(ResourceType::Document))
                && e.frame_id.as_ref().is_some_and(|f| f.inner() != main_frame);
            // A request no document loads (empty `loaderId`) is a worker's
            // script: the worker's own target hears how it ends, this page
            // never does, so it would hold the network busy until settling
            // gave up (5 s on any page that starts a worker).
            let worker_script = e.loader_id.inner().is_empty();
            if !long_lived && !child_document && !worker_script {
                let id = e.request_id.inner().clone();
                let starts_work = starts_work(e.r#type.as_ref());
                log.update(|s| {
                    let now = Instant::now();
                    s.inflight.insert(id, (now, starts_work));
                    if starts_work {
                        s.last_network = now;
                    }
                });
            }
        }
        PageEv::Response(e) => {
            hooks.buffers.response(
                e.request_id.inner(),
                e.response.status,
                &e.response.mime_type,
            );
        }
        PageEv::Finished(id, at) => {
            hooks.buffers.finished(&id, at, None);
            network_done(log, id);
        }
        PageEv::Failed(e) => {
            let why = match e.canceled {
                Some(true) => "cancelled",
                _ => e.error_text.as_str(),
            };
            let id = e.request_id.inner().clone();
            hooks.buffers.finished(&id, *e.timestamp.inner(), Some(why));
            network_done(log, id);
        }
        PageEv::Console(e) => {
            let level = serde_json::to_value(&e.r#type)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "log".into());
            let text: Vec<String> = e.args.iter().map(argument).collect();
            hooks.buffers.console(&level, &text.join(" "));
        }
        PageEv::Exception(e) => {
            let d = &e.exception_details;
            let text = d
                .exception
                .as_ref()
                .and_then(|x| x.description.clone())
                .unwrap_or_else(|| d.text.clone());
            hooks.buffers.console("exception", &text);
        }
        PageEv::LogEntry(e) => {
            let level = serde_json::to_value(&e.entry.level)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "info".into());
            // Verbose entries (violations, interventions) are noise.
            if level != "verbose" {
                let text = match &e.entry.url {
                    Some(url) if !e.entry.text.contains(url.as_str()) => {
                        format!("{} ({url})", e.entry.text)
                    }
                    _ => e.entry.text.clone(),
                };
                hooks.buffers.console(&level, &text);
            }
        }
        PageEv::StartedLoading(frame) if frame == main_frame => log.update(|s| {
            s.nav_pending = true;
            s.push(Ev::NavStarted);
        }),
        PageEv::StoppedLoading(frame) if frame == main_frame => log.update(|s| {
            s.nav_pending = false;
            s.awaiting_dom = false;
        }),
        PageEv::StartedLoading(_) | PageEv::StoppedLoading(_) => {}
        PageEv::Navigated(e) => {
            if let Some(c) = &hooks.claims {
                c.claim(e.frame.id.inner());
            }
            if e.frame.parent_id.is_none() {
                let url = e.frame.url.clone() + e.frame.url_fragment.as_deref().unwrap_or_default();
                log.update(|s| {
                    s.nav_pending = false;
                    s.awaiting_dom = true;
                    s.url = url;
                    // A new document: requests of the old one are gone.
                    s.inflight.clear();
                    s.push(Ev::NavCommitted);
                });
            }
        }
        PageEv::WithinDocument(e) => {
            if e.frame_id.inner() == main_frame {
                let url = e.url.clone();
                log.update(|s| {
                    s.url = url;
                    s.push(Ev::NavWithinDocument);
                });
            }
        }
        PageEv::Dom => log.update(|s| {
            s.awaiting_dom = false;
            s.push(Ev::DomReady);
        }),
        PageEv::Load => log.update(|s| {
            s.awaiting_dom = false;
            s.push(Ev::Load);
        }),
        PageEv::Dialog(e) => {
            let kind = e.r#type.as_ref().to_owned();
            // A page cannot keep the tab when we navigate it ourselves.
            let forced = kind == "beforeunload"
                && hooks.leaving.load(std::sync::atomic::Ordering::SeqCst) > 0;
            // An answer the model armed is used once, for the next dialog
            // (never to keep the tab from our own navigation).
            let armed = match forced {
                true => None,
                false => hooks
                    .armed
                    .dialog
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take(),
            };
            let policy = match (forced, armed) {
                (true, _) => DialogPolicy {
                    beforeunload: crate::options::DialogAction::Accept,
                    ..hooks.dialogs.clone()
                },
                (false, Some((accept, text))) => {
                    let action = match accept {
                        true => crate::options::DialogAction::Accept,
                        false => crate::options::DialogAction::Dismiss,
                    };
                    DialogPolicy {
                        alert: action,
                        confirm: action,
                        prompt: action,
                        beforeunload: action,
                        prompt_text: text.or_else(|| hooks.dialogs.prompt_text.clone()),
                    }
                }
                (false, None) => hooks.dialogs.clone(),
            };
            let (accept, (method, params)) =
                dialogs::answer(&policy, &kind, e.default_prompt.as_deref());
            log.record(Ev::Dialog(DialogInfo {
                kind: kind.clone(),
                message: e.message.clone(),
                accepted: accept,
            }));
            let page = page.clone();
            let conn = hooks.conn.clone();
            tokio::spawn(async move {
                if let Err(err) = conn.page_raw(&page, method, params).await {
                    tracing::debug!("answering a {kind} dialog failed: {err}");
                }
            });
        }
        PageEv::FileChooser(e) => {
            let files: Vec<String> =
                std::mem::take(&mut *hooks.armed.files.lock().unwrap_or_else(|p| p.into_inner()));
            let Some(node) = e.backend_node_id else {
                log.record(Ev::FileChooser(
                    "a file chooser opened without an input element; it was cancelled".into(),
                ));
                return;
            };
            if files.is_empty() {
                let why = if hooks.upload_allowed {
                    "no files were chosen for it (arm them with CdpTab::set_upload_files)"
                } else {
                    "uploads are not enabled (set TabOptions::upload_dir)"
                };
                log.record(Ev::FileChooser(format!(
                    "a file chooser opened and was cancelled: {why}"
                )));
                return;
            }
            let names: Vec<String> = files
                .iter()
                .map(|f| {
                    std::path::Path::new(f)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| f.clone())
                })
                .collect();
            log.record(Ev::FileChooser(format!(
                "a file chooser opened and was answered with {}",
                names.join(", ")
            )));
            let page = page.clone();
            let conn = hooks.conn.clone();
            let node = *node.inner();
            tokio::spawn(async move {
                let params = serde_json::json!({ "files": files, "backendNodeId": node });
                if let Err(err) = conn.page_raw(&page, "DOM.setFileInputFiles", params).await {
                    tracing::debug!("answering a file chooser failed: {err}");
                }
            });
        }
        PageEv::WindowOpen => log.record(Ev::WindowOpen),
    }
}

/// Whether the answer to a request of this type can set off more work:
/// scripts act on fetches and XHRs, a loaded script runs, and a type we do
/// not know is taken to. Documents, stylesheets, images, media, fonts and
/// the like are rendered, not acted on.
fn starts_work(kind: Option<&ResourceType>) -> bool {
    !matches!(
        kind,
        Some(
            ResourceType::Document
                | ResourceType::Stylesheet
                | ResourceType::Image
                | ResourceType::Media
                | ResourceType::Font
                | ResourceType::TextTrack
                | ResourceType::Manifest
                | ResourceType::Ping
                | ResourceType::CspViolationReport
                | ResourceType::Prefetch
        )
    )
}

/// A request ended: it no longer keeps the network busy, and the quiet
/// window restarts when a script may act on its answer. (A request of a
/// document that was replaced is no longer tracked: its end restarts
/// nothing.)
fn network_done(log: &EventLog, id: String) {
    log.update(|s| {
        if let Some((_, true)) = s.inflight.remove(&id) {
            s.last_network = Instant::now();
        }
    });
}

/// A console argument as text.
fn argument(o: &RemoteObject) -> String {
    let kind = serde_json::to_value(&o.r#type)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    // An object is shown by its preview, as DevTools shows it.
    if let Some(p) = &o.preview
        && o.value.is_none()
    {
        let array = serde_json::to_value(&p.subtype).ok() == Some(serde_json::json!("array"));
        let mut parts: Vec<String> = p
            .properties
            .iter()
            .map(|prop| {
                let mut v = prop.value.clone().unwrap_or_default();
                if serde_json::to_value(&prop.r#type).ok() == Some(serde_json::json!("string")) {
                    v = format!("{v:?}");
                }
                if array {
                    v
                } else {
                    format!("{}: {v}", prop.name)
                }
            })
            .collect();
        if p.overflow {
            parts.push("…".into());
        }
        let (open, close) = if array { ("[", "]") } else { ("{", "}") };
        return format!("{open}{}{close}", parts.join(", "));
    }
    pagelog::describe(
        o.value.as_ref(),
        o.unserializable_value.as_ref().map(|u| u.inner().as_str()),
        o.description.as_deref(),
        &kind,
    )
}

mod browser;
pub(crate) use browser::track_browser;

//! Where runs get their browsers.
//!
//! - **Local** (the default): Chromium launched here, at most
//!   `browser_processes` of them (one by default), each serving any number
//!   of runs at once, each run in a browser context of its own. A run goes
//!   to an idle browser, or to a new one while there are fewer than
//!   `browser_processes`, else to the least busy. A browser that dies is
//!   forgotten; the runs it carried fail over like a remote endpoint's.
//! - **Remote endpoints** ([`BrowserEndpoint`]): running browsers reached
//!   over CDP (a browserless or Selenium Grid pool, Chromium started with
//!   `--remote-debugging-port`), or a Browserbase project (a session per
//!   run). Each takes at most its `max_sessions` runs
//!   at once; a run goes to the least busy endpoint that is not cooling
//!   down. An endpoint that refuses a connection (down, or a pool's 429
//!   when it is full) or loses a run's browser cools down, longer after
//!   each failure in a row, and the next endpoint is tried. A run that
//!   finds none within [`TAKE_DEADLINE`] (while some are failing; waiting
//!   for a busy one does not count) fails with the last refusal.
//!
//! Either way each run drives a browser context of its own
//! ([`CdpTab::open_isolated`]), disposed when its execution ends: runs
//! share the browser process and nothing else (no cookies, storage, cache,
//! service workers or tabs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use lumen::browser::{CdpTab, LaunchOptions, TabOptions};
use lumen::{BrowserTab as _, LumenError};

use super::lock;
use crate::options::{BrowserEndpoint, EndpointSource};

/// How long a run keeps trying endpoints that fail before it gives up.
pub(crate) const TAKE_DEADLINE: Duration = Duration::from_secs(60);
/// The longest an endpoint cools down after failures in a row.
const MAX_COOLDOWN: Duration = Duration::from_secs(30);
/// How often a run waiting for an endpoint looks again (at most).
const MAX_WAIT: Duration = Duration::from_secs(2);

/// The browsers runs are served from.
#[derive(Debug)]
pub(super) struct BrowserPool {
    source: Source,
}

#[derive(Debug)]
enum Source {
    Local {
        launch: Box<LaunchOptions>,
        /// The most Chromium processes launched at once (at least 1).
        processes: usize,
        /// Held across a launch, so runs arriving together share it.
        browsers: tokio::sync::Mutex<Vec<Local>>,
    },
    Remote {
        endpoints: Vec<BrowserEndpoint>,
        state: Shared,
    },
}

/// A local Chromium and the runs it serves.
#[derive(Debug)]
struct Local {
    browser: Arc<CdpTab>,
    /// Cloned into each run's [`Lent`]: the runs on it are the clones.
    runs: Arc<()>,
}

impl Local {
    fn runs(&self) -> usize {
        Arc::strong_count(&self.runs) - 1
    }
}

/// The endpoints' health, shared with the sessions lent from them.
type Shared = Arc<std::sync::Mutex<Vec<Health>>>;

/// One session counted against an endpoint's cap until dropped, however
/// the run holding it ends (given back, cancelled mid-connect, panicked).
#[derive(Debug)]
struct Session {
    state: Shared,
    endpoint: usize,
}

impl Drop for Session {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        let h = &mut state[self.endpoint];
        h.in_use = h.in_use.saturating_sub(1);
    }
}

/// What the pool knows of one remote endpoint.
#[derive(Debug, Clone, Default)]
struct Health {
    in_use: usize,
    /// Failures in a row (a connection that works resets it).
    failures: u32,
    cooling_until: Option<Instant>,
}

/// A browser lent to one execution; give it back with [`BrowserPool::give`].
#[derive(Debug)]
pub(super) struct Lent {
    pub(super) browser: Arc<CdpTab>,
    /// What counts the run against its browser or endpoint until dropped.
    hold: Hold,
}

#[derive(Debug)]
enum Hold {
    /// One of the local browser's runs.
    Local { _run: Arc<()> },
    /// The remote endpoint's session.
    Remote(Session),
}

impl Lent {
    /// The endpoint's name, for logs (`None` for a local browser).
    pub(super) fn endpoint(&self, pool: &BrowserPool) -> Option<String> {
        match (&pool.source, &self.hold) {
            (Source::Remote { endpoints, .. }, Hold::Remote(s)) => {
                Some(endpoints[s.endpoint].name())
            }
            _ => None,
        }
    }
}

impl BrowserPool {
    /// At most `processes` local browsers launched with `launch`, or the
    /// remote `endpoints` when there are any.
    pub(super) fn new(
        launch: LaunchOptions,
        processes: usize,
        endpoints: Vec<BrowserEndpoint>,
    ) -> Self {
        let source = match endpoints.is_empty() {
            true => Source::Local {
                launch: Box::new(launch),
                processes: processes.max(1),
                browsers: tokio::sync::Mutex::new(Vec::new()),
            },
            false => Source::Remote {
                state: Arc::new(std::sync::Mutex::new(vec![
                    Health::default();
                    endpoints.len()
                ])),
                endpoints,
            },
        };
        Self { source }
    }

    /// A browser for one execution (cancel it by dropping the future).
    pub(super) async fn take(&self) -> lumen::Result<Lent> {
        match &self.source {
            Source::Local {
                launch,
                processes,
                browsers,
            } => {
                let mut browsers = browsers.lock().await;
                browsers.retain(|b| !b.browser.is_disconnected());
                let least = (0..browsers.len()).min_by_key(|&i| browsers[i].runs());
                let i = match least {
                    Some(i) if browsers[i].runs() == 0 || browsers.len() >= *processes => i,
                    _ => launch_into(&mut browsers, launch).await?,
                };
                Ok(Lent {
                    browser: browsers[i].browser.clone(),
                    hold: Hold::Local {
                        _run: browsers[i].runs.clone(),
                    },
                })
            }
            Source::Remote { endpoints, state } => take_remote(endpoints, state).await,
        }
    }

    /// Launches the first local browser now, unless one runs, so that the
    /// first run does not wait for it (remote endpoints: nothing to do).
    /// Holds the pool's lock meanwhile: a run that arrives during the
    /// launch waits for this browser instead of launching another.
    pub(super) async fn prelaunch(&self) -> lumen::Result<()> {
        if let Source::Local {
            launch, browsers, ..
        } = &self.source
        {
            let mut browsers = browsers.lock().await;
            browsers.retain(|b| !b.browser.is_disconnected());
            if browsers.is_empty() {
                launch_into(&mut browsers, launch).await?;
            }
        }
        Ok(())
    }

    /// Takes a browser back after an execution. A local one that is gone,
    /// or no longer answers after a run `lost` it, is forgotten (closed
    /// once its last run lets go); a remote one's connection is closed, and
    /// its endpoint cools down when the browser was `lost`.
    pub(super) async fn give(&self, lent: Lent, lost: bool) {
        match &self.source {
            Source::Local { browsers, .. } => {
                // A run that lost only its own page (a hung renderer) leaves
                // the browser to the others; a wedged browser goes.
                if lent.browser.is_disconnected() || (lost && !lent.browser.browser_answers().await)
                {
                    browsers
                        .lock()
                        .await
                        .retain(|b| !Arc::ptr_eq(&b.browser, &lent.browser));
                }
            }
            Source::Remote { endpoints, state } => {
                // Someone else's browser: only our tab and connection go (a
                // Browserbase session is released, even when lost).
                let _ = lent.browser.close().await;
                if lost && let Hold::Remote(s) = &lent.hold {
                    cool_down(&mut lock(state)[s.endpoint]);
                    tracing::warn!(endpoint = %endpoints[s.endpoint].name(), "a run lost its remote browser; the endpoint cools down");
                }
                // Dropping the lent session frees its place.
            }
        }
    }

    /// Closes the local browsers no run holds any more.
    pub(super) async fn close_all(&self) {
        if let Source::Local { browsers, .. } = &self.source {
            let browsers = std::mem::take(&mut *browsers.lock().await);
            for b in browsers {
                if let Ok(tab) = Arc::try_unwrap(b.browser) {
                    let _ = tab.close().await;
                }
            }
        }
    }
}

/// Launches a local browser into `browsers`; returns its index.
async fn launch_into(browsers: &mut Vec<Local>, launch: &LaunchOptions) -> lumen::Result<usize> {
    let browser = Arc::new(CdpTab::launch(launch.clone()).await?);
    browsers.push(Local {
        browser,
        runs: Arc::new(()),
    });
    Ok(browsers.len() - 1)
}

/// Marks a failure: the endpoint rests for 0.5 s, doubling with each
/// failure in a row, at most [`MAX_COOLDOWN`].
fn cool_down(h: &mut Health) {
    h.failures = h.failures.saturating_add(1);
    let rest = Duration::from_millis(500)
        .saturating_mul(1 << h.failures.min(10).saturating_sub(1))
        .min(MAX_COOLDOWN);
    h.cooling_until = Some(Instant::now() + rest);
}

/// What picking an endpoint found.
enum Pick {
    /// This one, now counted as in use.
    Take(usize),
    /// Every endpoint is busy, none failing: wait for a run to end.
    Busy,
    /// Some endpoints cool down after failures.
    Cooling,
}

fn pick(endpoints: &[BrowserEndpoint], state: &Shared) -> Pick {
    let now = Instant::now();
    let mut state = lock(state);
    let free = state
        .iter()
        .enumerate()
        .filter(|(i, h)| {
            h.in_use < endpoints[*i].max_sessions && h.cooling_until.is_none_or(|t| t <= now)
        })
        .min_by_key(|(i, h)| (h.in_use, *i))
        .map(|(i, _)| i);
    match free {
        Some(i) => {
            state[i].in_use += 1;
            Pick::Take(i)
        }
        None if state
            .iter()
            .any(|h| h.cooling_until.is_some_and(|t| t > now)) =>
        {
            Pick::Cooling
        }
        None => Pick::Busy,
    }
}

async fn take_remote(endpoints: &[BrowserEndpoint], state: &Shared) -> lumen::Result<Lent> {
    let mut failing_since: Option<Instant> = None;
    let mut last_error: Option<String> = None;
    let mut wait = Duration::from_millis(100);
    loop {
        match pick(endpoints, state) {
            Pick::Take(i) => {
                // Counted from here: a cancel during the connect frees it.
                let session = Session {
                    state: state.clone(),
                    endpoint: i,
                };
                let name = endpoints[i].name();
                let connected = match &endpoints[i].source {
                    EndpointSource::Cdp(url) => CdpTab::connect(url, TabOptions::default()).await,
                    EndpointSource::Browserbase(o) => CdpTab::browserbase((**o).clone()).await,
                };
                match connected {
                    Ok(tab) => {
                        let mut health = lock(state);
                        health[i].failures = 0;
                        health[i].cooling_until = None;
                        return Ok(Lent {
                            browser: Arc::new(tab),
                            hold: Hold::Remote(session),
                        });
                    }
                    Err(e) => {
                        tracing::warn!(endpoint = %name, "a browser endpoint refused a run: {e}");
                        drop(session);
                        cool_down(&mut lock(state)[i]);
                        last_error = Some(format!("{name}: {e}"));
                        failing_since.get_or_insert_with(Instant::now);
                        // The next endpoint is tried at once.
                        continue;
                    }
                }
            }
            // Waiting for a busy endpoint is a queue, not a failure.
            Pick::Busy => failing_since = None,
            Pick::Cooling => {
                failing_since.get_or_insert_with(Instant::now);
            }
        }
        if failing_since.is_some_and(|t| t.elapsed() >= TAKE_DEADLINE) {
            return Err(LumenError::disconnected(format!(
                "no browser endpoint took the run within {} s; the last refusal: {}",
                TAKE_DEADLINE.as_secs(),
                last_error
                    .as_deref()
                    .unwrap_or("every endpoint was cooling down")
            )));
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_WAIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(caps: &[usize]) -> Vec<BrowserEndpoint> {
        caps.iter()
            .enumerate()
            .map(|(i, &max_sessions)| {
                BrowserEndpoint::new(format!("http://127.0.0.1:{}", 9000 + i), max_sessions)
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn runs_go_to_the_least_busy_endpoint_and_wait_when_all_are_full() {
        let eps = endpoints(&[2, 1]);
        let state: Shared = Arc::new(std::sync::Mutex::new(vec![Health::default(); 2]));
        let taken: Vec<usize> = (0..3)
            .map(|_| match pick(&eps, &state) {
                Pick::Take(i) => i,
                _ => panic!("no endpoint"),
            })
            .collect();
        assert_eq!(taken, [0, 1, 0]);
        assert!(matches!(pick(&eps, &state), Pick::Busy));
    }

    #[test]
    fn a_session_frees_its_place_however_it_ends() {
        let eps = endpoints(&[1]);
        let state: Shared = Arc::new(std::sync::Mutex::new(vec![Health::default(); 1]));
        assert!(matches!(pick(&eps, &state), Pick::Take(0)));
        let session = Session {
            state: state.clone(),
            endpoint: 0,
        };
        assert!(matches!(pick(&eps, &state), Pick::Busy));
        // A run cancelled mid-connect drops its session unused.
        drop(session);
        assert!(matches!(pick(&eps, &state), Pick::Take(0)));
    }

    #[test]
    fn a_failing_endpoint_cools_down_longer_each_time() {
        let eps = endpoints(&[1, 1]);
        let state: Shared = Arc::new(std::sync::Mutex::new(vec![Health::default(); 2]));
        cool_down(&mut lock(&state)[0]);
        let first = lock(&state)[0].cooling_until.unwrap();
        assert!(matches!(pick(&eps, &state), Pick::Take(1)), "the other one");
        assert!(matches!(pick(&eps, &state), Pick::Cooling));
        cool_down(&mut lock(&state)[0]);
        assert!(lock(&state)[0].cooling_until.unwrap() > first);
        let mut h = Health::default();
        for _ in 0..40 {
            cool_down(&mut h);
        }
        let rest = h.cooling_until.unwrap() - Instant::now();
        assert!(rest <= MAX_COOLDOWN, "{rest:?}");
    }
}

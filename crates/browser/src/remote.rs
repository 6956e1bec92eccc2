//! Remote browsers: resolving `http://host:port` to a DevTools WebSocket URL
//! and Browserbase sessions.

use std::time::Duration;

use lumen_core::LumenError;
use serde::Deserialize;

use crate::options::BrowserbaseOptions;

/// A Browserbase session we created (released on close).
#[derive(Clone)]
pub(crate) struct RemoteSession {
    pub(crate) id: String,
    pub(crate) connect_url: String,
    api_base: String,
    api_key: String,
    project_id: String,
}

impl std::fmt::Debug for RemoteSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSession")
            .field("id", &self.id)
            .field("api_base", &self.api_base)
            .finish_non_exhaustive()
    }
}

fn client(timeout: Duration) -> Result<reqwest::Client, LumenError> {
    // Feature unification can build reqwest with `rustls-no-provider` (any
    // binary that also links lumen-models); building a client then needs a
    // process-wide provider. Installing it twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| LumenError::config("http client", e.to_string()))
}

/// `ws://…` and `wss://…` pass through; `http(s)://host:port[/json/version]`
/// is resolved through `/json/version`.
pub(crate) async fn resolve_ws_url(url: &str, timeout: Duration) -> Result<String, LumenError> {
    let url = url.trim();
    if url.starts_with("ws://") || url.starts_with("wss://") {
        return Ok(url.to_owned());
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(LumenError::config(
            "cdp_url",
            format!("{url} is neither a ws:// DevTools URL nor an http://host:port endpoint"),
        ));
    }
    let base = url.trim_end_matches('/');
    let version_url = if base.ends_with("/json/version") {
        base.to_owned()
    } else {
        format!("{base}/json/version")
    };
    #[derive(Deserialize)]
    struct Version {
        #[serde(rename = "webSocketDebuggerUrl")]
        ws: String,
    }
    let resp = client(timeout)?
        .get(&version_url)
        .send()
        .await
        .map_err(|e| LumenError::disconnected(format!("cannot reach {version_url}: {e}")))?;
    if !resp.status().is_success() {
        return Err(LumenError::disconnected(format!(
            "{version_url} answered HTTP {}",
            resp.status()
        )));
    }
    let v: Version = resp
        .json()
        .await
        .map_err(|e| LumenError::invalid_data("/json/version", format!("{version_url}: {e}")))?;
    // Behind a proxy the browser reports its own loopback address; keep the
    // host we were given.
    let host = base
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default();
    Ok(match v.ws.split_once("/devtools/") {
        Some((_, path)) if !host.is_empty() => {
            let scheme = if url.starts_with("https://") {
                "wss"
            } else {
                "ws"
            };
            format!("{scheme}://{host}/devtools/{path}")
        }
        _ => v.ws,
    })
}

/// Creates a session: `POST {api}/v1/sessions` with `X-BB-API-Key` and
/// `{"projectId": …}`; the answer's `connectUrl` is the CDP endpoint.
pub(crate) async fn create_browserbase_session(
    options: &BrowserbaseOptions,
) -> Result<RemoteSession, LumenError> {
    if options.api_key.trim().is_empty() {
        return Err(LumenError::config(
            "BROWSERBASE_API_KEY",
            "the API key is empty",
        ));
    }
    if options.project_id.trim().is_empty() {
        return Err(LumenError::config(
            "BROWSERBASE_PROJECT_ID",
            "the project id is empty",
        ));
    }
    let api_base = options.api_base.trim_end_matches('/').to_owned();
    let url = format!("{api_base}/v1/sessions");
    let resp = client(options.tab.call_timeout)?
        .post(&url)
        .header("X-BB-API-Key", &options.api_key)
        .json(&serde_json::json!({ "projectId": options.project_id }))
        .send()
        .await
        .map_err(|e| LumenError::disconnected(format!("cannot reach Browserbase at {url}: {e}")))?;
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    if status.as_u16() == 401 || status.as_u16() == 403 {
        return Err(LumenError::config(
            "BROWSERBASE_API_KEY",
            format!(
                "Browserbase refused the key (HTTP {status}): {}",
                snippet(&body)
            ),
        ));
    }
    if !status.is_success() {
        return Err(LumenError::config(
            "BROWSERBASE_PROJECT_ID",
            format!(
                "creating a Browserbase session failed (HTTP {status}): {}",
                snippet(&body)
            ),
        ));
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Created {
        id: String,
        connect_url: String,
    }
    let created: Created = serde_json::from_str(&body)
        .map_err(|e| LumenError::invalid_data("Browserbase session", e.to_string()))?;
    Ok(RemoteSession {
        id: created.id,
        connect_url: created.connect_url,
        api_base,
        api_key: options.api_key.clone(),
        project_id: options.project_id.clone(),
    })
}

/// Releases a session: `POST {api}/v1/sessions/{id}` with
/// `{"projectId": …, "status": "REQUEST_RELEASE"}`.
/// A created Browserbase session not yet owned by a tab: released (in
/// the background) when dropped, unless [`disarm`](Self::disarm)ed.
pub(crate) struct Unreleased(Option<RemoteSession>);

impl Unreleased {
    pub(crate) fn new(session: RemoteSession) -> Self {
        Self(Some(session))
    }

    /// The session has an owner that will release it.
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for Unreleased {
    fn drop(&mut self) {
        let Some(session) = self.0.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(id = %session.id, "a Browserbase session could not be released (no runtime)");
            return;
        };
        runtime.spawn(async move {
            if let Err(e) = release_browserbase_session(&session).await {
                tracing::warn!(id = %session.id, "releasing an unused Browserbase session failed: {e}");
            }
        });
    }
}

pub(crate) async fn release_browserbase_session(session: &RemoteSession) -> Result<(), LumenError> {
    let url = format!("{}/v1/sessions/{}", session.api_base, session.id);
    let resp = client(Duration::from_secs(10))?
        .post(&url)
        .header("X-BB-API-Key", &session.api_key)
        .json(&serde_json::json!({
            "projectId": session.project_id,
            "status": "REQUEST_RELEASE",
        }))
        .send()
        .await
        .map_err(|e| LumenError::disconnected(format!("cannot reach {url}: {e}")))?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(LumenError::invalid_data(
            "Browserbase release",
            format!("HTTP {}", resp.status()),
        ))
    }
}

fn snippet(body: &str) -> String {
    body.chars().take(200).collect()
}

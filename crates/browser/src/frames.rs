//! Evaluating JavaScript inside child frames.
//!
//! Same-origin frames are reached from the main frame (`frame.eval`), which
//! runs in the frame's own main world. Out-of-process (cross-origin) frames
//! are separate targets that chromiumoxide attaches but does not expose; we
//! attach a second, non-flattened session to the frame's target and talk
//! to it through `Target.sendMessageToTarget`.
//!
//! Works on one page session ([`PageSession`]), below the tab.

use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::target::EventReceivedMessageFromTarget;
use futures::StreamExt as _;
use lumen_core::{LumenError, Result};

use crate::cdp::PageSession;
use crate::protocol::runtime;

/// Evaluates `expression` in the first child frame of `page` whose URL
/// contains `frame_url`.
pub(crate) async fn evaluate_in_frame(
    page: PageSession<'_>,
    frame_url: &str,
    expression: &str,
) -> Result<serde_json::Value> {
    let want = serde_json::to_string(frame_url)
        .map_err(|e| LumenError::invalid_data("frame url", e.to_string()))?;
    let expr = serde_json::to_string(expression)
        .map_err(|e| LumenError::invalid_data("expression", e.to_string()))?;
    let same_origin = format!(
        r#"(async () => {{
  const find = (win) => {{
    for (let i = 0; i < win.frames.length; i++) {{
      const f = win.frames[i];
      let href = null;
      try {{ href = f.location.href; }} catch (e) {{ continue; }}
      if (href.includes({want})) return f;
      const deeper = find(f);
      if (deeper) return deeper;
    }}
    return null;
  }};
  const f = find(window);
  if (!f) return {{ found: false }};
  return {{ found: true, value: await f.eval({expr}) }};
}})()"#
    );
    let r = page.evaluate(&same_origin).await?;
    if r["found"] == true {
        return Ok(r.get("value").cloned().unwrap_or(serde_json::Value::Null));
    }
    cross_origin(page, frame_url, expression).await
}

async fn cross_origin(
    page: PageSession<'_>,
    frame_url: &str,
    expression: &str,
) -> Result<serde_json::Value> {
    let conn = page.conn;
    // Only frames of the page's own browser context: the browser lists
    // every context's targets, and another context's (another agent's)
    // frame is never ours to run scripts in.
    let context = conn.context_of(page.page.target_id().inner()).await;
    let targets = conn
        .browser_raw("Target.getTargets", serde_json::json!({}))
        .await?;
    let Some(target_id) = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| {
            t["type"] == "iframe"
                && t["browserContextId"].as_str() == context.as_deref()
                && t["url"].as_str().is_some_and(|u| u.contains(frame_url))
        })
        .and_then(|t| t["targetId"].as_str())
        .map(str::to_owned)
    else {
        return Err(LumenError::Script {
            message: format!("no frame whose URL contains {frame_url:?}"),
        });
    };
    let mut events = conn
        .guard(
            "event_listener",
            conn.call_timeout,
            conn.browser
                .event_listener::<EventReceivedMessageFromTarget>(),
        )
        .await?;
    let attached = conn
        .browser_raw(
            "Target.attachToTarget",
            serde_json::json!({ "targetId": target_id, "flatten": false }),
        )
        .await?;
    let session = attached["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut target = FrameTarget {
        page,
        session: &session,
        frame_url,
        events: &mut events,
        next_id: 0,
    };
    let result = async {
        // As `PageSession::evaluate`: guarded, and a script of statements
        // (which does not compile inside the guard) run as it is.
        match runtime::guarded_value(target.send(runtime::evaluate(expression)).await?)? {
            runtime::Guarded::Value(v) => Ok(v),
            runtime::Guarded::NotAnExpression => {
                runtime::plain_value(target.send(runtime::evaluate_plain(expression)).await?)
            }
        }
    }
    .await;
    let _ = conn
        .browser_raw(
            "Target.detachFromTarget",
            serde_json::json!({ "sessionId": session }),
        )
        .await;
    result
}

/// An out-of-process frame attached by a session of the browser
/// connection: commands go in `Target.sendMessageToTarget`, answers come
/// back as events.
struct FrameTarget<'a, E> {
    page: PageSession<'a>,
    session: &'a str,
    frame_url: &'a str,
    events: &'a mut E,
    next_id: u64,
}

impl<E> FrameTarget<'_, E>
where
    E: futures::Stream<Item = std::sync::Arc<EventReceivedMessageFromTarget>> + Unpin,
{
    /// Sends one command to the frame and returns its `result`.
    async fn send(
        &mut self,
        (method, params): crate::protocol::Command,
    ) -> Result<serde_json::Value> {
        let conn = self.page.conn;
        self.next_id += 1;
        let id = self.next_id;
        let message =
            serde_json::json!({ "id": id, "method": method, "params": params }).to_string();
        conn.browser_raw(
            "Target.sendMessageToTarget",
            serde_json::json!({ "message": message, "sessionId": self.session }),
        )
        .await?;
        let deadline = Instant::now() + conn.call_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = tokio::select! {
                reason = conn.died() => return Err(LumenError::disconnected(reason)),
                next = tokio::time::timeout(left.max(Duration::from_millis(1)), self.events.next()) => next,
            };
            match next {
                Ok(Some(ev)) if ev.session_id.inner() == self.session => {
                    let Ok(mut reply) = serde_json::from_str::<serde_json::Value>(&ev.message)
                    else {
                        continue;
                    };
                    if reply["id"] != id {
                        continue;
                    }
                    if let Some(err) = reply.get("error") {
                        return Err(LumenError::Script {
                            message: err["message"]
                                .as_str()
                                .unwrap_or("frame evaluation failed")
                                .to_owned(),
                        });
                    }
                    return Ok(reply["result"].take());
                }
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => {
                    return Err(LumenError::disconnected(format!(
                        "the frame {} did not answer within {:.0}s",
                        self.frame_url,
                        conn.call_timeout.as_secs_f64()
                    )));
                }
            }
        }
    }
}

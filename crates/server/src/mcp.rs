//! `lumen mcp`: an MCP server over stdio (built on `rmcp`), so MCP clients
//! (IDEs, other agents) can hand Lumen whole tasks or drive a browser
//! directly.
//!
//! Tools:
//! - `run_task {instruction, …options}` (all but `handoff`: a blocking tool
//!   call leaves nobody to answer a hand-over): a whole run, with every option of
//!   the server's run body ([`lumen::RunOptions`], the same checks), on
//!   the run manager (persisted like a server run); answers with its status,
//!   result, steps and id when it ends.
//! - `open {url}`, `click {x, y, button?}`, `type {text}`, `press {keys}`,
//!   `scroll {direction, amount?, x?, y?}`: one action each on a browser kept
//!   for the session (launched on first use), executed by the same
//!   `ActionPipeline` as the loop (policy, settling, effect receipts, the
//!   after-effect policy, redaction); the answer is
//!   the action's outcome as JSON. The operator policy
//!   ([`ServeOptions::policy`]) judges each one: `open` on the address its
//!   host resolves to (`open file:///etc/passwd` is refused), any action on
//!   a forbidden page, and where an action led (a forbidden page is left
//!   for about:blank, a forbidden new tab closed).
//! - `screenshot {}`: the page as a JPEG image; `snapshot {}`: the
//!   accessibility tree as text with element refs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use lumen::browser::CdpTab;
use lumen::perception::pipeline::{ActionContext, ActionPipeline};
use lumen::perception::router::ActionRouter;
use lumen::safety::policy::with_default_scheme;
use lumen::safety::{ActionGuard, PolicyDecision, SessionPolicy};
use lumen::{Action, ActionCall, BrowserTab, ScreenshotOptions};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::runs::{Live, RunManager};
use crate::{ServeError, ServeOptions};

/// The MCP tool handler.
#[derive(Debug, Clone)]
struct LumenMcp {
    runs: Arc<RunManager>,
    tab: Arc<tokio::sync::Mutex<Option<Arc<CdpTab>>>>,
    calls: Arc<AtomicU64>,
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

/// The input schema of a direct tool that performs action `tag`: the
/// `fields` it offers, as the action vocabulary
/// ([`lumen::action_schema::CATALOGUE`]) defines them, `required` of them
/// required.
fn action_tool(tag: &str, fields: &[&str], required: &[&str]) -> Arc<Map<String, Value>> {
    let action = lumen::action_schema::ActionSchema::find(tag);
    let properties: Map<String, Value> = fields
        .iter()
        .filter_map(|name| {
            let field = action?.field(name)?;
            Some(((*name).to_owned(), field.json_schema()))
        })
        .collect();
    schema(json!({"type": "object", "required": required, "properties": properties}))
}

/// The run body without `handoff` (see the module docs).
fn run_task_schema() -> Value {
    let mut body = crate::openapi::create_run_schema();
    if let Some(p) = body["properties"].as_object_mut() {
        p.remove("handoff");
    }
    body
}

pub(crate) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "run_task",
            "Run a browser task with the Lumen agent until it ends; returns its status and answer.",
            schema(run_task_schema()),
        ),
        Tool::new(
            "open",
            "Open a URL in the session's browser.",
            schema(
                json!({"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}}),
            ),
        ),
        Tool::new(
            "click",
            "Click at a viewport point (CSS pixels).",
            action_tool("click", &["x", "y", "button"], &["x", "y"]),
        ),
        Tool::new(
            "type",
            "Type text into the focused element.",
            action_tool("type", &["text"], &["text"]),
        ),
        Tool::new(
            "press",
            "Press a key chord, e.g. [\"Enter\"] or [\"ctrl\", \"a\"].",
            action_tool("keyPress", &["keys"], &["keys"]),
        ),
        Tool::new(
            "scroll",
            "Scroll the page (amount in wheel clicks of 100 px; at the viewport centre unless x, y are given).",
            action_tool("scroll", &["direction", "amount", "x", "y"], &["direction"]),
        ),
        Tool::new(
            "screenshot",
            "A JPEG screenshot of the page.",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "snapshot",
            "The page's accessibility tree as text, with element refs.",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

fn failed(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

impl LumenMcp {
    /// The direct tools' browser, launched on first use and again once it
    /// is gone (a crash fails the call that meets it; the next one gets a
    /// fresh browser on `about:blank`).
    async fn tab(&self) -> lumen::Result<Arc<CdpTab>> {
        let mut slot = self.tab.lock().await;
        if let Some(t) = slot.as_ref().filter(|t| !t.is_disconnected()) {
            return Ok(t.clone());
        }
        let tab = Arc::new(CdpTab::launch(self.runs.options().launch.clone()).await?);
        // The operator policy holds on every request of this browser, as
        // in a run's: what a page loads, fetches and redirects to, and
        // where its own script takes it, not only where a tool sends it.
        let policy = SessionPolicy::new(&self.runs.operator_policy())?;
        if let Some(filter) = lumen::safety::request_filter(&policy) {
            tab.install_request_filter(filter).await?;
        }
        *slot = Some(tab.clone());
        Ok(tab)
    }

    async fn run_task(&self, args: Map<String, Value>) -> CallToolResult {
        // A tool call blocks until the run ends: nobody could answer a
        // hand-over from here.
        if args.contains_key("handoff") {
            return failed(
                "`handoff` needs a person with a live view: start the run over the HTTP API \
                 (lumen serve) or with lumen run --handoff",
            );
        }
        let mut live = self.runs.subscribe();
        let info = match self.runs.create(&Value::Object(args)).await {
            Ok(i) => i,
            Err(e) => return failed(e.to_string()),
        };
        loop {
            match live.recv().await {
                Ok(Live::Ended { run }) if *run == *info.id => break,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if !self.runs.entry(&info.id).await.is_ok_and(|e| e.is_active()) {
                        break;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
        let info = match self.runs.entry(&info.id).await {
            Ok(e) => e.info(),
            Err(e) => return failed(e.to_string()),
        };
        let body = json!({
            "id": info.id,
            "status": info.status,
            "result": info.result,
            "steps": info.steps_completed,
            "error": info.error,
        });
        let content = vec![ContentBlock::text(body.to_string())];
        match info.status {
            crate::RunState::Completed => CallToolResult::success(content),
            _ => CallToolResult::error(content),
        }
    }

    async fn act(&self, name: &str, mut args: Map<String, Value>) -> CallToolResult {
        let tab = match self.tab().await {
            Ok(t) => t,
            Err(e) => return failed(format!("the browser could not start: {e}")),
        };
        let viewport = match tab.viewport().await {
            Ok(v) => v,
            Err(e) => return failed(e.to_string()),
        };
        let kind = match name {
            "open" => {
                if let Some(u) = args.remove("url") {
                    args.insert("url".into(), u);
                }
                "goto"
            }
            "press" => "keyPress",
            "scroll" => {
                args.entry("amount").or_insert(json!(3));
                args.entry("unit").or_insert(json!("clicks"));
                args.entry("x").or_insert(json!(viewport.width / 2));
                args.entry("y").or_insert(json!(viewport.height / 2));
                "scroll"
            }
            other => other,
        };
        args.insert("type".into(), json!(kind));
        let action: Action = match serde_json::from_value(Value::Object(args)) {
            Ok(a) => a,
            Err(e) => return failed(format!("invalid arguments for {name}: {e}")),
        };
        // The operator policy judges every direct action as it judges a
        // run's: where a goto leads (on the resolved address), what page
        // the tab is on, and where the action ended up.
        let policy = match SessionPolicy::new(&self.runs.operator_policy()) {
            Ok(p) => p,
            Err(e) => return failed(format!("the operator policy is invalid: {e}")),
        };
        // A goto is judged on the address its host resolves to; the
        // pipeline judges the rest (the page the tab is on, the name).
        if let Action::Goto { url } = &action {
            let verdict = policy.judge_resolved(&with_default_scheme(url)).await;
            if let PolicyDecision::Deny(d) = verdict {
                let current = tab.url().await.unwrap_or_default();
                let body = json!({"ok": false, "error": format!("refused by the operator policy: {}", d.reason), "rule": d.rule, "url": current});
                return CallToolResult::error(vec![ContentBlock::text(body.to_string())]);
            }
        }
        let id = format!("mcp_{}", self.calls.fetch_add(1, Ordering::Relaxed));
        let call = ActionCall::new(id, action);
        let tab_dyn: &dyn BrowserTab = tab.as_ref();
        // The same pipeline as a run: policy, router, the after-effect
        // policy (a forbidden landing undone and checked), redaction.
        let pipeline = ActionPipeline::new(ActionGuard::new(policy), ActionRouter::new());
        let at = ActionContext {
            step: 0,
            instruction: "",
            viewport,
        };
        match pipeline.run(&call, tab_dyn, at).await {
            Ok(handled) => {
                let url = tab.url().await.unwrap_or_default();
                let exec = handled.execution;
                let error = match &handled.blocked {
                    Some(why) => Some(format!("refused by the operator policy: {why}")),
                    None => exec.error.clone(),
                };
                let body = json!({"ok": exec.ok, "error": error, "hints": exec.hints, "effect": exec.effect, "url": url});
                let content = vec![ContentBlock::text(body.to_string())];
                if exec.ok {
                    CallToolResult::success(content)
                } else {
                    CallToolResult::error(content)
                }
            }
            Err(e) => failed(e.to_string()),
        }
    }

    async fn look(&self, name: &str) -> CallToolResult {
        let tab = match self.tab().await {
            Ok(t) => t,
            Err(e) => return failed(format!("the browser could not start: {e}")),
        };
        // Nothing is shown of a page the policy refuses, however the tab
        // got there.
        let url = match tab.url().await {
            Ok(url) => url,
            Err(e) => return failed(e.to_string()),
        };
        match SessionPolicy::new(&self.runs.operator_policy()).map(|p| p.check_url(&url)) {
            Ok(PolicyDecision::Deny(d)) => {
                return failed(format!(
                    "the page is one the operator policy refuses: {}",
                    d.reason
                ));
            }
            Err(e) => return failed(format!("the operator policy is invalid: {e}")),
            Ok(_) => {}
        }
        if name == "screenshot" {
            match tab.screenshot(&ScreenshotOptions::default()).await {
                Ok(shot) => {
                    let data = base64::engine::general_purpose::STANDARD.encode(&shot.image.data);
                    CallToolResult::success(vec![ContentBlock::image(
                        data,
                        shot.image.format.mime(),
                    )])
                }
                Err(e) => failed(e.to_string()),
            }
        } else {
            match tab.accessibility_snapshot().await {
                Ok(s) => CallToolResult::success(vec![ContentBlock::text(format!(
                    "{}\n{}",
                    s.url,
                    s.to_text()
                ))]),
                Err(e) => failed(e.to_string()),
            }
        }
    }
}

impl ServerHandler for LumenMcp {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("lumen", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Lumen drives a real browser. run_task hands it a whole task; open, click, type, press, scroll, screenshot and snapshot drive the browser one action at a time (coordinates are CSS pixels of the viewport).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "run_task" => self.run_task(args).await,
            n @ ("open" | "click" | "type" | "press" | "scroll") => self.act(n, args).await,
            n @ ("screenshot" | "snapshot") => self.look(n).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other:?}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// Serves MCP on `input`/`output` until the client disconnects, then shuts
/// down like IPC does (active runs interrupted and persisted; the browser
/// closed).
pub async fn mcp<R, W>(options: ServeOptions, input: R, output: W) -> Result<(), ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let runs = RunManager::new(options).await?;
    let handler = LumenMcp {
        runs: runs.clone(),
        tab: Arc::default(),
        calls: Arc::default(),
    };
    let tab = handler.tab.clone();
    let service = handler
        .serve((input, output))
        .await
        .map_err(|e| ServeError::Mcp(e.to_string()))?;
    let quit = service.waiting().await;
    runs.shutdown().await;
    if let Some(t) = tab.lock().await.take()
        && let Ok(t) = Arc::try_unwrap(t)
    {
        let _ = t.close().await;
    }
    quit.map(|_| ()).map_err(|e| ServeError::Mcp(e.to_string()))
}

/// `lumen mcp`: serves MCP on this process's stdin and stdout. Nothing else
/// may write to stdout meanwhile (logs go to stderr).
pub async fn mcp_stdio(options: ServeOptions) -> Result<(), ServeError> {
    mcp(options, tokio::io::stdin(), tokio::io::stdout()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field a direct tool offers comes from the action vocabulary;
    /// a field the catalogue lost would drop out of the tool silently.
    #[test]
    fn direct_tools_take_their_fields_from_the_action_vocabulary() {
        let tools = tools();
        let expected: [(&str, &[&str]); 4] = [
            ("click", &["x", "y", "button"]),
            ("type", &["text"]),
            ("press", &["keys"]),
            ("scroll", &["direction", "amount", "x", "y"]),
        ];
        for (name, fields) in expected {
            let tool = tools.iter().find(|t| t.name == name).unwrap();
            let properties = tool.input_schema["properties"].as_object().unwrap();
            let mut got: Vec<&str> = properties.keys().map(String::as_str).collect();
            let mut want = fields.to_vec();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "{name}");
        }
        let click = tools.iter().find(|t| t.name == "click").unwrap();
        assert_eq!(
            click.input_schema["properties"]["button"]["enum"],
            json!(["left", "right", "middle"])
        );
    }
}

//! The OpenAPI 3.1 document served at `/openapi.json`, written by hand next
//! to the routes. A unit test reads the router's source and fails when a
//! route or a method is missing here (or documented but not served).

use serde_json::{Value, json};

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

fn run_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Run"}}}
    })
}

fn id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}})
}

fn control(
    summary: &str,
    body: Option<Value>,
    (code, ok): (&str, Value),
    extra: &[(&str, &str)],
) -> Value {
    let mut responses = json!({ "404": error_response("No such run") });
    for (code, what) in extra {
        responses[*code] = error_response(what);
    }
    responses[code] = ok;
    let mut op = json!({
        "summary": summary,
        "parameters": [id_param()],
        "responses": responses,
    });
    if let Some(b) = body {
        op["requestBody"] = json!({
            "required": false,
            "content": {"application/json": {"schema": b}}
        });
    }
    op
}

/// The run body (`POST /v1/runs`, IPC `create`, MCP `run_task`):
/// `instruction` and every option of [`lumen::RunOptions`], from its one
/// schema, so the documents cannot drift from the type.
pub(crate) fn create_run_schema() -> Value {
    let mut properties = lumen::RunOptions::json_schema();
    properties.insert(
        "instruction".into(),
        json!({"type": "string", "minLength": 1, "description": "The task, in plain words."}),
    );
    json!({
        "type": "object",
        "required": ["instruction"],
        "additionalProperties": false,
        "properties": properties,
    })
}

/// The document.
pub(crate) fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Lumen server",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Hand Lumen browser tasks and watch them live. Every route but /health requires `Authorization: Bearer <token>` (the server always has a token: given, or generated at start into <data-dir>/token). The Host header must name the server (421 otherwise) and a foreign Origin is refused (403); request bodies must be application/json (415) and at most 1 MiB (413). Errors are JSON: {\"error\": {\"code\", \"message\", \"field\"?}}."
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {
                            "code": {"type": "string", "enum": [
                                "invalid_json", "invalid_field", "missing_field", "unknown_field",
                                "unauthorized", "bad_ticket", "forbidden_origin", "misdirected_host",
                                "unsupported_media_type", "body_too_large",
                                "not_found", "invalid_state", "run_ended", "task_limit",
                                "policy_denied", "queue_full", "worker_unavailable", "internal"
                            ]},
                            "message": {"type": "string"},
                            "field": {"type": "string"}
                        }
                    }}
                },
                "CreateRun": create_run_schema(),
                "Run": run_schema(),
                "RecordedEvent": {
                    "type": "object",
                    "description": "A lumen StreamEvent with its `seq` (the SSE id) and `timestampMs`; screenshot bytes are left out (fetch /v1/runs/{id}/steps/{n}/screenshot). `reasoning_delta` and `assistant_delta` ({step, text}) are the model's reasoning and text as they stream in: live only (never in the event log, the trace or a backlog), they repeat the `seq` of the logged event before them; the complete reasoning follows as `thinking`.",
                    "required": ["seq", "timestampMs", "type"],
                    "properties": {
                        "seq": {"type": "integer"},
                        "timestampMs": {"type": "integer"},
                        "type": {"type": "string", "enum": [
                            "run_started", "step_started", "screenshot", "reasoning_delta", "assistant_delta",
                            "thinking", "action", "action_result", "action_blocked", "state_written", "nudge",
                            "compaction", "termination_rejected", "waiting_for_human", "human_done", "step_completed", "error", "done"
                        ]},
                        "step": {"type": "integer"},
                        "text": {"type": "string", "description": "thinking, reasoning_delta, assistant_delta: the text (a delta's piece)"}
                    }
                }
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {"get": {
                "summary": "{\"status\": \"ok\"} without a token; with it also version, uptime and run counts",
                "security": [],
                "responses": {"200": {"description": "Healthy"}}
            }},
            "/openapi.json": {"get": {
                "summary": "This document",
                "responses": {"200": {"description": "The OpenAPI document"}}
            }},
            "/v1/tools": {"get": {
                "summary": "The action schema (JSON Schema of every action the agent can take)",
                "responses": {"200": {"description": "The schema"}}
            }},
            "/v1/runs": {
                "get": {
                    "summary": "All runs, newest first",
                    "responses": {"200": {"description": "Runs", "content": {"application/json": {"schema": {
                        "type": "object", "properties": {"runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}}}
                    }}}}}
                },
                "post": {
                    "summary": "Create a run (queued, then executed when a browser slot is free)",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CreateRun"}}}},
                    "responses": {
                        "201": run_response("Created; Location names the run"),
                        "400": error_response("Invalid body (the field is named)"),
                        "403": error_response("policy_denied: the operator policy refuses what the field asks (a start URL's host, a wider policy, a folder outside the operator's, an endpoint the operator did not list)"),
                        "409": error_response("The server is shutting down"),
                        "429": error_response("The run queue is full"),
                        "500": error_response("The run could not be saved in the data directory")
                    }
                }
            },
            "/v1/runs/{id}": {"get": control("One run: status, progress, result, usage", None, ("200", run_response("The run")), &[])},
            "/v1/runs/{id}/cancel": {"post": control(
                "Cancel a queued, running, paused or interrupted run",
                Some(json!({"type": "object", "properties": {"reason": {"type": "string", "enum": crate::CANCEL_REASONS, "default": "user_explicit_cancel"}}})),
                ("202", run_response("Cancellation requested")),
                &[("400", "Invalid body"), ("409", "The run has already ended")],
            )},
            "/v1/runs/{id}/pause": {"post": control(
                "Pause at the next step boundary",
                None,
                ("200", run_response("Paused")),
                &[("409", "The run is not queued or running")],
            )},
            "/v1/runs/{id}/resume": {"post": control(
                "Resume a paused run, or continue an interrupted one from its last completed step",
                None,
                ("200", run_response("Resumed or queued")),
                &[("409", "The run cannot be resumed"), ("429", "The run queue is full")],
            )},
            "/v1/runs/{id}/message": {"post": control(
                "Guidance for the model, delivered at the next step (on resume for an interrupted run)",
                Some(json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})),
                ("202", json!({"description": "Accepted: {id, delivery: next_step | on_resume}"})),
                &[("400", "Invalid body"), ("409", "The run has ended; the message was not delivered")],
            )},
            "/v1/runs/{id}/tasks": {"post": add_task_operation()},
            "/v1/runs/{id}/live": {
                "post": control(
                    "A ticket to the live view (valid 5 minutes, one view at a time) of the hand-over the run waits on: {handoff, reason, trigger, url, socket, expiresInSecs}",
                    None,
                    ("200", json!({"description": "The ticket's page and socket URLs (valid 300 s, the socket redeems it)"})),
                    &[("409", "The run is not waiting for a person")],
                ),
                "get": {
                    "summary": "The live view's page (canvas, input, a note and done), for a live ticket",
                    "security": [],
                    "parameters": [id_param(), {"name": "ticket", "in": "query", "required": true, "schema": {"type": "string"}}],
                    "responses": {
                        "200": {"description": "The page", "content": {"text/html": {}}},
                        "401": error_response("bad_ticket: unknown, used up or expired")
                    }
                }
            },
            "/v1/runs/{id}/live/socket": {"get": {
                "summary": "WebSocket of the live view, redeeming the ticket: receive {type: handoff}, {type: frame, width, height, data}, {type: closed}; send mouseMove, mouseDown, mouseUp, wheel, keyDown, keyUp, text and finally {type: done, note?}",
                "security": [],
                "parameters": [id_param(), {"name": "ticket", "in": "query", "required": true, "schema": {"type": "string"}}],
                "responses": {
                    "101": {"description": "Switching protocols"},
                    "401": error_response("bad_ticket: unknown, used up or expired")
                }
            }},
            "/v1/runs/{id}/handoff/done": {"post": control(
                "The person is done: the run goes on with a fresh screenshot and the note",
                Some(json!({"type": "object", "properties": {"note": {"type": "string", "maxLength": 2000}, "handoff": {"type": "integer", "description": "Only this hand-over"}}})),
                ("202", run_response("Handed back")),
                &[("400", "Invalid body"), ("409", "The run is not waiting for a person")],
            )},
            "/v1/runs/{id}/events": {"get": {
                "summary": "Server-sent events of the run (id = seq; resume with Last-Event-ID or ?after=)",
                "parameters": [
                    id_param(),
                    {"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "integer"}},
                    {"name": "after", "in": "query", "required": false, "schema": {"type": "integer"}}
                ],
                "responses": {
                    "200": {"description": "text/event-stream of RecordedEvent; ends when the run's execution ends", "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/RecordedEvent"}}}},
                    "400": error_response("Invalid Last-Event-ID"),
                    "404": error_response("No such run")
                }
            }},
            "/v1/runs/{id}/trace": {"get": control("The run's report: record and steps built from the event log", None, ("200", json!({"description": "The trace"})), &[])},
            "/v1/runs/{id}/steps/{n}/screenshot": {"get": {
                "summary": "The screenshot of step n",
                "parameters": [id_param(), {"name": "n", "in": "path", "required": true, "schema": {"type": "integer"}}],
                "responses": {
                    "200": {"description": "The image", "content": {"image/jpeg": {}, "image/png": {}}},
                    "404": error_response("No such run or screenshot")
                }
            }},
            "/v1/stream": {"get": {
                "summary": "WebSocket: send {type: subscribe, runId, after?}, {type: unsubscribe, runId} or {type: ping}; receive {type: event, runId, event}, {type: ended, runId}, {type: pong}",
                "responses": {"101": {"description": "Switching protocols"}}
            }}
        }
    })
}

/// The `Run` schema: `RunInfo` as the server answers and persists it.
/// Tests compare it with the type: every field a record can carry is
/// listed, and those always present are required.
fn run_schema() -> Value {
    // The record's `options`: the request's options, secret values left out.
    let mut options = lumen::RunOptions::json_schema();
    options.remove("secrets");
    json!({
        "type": "object",
        "required": [
            "id", "status", "instruction", "model", "maxSteps", "mode", "attempts", "policy",
            "createdAtMs", "stepsCompleted", "usage", "resumes", "taskIndex"
        ],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["queued", "running", "paused", "waiting_for_human", "completed", "failed", "cancelled", "interrupted"]},
            "instruction": {"type": "string", "description": "The task (secret values redacted to <secret:NAME>, as in every text of the record)"},
            "startUrl": {"type": "string"},
            "model": {"type": "string"},
            "maxSteps": {"type": "integer"},
            "mode": {"type": "string", "enum": ["agent", "plan", "exec"]},
            "attempts": {"type": "integer", "description": "Attempts in exec mode (1 otherwise)"},
            "policy": {"type": "object", "description": "The effective policy: the operator's, narrowed by the request's"},
            "systemPrompt": {"type": "string"},
            "stepsCompleted": {"type": "integer"},
            "lastUrl": {"type": "string"},
            "usage": {"type": "object"},
            "cancelReason": {"type": "string"},
            "result": {"type": "string"},
            "outcome": {"type": "string", "enum": outcomes()},
            "error": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "retryable": {"type": "boolean"}}},
            "pendingMessages": {"type": "array", "items": {"type": "string"}},
            "undeliveredMessages": {"type": "array", "items": {"type": "string"}},
            "resumes": {"type": "integer"},
            "options": {
                "type": "object",
                "description": "Every option the request gave (CreateRun without instruction), secret values left out",
                "additionalProperties": false,
                "properties": options
            },
            "secretNames": {"type": "array", "items": {"type": "string"}, "description": "The run's secrets; their values are kept in memory only"},
            "missingSecrets": {"type": "array", "items": {"type": "string"}, "description": "Secrets whose values this run no longer has (the server restarted since): it goes on without them; give them again in a new run"},
            "tasks": {"type": "array", "items": {"type": "string"}, "description": "Follow-on tasks in the order given (POST /v1/runs/{id}/tasks)"},
            "taskIndex": {"type": "integer", "description": "The task running or last run: 0 the instruction, n tasks[n-1]"},
            "taskResults": task_results_schema(),
            "taskSeq": {"type": "integer", "description": "The event seq the running follow-on task starts at"},
            "handoff": handoff_schema(),
            "worker": {"type": "string", "description": "The server executing the run (its worker id), while one does"},
            "possiblyRepeated": {"type": "array", "items": {"type": "string"}, "description": "Actions that may have run twice: executed in a step that had not completed when its execution stopped, which the resumed run did again (actions run at least once, recorded steps exactly once)"},
            "createdAtMs": {"type": "integer"},
            "startedAtMs": {"type": "integer"},
            "endedAtMs": {"type": "integer"}
        }
    })
}

/// `Run.handoff`: what a run waiting for a person asks of them.
fn handoff_schema() -> Value {
    json!({
        "type": "object",
        "description": "While waiting_for_human: what the person is asked (POST /v1/runs/{id}/live opens the live view)",
        "required": ["id", "reason", "trigger"],
        "properties": {
            "id": {"type": "integer"},
            "reason": {"type": "string"},
            "trigger": {"type": "string", "enum": ["model", "url", "payment", "rejections"]}
        }
    })
}

/// How a task or a run can end (`Run.outcome`, `taskResults[].status`):
/// every loop status but `cancelled`, which the run's `status` and
/// `cancelReason` say instead.
fn outcomes() -> Value {
    json!([
        "success",
        "failure",
        "maxSteps",
        "budgetExceeded",
        "handoffTimeout"
    ])
}

/// `Run.taskResults`.
fn task_results_schema() -> Value {
    json!({
        "type": "array",
        "description": "On runs given follow-on tasks: how each finished task ended, in order; the run's result is the last one's",
        "items": {
            "type": "object",
            "required": ["instruction", "status", "steps"],
            "properties": {
                "instruction": {"type": "string"},
                "status": {"type": "string", "enum": outcomes()},
                "result": {"type": "string"},
                "steps": {"type": "integer"},
                "usage": {"type": "object"}
            }
        }
    })
}

/// `POST /v1/runs/{id}/tasks`.
fn add_task_operation() -> Value {
    control(
        "Queue a follow-on task: run after the current task succeeds, in the same browser, with a fresh history and step budget and the task state carried over (an interrupted run runs it after resuming). A task that does not succeed ends the run; the tasks after it are not run and stay listed",
        Some(
            json!({"type": "object", "required": ["instruction"], "properties": {"instruction": {"type": "string"}}}),
        ),
        (
            "202",
            json!({"description": "Queued: {id, task: its index (1 is the first follow-on; taskIndex reaches it when it runs), queued: how many tasks wait before it runs, itself included}"}),
        ),
        &[
            ("400", "Invalid body (the field is named)"),
            (
                "409",
                "The run has ended, is ending or is being cancelled (run_ended), or already has the most follow-on tasks the server takes per run (task_limit, naming the cap); the task was not added",
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// `(METHOD, path)` of every `.route(...)` in the router's source.
    fn served_routes() -> BTreeSet<(String, String)> {
        let src = include_str!("http.rs");
        let mut out = BTreeSet::new();
        for line in src.lines() {
            let Some(rest) = line.trim().strip_prefix(".route(\"") else {
                continue;
            };
            let Some((path, methods)) = rest.split_once('"') else {
                continue;
            };
            for m in ["get", "post", "put", "patch", "delete"] {
                if methods.contains(&format!("{m}(")) {
                    out.insert((m.to_string(), path.to_string()));
                }
            }
        }
        out
    }

    fn documented_routes() -> BTreeSet<(String, String)> {
        let doc = document();
        let mut out = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for m in item.as_object().unwrap().keys() {
                out.insert((m.clone(), path.clone()));
            }
        }
        out
    }

    /// The keys of a run body with every option set: what the schemas
    /// must list, no more, no less.
    fn every_option_key() -> BTreeSet<String> {
        let full = serde_json::to_value(lumen::every_option_set()).unwrap();
        let mut keys: BTreeSet<String> = full.as_object().unwrap().keys().cloned().collect();
        keys.insert("instruction".into());
        keys
    }

    #[test]
    fn the_run_body_schemas_list_every_option_of_the_type() {
        let doc = document();
        let openapi: BTreeSet<String> = doc["components"]["schemas"]["CreateRun"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(openapi, every_option_key(), "OpenAPI CreateRun");
        let tools = crate::mcp::tools();
        let run_task = tools.iter().find(|t| t.name == "run_task").unwrap();
        let mcp: BTreeSet<String> = run_task.input_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        // All but `handoff`: a blocking tool call leaves nobody to answer.
        let mut expected = every_option_key();
        assert!(expected.remove("handoff"));
        assert_eq!(mcp, expected, "MCP run_task");
    }

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    fn strings(v: &Value) -> BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    }

    /// A record with every field set, and one with none of the optional
    /// ones: what `GET /v1/runs/{id}` and `run.json` can hold at most and
    /// hold at least.
    fn records() -> (crate::RunInfo, crate::RunInfo) {
        use crate::store::TaskResult;
        use crate::{Mode, RunInfo, RunState};
        let mut options = lumen::every_option_set();
        options.secrets = None; // never kept: only their names
        let full = RunInfo {
            id: "run_1".into(),
            status: RunState::Completed,
            instruction: "x".into(),
            start_url: Some("https://a.test/".into()),
            model: "m".into(),
            max_steps: 3,
            mode: Mode::Agent,
            attempts: 1,
            policy: Default::default(),
            system_prompt: Some("p".into()),
            created_at_ms: 1,
            started_at_ms: Some(2),
            ended_at_ms: Some(3),
            steps_completed: 2,
            last_url: Some("https://a.test/b".into()),
            usage: Default::default(),
            cancel_reason: Some("user_explicit_cancel".into()),
            result: Some("r".into()),
            outcome: Some(lumen::RunStatus::BudgetExceeded),
            error: Some(lumen::ErrorInfo::from(&lumen::LumenError::config("k", "v"))),
            pending_messages: vec!["m".into()],
            undelivered_messages: vec!["u".into()],
            resumes: 1,
            options,
            secret_names: vec!["PW".into()],
            missing_secrets: vec!["PW".into()],
            tasks: vec!["t".into()],
            task_index: 1,
            task_results: vec![TaskResult {
                instruction: "x".into(),
                status: lumen::RunStatus::Success,
                result: Some("r".into()),
                steps: 1,
                usage: Default::default(),
            }],
            task_seq: 9,
            handoff: Some(crate::store::HandoffInfo {
                id: 1,
                reason: "a code".into(),
                trigger: lumen::HandoffTrigger::Model,
            }),
            worker: Some("host-1".into()),
            possibly_repeated: vec!["{\"type\":\"click\"}".into()],
        };
        let bare = RunInfo {
            start_url: None,
            system_prompt: None,
            started_at_ms: None,
            ended_at_ms: None,
            last_url: None,
            cancel_reason: None,
            result: None,
            outcome: None,
            error: None,
            pending_messages: Vec::new(),
            undelivered_messages: Vec::new(),
            options: Default::default(),
            secret_names: Vec::new(),
            missing_secrets: Vec::new(),
            tasks: Vec::new(),
            task_results: Vec::new(),
            task_seq: 0,
            handoff: None,
            worker: None,
            possibly_repeated: Vec::new(),
            ..full.clone()
        };
        (full, bare)
    }

    #[test]
    fn the_run_schema_lists_every_field_the_server_returns() {
        let doc = document();
        let run = &doc["components"]["schemas"]["Run"];
        let (full, bare) = records();
        let full = serde_json::to_value(&full).unwrap();
        let bare = serde_json::to_value(&bare).unwrap();
        assert_eq!(keys(&run["properties"]), keys(&full), "Run.properties");
        assert_eq!(strings(&run["required"]), keys(&bare), "Run.required");
        assert_eq!(
            keys(&run["properties"]["options"]["properties"]),
            keys(&full["options"]),
            "Run.options"
        );
        assert_eq!(
            keys(&run["properties"]["error"]["properties"]),
            keys(&full["error"]),
            "Run.error"
        );
        let task = &run["properties"]["taskResults"]["items"];
        assert_eq!(
            keys(&task["properties"]),
            keys(&full["taskResults"][0]),
            "Run.taskResults"
        );
        // Every loop status a run or a task can end with (a cancel is
        // the run's status, never its outcome), and no other.
        let statuses = [
            lumen::RunStatus::Success,
            lumen::RunStatus::Failure,
            lumen::RunStatus::MaxSteps,
            lumen::RunStatus::Cancelled,
            lumen::RunStatus::BudgetExceeded,
            lumen::RunStatus::HandoffTimeout,
        ];
        let outcomes: BTreeSet<String> = statuses
            .into_iter()
            .filter(|s| match s {
                lumen::RunStatus::Cancelled => false,
                lumen::RunStatus::Success
                | lumen::RunStatus::Failure
                | lumen::RunStatus::MaxSteps
                | lumen::RunStatus::BudgetExceeded
                | lumen::RunStatus::HandoffTimeout => true,
            })
            .map(|s| {
                serde_json::to_value(s)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(strings(&run["properties"]["outcome"]["enum"]), outcomes);
        assert_eq!(strings(&task["properties"]["status"]["enum"]), outcomes);
        for (field, value) in [
            ("status", &full["status"]),
            ("mode", &full["mode"]),
            ("outcome", &full["outcome"]),
        ] {
            let allowed = strings(&run["properties"][field]["enum"]);
            assert!(allowed.contains(value.as_str().unwrap()), "{field} {value}");
        }
    }

    /// The error codes the crate's sources answer with: the literal after
    /// each `StatusCode::…` in error.rs, and every `code: "…"`.
    fn codes_in_the_sources() -> BTreeSet<String> {
        let literal = |text: &str| {
            let start = text.find('"')? + 1;
            let end = start + text[start..].find('"')?;
            Some(text[start..end].to_owned())
        };
        let mut codes = BTreeSet::new();
        let errors: Vec<&str> = include_str!("error.rs").lines().collect();
        for (i, line) in errors.iter().enumerate() {
            if let Some((_, rest)) = line.split_once("StatusCode::")
                && !line.trim_start().starts_with("use ")
                && !line.contains("pub status")
                && let Some(code) = literal(rest).or_else(|| literal(errors.get(i + 1)?))
            {
                codes.insert(code);
            }
        }
        for src in [include_str!("runs.rs"), include_str!("http.rs")] {
            for (_, rest) in src.match_indices("code: \"").map(|(i, _)| src.split_at(i)) {
                if let Some(code) = literal(rest) {
                    codes.insert(code);
                }
            }
        }
        codes
    }

    #[test]
    fn every_error_code_is_documented_and_creating_a_run_lists_its_403() {
        let doc = document();
        let documented = strings(
            &doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"],
        );
        let used = codes_in_the_sources();
        assert!(
            used.len() >= 15 && used.contains("policy_denied") && used.contains("task_limit"),
            "the sources could not be read: {used:?}"
        );
        assert_eq!(documented, used);
        let create = &doc["paths"]["/v1/runs"]["post"]["responses"];
        for status in ["201", "400", "403", "409", "429"] {
            assert!(create[status].is_object(), "POST /v1/runs lacks {status}");
        }
        assert!(
            create["403"]["description"]
                .as_str()
                .unwrap()
                .contains("policy_denied")
        );
    }

    #[test]
    fn every_served_route_is_documented_and_nothing_else() {
        let served = served_routes();
        assert!(
            served.len() >= 14,
            "the router source could not be read: {served:?}"
        );
        assert_eq!(served, documented_routes());
    }

    #[test]
    fn every_operation_has_a_summary_and_responses() {
        let doc = document();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (m, op) in item.as_object().unwrap() {
                assert!(op["summary"].is_string(), "{m} {path} lacks a summary");
                assert!(op["responses"].is_object(), "{m} {path} lacks responses");
                if path.contains("{id}") {
                    assert_eq!(op["parameters"][0]["name"], "id", "{m} {path}");
                }
            }
        }
    }
}

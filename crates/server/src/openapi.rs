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
                                "unauthorized", "forbidden_origin", "misdirected_host",
                                "unsupported_media_type", "body_too_large",
                                "not_found", "invalid_state", "run_ended", "policy_denied",
                                "queue_full", "internal"
                            ]},
                            "message": {"type": "string"},
                            "field": {"type": "string"}
                        }
                    }}
                },
                "CreateRun": create_run_schema(),
                "Run": {
                    "type": "object",
                    "required": ["id", "status", "instruction", "model", "maxSteps", "stepsCompleted"],
                    "properties": {
                        "id": {"type": "string"},
                        "status": {"type": "string", "enum": ["queued", "running", "paused", "completed", "failed", "cancelled", "interrupted"]},
                        "instruction": {"type": "string"},
                        "startUrl": {"type": "string"},
                        "model": {"type": "string"},
                        "maxSteps": {"type": "integer"},
                        "mode": {"type": "string"},
                        "stepsCompleted": {"type": "integer"},
                        "lastUrl": {"type": "string"},
                        "usage": {"type": "object"},
                        "cancelReason": {"type": "string"},
                        "result": {"type": "string"},
                        "outcome": {"type": "string", "enum": ["success", "failure", "maxSteps"]},
                        "error": {"type": "object"},
                        "pendingMessages": {"type": "array", "items": {"type": "string"}},
                        "undeliveredMessages": {"type": "array", "items": {"type": "string"}},
                        "resumes": {"type": "integer"},
                        "tasks": {"type": "array", "items": {"type": "string"}, "description": "Follow-on tasks in the order given (POST /v1/runs/{id}/tasks)"},
                        "taskIndex": {"type": "integer", "description": "The task running or last run: 0 the instruction, n tasks[n-1]"},
                        "taskResults": task_results_schema(),
                        "taskSeq": {"type": "integer", "description": "The event seq the running follow-on task starts at"},
                        "createdAtMs": {"type": "integer"},
                        "startedAtMs": {"type": "integer"},
                        "endedAtMs": {"type": "integer"}
                    }
                },
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
                            "compaction", "termination_rejected", "step_completed", "error", "done"
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
                        "409": error_response("The server is shutting down"),
                        "429": error_response("The run queue is full")
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
                "status": {"type": "string", "enum": ["success", "failure", "maxSteps", "budgetExceeded"]},
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
                "The run has ended, is ending or is being cancelled (run_ended); the task was not added",
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
        assert_eq!(mcp, every_option_key(), "MCP run_task");
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

//! API errors: JSON bodies with a stable code, a message and, for invalid
//! input, the field at fault.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answered to a client (HTTP, IPC or MCP).
///
/// The body is `{"error": {"code", "message", "field"?}}`. Codes are stable
/// and documented in `docs/server.md`; messages are for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    /// The HTTP status.
    #[serde(skip)]
    pub status: StatusCode,
    /// A stable, machine-readable code (`invalid_field`, `not_found`…).
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// The request field at fault, for invalid input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    /// 400 `invalid_json`: the body is not a JSON object.
    pub fn invalid_json(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_json", message)
    }

    /// 400 `invalid_field` naming `field`.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.to_string()),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_field", message)
        }
    }

    /// 400 `missing_field` naming `field`.
    pub fn missing_field(field: &str) -> Self {
        Self {
            field: Some(field.to_string()),
            ..Self::new(
                StatusCode::BAD_REQUEST,
                "missing_field",
                format!("`{field}` is required"),
            )
        }
    }

    /// 400 `unknown_field` naming `field`.
    pub fn unknown_field(field: &str) -> Self {
        Self {
            field: Some(field.to_string()),
            ..Self::new(
                StatusCode::BAD_REQUEST,
                "unknown_field",
                format!("`{field}` is not a known field"),
            )
        }
    }

    /// 401 `unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid `Authorization: Bearer <token>` header is required",
        )
    }

    /// 401 `bad_ticket`: a live view's ticket is unknown, used up or
    /// expired.
    pub fn bad_ticket() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "bad_ticket",
            "this live view's ticket is unknown, used up or expired: ask for a new one \
             (POST /v1/runs/{id}/live, or the URL `lumen run --handoff` prints)",
        )
    }

    /// 403 `forbidden_origin`: a web page on another origin sent this
    /// request (cross-site request forgery, cross-site WebSocket).
    pub fn forbidden_origin(origin: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden_origin",
            format!(
                "requests from the web origin `{origin}` are refused: only clients that send no \
                 `Origin` header, or pages served by this server itself, may call it"
            ),
        )
    }

    /// 421 `misdirected_host`: the `Host` header does not name this server
    /// (DNS rebinding). `allowed` lists what it accepts.
    pub fn misdirected_host(host: &str, allowed: &str) -> Self {
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_host",
            format!(
                "the Host header `{host}` does not name this server; use {allowed} \
                 (the operator can allow another name with --allow-host)"
            ),
        )
    }

    /// 413 `body_too_large`.
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// 415 `unsupported_media_type`: a body that is not declared JSON.
    pub fn unsupported_media_type(given: Option<&str>) -> Self {
        let given = given.map_or_else(|| "none".to_string(), |g| format!("`{g}`"));
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("send `Content-Type: application/json` (got {given}); an empty body is fine"),
        )
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409 `invalid_state`: the run is not in a state that allows this.
    pub fn invalid_state(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "invalid_state", message)
    }

    /// 409 `run_ended`: a message for a run that has ended was not delivered.
    pub fn run_ended(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "run_ended", message)
    }

    /// 409 `task_limit`: the run already has `limit` follow-on tasks, the
    /// most the server takes per run ([`crate::ServeOptions::max_tasks_per_run`]).
    pub fn task_limit(run: &str, limit: usize) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "task_limit",
            format!(
                "run {run} already has {limit} follow-on tasks, the most this server takes per \
                 run (max_tasks_per_run = {limit}); the task was not added: create a new run for it"
            ),
        )
    }

    /// 429 `queue_full`.
    pub fn queue_full(limit: usize) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "queue_full",
            format!("the run queue is full ({limit} waiting); retry later"),
        )
    }

    /// 503 `worker_unavailable`: the worker holding a run of a shared queue
    /// did not answer a steering request in time.
    pub fn worker_unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "worker_unavailable",
            message,
        )
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

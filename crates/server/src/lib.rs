//! Lumen as a service: an HTTP API with server-sent events, IPC over JSON
//! lines, and an MCP server.
//!
//! May depend on the `lumen` facade and `axum`. Status: lands with the server
//! issue.

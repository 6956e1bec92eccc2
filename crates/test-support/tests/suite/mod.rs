//! Integration suites, one module per area.

mod fixture_server;
mod http;
#[cfg(unix)]
mod postgres;

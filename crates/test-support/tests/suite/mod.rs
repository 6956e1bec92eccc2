//! Integration suites, one module per area.

mod fixture_server;
mod http;

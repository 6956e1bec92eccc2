//! Integration suites, one module per area.

mod direct;
mod errors;
mod harness;
mod policy;
mod replay;
mod report;
mod run;
mod serve;

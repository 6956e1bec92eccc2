//! Integration suites, one module per area.

mod direct;
mod direct_elements;
mod direct_files;
mod direct_keeper;
mod direct_network;
mod direct_real_pages;
mod errors;
mod handoff;
mod harness;
mod live;
mod policy;
mod replay;
mod replay_options;
mod report;
mod resume;
mod run;
mod serve;

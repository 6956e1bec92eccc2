mod agent;
mod browser_toolset;
mod browser_toolset_members;
mod e2e;
mod modes;
mod network_policy;
mod own_tools;
mod rerun;
mod safety;
mod telemetry;
mod zoom;

use std::sync::Arc;

use lumen::ModelAdapter;
use lumen::models::{AdapterOptions, ApiKey};
use lumen_test_support::mock_provider::MockProvider;
use lumen_test_support::mock_provider::trajectory::Wire;

/// `wire`'s adapter, talking to `mock`.
fn adapter(wire: Wire, mock: &MockProvider) -> Arc<dyn ModelAdapter> {
    lumen::models::create_adapter(
        wire.model(),
        AdapterOptions {
            api_key: Some(ApiKey::new("test-key")),
            base_url: Some(wire.base_url(mock)),
            ..AdapterOptions::default()
        },
    )
    .unwrap()
}

//! The one integration-test binary of `lumen-models`: recorded provider
//! streams, outbound request bodies, and adapters over real HTTP against
//! `lumen_test_support::mock_provider`.

#[cfg(test)]
mod suite;

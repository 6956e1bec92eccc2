//! The one integration-test binary of `lumen-test-support`: real HTTP against
//! a running [`lumen_test_support::FixtureServer`].

// An integration test is always built with `cfg(test)`, so this attribute
// changes nothing for rustc. It is for clippy, whose allow-unwrap-in-tests
// covers `#[test]` functions and `#[cfg(test)]` items only, not the helpers
// beside them.
#[cfg(test)]
mod suite;

//! The one integration-test binary of `lumen-cli`: the real `lumen` binary
//! against real Chromium, fixture pages on 127.0.0.1 and the mock provider.

// An integration test is always built with `cfg(test)`; the attribute is for
// clippy, whose allow-unwrap-in-tests covers `#[cfg(test)]` items only.
#[cfg(test)]
mod suite;

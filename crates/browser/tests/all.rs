//! The one integration-test binary of `lumen-browser`: real Chromium driving
//! the fixture sites served on 127.0.0.1. Effects are read back from the
//! pages' `window.lumen`.

// Integration tests are built with `cfg(test)`; the attribute lets clippy's
// allow-unwrap-in-tests cover the helpers beside the tests too.
#[cfg(test)]
mod suite;

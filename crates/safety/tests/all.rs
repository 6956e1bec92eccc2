//! Integration tests of this crate, built as one binary.

// `cfg(test)` changes nothing for rustc here (integration tests always build
// with it); it lets clippy's allow-unwrap-in-tests cover the helpers beside
// the `#[test]` functions too.
#[cfg(test)]
mod suite;

//! The facade's integration tests, one binary.

// Test helpers outside #[test] functions unwrap too; clippy's test
// allowances only cover items under cfg(test).
#[cfg(test)]
mod suite;

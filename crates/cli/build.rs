//! Links the `lumen` executable as a non-PIE binary on Linux.
//!
//! `lumen browser …` is run once per command, so its start-up is part of
//! every command's latency. As a position-independent executable, the
//! dynamic loader has to patch about 40,000 pointers in `.data.rel.ro`
//! before `main` runs, which copies some 170 pages of it (0.8 ms on the
//! 2-core development machine, about a tenth of a warm `click`). Linked at a
//! fixed address, those pointers are final at link time. The cost is that
//! the executable's own code and data (not its heap, stack or libraries)
//! sit at the same address every time, which matters to exploits of memory
//! corruption, and this is a memory-safe program. Measured by `cargo xtask
//! bench cli` (docs/benchmarks.md).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bin=lumen=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

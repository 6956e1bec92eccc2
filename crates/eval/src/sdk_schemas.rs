//! `cargo xtask sdk-schemas [--check]`: the JSON Schemas the mock provider
//! checks every request against, derived from the providers' official
//! SDKs, pinned.
//!
//! The SDKs are installed with pip into `target/sdk/` when missing (as the
//! offline eval fetches MiniWoB++), then `crates/mock/sdk/extract_schemas.py`
//! writes the schemas. Without `--check` they replace the committed ones;
//! with it (what `cargo xtask ci` runs) they must equal them byte for byte,
//! so the committed schemas are provably what the pinned SDKs define.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util;

/// The pinned SDKs (docs/models.md says why these versions).
const PINS: &[&str] = &["anthropic==2.15.0", "openai==3.57.0", "google-genai==3.6.1"];

/// The schema files the extractor writes and the mock embeds.
const FILES: &[&str] = &[
    "anthropic-messages.json",
    "openai-responses.json",
    "openai-chat.json",
    "google-generate-content.json",
    "google-mldev-unsupported.json",
    "keywords.json",
    "models.json",
];

/// Options of `cargo xtask sdk-schemas`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// Compare with the committed schemas instead of replacing them.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    let root = util::project_root()?;
    let sdk = root.join("target/sdk");
    ensure_sdks(&sdk)?;
    let committed = root.join("crates/mock/sdk/schemas");
    let out = if options.check {
        root.join("target/sdk-schemas")
    } else {
        committed.clone()
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    util::run(
        Command::new("python3")
            .arg(root.join("crates/mock/sdk/extract_schemas.py"))
            .arg("--sdk-dir")
            .arg(&sdk)
            .arg("--out")
            .arg(&out),
    )
    .context("extracting the request schemas from the pinned SDKs")?;
    if !options.check {
        println!("sdk-schemas: wrote {}", committed.display());
        return Ok(());
    }
    let mut stale = Vec::new();
    for file in FILES {
        let fresh = std::fs::read(out.join(file)).with_context(|| format!("reading {file}"))?;
        let kept = std::fs::read(committed.join(file)).unwrap_or_default();
        if fresh != kept {
            stale.push(*file);
        }
    }
    if !stale.is_empty() {
        bail!(
            "the committed SDK schemas differ from what the pinned SDKs define ({}): run \
             `cargo xtask sdk-schemas` and commit the result",
            stale.join(", ")
        );
    }
    println!(
        "sdk-schemas: the committed schemas match {}",
        PINS.join(", ")
    );
    Ok(())
}

/// Installs the pinned SDKs into `dir` unless they are there already.
fn ensure_sdks(dir: &Path) -> anyhow::Result<()> {
    let marker = dir.join(".lumen-pins");
    let wanted = PINS.join("\n");
    if std::fs::read_to_string(&marker).is_ok_and(|pins| pins == wanted) {
        return Ok(());
    }
    println!(
        "sdk-schemas: installing {} from PyPI into {}",
        PINS.join(", "),
        dir.display()
    );
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    util::run(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
            ])
            .arg(dir)
            .args(PINS),
    )
    .context("installing the pinned provider SDKs needs python3 with pip and access to PyPI")?;
    std::fs::write(&marker, wanted).context("marking the SDK install")?;
    Ok(())
}

//! `cargo xtask tidy`: keeps the workspace's shape honest.
//!
//! The dependency rules are checked by [`check_graph`], a pure function over a
//! small model of the workspace built from `cargo metadata` by
//! [`parse_metadata`] (with xtask's own small JSON reader, [`crate::json`]:
//! xtask builds from clap and anyhow alone). Only the dependencies that
//! members declare are examined; `--no-deps` metadata already lists them
//! (external ones included), and it needs neither the network nor a
//! download of every crate.
//!
//! xtask depends on exactly clap and anyhow, in every kind of dependency:
//! whatever needs more belongs in `lumen-eval`, so `cargo xtask` stays quick
//! to build.
//!
//! Otherwise dev-dependencies are exempt: any crate may use any other in its
//! tests. For normal and build dependencies, the first rule an edge breaks
//! wins, so every bad edge is reported exactly once:
//!
//! 1. `lumen-core` depends on no other lumen crate, nor on tokio, reqwest,
//!    chromiumoxide, axum or image.
//! 2. `lumen-test-support` is only ever a dev-dependency.
//! 3. `lumen-test-support` itself uses only core, browser, models and mock.
//! 4. Nothing depends on the tools, `lumen-eval` and `xtask`.
//! 5. `lumen-mock` (offline doubles) uses only `lumen-core`, and only
//!    lumen-cli, lumen-server, lumen-python, lumen-eval and
//!    lumen-test-support use it (anyone may as a dev-dependency).
//! 6. `lumen-cli` is the command-line tool, a binary without a library:
//!    nothing depends on it (anyone may as a dev-dependency, to run the
//!    binary in tests).
//! 7. perception, memory and safety reach the browser and the models only through
//!    the `lumen_core` traits.
//! 8. `lumen-browser` and `lumen-models` do not depend on each other.
//! 9. Only lumen, lumen-cli, lumen-server, lumen-test-support and lumen-eval
//!    depend on `lumen-browser` or `lumen-models`.
//! 10. Dependencies point down the layers in [`LAYERS`]; crates in the same
//!     layer may use each other unless a rule above says otherwise.
//!
//! Every member must also be listed in [`LAYERS`], declare
//! `[lints] workspace = true`, and open each library and binary root with a
//! `//!` module doc ([`check_files`]).
//!
//! [`sources`] adds two rules on the source text: no file over 800 lines
//! outside its tests unless listed with a reason, and no second definition
//! of what the workspace defines once (the atomic writer, the Chromium
//! locator, the price table, civil dates, the run folder's file names).

mod sources;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::json::{self, Value};
use crate::util;

const CORE: &str = "lumen-core";
const BROWSER: &str = "lumen-browser";
const MODELS: &str = "lumen-models";
const TEST_SUPPORT: &str = "lumen-test-support";
const MOCK: &str = "lumen-mock";
const CLI: &str = "lumen-cli";
const EVAL: &str = "lumen-eval";
const XTASK: &str = "xtask";
/// The Python bindings (bindings/python), an edge beside the CLI.
const PYTHON: &str = "lumen-python";

/// xtask's whole dependency list, of every kind.
const XTASK_DEPS: &[&str] = &["anyhow", "clap"];

/// External crates that would give `lumen-core` I/O or a heavy runtime.
const FORBIDDEN_IN_CORE: &[&str] = &["tokio", "reqwest", "chromiumoxide", "axum", "image"];

/// Crates that reach the browser and the models only through `lumen_core`.
const TRAIT_ONLY: &[&str] = &["lumen-perception", "lumen-memory", "lumen-safety"];

/// The only crates with normal dependencies on a concrete browser or model
/// crate.
const CONCRETE_USERS: &[&str] = &["lumen", "lumen-cli", "lumen-server", TEST_SUPPORT, EVAL];

/// The crates `lumen-test-support` may use.
const TEST_SUPPORT_MAY_USE: &[&str] = &[CORE, BROWSER, MODELS, MOCK];

/// The only crates with normal dependencies on `lumen-mock` (the demo, the
/// server's offline mode, the Python bindings' `lumen._testing`, evals,
/// and the test support that re-exports it).
const MOCK_USERS: &[&str] = &["lumen-cli", "lumen-server", PYTHON, EVAL, TEST_SUPPORT];

/// The tools: binaries nothing depends on.
const TOOLS: &[&str] = &[EVAL, XTASK];

/// Every workspace member and its layer; a crate may depend only on crates in
/// its own layer or below. `lumen-test-support` and `lumen-mock` sit outside
/// the layers and have rules of their own.
const LAYERS: &[(&str, Option<u8>)] = &[
    (CORE, Some(0)),
    (BROWSER, Some(1)),
    (MODELS, Some(1)),
    ("lumen-memory", Some(1)),
    ("lumen-safety", Some(1)),
    ("lumen-trace", Some(1)),
    ("lumen-perception", Some(2)),
    ("lumen", Some(3)),
    ("lumen-cli", Some(4)),
    ("lumen-server", Some(4)),
    (PYTHON, Some(4)),
    (EVAL, Some(5)),
    (XTASK, Some(5)),
    (TEST_SUPPORT, None),
    (MOCK, None),
];

/// The layer order, spelled out in violation messages.
const LAYER_ORDER: &str = "core < browser, models, memory, safety, trace < perception < lumen < cli, server < eval, xtask";

/// How a dependency is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DepKind {
    Normal,
    Build,
    Dev,
}

/// One declared dependency of a workspace member, by package name (a
/// `package = "…"` rename is already resolved by cargo).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dep {
    pub(crate) name: String,
    pub(crate) kind: DepKind,
}

/// A workspace member as tidy sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Package {
    pub(crate) name: String,
    pub(crate) manifest_path: PathBuf,
    /// Source roots of the library and binary targets.
    pub(crate) roots: Vec<PathBuf>,
    pub(crate) deps: Vec<Dep>,
}

/// Runs every check on the real workspace and fails if any rule is broken,
/// after printing all violations.
pub(crate) fn run() -> anyhow::Result<()> {
    let root = util::project_root()?;
    let json = util::output(util::cargo().current_dir(&root).args([
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
    ]))?;
    let packages = parse_metadata(&json)?;
    let mut violations = check_graph(&packages);
    violations.extend(check_files(&packages, &root)?);
    violations.extend(sources::run(&root)?);
    if !violations.is_empty() {
        for violation in &violations {
            eprintln!("tidy: {violation}");
        }
        bail!("tidy found {} violation(s)", violations.len());
    }
    println!("tidy: {} workspace members, all rules hold", packages.len());
    Ok(())
}

/// Builds the model from `cargo metadata --format-version 1` output, keeping
/// only workspace members, sorted by name.
pub(crate) fn parse_metadata(json: &str) -> anyhow::Result<Vec<Package>> {
    let meta = json::parse(json).context("cargo metadata printed invalid JSON")?;
    let members = array(&meta, "workspace_members")?
        .iter()
        .map(|id| id.as_str().context("a workspace member id is not a string"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut packages = Vec::new();
    for package in array(&meta, "packages")? {
        if !members.contains(&string(package, "id")?) {
            continue;
        }
        let name = string(package, "name")?;
        packages.push(parse_package(package).with_context(|| format!("in package {name}"))?);
    }
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(packages)
}

fn parse_package(package: &Value) -> anyhow::Result<Package> {
    let deps = array(package, "dependencies")?
        .iter()
        .map(|dep| {
            let kind = match dep.get("kind").and_then(Value::as_str) {
                None | Some("normal") => DepKind::Normal,
                Some("build") => DepKind::Build,
                Some("dev") => DepKind::Dev,
                Some(other) => bail!("unknown dependency kind {other:?}"),
            };
            Ok(Dep {
                name: string(dep, "name")?.to_owned(),
                kind,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let mut roots = Vec::new();
    for target in array(package, "targets")? {
        let kinds = array(target, "kind")?;
        let is_root = kinds.iter().filter_map(Value::as_str).any(|kind| {
            matches!(
                kind,
                "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro" | "bin"
            )
        });
        if is_root {
            roots.push(PathBuf::from(string(target, "src_path")?));
        }
    }
    Ok(Package {
        name: string(package, "name")?.to_owned(),
        manifest_path: PathBuf::from(string(package, "manifest_path")?),
        roots,
        deps,
    })
}

fn array<'a>(value: &'a Value, key: &str) -> anyhow::Result<&'a Vec<Value>> {
    value
        .get(key)
        .and_then(Value::as_array)
        .with_context(|| format!("`{key}` is missing or not an array"))
}

fn string<'a>(value: &'a Value, key: &str) -> anyhow::Result<&'a str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("`{key}` is missing or not a string"))
}

/// Checks the dependency rules; returns one message per violation, sorted.
pub(crate) fn check_graph(packages: &[Package]) -> Vec<String> {
    let members: Vec<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut violations = Vec::new();
    for package in packages {
        if !LAYERS.iter().any(|(name, _)| *name == package.name) {
            violations.push(format!(
                "{}: not in tidy's layer table; add it to LAYERS in xtask/src/tidy.rs",
                package.name
            ));
        }
        if package.name == XTASK {
            violations.extend(check_xtask_deps(&package.deps));
        }
        for dep in &package.deps {
            if dep.kind == DepKind::Dev {
                continue;
            }
            let is_member = members.contains(&dep.name.as_str());
            if let Some(why) = broken_rule(&package.name, &dep.name, is_member) {
                violations.push(format!("{} -> {}: {why}", package.name, dep.name));
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

/// xtask's dependencies, of every kind, must be exactly [`XTASK_DEPS`].
fn check_xtask_deps(deps: &[Dep]) -> Vec<String> {
    let mut violations: Vec<String> = deps
        .iter()
        .filter(|dep| !XTASK_DEPS.contains(&dep.name.as_str()))
        .map(|dep| {
            format!(
                "xtask -> {}: xtask depends on clap and anyhow only, so `cargo xtask` builds \
                 in seconds; tasks that need more belong in lumen-eval (crates/eval)",
                dep.name
            )
        })
        .collect();
    for wanted in XTASK_DEPS {
        if !deps.iter().any(|dep| dep.name == *wanted) {
            violations.push(format!(
                "xtask: does not depend on {wanted}; its dependencies are exactly clap and anyhow"
            ));
        }
    }
    violations
}

/// The first rule a normal or build dependency `from -> to` breaks, if any.
fn broken_rule(from: &str, to: &str, to_is_member: bool) -> Option<String> {
    if !to_is_member {
        return (from == CORE && FORBIDDEN_IN_CORE.contains(&to)).then(|| {
            "lumen-core holds contracts only and does no I/O \
             (no tokio, reqwest, chromiumoxide, axum or image)"
                .to_owned()
        });
    }
    if from == CORE {
        return Some("lumen-core is the bottom layer and depends on no other lumen crate".into());
    }
    if to == TEST_SUPPORT {
        return Some("lumen-test-support is only ever a dev-dependency".into());
    }
    if TOOLS.contains(&to) {
        return Some(format!(
            "{to} is a tool (a binary of project tasks); nothing depends on it"
        ));
    }
    if from == TEST_SUPPORT {
        return (!TEST_SUPPORT_MAY_USE.contains(&to)).then(|| {
            "lumen-test-support may depend only on lumen-core, lumen-browser, lumen-models \
             and lumen-mock"
                .to_owned()
        });
    }
    if from == MOCK {
        return (to != CORE)
            .then(|| "lumen-mock may depend only on lumen-core (and external crates)".to_owned());
    }
    if to == MOCK && !MOCK_USERS.contains(&from) {
        return Some(
            "only lumen-cli, lumen-server, lumen-python, lumen-eval and lumen-test-support \
             depend on lumen-mock (anyone may as a dev-dependency)"
                .to_owned(),
        );
    }
    if to == CLI {
        return Some(
            "lumen-cli is the command-line tool, a binary without a library: nothing depends \
             on it (anyone may as a dev-dependency)"
                .to_owned(),
        );
    }
    if TRAIT_ONLY.contains(&from) && (to == BROWSER || to == MODELS) {
        let who = match from {
            "lumen-perception" => "the loop",
            "lumen-memory" => "memory",
            _ => "the safety layer",
        };
        let (what, trait_name) = if to == BROWSER {
            ("the browser", "BrowserTab")
        } else {
            ("models", "ModelAdapter")
        };
        return Some(format!(
            "{who} must reach {what} only through lumen_core::{trait_name}"
        ));
    }
    if (from == BROWSER && to == MODELS) || (from == MODELS && to == BROWSER) {
        return Some("lumen-browser and lumen-models are independent of each other".into());
    }
    if (to == BROWSER || to == MODELS) && !CONCRETE_USERS.contains(&from) {
        return Some(format!(
            "only lumen, lumen-cli, lumen-server, lumen-test-support and lumen-eval \
             depend on {to} (anyone may as a dev-dependency)"
        ));
    }
    match (layer(from), layer(to)) {
        (Some(from_layer), Some(to_layer)) if to_layer > from_layer => Some(format!(
            "dependencies point down ({LAYER_ORDER}), and {to} sits above {from}"
        )),
        _ => None,
    }
}

fn layer(name: &str) -> Option<u8> {
    LAYERS
        .iter()
        .find(|(member, _)| *member == name)
        .and_then(|(_, layer)| *layer)
}

/// Checks each member's manifest for `[lints] workspace = true` and each
/// library and binary root for a leading `//!` doc. Paths in messages are
/// relative to `root`.
pub(crate) fn check_files(packages: &[Package], root: &Path) -> anyhow::Result<Vec<String>> {
    let shown = |path: &Path| {
        path.strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    let mut violations = Vec::new();
    for package in packages {
        let manifest = read(&package.manifest_path)?;
        if !declares_workspace_lints(&manifest) {
            violations.push(format!(
                "{}: {} lacks `[lints] workspace = true`",
                package.name,
                shown(&package.manifest_path)
            ));
        }
        for source in &package.roots {
            if !has_module_doc(&read(source)?) {
                violations.push(format!(
                    "{}: {} does not start with a `//!` module doc",
                    package.name,
                    shown(source)
                ));
            }
        }
    }
    Ok(violations)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))
}

/// Whether a manifest opts into the workspace lints, as `[lints]` +
/// `workspace = true`, or at the top level as `lints.workspace = true` or
/// `lints = { workspace = true }`. A line-based reading, not a TOML parser:
/// enough for manifests written in the usual way.
pub(crate) fn declares_workspace_lints(manifest: &str) -> bool {
    // `None` while still in the root table, before any `[header]`.
    let mut table: Option<String> = None;
    for line in manifest.lines() {
        let code = line.split('#').next().unwrap_or_default();
        let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.starts_with('[') {
            table = Some(compact);
            continue;
        }
        let found = match table.as_deref() {
            Some("[lints]") => compact == "workspace=true",
            None => compact == "lints.workspace=true" || compact == "lints={workspace=true}",
            Some(_) => false,
        };
        if found {
            return true;
        }
    }
    false
}

/// Whether a source file opens with a `//!` module doc (leading blank lines
/// allowed).
pub(crate) fn has_module_doc(source: &str) -> bool {
    source.trim_start().starts_with("//!")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(name: &str, kind: DepKind) -> Dep {
        Dep {
            name: name.to_owned(),
            kind,
        }
    }

    fn package(name: &str, deps: &[&str]) -> Package {
        Package {
            name: name.to_owned(),
            manifest_path: PathBuf::from(format!("/ws/{name}/Cargo.toml")),
            roots: vec![PathBuf::from(format!("/ws/{name}/src/lib.rs"))],
            deps: deps.iter().map(|d| dep(d, DepKind::Normal)).collect(),
        }
    }

    /// The intended graph: every allowed kind of edge, external crates where
    /// they belong, and test-support used as a dev-dependency.
    fn clean() -> Vec<Package> {
        let mut packages = vec![
            package(CORE, &["serde", "thiserror", "async-trait"]),
            package(BROWSER, &[CORE, "chromiumoxide", "tokio", "image"]),
            package(MODELS, &[CORE, "reqwest", "tokio"]),
            package("lumen-memory", &[CORE, "serde"]),
            package("lumen-safety", &[CORE, "serde"]),
            package("lumen-trace", &[CORE, "lumen-safety", "image"]),
            package(
                "lumen-perception",
                &[CORE, "lumen-memory", "lumen-safety", "tokio"],
            ),
            package(
                "lumen",
                &[
                    CORE,
                    BROWSER,
                    MODELS,
                    "lumen-memory",
                    "lumen-safety",
                    "lumen-perception",
                ],
            ),
            package("lumen-cli", &["lumen", MOCK, "clap", "tokio"]),
            package("lumen-server", &["lumen", "axum", "tokio"]),
            package(TEST_SUPPORT, &[CORE, BROWSER, MODELS, MOCK, "axum"]),
            package(MOCK, &[CORE, "axum", "tokio"]),
            package(
                EVAL,
                &[
                    "lumen",
                    CORE,
                    BROWSER,
                    MODELS,
                    MOCK,
                    "lumen-server",
                    "serde_json",
                    "tokio",
                ],
            ),
            package(XTASK, &["anyhow", "clap"]),
        ];
        for package in &mut packages {
            if ![TEST_SUPPORT, MOCK, XTASK].contains(&package.name.as_str()) {
                package.deps.push(dep(TEST_SUPPORT, DepKind::Dev));
            }
        }
        packages
    }

    /// The clean graph plus one extra edge.
    fn with_edge(from: &str, to: &str, kind: DepKind) -> Vec<Package> {
        let mut packages = clean();
        for package in &mut packages {
            if package.name == from {
                package.deps.push(dep(to, kind));
            }
        }
        packages
    }

    fn violations_with(from: &str, to: &str) -> Vec<String> {
        check_graph(&with_edge(from, to, DepKind::Normal))
    }

    #[test]
    fn clean_graph_passes() {
        assert_eq!(check_graph(&clean()), Vec::<String>::new());
    }

    #[test]
    fn dev_dependencies_are_exempt() {
        let mut packages = clean();
        for package in &mut packages {
            if package.name == CORE || package.name == "lumen-perception" {
                package.deps.push(dep(BROWSER, DepKind::Dev));
                package.deps.push(dep("tokio", DepKind::Dev));
                package.deps.push(dep("lumen", DepKind::Dev));
            }
        }
        assert_eq!(check_graph(&packages), Vec::<String>::new());
    }

    #[test]
    fn core_must_not_use_io_crates() {
        for io in FORBIDDEN_IN_CORE {
            assert_eq!(
                violations_with(CORE, io),
                [format!(
                    "lumen-core -> {io}: lumen-core holds contracts only and does no I/O \
                     (no tokio, reqwest, chromiumoxide, axum or image)"
                )]
            );
        }
    }

    #[test]
    fn core_io_rule_covers_build_dependencies() {
        assert_eq!(
            check_graph(&with_edge(CORE, "tokio", DepKind::Build)).len(),
            1
        );
    }

    #[test]
    fn core_must_not_use_other_lumen_crates() {
        assert_eq!(
            violations_with(CORE, "lumen-memory"),
            [
                "lumen-core -> lumen-memory: lumen-core is the bottom layer and depends on no other lumen crate"
            ]
        );
    }

    #[test]
    fn loop_reaches_the_browser_only_through_the_trait() {
        assert_eq!(
            violations_with("lumen-perception", BROWSER),
            [
                "lumen-perception -> lumen-browser: the loop must reach the browser only through lumen_core::BrowserTab"
            ]
        );
    }

    #[test]
    fn memory_and_safety_reach_models_only_through_the_trait() {
        assert_eq!(
            violations_with("lumen-memory", MODELS),
            [
                "lumen-memory -> lumen-models: memory must reach models only through lumen_core::ModelAdapter"
            ]
        );
        assert_eq!(
            violations_with("lumen-safety", BROWSER),
            [
                "lumen-safety -> lumen-browser: the safety layer must reach the browser only through lumen_core::BrowserTab"
            ]
        );
    }

    #[test]
    fn browser_and_models_are_independent() {
        assert_eq!(
            violations_with(MODELS, BROWSER),
            [
                "lumen-models -> lumen-browser: lumen-browser and lumen-models are independent of each other"
            ]
        );
    }

    #[test]
    fn only_the_top_crates_use_concrete_crates() {
        // An unlisted crate (here a future one) trips both the layer table
        // and the concrete-user rule.
        let mut packages = clean();
        packages.push(package("lumen-planner", &[CORE, BROWSER]));
        assert_eq!(
            check_graph(&packages),
            [
                "lumen-planner -> lumen-browser: only lumen, lumen-cli, lumen-server, \
                 lumen-test-support and lumen-eval depend on lumen-browser (anyone may as a dev-dependency)",
                "lumen-planner: not in tidy's layer table; add it to LAYERS in xtask/src/tidy.rs",
            ]
        );
    }

    #[test]
    fn concrete_crates_may_be_used_by_the_top_crates() {
        let mut packages = with_edge("lumen-cli", BROWSER, DepKind::Normal);
        for package in &mut packages {
            if package.name == "lumen-server" || package.name == EVAL {
                package.deps.push(dep(MODELS, DepKind::Normal));
            }
        }
        assert_eq!(check_graph(&packages), Vec::<String>::new());
    }

    #[test]
    fn test_support_is_only_a_dev_dependency() {
        assert_eq!(
            violations_with("lumen-cli", TEST_SUPPORT),
            ["lumen-cli -> lumen-test-support: lumen-test-support is only ever a dev-dependency"]
        );
        assert_eq!(
            check_graph(&with_edge("lumen", TEST_SUPPORT, DepKind::Build)),
            ["lumen -> lumen-test-support: lumen-test-support is only ever a dev-dependency"]
        );
    }

    #[test]
    fn test_support_uses_only_core_browser_and_models() {
        assert_eq!(
            violations_with(TEST_SUPPORT, "lumen-perception"),
            [
                "lumen-test-support -> lumen-perception: lumen-test-support may depend only on lumen-core, \
                 lumen-browser, lumen-models and lumen-mock"
            ]
        );
    }

    #[test]
    fn mock_uses_only_core() {
        for to in [BROWSER, "lumen-perception", TEST_SUPPORT] {
            let expected = if to == TEST_SUPPORT {
                "lumen-mock -> lumen-test-support: lumen-test-support is only ever a dev-dependency"
                    .to_owned()
            } else {
                format!(
                    "lumen-mock -> {to}: lumen-mock may depend only on lumen-core (and external crates)"
                )
            };
            assert_eq!(violations_with(MOCK, to), [expected], "{to}");
        }
    }

    #[test]
    fn only_the_top_crates_and_test_support_use_mock() {
        for from in ["lumen", "lumen-perception", BROWSER] {
            assert_eq!(
                violations_with(from, MOCK),
                [format!(
                    "{from} -> lumen-mock: only lumen-cli, lumen-server, lumen-python, lumen-eval \
                     and lumen-test-support depend on lumen-mock (anyone may as a dev-dependency)"
                )],
                "{from}"
            );
        }
        let mut packages = with_edge("lumen-server", MOCK, DepKind::Normal);
        for package in &mut packages {
            if package.name == EVAL {
                package.deps.push(dep(MOCK, DepKind::Normal));
            }
            if package.name == "lumen" {
                package.deps.push(dep(MOCK, DepKind::Dev));
            }
        }
        assert_eq!(check_graph(&packages), Vec::<String>::new());
    }

    #[test]
    fn nothing_depends_on_the_cli() {
        for from in [
            EVAL,
            "lumen-server",
            "lumen",
            "lumen-perception",
            MODELS,
            MOCK,
        ] {
            let why = if from == MOCK {
                "lumen-mock may depend only on lumen-core (and external crates)"
            } else {
                "lumen-cli is the command-line tool, a binary without a library: nothing \
                 depends on it (anyone may as a dev-dependency)"
            };
            assert_eq!(
                violations_with(from, CLI),
                [format!("{from} -> lumen-cli: {why}")],
                "{from}"
            );
        }
        // As a dev-dependency it is fine.
        let mut packages = clean();
        for package in &mut packages {
            if package.name == "lumen-server" {
                package.deps.push(dep(CLI, DepKind::Dev));
            }
        }
        assert!(check_graph(&packages).is_empty());
    }

    #[test]
    fn nothing_depends_on_the_tools() {
        for (from, to) in [
            ("lumen-server", EVAL),
            ("lumen-cli", XTASK),
            (EVAL, XTASK),
            (TEST_SUPPORT, EVAL),
        ] {
            assert_eq!(
                violations_with(from, to),
                [format!(
                    "{from} -> {to}: {to} is a tool (a binary of project tasks); nothing depends on it"
                )],
                "{from} -> {to}"
            );
        }
    }

    #[test]
    fn xtask_depends_on_clap_and_anyhow_only() {
        // The clean graph has exactly those two (`cargo xtask tidy` checks
        // the real manifest). Any other dependency fails, of whatever kind,
        // even a dev one.
        assert!(check_graph(&clean()).is_empty());
        for (to, kind) in [
            ("serde_json", DepKind::Normal),
            ("tokio", DepKind::Normal),
            ("cc", DepKind::Build),
            ("tempfile", DepKind::Dev),
        ] {
            let violations = check_graph(&with_edge(XTASK, to, kind));
            assert_eq!(violations.len(), 1, "{to}: {violations:?}");
            assert!(
                violations[0].starts_with(&format!(
                    "xtask -> {to}: xtask depends on clap and anyhow only"
                )),
                "{violations:?}"
            );
        }
        // And so does a missing one.
        let mut packages = clean();
        for package in &mut packages {
            if package.name == XTASK {
                package.deps.retain(|d| d.name != "clap");
            }
        }
        assert_eq!(
            check_graph(&packages),
            ["xtask: does not depend on clap; its dependencies are exactly clap and anyhow"]
        );
    }

    #[test]
    fn dependencies_point_down() {
        let expected = |from: &str, to: &str| {
            vec![format!(
                "{from} -> {to}: dependencies point down (core < browser, models, memory, safety, \
                 trace < perception < lumen < cli, server < eval, xtask), and {to} sits above {from}"
            )]
        };
        for (from, to) in [
            ("lumen-memory", "lumen-perception"),
            ("lumen-safety", "lumen"),
            ("lumen-perception", "lumen"),
            ("lumen-trace", "lumen-perception"),
            ("lumen", "lumen-server"),
        ] {
            assert_eq!(
                violations_with(from, to),
                expected(from, to),
                "{from} -> {to}"
            );
        }
    }

    #[test]
    fn crates_in_one_layer_may_use_each_other() {
        let mut packages = with_edge("lumen-memory", "lumen-safety", DepKind::Normal);
        for package in &mut packages {
            if package.name == "lumen-cli" {
                package.deps.push(dep("lumen-server", DepKind::Normal));
            }
        }
        assert_eq!(check_graph(&packages), Vec::<String>::new());
    }

    #[test]
    fn a_bad_edge_listed_twice_is_reported_once() {
        let mut packages = with_edge("lumen-perception", BROWSER, DepKind::Normal);
        for package in &mut packages {
            if package.name == "lumen-perception" {
                package.deps.push(dep(BROWSER, DepKind::Build));
            }
        }
        assert_eq!(check_graph(&packages).len(), 1);
    }

    const METADATA: &str = r#"{
        "packages": [
            {
                "name": "lumen-core",
                "id": "path+file:///ws/crates/core#lumen-core@0.1.0",
                "manifest_path": "/ws/crates/core/Cargo.toml",
                "dependencies": [
                    {"name": "serde", "source": "registry+https://github.com/rust-lang/crates.io-index", "kind": null, "rename": null},
                    {"name": "cc", "source": "registry+https://github.com/rust-lang/crates.io-index", "kind": "build", "rename": null},
                    {"name": "insta", "source": "registry+https://github.com/rust-lang/crates.io-index", "kind": "dev", "rename": null}
                ],
                "targets": [
                    {"kind": ["lib"], "name": "lumen_core", "src_path": "/ws/crates/core/src/lib.rs"},
                    {"kind": ["test"], "name": "all", "src_path": "/ws/crates/core/tests/all.rs"}
                ]
            },
            {
                "name": "lumen-cli",
                "id": "path+file:///ws/crates/cli#lumen-cli@0.1.0",
                "manifest_path": "/ws/crates/cli/Cargo.toml",
                "dependencies": [
                    {"name": "lumen-core", "source": null, "kind": "normal", "rename": "core", "path": "/ws/crates/core"}
                ],
                "targets": [
                    {"kind": ["bin"], "name": "lumen", "src_path": "/ws/crates/cli/src/main.rs"},
                    {"kind": ["custom-build"], "name": "build-script-build", "src_path": "/ws/crates/cli/build.rs"}
                ]
            },
            {
                "name": "serde",
                "id": "registry+https://github.com/rust-lang/crates.io-index#serde@1.0.219",
                "manifest_path": "/home/.cargo/registry/src/serde-1.0.219/Cargo.toml",
                "dependencies": [],
                "targets": []
            }
        ],
        "workspace_members": [
            "path+file:///ws/crates/core#lumen-core@0.1.0",
            "path+file:///ws/crates/cli#lumen-cli@0.1.0"
        ],
        "version": 1
    }"#;

    #[test]
    fn parses_members_from_metadata() {
        let packages = parse_metadata(METADATA).unwrap();
        assert_eq!(
            packages,
            [
                Package {
                    name: "lumen-cli".into(),
                    manifest_path: "/ws/crates/cli/Cargo.toml".into(),
                    roots: vec!["/ws/crates/cli/src/main.rs".into()],
                    deps: vec![dep(CORE, DepKind::Normal)],
                },
                Package {
                    name: CORE.into(),
                    manifest_path: "/ws/crates/core/Cargo.toml".into(),
                    roots: vec!["/ws/crates/core/src/lib.rs".into()],
                    deps: vec![
                        dep("serde", DepKind::Normal),
                        dep("cc", DepKind::Build),
                        dep("insta", DepKind::Dev),
                    ],
                },
            ]
        );
    }

    #[test]
    fn rejects_malformed_metadata() {
        assert!(parse_metadata("not json").is_err());
        assert!(parse_metadata(r#"{"packages": []}"#).is_err());
        let bad_kind = METADATA.replace(r#""kind": "build""#, r#""kind": "weird""#);
        let err = format!("{:#}", parse_metadata(&bad_kind).unwrap_err());
        assert!(err.contains("in package lumen-core"), "{err}");
        assert!(err.contains(r#"unknown dependency kind "weird""#), "{err}");
    }

    #[test]
    fn recognises_workspace_lints() {
        assert!(declares_workspace_lints(
            "[package]\nname = \"x\"\n\n[lints]\nworkspace = true\n"
        ));
        assert!(declares_workspace_lints(
            "[lints]  # shared\n  workspace=true # yes\n[dependencies]\n"
        ));
        assert!(declares_workspace_lints(
            "lints.workspace = true\n[package]\nname = \"x\"\n"
        ));
        assert!(declares_workspace_lints(
            "lints = { workspace = true }\n[package]\n"
        ));
    }

    #[test]
    fn rejects_missing_or_misplaced_workspace_lints() {
        assert!(!declares_workspace_lints("[package]\nname = \"x\"\n"));
        assert!(!declares_workspace_lints("[lints]\nworkspace = false\n"));
        assert!(!declares_workspace_lints(
            "[lints]\n[dependencies]\nworkspace = true\n"
        ));
        assert!(!declares_workspace_lints(
            "[package]\nlints.workspace = true\n"
        ));
        assert!(!declares_workspace_lints("# [lints]\n# workspace = true\n"));
    }

    #[test]
    fn recognises_module_docs() {
        assert!(has_module_doc("//! Lumen.\nfn main() {}\n"));
        assert!(has_module_doc("\n//! After a blank line.\n"));
        assert!(!has_module_doc("// A plain comment.\n//! Too late.\n"));
        assert!(!has_module_doc("/// An item doc.\nfn f() {}\n"));
        assert!(!has_module_doc(""));
    }

    #[test]
    fn file_checks_report_missing_lints_and_docs() {
        let dir = std::env::temp_dir().join(format!("xtask-tidy-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("good/src")).unwrap();
        std::fs::create_dir_all(dir.join("bad/src")).unwrap();
        std::fs::write(dir.join("good/Cargo.toml"), "[lints]\nworkspace = true\n").unwrap();
        std::fs::write(dir.join("good/src/lib.rs"), "//! Good.\n").unwrap();
        std::fs::write(dir.join("bad/Cargo.toml"), "[package]\nname = \"bad\"\n").unwrap();
        std::fs::write(dir.join("bad/src/main.rs"), "fn main() {}\n").unwrap();
        let member = |name: &str, root: &str| Package {
            name: name.to_owned(),
            manifest_path: dir.join(name).join("Cargo.toml"),
            roots: vec![dir.join(name).join(root)],
            deps: Vec::new(),
        };
        let packages = [member("good", "src/lib.rs"), member("bad", "src/main.rs")];
        let violations = check_files(&packages, &dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            violations.unwrap(),
            [
                "bad: bad/Cargo.toml lacks `[lints] workspace = true`",
                "bad: bad/src/main.rs does not start with a `//!` module doc",
            ]
        );
    }
}

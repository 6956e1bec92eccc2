//! The `postgres` step of `cargo xtask ci`: makes sure PostgreSQL's server
//! binaries are installed, for the tests of the server's PostgreSQL run
//! store. Nothing is started here: each test process starts its own
//! throwaway cluster (`lumen_test_support::postgres`), and the step hands
//! the tests the folder holding `initdb` and `postgres` in
//! `LUMEN_POSTGRES_BIN`.
//!
//! Looked for in `LUMEN_POSTGRES_BIN` (when set, only there), then on
//! `PATH`, then in Debian's `/usr/lib/postgresql/<version>/bin`, highest
//! version first: Debian's `postgresql` package puts the binaries there,
//! off `PATH`. When none is found and we run as root (and `--skip-install`
//! is not given), `apt-get install -y postgresql` installs them; otherwise
//! the step fails with that command.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

use super::{Options, find_on_path, is_executable, is_root};
use crate::util;

/// The variable naming the folder; the tests read it too.
pub(super) const BIN_ENV: &str = "LUMEN_POSTGRES_BIN";

/// Where Debian installs each major version.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// The folder holding `initdb` and `postgres`, installing PostgreSQL with
/// apt-get when it is missing and that is possible and allowed.
pub(super) fn ensure(options: &Options) -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(BIN_ENV) {
        let dir = PathBuf::from(dir);
        if !has_server(&dir) {
            bail!(
                "{BIN_ENV} is {}, which holds no initdb and postgres: point it at the folder \
                 of PostgreSQL's server binaries (Debian: {DEBIAN_ROOT}/<version>/bin), or unset it",
                dir.display()
            );
        }
        println!("PostgreSQL: {}", dir.display());
        return Ok(dir);
    }
    if let Some(dir) = locate() {
        println!("PostgreSQL: {}", dir.display());
        return Ok(dir);
    }
    let missing = format!(
        "PostgreSQL's server binaries (initdb, postgres) were not found on PATH or in \
         {DEBIAN_ROOT}/*/bin; the run store's tests start a throwaway server with them. \
         Install them (`sudo apt-get install -y postgresql`) or set {BIN_ENV} to their folder"
    );
    let apt_get =
        std::env::var_os("PATH").and_then(|path| find_on_path(&path, "apt-get", &is_executable));
    let Some(apt_get) = apt_get.filter(|_| !options.skip_install && is_root()) else {
        bail!("{missing}");
    };
    println!("PostgreSQL not found; running as root, so installing it with apt-get");
    util::run(Command::new(&apt_get).arg("update"))?;
    util::run(
        Command::new(&apt_get)
            .args(["install", "-y", "postgresql"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    match locate() {
        Some(dir) => {
            println!("PostgreSQL: {}", dir.display());
            Ok(dir)
        }
        None => bail!("apt-get installed postgresql, but still: {missing}"),
    }
}

/// `initdb` on `PATH` (its real folder, symlinks followed, when `postgres`
/// is there too), else the highest Debian version folder that has both.
fn locate() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .and_then(|path| find_on_path(&path, "initdb", &is_executable))
        .and_then(|initdb| std::fs::canonicalize(initdb).ok())
        .and_then(|initdb| initdb.parent().map(Path::to_path_buf))
        .filter(|dir| has_server(dir));
    on_path.or_else(|| {
        let names = std::fs::read_dir(DEBIAN_ROOT)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        by_version(&names)
            .into_iter()
            .map(|name| Path::new(DEBIAN_ROOT).join(name).join("bin"))
            .find(|dir| has_server(dir))
    })
}

fn has_server(dir: &Path) -> bool {
    is_executable(&dir.join("initdb")) && is_executable(&dir.join("postgres"))
}

/// The names that are versions (`15`, `9.6`), highest first.
fn by_version(names: &[String]) -> Vec<&str> {
    let mut versions: Vec<(Vec<u32>, &str)> = names
        .iter()
        .filter_map(|name| {
            let version = name
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, name.as_str()))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, name)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_by_number_and_other_names_are_skipped() {
        let names = ["9.6", "15", "16", "10", "common", "16.beta"].map(String::from);
        assert_eq!(by_version(&names), ["16", "15", "10", "9.6"]);
        assert!(by_version(&[]).is_empty());
    }
}

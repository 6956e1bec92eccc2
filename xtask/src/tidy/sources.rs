//! Rules on the source text, beside the dependency rules of the parent
//! module:
//!
//! - No source file is longer than [`MAX_LINES`] lines outside its tests,
//!   unless [`LONG_FILES`] lists it with a reason. A long file is usually
//!   several concerns that want files of their own.
//! - The things the workspace defines once stay defined once ([`SINGLE`]):
//!   the atomic file writer, the Chromium locator, the price table, the
//!   civil-date arithmetic and the run folder's file names. Each is
//!   recognised by text only its definition writes (a call, a literal, a
//!   constant), and only its home file may contain that text.
//!
//! Tests are exempt from both: files under a `tests/` folder, files named
//! `tests.rs` or `*_tests.rs`, and everything from a file's first
//! `#[cfg(test)]` line on. Comment lines are skipped when looking for a
//! definition, so docs may name the things they describe. This module is
//! exempt from the second rule: its table holds every needle.

use std::path::Path;

use anyhow::Context as _;

/// The longest a source file may be, tests left out.
pub(crate) const MAX_LINES: usize = 800;

/// Source files allowed past [`MAX_LINES`], each with the reason.
pub(crate) const LONG_FILES: &[(&str, &str)] = &[
    (
        "crates/models/src/registry.rs",
        "the model table: one list of rows that readers compare side by side, plus its lookups",
    ),
    (
        "crates/perception/src/perception_loop.rs",
        "the step pipeline; the security issue's one action pipeline moves the action path out",
    ),
    (
        "crates/cli/src/direct.rs",
        "`lumen browser`: one function per command of the direct-control CLI",
    ),
    (
        "crates/eval/src/bench/agent.rs",
        "one benchmark: its timed tab, timed model, configurations and report",
    ),
];

/// A thing defined once: text only its definition writes, and the file
/// that may hold it.
#[derive(Debug)]
pub(crate) struct Single {
    pub(crate) what: &'static str,
    pub(crate) needles: &'static [&'static str],
    pub(crate) home: &'static str,
}

/// The things defined once, and where.
pub(crate) const SINGLE: &[Single] = &[
    Single {
        what: "an atomic file writer (use lumen_trace::write_atomic)",
        needles: &["fs::rename("],
        home: "crates/trace/src/atomic.rs",
    },
    Single {
        what: "a Chromium locator (use lumen_browser::chromium::locate)",
        needles: &["\"CHROME_PATH\"", "\"/usr/bin/chromium\""],
        home: "crates/browser/src/chromium/locate.rs",
    },
    Single {
        what: "a price table (use lumen_models::registry::cost)",
        needles: &["Price {"],
        home: "crates/models/src/registry.rs",
    },
    Single {
        what: "civil-date arithmetic (use lumen_core::Date)",
        needles: &["719_468", "719468"],
        home: "crates/core/src/date.rs",
    },
    Single {
        what: "a run-folder file name (use the constants of lumen_trace::layout)",
        needles: &[
            "\"events.jsonl\"",
            "\"report.html\"",
            "\"run.gif\"",
            "\"options.json\"",
        ],
        home: "crates/trace/src/layout.rs",
    },
];

/// Where this module lives, exempt from [`SINGLE`].
const SELF_DIR: &str = "xtask/src/tidy/";

/// Checks every `.rs` file under `crates/` and `xtask/` of `root`.
pub(crate) fn run(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    for top in ["crates", "xtask"] {
        collect(root, &root.join(top), &mut files)?;
    }
    files.sort();
    Ok(check(&files, LONG_FILES, SINGLE))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("could not list {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                collect(root, &path, out)?;
            }
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("could not read {}", path.display()))?;
            let shown = path.strip_prefix(root).unwrap_or(&path);
            let shown = shown.to_string_lossy().replace('\\', "/");
            out.push((shown, text));
        }
    }
    Ok(())
}

/// Whether a whole file is test code.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.contains("/tests/") || name == "tests.rs" || name.ends_with("_tests.rs")
}

/// The lines of `text` before its first `#[cfg(test)]` line.
fn non_test_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .take_while(|line| line.trim_start() != "#[cfg(test)]")
}

/// The pure check over `(path relative to the root, contents)` pairs.
pub(crate) fn check(
    files: &[(String, String)],
    long_files: &[(&str, &str)],
    single: &[Single],
) -> Vec<String> {
    let mut violations = Vec::new();
    for (path, text) in files {
        if is_test_file(path) {
            continue;
        }
        let lines = non_test_lines(text).count();
        let listed = long_files.iter().any(|(p, _)| p == path);
        if lines > MAX_LINES && !listed {
            violations.push(format!(
                "{path} has {lines} lines outside its tests (at most {MAX_LINES}): split it by \
                 concern, or list it in LONG_FILES (xtask/src/tidy/sources.rs) with the reason"
            ));
        }
        if path.starts_with(SELF_DIR) {
            continue;
        }
        for thing in single.iter().filter(|s| s.home != path) {
            let found = non_test_lines(text)
                .enumerate()
                .filter(|(_, line)| !line.trim_start().starts_with("//"))
                .find_map(|(n, line)| {
                    let needle = thing.needles.iter().find(|needle| line.contains(*needle))?;
                    Some((n + 1, needle))
                });
            if let Some((line, needle)) = found {
                violations.push(format!(
                    "{path}:{line}: `{needle}` is a second definition of {}; the one lives in {}",
                    thing.what, thing.home
                ));
            }
        }
    }
    for (path, reason) in long_files {
        let file = files.iter().find(|(p, _)| p == path);
        let still_long = file.is_some_and(|(_, text)| non_test_lines(text).count() > MAX_LINES);
        if !still_long {
            violations.push(format!(
                "LONG_FILES lists {path} ({reason}), which is no longer over {MAX_LINES} lines: \
                 remove the entry"
            ));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> (String, String) {
        (path.to_owned(), text.to_owned())
    }

    fn lines(n: usize) -> String {
        "let x = 1;\n".repeat(n)
    }

    const WRITER: &[Single] = &[Single {
        what: "an atomic file writer",
        needles: &["fs::rename("],
        home: "crates/trace/src/atomic.rs",
    }];

    #[test]
    fn a_long_file_fails_unless_listed_and_tests_do_not_count() {
        let long = file("crates/a/src/big.rs", &lines(MAX_LINES + 1));
        let v = check(std::slice::from_ref(&long), &[], &[]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].starts_with("crates/a/src/big.rs has 801 lines"),
            "{v:?}"
        );
        assert!(check(&[long], &[("crates/a/src/big.rs", "a table")], &[]).is_empty());

        let with_tests = format!(
            "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
            lines(700),
            lines(500)
        );
        assert!(check(&[file("crates/a/src/ok.rs", &with_tests)], &[], &[]).is_empty());
        for path in [
            "crates/a/tests/suite/x.rs",
            "crates/a/src/x_tests.rs",
            "crates/a/src/tests.rs",
        ] {
            assert!(
                check(&[file(path, &lines(900))], &[], &[]).is_empty(),
                "{path}"
            );
        }
    }

    #[test]
    fn a_stale_long_file_entry_fails() {
        let short = file("crates/a/src/big.rs", &lines(10));
        let v = check(&[short], &[("crates/a/src/big.rs", "a table")], &[]);
        assert_eq!(v.len(), 1, "{v:?}");
        let v = check(&[], &[("crates/gone.rs", "a table")], &[]);
        assert_eq!(v.len(), 1, "{v:?}");
    }

    #[test]
    fn a_second_definition_fails_with_its_line_but_not_at_home_in_comments_or_tests() {
        let twin = file(
            "crates/cli/src/save.rs",
            "fn save() {\n    std::fs::rename(a, b)\n}\n",
        );
        let v = check(&[twin], &[], WRITER);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].starts_with("crates/cli/src/save.rs:2: `fs::rename(`"),
            "{v:?}"
        );
        assert!(v[0].contains("crates/trace/src/atomic.rs"), "{v:?}");

        let home = file("crates/trace/src/atomic.rs", "fs::rename(&tmp, path)?;\n");
        let comment = file("crates/a/src/doc.rs", "    // then fs::rename(tmp, path)\n");
        let test = file(
            "crates/a/src/b.rs",
            "fn f() {}\n#[cfg(test)]\nmod tests { fn t() { std::fs::rename(a, b); } }\n",
        );
        let own = file(
            "xtask/src/tidy/sources.rs",
            "needles: &[\"fs::rename(\"],\n",
        );
        assert!(check(&[home, comment, test, own], &[], WRITER).is_empty());
    }

    #[test]
    fn every_single_thing_has_a_home_file_that_exists() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for thing in SINGLE {
            assert!(
                root.join(thing.home).is_file(),
                "{}: {}",
                thing.what,
                thing.home
            );
        }
    }
}

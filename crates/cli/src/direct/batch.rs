//! `lumen browser batch`: one direct command per line of stdin, run in
//! order in one process (no process start per command). Lines are split
//! as a shell would split simple words: spaces separate, `'…'` and `"…"`
//! quote, `\` escapes the next character; blank lines and `#` comments are
//! skipped. The batch's `--session`, `--json`, `--headed` and `--dialog`
//! apply to every line; the first command that fails stops the batch.

use std::io::BufRead as _;

use clap::Parser as _;

use super::BrowserArgs;
use crate::exit::CliError;

/// A line of `batch` as parsed by clap.
#[derive(Debug, clap::Parser)]
#[command(name = "lumen browser", no_binary_name = true)]
struct Line {
    #[command(flatten)]
    args: BrowserArgs,
}

/// Splits a line into words; `Err` says what is wrong with its quoting.
pub(super) fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    out.push(w);
                }
            }
            '\'' | '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some('\\') if c == '"' => match chars.next() {
                            Some(e) => w.push(e),
                            None => return Err("a line ends inside quotes".into()),
                        },
                        Some(other) => w.push(other),
                        None => return Err(format!("a {c} quote is not closed")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(e) => word.get_or_insert_with(String::new).push(e),
                None => return Err("a line ends with a lone \\".into()),
            },
            '#' if word.is_none() => break,
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    if let Some(w) = word {
        out.push(w);
    }
    Ok(out)
}

/// Runs the lines of stdin; returns the exit code of the batch (that of
/// the first failure, naming its line).
pub(super) async fn run(outer: &BrowserArgs) -> Result<u8, CliError> {
    let stdin = std::io::stdin();
    for (index, line) in stdin.lock().lines().enumerate() {
        let number = index + 1;
        let line =
            line.map_err(|e| CliError::failure(format!("cannot read stdin (line {number}): {e}")))?;
        let mut argv = words(&line)
            .map_err(|why| CliError::config(format!("line {number}: {why}: {line}")))?;
        if argv.is_empty() {
            continue;
        }
        argv.splice(0..0, outer.global_flags());
        let parsed = match Line::try_parse_from(&argv) {
            Ok(l) => l.args,
            Err(e) => {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().to_owned();
                return Err(CliError::config(format!(
                    "line {number}: {}: {line}",
                    first.trim_start_matches("error: ")
                )));
            }
        };
        if matches!(parsed.command, super::BrowserCommand::Batch) {
            return Err(CliError::config(format!(
                "line {number}: a batch cannot run another batch"
            )));
        }
        if let Err(mut e) = Box::pin(super::run_command(parsed)).await {
            e.message = format!("line {number} ({line}): {}", e.message);
            return Err(e);
        }
    }
    Ok(crate::exit::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn lines_split_as_shell_words() {
        assert_eq!(
            words(r#"fill @e3 "Ada \"the\" Countess"  'it''s'"#).unwrap(),
            ["fill", "@e3", "Ada \"the\" Countess", "its"]
        );
        assert_eq!(words("click a\\ b # a comment").unwrap(), ["click", "a b"]);
        assert_eq!(words("  # only a comment").unwrap(), Vec::<String>::new());
        assert_eq!(words("eval 'a#b'").unwrap(), ["eval", "a#b"]);
        assert!(words("fill @e1 \"open").is_err());
        assert!(words("press \\").is_err());
    }
}

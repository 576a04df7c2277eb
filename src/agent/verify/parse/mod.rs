//! Reading test output: which runner printed it, then that runner's parser.
//! Each parser is line-based and forgiving: a line it does not know is
//! skipped, so a runner's new version degrades to fewer details, not to
//! nothing.

use std::path::Path;

use super::frames::Resolver;
use super::report::{Builder, TestReport};

mod cargo;
mod go;
mod jest;
mod node;
mod pytest;

/// Declares a struct of regexes compiled once. A pattern that does not
/// compile (caught by each module's test) makes `get` return `None`, and
/// that parser is skipped rather than the process panicking.
macro_rules! patterns {
    ($name:ident { $($field:ident = $re:expr),* $(,)? }) => {
        struct $name { $($field: regex::Regex),* }
        impl $name {
            fn get() -> Option<&'static $name> {
                static CELL: std::sync::LazyLock<Option<$name>> = std::sync::LazyLock::new(|| {
                    let build = || -> Result<$name, regex::Error> {
                        Ok($name { $($field: regex::Regex::new($re)?),* })
                    };
                    build()
                        .map_err(|e| tracing::error!("bad test-output pattern: {e}"))
                        .ok()
                });
                CELL.as_ref()
            }
        }
    };
}
pub(super) use patterns;

patterns!(Generic {
    // `path:line` or `path:line:col`; the path has an extension.
    location = r#"(?:^|[\s('"\[<@])((?:file://)?[\w./~+@-]*[\w-]\.[A-Za-z0-9]+):(\d+)(?::(\d+))?"#,
    // Python tracebacks.
    python_file = r#"File "([^"]+)", line (\d+)"#,
    // The plain closing line any runner may print.
    plain_counts = r"(?:^|\w+: )(\d+) passed, (\d+) failed",
    error_line = r"(?i)(?:^|\s|:)(?:error|fatal|panic(?:ked)?|assertion\w*|\w+(?:error|exception))(?:[:\[ ]|$)",
});

/// Parses a test run's output. Frames are kept only for files inside
/// `root` (absolute paths are made relative to it).
pub fn parse_test_output(output: &str, root: &Path) -> TestReport {
    let resolver = Resolver::new(root);
    let runner = detect_runner(output);
    let mut builder = Builder::new(runner, resolver);
    let parsed = match runner {
        Some("cargo") => cargo::parse(output, &mut builder),
        Some("go") => go::parse(output, &mut builder, root),
        Some("pytest") => pytest::parse(output, &mut builder),
        Some("jest") | Some("vitest") => jest::parse(output, &mut builder),
        Some("node") => node::parse(output, &mut builder),
        _ => generic(output, &mut builder),
    };
    if parsed.is_none() {
        // Only when a pattern failed to compile: fall back to the generic
        // scan instead of returning nothing.
        generic(output, &mut builder);
    }
    builder.finish()
}

/// Recognises the runner from lines only it prints. Order matters where a
/// tool's output embeds another's (cargo's error blocks mention paths like
/// anything else), so the most distinctive markers are checked first.
fn detect_runner(output: &str) -> Option<&'static str> {
    let lines = || output.lines();
    let any = |f: &dyn Fn(&str) -> bool| lines().any(f);
    if any(&|l| {
        l.starts_with("test result: ")
            || l.starts_with("error: could not compile `")
            || (l.starts_with("---- ") && l.ends_with(" stdout ----"))
    }) {
        return Some("cargo");
    }
    if any(&|l| {
        l.trim_start().starts_with("--- FAIL: ")
            || l.starts_with("FAIL\t")
            || l.starts_with("ok  \t")
            || l.trim_start().starts_with("--- PASS: ")
    }) {
        return Some("go");
    }
    if any(&|l| {
        l.contains("short test summary info")
            || (l.starts_with("==") && l.contains(" in ") && l.trim_end().ends_with("=="))
            || l.starts_with("collected ")
            || (l.contains("ERROR collecting ") && l.starts_with('_'))
    }) || pytest::final_line(output).is_some()
    {
        return Some("pytest");
    }
    if any(&|l| l.starts_with(" Test Files  ") || l.trim_start().starts_with("RUN  v")) {
        return Some("vitest");
    }
    if any(&|l| l.starts_with("Tests:") || l.starts_with("Test Suites:")) {
        return Some("jest");
    }
    if any(&|l| {
        l.starts_with("TAP version")
            || l.starts_with("# pass ")
            || l.starts_with("# fail ")
            || l.starts_with("ℹ pass ")
            || l.starts_with("ℹ fail ")
    }) {
        return Some("node");
    }
    None
}

/// For output from no known runner: `path:line` mentions of workspace
/// files, error-looking lines, and the plain `N passed, N failed` line.
fn generic(output: &str, b: &mut Builder) -> Option<()> {
    let re = Generic::get()?;
    for line in output.lines() {
        frames_in_line(line, b);
        if let Some(c) = re.plain_counts.captures(line) {
            b.add_passed(c[1].parse().unwrap_or(0));
            b.add_failed(c[2].parse().unwrap_or(0));
        }
        if re.error_line.is_match(line) {
            b.message(line);
        }
    }
    Some(())
}

/// Adds every `path:line[:col]` and `File "…", line N` in `line` as a
/// frame (the builder keeps workspace files only).
pub(super) fn frames_in_line(line: &str, b: &mut Builder) {
    frames_in_line_under(None, line, b);
}

pub(super) fn frames_in_line_under(dir: Option<&str>, line: &str, b: &mut Builder) {
    let Some(re) = Generic::get() else {
        return;
    };
    for c in re.python_file.captures_iter(line) {
        if let Ok(n) = c[2].parse() {
            b.frame_in(dir, &c[1], n, None);
        }
    }
    for c in re.location.captures_iter(line) {
        let Ok(n) = c[2].parse() else {
            continue;
        };
        let col = c.get(3).and_then(|m| m.as_str().parse().ok());
        b.frame_in(dir, &c[1], n, col);
    }
}

/// Removes the indentation common to the non-blank lines, and trailing
/// spaces.
pub(super) fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses `"12"` out of a capture, 0 when it overflows (counts do not).
pub(super) fn num(s: &str) -> u32 {
    s.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        assert!(Generic::get().is_some());
    }

    #[test]
    fn plain_closing_line() {
        let dir = std::env::temp_dir();
        let r = parse_test_output("checks: 3 passed, 1 failed\n", &dir);
        assert_eq!((r.runner, r.passed, r.failed), (None, Some(3), Some(1)));
    }
}

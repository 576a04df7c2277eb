//! Checker output → raw diagnostics: positions as the tool printed them
//! (1-based, in the tool's column unit), paths as printed. `locate` turns
//! them into workspace files and byte columns.

mod gcc;
mod go;
mod python;
mod ruff;
mod rustc;
mod tsc;

use crate::config::CheckFormat;

use super::Severity;

/// What a tool's columns count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// UTF-8 bytes (Go, pyflakes: Python's `col_offset`).
    Bytes,
    /// UTF-16 code units (tsc, Node).
    Utf16,
    /// Unicode scalar values (rustc, ruff, gcc's default).
    Chars,
    /// Characters after the line's indentation (Python tracebacks print
    /// the line stripped).
    CharsAfterIndent,
}

/// A 1-based position; `column: None` when the tool gave only a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawPoint {
    pub line: u32,
    pub column: Option<u32>,
}

impl RawPoint {
    pub fn new(line: u32, column: u32) -> Self {
        Self {
            line,
            column: Some(column),
        }
    }
}

/// One place in a file as printed; `end` is exclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawLocation {
    pub path: String,
    pub start: RawPoint,
    pub end: Option<RawPoint>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRelated {
    pub location: RawLocation,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawDiagnostic {
    /// Where it is, best first: rustc adds the macro call sites of a span
    /// inside a macro, so one of them can be in the workspace.
    pub locations: Vec<RawLocation>,
    pub severity: Severity,
    pub code: Option<String>,
    pub message: String,
    pub related: Vec<RawRelated>,
}

/// What one run's output says.
#[derive(Debug, Default)]
pub struct Parsed {
    pub diagnostics: Vec<RawDiagnostic>,
    /// Errors the tool reported without a place (a bad `tsconfig.json`).
    pub general: Vec<String>,
}

/// The column unit of `format`'s positions.
pub fn unit(format: CheckFormat) -> Unit {
    match format {
        CheckFormat::Tsc | CheckFormat::Node => Unit::Utf16,
        CheckFormat::Go | CheckFormat::Pyflakes => Unit::Bytes,
        CheckFormat::PyCompile => Unit::CharsAfterIndent,
        CheckFormat::Auto | CheckFormat::Rustc | CheckFormat::Ruff | CheckFormat::Gcc => {
            Unit::Chars
        }
    }
}

/// Parses `output` (stdout and stderr together) in `format`; `Auto` must
/// have been resolved by the caller and parses as `gcc`.
pub fn parse(format: CheckFormat, output: &str) -> Parsed {
    match format {
        CheckFormat::Rustc => rustc::parse(output),
        CheckFormat::Ruff => ruff::parse(output),
        CheckFormat::Pyflakes => python::parse_pyflakes(output),
        CheckFormat::PyCompile => python::parse_traceback(output),
        CheckFormat::Tsc => tsc::parse_tsc(output),
        CheckFormat::Node => tsc::parse_node(output),
        CheckFormat::Go => go::parse(output),
        CheckFormat::Auto | CheckFormat::Gcc => gcc::parse(output),
    }
}

impl RawDiagnostic {
    /// A diagnostic at one place, with nothing related.
    fn at(
        location: RawLocation,
        severity: Severity,
        code: Option<String>,
        message: String,
    ) -> Self {
        Self {
            locations: vec![location],
            severity,
            code,
            message,
            related: Vec::new(),
        }
    }
}

/// The place a match's `path`, `line` and optional `col` groups name.
fn place(caps: &regex::Captures<'_>) -> Option<RawLocation> {
    Some(RawLocation {
        path: caps.name("path")?.as_str().to_owned(),
        start: RawPoint {
            line: num(caps, "line")?,
            column: num(caps, "col"),
        },
        end: None,
    })
}

/// A number field of a regex match (the patterns only match digits).
fn num(caps: &regex::Captures<'_>, name: &str) -> Option<u32> {
    caps.name(name)?.as_str().parse().ok()
}

/// A compiled pattern from a literal that the tests exercise.
fn pattern(re: &str) -> regex::Regex {
    // The patterns are literals covered by the golden tests; an invalid one
    // is a programming error caught there, not a runtime condition.
    #[allow(clippy::expect_used)]
    regex::Regex::new(re).expect("valid checker pattern")
}

//! Checkers: the project's compiler, type checker or linter, run like the
//! tests (process group, timeout, limits, scrubbed environment, sandbox)
//! and read into diagnostics. Knows nothing about LSP: positions are
//! [`TextPoint`]s (line and column in every encoding), which `lsp/`
//! serves in the session's encoding and `fettle check` prints.
//!
//! [`detect`] picks a checker per language from the project's files and
//! `[check]`; [`run_checkers`] runs them and [`parse`](parse::parse)s the
//! output of each tool (`parse/`); `locate` maps printed places to
//! workspace files and columns; [`CheckReport`] renders the result for the
//! model, the terminal and JSON.

mod detect;
mod locate;
mod parse;
mod render;
mod run;

use std::path::PathBuf;

use serde::Serialize;

pub use detect::{detect, on_path, Checker, Detected, Missing};
pub use parse::Unit;
pub use run::{run_checkers, CheckReport, CheckRun, RunSettings};

use crate::position::TextPoint;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
    Hint,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
            Severity::Hint => "hint",
        }
    }
}

/// A range in a file; `end` is exclusive. Lines and columns are 0-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub start: TextPoint,
    pub end: TextPoint,
}

/// Another place a diagnostic points at ("borrowed here").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Related {
    pub path: PathBuf,
    pub span: Span,
    pub message: String,
}

/// One finding of a checker, in a workspace file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckDiagnostic {
    /// Absolute, inside the workspace root.
    pub path: PathBuf,
    pub span: Span,
    pub severity: Severity,
    /// The checker that reported it: `rustc`, `clippy`, `ruff`, `tsc`…
    pub source: String,
    pub code: Option<String>,
    pub message: String,
    pub related: Vec<Related>,
}

/// Parses `output` of a tool in `format` into diagnostics in `root`
/// (relative paths are taken from `root`); for the golden tests and the
/// benchmark, which have output without running anything.
pub fn parse_output(
    format: crate::config::CheckFormat,
    output: &str,
    root: &std::path::Path,
    source: &str,
) -> (Vec<CheckDiagnostic>, Vec<String>) {
    let parsed = parse::parse(format, output);
    let located = locate::locate(parsed.diagnostics, parse::unit(format), root, source);
    (located.diagnostics, parsed.general)
}

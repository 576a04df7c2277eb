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

pub use detect::{detect, language_key, on_path, Checker, Detected, Missing};
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

/// How checkers run outside an agent task (`fettle check`, on save): with
/// the agent's limits, environment rules and sandbox, and `check.timeout_s`.
pub struct Environment {
    pub sandbox: crate::agent::sandbox::SandboxPolicy,
    pub limits: crate::agent::exec::Limits,
    pub allow_env: Vec<String>,
    pub timeout: std::time::Duration,
    /// The sandbox is weaker than asked (once per process).
    pub notice: Option<String>,
}

impl Environment {
    /// The error is the message to show: the sandbox asked for cannot be had.
    pub fn from_config(
        config: &crate::config::Config,
        root: &std::path::Path,
    ) -> Result<Self, String> {
        let sandbox = crate::agent::sandbox::from_config(&config.agent, root, None)?;
        Ok(Self {
            sandbox: sandbox.policy,
            limits: crate::agent::exec::Limits::for_agent(&config.agent),
            allow_env: config.agent.allow_env.clone(),
            timeout: std::time::Duration::from_secs(config.check.timeout_s),
            notice: sandbox.notice,
        })
    }

    pub fn settings<'a>(&'a self, root: &'a std::path::Path) -> RunSettings<'a> {
        RunSettings {
            root,
            timeout: self.timeout,
            allow_env: &self.allow_env,
            limits: self.limits,
            sandbox: Some(&self.sandbox),
        }
    }
}

/// The project a file belongs to: the nearest folder above it with a
/// project file (`Cargo.toml`, `go.mod`, `package.json`, `tsconfig.json`,
/// `pyproject.toml`, `setup.py`, `.git`), else its own folder.
pub fn project_root_of(file: &std::path::Path) -> PathBuf {
    const MARKERS: &[&str] = &[
        "Cargo.toml",
        "go.mod",
        "package.json",
        "tsconfig.json",
        "pyproject.toml",
        "setup.py",
        ".git",
    ];
    let start = file.parent().unwrap_or(file);
    start
        .ancestors()
        .find(|dir| MARKERS.iter().any(|m| dir.join(m).exists()))
        .unwrap_or(start)
        .to_path_buf()
}

//! A check's result as text: for the model (grouped by file, errors
//! first, with the code line, capped), for a terminal (one
//! `path:line:col: severity[code]: message` line each) and as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use super::{CheckDiagnostic, CheckReport, Severity};

/// Longest code line quoted to the model.
const MAX_CODE_LINE: usize = 200;

fn relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// `path:line:col`, 1-based, the column in characters.
fn place(path: &Path, span: &super::Span, root: &Path) -> String {
    format!(
        "{}:{}:{}",
        relative(path, root),
        span.start.line + 1,
        span.start.utf32 + 1
    )
}

fn label(d: &CheckDiagnostic) -> String {
    match &d.code {
        Some(code) => format!("{}[{code}]", d.severity.as_str()),
        None => d.severity.as_str().to_owned(),
    }
}

impl CheckReport {
    /// What the model reads: per checker a headline, then at most `max`
    /// diagnostics (errors first), grouped by file, each with its code
    /// line; `only` keeps one file's, `errors_only` the errors. `read`
    /// gives a file's text.
    pub fn for_model(
        &self,
        root: &Path,
        only: Option<&Path>,
        max: usize,
        errors_only: bool,
        read: &(dyn Fn(&Path) -> Option<String> + Sync),
    ) -> String {
        let mut out = String::new();
        for run in &self.runs {
            let errors = run.errors();
            let warnings = run
                .diagnostics
                .iter()
                .filter(|d| d.severity == Severity::Warning)
                .count();
            let _ = writeln!(
                out,
                "Checker {} (`{}`): {errors} error(s), {warnings} warning(s)",
                run.checker.name,
                shorten(&run.command, 160)
            );
            if let Some(failure) = &run.failure {
                let _ = writeln!(out, "  the checker failed: {failure}");
            }
            for general in &run.general {
                let _ = writeln!(out, "  error: {general}");
            }
        }
        let mut chosen: Vec<&CheckDiagnostic> = self
            .diagnostics()
            .filter(|d| only.is_none_or(|p| d.path == p))
            .filter(|d| !errors_only || d.severity == Severity::Error)
            // A file that holds secrets is never quoted to a model.
            .filter(|d| !crate::agent::redact::is_secret_path(&d.path))
            .collect();
        chosen.sort_by_key(|d| (d.severity, d.path.clone(), d.span.start));
        let total = chosen.len();
        chosen.truncate(max);
        let mut by_file: BTreeMap<&Path, Vec<&CheckDiagnostic>> = BTreeMap::new();
        for d in chosen {
            by_file.entry(&d.path).or_default().push(d);
        }
        for (path, list) in by_file {
            let text = read(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let _ = writeln!(out, "{}:", relative(path, root));
            for d in list {
                let line = d.span.start.line as usize;
                let _ = writeln!(
                    out,
                    "  {}:{}: {}: {}",
                    line + 1,
                    d.span.start.utf32 + 1,
                    label(d),
                    d.message.replace('\n', "\n    ")
                );
                if let Some(code) = lines.get(line) {
                    let _ = writeln!(out, "    | {}", shorten(code.trim_end(), MAX_CODE_LINE));
                }
                for r in d.related.iter().take(4) {
                    let _ = writeln!(out, "    {}: {}", place(&r.path, &r.span, root), r.message);
                }
            }
        }
        if total > max {
            let _ = writeln!(
                out,
                "[{} more diagnostic(s) not shown; ask for one file with `path`]",
                total - max
            );
        }
        out
    }

    /// One line per diagnostic for a terminal, columns counting characters
    /// (1-based), continuation lines indented; then failures.
    pub fn human(&self, root: &Path) -> String {
        let mut out = String::new();
        for d in self.sorted() {
            let _ = writeln!(
                out,
                "{}: {}: {}",
                place(&d.path, &d.span, root),
                label(d),
                d.message.replace('\n', "\n    ")
            );
            for r in &d.related {
                let _ = writeln!(out, "    {}: {}", place(&r.path, &r.span, root), r.message);
            }
        }
        for run in &self.runs {
            for general in &run.general {
                let _ = writeln!(out, "{}: error: {general}", run.checker.name);
            }
            if let Some(failure) = &run.failure {
                let _ = writeln!(out, "{}: the checker failed: {failure}", run.checker.name);
            }
        }
        out
    }

    /// Every diagnostic as `{path, range, severity, source, code, message,
    /// related}`; the range is 0-based with UTF-16 columns (LSP's
    /// default) and `path` relative to the root.
    pub fn json(&self, root: &Path) -> Value {
        let range = |s: &super::Span| {
            json!({
                "start": { "line": s.start.line, "character": s.start.utf16 },
                "end": { "line": s.end.line, "character": s.end.utf16 },
            })
        };
        let items: Vec<Value> = self
            .sorted()
            .into_iter()
            .map(|d| {
                json!({
                    "path": relative(&d.path, root),
                    "range": range(&d.span),
                    "severity": d.severity.as_str(),
                    "source": d.source,
                    "code": d.code,
                    "message": d.message,
                    "related": d.related.iter().map(|r| json!({
                        "path": relative(&r.path, root),
                        "range": range(&r.span),
                        "message": r.message,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        Value::Array(items)
    }

    fn sorted(&self) -> Vec<&CheckDiagnostic> {
        let mut all: Vec<&CheckDiagnostic> = self.diagnostics().collect();
        all.sort_by(|a, b| (&a.path, a.span.start).cmp(&(&b.path, b.span.start)));
        all
    }
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

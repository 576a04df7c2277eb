//! Python: pyflakes' `path:line:col: message` lines (a syntax error is
//! followed by the source line and a caret), and the traceback of
//! `python3 -m py_compile` (`File "x.py", line N`, the stripped source
//! line, a caret, `SyntaxError: message`).

use std::sync::LazyLock;

use super::{num, pattern, place, Parsed, RawDiagnostic, RawLocation, RawPoint};
use crate::agent::checkers::Severity;

static PYFLAKES: LazyLock<regex::Regex> = LazyLock::new(|| {
    pattern(r"^(?P<path>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<msg>.+)$")
});
static FILE_LINE: LazyLock<regex::Regex> =
    LazyLock::new(|| pattern(r#"^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)"#));
static EXCEPTION: LazyLock<regex::Regex> = LazyLock::new(|| {
    pattern(
        r"^(?:Sorry: )?(?P<kind>[A-Za-z_][A-Za-z0-9_.]*(?:Error|Warning|Exception)): ?(?P<msg>.*)$",
    )
});

/// Pyflakes messages for code that fails when it runs (or compiles); the
/// rest (unused imports, unused variables, shadowing) are warnings.
const ERROR_MESSAGES: &[&str] = &[
    "undefined name",
    "referenced before assignment",
    "duplicate argument",
    "outside function",
    "outside loop",
    "not properly in loop",
    "must be last",
    "starred",
    "syntax error",
];

fn is_caret_line(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| c == '^' || c == '~') && t.contains('^')
}

pub fn parse_pyflakes(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let lines: Vec<&str> = output.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(caps) = PYFLAKES.captures(line) else {
            continue;
        };
        let Some(at) = place(&caps) else {
            continue;
        };
        let message = caps.name("msg").map_or("", |m| m.as_str()).to_owned();
        let syntax = lines.get(i + 2).is_some_and(|l| is_caret_line(l));
        let severity = if syntax || ERROR_MESSAGES.iter().any(|m| message.contains(m)) {
            Severity::Error
        } else {
            Severity::Warning
        };
        parsed
            .diagnostics
            .push(RawDiagnostic::at(at, severity, None, message));
    }
    parsed
}

pub fn parse_traceback(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut place: Option<RawLocation> = None;
    let mut source_line: Option<&str> = None;
    for line in output.lines() {
        if let Some(caps) = FILE_LINE.captures(line) {
            if let (Some(path), Some(row)) = (caps.name("path"), num(&caps, "line")) {
                place = Some(RawLocation {
                    path: path.as_str().to_owned(),
                    start: RawPoint {
                        line: row,
                        column: None,
                    },
                    end: None,
                });
                source_line = None;
            }
            continue;
        }
        let Some(at) = place.as_mut() else { continue };
        if is_caret_line(line) {
            // The source line is printed stripped and indented like the
            // caret line; the caret's offset from that indentation counts
            // characters after the file's own indentation.
            let indent = source_line.map_or(0, |s| s.len() - s.trim_start().len());
            let caret = line.find('^').unwrap_or(0);
            let column = line[..caret].chars().count().saturating_sub(indent) as u32 + 1;
            at.start.column = Some(column);
            continue;
        }
        if let Some(caps) = EXCEPTION.captures(line) {
            let kind = caps.name("kind").map_or("", |m| m.as_str());
            let message = caps.name("msg").map_or("", |m| m.as_str());
            if let Some(location) = place.take() {
                parsed.diagnostics.push(RawDiagnostic {
                    locations: vec![location],
                    severity: if kind.ends_with("Warning") {
                        Severity::Warning
                    } else {
                        Severity::Error
                    },
                    code: Some(kind.to_owned()),
                    message: message.to_owned(),
                    related: Vec::new(),
                });
            }
            continue;
        }
        if source_line.is_none() && !line.trim().is_empty() {
            source_line = Some(line);
        }
    }
    parsed
}

//! `ruff check --output-format=json`: one JSON array. Columns count
//! characters (1-based; `end_location` exclusive). Ruff calls every
//! violation an error; Fettle counts as errors only what breaks the
//! program (syntax errors, undefined names, misplaced statements) and
//! reports the rest as warnings, so "no checker errors" does not mean
//! "no style findings".

use serde::Deserialize;

use super::{Parsed, RawDiagnostic, RawLocation, RawPoint};
use crate::agent::checkers::Severity;

#[derive(Deserialize)]
struct Violation {
    code: Option<String>,
    message: String,
    filename: String,
    location: Location,
    end_location: Option<Location>,
}

#[derive(Deserialize)]
struct Location {
    row: u32,
    column: u32,
}

/// Rule prefixes whose findings break the program: syntax (`E9`),
/// comparisons and statements that fail at run time (`F63`, `F7`), and
/// undefined names (`F82`).
const ERROR_PREFIXES: &[&str] = &["E9", "F63", "F7", "F82"];

pub fn severity(code: Option<&str>) -> Severity {
    match code {
        None | Some("invalid-syntax") | Some("syntax-error") => Severity::Error,
        Some(code) if ERROR_PREFIXES.iter().any(|p| code.starts_with(p)) => Severity::Error,
        Some(_) => Severity::Warning,
    }
}

pub fn parse(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    // Ruff may print warnings (on stderr, in the same stream) before the
    // array; the array starts on a line of its own.
    let Some(start) = output
        .match_indices('[')
        .map(|(at, _)| at)
        .find(|&at| at == 0 || output.as_bytes()[at - 1] == b'\n')
    else {
        return parsed;
    };
    let mut stream =
        serde_json::Deserializer::from_str(&output[start..]).into_iter::<Vec<Violation>>();
    let Some(Ok(violations)) = stream.next() else {
        parsed
            .general
            .push("ruff's JSON output could not be read".to_owned());
        return parsed;
    };
    for v in violations {
        let code = v.code.filter(|c| c != "invalid-syntax");
        parsed.diagnostics.push(RawDiagnostic {
            locations: vec![RawLocation {
                path: v.filename,
                start: RawPoint::new(v.location.row, v.location.column),
                end: v.end_location.map(|e| RawPoint::new(e.row, e.column)),
            }],
            severity: severity(code.as_deref()),
            code,
            message: v.message,
            related: Vec::new(),
        });
    }
    parsed
}

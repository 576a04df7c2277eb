//! TypeScript's `tsc --pretty false`: `path(line,col): error TS1234:
//! message`, continuation lines indented (a chained message), columns in
//! UTF-16 code units. Node's `--check`: `path:line`, the source line, a
//! caret under the error (UTF-16 units too), a blank line, `SyntaxError:
//! message`.

use std::sync::LazyLock;

use super::{num, pattern, Parsed, RawDiagnostic, RawLocation, RawPoint};
use crate::agent::checkers::Severity;

static TSC: LazyLock<regex::Regex> = LazyLock::new(|| {
    pattern(
        r"^(?P<path>.+?)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning|message|suggestion) (?P<code>TS\d+): (?P<msg>.*)$",
    )
});
static TSC_GENERAL: LazyLock<regex::Regex> =
    LazyLock::new(|| pattern(r"^(?:error|warning) (?P<code>TS\d+): (?P<msg>.*)$"));
static NODE_PLACE: LazyLock<regex::Regex> =
    LazyLock::new(|| pattern(r"^(?P<path>/.+|[^\s:].*?):(?P<line>\d+)$"));
static NODE_ERROR: LazyLock<regex::Regex> =
    LazyLock::new(|| pattern(r"^(?P<kind>[A-Za-z]*Error): (?P<msg>.*)$"));

pub fn parse_tsc(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("  ") {
            if let Some(last) = parsed.diagnostics.last_mut() {
                last.message.push('\n');
                last.message.push_str(rest);
            }
            continue;
        }
        if let Some(caps) = TSC.captures(line) {
            let (Some(path), Some(row), Some(col)) =
                (caps.name("path"), num(&caps, "line"), num(&caps, "col"))
            else {
                continue;
            };
            parsed.diagnostics.push(RawDiagnostic {
                locations: vec![RawLocation {
                    path: path.as_str().to_owned(),
                    start: RawPoint::new(row, col),
                    end: None,
                }],
                severity: match caps.name("sev").map(|s| s.as_str()) {
                    Some("warning") => Severity::Warning,
                    Some("message") => Severity::Info,
                    Some("suggestion") => Severity::Hint,
                    _ => Severity::Error,
                },
                code: caps.name("code").map(|c| c.as_str().to_owned()),
                message: caps.name("msg").map_or("", |m| m.as_str()).to_owned(),
                related: Vec::new(),
            });
        } else if let Some(caps) = TSC_GENERAL.captures(line) {
            parsed.general.push(format!(
                "{}: {}",
                caps.name("code").map_or("", |m| m.as_str()),
                caps.name("msg").map_or("", |m| m.as_str())
            ));
        }
    }
    parsed
}

pub fn parse_node(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let lines: Vec<&str> = output.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(caps) = NODE_PLACE.captures(lines[i]) else {
            i += 1;
            continue;
        };
        let (Some(path), Some(row)) = (caps.name("path"), num(&caps, "line")) else {
            i += 1;
            continue;
        };
        // The caret line: the first line of only spaces and `^` in the block.
        let mut column = None;
        let mut j = i + 1;
        while j < lines.len() && j <= i + 3 {
            let t = lines[j].trim();
            if !t.is_empty() && t.chars().all(|c| c == '^') {
                let caret = lines[j].find('^').unwrap_or(0);
                column = Some(lines[j][..caret].encode_utf16().count() as u32 + 1);
                break;
            }
            j += 1;
        }
        let Some((k, error)) = lines
            .iter()
            .enumerate()
            .skip(i + 1)
            .take(6)
            .find_map(|(k, l)| NODE_ERROR.captures(l).map(|c| (k, c)))
        else {
            i += 1;
            continue;
        };
        parsed.diagnostics.push(RawDiagnostic {
            locations: vec![RawLocation {
                path: path.as_str().to_owned(),
                start: RawPoint { line: row, column },
                end: None,
            }],
            severity: Severity::Error,
            code: error.name("kind").map(|c| c.as_str().to_owned()),
            message: error.name("msg").map_or("", |m| m.as_str()).to_owned(),
            related: Vec::new(),
        });
        i = k + 1;
    }
    parsed
}

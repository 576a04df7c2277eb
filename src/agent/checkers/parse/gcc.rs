//! The generic `file:line[:col]: severity: message [-Wflag]` format of gcc,
//! clang and many tools; `note:` lines attach to the diagnostic before them.

use std::sync::LazyLock;

use super::{num, pattern, Parsed, RawDiagnostic, RawLocation, RawPoint, RawRelated};
use crate::agent::checkers::Severity;

static LINE: LazyLock<regex::Regex> = LazyLock::new(|| {
    pattern(
        r"^(?P<path>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)? ?(?P<sev>fatal error|error|warning|note|remark|info|hint)?:? (?P<msg>.*?)(?: \[(?P<code>[^\[\]]+)\])?$",
    )
});

pub fn parse(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for line in output.lines() {
        let Some(caps) = LINE.captures(line) else {
            continue;
        };
        let (Some(path), Some(row)) = (caps.name("path"), num(&caps, "line")) else {
            continue;
        };
        let location = RawLocation {
            path: path.as_str().to_owned(),
            start: RawPoint {
                line: row,
                column: num(&caps, "col"),
            },
            end: None,
        };
        let message = caps
            .name("msg")
            .map_or("", |m| m.as_str())
            .trim()
            .to_owned();
        let severity = match caps.name("sev").map(|s| s.as_str()) {
            Some("warning") => Severity::Warning,
            Some("note") | Some("remark") | Some("info") => Severity::Info,
            Some("hint") => Severity::Hint,
            _ => Severity::Error,
        };
        if severity == Severity::Info {
            if let Some(last) = parsed.diagnostics.last_mut() {
                last.related.push(RawRelated { location, message });
                continue;
            }
        }
        parsed.diagnostics.push(RawDiagnostic {
            locations: vec![location],
            severity,
            code: caps.name("code").map(|c| c.as_str().to_owned()),
            message,
            related: Vec::new(),
        });
    }
    parsed
}

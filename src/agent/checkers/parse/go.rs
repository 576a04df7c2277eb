//! Go: `go vet -json` prints, per package, a JSON object of analyzer →
//! findings (`posn` is `path:line:col`, columns in bytes) after a
//! `# package` line; type errors stop vet and come as plain
//! `vet: path:line:col: message` lines, as `go build` prints them (without
//! `vet: `).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Deserialize;

use super::{pattern, place, Parsed, RawDiagnostic};
use crate::agent::checkers::Severity;

static PLAIN: LazyLock<regex::Regex> = LazyLock::new(|| {
    pattern(r"^(?:vet: )?(?P<path>[^\s:][^:]*?\.go):(?P<line>\d+)(?::(?P<col>\d+))?: (?P<msg>.+)$")
});
static POSN: LazyLock<regex::Regex> =
    LazyLock::new(|| pattern(r"^(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))?$"));

#[derive(Deserialize)]
#[serde(untagged)]
enum Finding {
    Diagnostic { posn: String, message: String },
    Error { error: String },
}

type Package = BTreeMap<String, Vec<Finding>>;

pub fn parse(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut lines = output.lines();
    while let Some(line) = lines.next() {
        if line == "{" {
            // One package's object, up to the closing brace at column 0.
            let mut block = String::from("{\n");
            for inner in lines.by_ref() {
                block.push_str(inner);
                block.push('\n');
                if inner == "}" {
                    break;
                }
            }
            match serde_json::from_str::<BTreeMap<String, Package>>(&block) {
                Ok(packages) => findings(&mut parsed, packages),
                Err(err) => parsed
                    .general
                    .push(format!("go vet's JSON output could not be read: {err}")),
            }
            continue;
        }
        let Some(location) = PLAIN.captures(line).and_then(|caps| {
            let message = caps.name("msg").map_or("", |m| m.as_str()).to_owned();
            place(&caps).map(|at| (at, message))
        }) else {
            continue;
        };
        let (at, message) = location;
        parsed
            .diagnostics
            .push(RawDiagnostic::at(at, Severity::Error, None, message));
    }
    parsed
}

/// Analyzer findings are warnings: the code compiles, vet suspects a bug.
fn findings(parsed: &mut Parsed, packages: BTreeMap<String, Package>) {
    for (package, analyzers) in packages {
        for (analyzer, list) in analyzers {
            for finding in list {
                match finding {
                    Finding::Diagnostic { posn, message } => {
                        let Some(at) = POSN.captures(&posn).and_then(|caps| place(&caps)) else {
                            continue;
                        };
                        parsed.diagnostics.push(RawDiagnostic::at(
                            at,
                            Severity::Warning,
                            Some(analyzer.clone()),
                            message,
                        ));
                    }
                    Finding::Error { error } => parsed
                        .general
                        .push(format!("{package}: {analyzer}: {error}")),
                }
            }
        }
    }
}

//! `cargo check --message-format=json`: one JSON object per line; the
//! `compiler-message` ones carry rustc's diagnostics. Columns count
//! characters (`column_start` is 1-based, `column_end` exclusive); the
//! `byte_start` offsets are not used because rustc reads files with CRLF
//! normalised.

use serde::Deserialize;

use super::{Parsed, RawDiagnostic, RawLocation, RawPoint, RawRelated};
use crate::agent::checkers::Severity;

#[derive(Deserialize)]
struct Line {
    reason: Option<String>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    message: String,
    level: String,
    code: Option<Code>,
    #[serde(default)]
    spans: Vec<Span>,
    #[serde(default)]
    children: Vec<Message>,
}

#[derive(Deserialize)]
struct Code {
    code: String,
}

#[derive(Deserialize)]
struct Span {
    file_name: String,
    line_start: u32,
    line_end: u32,
    column_start: u32,
    column_end: u32,
    is_primary: bool,
    label: Option<String>,
    suggested_replacement: Option<String>,
    expansion: Option<Box<Expansion>>,
}

#[derive(Deserialize)]
struct Expansion {
    span: Span,
}

impl Span {
    fn location(&self) -> RawLocation {
        RawLocation {
            path: self.file_name.clone(),
            start: RawPoint::new(self.line_start, self.column_start),
            end: Some(RawPoint::new(self.line_end, self.column_end)),
        }
    }

    /// This span, then the macro call sites it came from.
    fn locations(&self) -> Vec<RawLocation> {
        let mut out = vec![self.location()];
        let mut next = self.expansion.as_deref();
        while let Some(expansion) = next {
            out.push(expansion.span.location());
            next = expansion.span.expansion.as_deref();
        }
        out
    }
}

fn severity(level: &str) -> Option<Severity> {
    Some(match level {
        "error" | "error: internal compiler error" => Severity::Error,
        "warning" => Severity::Warning,
        "note" | "failure-note" => Severity::Info,
        "help" => Severity::Hint,
        _ => return None,
    })
}

/// Notes that say where a lint comes from or where to read about it: true
/// of every instance, nothing about this one.
fn is_boilerplate(message: &str) -> bool {
    message.starts_with("`#[")
        || message.starts_with("for further information visit")
        || message.starts_with("requested on the command line")
}

pub fn parse(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for line in output.lines() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let Ok(Line {
            reason: Some(reason),
            message: Some(message),
        }) = serde_json::from_str::<Line>(line)
        else {
            continue;
        };
        if reason != "compiler-message" {
            continue;
        }
        let Some(severity) = severity(&message.level) else {
            continue;
        };
        let Some(primary) = message
            .spans
            .iter()
            .find(|s| s.is_primary)
            .or(message.spans.first())
        else {
            // "aborting due to 3 previous errors" and the like: the
            // diagnostics before it say it all.
            if severity == Severity::Error && !message.message.starts_with("aborting due to") {
                parsed.general.push(message.message.clone());
            }
            continue;
        };
        let mut text = message.message.clone();
        if let Some(label) = primary.label.as_deref().filter(|l| !l.is_empty()) {
            if label != text {
                text.push_str(&format!(" ({label})"));
            }
        }
        let mut related = Vec::new();
        for span in message.spans.iter().filter(|s| !std::ptr::eq(*s, primary)) {
            if let Some(label) = span.label.as_deref().filter(|l| !l.is_empty()) {
                related.push(RawRelated {
                    location: span.location(),
                    message: label.to_owned(),
                });
            }
        }
        for child in message
            .children
            .iter()
            .filter(|c| !is_boilerplate(&c.message))
        {
            let prefix = &child.level;
            match child
                .spans
                .iter()
                .find(|s| s.is_primary)
                .or(child.spans.first())
            {
                Some(span) => {
                    let mut text = format!("{prefix}: {}", child.message);
                    if let Some(new) = span.suggested_replacement.as_deref() {
                        text.push_str(&format!(": `{new}`"));
                    }
                    related.push(RawRelated {
                        location: span.location(),
                        message: text,
                    });
                }
                None => text.push_str(&format!("\n{prefix}: {}", child.message)),
            }
        }
        parsed.diagnostics.push(RawDiagnostic {
            locations: primary.locations(),
            severity,
            code: message.code.map(|c| c.code),
            message: text,
            related,
        });
    }
    parsed
}

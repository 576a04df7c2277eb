//! The debugging agent's first look: the functions on the failure's stack.
//! A trace the user gave (`fettle fix --trace FILE`) — and, for a model
//! with the full prompt, the tracebacks in the test output — are read into
//! workspace frames (`verify::parse_trace`), each mapped to the function
//! around its line, whose code goes into the first message before anything
//! else the model reads: the failure's own path through the code, not the
//! names the test happens to mention.

use std::ops::Range;

use super::check::Verification;
use super::Task;
use crate::agent::verify::{is_test_file, parse_trace, TraceFrame};
use crate::syntax::Language;

/// Functions shown, and the bytes of code they may take.
const MAX_FUNCTIONS: usize = 3;
const MAX_STACK_BYTES: usize = 6 * 1024;
/// The most of a given trace quoted (head and tail).
const MAX_TRACE_BYTES: usize = 4 * 1024;
/// Lines shown around a frame outside any function.
const CONTEXT_LINES: usize = 6;

impl Task {
    /// The stack trace the user gave: `--trace FILE`, or one pasted into
    /// the request (the editor's chat) that names workspace code.
    pub(super) fn given_trace(&self) -> Option<&str> {
        match &self.spec.trace {
            Some(trace) => Some(trace),
            None => (!parse_trace(&self.spec.goal, self.files.root()).is_empty())
                .then_some(self.spec.goal.as_str()),
        }
    }

    /// The stack section of the first message (empty when no trace names
    /// workspace code).
    pub(super) fn stack_functions(&self, baseline: &Verification) -> String {
        let mut frames: Vec<TraceFrame> = Vec::new();
        let root = self.files.root();
        let mut given = String::new();
        if let Some(trace) = &self.spec.trace {
            frames.extend(parse_trace(trace, root));
            given = format!(
                "\nThe stack trace the user gave:\n{}\n",
                self.boundary.data(
                    "trace",
                    "given",
                    &crate::agent::output::head_tail(trace, MAX_TRACE_BYTES, 80)
                )
            );
        }
        // A trace pasted into the request (the editor's chat) counts too.
        frames.extend(parse_trace(&self.spec.goal, root));
        if !self.compact_prompt() {
            if let Some(outcome) = &baseline.outcome {
                frames.extend(parse_trace(&outcome.output, root));
            }
        }
        // Code before tests: the test's own frame is where the failure
        // showed, rarely where it is.
        let (code, tests): (Vec<_>, Vec<_>) =
            frames.into_iter().partition(|f| !is_test_file(&f.path));
        let mut shown: Vec<(String, Range<usize>)> = Vec::new();
        let mut out = String::new();
        for frame in code.iter().chain(&tests) {
            if shown.len() >= MAX_FUNCTIONS || out.len() >= MAX_STACK_BYTES {
                break;
            }
            let Some(text) = self.files.text(&root.join(&frame.path)) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            // A trace from another machine may come from another version
            // of the file: past its end, the function it names is found by
            // its definition.
            let line = match frame.line as usize <= lines.len() {
                true => Some(frame.line),
                false => frame
                    .function
                    .as_deref()
                    .and_then(|f| definition_line(&lines, f)),
            };
            let Some(span) = line.and_then(|l| function_lines(&frame.path, &text, l)) else {
                continue;
            };
            if shown
                .iter()
                .any(|(p, r)| *p == frame.path && r.start <= span.start && span.end <= r.end)
            {
                continue;
            }
            let end = span.end.min(lines.len());
            let numbered = super::tools::numbered(&lines, span.start + 1, end);
            let label = match &frame.function {
                Some(f) => format!("{}:{} in {f}", frame.path, frame.line),
                None => format!("{}:{}", frame.path, frame.line),
            };
            out.push_str(&self.boundary.data("file", &label, &numbered));
            out.push('\n');
            shown.push((frame.path.clone(), span));
        }
        if out.is_empty() {
            return given;
        }
        format!(
            "{given}\nThe failure's stack, innermost first — the code it ran through (read it first):\n{out}"
        )
    }
}

/// The 1-based line that defines the function a trace names (its last
/// path segment: `app::config::parse` → `parse`, `main.parse` → `parse`).
fn definition_line(lines: &[&str], function: &str) -> Option<u32> {
    let name = function
        .rsplit([':', '.'])
        .next()
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_'))?;
    let defines = |line: &str| {
        let line = line.trim_start();
        [
            "def ",
            "async def ",
            "fn ",
            "pub fn ",
            "function ",
            "async function ",
            "func ",
        ]
        .iter()
        .any(|kw| {
            line.strip_prefix(kw)
                .and_then(|rest| rest.strip_prefix(name))
                .is_some_and(|rest| rest.starts_with(['(', '<']))
        })
    };
    let at = lines.iter().position(|l| defines(l))?;
    u32::try_from(at + 1).ok()
}

/// The 0-based line range of the function around 1-based `line` in `text`
/// (a few lines around it when it is in none).
fn function_lines(path: &str, text: &str, line: u32) -> Option<Range<usize>> {
    let count = text.lines().count();
    let at = (line as usize).checked_sub(1).filter(|l| *l < count)?;
    let around = at.saturating_sub(CONTEXT_LINES)..(at + CONTEXT_LINES + 1).min(count);
    let Some(language) = Language::from_path(std::path::Path::new(path)) else {
        return Some(around);
    };
    let Some(tree) = crate::syntax::parse_str(language, text, None) else {
        return Some(around);
    };
    let rope = ropey::Rope::from_str(text);
    // The line's code, without its indentation and newline: a range past
    // the function's last byte would be the module's.
    let line_start = rope.line_to_byte(at);
    let line_text = rope.line(at).to_string();
    let start = line_start + (line_text.len() - line_text.trim_start().len());
    let end = (line_start + line_text.trim_end().len()).max(start + 1);
    match crate::edit::scope::enclosing_definition(&rope, &tree, start..end) {
        Some(bytes) => {
            let first = rope.byte_to_line(bytes.start);
            let last = rope.byte_to_line(bytes.end.saturating_sub(1).max(bytes.start));
            Some(first..last + 1)
        }
        None => Some(around),
    }
}

#[cfg(test)]
mod tests {
    use super::{definition_line, function_lines};

    #[test]
    fn a_frame_past_the_end_is_found_by_its_function() {
        let lines = [
            "MONTHS = []",
            "",
            "def parse_date(text):",
            "    pass",
            "",
            "def month_name(month):",
            "    return MONTHS[month]",
        ];
        assert_eq!(definition_line(&lines, "month_name"), Some(6));
        assert_eq!(definition_line(&lines, "ledger.dates.month_name"), Some(6));
        assert_eq!(definition_line(&lines, "month"), None);
        assert_eq!(definition_line(&lines, "<module>"), None);
        let rust = ["impl Config {", "    pub fn parse<T>(s: &str) {}", "}"];
        assert_eq!(definition_line(&rust, "app::Config::parse"), Some(2));
    }

    #[test]
    fn a_frame_maps_to_its_function() {
        let text = "import json\n\n\ndef load(path):\n    text = open(path).read()\n    return parse(text)\n\n\ndef parse(text):\n    data = json.loads(text)\n    return data['port']\n";
        // Line 10 is in `parse` (lines 9–11, 0-based 8..11).
        assert_eq!(function_lines("c.py", text, 10), Some(8..11));
        assert_eq!(function_lines("c.py", text, 5), Some(3..6));
        // The function's last line still belongs to it.
        assert_eq!(function_lines("c.py", text, 6), Some(3..6));
        assert_eq!(function_lines("c.py", text, 11), Some(8..11));
        // Outside any function: the lines around it.
        assert_eq!(function_lines("c.py", text, 1), Some(0..7));
        assert_eq!(function_lines("c.py", text, 99), None);
    }
}

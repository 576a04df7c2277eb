//! What a test run said, reduced to what a model needs to repair it.

use std::fmt::Write as _;

use super::frames::Resolver;

/// A location in the workspace that a failure points at.
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Frame {
    /// Relative to the workspace root, `/`-separated.
    pub path: String,
    pub line: u32,
    pub column: Option<u32>,
}

/// `path:line:column`, one line even in `{:#?}`: reports list many.
impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Frame({}:{}", self.path, self.line)?;
        if let Some(column) = self.column {
            write!(f, ":{column}")?;
        }
        f.write_str(")")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TestReport {
    /// "cargo", "pytest", "node", "jest", "vitest", "go"; `None` when no
    /// known runner was recognised.
    pub runner: Option<&'static str>,
    pub passed: Option<u32>,
    /// Failed tests; when the build (or pytest's collection) failed and no
    /// test ran, the number of errors.
    pub failed: Option<u32>,
    /// The tests did not build or could not be collected: nothing ran.
    pub build_failed: bool,
    pub failing_tests: Vec<String>,
    /// Assertion messages, panics and error lines, at most
    /// [`MAX_MESSAGES`].
    pub messages: Vec<String>,
    /// Workspace locations only, in order of appearance, at most
    /// [`MAX_FRAMES`].
    pub frames: Vec<Frame>,
}

pub const MAX_FAILING_TESTS: usize = 50;
pub const MAX_MESSAGES: usize = 20;
pub const MAX_FRAMES: usize = 20;
/// One message is cut to this many lines and bytes: an assertion's diff can
/// be long, and the first lines carry the point.
const MAX_MESSAGE_LINES: usize = 12;
const MAX_MESSAGE_BYTES: usize = 800;

impl TestReport {
    /// A compact block for the model: counts, failing tests, messages, and
    /// locations as `path:line`. Empty parts are left out.
    pub fn summary_for_model(&self) -> String {
        let mut out = String::new();
        let mut counts = Vec::new();
        if let Some(failed) = self.failed {
            counts.push(format!("{failed} failed"));
        }
        if let Some(passed) = self.passed {
            counts.push(format!("{passed} passed"));
        }
        if !counts.is_empty() {
            let _ = write!(out, "Tests: {}", counts.join(", "));
            if let Some(runner) = self.runner {
                let _ = write!(out, " ({runner})");
            }
            out.push('\n');
        }
        if self.build_failed {
            out.push_str("The tests did not build or could not be collected; none ran.\n");
        }
        if !self.failing_tests.is_empty() {
            out.push_str("Failing tests:\n");
            for name in &self.failing_tests {
                let _ = writeln!(out, "- {name}");
            }
        }
        if !self.messages.is_empty() {
            out.push_str("Messages:\n");
            for message in &self.messages {
                let mut lines = message.lines();
                if let Some(first) = lines.next() {
                    let _ = writeln!(out, "- {first}");
                }
                for line in lines {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
        if !self.frames.is_empty() {
            out.push_str("Locations:\n");
            for frame in &self.frames {
                let _ = writeln!(out, "- {}:{}", frame.path, frame.line);
            }
        }
        out
    }
}

/// Collects a report with its caps and deduplication, resolving frames
/// against the workspace as they come.
pub(super) struct Builder<'a> {
    pub report: TestReport,
    resolver: Resolver<'a>,
}

impl<'a> Builder<'a> {
    pub fn new(runner: Option<&'static str>, resolver: Resolver<'a>) -> Self {
        Self {
            report: TestReport {
                runner,
                ..TestReport::default()
            },
            resolver,
        }
    }

    pub fn failing(&mut self, name: &str) {
        let name = name.trim();
        let list = &mut self.report.failing_tests;
        if !name.is_empty() && list.len() < MAX_FAILING_TESTS && !list.iter().any(|n| n == name) {
            list.push(name.to_string());
        }
    }

    pub fn remove_failing(&mut self, name: &str) {
        self.report.failing_tests.retain(|n| n != name.trim());
    }

    /// Adds a message: dedented, blank edges trimmed, cut to its caps;
    /// an exact repeat is dropped.
    pub fn message(&mut self, text: &str) {
        let text = shape_message(text);
        let list = &mut self.report.messages;
        if !text.is_empty() && list.len() < MAX_MESSAGES && !list.contains(&text) {
            list.push(text);
        }
    }

    /// Adds a frame if `path` is a file inside the workspace.
    pub fn frame(&mut self, path: &str, line: u32, column: Option<u32>) {
        self.frame_in(None, path, line, column);
    }

    /// Like [`frame`](Self::frame), trying `dir` (workspace-relative) first
    /// for a relative path: runners such as go print paths relative to the
    /// package.
    pub fn frame_in(&mut self, dir: Option<&str>, path: &str, line: u32, column: Option<u32>) {
        if self.report.frames.len() >= MAX_FRAMES || line == 0 {
            return;
        }
        let Some(path) = self.resolver.resolve(dir, path) else {
            return;
        };
        let frames = &mut self.report.frames;
        if !frames.iter().any(|f| f.path == path && f.line == line) {
            frames.push(Frame { path, line, column });
        }
    }

    pub fn add_passed(&mut self, n: u32) {
        self.report.passed = Some(self.report.passed.unwrap_or(0).saturating_add(n));
    }

    pub fn add_failed(&mut self, n: u32) {
        self.report.failed = Some(self.report.failed.unwrap_or(0).saturating_add(n));
    }

    pub fn finish(self) -> TestReport {
        self.report
    }
}

fn shape_message(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let start = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(start, |i| i + 1);
    let lines = &lines[start..end];
    let indent = lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i == MAX_MESSAGE_LINES {
            let _ = write!(out, "\n[… {} more lines]", lines.len() - i);
            break;
        }
        if i > 0 {
            out.push('\n');
        }
        // Dedent by bytes of leading whitespace, which every non-empty line
        // has at least `indent` of.
        out.push_str(line.get(indent..).unwrap_or(""));
    }
    if out.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str(" […]");
    }
    out
}

//! Test-first (`fettle fix --goal "…" --tests-first`, `agent.tests_first`):
//! before any code changes, the model writes tests for the goal — test
//! files only, every other write refused — and they must fail for the
//! right reason: they run (no syntax error, results reported) and more
//! tests fail than before, while none that passed before fails. Then the
//! normal loop implements the goal against them; the files holding the new
//! tests keep their lines from then on (more tests may be added), and the
//! tests stay in the diff.

use std::path::Path;

use serde_json::json;

use super::check::Verification;
use super::explain::StopCause;
use super::undefined::{with_imports, Scope};
use super::{prompt, Task};
use crate::agent::checkers::Severity;
use crate::agent::edit::{complete_beginning, unclosed_block, FencedBlock};
use crate::agent::types::EventKind;
use crate::agent::verify::is_test_file;
use crate::model::{Message, ToolCall};
use crate::syntax::Language;

/// `tests/test_x.py` from a first line `# tests/test_x.py` (or `//`).
fn file_in_comment(line: &str) -> Option<String> {
    let line = line.trim();
    let rest = line.strip_prefix('#').or_else(|| line.strip_prefix("//"))?;
    rest.split_whitespace()
        .rfind(|w| {
            w.contains('.') && crate::syntax::Language::from_path(std::path::Path::new(w)).is_some()
        })
        .map(|w| w.trim_start_matches("./").to_owned())
}

/// Attempts at tests that fail for the right reason.
const TEST_ATTEMPTS: u32 = 2;

impl Task {
    /// Writes the tests first; `Ok` with the verification of the tests
    /// written (the loop's new start), or why the task stops.
    pub(super) async fn write_tests_first(
        &mut self,
        baseline: &Verification,
    ) -> Result<Verification, StopCause> {
        self.files.only_tests = true;
        let mut feedback: Option<String> = None;
        let mut outcome = Err(StopCause::Error("no tests were written".to_owned()));
        let (stage, what) = match self.reproducing {
            true => ("Reproducing the trace's error", "a test that fails with it"),
            false => ("Tests first", "tests for the goal"),
        };
        for attempt in 1..=TEST_ATTEMPTS {
            self.status(&format!(
                "{stage}: writing {what} (attempt {attempt} of {TEST_ATTEMPTS})"
            ));
            // What became of the last answer's code, if it was code.
            let note = self
                .answer_note
                .take()
                .map(|n| format!("\n{}", prompt::defuse(&n)))
                .unwrap_or_default();
            let text = match &feedback {
                None => self.tests_first_message(baseline),
                Some(why) => format!("{}\n{why}{note}", self.tests_first_message(baseline)),
            };
            let system = match self.compact_prompt() {
                true => self.boundary.local_system_prompt(),
                false => self.boundary.system_prompt(),
            };
            self.messages.clear();
            self.push(Message::system(system));
            self.push(Message::user(text));
            self.act().await?;
            if self.files.changed_files().is_empty() {
                feedback = Some(
                    "No test was written. Write the tests now: a test file, nothing else."
                        .to_owned(),
                );
                continue;
            }
            let mut v = self.verify().await?;
            if self.right_reason(baseline, &v).is_err()
                && self.import_undefined_names(Scope::Tests).await?
            {
                v = self.verify().await?;
            }
            match self.right_reason(baseline, &v) {
                Ok(()) => {
                    outcome = Ok(v);
                    break;
                }
                Err(why) => {
                    self.event(
                        EventKind::Verify,
                        format!("{stage}: {why}"),
                        json!({ "testsFirst": false }),
                    );
                    feedback = Some(format!("The tests written are not right yet: {why}. Change them (test files only)."));
                    outcome = Err(StopCause::Error(format!("the tests written first {why}")));
                }
            }
        }
        self.files.only_tests = false;
        // About the tests' answers, not the code's.
        self.answer_note = None;
        let v = outcome?;
        let written: Vec<std::path::PathBuf> = self.files.changed_files();
        let names: Vec<String> = written
            .iter()
            .map(|p| self.files.paths.relative(p))
            .collect();
        for path in written {
            if !self.files.tests_kept.contains(&path) {
                self.files.tests_kept.push(path);
            }
        }
        self.event(
            EventKind::Verify,
            format!(
                "{stage}: {} written; they fail as they should ({})",
                names.join(", "),
                v.score.describe()
            ),
            json!({ "testsFirst": true, "reproducer": self.reproducing, "files": names }),
        );
        self.tests_written = names;
        Ok(v)
    }

    /// The goal, the code it is about — the files it names, the functions
    /// on a given trace — and what to write: tests that call what exists by
    /// its real names and arguments (without the code, the 1.5B wrote
    /// tests for a signature it guessed).
    fn tests_first_message(&self, baseline: &Verification) -> String {
        let focus = self.focus_of_failure(baseline);
        let mut context = self.stack_functions(baseline);
        let files = self.code_files(&focus);
        if !files.is_empty() {
            context.push_str(
                "\nThe code the goal is about (the tests call it; do not change it yet):\n",
            );
            for (rel, text) in &files {
                context.push_str(&self.boundary.data("file", rel, text.trim_end()));
                context.push('\n');
            }
        }
        let ask = self.tests_first_request();
        format!("{context}\n{ask}")
    }

    fn tests_first_request(&self) -> String {
        if self.reproducing {
            return self.reproducer_request();
        }
        format!(
            "Goal: {}\n\nBefore changing any code, write tests for this goal: new test functions in the project's test files, or a new test file beside the code (name it as the project's tests are named). Change no other file — the code comes after, once the tests fail. Write the tests with `write_file` or `edit`, or answer with the whole test file in one fenced code block whose first line is a comment naming the file (`# tests/test_x.py`). The tests run with {}.",
            prompt::defuse(self.spec.goal.trim()),
            self.spec.test_command.as_deref().map_or("the project's test command".to_owned(), |c| format!("`{c}`"))
        )
    }

    /// Whether the tests written fail for the right reason.
    fn right_reason(&self, baseline: &Verification, v: &Verification) -> Result<(), String> {
        if !v.syntax.is_empty() {
            return Err(format!("do not parse ({})", v.syntax.join("; ")));
        }
        // Tests the checkers reject (`gcd` used and never imported: the
        // 1.5B's tests failed with a NameError, which passed for "not
        // written yet", and the loop that followed could not change them).
        // By the path inside the workspace: a checker may print the root
        // another way (a symlink resolved).
        let written: Vec<String> = self
            .files
            .changed_files()
            .iter()
            .map(|p| self.files.paths.relative(p))
            .collect();
        // `verify` keeps the checkers' report in `last_checks`.
        let lint: Vec<String> = self
            .last_checks
            .iter()
            .flat_map(|c| c.diagnostics())
            .filter(|d| d.severity == Severity::Error)
            .filter_map(|d| {
                let rel = written.iter().find(|rel| d.path.ends_with(rel.as_str()))?;
                Some(format!("{rel}: {}", d.message))
            })
            .take(3)
            .collect();
        if !lint.is_empty() {
            return Err(format!(
                "have errors the checkers report ({}): import what they test, and correct them",
                lint.join("; ")
            ));
        }
        let output = v.outcome.as_ref().map_or("", |o| o.output.as_str());
        if self.reproducing {
            return self.reproduces(baseline, v, output);
        }
        // A test that imports what the goal asks for fails to load until
        // it exists (and pytest then stops the whole run): the right
        // reason, at this stage.
        const MISSING: [&str; 6] = [
            "ImportError",
            "ModuleNotFoundError",
            "AttributeError",
            "NameError",
            "cannot find",
            "is not a function",
        ];
        let missing = MISSING.iter().any(|m| output.contains(m));
        if (v.score.broken || v.score.passed < baseline.score.passed) && missing && !v.passed {
            return Ok(());
        }
        if v.score.broken {
            return Err(
                "do not run: the test command failed without reporting test results".to_owned(),
            );
        }
        if v.passed || v.score.failed <= baseline.score.failed {
            if let Some(copy) = self.copied_definition() {
                return Err(format!("pass already: {copy}"));
            }
            return Err("pass already: they do not test what the goal asks for".to_owned());
        }
        if v.score.passed < baseline.score.passed {
            return Err("make tests that passed before fail".to_owned());
        }
        Ok(())
    }

    /// A test file written that defines, at its top level, a function the
    /// project's code defines: a copy that the tests then check (seen: the
    /// 1.5B wrote its own `def gcd` into test_gcd.py, whose tests passed at
    /// once). The hint to import the project's instead (Python).
    pub(super) fn copied_definition(&self) -> Option<String> {
        for path in self.files.changed_files() {
            let rel = self.files.paths.relative(&path);
            if !is_test_file(&rel) {
                continue;
            }
            let Some(text) = self.files.text(&path) else {
                continue;
            };
            for line in text.lines() {
                let Some(rest) = line
                    .strip_prefix("def ")
                    .or_else(|| line.strip_prefix("async def "))
                else {
                    continue;
                };
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() || name.starts_with("test") {
                    continue;
                }
                // A test file is never a home: `rel` is not one.
                if let Some(module) = self.python_modules_defining(&name).into_iter().next() {
                    return Some(format!(
                        "{rel} defines `{name}` itself — a copy, which the tests then check — instead of importing the project's: remove the copy, import it (`from {module} import {name}`) and test that"
                    ));
                }
            }
        }
        None
    }

    /// While writing tests first, the block an answer left open at its end
    /// (cut off at its token limit), as far as it is complete: whole lines
    /// that parse, with a definition in them — the tests written before
    /// the cut (seen: the 1.5B repeated asserts until its limit, and the
    /// tests it had written were lost with the unclosed block).
    pub(super) fn cut_test_block(&self, answer: &str) -> Option<FencedBlock> {
        if !self.files.only_tests {
            return None;
        }
        let block = unclosed_block(answer)?;
        let language = block
            .language
            .as_deref()
            .and_then(Language::from_language_id)
            .or_else(|| {
                let hint = self.test_file_hint(&block)?;
                Language::from_path(Path::new(&hint))
            })?;
        let code = complete_beginning(language, &block.code)?;
        tracing::info!(
            kept = code.lines().count(),
            of = block.code.lines().count(),
            "an answer cut off inside its code block: its complete lines kept"
        );
        Some(FencedBlock { code, ..block })
    }

    /// The file a block of tests names: in its info string, the line
    /// before it, or a comment on its first line.
    fn test_file_hint(&self, block: &FencedBlock) -> Option<String> {
        let first_line = block.code.lines().next().unwrap_or("");
        block
            .file_hint
            .clone()
            .or_else(|| file_in_comment(first_line))
    }

    /// A block of new tests for a test file that exists, none of whose
    /// definitions the file has yet (seen: the 1.5B's second try at a
    /// reproducer added `test_month_name_out_of_range` to the test file its
    /// first try wrote, and was told no file defines it): its tests go at
    /// the file's end, its imports the file lacks at its top (Python and
    /// JavaScript, while writing tests first).
    pub(super) fn added_tests(&self, index: usize, block: &FencedBlock) -> Option<ToolCall> {
        if !self.files.only_tests {
            return None;
        }
        let hint = self.test_file_hint(block)?;
        let path = self.files.paths.resolve(&hint).ok()?;
        let rel = self.files.paths.relative(&path);
        let language = Language::from_path(&path)?;
        if !is_test_file(&rel)
            || !matches!(
                language,
                Language::Python | Language::JavaScript | Language::TypeScript
            )
        {
            return None;
        }
        let text = self.files.text(&path)?;
        let mut lines = block.code.lines().peekable();
        if lines.peek().is_some_and(|l| file_in_comment(l).is_some()) {
            lines.next();
        }
        let is_import = |l: &str| {
            l.starts_with("import ")
                || l.starts_with("from ")
                || (l.starts_with("const ") && l.contains("require("))
        };
        let (imports, body): (Vec<&str>, Vec<&str>) = lines.partition(|l| is_import(l));
        let present: Vec<&str> = text.lines().map(str::trim_end).collect();
        let new_imports: Vec<&str> = imports
            .into_iter()
            .map(str::trim_end)
            .filter(|l| !present.contains(l))
            .collect();
        let body = body.join("\n");
        if body.trim().is_empty() {
            return None;
        }
        let content = with_imports(
            &new_imports,
            &format!("{}\n\n\n{}\n", text.trim_end(), body.trim()),
        );
        Some(ToolCall {
            id: format!("answer-code-{}-tests-added", index + 1),
            name: "write_file".to_owned(),
            arguments: json!({ "path": rel, "content": content }),
        })
    }

    /// A fenced block naming a test file that does not exist yet: written
    /// whole (while writing tests first).
    pub(super) fn new_test_file(&self, index: usize, block: &FencedBlock) -> Option<ToolCall> {
        if !self.files.only_tests {
            return None;
        }
        let hint = self.test_file_hint(block)?;
        let path = self.files.paths.resolve(&hint).ok()?;
        let rel = self.files.paths.relative(&path);
        if !is_test_file(&rel) || path.exists() {
            return None;
        }
        Some(ToolCall {
            id: format!("answer-code-{}-test-file", index + 1),
            name: "write_file".to_owned(),
            arguments: json!({ "path": rel, "content": block.code }),
        })
    }
}

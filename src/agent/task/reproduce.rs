//! A trace whose error the tests do not show (`fettle fix --trace FILE`,
//! or a trace pasted into the chat, with the tests passing): before the
//! fix, the model writes a test that reproduces the error — through the
//! tests-first stage (`tests_first`), with this request and this notion of
//! "fails for the right reason" — so that success means the error is gone,
//! not only that the suite still passes.

use serde_json::json;

use super::check::Verification;
use super::{prompt, Task};
use crate::agent::types::EventKind;
use crate::agent::verify::{is_test_file, parse_trace, trace_error};

impl Task {
    /// What to write when the tests pass but a trace shows an error: a
    /// test that fails with that error.
    pub(super) fn reproducer_request(&self) -> String {
        let error = match self.given_trace().and_then(trace_error) {
            Some(error) => format!(" (`{}`)", prompt::defuse(&error)),
            None => String::new(),
        };
        // Named, not described: the 1.5B guessed at "the innermost
        // function" less well than at `month_name`.
        let call = match self.innermost_function() {
            Some((path, function)) => format!(
                "calls `{}` (from {}, the innermost frame in the workspace), imported by its real name,",
                prompt::defuse(&function),
                prompt::defuse(&path)
            ),
            None => "calls the code on the trace — its innermost function in the workspace — imported by its real name,".to_owned(),
        };
        format!(
            "Goal: {}\n\nThe tests pass, yet the stack trace shows an error{error}: they do not reproduce it. Before changing any code, write a test that reproduces it: a new test function in the project's test files, or a new test file beside the code, that {call} with inputs that make it fail with the same error as in the trace, and asserts the result it should give instead. Not a test that expects the error (`pytest.raises`, `assertRaises`, `should_panic`, `toThrow`): that passes while the bug is there. Change no other file: the fix comes after, once this test fails. Write the test with `write_file` or `edit`, or answer with the whole test file in one fenced code block whose first line is a comment naming the file (`# tests/test_x.py`). The tests run with {}.",
            prompt::defuse(self.spec.goal.trim()),
            self.spec.test_command.as_deref().map_or("the project's test command".to_owned(), |c| format!("`{c}`"))
        )
    }

    /// The innermost frame of the given trace in the workspace's code (not
    /// its tests) that names a function: its file and the function's last
    /// name (`app::config::parse` → `parse`).
    fn innermost_function(&self) -> Option<(String, String)> {
        let trace = self.given_trace()?;
        parse_trace(trace, self.files.root())
            .into_iter()
            .filter(|f| !is_test_file(&f.path))
            .find_map(|f| {
                let function = f.function?;
                let name = function.rsplit([':', '.']).next()?.to_owned();
                let plain =
                    !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
                plain.then_some((f.path, name))
            })
    }

    /// A test written that expects the error instead of the right result
    /// (seen: the 1.5B's first reproducer was `with
    /// pytest.raises(IndexError): month_name(13)`, which passes): the line
    /// that does.
    fn expects_the_error(&self) -> Option<String> {
        const EXPECTING: [&str; 5] = [
            "raises(",
            "assertRaises(",
            "should_panic",
            "toThrow(",
            "assert.throws(",
        ];
        self.files
            .changed_files()
            .iter()
            .filter(|p| is_test_file(&self.files.paths.relative(p)))
            .filter_map(|p| self.files.text(p))
            .find_map(|text| {
                text.lines()
                    .map(str::trim)
                    .find(|l| EXPECTING.iter().any(|e| l.contains(e)))
                    .map(|l| l.chars().take(80).collect())
            })
    }

    /// No reproducer could be written: the files it wrote go back, and
    /// the fix goes on without one.
    pub(super) async fn no_reproducer(&mut self, why: &str) {
        // Left set when the attempt stopped on an error.
        self.files.only_tests = false;
        let originals = self.files.originals();
        if let Err(err) = self.files.restore(&originals).await {
            tracing::warn!(%err, "could not take back the test written to reproduce the trace");
        }
        self.event(
            EventKind::Verify,
            format!("No test reproduces the trace's error ({why}); fixing without one"),
            json!({ "reproducer": false }),
        );
    }

    /// Whether a test written to reproduce the trace does: it runs, fails
    /// with the trace's error (when the trace shows one), and every test
    /// that passed before still passes. Code exists here: failing to
    /// import it is not the error.
    pub(super) fn reproduces(
        &self,
        baseline: &Verification,
        v: &Verification,
        output: &str,
    ) -> Result<(), String> {
        if v.score.broken {
            return Err(
                "do not run: the test command failed without reporting test results (import the code by its real module and name)".to_owned(),
            );
        }
        if v.passed || v.score.failed <= baseline.score.failed {
            if let Some(copy) = self.copied_definition() {
                return Err(format!("pass: {copy}"));
            }
            if let Some(line) = self.expects_the_error() {
                return Err(format!(
                    "pass: `{line}` expects the error, which passes while the bug is there — call the function as the trace did and assert the result it should give instead"
                ));
            }
            return Err("pass: they do not reproduce the error — call the trace's innermost function with the inputs that make it fail".to_owned());
        }
        if v.score.passed < baseline.score.passed {
            return Err("make tests that passed before fail".to_owned());
        }
        if let Some(error) = self.given_trace().and_then(trace_error) {
            if !output.contains(&error) {
                return Err(format!(
                    "fail, but not with the trace's error (`{error}` is not in the test output)"
                ));
            }
        }
        Ok(())
    }
}

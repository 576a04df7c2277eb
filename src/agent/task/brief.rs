//! What the model is told: the task's first message (goal, repository map,
//! test results and, for a local model, the code to fix) and the feedback
//! after a failed attempt.

use std::path::PathBuf;

use super::check::Verification;
use super::{prompt, tools, Task};
use super::{
    LOCAL_CODE_BYTES, LOCAL_CODE_FILES, LOCAL_RANKED_FALLBACK, LOCAL_REPO_MAP_TOKENS,
    LOCAL_TEST_OUTPUT_BYTES,
};

/// Functions of the failing tests' call path the map is focused on.
const CALL_PATH_FOCUS: usize = 8;
/// Suspects listed in the first message (a local model's prompt is kept
/// short).
const SUSPECTS_LISTED: usize = 5;
const LOCAL_SUSPECTS_LISTED: usize = 3;
/// Lines of a suspect's code shown.
const MAX_SUSPECT_LINES: usize = 80;

impl Task {
    /// What the goal, the focus range and the failing output point at: the
    /// first message's map, and the `repo_map` tool's when asked with no
    /// focus.
    pub(super) fn focus_of_failure(
        &self,
        baseline: &Verification,
    ) -> crate::agent::repo_map::Focus {
        let mut focus = crate::agent::repo_map::Focus::from_text(
            &format!("{}\n{}", self.spec.goal, baseline.for_model(None)),
            self.files.root(),
            &self.index,
        );
        if let Some(f) = &self.spec.focus {
            focus.paths.push(f.path.clone());
        }
        if let Some(outcome) = &baseline.outcome {
            let more = crate::agent::repo_map::Focus::from_text(
                &outcome.output,
                self.files.root(),
                &self.index,
            );
            focus.paths.extend(more.paths);
            focus.identifiers.extend(more.identifiers);
        }
        // The functions the failing tests ran (traced) or call: the map
        // shows them even when the output names none (a bug in a helper).
        let executed = self.spectrum.iter().flat_map(|s| &s.functions);
        let names: Vec<String> = executed
            .take(CALL_PATH_FOCUS)
            .map(|e| e.symbol.name.to_string())
            .chain(
                self.call_path(baseline)
                    .into_iter()
                    .take(CALL_PATH_FOCUS)
                    .map(|c| c.symbol.name.to_string()),
            )
            .collect();
        for name in names {
            if !focus.identifiers.contains(&name) {
                focus.identifiers.push(name);
            }
        }
        focus
    }

    pub(super) fn first_message(&self, baseline: &Verification) -> String {
        let focus_excerpt = self.spec.focus.as_ref().and_then(|focus| {
            let text = self.files.text(&focus.path)?;
            let rel = self.files.paths.relative(&focus.path);
            let lines: Vec<&str> = text.lines().collect();
            let (start, end) = match focus.lines {
                Some((a, b)) => (a.max(1) as usize, (b as usize).min(lines.len())),
                None => (1, lines.len().min(200)),
            };
            let numbered = tools::numbered(&lines, start, end);
            Some(self.boundary.data("file", &rel, &numbered))
        });
        // Set from `baseline` by the caller (`focus_of_failure`).
        let focus = &self.failure_focus;
        let local = self.compact_prompt();
        let map_tokens = if local { LOCAL_REPO_MAP_TOKENS } else { 1024 };
        let map =
            crate::agent::repo_map::repo_map(&self.index, self.files.root(), focus, map_tokens);
        let mut message = prompt::task_message(
            &self.boundary,
            &self.spec,
            focus_excerpt,
            &map,
            &self.verification_for_model(baseline),
            local,
        );
        if !self.tests_written.is_empty() {
            message.push_str(&format!(
                "\nTests for the goal were written first, in {}, and fail as they should. Now change the code so that they pass; the tests stay as they are.\n",
                self.tests_written.join(", ")
            ));
        }
        if let Some(note) = &self.bisect_note {
            // It quotes the repository's commits.
            message.push('\n');
            message.push_str(&self.boundary.data("history", "git bisect", note));
            message.push('\n');
        }
        if let Some(history) = &self.spec.history {
            // Earlier summaries quote the model and the workspace: data.
            message.push('\n');
            message.push_str(
                &self
                    .boundary
                    .data("conversation", "earlier requests", history),
            );
            message.push('\n');
        }
        message.push_str(&self.stack_functions(baseline));
        message.push_str(&self.suspects_for_model());
        if local {
            message.push_str(&self.code_under_test(focus));
        }
        message
    }

    /// For a local model: the files the goal and the failure name that the
    /// task may change, whole, so that the first answer can already be the
    /// fix (a `read_file` turn costs such a model a minute on a laptop).
    /// A failed assertion names only the test file (which the task may not
    /// change): then the files defining the names the failure mentions
    /// (`where 8 = levenshtein(...)`), and failing those the repo map's
    /// best-ranked files (the test file imports the code) — each a
    /// fallback, so a file more costs prefill only when nothing was shown.
    pub(super) fn code_under_test(&self, focus: &crate::agent::repo_map::Focus) -> String {
        let files = self.code_files(focus);
        if files.is_empty() {
            return String::new();
        }
        let mut out =
            "\nThe code to fix (the files the failure points to that you may change):\n".to_owned();
        for (rel, text) in &files {
            out.push_str(&self.boundary.data("file", rel, text.trim_end()));
            out.push('\n');
        }
        // Last, where a small model looks: shown its code, it otherwise
        // tends to answer with that code unchanged.
        out.push_str(prompt::FIX_THE_CODE_SHOWN);
        out
    }

    /// The files [`Self::code_under_test`] shows: workspace-relative path
    /// and text, at most [`LOCAL_CODE_FILES`].
    pub(super) fn code_files(
        &self,
        focus: &crate::agent::repo_map::Focus,
    ) -> Vec<(String, String)> {
        let definers = || {
            focus
                .identifiers
                .iter()
                .flat_map(|identifier| self.index.definitions(identifier))
                .map(|d| d.path.to_path_buf())
                .collect::<Vec<_>>()
        };
        let ranked = || {
            crate::agent::repo_map::rank_files(&self.index, focus)
                .into_iter()
                .take(LOCAL_RANKED_FALLBACK)
                .map(|(path, _)| path)
                .collect::<Vec<_>>()
        };
        let mut out: Vec<(String, String)> = Vec::new();
        let mut shown = 0;
        let mut seen = std::collections::HashSet::new();
        let tiers: [&dyn Fn() -> Vec<PathBuf>; 3] = [&|| focus.paths.clone(), &definers, &ranked];
        for tier in tiers {
            if shown > 0 {
                break;
            }
            for path in tier() {
                if shown == LOCAL_CODE_FILES || !seen.insert(path.clone()) {
                    continue;
                }
                let rel = self.files.paths.relative(&path);
                if self.files.paths.check_writable(&rel, &path).is_err()
                    || self.files.tests_kept.contains(&path)
                    || crate::agent::redact::is_secret_path(&path)
                {
                    continue;
                }
                let Some(text) = self.files.text(&path) else {
                    continue;
                };
                if text.len() > LOCAL_CODE_BYTES {
                    continue;
                }
                out.push((rel, text));
                shown += 1;
            }
        }
        out
    }

    /// What the model is told of a verification: the test output cut
    /// shorter for a local model.
    pub(super) fn verification_for_model(&self, v: &Verification) -> String {
        let command = self.spec.test_command.as_deref();
        match self.compact_prompt() {
            true => v.for_model_within(command, LOCAL_TEST_OUTPUT_BYTES, 40),
            false => v.for_model(command),
        }
    }

    pub(super) fn feedback(
        &self,
        v: &Verification,
        rolled_back: Option<&str>,
        answer_note: Option<&str>,
    ) -> String {
        let mut out = String::new();
        if let Some(note) = answer_note {
            // It quotes paths and tool output.
            out.push_str(&prompt::defuse(note));
            out.push('\n');
        }
        out.push_str(&format!(
            "Verification after iteration {} of {} failed.\n",
            self.iterations, self.spec.budget.max_iterations
        ));
        out.push_str(&self.boundary.data(
            "verification",
            "fettle",
            &self.verification_for_model(v),
        ));
        out.push('\n');
        if let Some(note) = rolled_back {
            // It names files, which the workspace (or the model) named.
            out.push_str(&prompt::defuse(note));
            out.push('\n');
        }
        if let Some(note) = &self.command_note {
            out.push_str(&prompt::defuse(note));
            out.push('\n');
        }
        out.push_str("Read the failures, fix the code, and end your turn when done.");
        out
    }

    /// The suspects, most likely first, for the first message; with the
    /// code of the likeliest when the model would not see it otherwise
    /// (its file too big to show whole).
    fn suspects_for_model(&self) -> String {
        if self.suspects.is_empty() {
            return String::new();
        }
        let local = self.compact_prompt();
        let listed = if local {
            LOCAL_SUSPECTS_LISTED
        } else {
            SUSPECTS_LISTED
        };
        let list: Vec<String> = self
            .suspects
            .iter()
            .take(listed)
            .map(|s| {
                format!(
                    "- `{}` in {}, lines {}–{}: {}",
                    s.name, s.path, s.lines.0, s.lines.1, s.why
                )
            })
            .collect();
        let mut out = format!(
            "\nWhere the fault may be, most likely first (from what the failing tests ran and call):\n{}\n",
            self.boundary.data("suspects", "fettle", &list.join("\n"))
        );
        let root = self.files.root();
        for s in self.suspects.iter().take(if local { 1 } else { 2 }) {
            if s.why.contains("on the failure's stack") {
                // Its code is shown with the stack.
                continue;
            }
            let Some(text) = self.files.text(&root.join(&s.path)) else {
                continue;
            };
            if local && text.len() <= LOCAL_CODE_BYTES {
                // Shown whole with the code to fix.
                continue;
            }
            let lines: Vec<&str> = text.lines().collect();
            let start = s.lines.0 as usize;
            let end = (s.lines.1 as usize)
                .min(lines.len())
                .min(start + MAX_SUSPECT_LINES);
            if start == 0 || start > end {
                continue;
            }
            let label = format!("{}:{} {}", s.path, start, s.name);
            out.push_str(
                &self
                    .boundary
                    .data("file", &label, &tools::numbered(&lines, start, end)),
            );
            out.push('\n');
        }
        out
    }
}

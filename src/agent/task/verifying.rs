//! Verifying an attempt and keeping score: the test command, checkers and
//! syntax checks on the files as they are (what the commands change is
//! tracked and undone with the rest), and each attempt recorded — rolled
//! back when it is worse than the best so far.

use std::path::PathBuf;

use serde_json::json;

use super::check::{self, CheckSettings, Verification};
use super::explain::{Attempt, StopCause};
use super::files::TreeBytes;
use super::{score_json, Task};
use crate::agent::types::EventKind;

impl Task {
    /// Verifies the current state and records it as an attempt; rolls back
    /// when it is worse than the best so far. Returns the rollback note.
    pub(super) async fn record_attempt(
        &mut self,
        iteration: u32,
        v: &Verification,
        best: &mut (check::Score, Option<TreeBytes>),
    ) -> Option<String> {
        let changed: Vec<String> = self
            .files
            .changed_files()
            .iter()
            .map(|p| self.files.paths.relative(p))
            .collect();
        let ordering = v.score.cmp_quality(&best.0);
        // Fresh attempts each start from the best state: a change that is
        // no better would otherwise be shown as the code to fix, and a
        // small model copies it (measured: one rewrite, then the same
        // rewrite three attempts in a row).
        // One that passes is kept: it ends the task (when the tests passed
        // before it too — a goal beyond them — "no better" was every change).
        let undo_equal = self.compact_prompt() && self.edits_in_attempt > 0 && !v.passed;
        let worse = ordering == std::cmp::Ordering::Greater;
        if ordering == std::cmp::Ordering::Less {
            *best = (v.score, Some(self.files.capture()));
        }
        let mut note = None;
        if worse || (ordering == std::cmp::Ordering::Equal && undo_equal) {
            let target = best.1.clone().unwrap_or_else(|| self.files.originals());
            match self.files.restore(&target).await {
                Ok(restored) if worse => {
                    let names: Vec<String> = restored
                        .iter()
                        .map(|p| self.files.paths.relative(p))
                        .collect();
                    note = Some(format!(
                        "This attempt made things worse ({} → {}), so Fettle rolled it back; {} now as they were at the best state so far ({}).",
                        best.0.describe(),
                        v.score.describe(),
                        if names.is_empty() { "the files are".to_owned() } else { names.join(", ") + " are" },
                        best.0.describe()
                    ));
                    self.dirty = true;
                }
                Ok(restored) if !restored.is_empty() => {
                    note = Some(format!(
                        "This attempt was no better ({}), so Fettle undid it.",
                        v.score.describe()
                    ));
                    self.dirty = true;
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "rollback failed"),
            }
        }
        self.event(
            EventKind::Verify,
            format!("Iteration {iteration}: {}", v.headline_for_user()),
            json!({
                "iteration": iteration,
                "passed": v.passed,
                "score": score_json(&v.score),
                "rolledBack": note.is_some(),
            }),
        );
        self.attempts.push(Attempt {
            iteration,
            changed,
            outcome: v.headline(),
            rolled_back: note.is_some(),
            model_note: self.last_text.clone(),
            code_refused: self.code_refused.take(),
        });
        note
    }

    /// How verification runs: the spec's test command (or `test_command`),
    /// checkers, limits and sandbox.
    pub(super) fn check_settings<'a>(&'a self, test_command: Option<&'a str>) -> CheckSettings<'a> {
        CheckSettings {
            root: self.files.root(),
            test_command,
            timeout: self.spec.test_timeout,
            allow_env: &self.spec.allow_env,
            limits: self.spec.limits,
            sandbox: self.spec.sandbox.as_ref(),
            checkers: &self.spec.checkers,
            check_timeout: self.spec.check_timeout,
            check_goal: &self.spec.check_goal,
            baseline_checker_errors: self.baseline_checker_errors,
        }
    }

    /// The files verification looks at: those the task touched, and the
    /// one the user pointed at.
    pub(super) fn checked_files(&self) -> Vec<PathBuf> {
        let mut checked = self.files.touched.clone();
        if let Some(focus) = &self.spec.focus {
            if !checked.contains(&focus.path) {
                checked.push(focus.path.clone());
            }
        }
        checked
    }

    pub(super) async fn verify(&mut self) -> Result<Verification, StopCause> {
        // Tests and checkers (`cargo check` writes `target/`) may change the
        // workspace: what they change is tracked and undone with the rest.
        let runs = self.spec.test_command.is_some() || !self.spec.checkers.is_empty();
        let before = match runs {
            true => self.files.before_command().await,
            false => None,
        };
        let checked = self.checked_files();
        let settings = self.check_settings(self.spec.test_command.as_deref());
        let mut what: Vec<String> = Vec::new();
        if !settings.checkers.is_empty() {
            let names: Vec<&str> = settings.checkers.iter().map(|c| c.name.as_str()).collect();
            what.push(format!("the checkers ({})", names.join(", ")));
        }
        if let Some(cmd) = settings.test_command {
            what.push(format!("`{cmd}`"));
        }
        what.push("syntax checks".to_owned());
        self.event(
            EventKind::Status,
            format!("Verifying: {}", what.join(", ")),
            json!({}),
        );
        let files = &self.files;
        let read = |p: &std::path::Path| files.text(p);
        let result = check::verify(&settings, &checked, &read, &self.cancel).await;
        if runs {
            // Even when cancelled: what the tests changed is undone with the rest.
            let effects = self.files.after_command(before).await;
            self.command_note = self.command_effects(&effects, "The test command");
        }
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        self.dirty = false;
        let mut verification =
            result.map_err(|err| StopCause::Error(format!("could not run the tests: {err}")))?;
        self.last_checks = verification.checks.take();
        Ok(verification)
    }
}

//! How a task ends: the best state kept or the originals restored, the
//! model's own account when it ran out of attempts, and the result with
//! its summary.

use std::path::PathBuf;

use serde_json::json;

use super::check::{self, Verification};
use super::explain::{self, StopCause};
use super::files::TreeBytes;
use super::{prompt, Task};
use crate::agent::types::{EventKind, TaskResult, TaskStatus};
use crate::model::Message;

/// After a success with a trace the tests did not reproduce.
const TRACE_UNREPRODUCED: &str = "Note: the tests passed before this change too, and no test that fails with the trace's error could be written — nothing checked that this change fixes it. Read the diff, or add a test that fails with the error and run again.";

impl Task {
    pub(super) async fn give_up(
        &mut self,
        cause: StopCause,
        best: (check::Score, Option<TreeBytes>),
        last: &Verification,
    ) -> TaskResult {
        if matches!(cause, StopCause::Cancelled) {
            return self.finish(cause, Some(last)).await;
        }
        let target = best.1.clone().unwrap_or_else(|| self.files.originals());
        let restored = match self.files.restore(&target).await {
            Ok(paths) => paths,
            Err(err) => {
                tracing::warn!(%err, "could not restore the best state");
                Vec::new()
            }
        };
        let kept_best = best.1.is_some();
        self.attempts_restored(restored, kept_best, best.0);
        if let Some(note) = self.files.take_kept_dirs_note() {
            self.status(&note);
            let text = match self.restore_note.take() {
                Some(text) => format!("{text} {note}"),
                None => note,
            };
            self.restore_note = Some(text);
        }
        if matches!(cause, StopCause::Iterations | StopCause::ToolCalls) {
            self.reflect().await;
        }
        self.finish(cause, Some(last)).await
    }

    /// Out of attempts but not of time or tokens: one last turn, in words,
    /// for the model's own account of what failed and what it would
    /// try next (it goes into the summary).
    pub(super) async fn reflect(&mut self) {
        if self.check_budget_for_reflection().is_err() {
            return;
        }
        self.push(Message::user(prompt::REFLECTION));
        // The tools stay declared (Anthropic refuses a conversation holding
        // tool calls without them); any call now is ignored, only words count.
        match self.model_turn().await {
            Ok(turn) if !turn.text.trim().is_empty() => {
                self.reflection = Some(turn.text.trim().to_owned());
            }
            Ok(_) => {}
            Err(cause) => tracing::info!(?cause, "no reflection from the model"),
        }
    }

    pub(super) fn check_budget_for_reflection(&self) -> Result<(), StopCause> {
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        if self.tokens.total() >= self.spec.budget.max_tokens {
            return Err(StopCause::Tokens);
        }
        if self.started.elapsed() >= self.spec.budget.timeout {
            return Err(StopCause::Timeout);
        }
        Ok(())
    }

    pub(super) fn attempts_restored(
        &mut self,
        restored: Vec<PathBuf>,
        kept_best: bool,
        score: check::Score,
    ) {
        let names: Vec<String> = restored
            .iter()
            .map(|p| self.files.paths.relative(p))
            .collect();
        let what = if kept_best {
            format!("the best state reached ({})", score.describe())
        } else {
            "the original files (no attempt improved on them)".to_owned()
        };
        let text = if names.is_empty() {
            format!("Kept {what}.")
        } else {
            format!("Restored {what}: {}.", names.join(", "))
        };
        self.status(&text);
        self.restore_note = Some(text);
    }

    pub(super) async fn finish(
        &mut self,
        cause: StopCause,
        last: Option<&Verification>,
    ) -> TaskResult {
        let status = cause.status();
        let summary = explain::summary(&explain::Context {
            cause: &cause,
            goal: &self.spec.goal,
            attempts: &self.attempts,
            last: last.map(|v| v.for_model(self.spec.test_command.as_deref())),
            last_failure_focus: last
                .and_then(|v| v.report.as_ref())
                .map(|r| r.summary_for_model()),
            model_text: &self.last_text,
            restore_note: self.restore_note.as_deref(),
            reflection: self.reflection.as_deref(),
            budget: &self.spec.budget,
            test_timed_out: last
                .and_then(|v| v.outcome.as_ref())
                .is_some_and(|o| o.timed_out),
            tests_could_not_run: last.and_then(Verification::unread_cause),
        });
        let summary = match self.review_note() {
            Some(note) => format!("{summary}\n\n{note}"),
            None => summary,
        };
        let summary = match self.trace_unreproduced
            && self.tests_written.is_empty()
            && status == TaskStatus::Success
        {
            true => format!("{summary}\n\n{TRACE_UNREPRODUCED}"),
            false => summary,
        };
        let summary = match self.given_trace().is_some()
            && !self.spec.tests_first
            && !self.tests_written.is_empty()
            && status == TaskStatus::Success
        {
            true => format!(
                "{summary}\n\nThe trace's error was reproduced first, by a test in {}: it failed with that error before this change and passes now.",
                self.tests_written.join(", ")
            ),
            false => summary,
        };
        let editor_notes = self.files.finish(status.as_str());
        let summary = match self.files.unrestorable_note() {
            Some(note) => format!("{summary}\n\n{note}"),
            None => summary,
        };
        // It quotes the model and the tests: shown in a message box, kept short.
        let summary =
            crate::agent::output::bound_text(&summary, crate::agent::output::MAX_FIELD_BYTES)
                .into_owned();
        let result = TaskResult {
            task_id: self.spec.id.clone(),
            status,
            summary,
            changed_files: self.files.changed_files(),
            diff: self.files.diff(),
            iterations: self.iterations,
            tool_calls: self.tool_calls,
            tokens: self.tokens,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            editor_notes,
            candidates: std::mem::take(&mut self.candidate_log),
            review: std::mem::take(&mut self.review.verdicts),
            bisect: self.bisect_json.take(),
            tests_written: self.tests_written.clone(),
            plan: self.plan.to_json(),
            suspects: self.suspects.iter().map(|s| s.to_json()).collect(),
            coverage: self.coverage_json.take(),
        };
        self.event(
            EventKind::Status,
            format!("Finished: {}", status.as_str()),
            json!({
                "status": status.as_str(),
                "iterations": result.iterations,
                "toolCalls": result.tool_calls,
                "tokens": result.tokens,
                "elapsedMs": result.elapsed_ms,
            }),
        );
        result
    }
}

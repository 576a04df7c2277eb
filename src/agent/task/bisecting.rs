//! The debugging agent's history step (`fettle fix --since REV`,
//! `--bisect`, `agent.bisect`): when the tests fail before any change, the
//! git history is bisected (`agent::bisect`) and what it found — the commit
//! that broke the tests and its diff, or that the uncommitted changes did —
//! goes into every first message.

use serde_json::json;

use super::Task;
use crate::agent::bisect::{self, BisectOutcome, BisectSettings};
use crate::agent::isolated::CopyArea;
use crate::agent::types::{EventKind, TaskEvent};

impl Task {
    /// Bisects when the spec asks for it; sets `bisect_note` for the model.
    pub(super) async fn bisect_history(&mut self) {
        let Some(request) = self.spec.bisect.clone() else {
            return;
        };
        let Some(test_command) = self.spec.test_command.clone() else {
            self.status("No bisection: it needs a test command");
            return;
        };
        let parent = crate::agent::checkpoint::cache_dir().join("candidates");
        let area = match CopyArea::new(&parent) {
            Ok(area) => area,
            Err(err) => {
                self.status(&format!(
                    "No bisection: cannot create its folder under {}: {err}",
                    parent.display()
                ));
                return;
            }
        };
        self.status(
            match &request.since {
                Some(rev) => format!("Bisecting the git history since {rev}"),
                None => {
                    "Bisecting the git history (walking back to a commit that passes)".to_owned()
                }
            }
            .as_str(),
        );
        let host = self.host.clone();
        let task_id = self.spec.id.clone();
        let progress = move |text: String| {
            host.event(TaskEvent {
                task_id: task_id.clone(),
                kind: EventKind::Status,
                text,
                data: json!({ "bisect": true }),
            });
        };
        let settings = BisectSettings {
            root: self.files.root(),
            test_command: &test_command,
            test_timeout: self.spec.test_timeout,
            allow_env: &self.spec.allow_env,
            limits: self.spec.limits,
            sandbox: self.spec.sandbox.as_ref(),
            since: request.since.as_deref(),
        };
        let outcome = bisect::bisect(&settings, &area, &progress, &self.cancel).await;
        match outcome {
            Ok(outcome) => {
                let text = match &outcome {
                    BisectOutcome::Found {
                        first_bad, steps, ..
                    } => format!(
                        "Bisect: the tests broke at {} \"{}\" ({steps} test runs)",
                        first_bad.sha.get(..10).unwrap_or(&first_bad.sha),
                        first_bad.subject
                    ),
                    BisectOutcome::Uncommitted { .. } => {
                        "Bisect: the tests pass at HEAD; the failure is in the uncommitted changes"
                            .to_owned()
                    }
                    BisectOutcome::NoGoodCommit { tried } => {
                        format!("Bisect: no earlier commit passes ({tried} tried)")
                    }
                };
                let data = bisect::to_json(&outcome);
                self.event(EventKind::Verify, text, json!({ "bisect": data }));
                self.bisect_json = Some(data);
                self.bisect_note = Some(bisect::for_model(&outcome));
            }
            Err(why) => {
                self.status(&format!("No bisection: {why}"));
                self.bisect_json = Some(json!({ "error": why }));
            }
        }
    }
}

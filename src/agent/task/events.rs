//! What a task says: its messages to the model (redacted on the way in)
//! and its events to the user (bounded in size), and the shapes they share.

use serde_json::json;

use super::check;
use super::files::CommandEffects;
use super::Task;
use crate::agent::types::{EventKind, TaskEvent};
use crate::model::Message;

impl Task {
    pub(super) fn push(&mut self, mut message: Message) {
        // Nothing secret leaves the machine: every message is redacted once,
        // when it enters the conversation.
        if let std::borrow::Cow::Owned(redacted) =
            self.redactor.redact_in_sequence(&message.content)
        {
            message.content = redacted;
        }
        self.messages.push(message);
    }

    pub(super) fn event(&self, kind: EventKind, mut text: String, mut data: serde_json::Value) {
        // Each event, and all of them together, within fixed sizes: the
        // editor and `--json` must not receive what a command wrote.
        let last = kind == EventKind::Status && data.get("status").is_some();
        self.event_budget.lock().shape(&mut text, &mut data, last);
        self.host.event(TaskEvent {
            task_id: self.spec.id.clone(),
            kind,
            text,
            data,
        });
    }

    /// Tells the user (an event) what a command changed in the workspace;
    /// returns the same for the model.
    pub(super) fn command_effects(&self, effects: &CommandEffects, who: &str) -> Option<String> {
        let text = effects.describe(who)?;
        let changes: Vec<serde_json::Value> = effects
            .changes
            .iter()
            .map(|(path, change, lost)| {
                json!({ "path": path, "change": change.as_str(), "restorable": lost.is_none() })
            })
            .collect();
        self.event(
            EventKind::Status,
            text.clone(),
            json!({ "commandChanges": changes }),
        );
        Some(text)
    }

    pub(super) fn status(&self, text: &str) {
        self.event(EventKind::Status, text.to_owned(), json!({}));
    }
}

pub(super) fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub(super) fn score_json(score: &check::Score) -> serde_json::Value {
    json!({
        "rejected": score.rejected,
        "syntaxErrors": score.syntax_errors,
        "checkerErrors": score.checker_errors,
        "broken": score.broken,
        "failed": score.failed,
        "passed": score.passed,
    })
}

//! One attempt of a single line: model turns, each running the tools it
//! calls, until one ends without a tool call (its code, if any, applied),
//! within the task's budget.

use super::explain::StopCause;
use super::{prompt, Task, MAX_MALFORMED_TURNS};
use crate::model::Message;

impl Task {
    /// Model turns until one ends without a tool call.
    pub(super) async fn act(&mut self) -> Result<(), StopCause> {
        let mut malformed = 0;
        self.edits_in_attempt = 0;
        self.answer_note = None;
        self.code_refused = None;
        self.same_code_again = 0;
        self.answer_cap = None;
        // Where the attempt starts: a retry within it starts there again.
        let start_len = self.messages.len();
        let before = self.files.capture();
        let dirty_before = self.dirty;
        loop {
            self.check_budget()?;
            // The sampling of a retry stays (`same_code_again`), the verdict
            // on the last answer goes.
            self.answered_the_same_code = false;
            self.repeated_an_attempt = false;
            let turn = self.model_turn().await?;
            let calls = turn.tool_calls.clone();
            self.push(Message {
                tool_calls: calls.clone(),
                ..Message::assistant(turn.text.clone())
            });
            if !turn.text.trim().is_empty() {
                self.last_text = turn.text.trim().to_owned();
            }
            if calls.is_empty() {
                if let Some(note) = turn.note {
                    // A malformed answer: tell the model and let it retry,
                    // a few times.
                    malformed += 1;
                    if malformed > MAX_MALFORMED_TURNS {
                        return Err(StopCause::Model(format!(
                            "{MAX_MALFORMED_TURNS} malformed answers in a row; the last: {note}"
                        )));
                    }
                    self.push(Message::user(prompt::defuse(&note).into_owned()));
                    continue;
                }
                if self.edits_in_attempt == 0 && !self.spec.asks_a_question() {
                    // Code instead of an edit call: the model still said
                    // what to change. Not after edits: a summary that
                    // quotes code must not undo them. Not for a question:
                    // code in an answer is an example.
                    self.answer_note = self.apply_answer_code(&turn.text).await?;
                }
                self.undo_a_repeat(&before, dirty_before).await;
                if self.ask_again_for_the_same_code(start_len) {
                    continue;
                }
                return Ok(());
            }
            let results = self.run_tools(&calls).await?;
            for message in results {
                self.push(message);
            }
        }
    }

    pub(super) fn check_budget(&self) -> Result<(), StopCause> {
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        let budget = &self.spec.budget;
        if self.tool_calls >= budget.max_tool_calls {
            return Err(StopCause::ToolCalls);
        }
        if self.tokens.total() >= budget.max_tokens {
            return Err(StopCause::Tokens);
        }
        if self.started.elapsed() >= budget.timeout {
            return Err(StopCause::Timeout);
        }
        Ok(())
    }

    pub(super) fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.started + self.spec.budget.timeout)
    }
}

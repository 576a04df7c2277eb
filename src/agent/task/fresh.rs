//! A local model starts each attempt afresh: the system prompt and one
//! message with the code and the test results as they are now, plus a line
//! on each earlier attempt. A small model shown its own earlier answer
//! copies it (measured: the same unchanged function five attempts in a
//! row, at temperature 0.7), and the whole history would cost prefill time
//! on every turn.

use super::check::Verification;
use super::{prompt, Task};
use crate::model::Message;

/// The most of an attempt's diff its note quotes.
const MAX_NOTE_DIFF_BYTES: usize = 800;
/// Answers that repeat the code as it is, asked again within one attempt.
const SAME_CODE_RETRIES: u32 = 2;
/// Room beyond the copied code's length for a retry's answer.
const SAME_CODE_SLACK_TOKENS: u32 = 96;

/// Said when an attempt changed nothing and the tests passed before too.
const NOTHING_DONE: &str = "Nothing was changed. The tests passed before any change too, so they cannot show the goal reached — and with nothing changed, it is not: change the code the goal is about.";

impl Task {
    /// Whether the workspace is as it was while the tests passed before
    /// any change too: then "the tests pass" is not success (seen: the
    /// 1.5B, asked to fix a trace's crash that no test shows, answered
    /// with code as it was, and the task ended "success" with no change).
    pub(super) fn nothing_done(&self) -> bool {
        self.passed_before && !self.spec.asks_a_question() && self.files.changed_files().is_empty()
    }

    /// Tells the model that its attempt changed nothing, for the next.
    pub(super) fn ask_for_a_change(&mut self, iteration: u32, v: &Verification) {
        self.status(
            "Nothing changed, and the tests passed before too: the goal is not reached yet",
        );
        let note = match self.answer_note.take() {
            Some(answer) => format!("{answer}\n{NOTHING_DONE}"),
            None => NOTHING_DONE.to_owned(),
        };
        if self.compact_prompt() {
            self.note_attempt(iteration, None, Some(&note), v, false);
            self.fresh_conversation(Some(v));
        } else {
            self.push(Message::user(prompt::defuse(&note).into_owned()));
        }
    }

    /// Whether to ask again, within the attempt, after an answer whose code
    /// was only the code as it is (shown the code to fix, a small model
    /// often copies it) or led back to a state already tested: that answer
    /// is dropped (the conversation goes back to `start_len` messages, the
    /// attempt's start) and the same prompt sampled hotter, up to
    /// [`SAME_CODE_RETRIES`] times. The prompt is unchanged, so the engine
    /// reuses it whole: a retry costs only the answer.
    pub(super) fn ask_again_for_the_same_code(&mut self, start_len: usize) -> bool {
        if !self.compact_prompt()
            || !self.answered_the_same_code
            || self.same_code_again >= SAME_CODE_RETRIES
        {
            return false;
        }
        self.same_code_again += 1;
        // The fix is about as long as the code it repeated; hotter sampling
        // may ramble instead (seen: 8 minutes of it on a loaded machine),
        // so the retry gets that much room and a bit.
        let answered: usize = self
            .messages
            .iter()
            .skip(start_len)
            .filter(|m| m.role == crate::model::Role::Assistant)
            .map(|m| {
                let calls = m
                    .tool_calls
                    .iter()
                    .map(|c| c.arguments.to_string())
                    .collect::<String>();
                self.model.count_tokens(&m.content) + self.model.count_tokens(&calls)
            })
            .sum();
        if answered > 0 {
            self.answer_cap = Some(answered as u32 * 3 / 2 + SAME_CODE_SLACK_TOKENS);
        }
        self.messages.truncate(start_len.max(1));
        self.answer_note = None;
        self.code_refused = None;
        self.status(match self.repeated_an_attempt {
            true => "The model's answer repeated code already tested; asking again",
            false => "The model's answer repeated the code as it is; asking again",
        });
        true
    }

    /// Records what a failed attempt did, for the attempts to come.
    pub(super) fn note_attempt(
        &mut self,
        iteration: u32,
        diff: Option<&str>,
        answer_note: Option<&str>,
        v: &Verification,
        rolled_back: bool,
    ) {
        let what = match (diff, answer_note) {
            (Some(diff), _) => format!(
                "changed the code:\n{}",
                crate::agent::output::head_tail(diff.trim_end(), MAX_NOTE_DIFF_BYTES, 30)
            ),
            (None, Some(note)) => note.to_owned(),
            (None, None) => "changed nothing".to_owned(),
        };
        let mut verdict = v.score.describe();
        if let Some(problem) = v.first_problem() {
            verdict.push_str(&format!(" (first: {problem})"));
        }
        if rolled_back {
            verdict.push_str(" — no better than the best so far, so it was undone");
        }
        self.attempt_notes
            .push(format!("Attempt {iteration}: {what}\nResult: {verdict}."));
    }

    /// Replaces the conversation with a fresh start from the files' current
    /// state. `current` is the verification of that state, or `None` when
    /// the attempt was rolled back (the brief of the state restored holds).
    pub(super) fn fresh_conversation(&mut self, current: Option<&Verification>) {
        if let Some(v) = current {
            self.failure_focus = self.focus_of_failure(v);
            self.brief = self.first_message(v);
        }
        let mut text = self.brief.clone();
        text.push_str(&self.plan_for_prompt());
        text.push_str("\nEarlier attempts, none of which passed (do not repeat them; try something different):\n");
        for note in &self.attempt_notes {
            // Quotes the model's code and the workspace's paths.
            text.push_str(&prompt::defuse(note));
            text.push('\n');
        }
        let system = self.boundary.local_system_prompt();
        self.messages.clear();
        self.push(Message::system(system));
        self.push(Message::user(text));
    }
}

//! For a local model: every state of the files whose tests ran, by its code
//! (layout, comments and docstrings aside). An answer that leads back to
//! one of them would only get the same verdict again — measured: the 1.5B
//! model wrote the same `if hare is None` fix eight attempts in a row, and
//! a retry that only dropped a comment cost a test run — so it is undone at
//! once and the model asked again, without a test run.

use std::path::PathBuf;

use super::files::TreeBytes;
use super::Task;
use crate::edit::code_fingerprint;
use crate::syntax::Language;

/// A state of the files: each file whose code differs from before the
/// task, with its code's fingerprint (`None`: the file is gone).
pub(super) type StateKey = Vec<(PathBuf, Option<u64>)>;

/// What the model is told when its answer led back to a tested state.
pub(super) const REPEATED_AN_ATTEMPT: &str =
    "it repeated code already tested (the same code, comments and layout aside)";

impl Task {
    /// The files' state as it is now.
    pub(super) fn state_key(&self) -> StateKey {
        let fingerprint = |path: &PathBuf, bytes: Option<&[u8]>| {
            bytes.map(|b| code_fingerprint(Language::from_path(path), &String::from_utf8_lossy(b)))
        };
        let mut key: StateKey = self
            .files
            .changed_files()
            .into_iter()
            .filter_map(|path| {
                let now = fingerprint(&path, self.files.bytes(&path).as_deref());
                let before = fingerprint(&path, self.files.original(&path));
                (now != before).then_some((path, now))
            })
            .collect();
        key.sort();
        key
    }

    /// Notes the current state as tested (compact prompt only).
    pub(super) fn remember_tested_state(&mut self) {
        if self.compact_prompt() {
            let key = self.state_key();
            self.tested_states.insert(key);
        }
    }

    /// When this attempt's edits lead back to a tested state: undoes them
    /// (the files go back to `before`, the attempt's start, which was
    /// verified as `dirty_before` says) and marks the answer as one to ask
    /// again for. Returns whether it did.
    pub(super) async fn undo_a_repeat(&mut self, before: &TreeBytes, dirty_before: bool) -> bool {
        if !self.compact_prompt()
            || self.edits_in_attempt == 0
            || !self.tested_states.contains(&self.state_key())
        {
            return false;
        }
        if let Err(err) = self.files.restore(before).await {
            // Then the tests judge it, as any other attempt.
            tracing::warn!(%err, "could not undo an attempt that repeated a tested state");
            return false;
        }
        self.edits_in_attempt = 0;
        self.dirty = dirty_before;
        self.answered_the_same_code = true;
        self.repeated_an_attempt = true;
        self.status(&format!(
            "The model's answer was not tried: {REPEATED_AN_ATTEMPT}"
        ));
        self.code_refused = Some(REPEATED_AN_ATTEMPT.to_owned());
        self.answer_note = Some(format!(
            "Your answer's code was not tried: {REPEATED_AN_ATTEMPT}; nothing changed."
        ));
        // `last_text` stays: it says what the kept change is, and a success
        // after this is that change's, not this answer's.
        true
    }
}

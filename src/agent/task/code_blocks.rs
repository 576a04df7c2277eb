//! An attempt that ends with code in the model's words but no edit: the
//! fenced blocks are tried as edits (see `agent::edit::blocks`), through the
//! same path as an `edit` call, before the tests run.

use std::path::PathBuf;

use serde_json::json;

use super::explain::StopCause;
use super::Task;
use crate::agent::edit::{
    defined_names, diff_edits, fenced_blocks, line_fixes, plan_block, Candidate, DiffEdit, NoEdit,
};
use crate::model::ToolCall;
use crate::syntax::Language;

/// Files a block is tried against at most (the index may know many
/// definers of a common name).
const MAX_CANDIDATES: usize = 12;

impl Task {
    /// Applies the code of `answer` — its `WRONG:`/`FIXED:` lines, else
    /// its fenced blocks — when the attempt changed nothing else; returns
    /// what happened, for the model's next message (`None` when the answer
    /// had no code).
    pub(super) async fn apply_answer_code(
        &mut self,
        answer: &str,
    ) -> Result<Option<String>, StopCause> {
        self.answered_the_same_code = false;
        let lines = self.line_fix_calls(&line_fixes(answer));
        if !lines.calls.is_empty() {
            return self
                .apply_answer_calls(lines.calls, &lines.replaced, &lines.refused, false)
                .await;
        }
        // A line fix that could not be placed leaves the answer's blocks
        // (a whole function after the pair) their chance.
        let mut blocks = fenced_blocks(answer);
        // Tests written first, in an answer cut off at its token limit:
        // the tests complete before the cut (index of that block, if any).
        let cut = self.cut_test_block(answer).map(|block| {
            blocks.push(block);
            blocks.len() - 1
        });
        let mut all_unchanged = lines.all_unchanged;
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut replaced: Vec<String> = Vec::new();
        let mut refused: Vec<String> = lines.refused;
        for (i, block) in blocks.iter().enumerate() {
            if let Some(hunks) = diff_edits(&block.code) {
                self.code_answers += 1;
                all_unchanged = false;
                match self.diff_calls(i, &hunks, block.file_hint.as_deref()) {
                    Ok(diff_calls) => {
                        for call in diff_calls {
                            let what = format!(
                                "lines of {} (a diff hunk)",
                                call.arguments["path"].as_str().unwrap_or_default()
                            );
                            if !replaced.contains(&what) {
                                replaced.push(what);
                            }
                            calls.push(call);
                        }
                    }
                    Err(why) => refused.push(format!("code block {}: {why}", i + 1)),
                }
                continue;
            }
            let names = defined_names(block);
            if names.is_empty() {
                // Examples, commands and output are blocks too: not edits.
                continue;
            }
            if let Some(call) = self.new_test_file(i, block) {
                self.code_answers += 1;
                all_unchanged = false;
                let cut_note = match cut == Some(i) {
                    true => " (its complete lines: the answer was cut off at its token limit)",
                    false => "",
                };
                replaced.push(format!(
                    "the new file {}{cut_note}",
                    call.arguments["path"].as_str().unwrap_or("")
                ));
                calls.push(call);
                continue;
            }
            self.code_answers += 1;
            let paths = self.block_candidates(&names, block.file_hint.as_deref());
            let texts: Vec<(String, Language, String)> = paths
                .iter()
                .filter_map(|p| {
                    let language = Language::from_path(p)?;
                    Some((self.files.paths.relative(p), language, self.files.text(p)?))
                })
                .collect();
            let candidates: Vec<Candidate<'_>> = texts
                .iter()
                .map(|(path, language, text)| Candidate {
                    path,
                    language: *language,
                    text,
                })
                .collect();
            match plan_block(block, &candidates) {
                Ok(edits) => {
                    for edit in edits {
                        for name in &edit.names {
                            let what = format!("`{name}` in {}", edit.path);
                            if !replaced.contains(&what) {
                                replaced.push(what);
                            }
                        }
                        // A later block for the same definition wins: the
                        // model's last word.
                        calls.retain(|c| {
                            c.arguments["path"] != edit.path.as_str()
                                || c.arguments["search"] != edit.search.as_str()
                        });
                        calls.push(ToolCall {
                            id: format!("answer-code-{}-{}", i + 1, calls.len() + 1),
                            name: "edit".to_owned(),
                            arguments: json!({
                                "path": edit.path,
                                "search": edit.search,
                                "replace": edit.replace,
                            }),
                        });
                    }
                }
                // No file has its definitions (or none was a candidate).
                Err(why @ (NoEdit::NoDefinitions | NoEdit::NoMatch(_))) => {
                    match self.added_tests(i, block) {
                        Some(call) => {
                            replaced.push(format!(
                                "new tests at the end of {}",
                                call.arguments["path"].as_str().unwrap_or("")
                            ));
                            calls.push(call);
                        }
                        None if matches!(why, NoEdit::NoMatch(_)) => {
                            refused.push(format!("code block {}: {why}", i + 1));
                        }
                        None => {}
                    }
                }
                Err(why) => {
                    all_unchanged &= matches!(why, NoEdit::Unchanged(_));
                    refused.push(format!("code block {}: {why}", i + 1));
                }
            }
        }
        self.apply_answer_calls(calls, &replaced, &refused, all_unchanged)
            .await
    }

    /// Applies the edits an answer's code became (`replaced` says what
    /// each does), or tells the model why none could be made.
    pub(super) async fn apply_answer_calls(
        &mut self,
        calls: Vec<ToolCall>,
        replaced: &[String],
        refused: &[String],
        all_unchanged: bool,
    ) -> Result<Option<String>, StopCause> {
        if calls.is_empty() {
            if refused.is_empty() {
                return Ok(None);
            }
            let text = format!(
                "Your answer's code was not applied ({}); nothing changed. Call edit, or answer with the whole corrected function in one fenced code block.",
                refused.join("; ")
            );
            self.status(&format!(
                "The code in the model's answer was not applied: {}",
                refused.join("; ")
            ));
            self.code_refused = Some(refused.join("; "));
            self.answered_the_same_code = all_unchanged;
            return Ok(Some(text));
        }
        self.status(&format!(
            "Applying the code in the model's answer as {} edit{}: {}",
            calls.len(),
            if calls.len() == 1 { "" } else { "s" },
            replaced.join(", ")
        ));
        let results = self.run_tools(&calls).await?;
        if self.edits_in_attempt > 0 {
            // The summary quotes the model's last words: here they were
            // code, so say what was done with it instead.
            self.last_text = format!("Replaced {} with the model's version.", replaced.join(", "));
        }
        let outcomes: Vec<String> = calls
            .iter()
            .zip(&results)
            .map(|(call, message)| {
                let path = call.arguments["path"].as_str().unwrap_or_default();
                let outcome = message
                    .content
                    .lines()
                    .filter(|l| !l.starts_with("<data-") && !l.starts_with("</data-"))
                    .collect::<Vec<_>>()
                    .join(" ");
                format!("{path}: {outcome}")
            })
            .collect();
        let mut text = format!(
            "Fettle applied the code of your answer as edits (each definition in place of the one with its name). {}",
            outcomes.join(" ")
        );
        if !refused.is_empty() {
            text.push_str(&format!(" Not applied: {}.", refused.join("; ")));
        }
        Ok(Some(text))
    }

    /// A diff's hunks as `edit` calls, each on the file its header names,
    /// else the file the block is labelled with, else the one file the
    /// task is about (touched, or the user's).
    fn diff_calls(
        &self,
        block: usize,
        hunks: &[DiffEdit],
        hint: Option<&str>,
    ) -> Result<Vec<ToolCall>, String> {
        if hunks.is_empty() {
            return Err("a diff with no hunk that can be applied (quote the lines themselves, not an elision)".to_owned());
        }
        let sole = || {
            let paths = self.block_candidates(&[], hint);
            match paths.as_slice() {
                [only] => Some(self.files.paths.relative(only)),
                _ => None,
            }
        };
        hunks
            .iter()
            .enumerate()
            .map(|(j, hunk)| {
                let path = hunk
                    .path
                    .clone()
                    .or_else(|| hint.map(str::to_owned))
                    .or_else(sole)
                    .ok_or_else(|| "a diff that names no file".to_owned())?;
                Ok(ToolCall {
                    id: format!("answer-diff-{}-{}", block + 1, j + 1),
                    name: "edit".to_owned(),
                    arguments: json!({
                        "path": path,
                        "search": hunk.search,
                        "replace": hunk.replace,
                    }),
                })
            })
            .collect()
    }

    /// The files a block defining `names` may be for: those the task
    /// touched, the user's file, the hinted file and the index's definers,
    /// writable ones only, at most [`MAX_CANDIDATES`].
    pub(super) fn block_candidates(&self, names: &[String], hint: Option<&str>) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.files.touched.clone();
        if let Some(focus) = &self.spec.focus {
            paths.push(focus.path.clone());
        }
        if let Some(path) = hint.and_then(|h| self.files.paths.resolve(h).ok()) {
            paths.push(path);
        }
        for name in names {
            for symbol in self.index.definitions(name) {
                paths.push(symbol.path.to_path_buf());
            }
        }
        let mut seen = std::collections::HashSet::new();
        paths.retain(|p| seen.insert(p.clone()));
        paths.retain(|p| {
            let rel = self.files.paths.relative(p);
            self.files.paths.check_writable(&rel, p).is_ok()
        });
        paths.truncate(MAX_CANDIDATES);
        paths
    }
}

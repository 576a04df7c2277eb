//! An answer that names the wrong line and its correction (`WRONG:` /
//! `FIXED:`, see `agent::edit::line_fix`) made into `edit` calls: each pair
//! is looked for in the suspects' files first (within the suspect's lines
//! when the line is there more than once), then in the files the task
//! touched or was given.

use std::path::PathBuf;

use serde_json::json;

use super::explain::StopCause;
use super::Task;
use crate::agent::edit::{line_edit, LineFix, NoLineFix};
use crate::model::ToolCall;

impl Task {
    pub(super) async fn apply_line_fixes(
        &mut self,
        fixes: &[LineFix],
    ) -> Result<Option<String>, StopCause> {
        let files = self.line_fix_files();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut replaced: Vec<String> = Vec::new();
        let mut refused: Vec<String> = Vec::new();
        let mut all_unchanged = true;
        for (i, fix) in fixes.iter().enumerate() {
            self.code_answers += 1;
            let mut why = NoLineFix::NotFound;
            let mut placed = None;
            for (path, prefer) in &files {
                let Some(text) = self.files.text(path) else {
                    continue;
                };
                match line_edit(&text, fix, *prefer) {
                    Ok(edit) => {
                        placed = Some((self.files.paths.relative(path), edit));
                        break;
                    }
                    // A file where the line is not is no news; any other
                    // reason is.
                    Err(NoLineFix::NotFound) => {}
                    Err(other) => why = other,
                }
            }
            let Some((path, edit)) = placed else {
                all_unchanged &= why == NoLineFix::Unchanged;
                refused.push(format!("line fix {}: {why}", i + 1));
                continue;
            };
            all_unchanged = false;
            replaced.push(format!("line {} of {path}", edit.line));
            calls.push(ToolCall {
                id: format!("answer-line-{}", i + 1),
                name: "edit".to_owned(),
                arguments: json!({ "path": path, "search": edit.search, "replace": edit.replace }),
            });
        }
        self.apply_answer_calls(calls, &replaced, &refused, all_unchanged)
            .await
    }

    /// Where a line fix may go, most likely first, each with the suspect's
    /// lines: the suspects' files, then those an answer's code may change.
    fn line_fix_files(&self) -> Vec<(PathBuf, Option<(usize, usize)>)> {
        let mut out: Vec<(PathBuf, Option<(usize, usize)>)> = Vec::new();
        for suspect in &self.suspects {
            let Ok(path) = self.files.paths.resolve(&suspect.path) else {
                continue;
            };
            if out.iter().all(|(p, _)| *p != path) {
                let lines = (suspect.lines.0 as usize, suspect.lines.1 as usize);
                out.push((path, Some(lines)));
            }
        }
        let writable: Vec<PathBuf> = self.block_candidates(&[], None);
        out.retain(|(p, _)| {
            let rel = self.files.paths.relative(p);
            self.files.paths.check_writable(&rel, p).is_ok() && !self.files.tests_kept.contains(p)
        });
        for path in writable {
            if out.iter().all(|(p, _)| *p != path) {
                out.push((path, None));
            }
        }
        out
    }
}

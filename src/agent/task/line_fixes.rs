//! An answer that names the wrong line and its correction (`WRONG:` /
//! `FIXED:`, see `agent::edit::line_fix`) made into `edit` calls: each pair
//! is looked for in the suspects' files first (within the suspect's lines
//! when the line is there more than once), then in the files the task
//! touched or was given.

use std::path::PathBuf;

use serde_json::json;

use super::Task;
use crate::agent::edit::{line_edit, LineFix, NoLineFix};
use crate::model::ToolCall;

/// The `edit` calls an answer's line fixes became, and why the others
/// could not be placed.
pub(super) struct LineFixCalls {
    pub calls: Vec<ToolCall>,
    pub replaced: Vec<String>,
    pub refused: Vec<String>,
    /// Every pair refused was the same code twice (none: false).
    pub all_unchanged: bool,
}

impl Task {
    pub(super) fn line_fix_calls(&mut self, fixes: &[LineFix]) -> LineFixCalls {
        let mut out = LineFixCalls {
            calls: Vec::new(),
            replaced: Vec::new(),
            refused: Vec::new(),
            all_unchanged: true,
        };
        if fixes.is_empty() {
            return out;
        }
        let files = self.line_fix_files();
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
                out.all_unchanged &= why == NoLineFix::Unchanged;
                out.refused.push(format!("line fix {}: {why}", i + 1));
                continue;
            };
            out.all_unchanged = false;
            out.replaced.push(format!("line {} of {path}", edit.line));
            out.calls.push(ToolCall {
                id: format!("answer-line-{}", i + 1),
                name: "edit".to_owned(),
                arguments: json!({ "path": path, "search": edit.search, "replace": edit.replace }),
            });
        }
        out
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

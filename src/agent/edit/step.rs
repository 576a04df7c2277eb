//! All the edits of one model turn, validated together: either every one
//! applies (and passes the lint guard) or nothing is written.
use std::io;
use std::path::{Path, PathBuf};

use super::{apply_edit, lines_phrase, lint_guard};
use crate::agent::fsutil::{from_lf, line_ending, to_lf, LineEnding};

/// One file operation requested by the model. Paths are already resolved
/// (see [`crate::agent::paths::WorkspacePaths`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileOp {
    Edit {
        path: PathBuf,
        search: String,
        replace: String,
    },
    /// Creates the file or replaces all of its content.
    Write { path: PathBuf, content: String },
}

impl FileOp {
    pub fn path(&self) -> &Path {
        match self {
            FileOp::Edit { path, .. } | FileOp::Write { path, .. } => path,
        }
    }
}

/// What to write to one file once the whole step is valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedChange {
    pub path: PathBuf,
    /// The current content; `None`: the file is new.
    pub old: Option<String>,
    pub new: String,
    /// Indexes into the step's ops of the ops on this file, in order.
    pub ops: Vec<usize>,
}

/// The outcome of one op, for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpReport {
    /// Index into the step's ops (messages say `#index+1`).
    pub index: usize,
    /// `Ok`: what was done (`"applied at lines 3-5 (exact match)"`).
    /// `Err`: why it was not applied.
    pub result: Result<String, String>,
    /// The op was valid but is not applied because another op of the step
    /// failed; resend it unchanged with the fixed ones. (`result` is `Err`.)
    pub held_back: bool,
}

/// Per-file state while the ops are applied in memory.
struct FileState {
    path: PathBuf,
    original: Option<String>,
    current: Option<String>,
    ops: Vec<usize>,
}

/// Applies `ops` in order, in memory: ops on the same file apply one after
/// the other; each changed file then passes [`lint_guard`] against its
/// original. `read` gives a file's current text (`None`: it does not exist;
/// the caller reads open editor buffers first).
///
/// Returns the changes to write, or `None` if any op failed: then nothing
/// may be written, and the reports of the valid ops say so (`held_back`).
pub fn plan_step(
    ops: &[FileOp],
    read: &mut dyn FnMut(&Path) -> io::Result<Option<String>>,
) -> (Option<Vec<PlannedChange>>, Vec<OpReport>) {
    let mut files: Vec<FileState> = Vec::new();
    let mut results: Vec<Result<String, String>> = Vec::with_capacity(ops.len());

    for (index, op) in ops.iter().enumerate() {
        let path = op.path();
        let slot = match files.iter().position(|f| f.path == path) {
            Some(slot) => slot,
            None => match read(path) {
                Ok(original) => {
                    files.push(FileState {
                        path: path.to_path_buf(),
                        current: original.clone(),
                        original,
                        ops: Vec::new(),
                    });
                    files.len() - 1
                }
                Err(err) => {
                    results.push(Err(format!("could not read the file: {err}")));
                    continue;
                }
            },
        };
        let file = &mut files[slot];
        file.ops.push(index);
        results.push(apply_op(op, file));
    }

    // The lint guard judges each file's final text: a step may break a file
    // in one edit and mend it in the next.
    for file in &files {
        if file.ops.iter().any(|&i| results[i].is_err()) {
            continue;
        }
        let Some(new) = &file.current else { continue };
        let old = file.original.as_deref().unwrap_or("");
        if let Err(rejection) = lint_guard(&file.path, old, new) {
            let Some((&last, earlier)) = file.ops.split_last() else {
                continue;
            };
            results[last] = Err(rejection.to_string());
            for &i in earlier {
                results[i] = Err(format!(
                    "not applied: after edit #{} the file would not parse (see there)",
                    last + 1
                ));
            }
        }
    }

    let failed: Vec<usize> = (0..results.len())
        .filter(|&i| results[i].is_err())
        .collect();
    if failed.is_empty() {
        let reports = results
            .into_iter()
            .enumerate()
            .map(|(index, result)| OpReport {
                index,
                result,
                held_back: false,
            })
            .collect();
        let changes = files
            .into_iter()
            .filter_map(|f| {
                let new = f.current?;
                (f.original.as_deref() != Some(new.as_str())).then_some(PlannedChange {
                    path: f.path,
                    old: f.original,
                    new,
                    ops: f.ops,
                })
            })
            .collect();
        return (Some(changes), reports);
    }

    let failed_list = failed
        .iter()
        .map(|i| format!("#{}", i + 1))
        .collect::<Vec<_>>()
        .join(", ");
    let which = if failed.len() == 1 { "edit" } else { "edits" };
    let reports = results
        .into_iter()
        .enumerate()
        .map(|(index, result)| match result {
            Ok(_) => OpReport {
                index,
                result: Err(format!(
                    "not applied, though valid: {which} {failed_list} failed, and nothing in \
                     this step was written — resend this edit unchanged together with the \
                     corrected ones"
                )),
                held_back: true,
            },
            Err(reason) => OpReport {
                index,
                result: Err(reason),
                held_back: false,
            },
        })
        .collect();
    (None, reports)
}

fn apply_op(op: &FileOp, file: &mut FileState) -> Result<String, String> {
    match op {
        FileOp::Write { content, .. } => {
            // A CRLF file stays CRLF even when the model writes LF.
            let content = match file.original.as_deref().map(line_ending) {
                Some(LineEnding::CrLf) => from_lf(&to_lf(content), LineEnding::CrLf),
                _ => content.clone(),
            };
            let lines = content.lines().count();
            let verb = if file.current.is_some() {
                "replaced the whole file"
            } else {
                "created the file"
            };
            file.current = Some(content);
            Ok(format!("{verb} ({lines} lines)"))
        }
        FileOp::Edit {
            search, replace, ..
        } => {
            let Some(current) = &file.current else {
                return Err(
                    "the file does not exist; to create it, write its whole content".to_owned(),
                );
            };
            let applied = apply_edit(current, search, replace).map_err(|e| e.to_string())?;
            let message = format!(
                "applied at {} ({})",
                lines_phrase(applied.start_line, applied.end_line),
                applied.strategy
            );
            file.current = Some(applied.text);
            Ok(message)
        }
    }
}

//! Undoing a task, for `fettle.undo` and `fettle fix --undo` alike: the
//! open buffers it touched first (through the editor, so that its own undo
//! works too), then the disk. Never discards a change made after the task:
//! a file changed since (on disk or in its open buffer) is skipped and
//! named, unless `force`.
use std::io;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;

use super::checkpoint::{Checkpoint, CheckpointStore, RestoreReport};
use super::host::{BufferEdit, SaveOutcome};

/// The editor's open buffers, as undo needs them.
pub trait Buffers: Sync {
    /// The open buffer's text of `path`, if it is open.
    fn text(&self, path: &Path) -> Option<String>;
    /// Replaces the open buffer's `old` text with `new` through the editor.
    fn replace<'a>(
        &'a self,
        path: &'a Path,
        old: &'a str,
        new: &'a str,
    ) -> BoxFuture<'a, BufferEdit>;
    /// Asks the editor to save the open buffers of `paths`.
    fn save<'a>(&'a self, paths: &'a [PathBuf]) -> BoxFuture<'a, SaveOutcome>;
}

/// No editor (the terminal): only the disk is restored.
pub struct NoBuffers;

impl Buffers for NoBuffers {
    fn text(&self, _: &Path) -> Option<String> {
        None
    }
    fn replace<'a>(&'a self, _: &'a Path, _: &'a str, _: &'a str) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async { BufferEdit::NotOpen })
    }
    fn save<'a>(&'a self, paths: &'a [PathBuf]) -> BoxFuture<'a, SaveOutcome> {
        Box::pin(async move { SaveOutcome::all_failed(paths, "there is no editor to save it") })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("cannot read checkpoints: {0}")]
    Store(io::Error),
    #[error("{0}")]
    NotFound(String),
    #[error("undo failed: {0}")]
    Restore(io::Error),
}

/// What an undo did.
#[derive(Debug)]
pub struct Undone {
    pub task_id: String,
    /// The disk.
    pub report: RestoreReport,
    /// Open buffers put back through the editor.
    pub buffers: Vec<PathBuf>,
    /// What the user must know about the buffers (paths relative to the root).
    pub notes: Vec<String>,
}

/// The checkpoint of `task` in the workspace at `root` (default: the latest).
pub fn checkpoint(root: &Path, task: Option<&str>) -> Result<Checkpoint, UndoError> {
    let store = CheckpointStore::for_workspace(root).map_err(UndoError::Store)?;
    match task {
        // The store's error names the task already.
        Some(id) => store
            .open(id)
            .map_err(|err| UndoError::NotFound(err.to_string())),
        None => {
            // A checkpoint changed behind Fettle's back may be the latest
            // task: undo nothing rather than an older task unasked.
            if let Some(why) = store.refused().into_iter().next() {
                return Err(UndoError::NotFound(format!(
                    "{why} (or undo an earlier task with --task ID / {{\"taskId\"}})"
                )));
            }
            store
                .latest_that_touched()
                .map_err(UndoError::Store)?
                .ok_or_else(|| {
                    UndoError::NotFound(format!(
                        "no task to undo in {} (none has changed a file)",
                        root.display()
                    ))
                })
        }
    }
}

/// `path` as the user names it: relative to the workspace root when inside.
pub fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Undoes `task` (default: the latest that touched a file) in the
/// workspace at `root`.
pub async fn undo(
    root: &Path,
    task: Option<&str>,
    force: bool,
    buffers: &dyn Buffers,
) -> Result<Undone, UndoError> {
    let checkpoint = checkpoint(root, task)?;
    let (changed, notes) = restore_buffers(root, &checkpoint, force, buffers).await;
    let report = checkpoint
        .restore_with(force, &|p| buffers.text(p))
        .map_err(UndoError::Restore)?;
    Ok(Undone {
        task_id: checkpoint.task_id().to_owned(),
        report,
        buffers: changed,
        notes,
    })
}

/// Puts every open buffer the task touched back to the file's original
/// (unless it changed since the task), and lets the editor save it. Returns
/// the buffers changed and what the user must know.
async fn restore_buffers(
    root: &Path,
    checkpoint: &Checkpoint,
    force: bool,
    buffers: &dyn Buffers,
) -> (Vec<PathBuf>, Vec<String>) {
    let rel = |p: &Path| relative(root, p);
    let mut changed = Vec::new();
    let mut notes = Vec::new();
    for path in checkpoint.touched() {
        let Some(current) = buffers.text(&path) else {
            continue;
        };
        match checkpoint.judge(&path, Some(&current), force) {
            // Refused: the disk restore refuses it too and reports why.
            Ok(Some(_)) | Err(_) => continue,
            Ok(None) => {}
        }
        let original = match checkpoint.original(&path) {
            Ok(Some(original)) => original,
            _ => continue,
        };
        let Some(bytes) = original.bytes else {
            notes.push(format!(
                "{}: the task created this file; it is deleted, but its buffer is still open: close it without saving (Vim: `:bd!`)",
                rel(&path)
            ));
            continue;
        };
        let Ok(target) = String::from_utf8(bytes) else {
            continue;
        };
        if target != current {
            let outcome = buffers.replace(&path, &current, &target).await;
            tracing::info!(path = %path.display(), ?outcome, "undo: buffer");
            if outcome != BufferEdit::Applied {
                notes.push(format!(
                    "{}: the editor did not take the undo ({outcome:?}); the file on disk is restored, the buffer is not: reload it from disk",
                    rel(&path)
                ));
                continue;
            }
            changed.push(path.clone());
        }
        if std::fs::read(&path).ok().as_deref() != Some(target.as_bytes()) {
            let saved = buffers.save(std::slice::from_ref(&path)).await;
            let on_disk = std::fs::read(&path).ok();
            if !saved.saved.contains(&path) || on_disk.as_deref() != Some(target.as_bytes()) {
                notes.push(format!(
                    "{}: the editor did not save the restored buffer, so Fettle wrote the file itself; the buffer holds the same text but is still marked modified. Save it (Vim: `:w!`) or reload it (Vim: `:e!`); nothing is lost either way",
                    rel(&path)
                ));
            }
        }
    }
    (changed, notes)
}

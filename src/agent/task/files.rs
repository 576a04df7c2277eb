//! Reading and writing the workspace for the task: open editor buffers win
//! over the disk, every first write is checkpointed, steps are all-or-nothing,
//! and a buffer the user is typing in is re-read rather than overwritten.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::checkpoint::{Checkpoint, CheckpointStore};
use crate::agent::edit::{plan_step, FileOp, OpReport};
use crate::agent::fsutil;
use crate::agent::host::{BufferEdit, Host};
use crate::agent::paths::WorkspacePaths;

mod side_effects;
pub use side_effects::CommandEffects;

/// Checkpoints of finished tasks kept per workspace.
const KEEP_CHECKPOINTS: usize = 20;

/// How often a change is re-planned when the user keeps typing in the buffer.
const CONFLICT_RETRIES: usize = 3;

/// The bytes of some files (`None`: the file does not exist).
pub type TreeBytes = BTreeMap<PathBuf, Option<Vec<u8>>>;

pub struct Files {
    pub paths: WorkspacePaths,
    host: Arc<dyn Host>,
    store: CheckpointStore,
    checkpoint: Option<Checkpoint>,
    task_id: String,
    goal: String,
    /// Files the task wrote, in first-touch order.
    pub touched: Vec<PathBuf>,
    /// Their bytes before the task (for the diff and rollback).
    originals: TreeBytes,
    /// The editor's text of those that were open, before the task (it may
    /// hold unsaved changes the disk does not).
    original_buffers: BTreeMap<PathBuf, String>,
    /// Files the task actually wrote (not only checkpointed).
    written: std::collections::BTreeSet<PathBuf>,
    /// What commands changed, and the directories the task created.
    effects: side_effects::Effects,
}

impl Files {
    pub fn new(
        paths: WorkspacePaths,
        host: Arc<dyn Host>,
        store: CheckpointStore,
        task_id: String,
        goal: String,
    ) -> Self {
        Self {
            paths,
            host,
            store,
            checkpoint: None,
            task_id,
            goal,
            touched: Vec::new(),
            originals: BTreeMap::new(),
            original_buffers: BTreeMap::new(),
            written: Default::default(),
            effects: Default::default(),
        }
    }

    pub fn root(&self) -> &Path {
        self.paths.root()
    }

    /// The current text of `path`: the open buffer, else the disk. `Ok(None)`
    /// when the file does not exist.
    pub fn read(&self, path: &Path) -> io::Result<Option<String>> {
        if let Some(text) = self.host.buffer(path) {
            return Ok(Some(text));
        }
        match std::fs::read(path) {
            Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} is not UTF-8 text; Fettle does not read or edit binary files",
                        self.paths.relative(path)
                    ),
                )
            }),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// `read` for callers that only care about text.
    pub fn text(&self, path: &Path) -> Option<String> {
        self.read(path).ok().flatten()
    }

    /// Validates every op of one model turn, then writes them all (or, when
    /// any op fails, none).
    pub async fn apply_step(&mut self, ops: &[FileOp]) -> Vec<OpReport> {
        let paths: Vec<PathBuf> = ops.iter().map(|op| op.path().to_path_buf()).collect();
        self.host.settle(&paths).await;
        let (planned, mut reports) = plan_step(ops, &mut |p: &Path| self.read(p));
        let Some(changes) = planned else {
            return reports;
        };
        for change in changes {
            let mut change = change;
            let mut tries = 0;
            loop {
                match self
                    .put(&change.path, change.old.as_deref(), &change.new)
                    .await
                {
                    Ok(()) => break,
                    Err(PutError::Changed) if tries < CONFLICT_RETRIES => {
                        tries += 1;
                        self.host.settle(std::slice::from_ref(&change.path)).await;
                        self.refresh_original_buffer(&change.path);
                        tracing::info!(path = %change.path.display(), tries, "buffer changed under the edit; planning again");
                        let subset: Vec<FileOp> = change
                            .ops
                            .iter()
                            .filter_map(|i| ops.get(*i).cloned())
                            .collect();
                        let (again, sub_reports) = plan_step(&subset, &mut |p: &Path| self.read(p));
                        match again.and_then(|mut v| v.pop()) {
                            Some(next) => {
                                // Keep the indexes into this step's ops, not the subset's.
                                let indexes = std::mem::take(&mut change.ops);
                                change = next;
                                change.ops = indexes;
                            }
                            None => {
                                let why = sub_reports
                                    .iter()
                                    .find_map(|r| r.result.as_ref().err().cloned())
                                    .unwrap_or_default();
                                fail(&mut reports, &change.ops, &format!(
                                    "the file changed in the editor while this edit was being applied, and the edit no longer applies: {why}"
                                ));
                                break;
                            }
                        }
                    }
                    Err(err) => {
                        fail(&mut reports, &change.ops, &err.to_string());
                        break;
                    }
                }
            }
        }
        reports
    }

    /// Writes `new` to `path` (through the editor when it is open there, and
    /// on disk, where the tests read it), checkpointing the file first.
    async fn put(&mut self, path: &Path, old: Option<&str>, new: &str) -> Result<(), PutError> {
        self.remember(path)?;
        let buffer = self.host.buffer(path);
        if let Some(buffer) = buffer {
            if old.is_some_and(|old| old != buffer) {
                return Err(PutError::Changed);
            }
            match self.host.edit_buffer(path, &buffer, new).await {
                BufferEdit::Applied | BufferEdit::NotOpen => {}
                BufferEdit::Changed => return Err(PutError::Changed),
                BufferEdit::Failed(reason) => return Err(PutError::Editor(reason)),
            }
        }
        self.record_new_dirs(path).map_err(PutError::Io)?;
        fsutil::write_atomic(path, new.as_bytes(), None).map_err(PutError::Io)?;
        self.after_write(path, new.as_bytes())?;
        Ok(())
    }

    /// Checkpoints `path` before its first write (durably: a crash after this
    /// can still be undone).
    fn remember(&mut self, path: &Path) -> Result<(), PutError> {
        if self.originals.contains_key(path) {
            return Ok(());
        }
        let buffer = self.host.buffer(path);
        if self.checkpoint.is_none() {
            // Undo reaches back this many tasks per workspace.
            if let Err(err) = self.store.prune(KEEP_CHECKPOINTS) {
                tracing::warn!(%err, "could not prune old checkpoints");
            }
        }
        let checkpoint = match &mut self.checkpoint {
            Some(c) => c,
            None => self.checkpoint.insert(
                self.store
                    .begin(&self.task_id, &self.goal)
                    .map_err(PutError::Io)?,
            ),
        };
        checkpoint
            .record(path, buffer.as_deref())
            .map_err(PutError::Io)?;
        let before = match std::fs::read(path) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(PutError::Io(err)),
        };
        self.originals.insert(path.to_path_buf(), before);
        self.touched.push(path.to_path_buf());
        Ok(())
    }

    /// The user typed in a buffer the task had checkpointed but not yet
    /// written: what the task must give back is the buffer as it is now.
    fn refresh_original_buffer(&mut self, path: &Path) {
        if self.written.contains(path) {
            return;
        }
        let Some(buffer) = self.host.buffer(path) else {
            return;
        };
        if let Some(checkpoint) = &mut self.checkpoint {
            if let Err(err) = checkpoint.rerecord_buffer(path, &buffer) {
                tracing::warn!(%err, "could not update the checkpoint");
            }
        }
        self.original_buffers.insert(path.to_path_buf(), buffer);
    }

    fn after_write(&mut self, path: &Path, bytes: &[u8]) -> Result<(), PutError> {
        self.written.insert(path.to_path_buf());
        if let Some(checkpoint) = &mut self.checkpoint {
            checkpoint
                .record_result(path, bytes)
                .map_err(PutError::Io)?;
        }
        Ok(())
    }

    /// The current bytes of every touched file.
    pub fn capture(&self) -> TreeBytes {
        self.touched
            .iter()
            .map(|p| (p.clone(), std::fs::read(p).ok()))
            .collect()
    }

    /// The touched files as they were before the task.
    pub fn originals(&self) -> TreeBytes {
        self.originals.clone()
    }

    /// Puts the touched files back to `state` (files missing from `state`
    /// go back to their original). Returns the files it changed.
    pub async fn restore(&mut self, state: &TreeBytes) -> io::Result<Vec<PathBuf>> {
        let mut changed = Vec::new();
        for path in self.touched.clone() {
            let target = state
                .get(&path)
                .or_else(|| self.originals.get(&path))
                .cloned()
                .flatten();
            let current = std::fs::read(&path).ok();
            if current == target {
                continue;
            }
            match target {
                Some(bytes) => {
                    // Back to the original means the buffer as the user had
                    // it, unsaved changes included, not the bytes on disk.
                    let buffer_target = match self.original_buffers.get(&path) {
                        Some(text) if self.originals.get(&path) == Some(&Some(bytes.clone())) => {
                            Ok(text.clone())
                        }
                        _ => String::from_utf8(bytes.clone()),
                    };
                    if let (Some(buffer), Ok(text)) = (self.host.buffer(&path), buffer_target) {
                        let outcome = self.host.edit_buffer(&path, &buffer, &text).await;
                        if outcome != BufferEdit::Applied && outcome != BufferEdit::NotOpen {
                            tracing::warn!(path = %path.display(), ?outcome, "editor did not take the rollback; the file on disk is restored");
                        }
                    }
                    let mode = self.prepare_restore(&path, &bytes)?;
                    fsutil::write_atomic(&path, &bytes, mode)?;
                    self.after_write(&path, &bytes).map_err(PutError::into_io)?;
                }
                None => {
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                        Err(err) => return Err(err),
                    }
                    if let Some(checkpoint) = &mut self.checkpoint {
                        checkpoint.record_absent(&path)?;
                    }
                }
            }
            changed.push(path);
        }
        self.remove_created_dirs();
        Ok(changed)
    }

    /// Files whose bytes now differ from before the task.
    pub fn changed_files(&self) -> Vec<PathBuf> {
        self.touched
            .iter()
            .filter(|p| std::fs::read(p).ok() != self.originals.get(*p).cloned().flatten())
            .cloned()
            .collect()
    }

    /// A unified diff of every changed file, original → current.
    pub fn diff(&self) -> String {
        let mut out = String::new();
        for path in self.changed_files() {
            let before = self.originals.get(&path).cloned().flatten();
            let after = std::fs::read(&path).ok();
            out.push_str(&super::diff::unified(
                &self.paths.relative(&path),
                before.as_deref(),
                after.as_deref(),
            ));
        }
        out
    }

    pub fn finish(&mut self, status: &str) {
        if let Some(checkpoint) = &mut self.checkpoint {
            if let Err(err) = checkpoint.finish(status) {
                tracing::warn!(%err, "could not mark the checkpoint finished");
            }
        }
        self.finish_effects();
    }
}

fn fail(reports: &mut [OpReport], ops: &[usize], why: &str) {
    for report in reports.iter_mut() {
        if ops.contains(&report.index) {
            report.result = Err(why.to_owned());
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum PutError {
    #[error("the buffer changed in the editor")]
    Changed,
    #[error("the editor refused the edit: {0}")]
    Editor(String),
    #[error("could not write the file: {0}")]
    Io(io::Error),
}

impl PutError {
    fn into_io(self) -> io::Error {
        match self {
            PutError::Io(err) => err,
            other => io::Error::other(other.to_string()),
        }
    }
}

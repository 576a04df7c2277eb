//! Reading and writing the workspace for the task: open editor buffers win
//! over the disk, every first write is checkpointed, steps are all-or-nothing,
//! and a buffer the user is typing in is re-read rather than overwritten.
//! How open buffers and the disk are kept as one text: `buffers.rs`.

mod buffers;
mod changes;
mod staging;

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::checkpoint::{Checkpoint, CheckpointStore};
use crate::agent::confined::{Confined, Refusal};
use crate::agent::edit::{plan_step, FileOp, OpReport, PlannedChange};
use crate::agent::host::{BufferEdit, Host};
use crate::agent::paths::WorkspacePaths;
use crate::agent::types::EditorNote;
use crate::config::UnsavedBuffers;

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
    /// The workspace root's handle: every disk access of the task goes
    /// through it, confined by the kernel (`paths` is the friendly check).
    disk: Confined,
    host: Arc<dyn Host>,
    store: CheckpointStore,
    checkpoint: Option<Checkpoint>,
    task_id: String,
    goal: String,
    /// Files the task wrote, in first-touch order.
    pub touched: Vec<PathBuf>,
    /// Files holding the tests that failed before the task: their lines
    /// stay, new ones may be added (see `task::failing_tests`).
    pub tests_kept: Vec<PathBuf>,
    /// While tests are written first: only test files may be written.
    pub only_tests: bool,
    /// Their bytes before the task (for the diff and rollback).
    originals: TreeBytes,
    /// Files the task actually wrote (not only checkpointed).
    written: std::collections::BTreeSet<PathBuf>,
    /// `agent.unsaved_buffers`.
    unsaved_policy: UnsavedBuffers,
    /// Files with unsaved changes the user chose to keep the agent out of,
    /// and what the model is told.
    left_alone: BTreeMap<PathBuf, String>,
    left_alone_refusals: u32,
    /// Open files whose disk Fettle wrote itself because the editor did not
    /// save them: same text, but the editor still holds them as modified.
    not_saved_by_editor: std::collections::BTreeSet<PathBuf>,
    /// What commands changed, and the directories the task created.
    effects: side_effects::Effects,
    /// While candidates are drafted: their writes, in memory.
    staging: Option<staging::Staging>,
}

impl Files {
    pub fn new(
        paths: WorkspacePaths,
        disk: Confined,
        host: Arc<dyn Host>,
        store: CheckpointStore,
        task_id: String,
        goal: String,
        unsaved_policy: UnsavedBuffers,
    ) -> Self {
        Self {
            paths,
            disk,
            host,
            store,
            checkpoint: None,
            task_id,
            goal,
            touched: Vec::new(),
            tests_kept: Vec::new(),
            only_tests: false,
            originals: BTreeMap::new(),
            written: Default::default(),
            unsaved_policy,
            left_alone: BTreeMap::new(),
            left_alone_refusals: 0,
            not_saved_by_editor: Default::default(),
            effects: Default::default(),
            staging: None,
        }
    }

    pub fn root(&self) -> &Path {
        self.paths.root()
    }

    /// The current text of `path`: the open buffer, else the disk. `Ok(None)`
    /// when the file does not exist.
    pub fn read(&self, path: &Path) -> io::Result<Option<String>> {
        if let Some(text) = self.staged(path) {
            return Ok(Some(text.to_owned()));
        }
        if let Some(text) = self.host.buffer(path) {
            return Ok(Some(text));
        }
        match self.read_disk(path)? {
            Some(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} is not UTF-8 text; Fettle does not read or edit binary files",
                        self.paths.relative(path)
                    ),
                )
            }),
            None => Ok(None),
        }
    }

    /// The bytes on disk (`Ok(None)`: no such file), read through the
    /// root's handle. A path that is not the real one (through a symlink
    /// inside the workspace) is resolved and checked again first.
    pub fn read_disk(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match self.disk.read(path) {
            Err(err) if matches!(Refusal::of(&err), Some(Refusal::Symlink { .. })) => {
                match self.paths.resolve(&self.paths.relative(path)) {
                    Ok(real) if real != path => self.disk.read(&real),
                    _ => Err(self.explain(path, err)),
                }
            }
            other => other.map_err(|err| self.explain(path, err)),
        }
    }

    /// The current bytes (staged, else on disk) for callers that treat
    /// unreadable as absent.
    pub fn bytes(&self, path: &Path) -> Option<Vec<u8>> {
        match self.staged(path) {
            Some(text) => Some(text.as_bytes().to_vec()),
            None => self.disk_bytes(path),
        }
    }

    /// `read_disk` for callers that treat unreadable as absent.
    fn disk_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.read_disk(path).ok().flatten()
    }

    /// A path the kernel refused because a symlink appeared on it: the
    /// friendly check's message when it now refuses the path too.
    fn explain(&self, path: &Path, err: io::Error) -> io::Error {
        if !matches!(Refusal::of(&err), Some(Refusal::Symlink { .. })) {
            return err;
        }
        match self.paths.resolve(&self.paths.relative(path)) {
            Err(why) => io::Error::new(io::ErrorKind::PermissionDenied, why.to_string()),
            Ok(_) => err,
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
        if self.only_tests {
            if let Some(change) = changes
                .iter()
                .find(|c| !crate::agent::verify::is_test_file(&self.paths.relative(&c.path)))
            {
                let why = format!(
                    "not applied: tests come first — {} is not a test file; write only tests now (the code comes after they fail)",
                    self.paths.relative(&change.path)
                );
                let all: Vec<usize> = (0..ops.len()).collect();
                fail(&mut reports, &all, &why);
                return reports;
            }
        }
        if let Some(refusal) = self.refuse_changed_tests(&changes) {
            // All or nothing, as any other refusal of a step.
            for (change, why) in refusal {
                let held = why.is_none();
                fail(&mut reports, &change, &why.unwrap_or_else(|| {
                    "not applied: another edit of this step was refused; resend it with that one fixed".to_owned()
                }));
                if held {
                    for i in &change {
                        if let Some(r) = reports.get_mut(*i) {
                            r.held_back = true;
                        }
                    }
                }
            }
            return reports;
        }
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

    /// When a change rewrites or removes a line of a file in
    /// [`Files::tests_kept`]: for each change of the step, its ops and why
    /// it is refused (`None`: held back with the others).
    fn refuse_changed_tests(
        &self,
        changes: &[PlannedChange],
    ) -> Option<Vec<(Vec<usize>, Option<String>)>> {
        let mut any = false;
        let verdicts: Vec<(Vec<usize>, Option<String>)> = changes
            .iter()
            .map(|change| {
                let why = self
                    .tests_kept
                    .contains(&change.path)
                    .then(|| {
                        let old = change.old.as_deref().unwrap_or("");
                        super::failing_tests::first_line_not_kept(old, &change.new)
                    })
                    .flatten()
                    .map(|line| {
                        any = true;
                        format!(
                            "{} holds the tests that fail: its lines stay as they are (this edit changes or removes `{}`); fix the code the tests call — new tests may be added (name the file in the goal to let the task change its tests)",
                            self.paths.relative(&change.path),
                            line.trim()
                        )
                    });
                (change.ops.clone(), why)
            })
            .collect();
        any.then_some(verdicts)
    }

    /// Writes `new` to `path` (through the editor when it is open there, and
    /// on disk, where the tests read it), checkpointing the file first.
    async fn put(&mut self, path: &Path, old: Option<&str>, new: &str) -> Result<(), PutError> {
        // The tools checked already; this is every write's own guard.
        self.paths
            .check_writable(&self.paths.relative(path), path)
            .map_err(|why| {
                PutError::Io(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    why.to_string(),
                ))
            })?;
        self.check_depth(path).map_err(PutError::Io)?;
        if self.staging.is_some() {
            // A candidate: nothing reaches the editor or the disk yet.
            self.stage(path, new);
            return Ok(());
        }
        if let Some(buffer) = self.host.buffer(path) {
            // Unsaved text reaches the disk only with consent, and before the
            // checkpoint takes the file's original.
            self.consent(path, &buffer).await?;
        }
        self.remember(path)?;
        self.refresh_original(path)?;
        self.record_new_dirs(path).map_err(PutError::Io)?;
        let bytes = match self.host.buffer(path) {
            Some(buffer) => {
                if old.is_some_and(|old| old != buffer) {
                    return Err(PutError::Changed);
                }
                match self.host.edit_buffer(path, &buffer, new).await {
                    BufferEdit::Applied => self.sync_disk(path, new).await?,
                    BufferEdit::NotOpen => {
                        self.disk
                            .write_atomic(path, new.as_bytes(), None)
                            .map_err(|err| PutError::Io(self.explain(path, err)))?;
                        new.as_bytes().to_vec()
                    }
                    BufferEdit::Changed => return Err(PutError::Changed),
                    BufferEdit::Failed(reason) => return Err(PutError::Editor(reason)),
                }
            }
            None => {
                self.disk
                    .write_atomic(path, new.as_bytes(), None)
                    .map_err(|err| PutError::Io(self.explain(path, err)))?;
                new.as_bytes().to_vec()
            }
        };
        self.after_write(path, &bytes)?;
        Ok(())
    }

    /// Checkpoints `path` before its first write (durably: a crash after this
    /// can still be undone).
    fn remember(&mut self, path: &Path) -> Result<(), PutError> {
        if self.originals.contains_key(path) {
            return Ok(());
        }
        // Read first: a file the confined read refuses (a hard link, a
        // symlink that appeared) is not checkpointed nor written.
        let before = self
            .disk
            .read_with_metadata(path)
            .map_err(|err| PutError::Io(self.explain(path, err)))?;
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
        let original = before
            .as_ref()
            .map(|(bytes, meta)| (bytes.as_slice(), meta.permissions().mode() & 0o7777));
        checkpoint
            .record_original(path, original, buffer.as_deref())
            .map_err(PutError::Io)?;
        self.originals
            .insert(path.to_path_buf(), before.map(|(bytes, _)| bytes));
        self.touched.push(path.to_path_buf());
        Ok(())
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
            .cloned()
            .chain(self.staged_extra())
            .map(|p| {
                let bytes = self.bytes(&p);
                (p, bytes)
            })
            .collect()
    }

    /// The current bytes of `paths`.
    pub fn capture_paths<'a>(&self, paths: impl Iterator<Item = &'a Path>) -> TreeBytes {
        paths.map(|p| (p.to_path_buf(), self.bytes(p))).collect()
    }

    /// The touched files as they were before the task.
    pub fn originals(&self) -> TreeBytes {
        self.originals.clone()
    }

    /// Puts the touched files back to `state` (files missing from `state`
    /// go back to their original). Returns the files it changed.
    pub async fn restore(&mut self, state: &TreeBytes) -> io::Result<Vec<PathBuf>> {
        if self.staging.is_some() {
            return Ok(self.restore_staged(state));
        }
        let mut changed = Vec::new();
        for path in self.touched.clone() {
            let target = state
                .get(&path)
                .or_else(|| self.originals.get(&path))
                .cloned()
                .flatten();
            let current = self.bytes(&path);
            if current == target {
                continue;
            }
            match target {
                Some(bytes) => {
                    // A command may have swapped the file for a symlink.
                    let mode = self.prepare_restore(&path, &bytes)?;
                    // The original of an open file is the user's text (their
                    // unsaved changes were saved, with consent, before the
                    // task wrote it): buffer and disk go back together.
                    let mut written = None;
                    if let (Some(buffer), Ok(text)) =
                        (self.host.buffer(&path), std::str::from_utf8(&bytes))
                    {
                        let outcome = self.host.edit_buffer(&path, &buffer, text).await;
                        if outcome == BufferEdit::Applied {
                            written = Some(
                                self.sync_disk(&path, text)
                                    .await
                                    .map_err(PutError::into_io)?,
                            );
                        } else if outcome != BufferEdit::NotOpen {
                            tracing::warn!(path = %path.display(), ?outcome, "editor did not take the rollback; the file on disk is restored");
                        }
                    }
                    let written = match written {
                        Some(written) => written,
                        None => {
                            self.disk
                                .write_atomic(&path, &bytes, mode)
                                .map_err(|err| self.explain(&path, err))?;
                            bytes
                        }
                    };
                    self.after_write(&path, &written)
                        .map_err(PutError::into_io)?;
                }
                None => {
                    // Never a file that existed before the task.
                    self.remove_created(&path)?;
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

    /// Ends the task's checkpoint, recording what the editor holds of every
    /// touched file; returns what the user must be told about open buffers.
    pub fn finish(&mut self, status: &str) -> Vec<EditorNote> {
        let notes = self.editor_notes();
        if let Some(checkpoint) = &mut self.checkpoint {
            if let Err(err) = checkpoint.finish(status) {
                tracing::warn!(%err, "could not mark the checkpoint finished");
            }
        }
        self.finish_effects();
        notes
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
    /// Unsaved changes the user keeps the agent out of; the text is for the model.
    #[error("{0}")]
    LeftAlone(String),
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

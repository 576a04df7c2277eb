//! What the task's commands (the tests, the baseline, `run_command`) change
//! in the workspace, and the directories the task creates: both join the
//! task's touched set, so rollback, the final restore, `changedFiles`, the
//! diff and undo cover them like the files the model writes.
//!
//! Before the first command the workspace's files are copied into a
//! snapshot (within a budget); around every command a stat-only picture is
//! taken, and each path that differs becomes touched with its original from
//! the snapshot ("did not exist" for a new one). What cannot be put back is
//! reported as such.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::{Files, KEEP_CHECKPOINTS};
use crate::agent::checkpoint::Checkpoint;
use crate::agent::workspace_scan::snapshot::{Budget, Original, Snapshot};
use crate::agent::workspace_scan::{self, Change, Changed, Kind, Scan, Scanner};

/// Names listed in one note to the model; the rest are counted.
const MAX_LISTED: usize = 20;
const PACK: &str = "snapshot.pack";

#[derive(Default)]
pub(super) struct Effects {
    snapshot: Option<Snapshot>,
    /// Why commands are not tracked, if they are not.
    disabled: Option<String>,
    /// The model and the user were told `disabled`.
    disabled_said: bool,
    /// Files first touched by a command: their original modes.
    adopted: BTreeMap<PathBuf, Option<u32>>,
    /// Changes made by commands that cannot be undone, and why.
    unrestorable: BTreeMap<PathBuf, String>,
    /// Created directories a restore had to leave (not empty).
    kept_dirs: Vec<(PathBuf, String)>,
    /// Where a command moved a tracked file (by inode), for the file
    /// found at the new path: `new path → old path`.
    moved: BTreeMap<PathBuf, PathBuf>,
}

/// Why a file a command moved into the tracked tree is not the task's.
const MOVED_IN: &str =
    "it existed before the task (a command moved it here), so undo and rollback leave it in place";

/// What one command changed, for the model and the events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandEffects {
    /// Relative path, what happened, and why it cannot be undone (if so).
    pub changes: Vec<(String, Change, Option<String>)>,
    /// Tracking is off for this workspace, and why (said once).
    pub untracked: Option<String>,
}

impl CommandEffects {
    /// "The command changed 2 files in the workspace: …", or `None` when
    /// it changed nothing.
    pub fn describe(&self, who: &str) -> Option<String> {
        let mut out = String::new();
        if let Some(why) = &self.untracked {
            out.push_str(&format!(
                "Fettle does not track what commands change in this workspace: {why}.\n"
            ));
        }
        if !self.changes.is_empty() {
            let n = self.changes.len();
            let list = |items: Vec<String>| {
                let more = items.len().saturating_sub(MAX_LISTED);
                let mut text = items
                    .into_iter()
                    .take(MAX_LISTED)
                    .collect::<Vec<_>>()
                    .join(", ");
                if more > 0 {
                    text.push_str(&format!(" and {more} more"));
                }
                text
            };
            out.push_str(&format!(
                "{who} changed {n} file{} in the workspace: {}.",
                if n == 1 { "" } else { "s" },
                list(
                    self.changes
                        .iter()
                        .map(|(p, c, _)| format!("{p} ({})", c.as_str()))
                        .collect()
                )
            ));
            let lost: Vec<String> = self
                .changes
                .iter()
                .filter_map(|(p, c, why)| {
                    why.as_ref()
                        .map(|why| format!("{p} ({}; {why})", c.as_str()))
                })
                .collect();
            if !lost.is_empty() {
                out.push_str(&format!(
                    " Changed by a command, not restorable: {}.",
                    list(lost)
                ));
            }
        }
        (!out.is_empty()).then(|| out.trim_end().to_owned())
    }
}

impl Files {
    /// The task's checkpoint, begun on first use.
    fn checkpoint_begun(&mut self) -> io::Result<&mut Checkpoint> {
        if self.checkpoint.is_none() {
            // Undo reaches back this many tasks per workspace.
            if let Err(err) = self.store.prune(KEEP_CHECKPOINTS) {
                tracing::warn!(%err, "could not prune old checkpoints");
            }
            let begun = self.store.begin(&self.task_id, &self.goal)?;
            return Ok(self.checkpoint.insert(begun));
        }
        match &mut self.checkpoint {
            Some(c) => Ok(c),
            None => Err(io::Error::other("no checkpoint")),
        }
    }

    fn scanner(&self) -> Scanner {
        Scanner::new(self.root(), vec![self.store.dir().to_path_buf()])
    }

    /// Records the directories a write to `path` is about to create, before
    /// it creates them.
    pub(super) fn record_new_dirs(&mut self, path: &Path) -> io::Result<()> {
        let root = self.root().to_path_buf();
        crate::agent::confined::check_depth(path.strip_prefix(&root).unwrap_or(path))?;
        let mut missing: Vec<PathBuf> = path
            .ancestors()
            .skip(1)
            .take_while(|d| d.starts_with(&root) && *d != root)
            .take_while(|d| std::fs::symlink_metadata(d).is_err())
            .map(Path::to_path_buf)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        missing.reverse();
        self.checkpoint_begun()?.record_dirs(&missing)
    }

    /// Refuses a write too many directories deep before anything is
    /// checkpointed (the depth is what made it costly).
    pub(super) fn check_depth(&self, path: &Path) -> io::Result<()> {
        crate::agent::confined::check_depth(path.strip_prefix(self.root()).unwrap_or(path))
    }

    /// Gets ready to put `path` back to `bytes` in a rollback: a file a
    /// command replaced with a symlink or a directory-less special file
    /// must not be written through. Returns the mode to restore.
    pub(super) fn prepare_restore(&mut self, path: &Path, bytes: &[u8]) -> io::Result<Option<u32>> {
        self.trash_foreign(path)?;
        let Some(mode) = self.effects.adopted.get(path).copied() else {
            return Ok(None);
        };
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.is_file() && !meta.is_dir() {
                std::fs::remove_file(path)?;
            }
        }
        let original = self.originals.get(path).cloned().flatten();
        Ok(mode.filter(|_| original.as_deref() == Some(bytes)))
    }

    /// A file that existed before the task, other than the original, sits
    /// at `path` (a command moved it over): into the trash with it before
    /// the rollback writes or removes there.
    fn trash_foreign(&mut self, path: &Path) -> io::Result<bool> {
        let Some(checkpoint) = &self.checkpoint else {
            return Ok(false);
        };
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return Ok(false);
        };
        if !checkpoint.is_foreign(path, &meta) {
            return Ok(false);
        }
        let trashed = checkpoint.trash(&self.disk, path)?;
        self.effects.unrestorable.insert(
            path.to_path_buf(),
            format!(
                "it existed before the task and a command moved it here; the rollback moved it to {} instead of deleting it",
                trashed.display()
            ),
        );
        Ok(true)
    }

    /// Removes `path`, a file the task created, for a rollback: a file
    /// that existed before the task found there is not removed but moved
    /// to the trash (if a command moved it from a tracked path that the
    /// rollback restores) or left in place.
    pub(super) fn remove_created(&mut self, path: &Path) -> io::Result<()> {
        if self.effects.moved.contains_key(path) {
            if self.trash_foreign(path)? {
                return Ok(());
            }
        } else if let (Some(checkpoint), Ok(meta)) =
            (&self.checkpoint, std::fs::symlink_metadata(path))
        {
            if checkpoint.is_foreign(path, &meta) {
                self.effects
                    .unrestorable
                    .insert(path.to_path_buf(), MOVED_IN.to_owned());
                return Ok(());
            }
        }
        match self.disk.remove(path) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// After a rollback: removes the directories the task created that are
    /// empty now, and notes the ones that hold someone else's files.
    pub(super) fn remove_created_dirs(&mut self) {
        let Some(checkpoint) = &self.checkpoint else {
            return;
        };
        let report = checkpoint.remove_created_dirs();
        let touched = &self.touched;
        // A directory holding a file of the state rolled back to is the
        // task's own and expected to stay.
        let kept: Vec<(PathBuf, String)> = report
            .kept
            .into_iter()
            .filter(|(dir, _)| !touched.iter().any(|p| p.starts_with(dir) && p.exists()))
            .collect();
        for (dir, why) in kept {
            if !self.effects.kept_dirs.iter().any(|(d, _)| *d == dir) {
                self.effects.kept_dirs.push((dir, why));
            }
        }
    }

    /// "Left pkg/sub/ (not empty: …)" for the summary, once.
    pub fn take_kept_dirs_note(&mut self) -> Option<String> {
        let kept = std::mem::take(&mut self.effects.kept_dirs);
        if kept.is_empty() {
            return None;
        }
        let names: Vec<String> = kept
            .iter()
            .map(|(d, why)| format!("{}/ ({why})", self.paths.relative(d)))
            .collect();
        Some(format!(
            "Left the director{} the task created: {}.",
            if kept.len() == 1 { "y" } else { "ies" },
            names.join(", ")
        ))
    }

    /// Changes commands made that cannot be undone, for the summary.
    pub fn unrestorable_note(&self) -> Option<String> {
        if self.effects.unrestorable.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .effects
            .unrestorable
            .iter()
            .map(|(p, why)| format!("{} ({why})", self.paths.relative(p)))
            .collect();
        Some(format!(
            "Changed by a command, not restorable (undo leaves them): {}.",
            names.join(", ")
        ))
    }

    /// The picture to compare with after the command; the first call also
    /// copies the workspace into the snapshot. `None`: not tracked.
    pub async fn before_command(&mut self) -> Option<Scan> {
        if self.effects.disabled.is_some() {
            return None;
        }
        let scanner = self.scanner();
        let pack = if self.effects.snapshot.is_none() {
            match self.checkpoint_begun() {
                Ok(c) => Some(c.scratch_path(PACK)),
                Err(err) => {
                    self.effects.disabled =
                        Some(format!("its checkpoint could not be started: {err}"));
                    return None;
                }
            }
        } else {
            None
        };
        let taken = tokio::task::spawn_blocking(move || {
            let scan = scanner.scan();
            let snapshot = match pack {
                Some(pack) if !scan.truncated => {
                    // A leftover from a crash of this very task id.
                    let _ = std::fs::remove_file(&pack);
                    Some(Snapshot::take(&pack, &scan, Budget::default()))
                }
                _ => None,
            };
            (scan, snapshot)
        })
        .await;
        let (scan, snapshot) = match taken {
            Ok(taken) => taken,
            Err(err) => {
                self.effects.disabled = Some(format!("the scan failed: {err}"));
                return None;
            }
        };
        if scan.truncated {
            self.effects.disabled = Some(format!(
                "it holds more than {} files and directories",
                workspace_scan::MAX_ENTRIES
            ));
            return None;
        }
        match snapshot {
            Some(Ok(snapshot)) => {
                tracing::debug!(
                    files = snapshot.kept_files,
                    bytes = snapshot.stored_bytes,
                    not_kept = snapshot.not_kept,
                    "workspace snapshot taken"
                );
                self.effects.snapshot = Some(snapshot);
            }
            Some(Err(err)) => {
                self.effects.disabled = Some(format!("the snapshot could not be written: {err}"));
                return None;
            }
            None => {}
        }
        Some(scan)
    }

    /// Compares the workspace with `before` and makes every path the
    /// command changed part of the task.
    pub async fn after_command(&mut self, before: Option<Scan>) -> CommandEffects {
        let Some(before) = before else {
            let mut effects = CommandEffects::default();
            if !self.effects.disabled_said {
                effects.untracked = self.effects.disabled.clone();
                self.effects.disabled_said = effects.untracked.is_some();
            }
            return effects;
        };
        let scanner = self.scanner();
        let changed = match tokio::task::spawn_blocking(move || {
            let after = scanner.rescan(&before);
            workspace_scan::diff(&before, &after)
        })
        .await
        {
            Ok(changed) => changed,
            Err(err) => {
                tracing::warn!(%err, "the workspace scan failed");
                return CommandEffects::default();
            }
        };
        let mut changed = changed;
        // Deletions and changes first: a file moved within the tracked
        // tree is known by its inode when its new path comes up.
        changed.sort_by_key(|c| c.change == Change::Created);
        let gone: std::collections::HashMap<(u64, u64), PathBuf> = changed
            .iter()
            .filter(|c| c.change == Change::Deleted)
            .filter_map(|c| c.before.map(|b| ((b.dev, b.ino), c.path.clone())))
            .collect();
        for c in &changed {
            if let (Change::Created, Some(after)) = (c.change, c.after) {
                if let Some(from) = gone.get(&(after.dev, after.ino)) {
                    self.effects.moved.insert(c.path.clone(), from.clone());
                }
            }
        }
        let mut effects = CommandEffects::default();
        for c in changed {
            if let Some(reported) = self.take_change(&c) {
                let rel = self.paths.relative(&c.path);
                effects.changes.push((rel, c.change, reported.err()));
            }
        }
        effects
    }

    /// Takes one change into the task. `None`: nothing to report (a
    /// directory, or no real change); `Err`: it cannot be undone.
    fn take_change(&mut self, c: &Changed) -> Option<Result<(), String>> {
        let kind = c.after.or(c.before).map(|s| s.kind)?;
        let start = self
            .checkpoint
            .as_ref()
            .map(|cp| i128::from(cp.started_at_ns()));
        // A new path whose inode is older than the task: moved here by the
        // command (from a gitignored or skipped place, or within the
        // tree), not made by it. Never the task's to delete.
        let moved_in = c.change == Change::Created
            && c.after
                .zip(start)
                .is_some_and(|(after, start)| after.existed_before(start));
        if kind == Kind::Dir && c.before.is_none_or(|s| s.kind == Kind::Dir) {
            if c.change == Change::Created && !moved_in {
                if let Err(err) = self
                    .checkpoint_begun()
                    .and_then(|cp| cp.record_dirs(std::slice::from_ref(&c.path)))
                {
                    tracing::warn!(%err, "could not record a created directory");
                }
            }
            return None;
        }
        if let Some(after) = c
            .after
            .filter(|a| a.kind == Kind::File && a.size > MAX_ADOPTED_BYTES)
        {
            // Restoring it later means holding it (rollback keeps the
            // touched files in memory): a command's gigabyte of output
            // would take the task's memory with it. Named, never read.
            let why = format!(
                "it is {} MiB, over the {} MiB Fettle keeps to restore a file; delete or restore it yourself",
                after.size >> 20,
                MAX_ADOPTED_BYTES >> 20
            );
            self.effects
                .unrestorable
                .insert(c.path.clone(), why.clone());
            return Some(Err(why));
        }
        let current = read_regular(&c.path);
        // Moved within the tracked tree from a path whose original the
        // task keeps: undo puts that back, so this copy may go (to the
        // trash). From anywhere else: left alone.
        let moved_from = self
            .effects
            .moved
            .get(&c.path)
            .filter(|from| self.originals.get(*from).is_some_and(Option::is_some))
            .cloned();
        if moved_in && moved_from.is_none() && !self.originals.contains_key(&c.path) {
            self.effects
                .unrestorable
                .insert(c.path.clone(), MOVED_IN.to_owned());
            return Some(Err(MOVED_IN.to_owned()));
        }
        if self.originals.contains_key(&c.path) {
            // Already the task's: what it leaves there now includes this.
            self.note_result(&c.path, current.as_deref());
            return Some(Ok(()));
        }
        if c.change == Change::Modified {
            // Saved from the editor while the command ran: the user's,
            // not the command's.
            if let (Some(buffer), Some(bytes)) = (self.host.buffer(&c.path), &current) {
                if buffer.as_bytes() == bytes.as_slice() {
                    tracing::info!(path = %c.path.display(), "changed during a command as the editor has it; left to the user");
                    return None;
                }
            }
        }
        let original = match (c.change, c.before) {
            (Change::Created, _) => Ok(None),
            (_, Some(before)) if before.kind == Kind::File => {
                match self
                    .effects
                    .snapshot
                    .as_ref()
                    .and_then(|s| s.original(&c.path, &before))
                {
                    Some(Original::Bytes { bytes, mode }) => Ok(Some((bytes, mode))),
                    Some(Original::NotKept(why)) => Err(why),
                    None => Err(
                        "it appeared after the task started, so its earlier content is unknown"
                            .to_owned(),
                    ),
                }
            }
            (_, Some(_)) => {
                Err("it was not a regular file; Fettle restores regular files only".to_owned())
            }
            (_, None) => Ok(None),
        };
        let original = match original {
            Ok(original) => original,
            Err(why) => {
                self.effects
                    .unrestorable
                    .insert(c.path.clone(), why.clone());
                return Some(Err(why));
            }
        };
        if let (Some((bytes, mode)), Some(after)) = (&original, c.after) {
            // Touched, not changed (same bytes and mode).
            if current.as_deref() == Some(bytes.as_slice()) && after.mode == *mode {
                return None;
            }
        }
        if let Err(err) = self.adopt(&c.path, original, current.as_deref()) {
            let why = format!("it could not be checkpointed: {err}");
            self.effects
                .unrestorable
                .insert(c.path.clone(), why.clone());
            return Some(Err(why));
        }
        let inode = c.before.map(|b| [b.dev, b.ino]);
        if inode.is_some() || moved_from.is_some() {
            if let Some(checkpoint) = &mut self.checkpoint {
                if let Err(err) = checkpoint.note_prior(&c.path, inode, moved_from) {
                    tracing::warn!(%err, "could not update the checkpoint");
                }
            }
        }
        Some(Ok(()))
    }

    /// Makes `path` one of the task's files: its original as given, and
    /// what the command left there as the task's result.
    fn adopt(
        &mut self,
        path: &Path,
        original: Option<(Vec<u8>, u32)>,
        current: Option<&[u8]>,
    ) -> io::Result<()> {
        self.checkpoint_begun()?
            .record_prior(path, original.as_ref().map(|(b, m)| (b.as_slice(), *m)))?;
        let mode = original.as_ref().map(|(_, m)| *m);
        self.originals
            .insert(path.to_path_buf(), original.map(|(b, _)| b));
        self.touched.push(path.to_path_buf());
        self.effects.adopted.insert(path.to_path_buf(), mode);
        self.note_result(path, current);
        Ok(())
    }

    /// Records what is at `path` now as what the task left there.
    fn note_result(&mut self, path: &Path, current: Option<&[u8]>) {
        let Some(checkpoint) = &mut self.checkpoint else {
            return;
        };
        if current.is_none() && std::fs::symlink_metadata(path).is_ok() {
            // Not a regular file (a symlink): nothing to compare later.
            return;
        }
        let noted = match current {
            Some(bytes) => checkpoint.record_result(path, bytes),
            None => checkpoint.record_absent(path),
        };
        if let Err(err) = noted {
            tracing::warn!(%err, path = %path.display(), "could not update the checkpoint");
        }
    }

    /// The task is over: the snapshot goes, and so does a checkpoint that
    /// recorded nothing (undo then reaches the last task that changed
    /// something).
    pub(super) fn finish_effects(&mut self) {
        if let Some(snapshot) = self.effects.snapshot.take() {
            snapshot.discard();
        }
        if self.checkpoint.as_ref().is_some_and(Checkpoint::is_empty) {
            if let Some(checkpoint) = self.checkpoint.take() {
                if let Err(err) = checkpoint.discard() {
                    tracing::warn!(%err, "could not delete an empty checkpoint");
                }
            }
        }
    }
}

/// The largest file a command made or changed that the task adopts
/// (restores on rollback and undo); bigger ones are named as not
/// restorable instead of being read into memory.
const MAX_ADOPTED_BYTES: u64 = 64 << 20;

/// The bytes of `path` if it is a regular file (a symlink is not followed).
fn read_regular(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    std::fs::read(path).ok()
}

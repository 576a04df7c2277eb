//! What a task adds to its checkpoint beyond the files it writes itself:
//! the directories it created (removed again, deepest first, when empty),
//! and files a command changed, whose originals come from the snapshot
//! taken before the command rather than from the disk now.
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{check_absolute, Checkpoint, Entry, BLOB_MODE};
use crate::agent::fsutil::{sync_dir, write_atomic};

/// What removing the created directories did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirsReport {
    pub removed: Vec<PathBuf>,
    /// Left in place, and why (not empty: someone put files there).
    pub kept: Vec<(PathBuf, String)>,
}

impl Checkpoint {
    /// Records directories the task is about to create (parents first).
    /// Durable when it returns: call it before creating them.
    pub fn record_dirs(&mut self, dirs: &[PathBuf]) -> io::Result<()> {
        let root = self.manifest.root.clone();
        let before = self.manifest.dirs.len();
        for dir in dirs {
            check_absolute(dir)?;
            if !dir.starts_with(&root) || dir == &root {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not inside the workspace", dir.display()),
                ));
            }
            if !self.manifest.dirs.contains(dir) {
                self.manifest.dirs.push(dir.clone());
            }
        }
        if self.manifest.dirs.len() == before {
            return Ok(());
        }
        if let Err(err) = self.save() {
            self.manifest.dirs.truncate(before);
            return Err(err);
        }
        Ok(())
    }

    /// The directories the task created, in the order it created them.
    pub fn created_dirs(&self) -> &[PathBuf] {
        &self.manifest.dirs
    }

    /// Removes the directories the task created, deepest first, each only
    /// if empty: a directory where someone else put a file is left, and
    /// said so.
    pub fn remove_created_dirs(&self) -> DirsReport {
        let mut dirs = self.manifest.dirs.clone();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        let mut report = DirsReport::default();
        for dir in dirs {
            // Only ever inside the workspace, whatever the manifest says.
            if !dir.starts_with(&self.manifest.root) || dir == self.manifest.root {
                continue;
            }
            if let Some(why) = self.off_limits(&dir) {
                report.kept.push((dir, why));
                continue;
            }
            match fs::symlink_metadata(&dir) {
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => {
                    report
                        .kept
                        .push((dir, format!("could not check it: {err}")));
                    continue;
                }
                Ok(meta) if !meta.is_dir() => {
                    report
                        .kept
                        .push((dir, "it is no longer a directory".to_owned()));
                    continue;
                }
                Ok(meta) if self.predates(&meta) => {
                    // A command moved a directory that existed before the
                    // task here after the task made this one (or instead).
                    report.kept.push((dir, super::trash::EXISTED.to_owned()));
                    continue;
                }
                Ok(_) => {}
            }
            match fs::remove_dir(&dir) {
                Ok(()) => {
                    if let Some(parent) = dir.parent() {
                        sync_dir(parent);
                    }
                    report.removed.push(dir);
                }
                Err(err) if err.kind() == io::ErrorKind::DirectoryNotEmpty => report.kept.push((
                    dir,
                    "not empty: it holds files the task did not create".to_owned(),
                )),
                Err(err) => report
                    .kept
                    .push((dir, format!("could not remove it: {err}"))),
            }
        }
        report
    }

    /// Records `path` as it was before a command changed it: `original` is
    /// its bytes and mode then (`None`: it did not exist). Only the first
    /// record per path counts, as with [`record`](Self::record).
    pub fn record_prior(&mut self, path: &Path, original: Option<(&[u8], u32)>) -> io::Result<()> {
        check_absolute(path)?;
        if self.entry(path).is_some() {
            return Ok(());
        }
        let index = self.manifest.files.len();
        let (blob, mode) = match original {
            Some((bytes, mode)) => {
                let name = index.to_string();
                write_atomic(&self.blob_path(&name), bytes, Some(BLOB_MODE))?;
                (Some(name), Some(mode))
            }
            None => (None, None),
        };
        self.manifest.files.push(Entry {
            path: path.to_path_buf(),
            blob,
            mode,
            buffer_blob: None,
            // The directories a command created are in `dirs`.
            existing_ancestor: None,
            result: None,
            result_buffer: None,
            inode: None,
            moved_from: None,
        });
        if let Err(err) = self.save() {
            self.manifest.files.pop();
            return Err(err);
        }
        Ok(())
    }

    /// Adds what the scan knew of a file recorded with
    /// [`record_prior`](Self::record_prior): the inode that was there
    /// (`[dev, ino]`), and the recorded path a command moved it from.
    pub fn note_prior(
        &mut self,
        path: &Path,
        inode: Option<[u64; 2]>,
        moved_from: Option<PathBuf>,
    ) -> io::Result<()> {
        let Some(i) = self.manifest.files.iter().position(|e| e.path == path) else {
            return Err(super::not_recorded(path));
        };
        let entry = &mut self.manifest.files[i];
        let previous = entry.clone();
        entry.inode = inode.or(entry.inode);
        entry.moved_from = moved_from.or(entry.moved_from.take());
        if let Err(err) = self.save() {
            self.manifest.files[i] = previous;
            return Err(err);
        }
        Ok(())
    }

    /// Nothing recorded: no file and no directory to restore.
    pub fn is_empty(&self) -> bool {
        self.manifest.files.is_empty() && self.manifest.dirs.is_empty()
    }

    /// A path in the checkpoint's directory for the task's own scratch
    /// data (the snapshot pack), deleted with the checkpoint.
    pub fn scratch_path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Deletes this checkpoint (a task that changed nothing leaves none,
    /// so `undo` reaches the last task that did).
    pub fn discard(self) -> io::Result<()> {
        fs::remove_dir_all(&self.dir)
    }
}

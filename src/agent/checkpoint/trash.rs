//! Undo never loses data that existed before the task. A path the task
//! "created" may hold, by the time undo runs, a file a command moved there
//! from outside the tracked files (a gitignored `local/notes.txt`, a file
//! from `node_modules/`): its inode is older than the task, so it is left
//! in place. Where the filesystem keeps no birth time and the file cannot
//! be told from a new one, and where a file that existed before the task
//! sits where undo puts an original back, it is moved into the task's
//! checkpoint directory (`trash/`) rather than deleted, and named in the
//! report. `.git/` is never touched.
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::{Checkpoint, Entry};
use crate::agent::confined::Confined;
use crate::agent::workspace_scan::Stat;

/// Why a path is left: it is not the task's.
pub const EXISTED: &str =
    "it existed before the task (a command moved it here), so undo leaves it in place";

const TRASH: &str = "trash";

/// What undo does with a file the task is recorded as having created.
pub enum Removal {
    /// The task's own file: delete it.
    Delete,
    /// Not the task's: leave it, and why.
    Leave(String),
    /// Cannot tell: move it to the trash.
    Trash,
}

impl Checkpoint {
    /// Why undo must not touch `path` at all: it is inside a `.git`
    /// directory (undo never changes version control; the task's file
    /// tools cannot write there either) or outside the workspace.
    pub(super) fn off_limits(&self, path: &Path) -> Option<String> {
        let Ok(rel) = path.strip_prefix(&self.manifest.root) else {
            return Some("it is outside the workspace".to_owned());
        };
        let git = rel.components().any(|c| match c {
            Component::Normal(name) => name == ".git",
            _ => true,
        });
        git.then(|| "it is inside .git/, which undo never changes".to_owned())
    }

    /// Whether the inode `meta` describes existed before the task began.
    pub(super) fn predates(&self, meta: &fs::Metadata) -> bool {
        Stat::of(meta).existed_before(i128::from(self.manifest.started_at_ns))
    }

    /// What to do with the file at a path the task created (`entry` has
    /// no original), as it is on disk now.
    pub(super) fn before_removing(&self, disk: &Confined, entry: &Entry) -> io::Result<Removal> {
        let meta = match disk.metadata(&entry.path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Removal::Delete),
            Err(err) => return Err(err),
        };
        if meta.is_dir() {
            return Ok(Removal::Leave(
                "it is a directory now; undo removes only what the task created".to_owned(),
            ));
        }
        if self.predates(&meta) {
            // Moved from a path whose original this checkpoint puts back:
            // its bytes return there, so taking it away loses nothing (and
            // the trash keeps them anyway).
            if entry.moved_from.as_ref().is_some_and(|from| {
                self.manifest
                    .files
                    .iter()
                    .any(|e| &e.path == from && e.blob.is_some())
            }) {
                return Ok(Removal::Trash);
            }
            return Ok(Removal::Leave(EXISTED.to_owned()));
        }
        if crate::agent::workspace_scan::birth_ns(&meta).is_none() {
            // No birth time here: a recent mtime does not prove the task
            // made it (a moved file that a command then appended to).
            return Ok(Removal::Trash);
        }
        Ok(Removal::Delete)
    }

    /// Before an original is written back over `entry.path`: if the file
    /// there now is another one that existed before the task, moves it to
    /// the trash and returns where.
    pub(super) fn trash_if_foreign(
        &self,
        disk: &Confined,
        entry: &Entry,
    ) -> io::Result<Option<PathBuf>> {
        use std::os::unix::fs::MetadataExt;
        let meta = match disk.metadata(&entry.path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        if !meta.is_file() {
            return Ok(None);
        }
        let same_inode = entry.inode == Some([meta.dev(), meta.ino()]);
        if same_inode || !self.predates(&meta) {
            return Ok(None);
        }
        self.move_to_trash(disk, &entry.path).map(Some)
    }

    /// Whether the file `meta` describes, found at `path`, is another file
    /// than the task's or the original there: one that existed before the
    /// task with a different inode than the recorded original's (a
    /// command moved it over). Overwriting or deleting it would lose it.
    pub fn is_foreign(&self, path: &Path, meta: &fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        if !meta.is_file() || !self.predates(meta) {
            return false;
        }
        let recorded = self.entry(path).and_then(|e| e.inode);
        recorded != Some([meta.dev(), meta.ino()])
    }

    /// [`move_to_trash`](Self::move_to_trash), for the task's rollback.
    pub fn trash(&self, disk: &Confined, path: &Path) -> io::Result<PathBuf> {
        self.move_to_trash(disk, path)
    }

    /// Moves `path` (a file) into this checkpoint's `trash/`, under its
    /// path relative to the workspace (a numbered name if taken).
    pub(super) fn move_to_trash(&self, disk: &Confined, path: &Path) -> io::Result<PathBuf> {
        let rel = path
            .strip_prefix(&self.manifest.root)
            .map_err(|_| io::Error::other("outside the workspace"))?;
        let base = self.dir.join(TRASH).join(rel);
        if let Some(parent) = base.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut dest = base.clone();
        let mut n = 1;
        while fs::symlink_metadata(&dest).is_ok() {
            let mut name = base.as_os_str().to_owned();
            name.push(format!(".{n}"));
            dest = PathBuf::from(name);
            n += 1;
        }
        disk.move_out(path, &dest)?;
        Ok(dest)
    }
}

//! Snapshots on disk so that any task can be undone byte for byte, even
//! after a crash, and in-memory snapshots for rolling back between attempts.
//!
//! Layout: `<cache>/tasks/<hash of the canonical workspace root>/<task id>/`
//! holds `manifest.json` and `blobs/<n>` (a file's original bytes) and
//! `blobs/<n>.buffer` (the editor buffer's text, if it was open). Every
//! record is fsynced before [`Checkpoint::record`] returns, and the caller
//! records a file before its first write: a crash at any point leaves enough
//! on disk to restore. Git state is never touched.
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::agent::confined::Confined;
use crate::agent::fsutil::{sync_dir, write_atomic};
use clock::{from_ns, now_ns, wait_past};
use removal::{remove_created, remove_file_and_dirs};

mod clock;
mod created;
mod judge;
mod removal;
mod sign;
mod store;
mod trash;
mod tree_state;
pub use created::DirsReport;
pub use tree_state::TreeState;

const MANIFEST: &str = "manifest.json";
const BLOBS: &str = "blobs";
const MANIFEST_VERSION: u32 = 1;
/// Blobs hold other people's code: readable by the user only.
const BLOB_MODE: u32 = 0o600;

/// `$FETTLE_CACHE_DIR`, else `$XDG_CACHE_HOME/fettle`, else
/// `~/.cache/fettle` (else a directory under the system temp dir).
pub fn cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("FETTLE_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = var("XDG_CACHE_HOME").map(PathBuf::from) {
        // The XDG spec says relative values are invalid and to be ignored.
        if dir.is_absolute() {
            return dir.join("fettle");
        }
    }
    match var("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("fettle"),
        None => std::env::temp_dir().join("fettle-cache"),
    }
}

/// The checkpoints of one workspace.
#[derive(Clone, Debug)]
pub struct CheckpointStore {
    dir: PathBuf,
    root: PathBuf,
    /// The per-user key manifests are signed with.
    key_path: PathBuf,
}

/// A summary of a task, for listings (most recent first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    pub task_id: String,
    pub goal: String,
    pub started: SystemTime,
    pub ended: Option<SystemTime>,
    /// As given to [`Checkpoint::finish`]; `None` while running (or after a
    /// crash).
    pub status: Option<String>,
    pub files: usize,
}

/// A file as it was before the task first wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Original {
    /// `None`: the file did not exist (the task created it).
    pub bytes: Option<Vec<u8>>,
    pub mode: Option<u32>,
    /// The open editor buffer's text then, if the file was open.
    pub buffer: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Files that hold their original content again.
    pub restored: Vec<PathBuf>,
    /// Files the task created, now deleted.
    pub removed: Vec<PathBuf>,
    /// Files already as they were before the task (an undo done before, or
    /// a task whose attempts were all rolled back): nothing written.
    pub unchanged: Vec<PathBuf>,
    /// Files left alone, and why: changed since the task (unless `force`),
    /// or an I/O error.
    pub skipped: Vec<(PathBuf, String)>,
    /// Directories the task created, now deleted.
    pub removed_dirs: Vec<PathBuf>,
    /// Directories the task created and left, and why (not empty).
    pub kept_dirs: Vec<(PathBuf, String)>,
    /// Files and directories that existed before the task (a command moved
    /// them where the task "created" something), left in place, and why.
    pub left: Vec<(PathBuf, String)>,
    /// What undo took out of the workspace without deleting it: the path,
    /// and where its bytes are now (the checkpoint's trash).
    pub trashed: Vec<(PathBuf, PathBuf)>,
}

/// One task's checkpoint.
#[derive(Debug)]
pub struct Checkpoint {
    dir: PathBuf,
    manifest: Manifest,
    /// The signing key (see `sign.rs`).
    key: Vec<u8>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    task_id: String,
    goal: String,
    root: PathBuf,
    started_at_ns: u64,
    ended_at_ns: Option<u64>,
    status: Option<String>,
    files: Vec<Entry>,
    /// Directories the task created, in creation order (absent in
    /// checkpoints written before Fettle recorded them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dirs: Vec<PathBuf>,
    /// HMAC-SHA256 of the manifest without this field, under the user's
    /// key: a manifest anyone else changed is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hmac: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    path: PathBuf,
    /// Blob name of the original bytes; `None`: the file did not exist.
    blob: Option<String>,
    mode: Option<u32>,
    buffer_blob: Option<String>,
    /// For a file that did not exist: its nearest existing ancestor, so the
    /// directories the task created in between can be removed.
    existing_ancestor: Option<PathBuf>,
    /// What the task left there, to notice later changes by the user.
    result: Option<Left>,
    /// SHA-256 of the editor buffer's text the task left, if the file was
    /// open then: a later change in the editor is a change too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result_buffer: Option<String>,
    /// `[dev, ino]` of the file that was there before the task: undo
    /// overwrites that file (a command changed it in place), but never a
    /// different file that existed before the task (moved there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inode: Option<[u64; 2]>,
    /// For a file a command moved here from a path recorded in this
    /// checkpoint too (its original kept): undo may take it away, because
    /// that path gets its bytes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    moved_from: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Left {
    Sha256(String),
    Absent,
}

impl Checkpoint {
    pub fn task_id(&self) -> &str {
        &self.manifest.task_id
    }

    pub fn goal(&self) -> &str {
        &self.manifest.goal
    }

    /// The workspace root the task ran in.
    pub fn root(&self) -> &Path {
        &self.manifest.root
    }

    /// When the task began (ns since the epoch): a file whose inode is
    /// older was not created by it.
    pub fn started_at_ns(&self) -> u64 {
        self.manifest.started_at_ns
    }

    pub fn status(&self) -> Option<&str> {
        self.manifest.status.as_deref()
    }

    pub fn info(&self) -> TaskInfo {
        let m = &self.manifest;
        TaskInfo {
            task_id: m.task_id.clone(),
            goal: m.goal.clone(),
            started: from_ns(m.started_at_ns),
            ended: m.ended_at_ns.map(from_ns),
            status: m.status.clone(),
            files: m.files.len(),
        }
    }

    /// Saves `path`'s current state (bytes and mode, or "did not exist") and
    /// the editor buffer's text if it is open; only the first call per path
    /// counts. Durable when it returns: call it before the first write.
    pub fn record(&mut self, path: &Path, buffer: Option<&str>) -> io::Result<()> {
        check_absolute(path)?;
        if self.entry(path).is_some() {
            return Ok(());
        }
        let read = self.workspace()?.read_with_metadata(path)?;
        let original = read
            .as_ref()
            .map(|(bytes, meta)| (bytes.as_slice(), mode_bits(meta)));
        self.record_original(path, original, buffer)
    }

    /// [`record`](Self::record) with the file's bytes and mode as the
    /// caller read them (`None`: it does not exist), so that the workspace
    /// is read once, through the caller's confined handle.
    pub fn record_original(
        &mut self,
        path: &Path,
        original: Option<(&[u8], u32)>,
        buffer: Option<&str>,
    ) -> io::Result<()> {
        check_absolute(path)?;
        if self.entry(path).is_some() {
            return Ok(());
        }
        let index = self.manifest.files.len();
        let inode = original.and_then(|_| inode_of(path));
        let (blob, mode, existing_ancestor) = match original {
            Some((bytes, mode)) => {
                let name = index.to_string();
                write_atomic(&self.blob_path(&name), bytes, Some(BLOB_MODE))?;
                (Some(name), Some(mode), None)
            }
            None => (None, None, nearest_existing_ancestor(path)),
        };
        let buffer_blob = match buffer {
            Some(text) => {
                let name = format!("{index}.buffer");
                write_atomic(&self.blob_path(&name), text.as_bytes(), Some(BLOB_MODE))?;
                Some(name)
            }
            None => None,
        };
        self.manifest.files.push(Entry {
            path: path.to_path_buf(),
            blob,
            mode,
            buffer_blob,
            existing_ancestor,
            result: None,
            result_buffer: None,
            inode,
            moved_from: None,
        });
        if let Err(err) = self.save() {
            self.manifest.files.pop();
            return Err(err);
        }
        Ok(())
    }

    /// Replaces the recorded editor text of `path` (recorded before): for
    /// when the user typed between the record and the task's first write to
    /// that buffer, which then did not happen.
    pub fn rerecord_buffer(&mut self, path: &Path, buffer: &str) -> io::Result<()> {
        let Some(index) = self.manifest.files.iter().position(|e| e.path == path) else {
            return self.record(path, Some(buffer));
        };
        let name = format!("{index}.buffer");
        write_atomic(&self.blob_path(&name), buffer.as_bytes(), Some(BLOB_MODE))?;
        self.manifest.files[index].buffer_blob = Some(name);
        self.save()
    }

    /// Notes what the task left in `path` (recorded before), so a later
    /// restore can tell whether the user changed it since.
    pub fn record_result(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.set_result(path, Left::Sha256(sha256_hex(bytes)))
    }

    /// Notes that the task left no file at `path` (it deleted it, or rolled
    /// back its creation).
    pub fn record_absent(&mut self, path: &Path) -> io::Result<()> {
        self.set_result(path, Left::Absent)
    }

    /// The paths recorded, in the order they were first touched.
    pub fn touched(&self) -> Vec<PathBuf> {
        self.manifest.files.iter().map(|e| e.path.clone()).collect()
    }

    /// What `path` was before the task; `None` if the task never touched it.
    pub fn original(&self, path: &Path) -> io::Result<Option<Original>> {
        let Some(entry) = self.entry(path) else {
            return Ok(None);
        };
        let bytes = match &entry.blob {
            Some(name) => Some(fs::read(self.blob_path(name))?),
            None => None,
        };
        let buffer = match &entry.buffer_blob {
            Some(name) => {
                Some(String::from_utf8_lossy(&fs::read(self.blob_path(name))?).into_owned())
            }
            None => None,
        };
        Ok(Some(Original {
            bytes,
            mode: entry.mode,
            buffer,
        }))
    }

    /// Puts every touched file back as it was before the task: original
    /// bytes and mode, written atomically; files the task created are
    /// deleted, with the directories it created for them if empty. A file
    /// changed since the task (its content differs from what
    /// [`record_result`](Self::record_result) saw) is skipped unless `force`.
    pub fn restore(&self, force: bool) -> io::Result<RestoreReport> {
        self.restore_with(force, &|_| None)
    }

    /// [`restore`](Self::restore), knowing the editor: `buffer` gives the
    /// open buffer's text of a path, and a file whose buffer changed since
    /// the task is skipped too (unless `force`). The buffers themselves are
    /// the caller's to restore (through the editor), before this.
    pub fn restore_with(
        &self,
        force: bool,
        buffer: &dyn Fn(&Path) -> Option<String>,
    ) -> io::Result<RestoreReport> {
        let mut report = RestoreReport::default();
        let disk = self.workspace()?;
        // Newest first: a directory created for a later file is emptied
        // before an earlier one is considered.
        for entry in self.manifest.files.iter().rev() {
            let path = entry.path.clone();
            if let Some(why) = self.off_limits(&path) {
                report.left.push((path, why));
                continue;
            }
            match self.restore_entry(&disk, entry, force, buffer(&path).as_deref(), &mut report) {
                Ok(Outcome::Restored) => report.restored.push(path),
                Ok(Outcome::Removed) => report.removed.push(path),
                Ok(Outcome::Unchanged) => report.unchanged.push(path),
                Ok(Outcome::Left(why)) => report.left.push((path, why)),
                Ok(Outcome::Skipped(why)) => report.skipped.push((path, why)),
                Err(err) => report
                    .skipped
                    .push((path, format!("could not restore it: {err}"))),
            }
        }
        report.restored.reverse();
        report.removed.reverse();
        report.unchanged.reverse();
        report.skipped.reverse();
        report.left.reverse();
        let dirs = self.remove_created_dirs();
        report.removed_dirs = dirs.removed;
        report.kept_dirs = dirs.kept;
        Ok(report)
    }

    /// Marks the task ended with `status` (e.g. `"fixed"`, `"gave up"`,
    /// `"undone"`).
    pub fn finish(&mut self, status: &str) -> io::Result<()> {
        self.manifest.ended_at_ns = Some(now_ns());
        self.manifest.status = Some(status.to_owned());
        self.save()
    }

    /// The workspace's root handle: undo reads and writes through it like
    /// the task did. Hard links are allowed here: nothing read reaches a
    /// model, and a write replaces the name, never the other link's bytes.
    fn workspace(&self) -> io::Result<Confined> {
        Ok(Confined::open_root(&self.manifest.root)?.allow_hardlinks(true))
    }

    fn original_bytes(&self, entry: &Entry) -> io::Result<Option<Vec<u8>>> {
        match &entry.blob {
            Some(name) => Ok(Some(fs::read(self.blob_path(name))?)),
            None => Ok(None),
        }
    }

    fn restore_entry(
        &self,
        disk: &Confined,
        entry: &Entry,
        force: bool,
        buffer: Option<&str>,
        report: &mut RestoreReport,
    ) -> io::Result<Outcome> {
        let path = &entry.path;
        let current = disk.read(path)?;
        let original = self.original_bytes(entry)?;
        if let Some(why) = judge::skip_reason(&judge::Facts {
            result: entry.result.as_ref(),
            result_buffer: entry.result_buffer.as_deref(),
            original: original.as_deref(),
            disk: current.as_deref(),
            buffer,
            force,
        }) {
            // Short: callers add how to force it in their own terms.
            return Ok(Outcome::Skipped(why));
        }
        match original {
            Some(bytes) => {
                let mode = match disk.metadata(path) {
                    Ok(meta) => Some(mode_bits(&meta)),
                    Err(err) if err.kind() == io::ErrorKind::NotFound => None,
                    Err(err) => return Err(err),
                };
                let same_mode = entry.mode.is_none() || mode == entry.mode;
                if current.as_deref() == Some(bytes.as_slice()) && same_mode {
                    return Ok(Outcome::Unchanged);
                }
                // A different file that existed before the task sits here (a
                // command moved it over this one): its bytes go to the
                // trash, not away.
                if let Some(trashed) = self.trash_if_foreign(disk, entry)? {
                    report.trashed.push((path.clone(), trashed));
                }
                disk.write_atomic(path, &bytes, entry.mode)?;
                Ok(Outcome::Restored)
            }
            // Gone already (an earlier undo): nothing to remove.
            None if current.is_none() => Ok(Outcome::Unchanged),
            None => {
                match self.before_removing(disk, entry)? {
                    trash::Removal::Delete => {}
                    trash::Removal::Leave(why) => return Ok(Outcome::Left(why)),
                    trash::Removal::Trash => {
                        let trashed = self.move_to_trash(disk, path)?;
                        report.trashed.push((path.clone(), trashed));
                    }
                }
                // Checkpoints that record the created directories remove
                // them after every file (and report the ones kept).
                let stop = match self.manifest.dirs.is_empty() {
                    true => entry.existing_ancestor.as_deref(),
                    false => None,
                };
                remove_created(disk, path, stop)?;
                Ok(Outcome::Removed)
            }
        }
    }

    fn set_result(&mut self, path: &Path, left: Left) -> io::Result<()> {
        let Some(i) = self.manifest.files.iter().position(|e| e.path == path) else {
            return Err(not_recorded(path));
        };
        if self.manifest.files[i].result.as_ref() == Some(&left) {
            return Ok(());
        }
        let previous = self.manifest.files[i].result.replace(left);
        if let Err(err) = self.save() {
            self.manifest.files[i].result = previous;
            return Err(err);
        }
        Ok(())
    }

    fn entry(&self, path: &Path) -> Option<&Entry> {
        self.manifest.files.iter().find(|e| e.path == path)
    }

    fn blob_path(&self, name: &str) -> PathBuf {
        self.dir.join(BLOBS).join(name)
    }

    fn save(&self) -> io::Result<()> {
        let mut manifest = self.manifest.clone();
        manifest.hmac = None;
        manifest.hmac = Some(manifest.signature(&self.key)?);
        let json = serde_json::to_vec_pretty(&manifest).map_err(io::Error::other)?;
        write_atomic(&self.dir.join(MANIFEST), &json, Some(BLOB_MODE))
    }
}

impl Manifest {
    /// The HMAC of this manifest (its `hmac` field must be `None`), over
    /// its compact JSON: the same bytes however the file was formatted.
    fn signature(&self, key: &[u8]) -> io::Result<String> {
        let canonical = serde_json::to_vec(self).map_err(io::Error::other)?;
        Ok(sign::hex(&sign::hmac_sha256(key, &canonical)))
    }
}

enum Outcome {
    Restored,
    Removed,
    /// Already as before the task.
    Unchanged,
    /// Not the task's to remove (it existed before the task): left.
    Left(String),
    Skipped(String),
}

/// `[dev, ino]` of the entry at `path`, not following a symlink.
fn inode_of(path: &Path) -> Option<[u64; 2]> {
    use std::os::unix::fs::MetadataExt;
    fs::symlink_metadata(path).ok().map(|m| [m.dev(), m.ino()])
}

fn not_recorded(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} was not recorded in this checkpoint", path.display()),
    )
}

fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

fn mode_bits(meta: &fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

fn nearest_existing_ancestor(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|a| fs::symlink_metadata(a).is_ok())
        .map(Path::to_path_buf)
}

fn check_absolute(path: &Path) -> io::Result<()> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("checkpoint paths must be absolute: {}", path.display()),
        ))
    }
}

/// A task id becomes a directory name: nothing that could leave the store.
fn check_task_id(id: &str) -> io::Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid task id {id:?}: use letters, digits, '-', '_' and '.'"),
        ))
    }
}

pub(crate) fn root_hash(root: &Path) -> String {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        root.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = root.to_string_lossy().into_owned().into_bytes();
    sha256_hex(&bytes)[..32].to_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

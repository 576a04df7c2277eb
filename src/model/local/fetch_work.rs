//! The directories a model fetch works in, beside the model's destination.
//!
//! A fetch stopped hard (the editor killed the server, SIGKILL, a power
//! cut) cannot clean up after itself, and each stopped download of the
//! default model left ~180 MB behind. So every work directory holds
//! `owner.lock`, `flock`ed while its fetch runs (the kernel drops the lock
//! when the process dies): a directory whose lock is free belongs to
//! nobody. The next fetch into the same models directory removes such
//! temporary directories, and resumes in a free named one (the parts of a
//! split model). Two processes installing the same file take turns on
//! `.NAME.fettle-lock`, so the second finds the first's result instead of
//! downloading it again.
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

/// Prefix of a temporary work directory (removed when its fetch ends).
const TEMPORARY_PREFIX: &str = ".fettle-download-";
/// Prefix of earlier versions' temporary directories (no lock inside) and
/// of the named, resumable ones.
const NAMED_PREFIX: &str = ".fettle-fetch-";
const LOCK_FILE: &str = "owner.lock";
/// An unlocked directory of an earlier version counts as abandoned once
/// it has not changed for this long (a fetch writes to it continuously).
const LEGACY_IDLE: Duration = Duration::from_secs(3600);

/// An exclusive `flock` on an open file; released on drop or process exit.
#[derive(Debug)]
struct Flock {
    _file: File,
}

impl Flock {
    /// Takes the lock on `path` (created if missing) without waiting;
    /// `Ok(None)` when another process holds it.
    fn try_take(path: &Path) -> Result<Option<Flock>> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Self::try_take_file(file, path)
    }

    /// Whether the existing lock file `path` is free: nobody holds it (the
    /// lock taken to find out is dropped at once).
    fn is_free(path: &Path) -> bool {
        File::open(path)
            .ok()
            .is_some_and(|file| matches!(Self::try_take_file(file, path), Ok(Some(_))))
    }

    fn try_take_file(file: File, path: &Path) -> Result<Option<Flock>> {
        // SAFETY: flock on a descriptor this function owns; no memory involved.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if taken {
            return Ok(Some(Flock { _file: file }));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(err).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// A work directory this process owns while the value lives.
#[derive(Debug)]
pub(super) struct WorkDir {
    path: PathBuf,
    temporary: bool,
    _lock: Flock,
}

impl WorkDir {
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// A new temporary directory in `dir`, removed when dropped. Abandoned
    /// ones are removed first.
    pub(super) fn temporary(dir: &Path) -> Result<WorkDir> {
        remove_abandoned(dir);
        let made = tempfile::Builder::new()
            .prefix(TEMPORARY_PREFIX)
            .tempdir_in(dir)
            .with_context(|| format!("cannot create a temporary directory in {}", dir.display()))?;
        // Locked under another name, then renamed into place (the lock is
        // the inode's): a sweep never sees this directory's lock file free.
        let fresh = made.path().join(".owner.lock.new");
        let lock = Flock::try_take(&fresh)?.context("a new work directory's lock is taken")?;
        std::fs::rename(&fresh, made.path().join(LOCK_FILE))
            .with_context(|| format!("cannot set up {}", made.path().display()))?;
        Ok(WorkDir {
            path: made.keep(),
            temporary: true,
            _lock: lock,
        })
    }

    /// The named, resumable directory `.fettle-fetch-NAME` in `dir`; an
    /// error naming the other fetch when one is using it.
    pub(super) fn named(dir: &Path, name: &str) -> Result<WorkDir> {
        remove_abandoned(dir);
        let path = dir.join(format!("{NAMED_PREFIX}{name}"));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let lock = Flock::try_take(&path.join(LOCK_FILE))?.with_context(|| {
            format!(
                "another fettle process is installing {name} (in {}); wait for it to finish",
                path.display()
            )
        })?;
        Ok(WorkDir {
            path,
            temporary: false,
            _lock: lock,
        })
    }

    /// Removes the directory now (the parts of a model once it is joined).
    pub(super) fn remove(self) -> std::io::Result<()> {
        std::fs::remove_dir_all(&self.path)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.temporary {
            // Best effort: what stays behind is removed by the next fetch.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Held while this process installs one file: other processes wait. The
/// lock file is removed when the turn ends, before the lock is released.
#[derive(Debug)]
pub(super) struct InstallTurn {
    path: PathBuf,
    _lock: Flock,
}

impl Drop for InstallTurn {
    fn drop(&mut self) {
        // Still locked here: a waiter that opened the old file finds it
        // unlinked once it gets the lock, and tries again (`install_turn`).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether `lock` is the file now at `path` (not one unlinked meanwhile).
fn still_at(lock: &Flock, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (lock._file.metadata(), std::fs::metadata(path)) {
        (Ok(held), Ok(now)) => held.ino() == now.ino() && held.dev() == now.dev(),
        _ => false,
    }
}

/// Waits (polling, so a cancelled fetch stops waiting) until no other
/// process installs `dest`; says so once through `progress`.
pub(super) async fn install_turn(
    dest: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<InstallTurn> {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lock_path = dest.with_file_name(format!(".{name}.fettle-lock"));
    let mut said = false;
    loop {
        if let Some(lock) = Flock::try_take(&lock_path)? {
            if still_at(&lock, &lock_path) {
                return Ok(InstallTurn {
                    path: lock_path,
                    _lock: lock,
                });
            }
            // The previous holder removed it as we opened it: again.
            continue;
        }
        if !said {
            progress(&format!(
                "another fettle process is installing {}; waiting for it",
                dest.display()
            ));
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Removes the work directories in `dir` that no running fetch owns:
/// temporary ones whose lock is free, and earlier versions' unlocked
/// temporary ones idle for an hour. Named directories stay (they resume).
pub(super) fn remove_abandoned(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        let abandoned = if name.starts_with(TEMPORARY_PREFIX) {
            Flock::is_free(&path.join(LOCK_FILE))
        } else if let Some(suffix) = name.strip_prefix(NAMED_PREFIX) {
            !is_catalog_name(suffix) && legacy_idle(&path)
        } else {
            false
        };
        if abandoned && entry.file_type().is_ok_and(|t| t.is_dir()) {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "removed an abandoned model download")
                }
                Err(err) => {
                    tracing::warn!(path = %path.display(), %err, "cannot remove an abandoned model download")
                }
            }
        }
    }
}

fn is_catalog_name(name: &str) -> bool {
    super::catalog::CATALOG.iter().any(|m| m.name == name)
}

/// An earlier version's temporary directory: no lock file, and nothing in
/// it changed for [`LEGACY_IDLE`].
fn legacy_idle(path: &Path) -> bool {
    if path.join(LOCK_FILE).exists() {
        return false;
    }
    let newest = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok()?.modified().ok())
        .chain(std::fs::metadata(path).ok().and_then(|m| m.modified().ok()))
        .max();
    newest.is_some_and(|t| {
        SystemTime::now()
            .duration_since(t)
            .is_ok_and(|age| age > LEGACY_IDLE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_temporary_dir_is_gone_and_a_held_one_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let held = WorkDir::temporary(dir.path()).unwrap();
        std::fs::write(held.path().join("model.part"), b"x").unwrap();
        // Another fetch starting now must not take it.
        let other = WorkDir::temporary(dir.path()).unwrap();
        assert!(held.path().join("model.part").exists());
        let (held_path, other_path) = (held.path().to_path_buf(), other.path().to_path_buf());
        drop(held);
        drop(other);
        assert!(!held_path.exists() && !other_path.exists());
    }

    #[test]
    fn a_named_dir_in_use_is_refused_and_free_again_after() {
        let dir = tempfile::tempdir().unwrap();
        let first = WorkDir::named(dir.path(), "qwen2.5-coder-1.5b").unwrap();
        let err = WorkDir::named(dir.path(), "qwen2.5-coder-1.5b").unwrap_err();
        assert!(
            format!("{err:#}").contains("another fettle process"),
            "{err:#}"
        );
        let path = first.path().to_path_buf();
        drop(first);
        assert!(path.exists(), "a named directory is kept to resume");
        WorkDir::named(dir.path(), "qwen2.5-coder-1.5b").unwrap();
    }

    #[tokio::test]
    async fn a_second_install_of_one_file_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("model.gguf");
        let first = install_turn(&dest, &mut |_| {}).await.unwrap();
        let waiting = {
            let dest = dest.clone();
            tokio::spawn(async move {
                let mut said = Vec::new();
                let turn = install_turn(&dest, &mut |m| said.push(m.to_owned())).await;
                (turn.is_ok(), said)
            })
        };
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            !waiting.is_finished(),
            "the second waits while the first installs"
        );
        drop(first);
        let (ok, said) = waiting.await.unwrap();
        assert!(ok);
        assert_eq!(said.len(), 1, "{said:?}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert!(
            left.is_empty(),
            "the lock file goes with the last turn: {left:?}"
        );
        assert!(
            said[0].contains("another fettle process is installing"),
            "{said:?}"
        );
    }

    #[test]
    fn unlocked_leftovers_are_removed_and_resumable_parts_kept() {
        let dir = tempfile::tempdir().unwrap();
        // A temporary directory whose owner died: lock file, no lock held.
        let dead = dir.path().join(format!("{TEMPORARY_PREFIX}abc123"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LOCK_FILE), b"").unwrap();
        std::fs::write(dead.join("model.gguf.part"), b"x").unwrap();
        // One being created right now (no lock file yet): not touched.
        let young = dir.path().join(format!("{TEMPORARY_PREFIX}young1"));
        std::fs::create_dir(&young).unwrap();
        // A split model's verified parts: kept to resume.
        let parts = dir.path().join(format!("{NAMED_PREFIX}qwen2.5-coder-1.5b"));
        std::fs::create_dir(&parts).unwrap();
        std::fs::write(parts.join("part01.bin"), b"x").unwrap();
        // An earlier version's temporary directory, just written: kept.
        let legacy = dir.path().join(format!("{NAMED_PREFIX}Xy12Ab"));
        std::fs::create_dir(&legacy).unwrap();
        std::fs::write(legacy.join("model.gguf.part"), b"x").unwrap();
        remove_abandoned(dir.path());
        assert!(!dead.exists());
        assert!(young.exists() && parts.join("part01.bin").exists() && legacy.exists());
    }
}

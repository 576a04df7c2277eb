//! Removing what a task created: the file, then the directories it made
//! for it that are empty again — through the workspace's root handle, or
//! by path in the store.
use std::fs;
use std::io;
use std::path::Path;

use crate::agent::confined::Confined;
use crate::agent::fsutil::sync_dir;

/// Deletes `path` (gone already is fine), then the directories between it
/// and `stop` that are now empty: those the task created for it.
pub(super) fn remove_file_and_dirs(path: &Path, stop: Option<&Path>) -> io::Result<()> {
    remove_file_then_empty_dirs(path, stop, &|p| fs::remove_file(p), &|d| fs::remove_dir(d))?;
    if let (Some(parent), Some(stop)) = (path.parent(), stop) {
        sync_dir(parent.ancestors().find(|a| a.exists()).unwrap_or(stop));
    }
    Ok(())
}

/// [`remove_file_and_dirs`] through the workspace's root handle.
pub(super) fn remove_created(disk: &Confined, path: &Path, stop: Option<&Path>) -> io::Result<()> {
    remove_file_then_empty_dirs(path, stop, &|p| disk.remove(p), &|d| disk.remove_dir(d))
}

/// The one walk behind both: remove the file, then each parent up to (not
/// including) `stop` while it is empty.
pub(super) fn remove_file_then_empty_dirs(
    path: &Path,
    stop: Option<&Path>,
    remove_file: &dyn Fn(&Path) -> io::Result<()>,
    remove_dir: &dyn Fn(&Path) -> io::Result<()>,
) -> io::Result<()> {
    match remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let Some(stop) = stop else { return Ok(()) };
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == stop || !d.starts_with(stop) {
            break;
        }
        // Fails on a non-empty directory: someone else's files are there.
        if remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

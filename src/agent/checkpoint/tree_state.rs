//! In-memory snapshots of a few files: the repair loop keeps its best state
//! so far and returns to it after an attempt that made things worse.
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::{nearest_existing_ancestor, read_optional, remove_file_and_dirs};
use crate::agent::fsutil::{file_mode, write_atomic};

/// Files as they were at one moment, in memory: the repair loop captures
/// the best state so far and goes back to it after a worse attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeState {
    files: BTreeMap<PathBuf, Option<Snapshot>>,
    /// For absent files: the nearest existing ancestor at capture time.
    ancestors: BTreeMap<PathBuf, PathBuf>,
    /// When it was captured (ns since the epoch): a file found later at a
    /// path captured as absent whose inode is older was moved there, not
    /// made since, and is left.
    captured_ns: i128,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Snapshot {
    bytes: Vec<u8>,
    mode: Option<u32>,
}

impl TreeState {
    /// Reads `paths` now (a missing file is captured as absent).
    pub fn capture<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> io::Result<Self> {
        let mut state = TreeState {
            captured_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
                .unwrap_or(0),
            ..TreeState::default()
        };
        for path in paths {
            let path = path.as_ref();
            let snapshot = match read_optional(path)? {
                Some(bytes) => Some(Snapshot {
                    bytes,
                    mode: file_mode(path)?,
                }),
                None => {
                    if let Some(ancestor) = nearest_existing_ancestor(path) {
                        state.ancestors.insert(path.to_path_buf(), ancestor);
                    }
                    None
                }
            };
            state.files.insert(path.to_path_buf(), snapshot);
        }
        Ok(state)
    }

    /// The captured paths, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.keys().map(PathBuf::as_path)
    }

    /// `Some(None)`: captured as absent; `None`: not captured.
    pub fn get(&self, path: &Path) -> Option<Option<&[u8]>> {
        self.files
            .get(path)
            .map(|s| s.as_ref().map(|s| s.bytes.as_slice()))
    }

    /// Writes every captured file back (atomically, with its mode) and
    /// deletes those captured as absent. Returns the paths that changed.
    pub fn apply(&self) -> io::Result<Vec<PathBuf>> {
        let mut changed = Vec::new();
        for (path, snapshot) in &self.files {
            let current = read_optional(path)?;
            match snapshot {
                Some(snap) => {
                    let same_mode = snap.mode.is_none() || file_mode(path)? == snap.mode;
                    if current.as_deref() != Some(snap.bytes.as_slice()) || !same_mode {
                        write_atomic(path, &snap.bytes, snap.mode)?;
                        changed.push(path.clone());
                    }
                }
                None if current.is_some() => {
                    let older = std::fs::symlink_metadata(path).is_ok_and(|m| {
                        crate::agent::workspace_scan::Stat::of(&m).existed_before(self.captured_ns)
                    });
                    if older {
                        continue;
                    }
                    remove_file_and_dirs(path, self.ancestors.get(path).map(PathBuf::as_path))?;
                    changed.push(path.clone());
                }
                None => {}
            }
        }
        Ok(changed)
    }
}

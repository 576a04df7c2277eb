//! Staged writes: while candidate fixes are drafted (`agent.candidates`),
//! the model's edits go to memory, not to the buffers or the disk. Reads
//! see them; the candidate is then tested in a copy of the workspace, and
//! only the one chosen is written, through the normal path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Files, TreeBytes};

/// The texts a candidate wrote, and what the files held before it.
#[derive(Default)]
pub(super) struct Staging {
    texts: BTreeMap<PathBuf, String>,
    before: BTreeMap<PathBuf, Option<Vec<u8>>>,
}

impl Files {
    /// From now on, writes are staged.
    pub fn begin_staging(&mut self) {
        self.staging = Some(Staging::default());
    }

    /// Ends staging; returns the files the candidate changed and their text.
    pub fn end_staging(&mut self) -> BTreeMap<PathBuf, String> {
        self.staging.take().map(|s| s.texts).unwrap_or_default()
    }

    pub fn is_staging(&self) -> bool {
        self.staging.is_some()
    }

    /// The staged text of `path`: `None` when it is not staged.
    pub(super) fn staged(&self, path: &Path) -> Option<&str> {
        self.staging
            .as_ref()
            .and_then(|s| s.texts.get(path))
            .map(String::as_str)
    }

    /// Stages `new` as `path`'s text.
    pub(super) fn stage(&mut self, path: &Path, new: &str) {
        let before = match self.staging.as_ref() {
            Some(s) if s.before.contains_key(path) => None,
            Some(_) => Some(self.disk_bytes(path)),
            None => return,
        };
        if let Some(staging) = self.staging.as_mut() {
            if let Some(before) = before {
                staging.before.insert(path.to_path_buf(), before);
            }
            staging.texts.insert(path.to_path_buf(), new.to_owned());
        }
    }

    /// The staged paths the task has not touched for real.
    pub(super) fn staged_extra(&self) -> Vec<PathBuf> {
        self.staging
            .as_ref()
            .map(|s| {
                s.texts
                    .keys()
                    .filter(|p| !self.touched.contains(p))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What a staged path not touched for real held before the candidate.
    pub(super) fn staged_original(&self, path: &Path) -> Option<Option<&[u8]>> {
        self.staging
            .as_ref()
            .and_then(|s| s.before.get(path))
            .map(Option::as_deref)
    }

    /// `restore` while staging: the staged texts become `state` (a path
    /// missing from it goes back to what the disk holds).
    pub(super) fn restore_staged(&mut self, state: &TreeBytes) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.touched.clone();
        paths.extend(self.staged_extra());
        let mut changed = Vec::new();
        for path in paths {
            let disk = self.disk_bytes(&path);
            let target = match state.get(&path) {
                Some(target) => target.clone(),
                None => disk.clone(),
            };
            if self.bytes(&path) == target {
                continue;
            }
            let Some(staging) = self.staging.as_mut() else {
                break;
            };
            match target {
                Some(bytes) if Some(&bytes) != disk.as_ref() => {
                    if let Ok(text) = String::from_utf8(bytes) {
                        staging.texts.insert(path.clone(), text);
                    }
                }
                // Back to the disk's state (a file the candidate created
                // is gone again: it never reached the disk).
                _ => {
                    staging.texts.remove(&path);
                }
            }
            changed.push(path);
        }
        changed
    }
}

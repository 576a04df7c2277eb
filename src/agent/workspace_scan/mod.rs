//! What the commands a task runs (the tests, the baseline, `run_command`)
//! change in the workspace: a cheap picture of the tree (`lstat` only, no
//! reads) taken before and after every command, and the difference.
//!
//! The picture respects `.gitignore` (build output is not the user's work)
//! and always skips build and cache directories and Fettle's own files. A
//! command can edit `.gitignore` to hide a file it then changes: every path
//! of the "before" picture missing from the "after" one is looked at again
//! directly, so a file that is only newly ignored is still compared.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

pub mod snapshot;

/// Directories never scanned, at any depth: version control, build output,
/// caches and virtual environments (what tests create and nobody restores).
pub const SKIPPED_DIRS: &[&str] = &[
    ".git",
    "target",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".venv",
    "venv",
    "dist",
    "build",
    ".next",
    ".gradle",
    ".cache",
    // Fettle's own state in a workspace.
    ".fettle",
];

/// A workspace with more entries than this is not tracked: a picture that
/// large is no longer cheap, and the task says so instead.
pub const MAX_ENTRIES: usize = 200_000;

/// What a path is, without following symlinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A socket, FIFO or device.
    Other,
}

/// What `lstat` says about a path: enough to notice a change without
/// reading it. `ctime` catches a rewrite that put the old size and mtime
/// back (a process cannot set ctime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub dev: u64,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    /// Birth time (`statx`'s `stx_btime`), where the filesystem keeps it:
    /// no process can set it, and a rename keeps it, so it tells a file a
    /// command moved into the tree from one it created.
    pub btime_ns: Option<i128>,
}

impl Stat {
    pub fn of(meta: &fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let t = meta.file_type();
        let kind = if t.is_symlink() {
            Kind::Symlink
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stat {
            kind,
            size: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
            mode: meta.mode() & 0o7777,
            btime_ns: birth_ns(meta),
        }
    }

    /// Whether this inode existed before `start_ns` (the task's start):
    /// born before it (birth time), else, where the filesystem keeps no
    /// birth time, last modified before it (a rename keeps the mtime; a
    /// new file gets the current time unless its creator sets an older
    /// one, which then only makes undo keep it). The clocks agree on the
    /// safe side: a timestamp is never later than the precise clock at
    /// the time it was taken, so a file born before the start always
    /// counts as older; one born in the same clock tick as the start may
    /// count as older too, and is then kept.
    pub fn existed_before(&self, start_ns: i128) -> bool {
        match self.btime_ns {
            Some(btime) => btime < start_ns,
            None => self.mtime_ns < start_ns,
        }
    }

    /// `lstat` of `path`; `None` when it does not exist (or cannot be read).
    pub fn lstat(path: &Path) -> Option<Self> {
        fs::symlink_metadata(path).ok().map(|m| Self::of(&m))
    }

    /// Whether the content or the mode may differ. A directory's own
    /// times change with every entry added, which says nothing.
    fn differs(&self, other: &Stat) -> bool {
        if self.kind != other.kind {
            return true;
        }
        if self.kind == Kind::Dir {
            return self.mode != other.mode;
        }
        self != other
    }
}

/// The birth time of `meta`, in nanoseconds since the epoch (`None`
/// where the filesystem does not report one).
pub fn birth_ns(meta: &fs::Metadata) -> Option<i128> {
    let born = meta.created().ok()?;
    Some(match born.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).unwrap_or(i128::MAX),
        Err(before) => -i128::try_from(before.duration().as_nanos()).unwrap_or(i128::MAX),
    })
}

/// A picture of the workspace: absolute path → stat, for every file,
/// directory and symlink not skipped. (A hash map: comparing paths
/// component by component made an ordered map the scan's main cost.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    pub entries: HashMap<PathBuf, Stat>,
    /// More than [`MAX_ENTRIES`]: the picture is incomplete.
    pub truncated: bool,
}

impl Scan {
    pub fn get(&self, path: &Path) -> Option<&Stat> {
        self.entries.get(path)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    Created,
    Modified,
    Deleted,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
        }
    }
}

/// One path a command changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    pub path: PathBuf,
    pub change: Change,
    /// Its stat before the command (`None`: created).
    pub before: Option<Stat>,
    /// Its stat after (`None`: deleted).
    pub after: Option<Stat>,
}

/// How a workspace is scanned: its root, and paths under it that are never
/// part of the picture (a checkpoint store kept inside the workspace).
#[derive(Clone, Debug)]
pub struct Scanner {
    root: PathBuf,
    skip: Vec<PathBuf>,
}

impl Scanner {
    pub fn new(root: impl Into<PathBuf>, skip: Vec<PathBuf>) -> Self {
        Self {
            root: root.into(),
            skip,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `path` is outside the picture by the fixed rules (skipped
    /// directories, Fettle's own files); `.gitignore` is not consulted.
    pub fn is_skipped(&self, path: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return true;
        };
        if self.skip.iter().any(|s| path.starts_with(s)) {
            return true;
        }
        let names: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let Some((last, parents)) = names.split_last() else {
            return false;
        };
        if parents.iter().any(|n| SKIPPED_DIRS.contains(&n.as_str())) || is_transient(last) {
            return true;
        }
        SKIPPED_DIRS.contains(&last.as_str())
            && Stat::lstat(path).is_some_and(|s| s.kind == Kind::Dir)
    }

    /// The current picture. Never fails: what cannot be read is left out
    /// (and then shows as deleted only if it also cannot be `lstat`ed).
    pub fn scan(&self) -> Scan {
        let skip = self.skip.clone();
        let walker = WalkBuilder::new(&self.root)
            // .gitignore and friends, but dotfiles are the user's work too.
            .standard_filters(true)
            .hidden(false)
            // A folder that is not a git repository still means its .gitignore.
            .require_git(false)
            .follow_links(false)
            .filter_entry(move |entry| {
                let name = entry.file_name().to_string_lossy();
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                if is_dir && SKIPPED_DIRS.contains(&name.as_ref()) {
                    return false;
                }
                if is_transient(&name) {
                    return false;
                }
                !skip.iter().any(|s| entry.path().starts_with(s))
            })
            .build();
        let mut scan = Scan::default();
        for entry in walker.flatten() {
            if entry.depth() == 0 {
                continue;
            }
            if scan.entries.len() >= MAX_ENTRIES {
                scan.truncated = true;
                break;
            }
            // Not following links: this is the entry's own lstat.
            let Ok(meta) = entry.metadata() else { continue };
            scan.entries.insert(entry.into_path(), Stat::of(&meta));
        }
        scan
    }

    /// The picture after a command: [`scan`](Self::scan), plus every path
    /// of `before` that the walk no longer saw but that still exists (a
    /// command that edited `.gitignore` cannot hide its changes that way).
    pub fn rescan(&self, before: &Scan) -> Scan {
        let mut after = self.scan();
        for path in before.entries.keys() {
            if after.entries.contains_key(path) {
                continue;
            }
            if let Some(stat) = Stat::lstat(path) {
                after.entries.insert(path.clone(), stat);
            }
        }
        after
    }
}

/// What changed from `before` to `after`, sorted by path. A path whose kind
/// changed (a file replaced by a symlink) is "modified".
pub fn diff(before: &Scan, after: &Scan) -> Vec<Changed> {
    let mut out = Vec::new();
    for (path, old) in &before.entries {
        match after.entries.get(path) {
            None => out.push(Changed {
                path: path.clone(),
                change: Change::Deleted,
                before: Some(*old),
                after: None,
            }),
            Some(new) if old.differs(new) => out.push(Changed {
                path: path.clone(),
                change: Change::Modified,
                before: Some(*old),
                after: Some(*new),
            }),
            Some(_) => {}
        }
    }
    for (path, new) in &after.entries {
        if !before.entries.contains_key(path) {
            out.push(Changed {
                path: path.clone(),
                change: Change::Created,
                before: None,
                after: Some(*new),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The temporary files of Fettle's own atomic writes.
/// Files no command is answerable for: Fettle's own temp files, and the
/// swap, lock and backup files editors keep beside the files they edit
/// (Vim's `.x.swp` and `4913`, Emacs's `.#x`, `#x#` and `x~`) — undoing
/// those would pull them from under the editor.
fn is_transient(name: &str) -> bool {
    is_fettle_temp(name)
        || [".swp", ".swo", ".swx"].iter().any(|e| name.ends_with(e))
        || name.starts_with(".#")
        || (name.len() > 1 && name.starts_with('#') && name.ends_with('#'))
        || name.ends_with('~')
        || name == "4913"
}

fn is_fettle_temp(name: &str) -> bool {
    name.starts_with('.') && name.contains(".fettle-tmp-")
}

#[cfg(test)]
mod tests;

//! What a confined access refuses, worded for the model.

use std::fmt;
use std::io;
use std::path::Path;

/// Why a confined operation refused a path. Carried inside the
/// `io::Error` (kind `PermissionDenied` or `InvalidInput`); its `Display`
/// is written for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A symlink on the way (or the file itself is one): it appeared after
    /// the path was checked, or the caller did not resolve it.
    Symlink {
        path: String,
    },
    /// A regular file with more than one name.
    HardLink {
        path: String,
        links: u64,
    },
    /// A FIFO, socket or device.
    NotRegular {
        path: String,
    },
    IsDirectory {
        path: String,
    },
    /// Absolute and not under the root, or with `..`.
    Outside {
        path: String,
    },
    /// A file to write more directories deep than [`MAX_DEPTH`].
    TooDeep {
        path: String,
        depth: usize,
    },
}

/// The most directories below the workspace root a written file may sit
/// in: a path 2,000 directories deep cost 88 s of CPU to create and
/// checkpoint, and no project nests anywhere near this.
pub const MAX_DEPTH: usize = 64;

/// Refuses a file to be written at `rel` (relative to the root) if it lies
/// more than [`MAX_DEPTH`] directories deep.
pub fn check_depth(rel: &Path) -> io::Result<()> {
    let depth = rel.components().count().saturating_sub(1);
    if depth > MAX_DEPTH {
        let shown: String = rel.to_string_lossy().chars().take(120).collect();
        return Err(Refusal::TooDeep {
            path: format!("{shown}…"),
            depth,
        }
        .into_io());
    }
    Ok(())
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Symlink { path } => write!(
                f,
                "\"{path}\" is, or goes through, a symlink that was not there when the path was \
                 checked (a directory replaced by a symlink while in use; it may lead outside the \
                 workspace); it was not used"
            ),
            Refusal::HardLink { path, links } => write!(
                f,
                "\"{path}\" has {links} hard links: another name of the same file may be outside \
                 the workspace, so Fettle does not read or write it (the user can allow this with \
                 `agent.allow_hardlinks = true`)"
            ),
            Refusal::NotRegular { path } => write!(
                f,
                "\"{path}\" is not a regular file (a FIFO, socket or device); only regular files \
                 can be read or written"
            ),
            Refusal::IsDirectory { path } => {
                write!(f, "\"{path}\" is a directory; give the path of a file")
            }
            Refusal::Outside { path } => write!(
                f,
                "\"{path}\" is outside the workspace; paths are relative to the workspace root"
            ),
            Refusal::TooDeep { path, depth } => write!(
                f,
                "\"{path}\" is {depth} directories deep; Fettle creates files at most {MAX_DEPTH} \
                 directories below the workspace root: choose a shallower path"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

impl Refusal {
    pub(super) fn into_io(self) -> io::Error {
        let kind = match self {
            Refusal::Outside { .. } | Refusal::IsDirectory { .. } | Refusal::TooDeep { .. } => {
                io::ErrorKind::InvalidInput
            }
            _ => io::ErrorKind::PermissionDenied,
        };
        io::Error::new(kind, self)
    }

    /// The refusal inside `err`, if it is one.
    pub fn of(err: &io::Error) -> Option<&Refusal> {
        err.get_ref().and_then(|e| e.downcast_ref::<Refusal>())
    }
}

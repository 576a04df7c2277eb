//! Paths the model gives, checked against the workspace root.
//!
//! Every path a tool touches goes through [`WorkspacePaths`]: `..` and
//! symlinks are resolved before the containment check, so neither
//! `../../etc/passwd` nor a symlink pointing out of the workspace gets
//! through. The messages are written for the model: they say what was wrong
//! and what to send instead.
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::protected::Protected;

/// The workspace root, canonical, and the path checks against it.
#[derive(Clone, Debug)]
pub struct WorkspacePaths {
    root: PathBuf,
    /// What writes are refused (`.git/`, `fettle.toml`, the test script…).
    protected: Protected,
}

/// Why a path was refused. `Display` is the message shown to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    Empty,
    /// Resolves outside the workspace. `resolved` is where it leads.
    Outside {
        given: String,
        resolved: PathBuf,
        root: PathBuf,
        via_symlink: bool,
    },
    /// A `..` after a directory that does not exist: it cannot be resolved
    /// against the disk, and guessing is how escapes happen.
    DotDotInNewPath {
        given: String,
    },
    /// A symlink whose target does not exist; writing through it could
    /// create a file anywhere.
    BrokenSymlink {
        given: String,
        link: PathBuf,
    },
    /// A protected path (writes only): see [`Protected`].
    Protected {
        given: String,
        /// The entry that matched (`.git/`, `fettle.toml`, `run_tests.sh`).
        entry: String,
        reason: &'static str,
    },
    /// An existing directory where a file is needed (writes only).
    IsDirectory {
        given: String,
    },
    Invalid {
        given: String,
        reason: String,
    },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Empty => write!(
                f,
                "the path is empty; give a file path relative to the workspace root"
            ),
            PathError::Outside {
                given,
                root,
                via_symlink: false,
                ..
            } => write!(
                f,
                "\"{given}\" is outside the workspace ({}); paths are relative to the workspace root",
                root.display()
            ),
            PathError::Outside {
                given,
                resolved,
                root,
                via_symlink: true,
            } => write!(
                f,
                "\"{given}\" goes through a symlink to {}, which is outside the workspace ({}); \
                 only files inside the workspace can be used",
                resolved.display(),
                root.display()
            ),
            PathError::DotDotInNewPath { given } => write!(
                f,
                "\"{given}\" uses \"..\" after a directory that does not exist; \
                 give the path without \"..\", relative to the workspace root"
            ),
            PathError::BrokenSymlink { given, link } => write!(
                f,
                "\"{given}\" goes through {}, a symlink whose target does not exist; \
                 it cannot be used",
                link.display()
            ),
            PathError::Protected {
                given,
                entry,
                reason,
            } => {
                if entry.ends_with('/') {
                    write!(
                        f,
                        "\"{given}\" is inside {entry}, which the agent must not modify: {reason}; \
                         edit the project's files instead"
                    )
                } else {
                    write!(
                        f,
                        "\"{given}\" is protected ({entry}), the agent must not modify it: {reason}; \
                         edit the project's files instead"
                    )
                }
            }
            PathError::IsDirectory { given } => write!(
                f,
                "\"{given}\" is a directory; give the path of a file"
            ),
            PathError::Invalid { given, reason } => write!(f, "\"{given}\": {reason}"),
        }
    }
}

impl std::error::Error for PathError {}

impl WorkspacePaths {
    /// `root` must exist; it is canonicalized so that every comparison is
    /// between canonical paths.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = std::fs::canonicalize(root.as_ref())?;
        let protected = Protected::new(&root, &[], None);
        Ok(Self { root, protected })
    }

    /// Refuses writes to `protected` (the built-in entries, the test
    /// command's files, `agent.protected_paths`) instead of the built-ins.
    pub fn with_protected(mut self, protected: Protected) -> Self {
        self.protected = protected;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a model-given path (relative to the root, or absolute and
    /// inside it) to an absolute path inside the workspace. The file need not
    /// exist. Symlinks in the existing part are followed before the check.
    pub fn resolve(&self, given: &str) -> Result<PathBuf, PathError> {
        if given.trim().is_empty() {
            return Err(PathError::Empty);
        }
        if given.contains('\0') {
            return Err(PathError::Invalid {
                given: given.to_owned(),
                reason: "the path contains a NUL byte".to_owned(),
            });
        }
        let joined = self.root.join(given);
        let (existing, rest) = split_existing(&joined);
        let base = match std::fs::canonicalize(&existing) {
            Ok(base) => base,
            Err(_) => {
                // `symlink_metadata` said it exists, so it is a dangling link
                // (or one we may not follow); either way, unusable.
                return Err(PathError::BrokenSymlink {
                    given: given.to_owned(),
                    link: existing,
                });
            }
        };
        let mut resolved = base;
        for part in rest.components() {
            match part {
                Component::Normal(name) => resolved.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(PathError::DotDotInNewPath {
                        given: given.to_owned(),
                    })
                }
                // `rest` is relative: `split_existing` always finds at least
                // the filesystem root.
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::Invalid {
                        given: given.to_owned(),
                        reason: "the path could not be resolved".to_owned(),
                    })
                }
            }
        }
        if !resolved.starts_with(&self.root) {
            let via_symlink = lexically_inside(&joined, &self.root);
            return Err(PathError::Outside {
                given: given.to_owned(),
                resolved,
                root: self.root.clone(),
                via_symlink,
            });
        }
        Ok(resolved)
    }

    /// Like [`resolve`](Self::resolve), and also refuses paths the agent
    /// must not write (see [`Protected`]) and existing directories.
    pub fn resolve_for_write(&self, given: &str) -> Result<PathBuf, PathError> {
        let resolved = self.resolve(given)?;
        self.check_writable(given, &resolved)?;
        if resolved.is_dir() {
            return Err(PathError::IsDirectory {
                given: given.to_owned(),
            });
        }
        Ok(resolved)
    }

    /// Refuses a path that is protected, by the name given (a symlink
    /// named `fettle.toml`) or by the real path (a symlink to `.git/hooks`).
    pub fn check_writable(&self, given: &str, resolved: &Path) -> Result<(), PathError> {
        let lexical = lexical(&self.root.join(given));
        for path in [resolved, lexical.as_path()] {
            let Ok(inside) = path.strip_prefix(&self.root) else {
                continue;
            };
            if let Some(hit) = self.protected.check(inside) {
                return Err(PathError::Protected {
                    given: given.to_owned(),
                    entry: hit.entry,
                    reason: hit.reason,
                });
            }
        }
        Ok(())
    }

    /// `abs` relative to the root with forward slashes (`"."` for the root
    /// itself); a path outside the root is shown whole.
    pub fn relative(&self, abs: &Path) -> String {
        relative_to(&self.root, abs)
    }
}

/// Splits `path` into its longest prefix that exists on disk (not following
/// a final symlink, so dangling links count as existing) and the rest.
fn split_existing(path: &Path) -> (PathBuf, PathBuf) {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if std::fs::symlink_metadata(&existing).is_ok() {
            break;
        }
        let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
            // `..` or `.` at the end of a missing path: keep it in the rest
            // so the caller refuses it rather than guessing.
            match existing.components().next_back() {
                Some(Component::ParentDir) => rest.push("..".into()),
                Some(Component::CurDir) => rest.push(".".into()),
                _ => break,
            }
            if !existing.pop() {
                break;
            }
            continue;
        };
        rest.push(name);
        if !existing.pop() {
            break;
        }
    }
    let rest: PathBuf = rest.iter().rev().collect();
    (existing, rest)
}

/// Whether `path`, with `..` applied lexically (ignoring symlinks), stays
/// under `root`: if so and the real path does not, a symlink led out.
fn lexically_inside(path: &Path, root: &Path) -> bool {
    lexical(path).starts_with(root)
}

/// `path` with `.` and `..` applied lexically (ignoring symlinks).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` relative to `root` with forward slashes (`"."` for the root
/// itself); a path outside `root` is shown whole.
pub fn relative_to(root: &Path, path: &Path) -> String {
    let Ok(inside) = path.strip_prefix(root) else {
        return path.display().to_string();
    };
    let parts: Vec<String> = inside
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

//! Protected paths a read-only bind mount cannot cover: ones that do not
//! exist yet (a command must not CREATE `fettle.toml` either, and Landlock
//! cannot say "anything but this name") and symlinks (a bind protects the
//! target, not the link). Their state is recorded before the command and
//! put back after it, when none of its processes is left.
//!
//! Without namespaces (Landlock only, or nothing) small regular files are
//! also recorded by content and written back if changed.

use std::path::{Path, PathBuf};

/// Regular files up to this size are restored by content (no namespaces).
const MAX_RESTORED_BYTES: u64 = 1 << 20;

enum Before {
    Absent,
    Symlink(PathBuf),
    /// The bytes and the permission bits.
    Content(Vec<u8>, std::fs::Permissions),
}

struct Guard {
    path: PathBuf,
    /// The parent, resolved: nothing is removed or written if a command
    /// swapped a parent directory for a symlink to elsewhere.
    parent: Option<PathBuf>,
    before: Before,
}

pub struct Guards(Vec<Guard>);

impl Guards {
    /// Records the protected paths that need it; with `contents`, small
    /// regular files too.
    pub fn record(paths: &[PathBuf], contents: bool) -> Self {
        let mut out = Vec::new();
        for path in paths {
            let before = match path.symlink_metadata() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Before::Absent,
                Err(_) => continue,
                Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(path) {
                    Ok(target) => Before::Symlink(target),
                    Err(_) => continue,
                },
                Ok(m) if contents && m.is_file() && m.len() <= MAX_RESTORED_BYTES => {
                    match std::fs::read(path) {
                        Ok(bytes) => Before::Content(bytes, m.permissions()),
                        Err(_) => continue,
                    }
                }
                Ok(_) => continue,
            };
            let parent = path.parent().and_then(|p| std::fs::canonicalize(p).ok());
            out.push(Guard {
                path: path.clone(),
                parent,
                before,
            });
        }
        Self(out)
    }

    /// Puts every recorded path back as it was; one note per path changed.
    pub fn restore(&self) -> Vec<String> {
        self.0.iter().filter_map(restore_one).collect()
    }
}

fn restore_one(guard: &Guard) -> Option<String> {
    let path = &guard.path;
    let now = path.symlink_metadata().ok();
    let changed = match (&guard.before, &now) {
        (Before::Absent, None) => false,
        (Before::Absent, Some(_)) => true,
        (Before::Symlink(target), Some(m)) if m.file_type().is_symlink() => {
            std::fs::read_link(path).ok().as_ref() != Some(target)
        }
        (Before::Content(bytes, mode), Some(m)) if m.is_file() && !m.file_type().is_symlink() => {
            std::fs::read(path).ok().as_ref() != Some(bytes) || m.permissions() != *mode
        }
        _ => true,
    };
    if !changed {
        return None;
    }
    let parent = path.parent().and_then(|p| std::fs::canonicalize(p).ok());
    if parent.is_none() || parent != guard.parent {
        return Some(format!(
            "{} is protected and was changed by the command, but its directory was replaced: not restored",
            path.display()
        ));
    }
    if let Some(m) = &now {
        let removed = if m.is_dir() && !m.file_type().is_symlink() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        if let Err(err) = removed {
            return Some(format!(
                "{} is protected and was changed by the command; cannot undo it: {err}",
                path.display()
            ));
        }
    }
    let put_back = match &guard.before {
        Before::Absent => Ok(()),
        Before::Symlink(target) => std::os::unix::fs::symlink(target, path),
        Before::Content(bytes, mode) => write_new(path, bytes, mode),
    };
    Some(match put_back {
        Ok(()) => format!(
            "{} is protected (read-only for commands): the command's change was undone",
            path.display()
        ),
        Err(err) => format!("{}: cannot restore it: {err}", path.display()),
    })
}

fn write_new(path: &Path, bytes: &[u8], mode: &std::fs::Permissions) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.set_permissions(mode.clone())
}

//! Protected paths a read-only bind mount cannot cover: ones that do not
//! exist yet (a command must not CREATE `fettle.toml` either, and Landlock
//! cannot say "anything but this name") and symlinks (a bind protects the
//! target, not the link). Their state is recorded before the command and
//! put back after it, when none of its processes is left.
//!
//! Without namespaces (Landlock only, or nothing) small regular files are
//! also recorded by content and written back if changed. A protected
//! directory (`.git/`) is recorded too: Landlock keeps it from being
//! removed or renamed, but the rights to make and write files beneath the
//! workspace reach into it, so entries a command adds there are removed
//! and small files it rewrites are written back.

use std::path::{Path, PathBuf};

/// Regular files up to this size are restored by content (no namespaces).
const MAX_RESTORED_BYTES: u64 = 1 << 20;
/// Most entries of a protected directory recorded, and most bytes kept.
const MAX_DIR_ENTRIES: usize = 20_000;
const MAX_DIR_BYTES: u64 = 32 << 20;

enum Before {
    Absent,
    Symlink(PathBuf),
    /// The bytes and the permission bits.
    Content(Vec<u8>, std::fs::Permissions),
    /// A directory: every entry beneath it, and the bytes of its small
    /// files (`None`: too large or over the budget, only named).
    /// With the directory's `[dev, ino]`: nothing is touched if it was
    /// swapped (for a symlink to elsewhere) meanwhile.
    Tree(Tree, [u64; 2]),
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
                Ok(m) if contents && m.is_dir() => match record_tree(path) {
                    Some(tree) => Before::Tree(tree, inode(&m)),
                    None => continue,
                },
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
    if let Before::Tree(tree, was) = &guard.before {
        let same = path
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && inode(&m) == *was);
        if !same {
            return Some(format!(
                "{} is protected and was replaced by the command: not restored",
                path.display()
            ));
        }
        return restore_tree(path, tree);
    }
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
        // Handled above (never reaches here).
        Before::Tree(..) => Ok(()),
    };
    Some(match put_back {
        Ok(()) => format!(
            "{} is protected (read-only for commands): the command's change was undone",
            path.display()
        ),
        Err(err) => format!("{}: cannot restore it: {err}", path.display()),
    })
}

type Tree = std::collections::BTreeMap<PathBuf, Option<(Vec<u8>, std::fs::Permissions)>>;

fn inode(meta: &std::fs::Metadata) -> [u64; 2] {
    use std::os::unix::fs::MetadataExt as _;
    [meta.dev(), meta.ino()]
}

/// Every entry beneath `dir` (not following links), with the bytes of its
/// small files; `None` past [`MAX_DIR_ENTRIES`] (too big to guard).
fn record_tree(dir: &Path) -> Option<Tree> {
    let mut out = Tree::new();
    let mut kept = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            if out.len() >= MAX_DIR_ENTRIES {
                return None;
            }
            let path = entry.path();
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            let mut content = None;
            if meta.is_dir() {
                stack.push(path.clone());
            } else if meta.is_file()
                && meta.len() <= MAX_RESTORED_BYTES
                && kept + meta.len() <= MAX_DIR_BYTES
            {
                if let Ok(bytes) = std::fs::read(&path) {
                    kept += bytes.len() as u64;
                    content = Some((bytes, meta.permissions()));
                }
            }
            out.insert(path, content);
        }
    }
    Some(out)
}

/// Removes what a command added beneath `dir` and writes back the small
/// files it rewrote; one note when anything changed.
fn restore_tree(dir: &Path, before: &Tree) -> Option<String> {
    let Some(after) = record_tree(dir) else {
        return Some(format!(
            "{} is protected; the command filled it past what Fettle checks",
            dir.display()
        ));
    };
    let mut changed = Vec::new();
    let mut failed = Vec::new();
    // Deepest first, so a new directory is emptied before it goes.
    for path in after.keys().rev() {
        if before.contains_key(path) {
            continue;
        }
        let removed = match path.symlink_metadata() {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(_) => continue,
        };
        match removed {
            Ok(()) => changed.push(path.clone()),
            Err(err) => failed.push(format!("{}: {err}", path.display())),
        }
    }
    for (path, was) in before {
        let Some((bytes, mode)) = was else { continue };
        let now = after.get(path).and_then(Option::as_ref);
        if now.is_some_and(|(b, m)| b == bytes && m == mode) {
            continue;
        }
        let put = path
            .symlink_metadata()
            .map_or(true, |m| m.is_file())
            .then(|| rewrite(path, bytes, mode));
        match put {
            Some(Ok(())) => changed.push(path.clone()),
            Some(Err(err)) => failed.push(format!("{}: {err}", path.display())),
            None => failed.push(format!("{}: no longer a file", path.display())),
        }
    }
    if changed.is_empty() && failed.is_empty() {
        return None;
    }
    let mut note = format!(
        "{} is protected (read-only for commands): the command's changes to {} entr{} were undone",
        dir.display(),
        changed.len(),
        if changed.len() == 1 { "y" } else { "ies" }
    );
    if !failed.is_empty() {
        note.push_str(&format!("; not restored: {}", failed.join(", ")));
    }
    Some(note)
}

/// Writes `bytes` into the file at `path` in place (never through a link).
fn rewrite(path: &Path, bytes: &[u8], mode: &std::fs::Permissions) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)?;
    file.set_permissions(mode.clone())
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

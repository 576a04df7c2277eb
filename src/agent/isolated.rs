//! A copy of the workspace where a candidate fix is tested without touching
//! the user's files or buffers (`agent.candidates`).
//!
//! The files git would track are copied (`.gitignore` respected, `.git`
//! left out); what is ignored — virtualenvs, `node_modules`, build output —
//! is linked to the real entry instead, so a copy of a big project costs
//! its sources only. The sandbox keeps those links read-only (they lead
//! out of the copy), except Cargo's `target/`, which the copies of one task
//! share in a directory of their own. A candidate's changes are written
//! into the copy only through real directories: an ignored directory on
//! the way is unshared one level at a time, and a symlink of the
//! workspace's own on the way refuses the change.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::agent::sandbox::SandboxPolicy;

/// Most files and bytes copied for one candidate: past them the workspace
/// is too big to copy per candidate, and the task runs one line of attempts.
const MAX_FILES: usize = 50_000;
const MAX_BYTES: u64 = 512 * 1024 * 1024;

/// Where the copies of one task live: removed with it.
pub struct CopyArea {
    dir: tempfile::TempDir,
}

impl CopyArea {
    /// A private directory under `parent` (stale ones of dead Fettles are
    /// swept first).
    pub fn new(parent: &Path) -> io::Result<Self> {
        fs::create_dir_all(parent)?;
        crate::agent::sandbox::sweep_stale(parent);
        // The owner's pid in the name, as the sandbox's temp dirs: a later
        // Fettle removes it once that process is gone.
        let dir = tempfile::Builder::new()
            .prefix(&format!("tmp-{}-", std::process::id()))
            .tempdir_in(parent)?;
        Ok(Self { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The build directory the copies share (Cargo's `target/`).
    fn shared_target(&self) -> io::Result<PathBuf> {
        let dir = self.dir.path().join("cargo-target");
        fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

/// One copy of the workspace; removed when dropped.
pub struct IsolatedCopy {
    dir: tempfile::TempDir,
    /// Links to ignored entries of the real workspace, by path in the copy.
    links: HashSet<PathBuf>,
    real_root: PathBuf,
    shared: Vec<PathBuf>,
}

impl IsolatedCopy {
    /// Copies `root` (canonical) into a new directory of `area`.
    pub fn create(root: &Path, area: &CopyArea) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("candidate-")
            .tempdir_in(area.path())?;
        let mut copy = Self {
            dir,
            links: HashSet::new(),
            real_root: root.to_path_buf(),
            shared: Vec::new(),
        };
        let walked = tracked_entries(root)?;
        let mut files = 0usize;
        let mut bytes = 0u64;
        let mut dirs: Vec<PathBuf> = vec![root.to_path_buf()];
        for (path, kind) in &walked {
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            if rel.as_os_str().is_empty() {
                continue;
            }
            let to = copy.dir.path().join(rel);
            if kind.is_dir() {
                fs::create_dir(&to)?;
                dirs.push(path.clone());
            } else if kind.is_symlink() {
                // As it is: it leads where it led in the workspace.
                std::os::unix::fs::symlink(fs::read_link(path)?, &to)?;
            } else if kind.is_file() {
                files += 1;
                bytes += copy_regular(path, &to)?;
                if files > MAX_FILES || bytes > MAX_BYTES {
                    return Err(io::Error::other(format!(
                        "the workspace has more than {MAX_FILES} files or {} MiB of them to copy for each candidate",
                        MAX_BYTES / (1024 * 1024)
                    )));
                }
            }
        }
        let kept: HashSet<&PathBuf> = walked.iter().map(|(p, _)| p).collect();
        let target = area.shared_target()?;
        for dir in dirs {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if entry.file_name() == ".git" || kept.contains(&path) {
                    continue;
                }
                let Ok(rel) = path.strip_prefix(root) else {
                    continue;
                };
                let to = copy.dir.path().join(rel);
                let cargo_target =
                    entry.file_name() == "target" && dir.join("Cargo.toml").is_file();
                let from = match cargo_target {
                    true => {
                        // One per crate directory, shared by the copies.
                        let shared = target.join(rel);
                        fs::create_dir_all(&shared)?;
                        copy.shared.push(target.clone());
                        shared
                    }
                    false => path.clone(),
                };
                std::os::unix::fs::symlink(&from, &to)?;
                copy.links.insert(to);
            }
        }
        copy.shared.sort();
        copy.shared.dedup();
        Ok(copy)
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The path in the copy of `path` in the workspace (unchanged when it
    /// is not in the workspace).
    pub fn map(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.real_root) {
            Ok(rel) => self.dir.path().join(rel),
            Err(_) => path.to_path_buf(),
        }
    }

    /// Writes a candidate's files (workspace paths → text) into the copy.
    pub fn write(&mut self, changes: &BTreeMap<PathBuf, String>) -> io::Result<()> {
        for (path, text) in changes {
            let rel = path.strip_prefix(&self.real_root).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{} is outside the workspace", path.display()),
                )
            })?;
            self.write_one(rel, text.as_bytes())?;
        }
        Ok(())
    }

    fn write_one(&mut self, rel: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut at = self.dir.path().to_path_buf();
        let parts: Vec<_> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            let std::path::Component::Normal(name) = part else {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{} is not a plain relative path", rel.display()),
                ));
            };
            at.push(name);
            let last = i + 1 == parts.len();
            match fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if !self.links.remove(&at) {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!("{} leads through a symlink", rel.display()),
                        ));
                    }
                    fs::remove_file(&at)?;
                    if !last {
                        self.unshare(&at)?;
                    }
                }
                Ok(meta) if !last && !meta.is_dir() => {
                    return Err(io::Error::other(format!(
                        "{} is not a directory",
                        at.display()
                    )));
                }
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    if !last {
                        fs::create_dir(&at)?;
                    }
                }
                Err(err) => return Err(err),
            }
        }
        if fs::symlink_metadata(&at).is_ok() {
            fs::remove_file(&at)?;
        }
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&at)?;
        file.write_all(bytes)
    }

    /// Replaces the link at `at` (already removed) by a directory of links
    /// to the real directory's entries.
    fn unshare(&mut self, at: &Path) -> io::Result<()> {
        let real = self
            .real_root
            .join(at.strip_prefix(self.dir.path()).map_err(io::Error::other)?);
        fs::create_dir(at)?;
        for entry in fs::read_dir(&real)?.flatten() {
            let to = at.join(entry.file_name());
            std::os::unix::fs::symlink(entry.path(), &to)?;
            self.links.insert(to);
        }
        Ok(())
    }

    /// The sandbox of the workspace, moved to the copy: it writes in the
    /// copy (and the shared build directory) instead of the workspace.
    pub fn sandbox(&self, policy: &SandboxPolicy) -> SandboxPolicy {
        let mut moved = policy.writing_elsewhere(
            &self.real_root,
            std::iter::once(self.dir.path().to_path_buf()).chain(self.shared.iter().cloned()),
        );
        moved.protect = policy.protect.iter().map(|p| self.map(p)).collect();
        moved
    }
}

/// What a git-aware walk of `root` yields (ignore files respected, hidden
/// files included, `.git` left out), with each entry's type.
fn tracked_entries(root: &Path) -> io::Result<Vec<(PathBuf, fs::FileType)>> {
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(false)
        .follow_links(false)
        .git_global(false)
        .require_git(false);
    crate::fsread::ignore_files::guard_parents(&mut builder, root)
        .map_err(|err| io::Error::other(err.to_string()))?;
    builder.filter_entry(|entry| {
        entry.file_name() != ".git" && crate::fsread::ignore_files::entry_is_safe(entry)
    });
    let mut out = Vec::new();
    for entry in builder.build() {
        let entry = entry.map_err(|err| io::Error::other(err.to_string()))?;
        if let Some(kind) = entry.file_type() {
            out.push((entry.into_path(), kind));
        }
    }
    Ok(out)
}

/// Copies the regular file `from` (never through a symlink, never a FIFO
/// or device swapped in) to the new file `to`; returns its size.
fn copy_regular(from: &Path, to: &Path) -> io::Result<u64> {
    let mut source = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)?;
    let meta = source.metadata()?;
    if !meta.is_file() {
        return Ok(0);
    }
    let mut target = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(to)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                target.write_all(&buf[..n])?;
                total += n as u64;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    // The mode too: a test script may need its executable bit.
    target.set_permissions(meta.permissions())?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_sources_links_ignored_and_keeps_the_workspace_untouched() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        fs::write(root.join(".gitignore"), "venv/\n").unwrap();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::write(root.join("src/a.py"), "x = 1\n").unwrap();
        fs::create_dir_all(root.join("venv/lib")).unwrap();
        fs::write(root.join("venv/lib/dep.py"), "dep\n").unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join(".git/HEAD"), "ref\n").unwrap();
        let area_parent = tempfile::tempdir().unwrap();
        let area = CopyArea::new(area_parent.path()).unwrap();
        let mut copy = IsolatedCopy::create(&root, &area).unwrap();
        let c = copy.root().to_path_buf();
        assert_eq!(fs::read_to_string(c.join("src/a.py")).unwrap(), "x = 1\n");
        assert!(fs::symlink_metadata(c.join("venv"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!c.join(".git").exists());
        // A change under the ignored directory unshares it instead of
        // writing through the link into the workspace.
        let changes = BTreeMap::from([
            (root.join("src/a.py"), "x = 2\n".to_owned()),
            (root.join("venv/lib/dep.py"), "changed\n".to_owned()),
            (root.join("src/new/b.py"), "y\n".to_owned()),
        ]);
        copy.write(&changes).unwrap();
        assert_eq!(fs::read_to_string(c.join("src/a.py")).unwrap(), "x = 2\n");
        assert_eq!(
            fs::read_to_string(c.join("venv/lib/dep.py")).unwrap(),
            "changed\n"
        );
        assert_eq!(fs::read_to_string(c.join("src/new/b.py")).unwrap(), "y\n");
        assert_eq!(
            fs::read_to_string(root.join("src/a.py")).unwrap(),
            "x = 1\n"
        );
        assert_eq!(
            fs::read_to_string(root.join("venv/lib/dep.py")).unwrap(),
            "dep\n"
        );
        assert!(!root.join("src/new").exists());
        drop(copy);
        assert!(!c.exists(), "the copy is removed with it");
    }

    #[test]
    fn a_change_through_a_workspace_symlink_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        let area_parent = tempfile::tempdir().unwrap();
        let area = CopyArea::new(area_parent.path()).unwrap();
        let mut copy = IsolatedCopy::create(&root, &area).unwrap();
        let changes = BTreeMap::from([(root.join("out/evil.txt"), "x".to_owned())]);
        let err = copy.write(&changes).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!outside.path().join("evil.txt").exists());
    }
}

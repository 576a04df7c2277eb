//! What the task changed: the files whose bytes differ from before it, and
//! their diff — a huge file a command wrote stood for by its size and
//! hash, read in chunks from the file the confined lookup found.
use std::io;
use std::path::{Path, PathBuf};

use super::Files;

impl Files {
    /// Files whose bytes now differ from before the task.
    pub fn changed_files(&self) -> Vec<PathBuf> {
        self.touched
            .iter()
            .cloned()
            .chain(self.staged_extra())
            .filter(|p| self.differs(p))
            .collect()
    }

    /// The bytes of `path` before the task (`None`: it did not exist).
    pub fn original(&self, path: &Path) -> Option<&[u8]> {
        match self.originals.get(path) {
            Some(original) => original.as_deref(),
            None => self.staged_original(path).flatten(),
        }
    }

    /// Whether `path` differs from its original. A huge file (one a
    /// command wrote) of another size differs without being read.
    pub(super) fn differs(&self, path: &Path) -> bool {
        let original = self.original(path);
        if let Some(len) = self.huge_file_len(path) {
            if original.is_none_or(|o| o.len() as u64 != len) {
                return true;
            }
        }
        self.bytes(path).as_deref() != original
    }

    /// The size on disk of the regular file at `path` (no symlink
    /// followed); `None` when it is not one.
    pub fn disk_len(&self, path: &Path) -> Option<u64> {
        let meta = self.disk.metadata(path).ok()?;
        meta.is_file().then_some(meta.len())
    }

    /// The size of `path` when it is a regular file too big to diff line
    /// by line (no symlink is followed).
    pub(super) fn huge_file_len(&self, path: &Path) -> Option<u64> {
        if self.staged(path).is_some() {
            return None;
        }
        let meta = self.disk.metadata(path).ok()?;
        (meta.is_file() && meta.len() > crate::agent::task::diff::MAX_DIFF_FILE_BYTES)
            .then_some(meta.len())
    }

    /// A unified diff of every changed file, original → current. A huge
    /// file is not read whole: its size and hash stand for it.
    pub fn diff(&self) -> String {
        let mut out = String::new();
        let changed = self.changed_files();
        for (i, path) in changed.iter().enumerate() {
            if out.len() > crate::agent::task::diff::MAX_DIFF_BYTES {
                // Thousands of files a command wrote: they are listed in
                // `changedFiles`; the diff says how many it leaves out.
                out.push_str(&format!(
                    "[… {} more changed files not shown: the diff passed {} bytes …]\n",
                    changed.len() - i,
                    crate::agent::task::diff::MAX_DIFF_BYTES
                ));
                break;
            }
            let path = path.clone();
            let rel = self.paths.relative(&path);
            let before = self.original(&path);
            if let Some(len) = self.huge_file_len(&path) {
                let after = crate::agent::task::diff::Described {
                    len,
                    sha256: self.stream_hash(&path),
                };
                let before = before.map(crate::agent::task::diff::Described::of);
                out.push_str(&crate::agent::task::diff::described(
                    &rel,
                    before.as_ref(),
                    Some(&after),
                ));
                continue;
            }
            let after = self.bytes(&path);
            out.push_str(&crate::agent::task::diff::unified(
                &rel,
                before,
                after.as_deref(),
            ));
        }
        out
    }

    /// The SHA-256 of the regular file at `path`, read in chunks. The file
    /// opened must be the one the confined lookup found (same device and
    /// inode), so a symlink swapped in meanwhile is not followed.
    pub(super) fn stream_hash(&self, path: &Path) -> Option<String> {
        use sha2::{Digest, Sha256};
        use std::io::Read as _;
        use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
        let expected = self.disk.metadata(path).ok()?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.dev() != expected.dev() || meta.ino() != expected.ino() {
            return None;
        }
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => hasher.update(&buf[..n]),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        Some(crate::agent::task::diff::hex(&hasher.finalize()))
    }
}

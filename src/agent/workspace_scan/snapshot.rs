//! The bytes of the workspace's files before the task's first command, so
//! that what a command modifies or deletes can be put back.
//!
//! One pack file in the task's checkpoint directory, each distinct content
//! stored once (by SHA-256), readable by the user only. It lives as long as
//! the task: what a command turns out to have changed is copied into the
//! checkpoint proper (fsynced blobs, a manifest entry) right after that
//! command, so the pack is never read after a crash and is not fsynced.
//! A file over the budget is not kept; a command changing it is reported as
//! not restorable.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Kind, Scan, Stat};

/// How much of the workspace a snapshot keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Larger files are not kept.
    pub max_file: u64,
    /// Bytes kept in all (after deduplication).
    pub max_total: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_file: 1 << 20,
            max_total: 64 << 20,
        }
    }
}

#[derive(Clone, Debug)]
enum Saved {
    Kept {
        offset: u64,
        len: u64,
        mode: u32,
        stat: Stat,
    },
    NotKept {
        reason: String,
    },
}

enum Found {
    /// Offset and length of the same bytes in the pack.
    Stored((u64, u64)),
    /// Not in the pack yet: their hash and them.
    New([u8; 32], Vec<u8>),
}

/// What a file was when the snapshot was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Original {
    Bytes {
        bytes: Vec<u8>,
        mode: u32,
    },
    /// Not restorable, and why.
    NotKept(String),
}

#[derive(Debug)]
pub struct Snapshot {
    pack: PathBuf,
    index: HashMap<PathBuf, Saved>,
    /// Distinct bytes stored.
    pub stored_bytes: u64,
    /// Files whose bytes are kept.
    pub kept_files: usize,
    /// Files left out (too large, over the budget, unreadable).
    pub not_kept: usize,
}

impl Snapshot {
    /// Reads every regular file of `scan` that fits the budget into a new
    /// pack at `pack` (which must not exist).
    pub fn take(pack: &Path, scan: &Scan, budget: Budget) -> io::Result<Snapshot> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(pack)?;
        let mut out = BufWriter::new(file);
        let mut snapshot = Snapshot {
            pack: pack.to_path_buf(),
            index: HashMap::new(),
            stored_bytes: 0,
            kept_files: 0,
            not_kept: 0,
        };
        let mut by_hash: HashMap<[u8; 32], (u64, u64)> = HashMap::new();
        // In path order: which files fit the budget does not depend on
        // the map's order.
        let mut files: Vec<(&PathBuf, &Stat)> = scan
            .entries
            .iter()
            .filter(|(_, stat)| stat.kind == Kind::File)
            .collect();
        files.sort_unstable_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
        for (path, stat) in files {
            let read = snapshot.read_new(path, stat, budget, &by_hash);
            let saved = match read {
                Ok(found) => {
                    let (offset, len) = match found {
                        Found::Stored(at) => at,
                        Found::New(hash, bytes) => {
                            let at = (snapshot.stored_bytes, bytes.len() as u64);
                            out.write_all(&bytes)?;
                            snapshot.stored_bytes += at.1;
                            by_hash.insert(hash, at);
                            at
                        }
                    };
                    snapshot.kept_files += 1;
                    Saved::Kept {
                        offset,
                        len,
                        mode: stat.mode,
                        stat: *stat,
                    }
                }
                Err(reason) => {
                    snapshot.not_kept += 1;
                    Saved::NotKept { reason }
                }
            };
            snapshot.index.insert(path.clone(), saved);
        }
        out.into_inner().map_err(|e| e.into_error())?;
        Ok(snapshot)
    }

    /// `path`'s bytes, or where the pack already holds them, or why they
    /// are not kept. The total counts distinct bytes (a duplicate costs
    /// nothing), so files are read until the budget is spent even if they
    /// may not fit.
    fn read_new(
        &self,
        path: &Path,
        stat: &Stat,
        budget: Budget,
        by_hash: &HashMap<[u8; 32], (u64, u64)>,
    ) -> Result<Found, String> {
        let over = || {
            format!(
                "the workspace holds more than Fettle's {} MiB snapshot budget, so it kept no copy",
                budget.max_total >> 20
            )
        };
        if self.stored_bytes >= budget.max_total {
            return Err(over());
        }
        let bytes = read_within(path, stat, budget.max_file)?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        if let Some(&at) = by_hash.get(&hash) {
            return Ok(Found::Stored(at));
        }
        if self.stored_bytes + bytes.len() as u64 > budget.max_total {
            return Err(over());
        }
        Ok(Found::New(hash, bytes))
    }

    /// What `path` was at the snapshot, if it is still what the snapshot
    /// saw (`before`: its stat just before the command that changed it).
    /// `None`: the snapshot never saw it (created since).
    pub fn original(&self, path: &Path, before: &Stat) -> Option<Original> {
        let saved = self.index.get(path)?;
        Some(match saved {
            Saved::NotKept { reason } => Original::NotKept(reason.clone()),
            Saved::Kept {
                offset,
                len,
                mode,
                stat,
            } => {
                if stat != before {
                    return Some(Original::NotKept(
                        "it had changed since the task started, so its earlier content is unknown"
                            .to_owned(),
                    ));
                }
                match self.read(*offset, *len) {
                    Ok(bytes) => Original::Bytes { bytes, mode: *mode },
                    Err(err) => Original::NotKept(format!("the snapshot is unreadable: {err}")),
                }
            }
        })
    }

    /// Whether the snapshot holds `path`'s bytes.
    pub fn has(&self, path: &Path) -> bool {
        matches!(self.index.get(path), Some(Saved::Kept { .. }))
    }

    fn read(&self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let file = File::open(&self.pack)?;
        let len = usize::try_from(len).map_err(io::Error::other)?;
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }

    /// Deletes the pack (the task is over).
    pub fn discard(self) {
        if let Err(err) = fs::remove_file(&self.pack) {
            if err.kind() != io::ErrorKind::NotFound {
                tracing::warn!(%err, pack = %self.pack.display(), "could not delete the snapshot");
            }
        }
    }
}

/// `path`'s bytes if it is at most `max_file` long, else why not. Never
/// follows a symlink swapped in since the scan.
fn read_within(path: &Path, stat: &Stat, max_file: u64) -> Result<Vec<u8>, String> {
    let too_large = || {
        format!(
            "it is larger than {} MiB, so Fettle kept no copy",
            max_file >> 20
        )
    };
    if stat.size > max_file {
        return Err(too_large());
    }
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|err| format!("it could not be read: {err}"))?;
    let mut bytes = Vec::with_capacity(usize::try_from(stat.size).unwrap_or(0));
    (&mut file)
        .take(max_file + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("it could not be read: {err}"))?;
    // Changed between the scan and this read: the bytes would not match
    // the stat the "before" pictures are compared with.
    match file.metadata() {
        Ok(meta) if Stat::of(&meta) == *stat => {}
        _ => return Err("it changed while Fettle was copying it".to_owned()),
    }
    if bytes.len() as u64 > max_file {
        return Err(too_large());
    }
    Ok(bytes)
}

//! Checkpoint manifests are signed: undo writes wherever a manifest's
//! `root` and paths say, so a manifest changed by anyone but this user's
//! Fettle (a command that reached the cache, a copied-in file) must be
//! refused, not followed. HMAC-SHA256 with a per-user random key kept in
//! the cache directory (mode 0600), over the manifest's canonical JSON.
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const KEY_LEN: usize = 32;
/// SHA-256's block size.
const BLOCK: usize = 64;

/// The file holding the key, in the cache directory.
pub const KEY_FILE: &str = "checkpoint.key";

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| -> [u8; BLOCK] {
        let mut out = block;
        for b in &mut out {
            *b ^= byte;
        }
        out
    };
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner);
    outer.finalize().into()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares in time independent of where the first difference is.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The signing key at `path`, created (random, mode 0600) if missing. A
/// key that others could read or write, or that is not a plain file of
/// the right size, is an error: a signature under it proves nothing.
pub fn load_or_create_key(path: &Path) -> io::Result<Vec<u8>> {
    match read_key(path) {
        Ok(key) => return Ok(key),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let mut key = vec![0u8; KEY_LEN];
    random(&mut key)?;
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(mut file) => {
            file.write_all(&key)?;
            file.sync_all()?;
            Ok(key)
        }
        // Another Fettle made it meanwhile: use theirs.
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => read_key(path),
        Err(err) => Err(err),
    }
}

fn read_key(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the checkpoint signing key {} {why}; delete it (Fettle makes a new one, and older checkpoints can no longer be undone)",
                path.display()
            ),
        )
    };
    if !meta.is_file() || meta.len() != KEY_LEN as u64 {
        return Err(bad("is not a 32-byte file"));
    }
    if meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(bad("is not private to this user (mode 0600, owned by you)"));
    }
    let mut key = Vec::with_capacity(KEY_LEN);
    file.read_to_end(&mut key)?;
    Ok(key)
}

fn random(out: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < out.len() {
        // SAFETY: writes at most `out.len() - filled` bytes into `out`.
        let n =
            unsafe { libc::getrandom(out[filled..].as_mut_ptr().cast(), out.len() - filled, 0) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        filled += n as usize;
    }
    Ok(())
}

/// Where the key of a store in `dir` lives: the cache directory's for the
/// usual layout (`<cache>/tasks/<hash>`), else beside the tasks.
pub fn key_path_for(dir: &Path, cache: &Path) -> PathBuf {
    if dir.starts_with(cache.join("tasks")) {
        cache.join(KEY_FILE)
    } else {
        dir.join(KEY_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4231_vectors() {
        // Test case 2.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn the_key_is_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k/checkpoint.key");
        let key = load_or_create_key(&path).unwrap();
        assert_eq!(key.len(), KEY_LEN);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load_or_create_key(&path).unwrap(), key);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_or_create_key(&path).unwrap_err();
        assert!(err.to_string().contains("not private"), "{err}");
    }
}

//! Which workspace `fettle.toml` files the user trusts.
//!
//! A workspace file is untrusted input (whoever wrote the repository wrote
//! it): its keys that could send an API key elsewhere or loosen the sandbox
//! are ignored (see `gate.rs`) unless the user trusted exactly this content
//! of this file once. Trust is recorded per canonical workspace root and the
//! SHA-256 of the file's bytes, in the user's own config directory
//! (`$XDG_CONFIG_HOME/fettle/trusted.toml`), never in the workspace; any
//! change to the file needs trust again.
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `$XDG_CONFIG_HOME/fettle/trusted.toml`, else `$HOME/.config/fettle/trusted.toml`.
pub fn trust_store_path() -> Option<PathBuf> {
    trust_store_path_from(
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

pub(crate) fn trust_store_path_from(
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    super::files::user_config_path_from(xdg, home).map(|p| p.with_file_name("trusted.toml"))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key a workspace is trusted under: its root, canonical when it exists
/// (so `./p`, `/x/../p` and a symlink to it are the same workspace).
pub fn canonical_root(root: &Path) -> PathBuf {
    std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf())
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustStore {
    #[serde(default, rename = "workspace")]
    pub workspaces: Vec<TrustedWorkspace>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedWorkspace {
    /// The canonical workspace root.
    pub path: PathBuf,
    /// SHA-256 of the `fettle.toml` content the user trusted.
    pub sha256: String,
}

/// The store holds one short entry per trusted workspace: 16 MiB is
/// ~100,000 of them.
const TRUST_STORE_MAX_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("no trust store: neither XDG_CONFIG_HOME nor HOME is set")]
    NoPath,
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
}

impl TrustStore {
    /// Reads the store; a missing file is an empty store. A damaged one is
    /// reported and treated as empty (nothing trusted: the safe side).
    pub fn load(path: &Path) -> Result<Self, TrustError> {
        // Regular files only, capped (a FIFO here would hang every start).
        let text = match crate::fsread::read_regular_to_string(path, TRUST_STORE_MAX_BYTES) {
            Ok(text) => text,
            Err(e) if e.is_not_found() => return Ok(Self::default()),
            Err(e) => {
                return Err(TrustError::Io {
                    path: path.to_path_buf(),
                    message: e.reason(),
                })
            }
        };
        toml::from_str(&text).map_err(|e| TrustError::Io {
            path: path.to_path_buf(),
            message: format!("invalid trust store: {}", e.message().trim_end()),
        })
    }

    /// Whether the file content hashing to `sha256` is trusted for `root`.
    pub fn is_trusted(&self, root: &Path, sha256: &str) -> bool {
        let root = canonical_root(root);
        self.workspaces
            .iter()
            .any(|w| w.path == root && w.sha256 == sha256)
    }

    /// The hash trusted for `root`, if any.
    pub fn trusted_hash(&self, root: &Path) -> Option<&str> {
        let root = canonical_root(root);
        self.workspaces
            .iter()
            .find(|w| w.path == root)
            .map(|w| w.sha256.as_str())
    }

    /// Trusts `sha256` for `root`, replacing an older hash for it.
    pub fn trust(&mut self, root: &Path, sha256: &str) {
        let root = canonical_root(root);
        self.workspaces.retain(|w| w.path != root);
        self.workspaces.push(TrustedWorkspace {
            path: root,
            sha256: sha256.to_string(),
        });
    }

    /// Forgets `root`; whether it was trusted.
    pub fn revoke(&mut self, root: &Path) -> bool {
        let root = canonical_root(root);
        let before = self.workspaces.len();
        self.workspaces.retain(|w| w.path != root);
        before != self.workspaces.len()
    }

    /// Writes the store atomically (a temporary file in the same directory,
    /// flushed, then renamed over the old one): a crash leaves the old store
    /// or the new one, never half of one.
    pub fn save(&self, path: &Path) -> Result<(), TrustError> {
        let dir = path.parent().ok_or_else(|| TrustError::Io {
            path: path.to_path_buf(),
            message: "no parent directory".to_string(),
        })?;
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
        let body = toml::to_string(self).map_err(|e| TrustError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let text = format!(
            "# Workspaces whose fettle.toml you trust (written by `fettle trust` and the editor's\n\
             # \"Trust this workspace\"). Any change to a trusted fettle.toml needs trust again.\n{body}"
        );
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io_error(dir, &e))?;
        tmp.write_all(text.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| io_error(tmp.path(), &e))?;
        tmp.persist(path).map_err(|e| io_error(path, &e.error))?;
        Ok(())
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> TrustError {
    TrustError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Loads the store at `store`, trusts `sha256` for `root`, saves it.
pub fn record_trust(store: &Path, root: &Path, sha256: &str) -> Result<(), TrustError> {
    let mut trust = TrustStore::load(store)?;
    trust.trust(root, sha256);
    trust.save(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let store = dir.path().join("cfg/fettle/trusted.toml");
        assert_eq!(TrustStore::load(&store).unwrap(), TrustStore::default());
        record_trust(&store, &ws, "aa").unwrap();
        let loaded = TrustStore::load(&store).unwrap();
        assert!(loaded.is_trusted(&ws, "aa"));
        assert!(!loaded.is_trusted(&ws, "bb"));
        // The same workspace through a non-canonical path.
        assert!(loaded.is_trusted(&ws.join("../ws"), "aa"));
        record_trust(&store, &ws, "bb").unwrap();
        let mut loaded = TrustStore::load(&store).unwrap();
        assert!(!loaded.is_trusted(&ws, "aa"));
        assert!(loaded.is_trusted(&ws, "bb"));
        assert!(loaded.revoke(&ws));
        assert!(!loaded.revoke(&ws));
    }

    #[test]
    fn damaged_store_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("trusted.toml");
        std::fs::write(&store, "workspace = 3").unwrap();
        assert!(TrustStore::load(&store).is_err());
    }

    #[test]
    fn sha256_is_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn store_path_next_to_user_config() {
        let p = trust_store_path_from(Some("/xdg".into()), None);
        assert_eq!(p, Some(PathBuf::from("/xdg/fettle/trusted.toml")));
    }
}

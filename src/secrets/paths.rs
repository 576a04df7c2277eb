//! Which files hold secrets, by name: the agent never reads them, search
//! skips them, and they never feed completion context.
use std::path::Path;

use super::redact::env;

/// Whether the agent must never read `path`: by its file name (see the
/// `secrets::redact` module docs for the list and the reasoning), and for a
/// symlink also by its target's (`notes.txt → .env` is the `.env`).
pub fn is_secret_path(path: &Path) -> bool {
    if is_secret_name(path) {
        return true;
    }
    // Only a symlink costs more than the name check: one `lstat`.
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
        && std::fs::canonicalize(path).is_ok_and(|target| is_secret_name(&target))
}

fn is_secret_name(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let name = name.to_ascii_lowercase();
    if env::is_secret_env_name(&name) {
        return true;
    }
    const EXACT: &[&str] = &[
        "credentials.json",
        ".netrc",
        "_netrc",
        ".git-credentials",
        ".pgpass",
        ".pypirc",
    ];
    const PREFIXES: &[&str] = &[
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "client_secret",
    ];
    const EXTENSIONS: &[&str] = &[
        "pem", "key", "p12", "pfx", "jks", "keystore", "ppk", "tfstate",
    ];
    if EXACT.contains(&name.as_str()) || PREFIXES.iter().any(|p| name.starts_with(p)) {
        return true;
    }
    // `terraform.tfstate.backup` counts too.
    let name = name.strip_suffix(".backup").unwrap_or(&name);
    name.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_to_a_secret_file_is_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".env"), "A_TOKEN=x\n").unwrap();
        std::fs::write(root.join("readme.md"), "hi\n").unwrap();
        std::os::unix::fs::symlink(root.join(".env"), root.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink(root.join("readme.md"), root.join("docs.md")).unwrap();
        assert!(is_secret_path(&root.join("notes.txt")));
        assert!(!is_secret_path(&root.join("docs.md")));
        assert!(!is_secret_path(&root.join("readme.md")));
    }
}

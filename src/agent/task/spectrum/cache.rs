//! What a traced run recorded, kept by the state of the code: a task run
//! again on the same code and test command (the user's second try) does
//! not trace again.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::index::WorkspaceIndex as Index;

/// Entries kept; the oldest go first.
const MAX_ENTRIES: usize = 32;
/// Past this much source, the key is not worth reading the files for.
const MAX_KEY_BYTES: u64 = 64 << 20;

fn parent() -> PathBuf {
    crate::agent::checkpoint::cache_dir()
        .join("coverage")
        .join("cache")
}

pub fn dir(key: &str) -> PathBuf {
    parent().join(key)
}

/// The test command and the tests it failed (`state`), the tracers, the
/// root and every indexed Python, JavaScript, TypeScript and Rust
/// file's path and bytes on disk (what the tests run).
pub fn key(index: &Index, state: &str, root: &Path) -> Option<String> {
    let mut hasher = Sha256::new();
    for part in [
        state,
        super::TRACER,
        super::PYTEST_PLUGIN,
        super::NODE_PRELOAD,
        &super::rust::script("", Path::new(""), Path::new("")),
        &root.display().to_string(),
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let mut total = 0u64;
    for file in index.files() {
        use crate::syntax::Language;
        if !matches!(
            file.language,
            Language::Python | Language::JavaScript | Language::TypeScript | Language::Rust
        ) {
            continue;
        }
        let bytes = std::fs::read(&file.path).ok()?;
        total += bytes.len() as u64;
        if total > MAX_KEY_BYTES {
            return None;
        }
        hasher.update(file.path.display().to_string().as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    // What the project's dependencies are.
    for manifest in ["Cargo.toml", "Cargo.lock", "package.json", "pyproject.toml"] {
        if let Some(bytes) = super::read_bounded(&root.join(manifest)) {
            hasher.update(manifest.as_bytes());
            hasher.update(bytes.as_bytes());
        }
    }
    Some(format!("{:x}", hasher.finalize()))
}

/// Copies the run's files into `dir`, and drops the oldest entries.
pub fn keep(out: &Path, dir: &Path) {
    let copy = || -> std::io::Result<()> {
        let partial = dir.with_extension("part");
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial)?;
        for entry in std::fs::read_dir(out)?.flatten().take(super::MAX_FILES) {
            let path = entry.path();
            if entry.file_type()?.is_file() && path.extension().is_some_and(|x| x == "json") {
                std::fs::copy(&path, partial.join(entry.file_name()))?;
            }
        }
        std::fs::rename(&partial, dir)
    };
    if let Err(err) = copy() {
        tracing::warn!(dir = %dir.display(), "coverage cache not written: {err}");
    }
    let Ok(entries) = std::fs::read_dir(parent()) else {
        return;
    };
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if entries.len() > MAX_ENTRIES {
        entries.sort();
        for (_, path) in entries.iter().take(entries.len() - MAX_ENTRIES) {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

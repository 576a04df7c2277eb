//! Paths in the workspace that the agent must not change: file tools refuse
//! to write them, and sandboxed commands see them read-only.
//!
//! Why each is protected:
//! * `.git/` (at any depth: submodules have their own): hooks there run on
//!   the user's next commit, outside any sandbox.
//! * `fettle.toml` and `.fettle/`: Fettle's own configuration; a task that
//!   rewrote it could turn the sandbox off for the next run.
//! * The test command's own script (`./run_tests.sh`, `scripts/test.sh`):
//!   verification runs it, so rewriting it would let the model grade itself.
//! * `agent.protected_paths`: whatever the user adds.
use std::path::{Component, Path, PathBuf};

/// Directory names protected wherever they appear in the tree.
pub const PROTECTED_DIR_NAMES: &[&str] = &[".git"];

/// Workspace-relative paths protected at the root. A trailing `/` marks a
/// directory (everything beneath it is protected).
pub const PROTECTED_AT_ROOT: &[&str] = &["fettle.toml", ".fettle/"];

/// The protected paths of one workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Protected {
    /// Root-relative paths with `/` separators; directories end in `/`.
    entries: Vec<String>,
    /// Those of `entries` the test command names (for the message).
    test_files: Vec<String>,
}

/// Why a path is protected, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtectedMatch {
    /// The entry that matched (`.git/`, `fettle.toml`, `run_tests.sh`).
    pub entry: String,
    pub reason: &'static str,
}

impl Protected {
    /// The built-in entries, `extra` (from `agent.protected_paths`) and the
    /// workspace files the test command names.
    pub fn new(root: &Path, extra: &[String], test_command: Option<&str>) -> Self {
        let mut entries: Vec<String> = PROTECTED_AT_ROOT.iter().map(|s| s.to_string()).collect();
        for entry in extra {
            if let Some(norm) = normalize(entry) {
                entries.push(norm);
            }
        }
        let test_files = test_command
            .map(|command| test_command_files(root, command))
            .unwrap_or_default();
        entries.extend(test_files.iter().cloned());
        entries.sort();
        entries.dedup();
        Self {
            entries,
            test_files,
        }
    }

    /// Whether `relative` (workspace-relative, `/` or platform separators)
    /// is protected, and why.
    pub fn check(&self, relative: &Path) -> Option<ProtectedMatch> {
        let parts: Vec<String> = relative
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        if let Some(dir) = parts.iter().find_map(|p| {
            PROTECTED_DIR_NAMES
                .iter()
                // Case-insensitive: `.GIT` is the same directory on macOS.
                .find(|d| d.eq_ignore_ascii_case(p))
        }) {
            return Some(ProtectedMatch {
                entry: format!("{dir}/"),
                reason: "git's own files (hooks there run on your next commit)",
            });
        }
        let joined = parts.join("/");
        for entry in &self.entries {
            let hit = match entry.strip_suffix('/') {
                Some(dir) => joined == dir || joined.starts_with(entry.as_str()),
                None => joined == *entry,
            };
            if hit {
                return Some(ProtectedMatch {
                    entry: entry.clone(),
                    reason: self.reason_for(entry),
                });
            }
        }
        None
    }

    /// The root-relative entries (directories end in `/`), for read-only
    /// mounts; `.git/` directories are found by walking, see
    /// [`PROTECTED_DIR_NAMES`].
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    fn reason_for(&self, entry: &str) -> &'static str {
        if PROTECTED_AT_ROOT.contains(&entry) {
            "Fettle's own configuration"
        } else if self.test_files.iter().any(|t| t == entry) {
            "the test command runs it to verify the work"
        } else {
            "listed in agent.protected_paths"
        }
    }

    /// The entries as absolute paths under `root` that exist, plus `root/.git`
    /// when it exists.
    pub fn existing_under(&self, root: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = PROTECTED_DIR_NAMES
            .iter()
            .map(|d| root.join(d))
            .chain(
                self.entries
                    .iter()
                    .map(|e| root.join(e.trim_end_matches('/'))),
            )
            .filter(|p| p.symlink_metadata().is_ok())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// `./a//b/` → `a/b/`; `None` for empty, absolute or `..` paths.
fn normalize(entry: &str) -> Option<String> {
    let is_dir = entry.ends_with('/');
    let path = Path::new(entry);
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(name) => parts.push(name.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if parts.is_empty() {
        return None;
    }
    let mut out = parts.join("/");
    if is_dir {
        out.push('/');
    }
    Some(out)
}

/// Words of the test command that name an existing regular file in the
/// workspace (`./run_tests.sh`, `sh scripts/test.sh`, `python3 tests/run.py`).
pub fn test_command_files(root: &Path, command: &str) -> Vec<String> {
    command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty() && !w.starts_with('-') && !w.contains('='))
        .filter_map(|w| {
            let norm = normalize(w)?;
            let meta = std::fs::metadata(root.join(&norm)).ok()?;
            meta.is_file().then_some(norm)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_extra_and_test_script() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("scripts/test.sh"), "exit 0").unwrap();
        let p = Protected::new(
            dir.path(),
            &[
                "secrets/".to_owned(),
                "./Makefile".to_owned(),
                "../x".to_owned(),
            ],
            Some("sh ./scripts/test.sh --fast && echo done"),
        );
        let hit = |s: &str| p.check(Path::new(s)).map(|m| m.entry);
        assert_eq!(hit(".git/hooks/post-commit").as_deref(), Some(".git/"));
        assert_eq!(hit("sub/.GIT/config").as_deref(), Some(".git/"));
        assert_eq!(hit("fettle.toml").as_deref(), Some("fettle.toml"));
        assert_eq!(hit(".fettle/state").as_deref(), Some(".fettle/"));
        assert_eq!(hit("secrets/a.txt").as_deref(), Some("secrets/"));
        assert_eq!(hit("Makefile").as_deref(), Some("Makefile"));
        assert_eq!(hit("scripts/test.sh").as_deref(), Some("scripts/test.sh"));
        assert_eq!(hit("sub/fettle.toml"), None);
        assert_eq!(hit("src/main.rs"), None);
        assert_eq!(hit("secretsx/a"), None);
        assert!(!p.entries().iter().any(|e| e.contains("..")));
    }
}

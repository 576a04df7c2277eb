//! Turning a path printed by a test runner into a workspace-relative path,
//! or nothing: frames outside the workspace (the standard library,
//! site-packages, node_modules, the cargo registry) are no use for a repair.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Path components that mark dependency code even inside the workspace.
const DEPENDENCY_DIRS: [&str; 5] = [
    "node_modules",
    "site-packages",
    "dist-packages",
    ".venv",
    "vendor",
];

/// Bounds for the file-name index (used for bare names like go's
/// `x_test.go:12`): a huge workspace costs a bounded walk, once.
const INDEX_MAX_FILES: usize = 50_000;
const INDEX_MAX_DEPTH: usize = 12;

pub(super) struct Resolver<'a> {
    root: &'a Path,
    canonical_root: Option<PathBuf>,
    by_name: OnceCell<HashMap<String, Vec<String>>>,
}

impl<'a> Resolver<'a> {
    pub fn new(root: &'a Path) -> Self {
        Self {
            root,
            canonical_root: root.canonicalize().ok(),
            by_name: OnceCell::new(),
        }
    }

    /// The workspace-relative form of `printed` if it names a file inside
    /// the workspace. A relative path is tried under `dir` first, then the
    /// root, then (a bare file name) by a unique file of that name.
    pub fn resolve(&self, dir: Option<&str>, printed: &str) -> Option<String> {
        let text = printed.trim().trim_matches(|c| c == '"' || c == '\'');
        let text = text.strip_prefix("file://").unwrap_or(text);
        if text.is_empty() || text.contains('<') || text.starts_with("node:") {
            return None;
        }
        let path = Path::new(text);
        if path.is_absolute() {
            let rel = path
                .strip_prefix(self.root)
                .ok()
                .or_else(|| path.strip_prefix(self.canonical_root.as_ref()?).ok())
                .map(Path::to_path_buf)
                .or_else(|| {
                    // The runner may print a canonical path for a root given
                    // through a symlink (macOS /tmp) or the other way round.
                    let canonical = path.canonicalize().ok()?;
                    let root = self.canonical_root.as_ref()?;
                    Some(canonical.strip_prefix(root).ok()?.to_path_buf())
                })?;
            return self.check(&rel);
        }
        if let Some(dir) = dir {
            if let Some(found) = self.check(&Path::new(dir).join(path)) {
                return Some(found);
            }
        }
        if let Some(found) = self.check(path) {
            return Some(found);
        }
        if path.components().count() == 1 {
            let names = self.by_name.get_or_init(|| index_names(self.root));
            if let [only] = names.get(text)?.as_slice() {
                return Some(only.clone());
            }
        }
        None
    }

    /// A path printed on another machine — a server, a container, CI —
    /// as the workspace file it names: `/srv/shop/app/config.py` is
    /// `app/config.py` when the workspace has that file. The longest
    /// suffix that is a workspace file wins (a bare name only at the
    /// root: `/app/main.py` in a container); a toolchain's or a package
    /// manager's path is never mapped, whatever its suffix.
    pub fn resolve_elsewhere(&self, printed: &str) -> Option<String> {
        let text = printed.trim().trim_matches(|c| c == '"' || c == '\'');
        let text = text.strip_prefix("file://").unwrap_or(text);
        let path = Path::new(text);
        if !path.is_absolute() || is_toolchain_path(text) {
            return None;
        }
        let parts: Vec<&str> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(part) => part.to_str(),
                _ => None,
            })
            .collect();
        (0..parts.len()).find_map(|skip| self.check(Path::new(&parts[skip..].join("/"))))
    }

    /// `rel` normalised (`./` dropped), if it stays inside the root, is not
    /// dependency code, and is a file.
    fn check(&self, rel: &Path) -> Option<String> {
        let mut parts = Vec::new();
        for component in rel.components() {
            match component {
                Component::CurDir => {}
                Component::Normal(part) => {
                    let part = part.to_str()?;
                    if DEPENDENCY_DIRS.contains(&part) {
                        return None;
                    }
                    parts.push(part);
                }
                // `..`, a root or a prefix could leave the workspace.
                _ => return None,
            }
        }
        if parts.is_empty() {
            return None;
        }
        let joined = parts.join("/");
        self.root.join(&joined).is_file().then_some(joined)
    }
}

/// Whether a path printed elsewhere is a toolchain's or a dependency's:
/// Python's standard library (`lib/python3.12`), Rust's (`/rustc/<hash>`,
/// `~/.rustup`), crates (`~/.cargo`), Go's (`go/src`, the module cache
/// `pkg/mod`), and the dependency folders.
fn is_toolchain_path(text: &str) -> bool {
    let python_lib = |part: &str| {
        part.strip_prefix("python")
            .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    };
    text.split('/').any(|part| {
        DEPENDENCY_DIRS.contains(&part)
            || matches!(part, "rustc" | ".rustup" | ".cargo")
            || python_lib(part)
    }) || text.contains("/pkg/mod/")
        || text.contains("/go/src/runtime/")
        || text.starts_with("/usr/local/go/")
        || text.starts_with("/usr/lib/go")
}

/// File name → workspace-relative paths, honouring .gitignore and skipping
/// hidden and dependency folders.
fn index_names(root: &Path) -> HashMap<String, Vec<String>> {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    let mut builder = ignore::WalkBuilder::new(root);
    // Ignore files that are FIFOs or devices would block or flood the walk.
    if let Err(err) = crate::fsread::ignore_files::guard_parents(&mut builder, root) {
        tracing::warn!("not walking {}: {err}", root.display());
        return map;
    }
    let walker = builder
        .max_depth(Some(INDEX_MAX_DEPTH))
        .filter_entry(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| !DEPENDENCY_DIRS.contains(&n) && n != "target")
                && crate::fsread::ignore_files::entry_is_safe(e)
        })
        .build();
    for entry in walker.filter_map(Result::ok).take(INDEX_MAX_FILES) {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let (Some(name), Some(rel)) = (entry.file_name().to_str(), rel.to_str()) else {
            continue;
        };
        map.entry(name.to_string())
            .or_default()
            .push(rel.replace('\\', "/"));
    }
    map
}

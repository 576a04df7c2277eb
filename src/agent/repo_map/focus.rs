//! What a goal or a failing test's output points at: workspace paths and
//! identifiers the index defines.
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::index::WorkspaceIndex;

use super::Focus;

/// At most this many identifiers are taken (the first ones mentioned).
const MAX_IDENTIFIERS: usize = 32;
/// A name defined in more files than this is too ambiguous to focus on.
const MAX_DEFINERS: usize = 5;

/// Words that are identifiers in many programs but, in a goal or a test
/// log, are far more likely to be prose or boilerplate.
const STOP_WORDS: &[&str] = &[
    "and", "the", "for", "not", "with", "from", "this", "that", "self", "Self", "new", "test",
    "tests", "error", "Error", "assert", "fn", "def", "class", "return", "impl", "pub", "let",
    "mut", "use", "mod", "struct", "enum", "trait", "type", "import", "None", "True", "False",
    "line", "file", "failed", "passed", "panicked", "thread", "main",
];

/// Test fixtures' and hooks' names, defined in many test files.
const TEST_NAMES: &[&str] = &[
    "setUp",
    "tearDown",
    "setUpClass",
    "tearDownClass",
    "setUpModule",
    "tearDownModule",
    "setup_method",
    "teardown_method",
    "setup_function",
    "teardown_function",
    "setup_module",
    "teardown_module",
    "setup_class",
    "teardown_class",
    "beforeEach",
    "afterEach",
    "beforeAll",
    "afterAll",
];

fn in_tests(path: &Path, root: &Path) -> bool {
    let rel = path.strip_prefix(root).unwrap_or(path);
    crate::agent::verify::is_test_file(&rel.to_string_lossy())
}

/// `dir/file.ext`, `./x.py`, `C:\a\b.rs`, optionally followed by `:line`.
static PATH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:[A-Za-z]:)?[\w./\\~+@\-]*\w\.[A-Za-z0-9]{1,12}\b")
        .map_err(|err| tracing::error!("repo map: path pattern: {err}"))
        .ok()
});

static IDENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z_][A-Za-z0-9_]*")
        .map_err(|err| tracing::error!("repo map: identifier pattern: {err}"))
        .ok()
});

pub(super) fn from_text(text: &str, root: &Path, index: &WorkspaceIndex) -> Focus {
    let mut focus = Focus::default();
    let mut indexed: Option<Vec<PathBuf>> = None;
    // Words inside a resolved path (`config` of `src/config.rs`) are not
    // identifiers the text mentions.
    let mut in_paths: Vec<std::ops::Range<usize>> = Vec::new();
    if let Some(re) = PATH.as_ref() {
        let mut seen = HashSet::new();
        for m in re.find_iter(text) {
            let Some(path) = resolve(m.as_str(), root, index, &mut indexed) else {
                continue;
            };
            in_paths.push(m.range());
            if seen.insert(path.clone()) {
                focus.paths.push(path);
            }
        }
    }
    if let Some(re) = IDENT.as_ref() {
        let mut seen = HashSet::new();
        for m in re.find_iter(text) {
            let word = m.as_str();
            if in_paths.iter().any(|r| r.contains(&m.start())) {
                continue;
            }
            if word.len() < 3 || STOP_WORDS.contains(&word) || !seen.insert(word) {
                continue;
            }
            let mut files: Vec<_> = index
                .definitions(word)
                .into_iter()
                .map(|d| d.path)
                .collect();
            files.dedup();
            // A test's own name (`test_basic`, `setUp`) points at tests, not
            // at the code they test; the failing test's file is in `paths`.
            if TEST_NAMES.contains(&word) || files.iter().all(|f| in_tests(f, root)) {
                continue;
            }
            if (1..=MAX_DEFINERS).contains(&files.len()) {
                focus.identifiers.push(word.to_owned());
                if focus.identifiers.len() == MAX_IDENTIFIERS {
                    break;
                }
            }
        }
    }
    focus
}

/// A mentioned path as a workspace file: absolute or relative to the
/// root; else with leading components dropped (a diff's `a/`, a CI
/// machine's checkout directory); else the one indexed file it is a suffix
/// of (`billing.py`).
fn resolve(
    mention: &str,
    root: &Path,
    index: &WorkspaceIndex,
    indexed: &mut Option<Vec<PathBuf>>,
) -> Option<PathBuf> {
    let mention = mention.replace('\\', "/");
    let exists = |p: &Path| p.starts_with(root) && (index.contains(p) || p.is_file());
    let direct = Path::new(&mention);
    let direct = if direct.is_absolute() {
        direct.to_path_buf()
    } else {
        root.join(direct)
    };
    let parts: Vec<&str> = mention
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let shorter = (1..parts.len()).map(|k| root.join(parts[k..].join("/")));
    if let Some(found) = std::iter::once(direct)
        .chain(shorter)
        .map(|p| normalize(&p))
        .find(|p| exists(p))
    {
        return Some(found);
    }
    let suffix: PathBuf = parts.iter().collect();
    if suffix.components().count() == 0 {
        return None;
    }
    let files = indexed.get_or_insert_with(|| {
        index
            .files()
            .into_iter()
            .map(|f| f.path.to_path_buf())
            .collect()
    });
    let mut hits = files.iter().filter(|f| f.ends_with(&suffix));
    match (hits.next(), hits.next()) {
        (Some(one), None) => Some(one.clone()),
        _ => None,
    }
}

/// `a/./b/../c` → `a/c`, without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

//! Which modules the current file imports, and the outlines offered for them.
use std::path::Path;

use super::similar::{identifiers, is_common_word};
use crate::index::IndexedSymbol;
use crate::syntax::Language;

/// Lines scanned for imports, and the longest outline.
const IMPORT_SCAN_LINES: usize = 300;
const MAX_OUTLINE_LINES: usize = 30;

/// Top-level signatures of a file, one a line.
pub(super) fn outline(symbols: &[IndexedSymbol]) -> String {
    let mut out = String::new();
    for symbol in symbols
        .iter()
        .filter(|s| s.container.is_none())
        .take(MAX_OUTLINE_LINES)
    {
        out.push_str(symbol.detail.as_deref().unwrap_or(&symbol.name));
        out.push('\n');
    }
    out
}

/// The module names a file answers to: its stem, and its directory's name
/// for a directory's main file (`mod.rs`, `__init__.py`, `index.js`,
/// `init.lua`) or a Go file (Go imports packages, which are directories).
pub(super) fn module_names(path: &Path, language: Language) -> Vec<&str> {
    let stem = path.file_stem().and_then(|s| s.to_str());
    let dir = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|s| s.to_str());
    let mut names = Vec::new();
    if let Some(stem) = stem {
        names.push(stem);
        if matches!(stem, "mod" | "__init__" | "index" | "init") || language == Language::Go {
            names.extend(dir);
        }
    }
    names
}

/// Module names the import lines near the top of `text` mention, the most
/// specific of each line first (`use crate::a::b::C` gives `C`, `b`, `a`).
/// Plain line scanning: `use`, `mod`, `import`, `from`, `#include`,
/// `require`, and Go's `import ( … )` blocks.
///
/// The last answer is remembered with the lines it was read from: every
/// keystroke's prompt asks again about a file whose top rarely changes, and
/// comparing the lines costs a fraction of scanning them.
pub(super) fn import_names(text: &str) -> Vec<String> {
    static LAST: parking_lot::Mutex<Option<(String, Vec<String>)>> = parking_lot::Mutex::new(None);
    let head = &text[..memchr::memchr_iter(b'\n', text.as_bytes())
        .nth(IMPORT_SCAN_LINES - 1)
        .map_or(text.len(), |newline| newline + 1)];
    if let Some((seen, names)) = LAST.lock().as_ref() {
        if seen == head {
            return names.clone();
        }
    }
    let names = scan_import_names(head);
    *LAST.lock() = Some((head.to_string(), names.clone()));
    names
}

fn scan_import_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut in_go_block = false;
    for line in text.lines().take(IMPORT_SCAN_LINES) {
        let trimmed = line.trim();
        let spec = if in_go_block {
            if trimmed.starts_with(')') {
                in_go_block = false;
                continue;
            }
            trimmed
        } else if trimmed.starts_with("import (") {
            in_go_block = true;
            continue;
        } else if is_import_line(trimmed) {
            trimmed
        } else {
            continue;
        };
        let spec = quoted(spec).map_or(spec.to_string(), strip_source_extension);
        let line_names: Vec<&str> = identifiers(&spec)
            .map(|(_, w)| w)
            .filter(|w| w.len() >= 2 && !is_common_word(w) && *w != "std" && *w != "as")
            .collect();
        for name in line_names.into_iter().rev() {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

fn is_import_line(line: &str) -> bool {
    const STARTS: &[&str] = &[
        "use ",
        "pub use ",
        "pub(crate) use ",
        "mod ",
        "pub mod ",
        "pub(crate) mod ",
        "import ",
        "from ",
        "#include",
    ];
    // Every line scanned is searched for `require`: with one searcher
    // built once (a searcher per line cost more than the search).
    static REQUIRE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("require"));
    STARTS.iter().any(|s| line.starts_with(s))
        || REQUIRE.find_iter(line.as_bytes()).any(|at| {
            let rest = &line.as_bytes()[at + "require".len()..];
            rest.starts_with(b"(") || rest.starts_with(b" \"") || rest.starts_with(b" '")
        })
}

/// The first quoted string of `line`, if any.
fn quoted(line: &str) -> Option<&str> {
    let open = line.find(['"', '\''])?;
    let quote = line[open..].chars().next()?;
    let rest = &line[open + 1..];
    let close = rest.find(quote)?;
    Some(&rest[..close])
}

/// `./util/strings.js` → `./util/strings`: the extension of a source file is
/// not a module name. Dots elsewhere (Lua's `a.b`) stay separators.
fn strip_source_extension(spec: &str) -> String {
    match spec.rsplit_once('.') {
        Some((stem, _)) if Language::from_path(Path::new(spec)).is_some() => stem.to_string(),
        _ => spec.to_string(),
    }
}

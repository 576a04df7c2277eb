//! The imports a block's code needs: a model that answers with a whole
//! function often writes the import it uses above it (`from collections
//! import deque`); put in place without it, the function is a `NameError`.

use std::ops::Range;

use super::blocks::{indentation, whole_lines, BlockEdit, Candidate};
use crate::syntax::{parse_str, Language};

/// The node kinds of a top-level import in `language`.
fn kinds(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => &[
            "import_statement",
            "import_from_statement",
            "future_import_statement",
        ],
        Language::Rust => &["use_declaration"],
        Language::JavaScript | Language::TypeScript | Language::Tsx => &["import_statement"],
        Language::Go | Language::Java => &["import_declaration"],
        Language::C | Language::Cpp => &["preproc_include"],
        _ => &[],
    }
}

/// The whole-line ranges of `text`'s top-level imports, in order.
fn top_level(language: Language, text: &str) -> Vec<Range<usize>> {
    let kinds = kinds(language);
    if kinds.is_empty() {
        return Vec::new();
    }
    let Some(tree) = parse_str(language, text, None) else {
        return Vec::new();
    };
    let root = tree.root_node();
    let mut cursor = root.walk();
    root.children(&mut cursor)
        .filter(|n| kinds.contains(&n.kind()) && !n.has_error())
        .map(|n| whole_lines(text, &n.byte_range()))
        .collect()
}

/// The whole-line ranges of Python `text`'s top-level imports, in order
/// (an import a docstring quotes is no import).
pub fn python_top_level(text: &str) -> Vec<Range<usize>> {
    top_level(Language::Python, text)
}

/// Where Python `text`'s leading comments and module docstring end: the
/// byte offset after the docstring's last line, else after the last
/// comment before the first statement, else 0.
pub fn python_preamble_end(text: &str) -> usize {
    let Some(tree) = parse_str(Language::Python, text, None) else {
        return 0;
    };
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut end = 0;
    for node in root.children(&mut cursor) {
        if node.kind() == "comment" {
            end = whole_lines(text, &node.byte_range()).end;
            continue;
        }
        let docstring = node.kind() == "expression_statement"
            && node.named_child_count() == 1
            && node.named_child(0).is_some_and(|s| s.kind() == "string")
            && !node.has_error();
        if docstring {
            end = whole_lines(text, &node.byte_range()).end;
        }
        break;
    }
    match end {
        0 => 0,
        end => past_newline(text, end),
    }
}

/// `at` (a line's end) moved past its newline, if it has one.
pub fn past_newline(text: &str, at: usize) -> usize {
    let rest = &text[at..];
    if rest.starts_with("\r\n") {
        at + 2
    } else if rest.starts_with('\n') {
        at + 1
    } else {
        at
    }
}

/// The block's top-level imports that the file lacks (the model's fix
/// uses `deque` and imports it; a function put in place without its
/// import is a `NameError`).
pub(super) fn missing(language: Language, block: &str, file: &str) -> Option<Vec<String>> {
    let normalize = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let have: Vec<String> = top_level(language, file)
        .into_iter()
        .map(|r| normalize(&file[r]))
        .collect();
    let mut missing: Vec<String> = Vec::new();
    for range in top_level(language, block) {
        let text = &block[range];
        if quotes_the_tools(language, text) {
            continue;
        }
        if !have.contains(&normalize(text)) && !missing.iter().any(|m| m == text) {
            missing.push(text.to_owned());
        }
    }
    (!missing.is_empty()).then_some(missing)
}

/// The agent's tools, as a model may name them in code.
const TOOL_NAMES: &[&str] = &[
    "search",
    "repo_map",
    "read_file",
    "edit",
    "write_file",
    "run_tests",
    "run_command",
    "diagnostics",
];

/// `from tools import read_file, search, edit`: a small model quoting the
/// tools it was offered as a Python import (seen with the 1.5B). Put in a
/// file it makes the module unimportable, and loses the fix beside it. Two
/// names at least, all of them tools': one (`from text import search`)
/// may be the project's own.
fn quotes_the_tools(language: Language, import: &str) -> bool {
    if language != Language::Python {
        return false;
    }
    let Some((_, names)) = import.split_once(" import ") else {
        return false;
    };
    let names: Vec<&str> = names
        .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    names.len() >= 2 && names.iter().all(|n| TOOL_NAMES.contains(n))
}

/// Puts `imports` after the file's last top-level import or, in a file
/// without one, in front of the first top-level definition replaced.
pub(super) fn add(edits: &mut Vec<BlockEdit>, imports: Vec<String>, candidate: &Candidate<'_>) {
    let added = imports.join("\n");
    let names = vec!["imports".to_owned()];
    if let Some(last) = top_level(candidate.language, candidate.text).pop() {
        let search = &candidate.text[last];
        // The search must be unique, and no other edit may touch it.
        let unique = candidate.text.matches(search).count() == 1;
        if unique && !edits.iter().any(|e| e.search.contains(search)) {
            edits.push(BlockEdit {
                path: candidate.path.to_owned(),
                search: search.to_owned(),
                replace: format!("{search}\n{added}"),
                names,
            });
        }
        return;
    }
    if let Some(first) = edits.iter_mut().find(|e| indentation(&e.search).is_empty()) {
        first.replace = format!("{added}\n\n{}", first.replace);
        first.names.splice(0..0, names);
    }
}

//! The syntax guard: a rewrite may not leave the document with more syntax
//! errors than it had (tree-sitter's ERROR and MISSING nodes).
use std::ops::Range;

use ropey::Rope;
use tree_sitter::{InputEdit, Node, Tree};

use super::hunks::Hunk;
use crate::position::{ts_point, ts_point_advance};
use crate::syntax::{edit_errors, empty_block_count, parse_rope, Language};

/// The document with the hunks applied, parsed (incrementally from the
/// old tree when there is one).
#[derive(Clone, Debug)]
pub struct Replaced {
    pub rope: Rope,
    pub tree: Option<Tree>,
}

pub fn replace(
    language: Option<Language>,
    rope: &Rope,
    tree: Option<&Tree>,
    hunks: &[Hunk],
) -> Replaced {
    let lone_cr = rope.chunks().any(|chunk| chunk.contains('\r'));
    let mut new_rope = rope.clone();
    let mut old = tree.cloned();
    // Last first: every hunk's range refers to the original text. Only the
    // changed lines are edited, so the reparse is as incremental as it gets.
    for hunk in hunks.iter().rev() {
        let range = hunk.range.clone();
        let start_position = ts_point(&new_rope, range.start, lone_cr);
        let removed: Vec<u8> = new_rope.bytes_at(range.start).take(range.len()).collect();
        let edit = InputEdit {
            start_byte: range.start,
            old_end_byte: range.end,
            new_end_byte: range.start + hunk.text.len(),
            start_position,
            old_end_position: ts_point_advance(start_position, &removed),
            new_end_position: ts_point_advance(start_position, hunk.text.as_bytes()),
        };
        let (from, to) = (
            new_rope.byte_to_char(range.start),
            new_rope.byte_to_char(range.end),
        );
        new_rope.remove(from..to);
        new_rope.insert(from, &hunk.text);
        if let Some(t) = old.as_mut() {
            t.edit(&edit);
        }
    }
    let tree = language.and_then(|lang| parse_rope(lang, &new_rope, old.as_ref()));
    Replaced {
        rope: new_rope,
        tree,
    }
}

/// ERROR and MISSING nodes in `tree`, and Python's blocks without a
/// statement (an indentation lost: tree-sitter has no ERROR for it).
pub fn error_count(tree: &Tree) -> usize {
    fn walk(node: Node<'_>, count: &mut usize) {
        if node.is_error() || node.is_missing() {
            *count += 1;
            return;
        }
        if !node.has_error() {
            return;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            walk(child, count);
        }
    }
    let mut count = 0;
    walk(tree.root_node(), &mut count);
    count + empty_block_count(tree)
}

/// The syntax errors of `replaced`, those inside `region` (bytes of the
/// new text) first, as `line N: message` (1-based lines of the new text).
pub fn describe_errors(replaced: &Replaced, region: Range<usize>) -> Vec<String> {
    let Some(tree) = &replaced.tree else {
        return Vec::new();
    };
    let text = replaced.rope.to_string();
    let errors = edit_errors(tree, &text, 20);
    let (inside, outside): (Vec<_>, Vec<_>) = errors
        .iter()
        .partition(|e| e.range.start >= region.start && e.range.start <= region.end);
    let mut lines: Vec<String> = Vec::new();
    for e in inside.into_iter().chain(outside) {
        let line = replaced.rope.byte_to_line(e.range.start.min(text.len())) + 1;
        let described = format!("line {line}: {}", e.message);
        if !lines.contains(&described) {
            lines.push(described);
        }
        if lines.len() == 3 {
            break;
        }
    }
    lines
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in tests a panic is the failure report
mod tests {
    use super::*;
    use crate::syntax::parse_str;

    /// A rewrite that loses a body's indentation is refused like any other
    /// that breaks the parse (tree-sitter-python has no ERROR for it).
    #[test]
    fn a_lost_indentation_counts_as_an_error() {
        let count = |code: &str| error_count(&parse_str(Language::Python, code, None).unwrap());
        assert_eq!(count("def f(x):\n    return x\n"), 0);
        assert_eq!(count("def f(x):\nreturn x\n"), 1);
        assert_eq!(count("def f(x:\n    return x\n"), 1);
    }
}

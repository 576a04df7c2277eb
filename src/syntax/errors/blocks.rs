//! Python blocks without a statement. tree-sitter-python parses a header
//! whose body is missing or not indented (`def f():` then `return 1` at the
//! same indentation, or a body of comments only) as a block with nothing in
//! it and no ERROR, where Python stops with "expected an indented block".
//! The edit guards count these as syntax errors, so a model's edit that
//! loses an indentation is refused like any other that breaks the parse.
use tree_sitter::{Node, Tree};

use super::SyntaxError;
use crate::position::LineIndex;
use crate::syntax::Language;

/// Python's empty blocks in `tree` as errors, in document order, at most
/// `max`.
pub fn empty_blocks(tree: &Tree, text: &str, max: usize) -> Vec<SyntaxError> {
    let blocks = empty_block_nodes(tree, max);
    if blocks.is_empty() {
        return Vec::new();
    }
    let lines = LineIndex::new(text);
    blocks
        .into_iter()
        .map(|block| describe(block, &lines))
        .collect()
}

/// How many empty blocks `tree` has (for the edit guards' error counts).
pub fn empty_block_count(tree: &Tree) -> usize {
    empty_block_nodes(tree, usize::MAX).len()
}

/// None for other languages (an empty `{}` is fine there) and none inside
/// an ERROR or under a header with one (the ERROR is reported).
fn empty_block_nodes(tree: &Tree, max: usize) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    if max == 0 || *tree.language() != Language::Python.ts_language() {
        return out;
    }
    let mut cursor = tree.walk();
    'walk: loop {
        let node = cursor.node();
        // A header with an ERROR in it (an unclosed bracket swallowing the
        // body) has its fault reported; its empty block is the recovery's.
        let header_broken = node.parent().is_some_and(|header| header.has_error());
        if node.kind() == "block" && !header_broken && is_empty(node) {
            out.push(node);
            if out.len() == max {
                break;
            }
        }
        if may_hold_blocks(node.kind()) && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    out
}

/// Whether a node of `kind` can have a block below it: statements and
/// their clauses, definitions, blocks (not expressions, nor an ERROR), so
/// the walk follows the statement structure only.
fn may_hold_blocks(kind: &str) -> bool {
    matches!(kind, "module" | "block" | "decorated_definition")
        || kind.ends_with("_statement")
        || kind.ends_with("_definition")
        || kind.ends_with("_clause")
}

/// No statement: no named child but comments (a `pass` or `...` counts).
fn is_empty(block: Node) -> bool {
    let mut cursor = block.walk();
    let empty = block
        .named_children(&mut cursor)
        .all(|child| child.kind() == "comment");
    empty
}

/// The error sits where the body should start: the first line with code
/// after the header's `:` (or the `:` itself, at the end of the file), as
/// Python reports it.
fn describe(block: Node, lines: &LineIndex) -> SyntaxError {
    let text = lines.text();
    let header = block.parent().unwrap_or(block);
    let header_line = lines.point(header.start_byte()).line as usize + 1;
    let colon_end = block
        .prev_sibling()
        .map_or(block.start_byte(), |colon| colon.end_byte())
        .min(text.len());
    let first_after = lines.point(colon_end).line as usize + 1;
    let at = (first_after..lines.line_count())
        .map(|line| (lines.line_start(line), lines.line_start(line + 1)))
        .find_map(|(start, end)| {
            let line = &text[start..end];
            let code = line.trim_start_matches([' ', '\t']);
            let blank = code.trim().is_empty() || code.starts_with('#');
            (!blank).then(|| start + line.len() - code.len())
        })
        .unwrap_or(colon_end);
    // CPython's words.
    let what = match header.kind() {
        "function_definition" => "function definition".to_owned(),
        "class_definition" => "class definition".to_owned(),
        kind => match kind
            .strip_suffix("_statement")
            .or(kind.strip_suffix("_clause"))
        {
            Some(keyword) => format!("'{}' statement", keyword.replace('_', " ")),
            None => kind.replace('_', " "),
        },
    };
    SyntaxError {
        range: at..at,
        message: format!("expected an indented block after {what} on line {header_line}"),
    }
}

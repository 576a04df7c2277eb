//! The tree-sitter side of the trigger: comments/strings and empty blocks.
use tree_sitter::{Node, Tree};

use super::{indentation, Position};
use crate::syntax::Language;

/// Whether the byte at `at` lies in a comment or a string (tree only).
pub(super) fn in_comment_or_string(pos: &Position<'_>, at: usize) -> bool {
    let Some(tree) = pos.tree else {
        return false;
    };
    let mut node = tree.root_node().descendant_for_byte_range(at, at + 1);
    while let Some(n) = node {
        let kind = n.kind();
        if kind.contains("comment") || kind.contains("string") || kind == "char_literal" {
            return true;
        }
        node = n.parent();
    }
    false
}

pub(super) enum TreeAnswer<'a> {
    /// An empty block body; the indentation of the line it starts on.
    Empty(&'a str),
    NotEmpty,
    /// Not in a known block, or in broken code: ask the heuristic.
    Unknown,
}

/// (b) with a tree: the smallest node strictly around the cursor is a block
/// (by the kind table) holding nothing between its header and its closer.
pub(super) fn tree_empty_block<'a>(
    pos: &Position<'a>,
    tree: &Tree,
    lang: Language,
) -> TreeAnswer<'a> {
    let cursor = pos.cursor;
    let mut node = tree.root_node().descendant_for_byte_range(cursor, cursor);
    // Zero-width or touching nodes are not "around" the cursor.
    while let Some(n) = node {
        if n.start_byte() < cursor && cursor < n.end_byte() {
            break;
        }
        node = n.parent();
    }
    let Some(block) = node else {
        return TreeAnswer::Unknown;
    };
    if !block_kinds(lang).contains(&block.kind()) || block.has_error() {
        return TreeAnswer::Unknown;
    }
    let mut before: Option<Node<'_>> = None;
    let mut after: Option<Node<'_>> = None;
    let mut walk = block.walk();
    for child in block.children(&mut walk) {
        if child.kind().contains("comment") {
            continue;
        }
        if child.end_byte() <= pos.line_start {
            before = Some(child);
        } else if child.start_byte() >= pos.line_end && after.is_none() {
            after = Some(child);
        } else if child.start_byte() < pos.line_end {
            // Something on the cursor line: not a blank body.
            return TreeAnswer::NotEmpty;
        }
    }
    // Named nodes before the cursor are allowed only on the header line (Lua
    // keeps a function's name and parameters in the block-like node itself).
    let before_ok = before
        .is_none_or(|b| !b.is_named() || on_one_line(pos.text, block.start_byte(), b.end_byte()));
    // After it, only the closer (`}`, `end`) or an `else` continuation.
    let after_ok = after.is_none_or(|a| !a.is_named() || a.kind().contains("else"));
    // The block must open on an earlier line than the cursor's.
    if before_ok && after_ok && block.start_byte() < pos.line_start {
        let header_start = line_start_of(pos.text, block.start_byte());
        TreeAnswer::Empty(indentation(&pos.text[header_start..]))
    } else {
        TreeAnswer::NotEmpty
    }
}

/// No line break (`\n`, `\r\n` or a lone `\r`, as LSP counts lines) between
/// byte `from` and byte `to`. Tree-sitter's rows count `\n` only, so they
/// are never compared (ARCHITECTURE.md: nothing reads tree-sitter's rows).
fn on_one_line(text: &str, from: usize, to: usize) -> bool {
    text.get(from..to)
        .is_some_and(|between| !between.contains(['\n', '\r']))
}

fn line_start_of(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// Node kinds that are a block body, per language.
fn block_kinds(lang: Language) -> &'static [&'static str] {
    match lang {
        Language::Rust => &[
            "block",
            "declaration_list",
            "field_declaration_list",
            "enum_variant_list",
            "match_block",
        ],
        Language::Python => &["block"],
        Language::JavaScript => &["statement_block", "class_body", "switch_body", "object"],
        Language::TypeScript | Language::Tsx => &[
            "statement_block",
            "class_body",
            "switch_body",
            "object",
            "interface_body",
            "object_type",
            "enum_body",
        ],
        Language::Go => &["block", "field_declaration_list", "literal_value"],
        Language::C | Language::Cpp => &[
            "compound_statement",
            "field_declaration_list",
            "enumerator_list",
            "initializer_list",
            "declaration_list",
        ],
        Language::Java => &[
            "block",
            "class_body",
            "interface_body",
            "enum_body",
            "constructor_body",
            "switch_block",
        ],
        Language::Lua => &[
            "function_declaration",
            "function_definition",
            "if_statement",
            "elseif_statement",
            "else_statement",
            "for_statement",
            "while_statement",
            "do_statement",
            "repeat_statement",
            "table_constructor",
        ],
    }
}

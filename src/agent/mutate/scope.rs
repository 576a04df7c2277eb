//! A change that leaves a variable bound but never read is dropped: the
//! program-repair anti-pattern of a "fix" that stops using a loop's
//! variable or a parameter (`search_from(nextnode) for nextnode in …` →
//! `search_from(goalnode)`). Such a change can pass a weak test suite
//! while answering the same for every element, so the tests must not be
//! offered it.
//!
//! Only syntax is counted: the occurrences of a name in the innermost
//! function around the change. A name that occurs twice there, once in
//! the replaced code, is taken to be a binding and its one read — a name
//! read twice and bound elsewhere (a global) is dropped too, a change lost
//! rather than a wrong one offered.

use std::collections::HashMap;

use tree_sitter::Node;

/// Whether replacing `node` leaves a variable of its function bound but
/// never read. `counted`: each function's names, by the function's node id
/// (counted once per function, not once per change).
pub(super) fn leaves_a_name_unused(
    counted: &mut HashMap<usize, HashMap<String, usize>>,
    text: &str,
    node: Node<'_>,
) -> bool {
    let inside = name_counts(text, node);
    if inside.is_empty() {
        return false;
    }
    let function = scope_of(node);
    let all = counted
        .entry(function.id())
        .or_insert_with(|| name_counts(text, function));
    inside
        .iter()
        .any(|(name, n)| all.get(name).map_or(0, |a| a.saturating_sub(*n)) == 1)
}

/// Where a function's (or closure's) names live.
fn is_scope(kind: &str) -> bool {
    matches!(
        kind,
        "function_definition"
            | "function_item"
            | "function_declaration"
            | "function_expression"
            | "function"
            | "generator_function_declaration"
            | "method_definition"
            | "method_declaration"
            | "constructor_declaration"
            | "arrow_function"
            | "lambda"
            | "closure_expression"
            | "func_literal"
    )
}

/// The innermost function around `node`, or the file's root.
fn scope_of(node: Node<'_>) -> Node<'_> {
    let mut current = node;
    while let Some(parent) = current.parent() {
        if is_scope(parent.kind()) {
            return parent;
        }
        current = parent;
    }
    current
}

/// How often each variable's name occurs in `node` (attribute and field
/// names, and the names called, are not counted: a global function called
/// twice is not a binding and its use).
fn name_counts(text: &str, node: Node<'_>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    let mut cursor = node.walk();
    'walk: loop {
        let current = cursor.node();
        let member = matches!(
            cursor.field_name(),
            Some("attribute" | "field" | "property" | "function")
        );
        if current.kind() == "identifier" && !member {
            if let Some(name) = text.get(current.byte_range()) {
                *counts.entry(name.to_owned()).or_insert(0) += 1;
            }
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.node().id() == node.id() {
                break 'walk;
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    counts
}

//! Syntax errors from tree-sitter's ERROR and MISSING nodes.
use tree_sitter::{Node, Tree};

use super::SyntaxError;

/// Longest snippet quoted in an `unexpected "…"` message, in chars.
const MAX_SNIPPET_CHARS: usize = 24;

/// Reports ERROR nodes (`unexpected "…"`) and MISSING nodes (`missing ";"`),
/// in document order, at most `max`. Errors nested inside an ERROR node are
/// not reported again.
///
/// An ERROR's range is cut at the end of its first line: an unclosed bracket
/// can make tree-sitter wrap the rest of the file in one ERROR, and
/// underlining all of it helps nobody. When an ERROR holds an opening
/// bracket that is never closed, that bracket is reported instead
/// (`unclosed "("`). MISSING nodes are zero-width.
pub fn syntax_errors(tree: &Tree, text: &str, max: usize) -> Vec<SyntaxError> {
    let mut out = Vec::new();
    let root = tree.root_node();
    if max == 0 || !root.has_error() {
        return out;
    }
    let mut cursor = root.walk();
    'walk: loop {
        let node = cursor.node();
        let mut descend = false;
        if node.is_error() {
            out.push(error_for(node, text));
        } else if node.is_missing() {
            out.push(SyntaxError {
                range: node.start_byte()..node.start_byte(),
                message: missing_message(node),
            });
        } else {
            // `has_error` is cached per node, so clean subtrees are skipped.
            descend = node.has_error();
        }
        if out.len() >= max {
            break;
        }
        if descend && cursor.goto_first_child() {
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

fn missing_message(node: Node) -> String {
    let kind = node.kind();
    if node.is_named() {
        format!("missing {}", kind.replace('_', " "))
    } else {
        format!("missing \"{kind}\"")
    }
}

fn error_for(node: Node, text: &str) -> SyntaxError {
    if let Some(open) = unclosed_bracket(node) {
        return SyntaxError {
            range: open.byte_range(),
            message: format!("unclosed \"{}\"", open.kind()),
        };
    }
    let start = node.start_byte();
    let full = text.get(node.byte_range()).unwrap_or("");
    let first_line = full.split(['\n', '\r']).next().unwrap_or("");
    let snippet = snippet(first_line);
    let message = if snippet.is_empty() {
        "syntax error".to_owned()
    } else {
        format!("unexpected \"{snippet}\"")
    };
    SyntaxError {
        range: start..start + first_line.len(),
        message,
    }
}

/// Most leaves of an ERROR scanned for brackets; bounds the cost of a
/// file-sized ERROR.
const MAX_BRACKET_SCAN: usize = 10_000;

/// The first opening bracket inside `error` that is never closed, when the
/// ERROR has no stray closing bracket: then "unclosed" is the real problem.
fn unclosed_bracket(error: Node) -> Option<Node> {
    let mut open: Vec<Node> = Vec::new();
    let mut cursor = error.walk();
    let mut seen = 0;
    'walk: loop {
        let node = cursor.node();
        if node.child_count() == 0 {
            seen += 1;
            if seen > MAX_BRACKET_SCAN {
                return None;
            }
            let kind = node.kind();
            if !node.is_named() && !node.is_missing() {
                match kind {
                    "(" | "[" | "{" => open.push(node),
                    ")" | "]" | "}" => {
                        let opener = match kind {
                            ")" => "(",
                            "]" => "[",
                            _ => "{",
                        };
                        if open.last().map(|n| n.kind()) != Some(opener) {
                            return None;
                        }
                        open.pop();
                    }
                    _ => {}
                }
            }
        } else if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() || cursor.node() == error {
                break 'walk;
            }
        }
    }
    open.first().copied()
}

/// The start of the erroneous text on one line, truncated with `…`.
fn snippet(text: &str) -> String {
    // Only the head matters; don't walk a file-sized ERROR.
    let head = match text.char_indices().nth(MAX_SNIPPET_CHARS * 4) {
        Some((idx, _)) => &text[..idx],
        None => text,
    };
    let line: String = head.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_SNIPPET_CHARS) {
        Some((idx, _)) => format!("{}…", &line[..idx]),
        None => line,
    }
}

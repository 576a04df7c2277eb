//! Syntax errors from tree-sitter's ERROR and MISSING nodes, placed where
//! the fault is and saying what was expected when that can be known.
//!
//! Tree-sitter's error recovery often wraps a lot of good code in one ERROR
//! (deleting the `:` of a method in a Python class turns the class body
//! before it into an ERROR that starts on the `class` line), and one fault
//! can leave a second ERROR further down. So for each error, in document
//! order, we try small repairs near it (`repair.rs`): inserting one expected
//! token (`:`, `,`, `)`, `}`, `end`, a closing quote …) after each token of
//! the region, or deleting the stray token. The repair that leaves the
//! fewest errors tells where the fault is and what was expected; it is then
//! kept for the rest of the walk, so errors it explains are not reported
//! again. When no repair helps, the ERROR is reported by its first line
//! (`unexpected "…"`), or its unclosed bracket.
use tree_sitter::{Node, Tree};

use super::SyntaxError;

mod blocks;
mod brackets;
mod repair;

pub use blocks::empty_block_count;

/// Longest snippet quoted in an `unexpected "…"` message, in chars.
const MAX_SNIPPET_CHARS: usize = 24;

/// Reports syntax errors in document order, at most `max`. Errors nested
/// inside an ERROR node are not reported again, nor are errors that a
/// repair of an earlier fault explains.
///
/// Ranges stay on one line: an unclosed bracket can make tree-sitter wrap
/// the rest of the file in one ERROR, and underlining all of it helps
/// nobody. `expected …` errors are zero-width, at the place the token is
/// missing.
pub fn syntax_errors(tree: &Tree, text: &str, max: usize) -> Vec<SyntaxError> {
    if max == 0 || !tree.root_node().has_error() {
        return Vec::new();
    }
    match repair::Repairer::new(tree, text) {
        Some(repairer) => repairer.run(max),
        None => plain_errors(tree, text, max),
    }
}

/// What an edit must not add: [`syntax_errors`] and Python's blocks without
/// a statement (a body that lost its indentation), in document order, at
/// most `max`. Not the editor's diagnostics: a body not written yet is an
/// empty block at every `def f():` + Enter, and its error would come and go
/// in the completion prompt as the user types (costing the embedded
/// model's prompt cache) and underline what the user is about to write.
pub fn edit_errors(tree: &Tree, text: &str, max: usize) -> Vec<SyntaxError> {
    let mut errors = syntax_errors(tree, text, max);
    let empty = blocks::empty_blocks(tree, text, max);
    if !empty.is_empty() {
        errors.extend(empty);
        errors.sort_by_key(|error| error.range.start);
        errors.truncate(max);
    }
    errors
}

/// The errors as the tree shows them, without trying repairs (for files too
/// big to reparse many times).
fn plain_errors(tree: &Tree, text: &str, max: usize) -> Vec<SyntaxError> {
    let mut out = Vec::new();
    let mut from = 0;
    while out.len() < max {
        let Some(node) = first_error_from(tree.root_node(), from) else {
            break;
        };
        out.push(describe(node, text));
        from = next_start(node);
    }
    out
}

/// Where the search for the next error starts after `node`: past it, so
/// errors nested in an ERROR are not reported again.
fn next_start(node: Node) -> usize {
    node.end_byte().max(node.start_byte() + 1)
}

/// The first ERROR or MISSING node (outermost) that starts at or after
/// `from`, in document order.
fn first_error_from(root: Node, from: usize) -> Option<Node> {
    let mut cursor = root.walk();
    'walk: loop {
        let node = cursor.node();
        let starts_in = node.start_byte() >= from;
        if (node.is_error() || node.is_missing()) && starts_in {
            return Some(node);
        }
        // `has_error` is cached per node, so clean subtrees are skipped;
        // and so is what ends before `from` (reported, or explained).
        let descend = node.has_error() && node.end_byte() > from;
        if descend && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    None
}

/// Bytes of one ERROR that count as one more error (see `count_errors`).
const ERROR_BYTES_PER_COUNT: usize = 256;

/// How many errors a tree has (outermost ERROR and MISSING nodes, a big
/// ERROR weighing more), counting to `cap` at most.
fn count_errors(root: Node, cap: usize) -> usize {
    let mut count = 0;
    let mut from = 0;
    while count < cap {
        let Some(node) = first_error_from(root, from) else {
            break;
        };
        // A big ERROR weighs more than one: else a "repair" that swallows
        // the rest of the file into one ERROR (an inserted `{`) would beat
        // the real fix whenever other faults remain after it.
        count += 1 + node.byte_range().len() / ERROR_BYTES_PER_COUNT;
        from = next_start(node);
    }
    count
}

/// The message for an error no repair explained.
fn describe(node: Node, text: &str) -> SyntaxError {
    describe_in(node, text, false)
}

/// `wrapped`: `node` is inside an ERROR that wraps whole statements, whose
/// fault is searched for inward.
fn describe_in(node: Node, text: &str, wrapped: bool) -> SyntaxError {
    if node.is_missing() {
        return missing(node, text);
    }
    if let Some(open) = brackets::unclosed_bracket(node, text) {
        return SyntaxError {
            range: open.byte_range(),
            message: format!("unclosed \"{}\"", open.kind()),
        };
    }
    if let Some(error) = unterminated_string(node, text) {
        return error;
    }
    // An ERROR that wraps whole statements (tree-sitter gave up on a file
    // and wrapped all of it) begins with good code: the fault is in the
    // first of its statements that holds an error.
    if wrapped || begins_with_good_code(node) {
        if let Some(inner) = first_nested_error(node) {
            return describe_in(inner, text, true);
        }
    }
    let range = node.byte_range();
    let full = text.get(range.clone()).unwrap_or("");
    // An ERROR can start with the line break after the last good token:
    // show its first line with content.
    let lead = full.len() - full.trim_start().len();
    let start = range.start + lead;
    let first_line = full[lead..].split(['\n', '\r']).next().unwrap_or("");
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

/// Whether `error` begins with a whole, good node (a statement), not a
/// stray token.
fn begins_with_good_code(error: Node) -> bool {
    error
        .child(0)
        .is_some_and(|first| first.is_named() && !first.has_error())
}

/// The first ERROR or MISSING inside `error`'s children that are not
/// errors themselves, outermost, in order.
fn first_nested_error(error: Node) -> Option<Node> {
    let mut cursor = error.walk();
    let children: Vec<Node> = error.children(&mut cursor).collect();
    children
        .into_iter()
        .filter(|child| !child.is_error() && !child.is_missing() && child.has_error())
        .find_map(|child| first_error_from(child, child.start_byte()))
}

fn missing(node: Node, text: &str) -> SyntaxError {
    let kind = node.kind();
    let at = node.start_byte();
    if is_quote(kind) {
        // Underline the string from its opening quote when on one line.
        let opened = node.parent().map_or(at, |p| p.start_byte()).min(at);
        let line_end = text[opened..at]
            .find(['\n', '\r'])
            .map_or(at, |i| opened + i);
        return SyntaxError {
            range: opened..line_end,
            message: "unterminated string".to_owned(),
        };
    }
    let message = if node.is_named() {
        format!("expected {}", kind.replace('_', " "))
    } else {
        format!("expected \"{kind}\"")
    };
    SyntaxError {
        range: at..at,
        message,
    }
}

fn is_quote(token: &str) -> bool {
    matches!(token, "\"" | "'" | "`")
}

/// An ERROR that is an opening quote and the text after it on its line.
fn unterminated_string(node: Node, text: &str) -> Option<SyntaxError> {
    let first = first_leaf(node);
    let opens_string = is_quote(first.kind()) || first.kind() == "string_start";
    if !opens_string {
        return None;
    }
    let start = first.start_byte();
    let line_end = text[start..]
        .find(['\n', '\r'])
        .map_or(text.len(), |i| start + i);
    Some(SyntaxError {
        range: start..line_end,
        message: "unterminated string".to_owned(),
    })
}

fn first_leaf(node: Node) -> Node {
    let mut leaf = node;
    while let Some(child) = leaf.child(0) {
        leaf = child;
    }
    leaf
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

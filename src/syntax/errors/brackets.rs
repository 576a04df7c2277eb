//! The bracket an ERROR leaves open, guessed like a reader would: by
//! indentation when counting alone is ambiguous.
use tree_sitter::Node;

/// Most leaves of an ERROR scanned for brackets; bounds the cost of a
/// file-sized ERROR.
const MAX_BRACKET_SCAN: usize = 10_000;

/// The opening bracket inside `error` that is never closed, when the ERROR
/// has no stray closing bracket: then "unclosed" is the real problem.
///
/// Counting says *that* a `{` is unclosed, not *which*: in
/// `fn f() {⏎    if x {⏎        a;⏎⏎    b⏎}` the last `}` closes the `if` by
/// count, leaving the `fn`'s open. A closer that starts its line closes the
/// opener whose line is indented like it, so a deeper opener left above
/// that one is the unclosed one (the `if`'s).
pub(super) fn unclosed_bracket<'t>(error: Node<'t>, text: &str) -> Option<Node<'t>> {
    let mut open: Vec<(Node, usize)> = Vec::new();
    let mut culprit: Option<Node> = None;
    let mut cursor = error.walk();
    let mut seen = 0;
    'walk: loop {
        let node = cursor.node();
        if node.child_count() == 0 {
            seen += 1;
            if seen > MAX_BRACKET_SCAN {
                return None;
            }
            if !node.is_named() && !node.is_missing() {
                let kind = node.kind();
                match kind {
                    "(" | "[" | "{" => open.push((node, line_indent(text, node.start_byte()))),
                    ")" | "]" | "}" => {
                        let opener = match kind {
                            ")" => "(",
                            "]" => "[",
                            _ => "{",
                        };
                        let start = node.start_byte();
                        if starts_line(text, start) {
                            let indent = line_indent(text, start);
                            let same = open
                                .iter()
                                .rposition(|(n, i)| n.kind() == opener && *i <= indent);
                            if let Some(at) = same {
                                if at + 1 < open.len() && culprit.is_none() {
                                    culprit = open.get(at + 1).map(|(n, _)| *n);
                                }
                                open.truncate(at);
                                // Fall through to the walk: this closer is used.
                                if !advance(&mut cursor, error) {
                                    break 'walk;
                                }
                                continue;
                            }
                        }
                        if open.last().map(|(n, _)| n.kind()) != Some(opener) {
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
        if !advance(&mut cursor, error) {
            break 'walk;
        }
    }
    culprit.or_else(|| open.first().map(|(n, _)| *n))
}

/// Moves to the next node after the current subtree, staying inside `root`.
fn advance(cursor: &mut tree_sitter::TreeCursor, root: Node) -> bool {
    while !cursor.goto_next_sibling() {
        if !cursor.goto_parent() || cursor.node() == root {
            return false;
        }
    }
    true
}

fn line_start(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .rposition(|&b| b == b'\n' || b == b'\r')
        .map_or(0, |i| i + 1)
}

/// Width of the leading blanks of the line holding `at` (a tab counts 1:
/// only comparisons within one file matter).
fn line_indent(text: &str, at: usize) -> usize {
    let start = line_start(text, at);
    text.as_bytes()[start..]
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()
}

fn starts_line(text: &str, at: usize) -> bool {
    let start = line_start(text, at);
    text.as_bytes()[start..at.min(text.len())]
        .iter()
        .all(|&b| b == b' ' || b == b'\t')
}

/// Leaves scanned by [`dedent_culprit`] (a whole file).
const MAX_FILE_SCAN: usize = 200_000;

/// An opening bracket that indentation shows was never closed, anywhere in
/// the file: a closer that starts its line, indented like an outer opener
/// of its kind, with openers of that same kind left open above it. Returns
/// the opener, its closer, and where the closer belongs: after the last
/// line indented deeper than the opener's line (the block's content).
pub(super) fn dedent_culprit<'t>(
    root: Node<'t>,
    text: &str,
) -> Option<(Node<'t>, &'static str, usize)> {
    let mut open: Vec<(Node, usize)> = Vec::new();
    let mut cursor = root.walk();
    let mut seen = 0;
    loop {
        let node = cursor.node();
        if node.child_count() == 0 {
            seen += 1;
            if seen > MAX_FILE_SCAN {
                return None;
            }
            let kind = node.kind();
            if !node.is_named() && !node.is_missing() {
                match kind {
                    "(" | "[" | "{" => open.push((node, line_indent(text, node.start_byte()))),
                    ")" | "]" | "}" => {
                        let (opener, closer) = match kind {
                            ")" => ("(", ")"),
                            "]" => ("[", "]"),
                            _ => ("{", "}"),
                        };
                        let start = node.start_byte();
                        if starts_line(text, start) {
                            let indent = line_indent(text, start);
                            let same = open
                                .iter()
                                .rposition(|(n, i)| n.kind() == opener && *i <= indent);
                            if let Some(at) = same {
                                let left = &open[at + 1..];
                                let deeper =
                                    left.iter().all(|(n, i)| n.kind() == opener && *i > indent);
                                if let (Some(&(culprit, ind)), true) = (left.first(), deeper) {
                                    let end = block_end(text, culprit.end_byte(), ind);
                                    return Some((culprit, closer, end));
                                }
                                open.truncate(at);
                            } else {
                                open.pop();
                            }
                        } else {
                            open.pop();
                        }
                    }
                    _ => {}
                }
            }
        } else if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return None;
            }
        }
    }
}

/// The end of the last line after `from` whose indentation is deeper than
/// `indent` (blank lines skipped): where a block opened at `from` ends.
fn block_end(text: &str, from: usize, indent: usize) -> usize {
    let mut end = from;
    let mut at = text[from..].find('\n').map_or(text.len(), |i| from + i + 1);
    while at < text.len() {
        let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        let line = &text[at..line_end];
        if !line.trim().is_empty() {
            if line_indent(text, at) <= indent {
                break;
            }
            end = at + line.trim_end().len();
        }
        at = line_end + 1;
    }
    end
}

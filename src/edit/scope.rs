//! Which text a rewrite covers, and which code around it the model sees:
//! whole lines, the smallest enclosing function for a quick fix, the
//! enclosing definition, and the file's header (imports).
use std::ops::Range;

use ropey::Rope;
use tree_sitter::{Node, Tree};

/// Node kinds that are a function or method in one of our grammars.
const FUNCTION_KINDS: &[&str] = &[
    "function_item",
    "function_definition",
    "function_declaration",
    "generator_function_declaration",
    "method_definition",
    "method_declaration",
    "constructor_declaration",
    "decorated_definition",
];

/// Kinds that wrap a function without being one: a function assigned to a
/// name (`const f = () => …`) is rewritten as its whole declaration.
const FUNCTION_VALUE_KINDS: &[&str] = &["arrow_function", "function_expression", "function"];
const DECLARATION_KINDS: &[&str] = &["lexical_declaration", "variable_declaration"];

/// Kinds that are definitions holding other definitions.
const CONTAINER_KINDS: &[&str] = &[
    "class_definition",
    "class_declaration",
    "class_specifier",
    "struct_specifier",
    "impl_item",
    "trait_item",
    "mod_item",
    "interface_declaration",
    "enum_declaration",
    "namespace_definition",
];

/// Kinds that belong to a file's header: imports, includes, package lines,
/// leading comments and module docstrings.
const HEADER_KINDS: &[&str] = &[
    "import_statement",
    "import_from_statement",
    "future_import_statement",
    "use_declaration",
    "extern_crate_declaration",
    "preproc_include",
    "import_declaration",
    "package_clause",
    "package_declaration",
    "comment",
    "line_comment",
    "block_comment",
    "inner_attribute_item",
];

/// A quick fix grown past this many lines falls back to the problem's own
/// lines (with a little context): an ERROR node can swallow a whole file.
const MAX_UNIT_LINES: usize = 150;
/// Lines of a file's header shown to the model at most.
const MAX_HEADER_LINES: usize = 40;

/// `range` grown to whole lines: from the start of its first line to the
/// end (newline included) of its last line. A range ending at the start of
/// a line does not take that line.
pub fn whole_lines(rope: &Rope, range: Range<usize>) -> Range<usize> {
    let len = rope.len_bytes();
    let start = range.start.min(len);
    let end = range.end.clamp(start, len);
    let first = rope.byte_to_line(start);
    let start = rope.line_to_byte(first);
    let last = rope.byte_to_line(end);
    let last_start = rope.line_to_byte(last);
    let end = if end == last_start && end > start {
        end
    } else if last + 1 < rope.len_lines() {
        rope.line_to_byte(last + 1)
    } else {
        len
    };
    start..end
}

/// A selection that starts in the indentation of its line starts at the
/// line's start instead, so the model sees (and returns) whole lines.
pub fn from_line_start(rope: &Rope, range: Range<usize>) -> Range<usize> {
    let line = rope.byte_to_line(range.start);
    let line_start = rope.line_to_byte(line);
    let indentation_only = rope
        .byte_slice(line_start..range.start)
        .chars()
        .all(|c| c == ' ' || c == '\t');
    if indentation_only {
        line_start..range.end
    } else {
        range
    }
}

/// What a quick fix for problems at `problems` rewrites: the smallest
/// function or method around them, else the top-level statement, in whole
/// lines; the problems' own lines (with two lines of context) when there is
/// no tree or the unit would be huge.
pub fn fix_scope(rope: &Rope, tree: Option<&Tree>, problems: Range<usize>) -> Range<usize> {
    let fallback = || {
        let first = rope.byte_to_line(problems.start).saturating_sub(2);
        let last = (rope.byte_to_line(problems.end) + 2).min(rope.len_lines().saturating_sub(1));
        whole_lines(rope, rope.line_to_byte(first)..rope.line_to_byte(last))
    };
    let Some(tree) = tree else {
        return fallback();
    };
    let Some(node) = tree
        .root_node()
        .descendant_for_byte_range(problems.start, problems.end)
    else {
        return fallback();
    };
    let function = enclosing(node, |n| FUNCTION_KINDS.contains(&n.kind()))
        .or_else(|| enclosing(node, |n| FUNCTION_VALUE_KINDS.contains(&n.kind())))
        .map(promote);
    let unit = match function {
        Some(function) => Some(function),
        // Outside any function the parser recognised, a syntax error's
        // ERROR node can start at the file's first line: take the block
        // around the problem, by indentation, instead.
        None if top_level(node).is_some_and(|n| n.is_error() || n.has_error()) => {
            return indentation_block(rope, problems);
        }
        None => top_level(node),
    };
    match unit {
        Some(unit) if line_count(rope, unit.byte_range()) <= MAX_UNIT_LINES => {
            whole_lines(rope, unit.byte_range())
        }
        _ => fallback(),
    }
}

/// The smallest definition strictly around `range` (for context), in
/// whole lines; `None` at top level.
pub fn enclosing_definition(rope: &Rope, tree: &Tree, range: Range<usize>) -> Option<Range<usize>> {
    let node = tree
        .root_node()
        .descendant_for_byte_range(range.start, range.end)?;
    let lines = whole_lines(rope, range);
    let mut at = Some(node);
    while let Some(n) = at {
        let kind = n.kind();
        let is_definition = FUNCTION_KINDS.contains(&kind) || CONTAINER_KINDS.contains(&kind);
        let span = whole_lines(rope, n.byte_range());
        if is_definition && span.start <= lines.start && span.end >= lines.end && span != lines {
            return Some(span);
        }
        at = n.parent();
    }
    None
}

/// The file's header (imports, includes, leading comments), in whole lines;
/// `None` when it is empty or reaches into `avoid`.
pub fn header(rope: &Rope, tree: &Tree, avoid: Range<usize>) -> Option<Range<usize>> {
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut end = 0;
    for (i, child) in root.named_children(&mut cursor).enumerate() {
        let is_docstring = i == 0
            && child.kind() == "expression_statement"
            && child.named_child(0).is_some_and(|c| c.kind() == "string");
        if !(HEADER_KINDS.contains(&child.kind()) || is_docstring) {
            break;
        }
        end = child.end_byte();
    }
    if end == 0 {
        return None;
    }
    let span = whole_lines(rope, 0..end);
    let max_end = if rope.len_lines() > MAX_HEADER_LINES {
        rope.line_to_byte(MAX_HEADER_LINES)
    } else {
        rope.len_bytes()
    };
    let span = span.start..span.end.min(max_end);
    (span.end <= avoid.start).then_some(span)
}

/// Names of the functions, methods and types defined wholly inside `range`
/// (by their `name` field), in document order.
pub fn defined_names(tree: &Tree, rope: &Rope, range: Range<usize>) -> Vec<String> {
    fn walk(node: Node<'_>, rope: &Rope, range: &Range<usize>, out: &mut Vec<String>) {
        let inside = node.start_byte() >= range.start && node.end_byte() <= range.end;
        let kind = node.kind();
        if inside && (FUNCTION_KINDS.contains(&kind) || CONTAINER_KINDS.contains(&kind)) {
            if let Some(name) = node.child_by_field_name("name") {
                let text = rope.byte_slice(name.byte_range()).to_string();
                if !out.contains(&text) {
                    out.push(text);
                }
            }
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if child.end_byte() > range.start && child.start_byte() < range.end {
                walk(child, rope, range, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(tree.root_node(), rope, &range, &mut out);
    out
}

/// The block around the problem: from its line (or, when that line is
/// indented, the less indented line that opens its block) to the line
/// before the next non-blank line indented no deeper, grown to cover the
/// whole problem; whole lines, at most [`MAX_UNIT_LINES`].
fn indentation_block(rope: &Rope, problems: Range<usize>) -> Range<usize> {
    let indent = |line: usize| -> Option<usize> {
        let text = rope.line(line);
        let width = text.chars().take_while(|c| *c == ' ' || *c == '\t').count();
        let blank = text.chars().all(char::is_whitespace);
        (!blank).then_some(width)
    };
    let mut first = rope.byte_to_line(problems.start);
    let last_problem = rope.byte_to_line(problems.end);
    let lines = rope.len_lines();
    // An indented line: from the line that opens its block.
    if let Some(width) = indent(first).filter(|w| *w > 0) {
        let opener = (first.saturating_sub(MAX_UNIT_LINES)..first)
            .rev()
            .find(|l| indent(*l).is_some_and(|w| w < width));
        if let Some(opener) = opener {
            first = opener;
        }
    }
    let base = indent(first).unwrap_or(0);
    let mut end = first + 1;
    while end < lines && end - first < MAX_UNIT_LINES {
        match indent(end) {
            Some(width) if width <= base && end > last_problem => break,
            _ => end += 1,
        }
    }
    // Trailing blank lines stay outside.
    while end > first + 1 && indent(end - 1).is_none() {
        end -= 1;
    }
    let start = rope.line_to_byte(first);
    let end = if end < lines {
        rope.line_to_byte(end)
    } else {
        rope.len_bytes()
    };
    start..end
}

/// Which of `names` the tree defines (functions, methods, types) outside
/// `region`, looking at its top levels only (a file's functions, a class's
/// methods): enough to see a definition repeated. Nothing to look for, no
/// walk; names are compared by length first, so a big file costs no
/// allocation per definition.
pub fn defined_outside(
    tree: &Tree,
    rope: &Rope,
    region: Range<usize>,
    names: &[&String],
) -> Vec<String> {
    const MAX_DEPTH: usize = 4;
    fn walk(
        node: Node<'_>,
        depth: usize,
        rope: &Rope,
        region: &Range<usize>,
        names: &[&String],
        out: &mut Vec<String>,
    ) {
        let outside = node.end_byte() <= region.start || node.start_byte() >= region.end;
        let kind = node.kind();
        if outside && (FUNCTION_KINDS.contains(&kind) || CONTAINER_KINDS.contains(&kind)) {
            if let Some(name) = node.child_by_field_name("name") {
                let len = name.byte_range().len();
                for wanted in names.iter().filter(|n| n.len() == len) {
                    if !out.contains(*wanted)
                        && rope.byte_slice(name.byte_range()) == wanted.as_str()
                    {
                        out.push((*wanted).clone());
                    }
                }
            }
        }
        if depth == MAX_DEPTH || out.len() == names.len() {
            return;
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            walk(child, depth + 1, rope, region, names, out);
        }
    }
    let mut out = Vec::new();
    if !names.is_empty() {
        walk(tree.root_node(), 0, rope, &region, names, &mut out);
    }
    out
}

fn enclosing<'t>(node: Node<'t>, wanted: impl Fn(&Node<'t>) -> bool) -> Option<Node<'t>> {
    let mut at = Some(node);
    while let Some(n) = at {
        if wanted(&n) {
            return Some(n);
        }
        at = n.parent();
    }
    None
}

/// A function's whole definition: with its decorators (Python), or the
/// declaration that names it (`const f = () => …`, `export …`).
fn promote(node: Node<'_>) -> Node<'_> {
    let mut unit = node;
    if FUNCTION_VALUE_KINDS.contains(&unit.kind()) {
        if let Some(declaration) = enclosing(unit, |n| DECLARATION_KINDS.contains(&n.kind())) {
            unit = declaration;
        }
    }
    while let Some(parent) = unit.parent() {
        let wraps = matches!(parent.kind(), "decorated_definition" | "export_statement");
        if !wraps {
            break;
        }
        unit = parent;
    }
    unit
}

/// The statement at the top of the file that holds `node`.
fn top_level(node: Node<'_>) -> Option<Node<'_>> {
    let mut at = node;
    while let Some(parent) = at.parent() {
        if parent.parent().is_none() {
            return Some(at);
        }
        at = parent;
    }
    None
}

fn line_count(rope: &Rope, range: Range<usize>) -> usize {
    rope.byte_to_line(range.end) - rope.byte_to_line(range.start) + 1
}

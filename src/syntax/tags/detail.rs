//! One-line signatures for definitions (`Definition::detail`).
use tree_sitter::Node;

use super::super::Language;

/// Longest detail we produce, in chars; editors show it on one line.
const MAX_DETAIL_CHARS: usize = 120;

/// The item's header: its text up to the body (or its first line when it has
/// no body), whitespace collapsed, a trailing `{` / `:` dropped, capped.
pub(super) fn detail(lang: Language, item: Node, text: &str) -> Option<String> {
    let start = header_start(item);
    let end = body_start(item).unwrap_or(item.end_byte());
    let header = text.get(start..end)?;
    let header = first_line_unless_bodied(header, end != item.end_byte());
    let mut out = declaration_keyword(item, text)
        .map(|kw| format!("{kw} "))
        .unwrap_or_default();
    out.push_str(&collapse(header));
    trim_tail(lang, &mut out);
    cap(&mut out);
    (!out.is_empty()).then_some(out)
}

/// Items that are one name of a multi-name declaration (JS/TS `const a, b`,
/// Go `type ( A int; B string )`) lack the declaration's keyword; take it
/// from the enclosing declaration (`const`, `let`, `var`, `type`).
fn declaration_keyword<'a>(item: Node, text: &'a str) -> Option<&'a str> {
    let declarations: &[&str] = match item.kind() {
        "variable_declarator" => &["lexical_declaration", "variable_declaration"],
        "type_spec" | "type_alias" => &["type_declaration"],
        "const_spec" => &["const_declaration"],
        "var_spec" => &["var_declaration"],
        "assignment_statement" => &["variable_declaration"],
        _ => return None,
    };
    let mut parent = item.parent()?;
    if parent.kind() == "var_spec_list" {
        parent = parent.parent()?;
    }
    if !declarations.contains(&parent.kind()) {
        return None;
    }
    let keyword = parent.child(0)?;
    text.get(keyword.byte_range())
}

/// Nodes that decorate an item rather than describe it.
fn is_decoration(kind: &str) -> bool {
    matches!(
        kind,
        "annotation" | "marker_annotation" | "decorator" | "attribute_declaration" | "comment"
    )
}

/// Where the header starts: after leading annotations and decorators
/// (`@Override`, `@Component(...)`, `[[nodiscard]]`), which often sit on
/// their own line and would otherwise be the whole first-line detail.
fn header_start(item: Node) -> usize {
    let mut cursor = item.walk();
    for child in item.children(&mut cursor) {
        if child.kind() == "modifiers" {
            let mut inner = child.walk();
            let first = child
                .children(&mut inner)
                .find(|c| !is_decoration(c.kind()));
            match first {
                Some(c) => return c.start_byte(),
                // Only annotations: the header starts after the modifiers.
                None => continue,
            }
        }
        if !is_decoration(child.kind()) {
            return child.start_byte();
        }
    }
    item.start_byte()
}

/// Where the item's body starts, if it has one worth cutting at: its own
/// `body`, or that of its value (`const f = (a) => { ... }`).
fn body_start(item: Node) -> Option<usize> {
    let body = item.child_by_field_name("body").or_else(|| {
        item.child_by_field_name("value")
            .and_then(|v| v.child_by_field_name("body"))
    })?;
    // A body that starts where the item does (impossible in practice) would
    // leave no header; ignore it.
    (body.start_byte() > item.start_byte()).then(|| body.start_byte())
}

/// Without a body to cut at, a multi-line item (a `const` with a long
/// initializer) keeps only its first line.
fn first_line_unless_bodied(header: &str, bodied: bool) -> &str {
    if bodied {
        header
    } else {
        header.lines().next().unwrap_or("")
    }
}

/// Collapses runs of whitespace to one space and tidies the spacing that
/// collapsing leaves inside brackets (`( a, b, )` → `(a, b)`).
fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_space = false;
    for ch in s.chars() {
        if ch.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space && !matches!(ch, ')' | ']' | '>' | ',') && !out.ends_with(['(', '[']) {
            out.push(' ');
        }
        pending_space = false;
        if matches!(ch, ')' | ']') && out.ends_with(',') {
            out.pop();
        }
        out.push(ch);
    }
    out
}

fn trim_tail(lang: Language, s: &mut String) {
    loop {
        let before = s.len();
        let trimmed = s.trim_end().len();
        s.truncate(trimmed);
        // `{` opens a body, Python's `:` too; a bare `=` is left by a
        // multi-line initializer (`const handlers = {`); `;` is noise.
        if s.ends_with(['{', ';'])
            || (lang == Language::Python && s.ends_with(':'))
            || s.ends_with(" =")
        {
            s.pop();
        }
        if s.len() == before {
            break;
        }
    }
}

fn cap(s: &mut String) {
    if let Some((idx, _)) = s.char_indices().nth(MAX_DETAIL_CHARS) {
        s.truncate(idx);
        s.push('…');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_tidies_brackets() {
        assert_eq!(
            collapse("fn f(\n    a: u32,\n    b: u32,\n) -> u32 "),
            "fn f(a: u32, b: u32) -> u32"
        );
        assert_eq!(collapse("  x \t y  "), "x y");
    }

    #[test]
    fn cap_is_char_safe() {
        let mut s = "é".repeat(200);
        cap(&mut s);
        assert_eq!(s.chars().count(), MAX_DETAIL_CHARS + 1);
    }
}

//! What the mutation operators ask of a syntax tree: which nodes are
//! operators, arguments, literals, declarations, and each operator's
//! neighbours — the grammars' node names across the languages.

use tree_sitter::Node;

/// Each operator's replacements.
pub(super) fn operator_alternatives(op: &str) -> &'static [&'static str] {
    match op {
        "<" => &["<=", ">"],
        "<=" => &["<", ">="],
        ">" => &[">=", "<"],
        ">=" => &[">", "<="],
        "==" => &["!="],
        "!=" => &["=="],
        "===" => &["!=="],
        "!==" => &["==="],
        "+" => &["-", "*"],
        "-" => &["+"],
        "*" => &["/", "+"],
        "/" => &["*"],
        "//" => &["/", "*"],
        "%" => &["//"],
        "&" => &["|", "^"],
        "|" => &["&", "^"],
        "^" => &["&", "|"],
        "<<" => &[">>"],
        ">>" => &["<<"],
        "and" => &["or"],
        "or" => &["and"],
        "&&" => &["||"],
        "||" => &["&&"],
        "+=" => &["-="],
        "-=" => &["+="],
        "*=" => &["/="],
        "/=" => &["*="],
        "&=" => &["|=", "^="],
        "|=" => &["&=", "^="],
        "^=" => &["&=", "|="],
        _ => &[],
    }
}

/// Operators whose operands are worth swapping (not commutative for some
/// types: strings, lists, numbers).
pub(super) fn swaps_operands(op: &str) -> bool {
    matches!(op, "+" | "-" | "/" | "//" | "%" | "**")
}

/// Calls whose function is worth exchanging for its twin.
pub(super) fn builtin_twin(name: &str) -> Option<&'static str> {
    Some(match name {
        "min" => "max",
        "max" => "min",
        "any" => "all",
        "all" => "any",
        _ => return None,
    })
}

pub(super) fn is_binary(kind: &str) -> bool {
    matches!(
        kind,
        "binary_operator"
            | "comparison_operator"
            | "boolean_operator"
            | "binary_expression"
            | "augmented_assignment"
            | "compound_assignment_expr"
            | "augmented_assignment_expression"
    )
}

pub(super) fn is_argument_list(kind: &str) -> bool {
    matches!(kind, "argument_list" | "arguments")
}

pub(super) fn is_integer(kind: &str) -> bool {
    matches!(
        kind,
        "integer"
            | "integer_literal"
            | "number"
            | "int_literal"
            | "number_literal"
            | "decimal_integer_literal"
    )
}

/// Where a name is declared or names something else than a variable.
pub(super) fn is_declaring_field(field: Option<&str>) -> bool {
    matches!(
        field,
        Some("name" | "function" | "attribute" | "field" | "property" | "pattern" | "type")
    )
}

/// Where a function declares its parameters.
pub(super) fn is_parameter_list(kind: &str) -> bool {
    matches!(
        kind,
        "parameters"
            | "formal_parameters"
            | "parameter"
            | "default_parameter"
            | "typed_parameter"
            | "typed_default_parameter"
            | "parameter_list"
            | "parameter_declaration"
            | "formal_parameter"
    )
}

/// A name being assigned or bound by a loop: replacing it rarely fixes
/// anything and doubles the mutants.
pub(super) fn is_target(node: Node<'_>, field: Option<&str>) -> bool {
    let parent = node.parent().map(|p| p.kind()).unwrap_or_default();
    field == Some("left")
        && matches!(
            parent,
            "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause"
        )
}

/// Named children that are code (no comments).
pub(super) fn code_children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|c| !c.kind().contains("comment"))
        .collect()
}

/// The attribute's name node of `x.name` (not a method being called: a
/// method's twin is rarely another attribute of the lines).
pub(super) fn attribute_name<'n>(node: Node<'n>, field: Option<&str>) -> Option<Node<'n>> {
    let name_field = match node.kind() {
        "attribute" => "attribute",
        "member_expression" => "property",
        "field_expression" | "selector_expression" | "field_access" => "field",
        _ => return None,
    };
    if field == Some("function") {
        return None;
    }
    node.child_by_field_name(name_field)
        .filter(|n| n.kind().ends_with("identifier"))
}

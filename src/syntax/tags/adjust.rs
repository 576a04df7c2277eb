//! Per-language fix-ups that queries cannot express cheaply.
use tree_sitter::Node;

use super::super::{Definition, Language, SymbolKind};
use super::node_text;

pub(super) fn adjust(lang: Language, def: &mut Definition, item: Node, _name: Node, text: &str) {
    match (lang, def.kind) {
        (Language::Rust, SymbolKind::Impl) => {
            if let Some(name) = rust_impl_name(item, text) {
                def.name = name;
            }
        }
        (Language::Python, SymbolKind::Variable | SymbolKind::Field)
            if is_upper_case(&def.name) =>
        {
            def.kind = SymbolKind::Constant;
        }
        (Language::Java, SymbolKind::Field) if is_upper_case(&def.name) => {
            def.kind = SymbolKind::Constant;
        }
        (Language::JavaScript | Language::TypeScript | Language::Tsx, SymbolKind::Method)
            if def.name == "constructor" =>
        {
            def.kind = SymbolKind::Constructor
        }
        _ => {}
    }
}

/// `impl Display for Foo<T>` / `impl Foo`: what rust-analyzer shows.
fn rust_impl_name(item: Node, text: &str) -> Option<String> {
    let ty = collapse_ws(node_text(item.child_by_field_name("type")?, text)?);
    Some(match item.child_by_field_name("trait") {
        Some(tr) => {
            let neg = if has_child_kind(item, "!") { "!" } else { "" };
            format!("impl {neg}{} for {ty}", collapse_ws(node_text(tr, text)?))
        }
        None => format!("impl {ty}"),
    })
}

fn has_child_kind(node: Node, kind: &str) -> bool {
    let mut cursor = node.walk();
    let found = node.children(&mut cursor).any(|c| c.kind() == kind);
    found
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `MAX_SIZE`, `PI`, `HTTP2`: at least one letter, no lowercase ones.
fn is_upper_case(name: &str) -> bool {
    name.chars().any(|c| c.is_ascii_uppercase()) && !name.chars().any(|c| c.is_lowercase())
}

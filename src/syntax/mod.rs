//! The syntax layer: language detection, parsing, tags (definitions and
//! references), the symbol hierarchy and syntax errors.
//!
//! Knows nothing about LSP: byte offsets in, byte offsets out.
use std::ops::Range;

mod errors;
mod languages;
mod outline;
mod parse;
mod symbols;
mod tags;

pub use errors::{edit_errors, empty_block_count, syntax_errors};
pub use outline::{line_outline, line_outline_str};
pub use parse::{max_parse_bytes, parse_rope, parse_str, too_big_to_parse, MAX_PARSE_BYTES};
pub use symbols::symbol_tree;
pub use tags::{check_queries, tags, tags_within, TagBudget, TagsCut};

/// A supported language. Detection and grammar mapping live in `languages.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
    C,
    Cpp,
    Java,
    Lua,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SymbolKind {
    Module,
    Namespace,
    Class,
    Struct,
    Enum,
    Interface,
    Trait,
    Impl,
    Function,
    Method,
    Constructor,
    Field,
    Property,
    EnumMember,
    Constant,
    Variable,
    TypeAlias,
    Macro,
}

/// A definition found by the tag queries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub name: String,
    pub kind: SymbolKind,
    /// The whole item (for hierarchy and the LSP `range`).
    pub range: Range<usize>,
    /// The name (the LSP `selectionRange`).
    pub name_range: Range<usize>,
    /// A one-line signature, trimmed (e.g. `fn parse(input: &str) -> Ast`).
    pub detail: Option<String>,
}

/// A reference (call, type use, ...) found by the tag queries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub name: String,
    pub range: Range<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tags {
    pub definitions: Vec<Definition>,
    pub references: Vec<Reference>,
}

/// A hierarchical symbol: a definition with the definitions nested inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolNode {
    pub definition: Definition,
    pub children: Vec<SymbolNode>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub range: Range<usize>,
    pub message: String,
}

//! STUB — being written by helper B. The signatures are the contract.
//! Knows nothing about LSP: byte offsets in, byte offsets out.
use std::ops::Range;
use std::path::Path;

use ropey::Rope;
use tree_sitter::Tree;

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

impl Language {
    pub const ALL: &'static [Language] = &[];
    pub fn from_language_id(_id: &str) -> Option<Self> {
        None
    }
    pub fn from_path(_path: &Path) -> Option<Self> {
        None
    }
    /// `languageId` first, then the file extension.
    pub fn detect(language_id: Option<&str>, path: Option<&Path>) -> Option<Self> {
        language_id.and_then(Self::from_language_id).or_else(|| path.and_then(Self::from_path))
    }
    pub fn name(self) -> &'static str {
        ""
    }
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

pub fn parse_rope(_lang: Language, _text: &Rope, _old: Option<&Tree>) -> Option<Tree> {
    None
}
pub fn parse_str(_lang: Language, _text: &str, _old: Option<&Tree>) -> Option<Tree> {
    None
}
pub fn tags(_lang: Language, _tree: &Tree, _text: &str) -> Tags {
    Tags::default()
}
pub fn symbol_tree(_definitions: Vec<Definition>) -> Vec<SymbolNode> {
    Vec::new()
}
pub fn syntax_errors(_tree: &Tree, _text: &str, _max: usize) -> Vec<SyntaxError> {
    Vec::new()
}

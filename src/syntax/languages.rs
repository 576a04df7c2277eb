//! Language detection and the mapping to tree-sitter grammars.
use std::path::Path;

use super::Language;

impl Language {
    /// Every supported language, in a stable order (also the index of the
    /// per-language tables, see [`Language::index`]).
    pub const ALL: &'static [Language] = &[
        Language::Rust,
        Language::Python,
        Language::JavaScript,
        Language::TypeScript,
        Language::Tsx,
        Language::Go,
        Language::C,
        Language::Cpp,
        Language::Java,
        Language::Lua,
    ];

    /// Maps an LSP/VS Code `languageId` (plus a few common aliases) to a language.
    pub fn from_language_id(id: &str) -> Option<Self> {
        // Ids are lowercase by convention, but clients are not all careful.
        let id = id.trim().to_ascii_lowercase();
        Some(match id.as_str() {
            "rust" | "rs" => Language::Rust,
            "python" | "py" | "python3" => Language::Python,
            "javascript" | "javascriptreact" | "js" | "jsx" | "node" => Language::JavaScript,
            "typescript" | "ts" => Language::TypeScript,
            "typescriptreact" | "tsx" => Language::Tsx,
            "go" | "golang" => Language::Go,
            "c" => Language::C,
            "cpp" | "c++" | "cxx" | "cc" => Language::Cpp,
            "java" => Language::Java,
            "lua" => Language::Lua,
            _ => return None,
        })
    }

    /// The line-comment marker of `language`: `#`, `--`, else `//` (also
    /// when the language is unknown).
    pub fn line_comment(language: Option<Self>) -> &'static str {
        match language {
            Some(Language::Python) => "#",
            Some(Language::Lua) => "--",
            _ => "//",
        }
    }

    /// Maps a file path to a language by its extension.
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "rs" => Language::Rust,
            "py" | "pyi" | "pyw" => Language::Python,
            "js" | "mjs" | "cjs" | "jsx" => Language::JavaScript,
            "ts" | "mts" | "cts" => Language::TypeScript,
            "tsx" => Language::Tsx,
            "go" => Language::Go,
            "c" | "h" => Language::C,
            "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp" | "tpp" => {
                Language::Cpp
            }
            "java" => Language::Java,
            "lua" => Language::Lua,
            _ => return None,
        })
    }

    /// `languageId` first, then the file extension.
    pub fn detect(language_id: Option<&str>, path: Option<&Path>) -> Option<Self> {
        language_id
            .and_then(Self::from_language_id)
            .or_else(|| path.and_then(Self::from_path))
    }

    /// Human-readable name, e.g. `"C++"`.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::Python => "Python",
            Language::JavaScript => "JavaScript",
            Language::TypeScript => "TypeScript",
            Language::Tsx => "TSX",
            Language::Go => "Go",
            Language::C => "C",
            Language::Cpp => "C++",
            Language::Java => "Java",
            Language::Lua => "Lua",
        }
    }

    /// The canonical VS Code `languageId`, e.g. `"typescriptreact"`.
    pub fn language_id(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Tsx => "typescriptreact",
            Language::Go => "go",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Java => "java",
            Language::Lua => "lua",
        }
    }

    /// Position in [`Language::ALL`]; used to index per-language tables.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The tree-sitter grammar.
    pub fn ts_language(self) -> tree_sitter::Language {
        match self {
            Language::Rust => tree_sitter_rust::LANGUAGE.into(),
            Language::Python => tree_sitter_python::LANGUAGE.into(),
            // The javascript grammar parses JSX too.
            Language::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Language::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Language::Go => tree_sitter_go::LANGUAGE.into(),
            Language::C => tree_sitter_c::LANGUAGE.into(),
            Language::Cpp => tree_sitter_cpp::LANGUAGE.into(),
            Language::Java => tree_sitter_java::LANGUAGE.into(),
            Language::Lua => tree_sitter_lua::LANGUAGE.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_indexed_in_order() {
        for (i, lang) in Language::ALL.iter().enumerate() {
            assert_eq!(lang.index(), i);
        }
    }
}

//! STUB — being written by helper A. The signatures are the contract.
use ropey::Rope;
use tower_lsp::lsp_types::{TextDocumentContentChangeEvent, Url};
use tree_sitter::Tree;

use crate::position::PositionEncoding;
use crate::syntax::Language;

/// An open document: the editor's buffer, not the file on disk.
#[derive(Clone, Debug)]
pub struct Document {
    pub uri: Url,
    pub version: i32,
    pub language_id: String,
    /// `None` = no grammar: plain text everywhere.
    pub language: Option<Language>,
    pub rope: Rope,
    pub tree: Option<Tree>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChangeError {
    #[error("stale change: version {got} is older than the stored version {stored}")]
    StaleVersion { got: i32, stored: i32 },
}

impl Document {
    pub fn new(uri: Url, language_id: String, version: i32, text: &str) -> Self {
        let language = crate::syntax::Language::detect(Some(&language_id), uri.to_file_path().ok().as_deref());
        Self { uri, version, language_id, language, rope: Rope::from_str(text), tree: None }
    }

    pub fn apply_changes(
        &mut self,
        _version: i32,
        _changes: &[TextDocumentContentChangeEvent],
        _enc: PositionEncoding,
    ) -> Result<(), ChangeError> {
        Ok(())
    }
}

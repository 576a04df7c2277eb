//! STUB — being written by helper D. The signatures are the contract.
//! Knows nothing about LSP: paths and `TextPoint`s.
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::position::TextPoint;
use crate::syntax::{Language, SymbolKind};

#[derive(Clone, Debug)]
pub struct IndexSettings {
    pub max_file_bytes: u64,
    pub exclude: Vec<String>,
    pub threads: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedSymbol {
    pub name: Arc<str>,
    pub kind: SymbolKind,
    pub path: Arc<Path>,
    pub container: Option<Arc<str>>,
    pub detail: Option<Arc<str>>,
    /// The whole item.
    pub range: (TextPoint, TextPoint),
    /// The name.
    pub selection: (TextPoint, TextPoint),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    pub files: usize,
    pub lines: usize,
    pub bytes: u64,
    pub definitions: usize,
    pub references: usize,
    pub skipped: usize,
}

#[derive(Clone, Debug)]
pub struct IndexProgress {
    pub done: usize,
    pub total: Option<usize>,
    pub current: Option<PathBuf>,
}

pub struct WorkspaceIndex {
    _settings: IndexSettings,
}

impl WorkspaceIndex {
    pub fn new(settings: IndexSettings) -> Self {
        Self { _settings: settings }
    }
    /// Walks and indexes `roots` (blocking; run it off the async runtime).
    pub fn index_roots(&self, _roots: &[PathBuf], _progress: &(dyn Fn(IndexProgress) + Sync), _cancel: &AtomicBool) -> IndexStats {
        IndexStats::default()
    }
    /// Re-reads a file from disk (save, watched-file change); removes it when gone, ignored, too big or binary.
    pub fn update_file(&self, _path: &Path) {}
    /// Indexes an open buffer's text in place of the file on disk.
    pub fn update_text(&self, _path: &Path, _language: Option<Language>, _text: &str) {}
    pub fn remove_file(&self, _path: &Path) {}
    pub fn definitions(&self, _name: &str) -> Vec<IndexedSymbol> {
        Vec::new()
    }
    pub fn file_symbols(&self, _path: &Path) -> Vec<IndexedSymbol> {
        Vec::new()
    }
    pub fn files_referencing(&self, _name: &str) -> Vec<PathBuf> {
        Vec::new()
    }
    /// Fuzzy search over all definitions, best first.
    pub fn search(&self, _query: &str, _limit: usize) -> Vec<IndexedSymbol> {
        Vec::new()
    }
    pub fn stats(&self) -> IndexStats {
        IndexStats::default()
    }
}

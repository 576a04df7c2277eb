//! The LSP layer.

//! Fettle: a language server that puts a code agent inside any LSP editor.
//!
//! See `ARCHITECTURE.md` for the bird's-eye view and the code map.

pub mod agent;
pub mod allocator;
pub mod background;
pub mod cli;
pub mod completion;
pub mod config;
pub mod document;
pub mod edit;
pub mod fsread;
pub mod index;
pub mod latency;
pub mod logging;
pub mod lsp;
pub mod mock;
pub mod model;
pub mod position;
pub mod runtime;
pub mod secrets;
pub mod syntax;

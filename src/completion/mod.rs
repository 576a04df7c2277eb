//! Inline completion: deciding when to complete, building the prompt, and turning model output into a suggestion. Knows nothing about LSP.
pub mod cache;
pub mod context;
pub mod engine;
pub mod postprocess;
pub mod secrets;
pub mod stats;
pub mod trigger;

pub use engine::{Buffer, DocumentState, Engine, Env, OpenBuffers, Request, Suggestion};

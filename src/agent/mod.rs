//! The repair loop: a task that reads the workspace, edits it through
//! narrowly-scoped tools, verifies with the tests and syntax checks, rolls
//! back what made things worse, and gives up honestly.
//!
//! `agent/` knows nothing about LSP: the editor (or the terminal) is behind
//! the [`host::Host`] trait.

pub mod bisect;
pub mod checkers;
pub mod checkpoint;
pub mod confined;
pub mod conversation;
pub mod edit;
pub mod exec;
pub mod fsutil;
pub mod host;
pub mod isolated;
pub mod mutate;
pub mod output;
pub mod paths;
pub mod prepare;
pub mod protected;
pub mod redact;
pub mod repo_map;
pub mod review;
pub mod sandbox;
pub mod search;
pub mod task;
pub mod types;
pub mod undo;
pub mod verify;
pub mod workspace_scan;

pub use task::{run_task, TaskEnv};
pub use tokio_util::sync::CancellationToken;
pub use types::{
    Budget, CheckGoal, EditorNote, EventKind, Focus, TaskEvent, TaskResult, TaskSpec, TaskStatus,
    Tokens, DEFAULT_GOAL, SEE_DIAGNOSTICS,
};

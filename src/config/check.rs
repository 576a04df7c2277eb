//! `[check]`: the project's checkers (compilers, type checkers, linters).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::schema::CheckFormat;

/// The languages `[check.commands]` and `[check.formats]` accept as keys.
pub const CHECK_LANGUAGES: &[&str] = &[
    "rust",
    "python",
    "typescript",
    "javascript",
    "go",
    "c",
    "cpp",
    "java",
    "lua",
];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckConfig {
    /// Whether checkers run at all (the agent's verification and
    /// `diagnostics` tool, `fettle.fixDiagnostics`, on save, `fettle check`).
    pub enabled: bool,
    /// Publish checker diagnostics for a file when it is saved.
    pub on_save: bool,
    /// Quiet time after a save before the checker starts (a newer save
    /// restarts the wait and cancels a run in progress).
    pub debounce_ms: u64,
    /// Limit for one checker run; its whole process group is killed after it.
    pub timeout_s: u64,
    /// Rust: `cargo clippy` instead of `cargo check`.
    pub clippy: bool,
    /// Language → the command that checks it (run by `sh -c` in the
    /// workspace root; `{files}` stands for the files to check). Absent or
    /// empty: detected from the project.
    pub commands: BTreeMap<String, String>,
    /// Language → the output format of its command in `commands`
    /// (default `auto`: from the command's program).
    pub formats: BTreeMap<String, CheckFormat>,
}

impl Default for CheckConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            on_save: false,
            debounce_ms: 300,
            timeout_s: 300,
            clippy: false,
            commands: BTreeMap::new(),
            formats: BTreeMap::new(),
        }
    }
}

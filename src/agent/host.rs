//! What the loop needs from where it runs: the editor (LSP) or the terminal.
//! Everything else (files on disk, processes, the model) the loop does itself.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;

use super::types::TaskEvent;

/// How an edit to an open editor buffer went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferEdit {
    /// The file is not open: write it on disk.
    NotOpen,
    Applied,
    /// The buffer no longer holds the text the edit was planned against
    /// (the user typed meanwhile): re-read and plan again.
    Changed,
    /// The editor refused; the reason is for the model and the log.
    Failed(String),
}

pub trait Host: Send + Sync {
    /// Reports progress (`fettle/taskEvent` in the editor, stderr in the CLI).
    fn event(&self, event: TaskEvent);

    /// The editor's current text of `path` when it is open there.
    fn buffer(&self, path: &Path) -> Option<String>;

    /// Replaces the open buffer's `old` text with `new` (through the editor,
    /// so its undo works and concurrent typing is never overwritten).
    fn edit_buffer<'a>(
        &'a self,
        path: &'a Path,
        old: &'a str,
        new: &'a str,
    ) -> BoxFuture<'a, BufferEdit>;

    /// Waits until the editor's buffers for `paths` (all open buffers when
    /// empty) are quiet: no typing whose changes may still be on their way.
    fn settle<'a>(&'a self, _paths: &'a [PathBuf]) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Asks the user whether the agent may run `command`.
    fn approve<'a>(&'a self, command: &'a str) -> BoxFuture<'a, bool>;
}

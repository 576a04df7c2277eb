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

/// What the editor did when asked to save buffers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaveOutcome {
    /// Saved by the editor (the agent still checks the disk).
    pub saved: Vec<PathBuf>,
    /// Not saved, and why (the agent then writes the disk itself).
    pub failed: Vec<(PathBuf, String)>,
}

impl SaveOutcome {
    /// Every path failed for the same reason.
    pub fn all_failed(paths: &[PathBuf], why: &str) -> Self {
        Self {
            saved: Vec::new(),
            failed: paths.iter().map(|p| (p.clone(), why.to_owned())).collect(),
        }
    }
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

    /// `agent.plan_approval`: asks the user whether the agent may carry out
    /// `plan` (numbered lines). A host that cannot ask declines.
    fn approve_plan<'a>(&'a self, _plan: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }

    /// Asks the editor to save the open buffers of `paths` itself, so that it
    /// knows they are saved (no "changed since reading" warning later).
    /// Hosts without buffers, or editors that cannot, fail every path.
    fn save_buffers<'a>(&'a self, paths: &'a [PathBuf]) -> BoxFuture<'a, SaveOutcome> {
        Box::pin(async move { SaveOutcome::all_failed(paths, "there is no editor to save it") })
    }

    /// `agent.unsaved_buffers = "ask"`: asks the user whether the unsaved
    /// changes in the open buffer of `path` (`relative` to the workspace) may
    /// be saved so the agent can write the file. `false`: leave it alone.
    fn ask_unsaved<'a>(&'a self, _path: &'a Path, _relative: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
}

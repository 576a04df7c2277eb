//! Index writes from handlers, applied one at a time in arrival order.
//!
//! Handlers enqueue synchronously (before any `.await`), and one worker
//! applies the updates on the background thread ([`crate::background`]). Spawning a blocking task per
//! event instead would let a "created" and a "deleted" event for the same
//! file land in either order.

use std::path::PathBuf;
use std::sync::Weak;

use tokio::sync::mpsc;
use tower_lsp::lsp_types::Url;
use tree_sitter::Tree;

use super::state::State;
use crate::syntax::Language;

pub enum IndexUpdate {
    /// Re-read a file (or folder) from disk.
    File(PathBuf),
    Removed(PathBuf),
    /// An open buffer's text, which wins over the disk while it is open.
    Buffer {
        uri: Url,
        path: PathBuf,
        language: Option<Language>,
        text: std::sync::Arc<str>,
        /// Current for `text` when given: saves the index a parse.
        tree: Option<Tree>,
    },
}

#[derive(Clone)]
pub struct IndexQueue {
    tx: mpsc::UnboundedSender<IndexUpdate>,
}

impl IndexQueue {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<IndexUpdate>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    pub fn push(&self, update: IndexUpdate) {
        if self.tx.send(update).is_err() {
            tracing::debug!("index queue closed; update dropped (shutting down)");
        }
    }
}

/// Applies queued updates in order until the server goes away.
pub fn spawn_worker(state: Weak<State>, mut rx: mpsc::UnboundedReceiver<IndexUpdate>) {
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            let Some(state) = state.upgrade() else { return };
            // In the background: a request never waits behind an update.
            let result = crate::background::run(move || {
                let index = state.index();
                for update in batch {
                    match update {
                        IndexUpdate::File(path) => index.update_file(&path),
                        IndexUpdate::Removed(path) => index.remove_file(&path),
                        IndexUpdate::Buffer {
                            uri,
                            path,
                            language,
                            text,
                            tree,
                        } => {
                            // Closed meanwhile: its `File` update (queued on close) has the last word.
                            if state.documents.contains_key(&uri) {
                                index.update_parsed(&path, language, &text, tree.as_ref());
                            }
                        }
                    }
                }
            })
            .await;
            if result.is_none() {
                tracing::error!("applying index updates failed");
            }
        }
    });
}

//! The workspace: its roots, the background index and keeping it current
//! from watched-file events.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tower_lsp::lsp_types::{
    DidChangeWatchedFilesParams, DidChangeWorkspaceFoldersParams, FileChangeType, InitializeParams,
    ProgressToken,
};

use super::index_queue::IndexUpdate;
use super::progress::Progress;
use super::settings;
use super::state::State;
use crate::index::{IndexSettings, WorkspaceIndex};

/// The workspace roots named by `initialize`: folders, else `rootUri`, else `rootPath`.
#[allow(deprecated)] // rootUri/rootPath are deprecated but older clients only send those.
pub fn roots_from(params: &InitializeParams) -> Vec<PathBuf> {
    if let Some(folders) = &params.workspace_folders {
        if !folders.is_empty() {
            return folders
                .iter()
                .filter_map(|f| f.uri.to_file_path().ok())
                .collect();
        }
    }
    if let Some(path) = params
        .root_uri
        .as_ref()
        .and_then(|uri| uri.to_file_path().ok())
    {
        return vec![path];
    }
    params.root_path.iter().map(PathBuf::from).collect()
}

pub fn is_in_workspace(state: &State, path: &Path) -> bool {
    state.roots.read().iter().any(|root| path.starts_with(root))
}

/// (Re)builds the index in the background, replacing any run in progress.
pub fn start_indexing(state: Arc<State>, client_token: Option<ProgressToken>) {
    let cancel = CancellationToken::new();
    let previous = std::mem::replace(&mut *state.index_cancel.lock(), cancel.clone());
    previous.cancel();

    let config = state.config();
    let index = state.replace_index(WorkspaceIndex::new(IndexSettings::from_config(
        &config.index,
    )));
    if !config.index.enabled {
        tracing::info!("workspace index disabled by configuration");
        return;
    }
    let roots = state.roots.read().clone();
    if roots.is_empty() {
        tracing::info!("no workspace folder; nothing to index");
        return;
    }
    tokio::spawn(async move {
        let started = Instant::now();
        let progress = Progress::begin(&state, "Fettle: indexing workspace", client_token).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let walk_index = index.clone();
        let walk_cancel = cancel.clone();
        let walk = tokio::task::spawn_blocking(move || {
            walk_index.index_roots(
                &roots,
                &|update| {
                    // The receiver only goes away when the server is shutting down.
                    let _ = tx.send(update);
                },
                &walk_cancel,
            )
        });
        while let Some(update) = rx.recv().await {
            let percentage = update
                .total
                .filter(|t| *t > 0)
                .map(|total| (update.done * 100 / total).min(100) as u32);
            progress
                .report(format!("{} files", update.done), percentage)
                .await;
        }
        let stats = match walk.await {
            Ok(stats) => stats,
            Err(err) => {
                tracing::error!(%err, "indexing task failed");
                progress
                    .end("indexing failed; see the log".to_owned())
                    .await;
                return;
            }
        };
        if cancel.is_cancelled() {
            progress.end("indexing cancelled".to_owned()).await;
            return;
        }
        // Buffers opened while the walk ran must win over the files on disk.
        let open: Vec<_> = state.documents.iter().map(|d| d.key().clone()).collect();
        for uri in open {
            super::documents::reindex_buffer(&state, &uri);
        }
        let elapsed = started.elapsed();
        tracing::info!(
            files = stats.files,
            lines = stats.lines,
            definitions = stats.definitions,
            skipped = stats.skipped,
            ms = elapsed.as_millis() as u64,
            "workspace indexed"
        );
        progress
            .end(format!(
                "indexed {} files, {} symbols in {:.1}s",
                stats.files,
                stats.definitions,
                elapsed.as_secs_f64()
            ))
            .await;
    });
}

pub async fn did_change_watched_files(state: &Arc<State>, params: DidChangeWatchedFilesParams) {
    // Enqueued before the first `.await`, so events apply in the order they came.
    for change in params.changes {
        let Ok(path) = change.uri.to_file_path() else {
            tracing::debug!(uri = %change.uri, "watched-file event for a non-file URI; ignored");
            continue;
        };
        if super::reload::is_config_file(state, &path) {
            super::reload::schedule(state, path.clone());
        }
        // An open buffer is the truth for its file; the disk copy is stale until it closes.
        if state.documents.contains_key(&change.uri) {
            continue;
        }
        state
            .index_updates
            .push(if change.typ == FileChangeType::DELETED {
                IndexUpdate::Removed(path)
            } else {
                IndexUpdate::File(path)
            });
    }
}

pub async fn did_change_workspace_folders(
    state: &Arc<State>,
    params: DidChangeWorkspaceFoldersParams,
) {
    {
        let mut roots = state.roots.write();
        let removed: Vec<PathBuf> = params
            .event
            .removed
            .iter()
            .filter_map(|f| f.uri.to_file_path().ok())
            .collect();
        roots.retain(|root| !removed.contains(root));
        for folder in &params.event.added {
            if let Ok(path) = folder.uri.to_file_path() {
                if !roots.contains(&path) {
                    roots.push(path);
                }
            }
        }
    }
    settings::reload_files(state).await;
    settings::apply(state).await;
    super::reload::rewatch(state);
    start_indexing(state.clone(), None);
}

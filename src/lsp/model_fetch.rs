//! Installing the embedded default model on first use: when a feature uses
//! a local model whose weights are the default model's and missing (and
//! `auto_fetch` is on), the server installs them in the background —
//! verified against the known checksum — with `$/progress` and one
//! message; completions start working when the file is in place (the
//! engine loads it on the next request). Offline, the install fails within
//! seconds and the message says exactly what to run.

use std::path::PathBuf;
use std::sync::Arc;

use tower_lsp::lsp_types::MessageType;

use super::progress::Progress;
use super::state::State;
use crate::model::local::fetch;

/// Starts installing the default model at `dest` unless this server
/// already did (successfully or not: a failure is not retried until the
/// user asks, so an offline machine is told once).
pub fn start(state: &Arc<State>, dest: PathBuf) {
    if !state.model_fetches.lock().insert(dest.clone()) {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        tracing::info!(dest = %dest.display(), "installing the embedded model");
        // Short: Neovim turns a message wider than the screen into a
        // "Press ENTER" prompt. The path is in the log.
        state
            .client
            .show_message(
                MessageType::INFO,
                "fettle: installing the embedded model (98 MB); ghost text starts when ready",
            )
            .await;
        let progress = Progress::begin(&state, "Fettle: installing the embedded model", None).await;
        // The fetch reports steps synchronously; they reach the client in order.
        let (lines, mut received) = tokio::sync::mpsc::unbounded_channel::<String>();
        let fetched = {
            let reporter = async {
                while let Some(line) = received.recv().await {
                    progress.report(line, None).await;
                }
            };
            let fetching = async move {
                let result = fetch::fetch_default(&dest, &mut |line: &str| {
                    let _ = lines.send(line.to_owned());
                })
                .await;
                (result, dest)
            };
            let (result, ()) = tokio::join!(fetching, reporter);
            result
        };
        match fetched {
            (Ok(done), _) => {
                tracing::info!(path = %done.path.display(), "embedded model installed");
                progress
                    .end(format!(
                        "installed ({:.0} MB, checksum verified)",
                        done.bytes as f64 / 1e6
                    ))
                    .await;
                super::settings::check_models(&state).await;
            }
            (Err(err), dest) => {
                tracing::warn!(error = %format!("{err:#}"), "installing the embedded model failed");
                progress.end("failed".to_owned()).await;
                state
                    .client
                    .show_message(
                        MessageType::WARNING,
                        format!(
                            "fettle: could not install the embedded model at {}: {err:#}. Ghost text with the embedded model stays off until it is installed: run `fettle model fetch` (with network access), or set models.local.auto_fetch = false and point completion.model at another model",
                            dest.display()
                        ),
                    )
                    .await;
            }
        }
    });
}

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
        let fetched = reported(&progress, |lines| async move {
            let result = fetch::fetch_default(&dest, &mut |line: &str| {
                let _ = lines.send(line.to_owned());
            })
            .await;
            (result, dest)
        })
        .await;
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

/// A feature was refused because its model is too small: offers, once per
/// session, to install the default coder model in the background
/// (`window/showMessageRequest`: the user decides on a 1 GB download).
/// Nothing waits for the answer; once installed, the configuration is
/// resolved again, and rewrites and the agent use the new model.
pub fn offer_coder(state: &Arc<State>, why: String) {
    let Some(model) = crate::model::local::catalog::find(crate::config::DEFAULT_CODER_MODEL) else {
        return;
    };
    let dest = crate::config::expand_home(crate::config::DEFAULT_LOCAL_MODEL_PATH)
        .with_file_name(model.file);
    // Installed (the message names the setting to change), or offered
    // already this session: the message alone.
    if dest.is_file() || !state.model_fetches.lock().insert(dest.clone()) {
        let state = state.clone();
        tokio::spawn(async move {
            state
                .client
                .show_message(MessageType::WARNING, format!("Fettle: {why}"))
                .await;
        });
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        let install = format!("Install ({} MB)", model.bytes / 1_000_000);
        let actions = vec![
            tower_lsp::lsp_types::MessageActionItem {
                title: install.clone(),
                properties: Default::default(),
            },
            tower_lsp::lsp_types::MessageActionItem {
                title: "Not now".to_owned(),
                properties: Default::default(),
            },
        ];
        let answer = state
            .client
            .show_message_request(
                MessageType::WARNING,
                format!("Fettle: {why}"),
                Some(actions),
            )
            .await;
        if !matches!(answer, Ok(Some(ref item)) if item.title == install) {
            // Asked again in the next session, or with the command.
            tracing::info!("the user did not install the coder model now");
            return;
        }
        install_named(&state, model, dest).await;
    });
}

/// Installs the catalog `model` at `dest` with `$/progress`, then resolves
/// the configuration again (an installed coder model becomes the edit and
/// agent default).
async fn install_named(
    state: &Arc<State>,
    model: &'static crate::model::local::catalog::CatalogModel,
    dest: PathBuf,
) {
    let title = format!("Fettle: installing {}", model.name);
    let progress = Progress::begin(state, &title, None).await;
    let result = reported(&progress, |lines| async move {
        crate::model::local::fetch_parts::fetch_parts(model, &dest, None, &mut |line: &str| {
            let _ = lines.send(line.to_owned());
        })
        .await
    })
    .await;
    match result {
        Ok(done) => {
            tracing::info!(path = %done.path.display(), "coder model installed");
            progress.end("installed".to_owned()).await;
            super::settings::reload_files(state).await;
            state
                .client
                .show_message(
                    MessageType::INFO,
                    format!(
                        "fettle: {} installed; rewrites and the agent use it now",
                        model.name
                    ),
                )
                .await;
        }
        Err(err) => {
            tracing::warn!(error = %format!("{err:#}"), "installing the coder model failed");
            progress.end("failed".to_owned()).await;
            state
                .client
                .show_message(
                    MessageType::WARNING,
                    format!(
                        "fettle: could not install {}: {err:#}. Run `fettle model fetch {}` in a terminal (it resumes where this stopped)",
                        model.name, model.name
                    ),
                )
                .await;
        }
    }
}

/// Runs `fetch`, passing each line it sends on to `progress` as it comes:
/// the fetches report steps synchronously, and they reach the client in
/// order. The reports end when `fetch` is done (its sender dropped).
async fn reported<F, T>(
    progress: &Progress,
    fetch: impl FnOnce(tokio::sync::mpsc::UnboundedSender<String>) -> F,
) -> T
where
    F: std::future::Future<Output = T>,
{
    let (lines, mut received) = tokio::sync::mpsc::unbounded_channel::<String>();
    let reporter = async {
        while let Some(line) = received.recv().await {
            progress.report(line, None).await;
        }
    };
    let (result, ()) = tokio::join!(fetch(lines), reporter);
    result
}

//! Untrusted workspace configuration in the editor: one question per
//! workspace file content whose keys Fettle ignored ("Trust this
//! workspace" / "Keep ignoring"); trusting records the hash that was shown
//! and reloads the configuration.

use std::path::PathBuf;
use std::sync::Arc;

use tower_lsp::lsp_types::{MessageActionItem, MessageType};

use super::settings;
use super::state::State;
use crate::config::Resolved;

const TRUST: &str = "Trust this workspace";
const KEEP: &str = "Keep ignoring";

/// Asks, in the background, about each untrusted file not asked about yet
/// (the server goes on with the keys ignored while the question is open).
pub fn ask_about_ignored(state: &Arc<State>, resolved: &Resolved) {
    for file in resolved.untrusted_files() {
        let key = (file.file.clone(), file.sha256.clone());
        if !state.trust_notices.lock().insert(key) {
            continue;
        }
        let text = format!("fettle: {}", file.notice());
        tracing::warn!(%text, "untrusted workspace configuration");
        let root = file.root().to_path_buf();
        let sha256 = file.sha256.clone();
        let state = state.clone();
        tokio::spawn(async move { ask(state, text, root, sha256).await });
    }
}

async fn ask(state: Arc<State>, text: String, root: PathBuf, sha256: String) {
    let actions = [TRUST, KEEP]
        .map(|title| MessageActionItem {
            title: title.to_owned(),
            properties: Default::default(),
        })
        .to_vec();
    let answer = state
        .client
        .show_message_request(MessageType::WARNING, text, Some(actions))
        .await;
    match answer {
        Ok(Some(item)) if item.title == TRUST && !sha256.is_empty() => {}
        Ok(_) => return,
        Err(err) => {
            tracing::warn!(%err, "window/showMessageRequest failed; the keys stay ignored");
            return;
        }
    }
    let Some(store) = state.file_layers.lock().trust_store_path() else {
        state
            .client
            .show_message(
                MessageType::ERROR,
                "fettle: cannot record trust: neither XDG_CONFIG_HOME nor HOME is set",
            )
            .await;
        return;
    };
    // The hash is the one the question was about: if the file changed
    // since, the new content is still untrusted (and asked about).
    let recorded = tokio::task::spawn_blocking(move || {
        crate::config::trust::record_trust(&store, &root, &sha256)
    })
    .await;
    match recorded {
        Ok(Ok(())) => {
            tracing::info!("workspace trusted; reloading the configuration");
            settings::reload_files(&state).await;
            settings::apply(&state).await;
        }
        Ok(Err(err)) => {
            state
                .client
                .show_message(
                    MessageType::ERROR,
                    format!("fettle: cannot record trust: {err}"),
                )
                .await
        }
        Err(err) => tracing::error!(%err, "recording trust failed"),
    }
}

//! Configuration at run time: which layers come from the client, and what
//! happens when a new configuration is valid (it replaces the old one) or
//! invalid (the user is told which key is wrong; the old one stays).

use std::sync::Arc;

use serde_json::Value;
use tower_lsp::lsp_types::{ConfigurationItem, MessageType};

use super::state::State;
use super::workspace;
use crate::config::{Config, ConfigError, Resolved, Source};

/// The `workspace/configuration` section Fettle reads.
pub const SECTION: &str = "fettle";

/// Re-reads the user and workspace files (client layers are kept apart and survive).
pub async fn reload_files(state: &Arc<State>) {
    let roots = state.roots.read().clone();
    // A file that no longer parses keeps its previous contents (and is reported).
    let errors = state.file_layers.lock().reload_files(&roots);
    for error in errors {
        show_invalid(state, &error.to_string()).await;
    }
}

/// Asks the client for the `fettle` section, when it supports pull configuration.
pub async fn pull_from_client(state: &Arc<State>) {
    let supported = state
        .capabilities()
        .and_then(|caps| caps.workspace.as_ref())
        .and_then(|ws| ws.configuration)
        .unwrap_or(false);
    if !supported {
        return;
    }
    let items = vec![ConfigurationItem {
        scope_uri: None,
        section: Some(SECTION.to_owned()),
    }];
    match state.client.configuration(items).await {
        Ok(mut values) => {
            let value = values.drain(..).next().unwrap_or(Value::Null);
            set_client_layer(state, Source::WorkspaceConfiguration, value);
        }
        Err(err) => {
            tracing::warn!(%err, "workspace/configuration failed; keeping the current configuration")
        }
    }
}

/// Records a client-provided layer; `null` (a client with nothing to say) clears it.
pub fn set_client_layer(state: &State, source: Source, value: Value) {
    let mut layers = state.client_layers.lock();
    if value.is_null() {
        layers.remove(&source);
    } else {
        layers.insert(source, value);
    }
}

/// Resolves the layers. A valid result replaces the configuration in force;
/// an invalid one is reported and changes nothing.
pub async fn apply(state: &Arc<State>) {
    match install(state) {
        Ok(installed) => {
            if !installed.resolved.warnings.is_empty() {
                let text = installed.resolved.warnings.join("; ");
                tracing::warn!(warnings = %text, "configuration warnings");
                state
                    .client
                    .show_message(
                        MessageType::WARNING,
                        format!("fettle: configuration: {text}"),
                    )
                    .await;
            }
            after_install(state, &installed).await;
        }
        Err(err) => show_invalid(state, &err.to_string()).await,
    }
}

/// A configuration just put in force, and the one it replaced.
pub struct Installed {
    pub before: Arc<Config>,
    pub resolved: Resolved,
}

/// Resolves the layers and, if valid, puts the result in force.
pub fn install(state: &Arc<State>) -> Result<Installed, ConfigError> {
    // Resolve and install under the file layers' lock, with no `.await` in
    // between: two applies racing (a reload after the user trusted the
    // workspace, a configuration pull still in flight) must never leave the
    // older resolution in force.
    let file_layers = state.file_layers.lock();
    let mut layers = file_layers.clone();
    for (source, value) in state.client_layers.lock().iter() {
        layers.set(source.clone(), value.clone());
    }
    let resolved = layers.resolve()?;
    let before = state.config();
    crate::logging::set_level(&resolved.config.log.level);
    state.set_config(resolved.config.clone());
    // Applied at `initialize` and again at `initialized` (after pulling the
    // client's settings): the second, usually the same, is not news.
    if *before == resolved.config {
        tracing::debug!("configuration unchanged");
    } else {
        tracing::info!("configuration applied");
    }
    Ok(Installed { before, resolved })
}

/// What follows a new configuration: the trust question for ignored keys,
/// model problems, re-indexing when `[index]` changed.
pub async fn after_install(state: &Arc<State>, installed: &Installed) {
    super::trust::ask_about_ignored(state, &installed.resolved);
    check_models(state).await;
    let index_changed = installed.before.index != installed.resolved.config.index;
    if index_changed && state.initialized() {
        workspace::start_indexing(state.clone(), None);
    }
}

/// Tells the user, once, when a model that a feature uses cannot work:
/// the embedded model's weights are missing (naming `fettle model fetch`),
/// a URL is invalid, a model name is unknown.
pub async fn check_models(state: &Arc<State>) {
    let config = state.config();
    let models = state.models();
    let mut problems = Vec::new();
    let mut checked: Vec<&str> = Vec::new();
    for name in [
        &config.completion.model,
        &config.edit.model,
        &config.agent.model,
    ] {
        if checked.contains(&name.as_str()) {
            continue;
        }
        checked.push(name);
        let features = config.features_using(name);
        let problem = match models.get(name) {
            Err(e) => Some(e.to_string()),
            Ok(model) if model.config().provider == crate::config::Provider::Local => {
                match crate::model::local::check_weights(name, model.config()) {
                    Ok(_) => None,
                    Err(e) => match crate::model::local::fetch::auto_fetch_target(model.config()) {
                        // The default model, missing: installed once the
                        // client is ready (its own progress and message).
                        Some(dest) => {
                            if state.initialized() {
                                super::model_fetch::start(state, dest);
                            }
                            None
                        }
                        None => Some(e.to_string()),
                    },
                }
            }
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            problems.push(format!("{problem} (used by {})", features.join(", ")));
        }
    }
    let notice = problems.join("; ");
    {
        let mut last = state.model_notice.lock();
        if *last == notice {
            return;
        }
        last.clone_from(&notice);
    }
    if notice.is_empty() {
        return;
    }
    tracing::warn!(%notice, "model problem");
    state
        .client
        .show_message(MessageType::WARNING, format!("fettle: {notice}"))
        .await;
}

pub async fn show_invalid(state: &State, error: &str) {
    tracing::error!(%error, "invalid configuration; keeping the previous one");
    state
        .client
        .show_message(
            MessageType::ERROR,
            format!("fettle: invalid configuration: {error} (the previous configuration stays in force)"),
        )
        .await;
}

/// Push-style clients send the settings; pull-style ones just say "changed".
pub async fn did_change_configuration(
    state: &Arc<State>,
    params: tower_lsp::lsp_types::DidChangeConfigurationParams,
) {
    match params.settings.get(SECTION) {
        Some(section) => set_client_layer(state, Source::WorkspaceConfiguration, section.clone()),
        None => pull_from_client(state).await,
    }
    apply(state).await;
}

//! `initialize`, `initialized` and `shutdown`.

use std::sync::Arc;

use serde_json::json;
use tower_lsp::jsonrpc::Result;
use tower_lsp::lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, CompletionOptions,
    DocumentSymbolOptions, ExecuteCommandOptions, ExecuteCommandParams, InitializeParams,
    InitializeResult, InitializedParams, OneOf, Registration, SaveOptions, ServerCapabilities,
    ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions,
    TextDocumentSyncSaveOptions, WorkspaceFoldersServerCapabilities, WorkspaceServerCapabilities,
    WorkspaceSymbolOptions,
};

use super::settings;
use super::state::State;
use super::workspace;
use crate::config::Source;
use crate::position::PositionEncoding;

pub async fn initialize(state: &Arc<State>, params: InitializeParams) -> Result<InitializeResult> {
    let encoding = PositionEncoding::negotiate(
        params
            .capabilities
            .general
            .as_ref()
            .and_then(|general| general.position_encodings.as_deref()),
    );
    *state.roots.write() = workspace::roots_from(&params);
    state.set_session(encoding, params.capabilities.clone());
    tracing::info!(?encoding, roots = ?state.roots.read(), client = ?params.client_info.as_ref().map(|c| &c.name), "initialize");

    settings::reload_files(state).await;
    if let Some(options) = params.initialization_options {
        settings::set_client_layer(state, Source::InitializationOptions, options);
    }
    settings::apply(state).await;

    Ok(InitializeResult {
        capabilities: capabilities(encoding, state.config().completion.as_completion_item),
        server_info: Some(server_info()),
    })
}

pub async fn initialized(state: &Arc<State>, _: InitializedParams) {
    // Before anything can use a model: its failures reach the user.
    super::model_status::watch(state);
    settings::pull_from_client(state).await;
    settings::apply(state).await;
    // From here on a configuration change that touches the index re-indexes.
    state.mark_initialized();
    // Background work may start now: installing a missing embedded model.
    settings::check_models(state).await;
    if !register_dynamic_capabilities(state).await {
        // Neovim on Linux, for one: without this, an edit to fettle.toml
        // made outside the editor would apply only after a restart.
        super::reload::start_watching(state);
    }
    workspace::start_indexing(state.clone(), None);
    let first_root = state.roots.read().first().cloned();
    if let Some(root) = first_root.filter(|_| state.config().completion.enabled) {
        state.completion.warm_redactor(root);
    }
}

pub async fn shutdown(state: &Arc<State>) -> Result<()> {
    tracing::info!("shutdown requested");
    state.index_cancel.lock().cancel();
    super::agent::cancel_running(state);
    Ok(())
}

pub fn server_info() -> ServerInfo {
    ServerInfo {
        name: "fettle".to_owned(),
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
    }
}

/// `as_completion_item`: also advertise `textDocument/completion` (the
/// inline suggestion as a menu item, for clients without inline completion).
pub fn capabilities(encoding: PositionEncoding, as_completion_item: bool) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(encoding.to_lsp()),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                will_save: None,
                will_save_wait_until: None,
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
            },
        )),
        document_symbol_provider: Some(OneOf::Right(DocumentSymbolOptions {
            label: Some("Fettle".to_owned()),
            work_done_progress_options: Default::default(),
        })),
        workspace_symbol_provider: Some(OneOf::Right(WorkspaceSymbolOptions {
            resolve_provider: Some(false),
            work_done_progress_options: Default::default(),
        })),
        workspace: Some(WorkspaceServerCapabilities {
            workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                supported: Some(true),
                change_notifications: Some(OneOf::Left(true)),
            }),
            file_operations: None,
        }),
        completion_provider: as_completion_item.then(CompletionOptions::default),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![
                CodeActionKind::QUICKFIX,
                CodeActionKind::REFACTOR_REWRITE,
            ]),
            resolve_provider: Some(false),
            work_done_progress_options: Default::default(),
        })),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: [
                super::inline_completion::ACCEPT_COMMAND,
                super::rewrite::REWRITE,
            ]
            .into_iter()
            .chain(super::agent::COMMANDS)
            .map(str::to_owned)
            .collect(),
            work_done_progress_options: Default::default(),
        }),
        ..ServerCapabilities::default()
    }
}

/// Capabilities newer than lsp-types 0.94, added to the `initialize` result
/// as JSON by `guard` (the typed struct cannot carry them).
pub fn extra_capabilities() -> [(&'static str, serde_json::Value); 1] {
    [("inlineCompletionProvider", serde_json::Value::Bool(true))]
}

/// `workspace/executeCommand`.
pub async fn execute_command(
    state: &Arc<State>,
    params: ExecuteCommandParams,
) -> tower_lsp::jsonrpc::Result<Option<serde_json::Value>> {
    let token = params.work_done_progress_params.work_done_token;
    let args = &params.arguments;
    match params.command.as_str() {
        super::inline_completion::ACCEPT_COMMAND => super::inline_completion::accept(state, args),
        super::rewrite::REWRITE => super::rewrite::rewrite(state, args, token).await,
        super::agent::CHAT => super::agent::chat(state, args, token).await,
        super::agent::FIX_DIAGNOSTICS => super::agent::fix_diagnostics(state, args, token).await,
        super::agent::CANCEL => super::agent::cancel(state, args),
        super::agent::UNDO => super::agent::undo(state, args).await,
        other => Err(tower_lsp::jsonrpc::Error::invalid_params(format!(
            "fettle: unknown command {other:?}"
        ))),
    }
}

/// Asks for file-watching and configuration-change events where the client
/// supports registering them dynamically. True if the client now watches
/// files for us.
async fn register_dynamic_capabilities(state: &Arc<State>) -> bool {
    let Some(workspace) = state.capabilities().and_then(|caps| caps.workspace.clone()) else {
        return false;
    };
    let mut registrations = Vec::new();
    let watches_files = workspace
        .did_change_watched_files
        .and_then(|c| c.dynamic_registration)
        .unwrap_or(false);
    if watches_files {
        registrations.push(Registration {
            id: "fettle/watched-files".to_owned(),
            method: "workspace/didChangeWatchedFiles".to_owned(),
            register_options: Some(json!({ "watchers": [ { "globPattern": "**/*" } ] })),
        });
    }
    if workspace
        .did_change_configuration
        .and_then(|c| c.dynamic_registration)
        .unwrap_or(false)
    {
        registrations.push(Registration {
            id: "fettle/configuration".to_owned(),
            method: "workspace/didChangeConfiguration".to_owned(),
            register_options: Some(json!({ "section": settings::SECTION })),
        });
    }
    if registrations.is_empty() {
        return false;
    }
    if let Err(err) = state.client.register_capability(registrations).await {
        tracing::warn!(%err, "client refused dynamic registration; file changes will only be seen on save");
        return false;
    }
    watches_files
}

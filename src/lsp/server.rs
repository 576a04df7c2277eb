//! The LSP surface: each method forwards in one line to its handler module.

use std::sync::Arc;

use tower_lsp::jsonrpc::Result;
use tower_lsp::lsp_types::*;
use tower_lsp::{Client, LanguageServer};

use super::index_queue::{self, IndexQueue};
use super::state::State;
use super::{
    agent, code_actions, documents, inline_completion, lifecycle, settings, symbols, workspace,
};

pub struct Server {
    state: Arc<State>,
}

impl Server {
    pub fn new(client: Client) -> Self {
        let (queue, updates) = IndexQueue::new();
        let state = Arc::new(State::new(client, queue));
        index_queue::spawn_worker(Arc::downgrade(&state), updates);
        Self { state }
    }
}

#[tower_lsp::async_trait]
impl LanguageServer for Server {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        lifecycle::initialize(&self.state, params).await
    }

    async fn initialized(&self, params: InitializedParams) {
        lifecycle::initialized(&self.state, params).await
    }

    async fn shutdown(&self) -> Result<()> {
        lifecycle::shutdown(&self.state).await
    }

    // Text sync handlers are synchronous: state changes before any `.await`.
    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        documents::did_open(&self.state, params)
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        documents::did_change(&self.state, params)
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        documents::did_save(&self.state, params)
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        documents::did_close(&self.state, params).await
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        settings::did_change_configuration(&self.state, params).await
    }

    async fn did_change_watched_files(&self, params: DidChangeWatchedFilesParams) {
        workspace::did_change_watched_files(&self.state, params).await
    }

    async fn did_change_workspace_folders(&self, params: DidChangeWorkspaceFoldersParams) {
        workspace::did_change_workspace_folders(&self.state, params).await
    }

    async fn document_symbol(
        &self,
        params: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        symbols::document_symbol(&self.state, params).await
    }

    async fn symbol(
        &self,
        params: WorkspaceSymbolParams,
    ) -> Result<Option<Vec<SymbolInformation>>> {
        symbols::workspace_symbol(&self.state, params).await
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        code_actions::code_action(&self.state, params).await
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        inline_completion::as_completion_items(&self.state, params).await
    }

    async fn execute_command(
        &self,
        params: ExecuteCommandParams,
    ) -> Result<Option<serde_json::Value>> {
        lifecycle::execute_command(&self.state, params).await
    }
}

/// Methods lsp-types 0.94 does not know (registered as custom methods).
impl Server {
    pub async fn inline_completion(
        &self,
        params: inline_completion::InlineCompletionParams,
    ) -> Result<Option<inline_completion::InlineCompletionList>> {
        inline_completion::inline_completion(&self.state, params).await
    }

    pub async fn work_done_progress_cancel(
        &self,
        params: tower_lsp::lsp_types::WorkDoneProgressCancelParams,
    ) {
        if !super::rewrite::progress_cancelled(&self.state, &params.token) {
            agent::progress_cancelled(&self.state, &params.token);
        }
    }

    /// `fettle/cursor` (a notification).
    pub async fn cursor(&self, params: inline_completion::warm::CursorParams) {
        inline_completion::warm::cursor_moved(&self.state, params)
    }

    /// Takes no parameters: none, null, `{}` or `[]` (Lua's `{}`).
    pub async fn stats(&self, params: serde_json::Value) -> Result<serde_json::Value> {
        if !super::params::is_empty(&params) && !params.is_object() {
            return Err(tower_lsp::jsonrpc::Error::invalid_params(format!(
                "fettle/stats takes no parameters (send none, null, {{}} or []); got {}",
                super::params::describe(&params)
            )));
        }
        super::model_status::stats(&self.state)
            .map_err(|e| tower_lsp::jsonrpc::Error::invalid_params(e.to_string()))
    }
}

/// Test hooks, registered only when `FETTLE_TEST_HOOKS` is set, so the
/// end-to-end tests can exercise panic recovery and cancellation for real.
impl Server {
    pub async fn debug_panic(&self, _params: serde_json::Value) -> Result<serde_json::Value> {
        panic!("deliberate panic requested by fettle/debug/panic")
    }

    pub async fn debug_sleep(&self, params: serde_json::Value) -> Result<serde_json::Value> {
        let ms = params
            .get("ms")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(1000);
        let duration = std::time::Duration::from_millis(ms);
        if params.get("blocking") == Some(&serde_json::Value::Bool(true)) {
            // A thread blocked in its own task, as an agent's fsync'd write
            // blocks one: the rest of the server must go on meanwhile.
            tokio::task::yield_now().await;
            crate::runtime::blocking(|| std::thread::sleep(duration));
        } else {
            tokio::time::sleep(duration).await;
        }
        Ok(serde_json::json!({ "slept_ms": ms }))
    }

    /// A result of `bytes` bytes or so: lets tests reach the output limit.
    pub async fn debug_bulk(&self, params: serde_json::Value) -> Result<serde_json::Value> {
        let bytes = params
            .get("bytes")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX).min(1 << 30);
        Ok(serde_json::Value::String("x".repeat(bytes)))
    }
}

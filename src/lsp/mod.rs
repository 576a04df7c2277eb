//! The LSP layer: the only part of Fettle that speaks the protocol. It turns
//! requests into calls on `document`, `syntax`, `index` and `config`, and
//! their results into LSP types (positions via `position`).

mod agent;
mod checks;
mod code_actions;
mod documents;
pub mod guard;
mod index_queue;
mod inline_completion;
mod lifecycle;
mod model_fetch;
mod model_status;
mod open_document;
mod params;
mod progress;
mod reload;
mod rewrite;
mod server;
mod settings;
mod state;
mod symbols;
mod transport;
mod trust;
mod workspace;

use std::sync::Arc;

use tower_lsp::LspService;

/// After the client's input ends, how long handlers still running get to
/// finish (their answers may still be read) before the process stops.
const EOF_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves LSP over stdio until `exit` (or end of input); returns the process exit code.
pub async fn serve_stdio() -> i32 {
    crate::allocator::spawn_freed_memory_cap();
    let lifecycle = Arc::new(guard::Lifecycle::default());
    let mut builder = LspService::build(server::Server::new)
        .custom_method(
            "textDocument/inlineCompletion",
            server::Server::inline_completion,
        )
        .custom_method("fettle/stats", server::Server::stats)
        .custom_method("fettle/cursor", server::Server::cursor)
        .custom_method(
            "window/workDoneProgress/cancel",
            server::Server::work_done_progress_cancel,
        );
    if std::env::var_os("FETTLE_TEST_HOOKS").is_some() {
        builder = builder
            .custom_method("fettle/debug/panic", server::Server::debug_panic)
            .custom_method("fettle/debug/sleep", server::Server::debug_sleep)
            .custom_method("fettle/debug/bulk", server::Server::debug_bulk);
    }
    let (service, socket) = builder.finish();
    let service = guard::Guarded::new(service, lifecycle.clone());
    let transport = transport::spawn(
        transport::stdio::stdin(),
        transport::stdio::stdout(),
        service,
        socket,
    );
    let transport::Transport {
        mut served,
        input_closed,
        writer,
        finish,
    } = transport;
    tokio::select! {
        _ = &mut served => tracing::info!("input closed"),
        () = lifecycle.exited() => tracing::info!("exit received"),
        _ = input_closed => {
            // Handlers still running get a moment to answer, but one
            // waiting on the client (`workspace/configuration`, an
            // approval) never ends now: then stop anyway. Ending the
            // process ends a running task's commands too (their sandbox
            // runner holds a lifeline to this process).
            if tokio::time::timeout(EOF_GRACE, &mut served).await.is_err() {
                tracing::warn!("input closed with requests still pending; exiting anyway");
            } else {
                tracing::info!("input closed");
            }
        }
    }
    // Let what is already written reach the client, but never hang on it.
    finish.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), writer).await;
    let code = lifecycle.exit_code();
    tracing::info!(code, "stopping");
    code
}

//! `textDocument/inlineCompletion` (LSP 3.18; lsp-types 0.94 predates it, so
//! the types are ours), `fettle/stats` and `fettle.acceptCompletion`: the
//! protocol side of [`crate::completion::Engine`], which does the work.
//! Here: positions to byte offsets and back (in the negotiated encoding),
//! the document's snapshot and the engine's environment, items out.
use std::sync::Arc;

use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::Command;

mod menu_item;
mod protocol;
pub mod warm;

pub use menu_item::as_completion_items;
pub use protocol::{InlineCompletionItem, InlineCompletionList, InlineCompletionParams};

use super::state::State;
use crate::completion::stats::Report;
use crate::completion::{Buffer, Env, Request};
use crate::position;

pub const ACCEPT_COMMAND: &str = "fettle.acceptCompletion";

pub async fn inline_completion(
    state: &Arc<State>,
    params: InlineCompletionParams,
) -> Result<Option<InlineCompletionList>> {
    let uri = params.text_document.uri;
    let Some((snapshot, revision, completion)) = state.watched_snapshot(&uri) else {
        return Err(Error::invalid_params(format!(
            "fettle: {uri} is not open (send textDocument/didOpen first)"
        )));
    };
    let config = state.config();
    if !config.completion.enabled {
        return Ok(None);
    }
    let encoding = state.encoding();
    let rope = snapshot.rope;
    // A position past the end of a line or of the document is clamped (as
    // the spec says), never echoed back as sent.
    let cursor = position::offset_of(&rope, params.position, encoding);
    let context = params.context.as_ref();
    let selected = context
        .and_then(|c| c.selected_completion_info.as_ref())
        .map(|s| {
            let range = position::range_to_bytes(&rope, s.range, encoding);
            (range, s.text.clone())
        });
    let request = Request {
        document: Buffer {
            uri: snapshot.uri,
            language: snapshot.language,
            rope: rope.clone(),
            revision: snapshot.revision,
            state: completion,
        },
        tree: snapshot.tree.filter(|_| !snapshot.needs_reparse),
        revision,
        text_revision: snapshot.revision,
        cursor,
        selected,
        invoked: context.is_some_and(|c| c.trigger_kind == 1),
    };
    // Warm-ups give way to the request; once the user pauses after the
    // answer, this place is warmed with more context.
    let seen = warm::active(state);
    let uri = request.document.uri.clone();
    let suggestions = state
        .completion
        .complete(request, env(state, &config))
        .await;
    warm::schedule_if_quiet(state, uri, cursor, seen);
    if suggestions.is_empty() {
        return Ok(None);
    }
    let items = suggestions
        .into_iter()
        .map(|s| InlineCompletionItem {
            insert_text: s.text,
            range: position::range_of(&rope, s.range, encoding),
            filter_text: None,
            command: Command {
                title: "Accept completion".to_string(),
                command: ACCEPT_COMMAND.to_string(),
                arguments: Some(vec![serde_json::json!({ "id": s.id })]),
            },
        })
        .collect();
    Ok(Some(InlineCompletionList { items }))
}

/// What a completion (or a warm-up) runs against.
fn env<'a>(state: &'a Arc<State>, config: &'a crate::config::Config) -> Env<'a> {
    Env {
        config: &config.completion,
        model: state
            .models()
            .get(&config.completion.model)
            .map_err(|err| err.to_string()),
        index: state.index(),
        roots: state.roots.read().clone(),
        buffers: state.as_ref(),
    }
}

/// `fettle/stats`: the engine's numbers, its stages between the protocol
/// layer's (reading, parsing, dispatching before; the whole handler,
/// serializing, writing after).
pub fn stats(state: &State) -> Report {
    let mut report = state.completion.stats();
    let (before, after) = super::transport::timing::report();
    report.stages_ms = before
        .into_iter()
        .chain(report.stages_ms)
        .chain(after)
        .collect();
    report
}

/// `fettle.acceptCompletion`.
pub fn accept(state: &State, arguments: &[serde_json::Value]) -> Result<Option<serde_json::Value>> {
    let id = arguments
        .first()
        .and_then(|a| a.get("id"))
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            Error::invalid_params(format!(
                "{ACCEPT_COMMAND} expects [{{\"id\": \"…\"}}] (the id of the shown suggestion)"
            ))
        })?;
    if !state.completion.accept(id) {
        tracing::debug!(%id, "acceptance of an unknown or already accepted completion");
    }
    Ok(None)
}

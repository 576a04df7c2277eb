//! `textDocument/codeAction`: Fettle's inline-edit actions, listed at once
//! and never with a model call. Each carries the `fettle.rewrite` command
//! with its arguments (no lazy resolve: Helix and Emacs block their UI
//! while resolving); the work happens when the user picks one.
use std::sync::Arc;

use serde_json::json;
use tower_lsp::jsonrpc::Result;
use tower_lsp::lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, CodeActionResponse,
    CodeActionTriggerKind, Command, Diagnostic, Range,
};

use super::rewrite::REWRITE;
use super::state::State;
use crate::config::CodeActionsMode;
use crate::position;

/// Quick fixes listed for single diagnostics at most (then "Fix all").
const MAX_QUICK_FIXES: usize = 3;
/// Diagnostics a "Fix all problems here" carries at most.
const MAX_FIX_ALL: usize = 20;
/// Bytes of the selection searched for a `fettle:` comment.
const COMMENT_SCAN: usize = 64 * 1024;
/// Characters of a diagnostic's message shown in a title.
const TITLE_MESSAGE: usize = 60;

pub const TITLE_PREFIX: &str = "Fettle: ";

pub async fn code_action(
    state: &Arc<State>,
    params: CodeActionParams,
) -> Result<Option<CodeActionResponse>> {
    let started = std::time::Instant::now();
    let config = state.config();
    let automatic = params.context.trigger_kind == Some(CodeActionTriggerKind::AUTOMATIC);
    match config.edit.code_actions {
        CodeActionsMode::Never => return Ok(None),
        CodeActionsMode::Invoked if automatic => return Ok(None),
        _ => {}
    }
    let uri = params.text_document.uri;
    let range = params.range;
    // Only the version and (for a selection) a little text: no clone of
    // the document, no parse.
    let Some((version, comment)) = state.documents.get(&uri).map(|open| {
        let doc = &open.document;
        let comment = (range.start != range.end)
            .then(|| {
                let bytes = position::range_to_bytes(&doc.rope, range, state.encoding());
                let end = bytes.end.min(bytes.start + COMMENT_SCAN);
                let end = position::floor_char_boundary(&doc.rope, end);
                let text = doc.rope.byte_slice(bytes.start..end).to_string();
                crate::edit::instruction::from_comment(&text).map(|(i, _)| i)
            })
            .flatten();
        (doc.version, comment)
    }) else {
        // Not a document Fettle has open: nothing to offer (editors ask
        // for every buffer, so this is not an error).
        return Ok(None);
    };
    let wants = |kind: &CodeActionKind| {
        params.context.only.as_ref().is_none_or(|only| {
            only.iter().any(|o| {
                kind.as_str() == o.as_str()
                    || kind.as_str().starts_with(&format!("{}.", o.as_str()))
            })
        })
    };
    let mut actions = Vec::new();
    if wants(&CodeActionKind::QUICKFIX) {
        quick_fixes(
            &mut actions,
            &uri,
            version,
            range,
            &params.context.diagnostics,
        );
    }
    if range.start != range.end && wants(&CodeActionKind::REFACTOR_REWRITE) {
        let rewrite_title = match &comment {
            Some(instruction) => format!(
                "Rewrite: {}",
                crate::model::shorten_for_display(instruction, TITLE_MESSAGE)
            ),
            None => "Rewrite…".to_owned(),
        };
        actions.push(action(
            &rewrite_title,
            CodeActionKind::REFACTOR_REWRITE,
            json!({ "uri": uri, "range": range, "version": version }),
            None,
        ));
        for preset in &config.edit.actions {
            actions.push(action(
                &preset.title,
                CodeActionKind::REFACTOR_REWRITE,
                json!({ "uri": uri, "range": range, "version": version,
                        "instruction": preset.instruction }),
                None,
            ));
        }
    }
    state.rewrite.stats.lock().listed(started.elapsed());
    Ok(Some(actions))
}

/// One quick fix per distinct diagnostic (a few at most), and "Fix all
/// problems here" when there are several.
fn quick_fixes(
    actions: &mut Vec<CodeActionOrCommand>,
    uri: &tower_lsp::lsp_types::Url,
    version: i32,
    range: Range,
    diagnostics: &[Diagnostic],
) {
    let mut distinct: Vec<&Diagnostic> = Vec::new();
    for d in diagnostics {
        let seen = distinct
            .iter()
            .any(|o| o.message == d.message && o.range == d.range && o.source == d.source);
        if !seen {
            distinct.push(d);
        }
    }
    for d in distinct.iter().take(MAX_QUICK_FIXES) {
        let message = d.message.lines().next().unwrap_or_default();
        let title = format!(
            "Fix \"{}\"",
            crate::model::shorten_for_display(message, TITLE_MESSAGE)
        );
        actions.push(action(
            &title,
            CodeActionKind::QUICKFIX,
            json!({ "uri": uri, "range": d.range, "version": version, "diagnostics": [d] }),
            Some(vec![(*d).clone()]),
        ));
    }
    if distinct.len() > 1 {
        let all: Vec<Diagnostic> = distinct
            .iter()
            .take(MAX_FIX_ALL)
            .map(|d| (*d).clone())
            .collect();
        actions.push(action(
            "Fix all problems here",
            CodeActionKind::QUICKFIX,
            json!({ "uri": uri, "range": range, "version": version, "diagnostics": all }),
            Some(all.clone()),
        ));
    }
}

fn action(
    title: &str,
    kind: CodeActionKind,
    argument: serde_json::Value,
    diagnostics: Option<Vec<Diagnostic>>,
) -> CodeActionOrCommand {
    let title = format!("{TITLE_PREFIX}{title}");
    CodeActionOrCommand::CodeAction(CodeAction {
        title: title.clone(),
        kind: Some(kind),
        diagnostics,
        command: Some(Command {
            title,
            command: REWRITE.to_owned(),
            arguments: Some(vec![argument]),
        }),
        ..CodeAction::default()
    })
}

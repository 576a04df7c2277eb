//! Applying a rewrite: the user's confirmation (`edit.confirm = "ask"`),
//! the versioned `workspace/applyEdit` with re-basing onto the user's
//! typing, and handing the syntax check's tree to the document.
use std::time::{Duration, Instant};

use tower_lsp::lsp_types::request::ApplyWorkspaceEdit;
use tower_lsp::lsp_types::{
    ApplyWorkspaceEditParams, DocumentChanges, MessageActionItem, MessageType, OneOf,
    OptionalVersionedTextDocumentIdentifier, TextDocumentEdit, TextEdit, Url, WorkspaceEdit,
};

use super::super::state::{Snapshot, State};
use crate::edit::{self, Reason, Refusal};
use crate::position;

/// How long the editor gets to report an applied edit's change.
const APPLIED_WAIT: Duration = Duration::from_secs(2);
/// After a refused edit, how long to wait for the user's change that
/// probably made the editor refuse it.
const REFUSED_WAIT: Duration = Duration::from_millis(500);
/// Tries to apply (re-basing in between) before giving up.
const APPLY_TRIES: usize = 3;
/// How long the user gets to answer `edit.confirm = "ask"`.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(300);
const APPLY: &str = "Apply";
const DISCARD: &str = "Discard";

/// `edit.confirm = "ask"`: Apply or Discard, with the change summarised.
pub(super) async fn confirmed(state: &State, summary: &str, diff: &str) -> bool {
    const MAX_DIFF: usize = 1500;
    let shown = crate::model::shorten_for_display(diff, MAX_DIFF);
    let asked = state.client.show_message_request(
        MessageType::INFO,
        format!("Fettle: apply this rewrite? It {summary}.\n{shown}"),
        Some(
            [APPLY, DISCARD]
                .iter()
                .map(|t| MessageActionItem {
                    title: (*t).to_owned(),
                    properties: Default::default(),
                })
                .collect(),
        ),
    );
    match tokio::time::timeout(CONFIRM_TIMEOUT, asked).await {
        Ok(Ok(Some(item))) => item.title == APPLY,
        Ok(Ok(None)) | Err(_) => false,
        Ok(Err(err)) => {
            tracing::warn!(%err, "confirmation request failed; not applying");
            false
        }
    }
}

/// Applies the rewrite's hunks to the open document as one versioned edit,
/// re-basing them onto the user's changes when those left the rewritten
/// lines alone, and refusing when they did not.
pub(super) async fn apply(
    state: &State,
    uri: &Url,
    planned_on: &Snapshot,
    rewrite: &edit::Rewrite,
    editor_time: &mut Duration,
) -> std::result::Result<(), Refusal> {
    let planned_text = planned_on.rope.to_string();
    let encoding = state.encoding();
    for _ in 0..APPLY_TRIES {
        let Some((now, mut revision)) = state
            .documents
            .get(uri)
            .map(|open| (Snapshot::of(&open.document), open.watch_revision()))
        else {
            return Err(Refusal::new(
                Reason::DocumentChanged,
                "the document was closed before the rewrite was ready; nothing was changed",
            ));
        };
        let hunks = if now.revision == planned_on.revision {
            rewrite.hunks.clone()
        } else {
            edit::rebase(&planned_text, &now.rope.to_string(), rewrite.plan.range.clone(), &rewrite.hunks)
                .ok_or_else(|| {
                    Refusal::new(
                        Reason::DocumentChanged,
                        "not applied: the code being rewritten was edited meanwhile, and Fettle never overwrites your typing; ask again",
                    )
                })?
        };
        let edits = hunks
            .iter()
            .map(|h| {
                OneOf::Left(TextEdit {
                    range: position::range_of(&now.rope, h.range.clone(), encoding),
                    new_text: h.text.clone(),
                })
            })
            .collect();
        let workspace_edit = WorkspaceEdit {
            document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                text_document: OptionalVersionedTextDocumentIdentifier {
                    uri: uri.clone(),
                    version: Some(now.version),
                },
                edits,
            }])),
            ..Default::default()
        };
        let label = format!(
            "Fettle: {}",
            crate::model::shorten_for_display(&rewrite.plan.instruction, 60)
        );
        let asked = Instant::now();
        let answer = state
            .client
            .send_request::<ApplyWorkspaceEdit>(ApplyWorkspaceEditParams {
                label: Some(label),
                edit: workspace_edit,
            })
            .await;
        match answer {
            Ok(response) if response.applied => {
                // Wait for its didChange, so the answer follows the change.
                let _ = tokio::time::timeout(APPLIED_WAIT, revision.changed()).await;
                *editor_time += asked.elapsed();
                if hunks == rewrite.hunks {
                    install_checked_tree(state, uri, rewrite);
                }
                return Ok(());
            }
            Ok(response) => {
                // A user's change may be on its way: wait for it, re-base.
                let changed = tokio::time::timeout(REFUSED_WAIT, revision.changed()).await;
                *editor_time += asked.elapsed();
                if !matches!(changed, Ok(Ok(()))) {
                    return Err(Refusal::new(
                        Reason::EditorRefused,
                        format!(
                            "the editor did not apply the rewrite: {}",
                            response
                                .failure_reason
                                .unwrap_or_else(|| "no reason given".to_owned())
                        ),
                    ));
                }
            }
            Err(err) => {
                return Err(Refusal::new(
                    Reason::EditorRefused,
                    format!("workspace/applyEdit failed: {err}"),
                ))
            }
        }
    }
    Err(Refusal::new(
        Reason::DocumentChanged,
        "not applied: the document kept changing while Fettle tried to apply the rewrite",
    ))
}

/// The syntax check already parsed the document as it now is: give the
/// tree to the document (when its text is exactly that), sparing the next
/// request a reparse.
fn install_checked_tree(state: &State, uri: &Url, rewrite: &edit::Rewrite) {
    let Some(checked) = &rewrite.checked else {
        return;
    };
    if let Some(mut open) = state.documents.get_mut(uri) {
        let doc = &mut open.document;
        if doc.needs_reparse() && doc.rope == checked.rope {
            let revision = doc.revision();
            doc.install_tree(revision, checked.tree.clone());
        }
    }
}

//! `fettle.undo`: puts back what a task changed, buffers and disk together,
//! and never discards a change made after the task: a file changed since
//! (on disk or in its open buffer) is skipped and named, unless
//! `{ "force": true }`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{json, Value};
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::{MessageType, Url};

use super::super::state::State;
use super::{arg, host, internal, CANCEL, UNDO};
use crate::agent::host::{BufferEdit, SaveOutcome};
use crate::agent::undo::{relative, undo as agent_undo, Buffers, UndoError, Undone};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UndoArgs {
    task_id: Option<String>,
    /// Restore files changed since the task too (their later changes are lost).
    #[serde(default)]
    force: bool,
}

pub async fn undo(state: &Arc<State>, args: &[Value]) -> Result<Option<Value>> {
    let args: UndoArgs = arg(args, UNDO, super::UNDO_SHAPE, false)?;
    let Some(root) = state.roots.read().first().cloned() else {
        return Err(Error::invalid_params(format!(
            "{UNDO}: no workspace folder is open"
        )));
    };
    if let Some((id, _)) = state.agent.running.lock().as_ref() {
        if args.task_id.as_ref().is_none_or(|wanted| wanted == id) {
            return Err(Error::invalid_params(format!(
                "{UNDO}: task {id} is still running; cancel it first ({CANCEL})"
            )));
        }
    }
    let editor = EditorBuffers(state.clone());
    let undone = agent_undo(&root, args.task_id.as_deref(), args.force, &editor)
        .await
        .map_err(|err| match err {
            UndoError::NotFound(why) => Error::invalid_params(format!("{UNDO}: {why}")),
            other => internal(other),
        })?;
    let Undone {
        task_id,
        report,
        buffers: restored_buffers,
        notes,
    } = undone;
    let rel = |p: &Path| relative(&root, p);
    let uri = |p: &PathBuf| {
        Url::from_file_path(p)
            .map(|u| u.to_string())
            .unwrap_or_default()
    };
    let mut restored: Vec<String> = report
        .restored
        .iter()
        .chain(report.removed.iter())
        .map(uri)
        .collect();
    for path in &restored_buffers {
        let u = uri(path);
        if !restored.contains(&u) {
            restored.push(u);
        }
    }
    let mut done: Vec<String> = report
        .restored
        .iter()
        .map(|p| rel(p))
        .chain(
            report
                .removed
                .iter()
                .map(|p| format!("{} (removed)", rel(p))),
        )
        .collect();
    for path in &restored_buffers {
        if !report.restored.contains(path) && !report.removed.contains(path) {
            done.push(rel(path));
        }
    }
    // An undo repeated (or of a task whose attempts were all rolled back)
    // says so, rather than "restored" again.
    let unchanged: Vec<String> = report
        .unchanged
        .iter()
        .filter(|p| !restored_buffers.contains(p))
        .map(|p| rel(p))
        .collect();
    let mut message = format!(
        "fettle: undo of task {}: {}",
        task_id,
        match (done.is_empty(), unchanged.is_empty()) {
            (true, true) => "nothing restored".to_owned(),
            (true, false) => format!(
                "nothing to restore: {} already as before the task",
                unchanged.join(", ")
            ),
            (false, _) => format!("restored {}", done.join(", ")),
        }
    );
    if !report.skipped.is_empty() {
        let names: Vec<String> = report
            .skipped
            .iter()
            .map(|(p, why)| format!("{} ({why})", rel(p)))
            .collect();
        message.push_str(&format!(
            ".\nLeft alone, to keep your later changes: {}. Run {UNDO} with {{\"force\": true}} to restore them anyway (their later changes are lost)",
            names.join(", ")
        ));
    }
    if !report.kept_dirs.is_empty() {
        let names: Vec<String> = report
            .kept_dirs
            .iter()
            .map(|(p, why)| format!("{}/ ({why})", rel(p)))
            .collect();
        message.push_str(&format!(
            ".\nKept directories the task created: {}",
            names.join(", ")
        ));
    }
    // Files that existed before the task: never deleted by undo.
    let kept: Vec<String> = report
        .left
        .iter()
        .map(|(p, why)| format!("{} ({why})", rel(p)))
        .chain(
            report
                .trashed
                .iter()
                .map(|(p, to)| format!("{} (moved to {})", rel(p), to.display())),
        )
        .collect();
    if !kept.is_empty() {
        message.push_str(&format!(".\nKept, not deleted: {}", kept.join(", ")));
    }
    for note in &notes {
        message.push_str(&format!(".\n{note}"));
    }
    let kind = if report.skipped.is_empty() && notes.is_empty() {
        MessageType::INFO
    } else {
        MessageType::WARNING
    };
    state.client.show_message(kind, message).await;
    Ok(Some(json!({
        "taskId": task_id,
        "restored": restored,
        "unchanged": report.unchanged.iter().map(uri).collect::<Vec<_>>(),
        "skipped": report.skipped.iter().map(|(p, why)| json!({ "uri": uri(p), "reason": why })).collect::<Vec<_>>(),
        "editorNotes": notes,
    })))
}

/// The editor's buffers, for undo.
struct EditorBuffers(Arc<State>);

impl Buffers for EditorBuffers {
    fn text(&self, path: &Path) -> Option<String> {
        self.0.text(&Url::from_file_path(path).ok()?)
    }
    fn replace<'a>(
        &'a self,
        path: &'a Path,
        old: &'a str,
        new: &'a str,
    ) -> BoxFuture<'a, BufferEdit> {
        Box::pin(host::edit_open_buffer(&self.0, path, old, new))
    }
    fn save<'a>(&'a self, paths: &'a [PathBuf]) -> BoxFuture<'a, SaveOutcome> {
        Box::pin(host::save_documents(&self.0, paths))
    }
}

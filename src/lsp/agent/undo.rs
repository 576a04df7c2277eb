//! `fettle.undo`: puts back what a task changed, buffers and disk together,
//! and never discards a change made after the task: a file changed since
//! (on disk or in its open buffer) is skipped and named, unless
//! `{ "force": true }`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::{MessageType, Url};

use super::super::state::State;
use super::{arg, host, internal, CANCEL, UNDO};
use crate::agent::checkpoint::{Checkpoint, CheckpointStore};
use crate::agent::host::BufferEdit;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
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
    let store = CheckpointStore::for_workspace(&root).map_err(internal)?;
    let checkpoint = match &args.task_id {
        Some(id) => store.open(id).map_err(|err| {
            Error::invalid_params(format!("{UNDO}: no checkpoint for task {id}: {err}"))
        })?,
        None => store.latest().map_err(internal)?.ok_or_else(|| {
            Error::invalid_params(format!("{UNDO}: no task to undo in {}", root.display()))
        })?,
    };
    let rel = |p: &Path| {
        p.strip_prefix(&root)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    // Open buffers first, through the editor (so its own undo works too),
    // saved by the editor when it can; then the disk.
    let (restored_buffers, notes) = restore_buffers(state, &checkpoint, args.force, &rel).await;
    let report = checkpoint
        .restore_with(args.force, &|p| buffer_text(state, p))
        .map_err(internal)?;
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
    let mut message = format!(
        "fettle: undo of task {}: {}",
        checkpoint.task_id(),
        if done.is_empty() {
            "nothing restored".to_owned()
        } else {
            format!("restored {}", done.join(", "))
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
        "taskId": checkpoint.task_id(),
        "restored": restored,
        "skipped": report.skipped.iter().map(|(p, why)| json!({ "uri": uri(p), "reason": why })).collect::<Vec<_>>(),
        "editorNotes": notes,
    })))
}

/// Puts every open buffer the task touched back to the file's original
/// (unless it changed since the task), and lets the editor save it. Returns
/// the buffers changed and what the user must know.
async fn restore_buffers(
    state: &Arc<State>,
    checkpoint: &Checkpoint,
    force: bool,
    rel: &(dyn Fn(&Path) -> String + Sync),
) -> (Vec<PathBuf>, Vec<String>) {
    let mut changed = Vec::new();
    let mut notes = Vec::new();
    for path in checkpoint.touched() {
        let Some(current) = buffer_text(state, &path) else {
            continue;
        };
        match checkpoint.judge(&path, Some(&current), force) {
            // Refused: the disk restore refuses it too and reports why.
            Ok(Some(_)) | Err(_) => continue,
            Ok(None) => {}
        }
        let original = match checkpoint.original(&path) {
            Ok(Some(original)) => original,
            _ => continue,
        };
        let Some(bytes) = original.bytes else {
            notes.push(format!(
                "{}: the task created this file; it is deleted, but its buffer is still open: close it without saving (Vim: `:bd!`)",
                rel(&path)
            ));
            continue;
        };
        let Ok(target) = String::from_utf8(bytes) else {
            continue;
        };
        if target != current {
            let outcome = host::edit_open_buffer(state, &path, &current, &target).await;
            tracing::info!(path = %path.display(), ?outcome, "undo: buffer");
            if outcome != BufferEdit::Applied {
                notes.push(format!(
                    "{}: the editor did not take the undo ({outcome:?}); the file on disk is restored, the buffer is not: reload it from disk",
                    rel(&path)
                ));
                continue;
            }
            changed.push(path.clone());
        }
        if std::fs::read(&path).ok().as_deref() != Some(target.as_bytes()) {
            let saved = host::save_documents(state, std::slice::from_ref(&path)).await;
            let on_disk = std::fs::read(&path).ok();
            if !saved.saved.contains(&path) || on_disk.as_deref() != Some(target.as_bytes()) {
                notes.push(format!(
                    "{}: the editor did not save the restored buffer, so Fettle wrote the file itself; the buffer holds the same text but is still marked modified. Save it (Vim: `:w!`) or reload it (Vim: `:e!`); nothing is lost either way",
                    rel(&path)
                ));
            }
        }
    }
    (changed, notes)
}

fn buffer_text(state: &State, path: &Path) -> Option<String> {
    let uri = Url::from_file_path(path).ok()?;
    state.documents.get(&uri).map(|d| d.rope.to_string())
}

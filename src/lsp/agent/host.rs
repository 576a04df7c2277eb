//! The agent's [`Host`] in the editor: events become `fettle/taskEvent` and
//! `$/progress`, open buffers are read from the document store and edited
//! with versioned `workspace/applyEdit`, approvals use `showMessageRequest`,
//! and the editor saves buffers with `fettle/saveDocuments` when it can.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ropey::Rope;
use tokio::sync::{mpsc, watch};
use tower_lsp::lsp_types::notification::Notification;
use tower_lsp::lsp_types::{
    DocumentChanges, MessageActionItem, MessageType, OneOf,
    OptionalVersionedTextDocumentIdentifier, TextDocumentEdit, TextEdit, Url, WorkspaceEdit,
};

use super::super::progress::Progress;
use super::super::state::State;
use crate::agent::host::{BufferEdit, Host, SaveOutcome};
use crate::agent::types::{EventKind, TaskEvent};

/// `fettle/taskEvent`.
pub enum TaskEventNotification {}
impl Notification for TaskEventNotification {
    type Params = TaskEvent;
    const METHOD: &'static str = "fettle/taskEvent";
}

/// `fettle/saveDocuments` (server → client): the editor saves these open
/// buffers itself. Sent only to clients that advertise
/// `capabilities.experimental.fettle.saveDocuments = true`.
pub enum SaveDocuments {}
impl tower_lsp::lsp_types::request::Request for SaveDocuments {
    type Params = SaveDocumentsParams;
    /// Lenient: a client's odd answer is a failed save, not an error.
    type Result = serde_json::Value;
    const METHOD: &'static str = "fettle/saveDocuments";
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct SaveDocumentsParams {
    pub uris: Vec<Url>,
}

/// How long the editor gets to save; a client that does not answer must not
/// hang the task (Fettle then writes the file itself).
const SAVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the user gets to answer the unsaved-changes question; no answer
/// leaves the file alone.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

const RUN: &str = "Run";
const DENY: &str = "Don't run";
const FOLLOW_PLAN: &str = "Follow the plan";
const DECLINE_PLAN: &str = "Decline";
pub const SAVE_AND_CONTINUE: &str = "Save and continue";
pub const LEAVE_ALONE: &str = "Leave this file alone";

pub struct LspHost {
    state: Arc<State>,
    events: mpsc::UnboundedSender<TaskEvent>,
}

impl LspHost {
    /// The host, and the task that forwards its events in order (ends when
    /// the host is dropped, then closes the progress).
    pub fn new(state: Arc<State>, progress: Progress) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<TaskEvent>();
        let client = state.client.clone();
        let forward = tokio::spawn(async move {
            let mut last_status = String::new();
            while let Some(event) = rx.recv().await {
                if matches!(
                    event.kind,
                    EventKind::Status | EventKind::Verify | EventKind::Edit
                ) {
                    last_status = event.text.clone();
                    progress.report(event.text.clone(), None).await;
                }
                client
                    .send_notification::<TaskEventNotification>(event)
                    .await;
            }
            progress.end(last_status).await;
        });
        (Self { state, events: tx }, forward)
    }
}

impl Host for LspHost {
    fn event(&self, mut event: TaskEvent) {
        // The task bounds its events; this holds for any other sender too
        // (no notification past the documented size).
        let mut data = serde_json::json!({ "text": std::mem::take(&mut event.text), "data": std::mem::take(&mut event.data) });
        crate::agent::output::bound_json(&mut data, crate::agent::output::MAX_EVENT_BYTES - 256);
        event.text = data["text"].as_str().unwrap_or_default().to_owned();
        event.data = data["data"].take();
        // The receiver lives until the host is dropped.
        let _ = self.events.send(event);
    }

    fn buffer(&self, path: &Path) -> Option<String> {
        self.state.text(&Url::from_file_path(path).ok()?)
    }

    fn edit_buffer<'a>(
        &'a self,
        path: &'a Path,
        old: &'a str,
        new: &'a str,
    ) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async move { edit_open_buffer(&self.state, path, old, new).await })
    }

    fn settle<'a>(&'a self, paths: &'a [std::path::PathBuf]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let uris: Vec<Url> = if paths.is_empty() {
                self.state
                    .documents
                    .iter()
                    .map(|e| e.key().clone())
                    .collect()
            } else {
                paths
                    .iter()
                    .filter_map(|p| Url::from_file_path(p).ok())
                    .collect()
            };
            for uri in uris {
                wait_for_typing_pause(&self.state, &uri).await;
            }
        })
    }

    fn save_buffers<'a>(&'a self, paths: &'a [PathBuf]) -> BoxFuture<'a, SaveOutcome> {
        Box::pin(async move { save_documents(&self.state, paths).await })
    }

    fn ask_unsaved<'a>(&'a self, _path: &'a Path, relative: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let message = format!(
                "{relative} has unsaved changes. The agent needs to write this file to run the tests; save your changes first?"
            );
            let actions = [SAVE_AND_CONTINUE, LEAVE_ALONE]
                .iter()
                .map(|title| MessageActionItem {
                    title: (*title).to_owned(),
                    properties: Default::default(),
                })
                .collect();
            let asked = self.state.client.show_message_request(
                MessageType::WARNING,
                message,
                Some(actions),
            );
            match tokio::time::timeout(ASK_TIMEOUT, asked).await {
                Ok(Ok(Some(item))) => item.title == SAVE_AND_CONTINUE,
                Ok(Ok(None)) => false,
                Ok(Err(err)) => {
                    tracing::warn!(%err, "unsaved-changes question failed; leaving the file alone");
                    false
                }
                Err(_) => {
                    tracing::warn!(
                        "no answer to the unsaved-changes question; leaving the file alone"
                    );
                    false
                }
            }
        })
    }

    fn approve_plan<'a>(&'a self, plan: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let answer = self
                .state
                .client
                .show_message_request(
                    MessageType::INFO,
                    format!("Fettle's agent plans to:\n{plan}"),
                    Some(vec![
                        MessageActionItem {
                            title: FOLLOW_PLAN.to_owned(),
                            properties: Default::default(),
                        },
                        MessageActionItem {
                            title: DECLINE_PLAN.to_owned(),
                            properties: Default::default(),
                        },
                    ]),
                )
                .await;
            match answer {
                Ok(Some(item)) => item.title == FOLLOW_PLAN,
                Ok(None) => false,
                Err(err) => {
                    tracing::warn!(%err, "plan approval request failed; not following it");
                    false
                }
            }
        })
    }

    fn approve<'a>(&'a self, command: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let answer = self
                .state
                .client
                .show_message_request(
                    MessageType::WARNING,
                    format!("Fettle's agent wants to run a command in the workspace:\n{command}"),
                    Some(vec![
                        MessageActionItem {
                            title: RUN.to_owned(),
                            properties: Default::default(),
                        },
                        MessageActionItem {
                            title: DENY.to_owned(),
                            properties: Default::default(),
                        },
                    ]),
                )
                .await;
            match answer {
                Ok(Some(item)) => item.title == RUN,
                Ok(None) => false,
                Err(err) => {
                    tracing::warn!(%err, "approval request failed; not running the command");
                    false
                }
            }
        })
    }
}

/// Whether the client said it can save buffers for Fettle.
pub fn can_save_documents(state: &State) -> bool {
    state
        .capabilities()
        .and_then(|c| c.experimental.as_ref())
        .and_then(|e| e.pointer("/fettle/saveDocuments"))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// Asks the editor to save the open buffers of `paths` (bounded by
/// [`SAVE_TIMEOUT`]); whatever it does not confirm counts as not saved.
pub async fn save_documents(state: &State, paths: &[PathBuf]) -> SaveOutcome {
    if !can_save_documents(state) {
        return SaveOutcome::all_failed(paths, "the editor cannot save buffers for Fettle");
    }
    let uris: Vec<(PathBuf, Url)> = paths
        .iter()
        .filter_map(|p| Url::from_file_path(p).ok().map(|u| (p.clone(), u)))
        .collect();
    let params = SaveDocumentsParams {
        uris: uris.iter().map(|(_, u)| u.clone()).collect(),
    };
    let answer = tokio::time::timeout(
        SAVE_TIMEOUT,
        state.client.send_request::<SaveDocuments>(params),
    )
    .await;
    let value = match answer {
        Ok(Ok(value)) => value,
        Ok(Err(err)) => {
            return SaveOutcome::all_failed(paths, &format!("fettle/saveDocuments failed: {err}"))
        }
        Err(_) => {
            tracing::warn!("the editor did not answer fettle/saveDocuments in time");
            return SaveOutcome::all_failed(paths, "the editor did not answer in time");
        }
    };
    let listed = |key: &str| -> Vec<Url> {
        value
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| {
                        item.as_str()
                            .or_else(|| item.get("uri").and_then(serde_json::Value::as_str))
                            .and_then(|u| Url::parse(u).ok())
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let saved_uris = listed("saved");
    let mut outcome = SaveOutcome::default();
    for (path, uri) in uris {
        if saved_uris.iter().any(|u| same_file(u, &uri)) {
            outcome.saved.push(path);
        } else {
            let why = value
                .get("failed")
                .and_then(serde_json::Value::as_array)
                .and_then(|items| {
                    items.iter().find(|item| {
                        item.get("uri")
                            .and_then(serde_json::Value::as_str)
                            .and_then(|u| Url::parse(u).ok())
                            .is_some_and(|u| same_file(&u, &uri))
                    })
                })
                .and_then(|item| item.get("message").and_then(serde_json::Value::as_str))
                .unwrap_or("the editor did not save it")
                .to_owned();
            outcome.failed.push((path, why));
        }
    }
    outcome
}

/// Editors spell file URIs differently (percent-encoding): compare paths.
fn same_file(a: &Url, b: &Url) -> bool {
    a == b || matches!((a.to_file_path(), b.to_file_path()), (Ok(x), Ok(y)) if x == y)
}

/// Replaces `old` with `new` in the open buffer through the editor, as one
/// minimal versioned edit. `Changed` when the buffer is no longer `old`
/// (the user typed): the caller plans again on the new text.
pub async fn edit_open_buffer(state: &Arc<State>, path: &Path, old: &str, new: &str) -> BufferEdit {
    let Ok(uri) = Url::from_file_path(path) else {
        return BufferEdit::NotOpen;
    };
    wait_for_typing_pause(state, &uri).await;
    let encoding = state.encoding();
    let (version, edit, mut revision) = {
        let Some(open) = state.documents.get(&uri) else {
            return BufferEdit::NotOpen;
        };
        let doc = &open.document;
        if doc.rope != old {
            return BufferEdit::Changed;
        }
        let (start, old_end, new_end) = minimal_change(old, new);
        let range = doc.range_of(start..old_end, encoding);
        (
            doc.version,
            TextEdit {
                range,
                new_text: new[start..new_end].to_owned(),
            },
            // Subscribed before the edit is sent: its didChange cannot be missed.
            open.watch_revision(),
        )
    };
    let workspace_edit = WorkspaceEdit {
        document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
            text_document: OptionalVersionedTextDocumentIdentifier {
                uri: uri.clone(),
                version: Some(version),
            },
            edits: vec![OneOf::Left(edit)],
        }])),
        ..Default::default()
    };
    match state.client.apply_edit(workspace_edit).await {
        Ok(response) if response.applied => {
            // The editor sends the matching didChange; wait (briefly) until it
            // is in. Some editors answer `applied` yet drop an edit whose
            // version is stale (Neovim does), so "applied" counts only once
            // the buffer really holds `new`.
            let look = |rope: Option<&Rope>| rope.map(|r| (*r == new, *r == old));
            // Still `old`: its didChange is not in yet.
            let landed = watch_buffer(state, &uri, &mut revision, APPLIED_WAIT, look, |now| {
                *now == Some((false, true))
            })
            .await;
            match landed {
                Some((true, _)) => BufferEdit::Applied,
                None => BufferEdit::NotOpen,
                Some((false, false)) => {
                    // The editor applied the edit to a buffer that had
                    // changed meanwhile: it may sit in the wrong place.
                    // Planning again would build on it; stop and say so.
                    tracing::warn!(%uri, now = ?state.text(&uri), ?new, "buffer differs from the edit's result");
                    state
                        .client
                        .show_message(
                            MessageType::WARNING,
                            format!("fettle: the editor applied an agent edit to {uri} while it was changing; check that buffer (undo with fettle.undo or the editor's undo)"),
                        )
                        .await;
                    BufferEdit::Failed(
                        "the editor applied the edit while the buffer was changing; it may be misplaced, so this file was not edited further".to_owned(),
                    )
                }
                Some((false, true)) => BufferEdit::Failed(
                    "the editor reported the edit as applied, but the buffer did not change"
                        .to_owned(),
                ),
            }
        }
        Ok(response) => {
            // A refusal usually means the user typed: their didChange may
            // still be on its way, so give it a moment before deciding.
            let look = |rope: Option<&Rope>| rope.is_some_and(|r| *r == old);
            let still_old =
                watch_buffer(state, &uri, &mut revision, REFUSED_WAIT, look, |old| *old).await;
            if still_old {
                BufferEdit::Failed(
                    response
                        .failure_reason
                        .unwrap_or_else(|| "the editor did not apply the edit".to_owned()),
                )
            } else {
                BufferEdit::Changed
            }
        }
        Err(err) => BufferEdit::Failed(format!("workspace/applyEdit failed: {err}")),
    }
}

/// How long a buffer must be still before the agent edits it. Editors
/// debounce `didChange` (Neovim: 150 ms), so a buffer that changed very
/// recently may have changes still on their way, and an edit planned on it
/// could land at a stale position even though its version matched.
const TYPING_PAUSE: Duration = Duration::from_millis(400);
/// The longest the agent waits for that pause before trying anyway (the
/// versioned edit and the after-check still guard the buffer).
const MAX_PAUSE_WAIT: Duration = Duration::from_secs(5);

/// How long the agent waits for the didChange of an edit the editor applied.
const APPLIED_WAIT: Duration = Duration::from_secs(2);
/// How long it waits, after the editor refused an edit, for the user's
/// change that probably made it refuse.
const REFUSED_WAIT: Duration = Duration::from_millis(500);

/// Looks at the open buffer (`None`: closed) now and after each of its
/// changes, for as long as `pending` says the look is not final and `wait`
/// has not passed, and returns the last look. After the wait ends (or the
/// document closes) it looks once more: a change may have landed just then.
async fn watch_buffer<T>(
    state: &State,
    uri: &Url,
    revision: &mut watch::Receiver<u64>,
    wait: Duration,
    look: impl Fn(Option<&Rope>) -> T,
    pending: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + wait;
    let mut last_look = false;
    loop {
        // Marked seen before looking, so a change after the look wakes us.
        revision.borrow_and_update();
        let now = look(state.documents.get(uri).as_ref().map(|d| &d.document.rope));
        if !pending(&now) || last_look {
            return now;
        }
        let changed = tokio::time::timeout_at(deadline, revision.changed()).await;
        last_look = !matches!(changed, Ok(Ok(())));
    }
}

async fn wait_for_typing_pause(state: &State, uri: &Url) {
    let started = std::time::Instant::now();
    loop {
        let since = state.last_change(uri).map(|t| t.elapsed());
        match since {
            Some(since) if since < TYPING_PAUSE && started.elapsed() < MAX_PAUSE_WAIT => {
                tokio::time::sleep(TYPING_PAUSE - since).await;
            }
            _ => return,
        }
    }
}

/// The smallest single replacement turning `old` into `new`: `old[start..old_end]`
/// becomes `new[start..new_end]` (char boundaries in both).
pub fn minimal_change(old: &str, new: &str) -> (usize, usize, usize) {
    let prefix = old
        .char_indices()
        .zip(new.chars())
        .find(|((_, a), b)| a != b)
        .map(|((i, _), _)| i)
        .unwrap_or_else(|| old.len().min(new.len()));
    // Back to a char boundary of `new` too (equal prefixes share boundaries).
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = old[prefix..]
        .chars()
        .rev()
        .zip(new[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .scan(0usize, |acc, n| {
            *acc += n;
            Some(*acc)
        })
        .take_while(|n| *n <= max_suffix)
        .last()
        .unwrap_or(0);
    (prefix, old.len() - suffix, new.len() - suffix)
}

#[cfg(test)]
mod tests {
    use super::minimal_change;

    fn apply(old: &str, new: &str) -> String {
        let (s, oe, ne) = minimal_change(old, new);
        format!("{}{}{}", &old[..s], &new[s..ne], &old[oe..])
    }

    #[test]
    fn minimal_change_round_trips() {
        for (old, new) in [
            ("", ""),
            ("abc", "abc"),
            ("abc", "abXc"),
            ("aaa", "aa"),
            ("aa", "aaa"),
            ("héllo wörld", "héllo wörld!"),
            ("x = 1\ny = 2\n", "x = 1\ny = 3\n"),
            ("日本語", "日本"),
            ("ab", "日b"),
        ] {
            assert_eq!(apply(old, new), new, "{old:?} -> {new:?}");
        }
        assert_eq!(
            minimal_change("x = 1\ny = 2\n", "x = 1\ny = 3\n"),
            (10, 11, 11)
        );
    }
}

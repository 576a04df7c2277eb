//! Warming the embedded model ahead of the user: once keystrokes,
//! completion requests and cursor reports (`fettle/cursor`) have paused for
//! `completion.warm_after_ms`, the prompt at the last place is evaluated
//! (see [`crate::completion::Engine::warm`]), so that the first request
//! there starts from a warm cache with its whole context. For remote
//! models, the prompt at an edit's end is built ahead instead, after the
//! edit's analysis ([`prepare`]).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use tokio::task::AbortHandle;
use tower_lsp::lsp_types::{Position, TextDocumentIdentifier, Url};

use crate::completion::{Buffer, Request};
use crate::lsp::state::State;
use crate::position;

/// The one pending warm-up: the user is in one place at a time, so each
/// new report replaces the last.
#[derive(Default)]
pub struct WarmTimer {
    pending: Mutex<Option<AbortHandle>>,
    /// Counts the user's activity (edits, requests, cursor reports).
    activity: AtomicU64,
}

impl Drop for WarmTimer {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.lock().take() {
            pending.abort();
        }
    }
}

/// `fettle/cursor`: where the cursor is, sent by editor plugins when it
/// moves or a buffer gets focus (debounced on their side).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CursorParams {
    pub text_document: TextDocumentIdentifier,
    pub position: Position,
}

/// `fettle/cursor` (a notification): a warm-up there after the pause.
pub fn cursor_moved(state: &Arc<State>, params: CursorParams) {
    let uri = params.text_document.uri;
    let Some(cursor) = state
        .documents
        .get(&uri)
        .map(|open| position::offset_of(&open.document.rope, params.position, state.encoding()))
    else {
        tracing::debug!(%uri, "fettle/cursor for a document that is not open; ignored");
        return;
    };
    schedule(state, uri, cursor);
}

/// Activity at byte `cursor` of `uri`: warm-ups in progress stop, and one
/// at `cursor` is due after the pause (if warming is on).
pub fn schedule(state: &Arc<State>, uri: Url, cursor: usize) {
    active(state);
    preconnect(state);
    start_timer(state, uri, cursor);
}

/// A completion will probably be asked for soon (a file was opened, the
/// user typed): the completion model's connection is made now if it may
/// have gone cold (see [`crate::model::Models::preconnect`]).
pub fn preconnect(state: &State) {
    let config = state.config();
    if config.completion.enabled {
        state.models().preconnect(&config.completion.model);
    }
}

/// A completion request begins: warm-ups stop (the request must not wait
/// behind one) and the pending one is put off. Returns the activity count,
/// for [`schedule_if_quiet`] once the request is answered.
pub fn active(state: &Arc<State>) -> u64 {
    // A warm-up running now stops at its next chunk.
    state.models().cancel_warm(&state.config().completion.model);
    if let Some(earlier) = state.warm.pending.lock().take() {
        earlier.abort();
    }
    state.warm.activity.fetch_add(1, Ordering::SeqCst) + 1
}

/// After a request answered at `cursor`: a warm-up there after the pause,
/// unless the user did something since `seen` (a cursor report or an
/// edit meanwhile is newer, and has scheduled its own).
pub fn schedule_if_quiet(state: &Arc<State>, uri: Url, cursor: usize, seen: u64) {
    if state.warm.activity.load(Ordering::SeqCst) == seen {
        start_timer(state, uri, cursor);
    }
}

fn start_timer(state: &Arc<State>, uri: Url, cursor: usize) {
    let config = state.config();
    let after = config.completion.warm_after_ms;
    let mut pending = state.warm.pending.lock();
    if let Some(earlier) = pending.take() {
        earlier.abort();
    }
    // Only the embedded model has a cache to warm: for the others, no timer
    // task per keystroke (its spawn and abort woke another thread on the
    // way to each answer).
    if after == 0 || !warmable(state, &config.completion.model) {
        return;
    }
    // Weak: a pending warm-up does not keep a shut-down server alive.
    let weak = Arc::downgrade(state);
    let task = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(after)).await;
        if let Some(state) = weak.upgrade() {
            warm(&state, &uri, cursor).await;
        }
    });
    *pending = Some(task.abort_handle());
}

/// Whether completion's model is the embedded one.
fn warmable(state: &State, model: &str) -> bool {
    state
        .models()
        .get(model)
        .is_ok_and(|m| m.config().provider == crate::config::Provider::Local)
}

async fn warm(state: &Arc<State>, uri: &Url, cursor: usize) {
    let config = state.config();
    if !config.completion.enabled {
        return;
    }
    let Some(request) = request_at(state, uri, cursor) else {
        return;
    };
    let env = super::env(state, &config);
    state.completion.warm(request, env).await;
}

/// After the analysis of an edit ending at byte `cursor`: the prompt a
/// request there would send, built ahead (see
/// [`crate::completion::Engine::prepare`]) — for remote models; the
/// embedded one has its warm-up, which chooses the layout itself.
pub async fn prepare(state: &Arc<State>, uri: &Url, cursor: usize) {
    let config = state.config();
    if !config.completion.enabled || warmable(state, &config.completion.model) {
        return;
    }
    let Some(request) = request_at(state, uri, cursor) else {
        return;
    };
    let env = super::env(state, &config);
    state.completion.prepare(request, env).await;
}

/// A request at byte `cursor` of the document as it is now, as if the
/// editor had asked there (automatic, nothing selected).
fn request_at(state: &Arc<State>, uri: &Url, cursor: usize) -> Option<Request> {
    let (snapshot, revision, completion) = state.watched_snapshot(uri)?;
    let rope = snapshot.rope;
    // The text may have changed since the report: stay on a char boundary.
    let cursor = rope.char_to_byte(rope.byte_to_char(cursor.min(rope.len_bytes())));
    Some(Request {
        document: Buffer {
            uri: snapshot.uri,
            language: snapshot.language,
            rope,
            revision: snapshot.revision,
            state: completion,
        },
        tree: snapshot.tree.filter(|_| !snapshot.needs_reparse),
        revision,
        text_revision: snapshot.revision,
        cursor,
        selected: None,
        invoked: false,
    })
}

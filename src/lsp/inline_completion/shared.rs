//! What completion requests share: the cache, the statistics, who is the
//! newest request per document, and what the user touched recently.
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tower_lsp::lsp_types::Url;

use crate::completion::cache::CompletionCache;
use crate::completion::stats::Stats;
use crate::lsp::state::State;

/// What completion requests share.
#[derive(Default)]
pub struct CompletionState {
    pub(super) cache: Mutex<CompletionCache>,
    pub(super) stats: Mutex<Stats>,
    /// Per document: the newest request's number, and a signal that wakes
    /// older ones so they answer at once.
    pub(super) latest: DashMap<Url, (u64, Arc<Notify>)>,
    pub(super) next_request: AtomicU64,
    pub(super) next_item: AtomicU64,
    /// Per open document: where it was edited recently and when it was
    /// last touched, for the prompt's "recently edited" snippets.
    pub(super) recent: DashMap<Url, Recent>,
    pub(super) touches: AtomicU64,
    /// The latest syntax errors per document, as (line, message).
    pub(super) diagnostics: DashMap<Url, Vec<(usize, String)>>,
    /// The prompt layout last chosen per document, kept while typing on
    /// the same line.
    pub(super) windows: DashMap<Url, Window>,
    /// The model request running for each document (automatic requests).
    pub(super) inflight: DashMap<Url, InFlight>,
    /// Redacts every prompt (workspace dotenv values, open secret buffers,
    /// Fettle's keys, secret shapes).
    pub(super) redactor: crate::completion::secrets::RedactorCache,
}

/// A model request that outlives the LSP request that started it, so that
/// the next keystroke can use its answer instead of asking again.
pub(super) struct InFlight {
    pub(super) key: crate::completion::cache::Key,
    /// Turns true once its answer (if any) is in the cache.
    pub(super) done: tokio::sync::watch::Receiver<bool>,
    pub(super) abort: tokio::task::AbortHandle,
}

#[derive(Clone)]
pub(super) struct Window {
    /// The cursor's line.
    pub(super) line: usize,
    /// Byte offset where the prefix window started.
    pub(super) prefix_start: usize,
    pub(super) snippets: Vec<crate::model::Snippet>,
}

#[derive(Default)]
pub(super) struct Recent {
    /// Byte ranges, most recent first (approximate: later edits shift them).
    pub(super) edits: VecDeque<std::ops::Range<usize>>,
    pub(super) touched: u64,
}

/// Recently edited ranges kept per document.
const RECENT_EDITS: usize = 8;
/// Other open documents offered to the prompt builder, most recent first.
const OPEN_FILES: usize = 8;
/// Larger open documents are not scanned for similar code.
const OPEN_FILE_MAX_BYTES: usize = 512 << 10;

impl CompletionState {
    /// Registers a new request for `uri`, superseding older ones.
    pub(super) fn begin(&self, uri: &Url) -> Ticket {
        let number = self.next_request.fetch_add(1, Ordering::Relaxed) + 1;
        let notify = Arc::new(Notify::new());
        if let Some(old) = self.latest.insert(uri.clone(), (number, notify.clone())) {
            old.1.notify_waiters();
        }
        Ticket {
            uri: uri.clone(),
            number,
            notify,
        }
    }

    pub(super) fn is_current(&self, ticket: &Ticket) -> bool {
        self.latest
            .get(&ticket.uri)
            .is_some_and(|entry| entry.0 == ticket.number)
    }

    pub fn forget(&self, uri: &Url) {
        self.cache.lock().forget(uri.as_str());
        self.latest.remove(uri);
        self.recent.remove(uri);
        self.diagnostics.remove(uri);
        self.windows.remove(uri);
        if let Some((_, inflight)) = self.inflight.remove(uri) {
            inflight.abort.abort();
        }
    }

    /// Notes that `uri` was opened or edited at byte range `edit`.
    pub fn touched(&self, uri: &Url, edit: Option<std::ops::Range<usize>>) {
        let touch = self.touches.fetch_add(1, Ordering::Relaxed) + 1;
        let mut recent = self.recent.entry(uri.clone()).or_default();
        recent.touched = touch;
        if let Some(edit) = edit {
            // Typing extends the last range instead of adding one per key.
            match recent.edits.front_mut() {
                Some(last) if edit.start <= last.end + 1 && edit.end + 1 >= last.start => {
                    last.start = last.start.min(edit.start);
                    last.end = last.end.max(edit.end);
                }
                _ => {
                    recent.edits.push_front(edit);
                    recent.edits.truncate(RECENT_EDITS);
                }
            }
        }
    }

    /// Records the latest syntax errors of `uri`.
    pub fn set_diagnostics(&self, uri: &Url, errors: Vec<(usize, String)>) {
        self.diagnostics.insert(uri.clone(), errors);
    }
}

pub(super) struct Ticket {
    pub(super) uri: Url,
    pub(super) number: u64,
    pub(super) notify: Arc<Notify>,
}

pub(super) struct Other {
    pub(super) path: PathBuf,
    pub(super) language: Option<crate::syntax::Language>,
    pub(super) text: String,
    pub(super) edits: Vec<std::ops::Range<usize>>,
    pub(super) recency: usize,
}

/// The most recently touched other open documents (file URIs only).
pub(super) fn open_files(state: &State, current: &Url) -> Vec<Other> {
    let mut touched: Vec<(u64, Url, Vec<std::ops::Range<usize>>)> = state
        .completion
        .recent
        .iter()
        .filter(|e| e.key() != current)
        .map(|e| {
            (
                e.touched,
                e.key().clone(),
                e.edits.iter().cloned().collect(),
            )
        })
        .collect();
    touched.sort_by_key(|t| std::cmp::Reverse(t.0));
    touched
        .into_iter()
        .filter_map(|(_, uri, edits)| {
            let path = uri.to_file_path().ok()?;
            // Secret files never feed completion context.
            if crate::secrets::is_secret_path(&path) {
                return None;
            }
            let snapshot = state.snapshot(&uri)?;
            (snapshot.rope.len_bytes() <= OPEN_FILE_MAX_BYTES).then_some((path, snapshot, edits))
        })
        .take(OPEN_FILES)
        .enumerate()
        .map(|(recency, (path, snapshot, edits))| Other {
            path,
            language: snapshot.language,
            text: snapshot.rope.to_string(),
            edits,
            recency,
        })
        .collect()
}

/// The dotenv values typed into open secret buffers (`.env` and the like),
/// for the completion redactor: they may not be on disk yet.
pub(super) fn secret_buffer_values(state: &State) -> Vec<String> {
    let mut values = Vec::new();
    for entry in state.documents.iter() {
        let is_secret = entry
            .key()
            .to_file_path()
            .is_ok_and(|p| crate::secrets::is_secret_path(&p));
        if is_secret && entry.value().rope.len_bytes() <= OPEN_FILE_MAX_BYTES {
            values.extend(crate::secrets::env_secret_values(
                &entry.value().rope.to_string(),
            ));
        }
    }
    values
}

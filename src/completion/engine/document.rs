//! Completion's part of one open document: who the newest request is, where
//! the user edited recently, the latest syntax errors, the prompt layout
//! kept while typing along a line, and the model request still running.
//! The document store holds one per open document; closing the document
//! drops it (and [`DocumentState::close`] stops what is running).
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::prompt::Prepared;
use crate::completion::cache::Key;
use crate::model::Snippet;

/// Recently edited ranges kept per document.
const RECENT_EDITS: usize = 8;

#[derive(Default)]
pub struct DocumentState {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The newest request's token; a newer request cancels it.
    latest: CancellationToken,
    /// Byte ranges edited, most recent first (approximate: later edits shift them).
    edits: VecDeque<Range<usize>>,
    /// When the document was last touched, on the engine's clock.
    touched: u64,
    /// The latest syntax errors, as (line, message).
    diagnostics: Arc<Vec<(usize, String)>>,
    /// The prompt layout last chosen, kept while typing near its line.
    window: Option<Window>,
    /// Counts changes of `window`: a prompt built ahead saw one of them.
    window_generation: u64,
    /// The prompt built ahead, after the last edit's analysis, for the
    /// next request at the edit's end.
    prepared: Option<Prepared>,
    /// The model request running for an automatic request.
    inflight: Option<InFlight>,
    /// The whole text at a revision, once materialised (by a request, or
    /// by the analysis after an edit): a request at that revision reuses it
    /// instead of copying a big document again.
    text: Option<(u64, Arc<str>)>,
}

/// Where the prompt's prefix window started, and the snippets it offered.
#[derive(Clone)]
pub(super) struct Window {
    /// The cursor's line.
    pub(super) line: usize,
    /// Byte offset where the prefix window started.
    pub(super) prefix_start: usize,
    pub(super) snippets: Vec<Snippet>,
}

/// A model request that outlives the LSP request that started it, so that
/// the next keystroke can use its answer instead of asking again.
#[derive(Clone)]
pub(super) struct InFlight {
    pub(super) key: Key,
    /// Turns true once its answer (if any) is in the cache.
    pub(super) done: tokio::sync::watch::Receiver<bool>,
    /// Stops it (it may be running in the request that started it, or as a
    /// task of its own).
    pub(super) abort: CancellationToken,
}

impl DocumentState {
    /// Registers a new request, cancelling the one before it. The returned
    /// token is cancelled by the next request or when the document closes.
    pub(super) fn begin(&self) -> CancellationToken {
        let token = CancellationToken::new();
        let old = std::mem::replace(&mut self.inner.lock().latest, token.clone());
        old.cancel();
        token
    }

    /// The document closed: the newest request answers at once, and the
    /// model request it may have left running stops.
    pub fn close(&self) {
        let mut inner = self.inner.lock();
        inner.latest.cancel();
        if let Some(inflight) = inner.inflight.take() {
            inflight.abort.cancel();
        }
    }

    /// Notes a touch at `clock` (the engine's), and an edit at byte range `edit`.
    pub(super) fn touch(&self, clock: u64, edit: Option<Range<usize>>) {
        let mut inner = self.inner.lock();
        inner.touched = clock;
        let Some(edit) = edit else { return };
        // Typing extends the last range instead of adding one per key.
        match inner.edits.front_mut() {
            Some(last) if edit.start <= last.end + 1 && edit.end + 1 >= last.start => {
                last.start = last.start.min(edit.start);
                last.end = last.end.max(edit.end);
            }
            _ => {
                inner.edits.push_front(edit);
                inner.edits.truncate(RECENT_EDITS);
            }
        }
    }

    /// When the document was last touched, and where it was edited.
    pub(super) fn recent(&self) -> (u64, Vec<Range<usize>>) {
        let inner = self.inner.lock();
        (inner.touched, inner.edits.iter().cloned().collect())
    }

    /// Records the latest syntax errors, as (line, message).
    pub fn set_diagnostics(&self, errors: Vec<(usize, String)>) {
        self.inner.lock().diagnostics = Arc::new(errors);
    }

    pub(super) fn diagnostics(&self) -> Arc<Vec<(usize, String)>> {
        self.inner.lock().diagnostics.clone()
    }

    pub(super) fn window(&self) -> Option<Window> {
        self.inner.lock().window.clone()
    }

    pub(super) fn set_window(&self, window: Window) {
        let mut inner = self.inner.lock();
        inner.window = Some(window);
        inner.window_generation += 1;
    }

    /// Which layout `window` returns: any later [`Self::set_window`]
    /// changes it.
    pub(super) fn window_generation(&self) -> u64 {
        self.inner.lock().window_generation
    }

    /// Keeps a prompt built ahead (replacing any earlier one).
    pub(super) fn set_prepared(&self, prepared: Prepared) {
        self.inner.lock().prepared = Some(prepared);
    }

    /// The prompt built ahead, taken: it serves one request at most.
    pub(super) fn take_prepared(&self) -> Option<Prepared> {
        self.inner.lock().prepared.take()
    }

    pub(super) fn inflight(&self) -> Option<InFlight> {
        self.inner.lock().inflight.clone()
    }

    pub(super) fn set_inflight(&self, inflight: InFlight) {
        self.inner.lock().inflight = Some(inflight);
    }

    /// Keeps `text`, the whole document at `revision` (only the newest).
    pub fn remember_text(&self, revision: u64, text: Arc<str>) {
        let mut inner = self.inner.lock();
        if inner
            .text
            .as_ref()
            .is_none_or(|(kept, _)| *kept <= revision)
        {
            inner.text = Some((revision, text));
        }
    }

    /// The whole document at `revision`, if it was materialised.
    pub(super) fn text_at(&self, revision: u64) -> Option<Arc<str>> {
        let inner = self.inner.lock();
        let (kept, text) = inner.text.as_ref()?;
        (*kept == revision).then(|| Arc::clone(text))
    }
}

//! One open document and everything the server keeps about it, in one
//! record: opening inserts it, closing removes it, and dropping it stops
//! what was running for it (its pending analysis, its completion requests).
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::completion::DocumentState;
use crate::document::Document;

pub struct OpenDocument {
    /// The editor's buffer: text, tree, version, revision.
    pub document: Document,
    /// When it last changed (the agent waits for a pause in typing before
    /// editing a buffer: some clients debounce `didChange`).
    pub last_change: Instant,
    /// Completion's part: the newest request, recent edits, syntax errors,
    /// the prompt layout and the model request still running.
    pub completion: Arc<DocumentState>,
    /// The pending analysis (diagnostics and index entry after a change),
    /// cancelled by the next change.
    analysis: CancellationToken,
    /// The document's revision, for whoever waits for a change to land.
    revision: watch::Sender<u64>,
    /// The syntax diagnostics last published (sent again with the
    /// checker's, which `lsp::checks` keeps per file).
    pub syntax_diagnostics: Vec<tower_lsp::lsp_types::Diagnostic>,
    /// Held while the document is parsed, so a request arriving during the
    /// open's parse waits for its tree instead of parsing the same text
    /// beside it (two parses of a big file at once doubled peak memory).
    pub parse_lock: Arc<tokio::sync::Mutex<()>>,
}

impl OpenDocument {
    pub fn new(document: Document) -> Self {
        let (revision, _) = watch::channel(document.revision());
        Self {
            document,
            last_change: Instant::now(),
            completion: Arc::default(),
            analysis: CancellationToken::new(),
            revision,
            syntax_diagnostics: Vec::new(),
            parse_lock: Arc::default(),
        }
    }

    /// After the document changed: records when, and tells the waiters.
    pub fn changed(&mut self) {
        self.last_change = Instant::now();
        self.revision.send_replace(self.document.revision());
    }

    /// Cancels the pending analysis and returns the token of the next one.
    pub fn restart_analysis(&mut self) -> CancellationToken {
        let next = CancellationToken::new();
        std::mem::replace(&mut self.analysis, next.clone()).cancel();
        next
    }

    /// A receiver that sees every later change of the revision (and an
    /// error once the document is closed).
    pub fn watch_revision(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }
}

impl Drop for OpenDocument {
    fn drop(&mut self) {
        self.analysis.cancel();
        self.completion.close();
    }
}

//! Text synchronisation. The notification handlers here are synchronous on
//! purpose: tower-lsp runs handlers concurrently, and only mutating the
//! document store before the first `.await` keeps edits in arrival order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tower_lsp::lsp_types::{
    Diagnostic, DiagnosticSeverity, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, Url,
};

use super::index_queue::IndexUpdate;
use super::open_document::OpenDocument;
use super::state::{Snapshot, State};
use super::workspace::is_in_workspace;
use crate::document::Document;
use crate::position::{self, PositionEncoding};
use crate::syntax;

/// Most syntax errors worth showing for one file; past this they are noise.
const MAX_SYNTAX_DIAGNOSTICS: usize = 100;

/// How long after the syntax diagnostics an edited buffer's index entry is
/// refreshed (and a worn tree parsed afresh), if no edit came meanwhile.
/// Re-tagging a big file costs tens of milliseconds of CPU (about 57 ms for
/// 10,000 lines of Rust here, estimated from a `perf` profile of the
/// completion bench), and what it changes (other files' completion
/// context, workspace symbols) can wait for a real pause; at the
/// diagnostics' pace it ran after every burst of typing, just when the
/// next completion was asked for.
const PAUSED_AFTER: Duration = Duration::from_millis(1000);

pub fn did_open(state: &Arc<State>, params: DidOpenTextDocumentParams) {
    let item = params.text_document;
    let uri = item.uri.clone();
    let document = Document::new_unparsed(item.uri, item.language_id, item.version, &item.text);
    tracing::debug!(%uri, language = ?document.language, version = document.version, "opened");
    log_parse_limit(&document, 0);
    let mut open = OpenDocument::new(document);
    state.completion.touched(&open.completion, None);
    let analysis = open.restart_analysis();
    // Reopening an open document replaces (and drops) the old record.
    state.documents.insert(uri.clone(), open);
    super::inline_completion::warm::preconnect(state);
    schedule_analysis(state, uri, analysis, Trigger::Opened);
}

pub fn did_change(state: &Arc<State>, params: DidChangeTextDocumentParams) {
    let uri = params.text_document.uri;
    let version = params.text_document.version;
    let encoding = state.encoding();
    let mut warm_at = None;
    let analysis = {
        let Some(mut open) = state.documents.get_mut(&uri) else {
            tracing::warn!(%uri, version, "didChange for a document that is not open; ignored");
            return;
        };
        let len_before = open.document.len_bytes();
        // Text and tree edits only (microseconds); the reparse runs later, once per burst.
        if let Err(err) =
            open.document
                .apply_changes_deferred(version, &params.content_changes, encoding)
        {
            tracing::warn!(%uri, %err, "didChange ignored");
            return;
        }
        log_parse_limit(&open.document, len_before);
        // Where the last change landed (in the new text), for completion's
        // "recently edited" context.
        if let Some(change) = params.content_changes.last() {
            let start = change.range.map_or(0, |r| {
                position::offset_of(&open.document.rope, r.start, encoding)
            });
            let edit = start..start + change.text.len();
            state
                .completion
                .touched(&open.completion, Some(edit.clone()));
            warm_at = Some(edit.end);
        }
        open.changed();
        open.restart_analysis()
    };
    // The user typed there: warm it once they pause.
    if let Some(cursor) = warm_at {
        super::inline_completion::warm::schedule(state, uri.clone(), cursor);
    }
    schedule_analysis(state, uri, analysis, Trigger::Edited(warm_at));
}

/// Says once, when a document with a grammar goes over the parse limit
/// (opened so, or grown by edits: `len_before` is its size before), what
/// it loses; and when it comes back under.
fn log_parse_limit(document: &Document, len_before: usize) {
    if document.language.is_none() {
        return;
    }
    let (was, is) = (
        syntax::too_big_to_parse(len_before),
        syntax::too_big_to_parse(document.len_bytes()),
    );
    if is && !was {
        tracing::warn!(
            uri = %document.uri,
            "{} bytes, over the parse limit of {} bytes (FETTLE_MAX_PARSE_BYTES): not parsed — \
             no syntax diagnostics, a line-based outline, completion without syntax context",
            document.len_bytes(),
            syntax::max_parse_bytes()
        );
    } else if was && !is {
        tracing::info!(uri = %document.uri, "back under the parse limit: parsed again");
    }
}

pub fn did_save(state: &Arc<State>, params: DidSaveTextDocumentParams) {
    let uri = params.text_document.uri;
    super::reload::file_saved(state, &uri);
    super::checks::saved(state, &uri);
    // An open buffer is already analysed and indexed from its text, which
    // is what was just saved; only a file saved without being open is news.
    if state.documents.contains_key(&uri) {
        return;
    }
    if let Ok(path) = uri.to_file_path() {
        state.index_updates.push(IndexUpdate::File(path));
    }
}

pub async fn did_close(state: &Arc<State>, params: DidCloseTextDocumentParams) {
    let uri = params.text_document.uri;
    // Dropping the record stops its pending analysis and completion requests.
    if state.documents.remove(&uri).is_none() {
        tracing::warn!(%uri, "didClose for a document that is not open; ignored");
        return;
    }
    state.completion.closed(&uri);
    if let Ok(path) = uri.to_file_path() {
        if is_in_workspace(state, &path) {
            // The unsaved buffer is gone: the index goes back to the file on disk.
            state.index_updates.push(IndexUpdate::File(path));
        }
    }
    super::checks::closed(state, uri).await;
}

/// What an analysis follows.
#[derive(Clone, Copy)]
enum Trigger {
    /// The document was opened: analysed at once (no burst of typing to
    /// wait out), so an edit right after opening finds a tree to reparse
    /// incrementally (a 10,000-line file's first parse takes ~50 ms; after
    /// the debounce, it made the first completion's prompt late). Nobody
    /// waits for this parse: it runs on the background thread.
    Opened,
    /// An edit, ending at this byte offset when known: analysed after
    /// `diagnostics.debounce_ms` without another; its reparse runs on the
    /// blocking pool (a request may be waiting for the tree).
    Edited(Option<usize>),
}

/// The work after opening or changing a document: syntax diagnostics, the
/// prompt for a completion where the last edit ended, and the index entry
/// for the buffer. A newer change, or closing the document, cancels
/// `cancel`.
fn schedule_analysis(state: &Arc<State>, uri: Url, cancel: CancellationToken, trigger: Trigger) {
    let state = state.clone();
    tokio::spawn(async move {
        let config = state.config();
        let (debounce, edited_at) = match trigger {
            Trigger::Opened => (Duration::ZERO, None),
            Trigger::Edited(at) => (Duration::from_millis(config.diagnostics.debounce_ms), at),
        };
        tokio::select! {
            () = tokio::time::sleep(debounce) => {}
            () = cancel.cancelled() => return,
        }
        if cancel.is_cancelled() {
            return;
        }
        let began = Instant::now();
        // A tree parsed for a text changed meanwhile is still kept (caught
        // up with the changes: `Document::install_tree`).
        let parsed = match trigger {
            Trigger::Opened => state.parsed_snapshot_in_background(&uri).await,
            Trigger::Edited(_) => state.parsed_snapshot(&uri).await,
        };
        let Some(snapshot) = parsed else {
            return;
        };
        if cancel.is_cancelled() {
            return;
        }
        let parsed = began.elapsed();
        let version = snapshot.version;
        let encoding = state.encoding();
        let index_path = uri
            .to_file_path()
            .ok()
            .filter(|path| is_in_workspace(&state, path));
        let diagnostics_enabled = config.diagnostics.enabled;
        // A document over the parse limit and the index's file limit has no
        // tree (no syntax diagnostics) and no index entry: its whole text
        // is not copied (12 MB more per huge document, kept while open).
        let len = snapshot.rope.len_bytes();
        let whole_text_wanted =
            !syntax::too_big_to_parse(len) || len as u64 <= state.index().settings().max_file_bytes;
        // Nobody waits for this: it must not slow down what someone does.
        let completion = state
            .documents
            .get(&uri)
            .map(|open| open.completion.clone());
        let queued = Instant::now();
        let computed = crate::background::run(move || {
            let waited = queued.elapsed();
            // Copied once: for the diagnostics, the next completion at
            // this revision and the index.
            let text: Option<Arc<str>> =
                whole_text_wanted.then(|| Arc::from(snapshot.rope.to_string()));
            if let (Some(completion), Some(text)) = (completion, &text) {
                completion.remember_text(snapshot.revision, Arc::clone(text));
            }
            let diagnostics = match &text {
                Some(text) if diagnostics_enabled => syntax_diagnostics(&snapshot, text, encoding),
                _ => Vec::new(),
            };
            (diagnostics, text, snapshot, waited)
        })
        .await;
        let analysed = queued.elapsed();
        let Some((diagnostics, text, snapshot, waited)) = computed else {
            tracing::error!(%uri, "analysis failed");
            return;
        };
        // A change that arrived meanwhile will publish its own, newer result.
        if cancel.is_cancelled() {
            return;
        }
        let Some(all) = super::checks::record_syntax(&state, &uri, diagnostics) else {
            return;
        };
        // The user has paused at the edit's end, where the next completion
        // is nearly always asked: its prompt, built now (with these syntax
        // errors), is sent as is if nothing changes. Before the client
        // hears of the diagnostics: one that waits for them finds it ready.
        let preparing = Instant::now();
        if let Some(cursor) = edited_at {
            super::inline_completion::warm::prepare(&state, &uri, cursor).await;
        }
        super::checks::publish(&state, uri.clone(), all, Some(version)).await;
        tracing::debug!(
            %uri,
            opened = matches!(trigger, Trigger::Opened),
            parse_ms = ms(parsed),
            background_wait_ms = ms(waited),
            diagnostics_ms = ms(analysed.saturating_sub(waited)),
            prompt_and_publish_ms = ms(preparing.elapsed()),
            "analysis done"
        );
        tokio::select! {
            () = tokio::time::sleep(PAUSED_AFTER) => {}
            () = cancel.cancelled() => return,
        }
        // Still current: any change since would have cancelled this.
        let snapshot = parse_afresh_if_worn(&state, snapshot).await;
        let Some(path) = index_path else { return };
        state.index_updates.push(match text {
            Some(text) => IndexUpdate::Buffer {
                uri: snapshot.uri,
                path,
                language: snapshot.language,
                text,
                tree: snapshot.tree,
            },
            // Too big to index (as the file on disk would be): gone from
            // the index while open; closing it re-reads the file.
            None => IndexUpdate::Removed(path),
        });
    });
}

/// Replaces the document's tree by one parsed from scratch, when it has
/// been reparsed incrementally often enough to have spread its nodes over
/// many half-empty pages ([`Document::wants_fresh_parse`]): the parse runs
/// on the background thread, and the old tree is dropped there too (tens
/// of thousands of frees). `snapshot` is the document's current state; it
/// comes back holding the tree now installed.
///
/// [`Document::wants_fresh_parse`]: crate::document::Document::wants_fresh_parse
async fn parse_afresh_if_worn(state: &Arc<State>, mut snapshot: Snapshot) -> Snapshot {
    let worn = state
        .documents
        .get(&snapshot.uri)
        .is_some_and(|open| open.document.wants_fresh_parse());
    let Some(language) = snapshot.language.filter(|_| worn) else {
        return snapshot;
    };
    let rope = snapshot.rope.clone();
    let fresh = crate::background::run(move || syntax::parse_rope(language, &rope, None))
        .await
        .flatten();
    let installed = match state.documents.get_mut(&snapshot.uri) {
        Some(mut open) => open
            .document
            .install_fresh_tree(snapshot.revision, fresh.clone()),
        None => Err(fresh.clone()),
    };
    // Whichever tree goes, it goes on the background thread.
    let unused = match installed {
        Ok(old) => {
            tracing::debug!(uri = %snapshot.uri, "tree parsed afresh");
            (old, std::mem::replace(&mut snapshot.tree, fresh))
        }
        // Changed meanwhile (or closed): the next pause tries again.
        Err(refused) => {
            tracing::debug!(uri = %snapshot.uri, "tree parsed afresh too late; dropped");
            (refused, fresh)
        }
    };
    crate::background::spawn(move || drop(unused));
    snapshot
}

/// Re-indexes an open buffer now: a fresh index (new roots or index
/// settings) starts from the disk and must learn the open buffers again.
pub fn reindex_buffer(state: &Arc<State>, uri: &Url) {
    let Ok(path) = uri.to_file_path() else { return };
    if !is_in_workspace(state, &path) {
        return;
    }
    let Some(snapshot) = state.snapshot(uri) else {
        return;
    };
    if snapshot.rope.len_bytes() as u64 > state.index().settings().max_file_bytes {
        // Too big to index: not copied only to be refused.
        state.index_updates.push(IndexUpdate::Removed(path));
        return;
    }
    state.index_updates.push(IndexUpdate::Buffer {
        uri: snapshot.uri,
        path,
        language: snapshot.language,
        text: Arc::from(snapshot.rope.to_string()),
        // Possibly behind the text (edits not yet reparsed): let the index parse.
        tree: None,
    });
}

pub fn syntax_diagnostics(
    snapshot: &Snapshot,
    text: &str,
    encoding: PositionEncoding,
) -> Vec<Diagnostic> {
    let Some(tree) = &snapshot.tree else {
        return Vec::new();
    };
    syntax::syntax_errors(tree, text, MAX_SYNTAX_DIAGNOSTICS)
        .into_iter()
        .map(|error| Diagnostic {
            range: position::range_of(&snapshot.rope, error.range, encoding),
            severity: Some(DiagnosticSeverity::ERROR),
            source: Some("fettle".to_owned()),
            message: error.message,
            ..Diagnostic::default()
        })
        .collect()
}

/// Milliseconds, for logs.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

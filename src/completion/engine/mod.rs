//! The completion engine: one inline completion request from a snapshot of
//! the document to the suggestions, in Fettle's own types (byte offsets
//! into the snapshot's rope). It owns everything completion remembers: the
//! typing-through cache, the statistics, and (through [`DocumentState`],
//! kept in the document store's record of each open document) the newest
//! request, recent edits, syntax errors, prompt layout and the model
//! request still running, per document.
//!
//! A request: note the touch, wait for typing to pause (automatic requests
//! only), decide whether and how much to complete (text materialised on the
//! blocking pool), answer from the cache, or from the model request an
//! earlier keystroke started, otherwise build the prompt and stream the
//! model's answer (stopped as soon as a newer request supersedes this one),
//! then postprocess. A result for a document that changed meanwhile is
//! discarded.
mod ahead;
mod document;
mod prompt;
mod sample;
mod task;

pub use document::DocumentState;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use ropey::Rope;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tree_sitter::Tree;
use url::Url;

use super::cache::{Cached, CompletionCache, Key};
use super::secrets::RedactorCache;
use super::stats::{Outcome, Report, Stage, StageTimes, Stats};
use super::trigger::{self, Decision};
use crate::config::CompletionConfig;
use crate::index::WorkspaceIndex;
use crate::model::Model;
use crate::syntax::Language;
use document::InFlight;
use prompt::{Prompt, Purpose, Target};
use sample::{finish, sample, PostResult, Sampled};
use task::{Detachable, TaskTimes};

/// Documents up to this size are copied on the runtime for a request: the
/// copy (25 µs p50 for 512 KiB on the 2-core dev machine) costs about as
/// much as the hop to the blocking pool (20 µs p50, 28 µs p90), which made
/// typing through a suggestion nearly twice as slow (0.035 → 0.065 ms
/// server side) when every copy went there. See docs/performance.md.
const INLINE_TEXT_MAX: usize = 512 << 10;

/// What completion requests share.
#[derive(Default)]
pub struct Engine {
    cache: Mutex<CompletionCache>,
    stats: Mutex<Stats>,
    next_item: AtomicU64,
    /// The clock of [`DocumentState::touch`]: orders documents by recency.
    touches: AtomicU64,
    /// Redacts every prompt (workspace dotenv values, open secret buffers,
    /// Fettle's keys, secret shapes).
    redactor: Arc<RedactorCache>,
}

/// An open document as the engine sees it: a snapshot (rope and tree are
/// cheap to clone) and its completion state.
pub struct Buffer {
    pub uri: Url,
    pub language: Option<Language>,
    pub rope: Rope,
    /// The document's revision `rope` holds.
    pub revision: u64,
    pub state: Arc<DocumentState>,
}

/// The open documents (the document store implements this).
pub trait OpenBuffers: Send + Sync {
    /// Every open document, the requested one included.
    fn open_buffers(&self) -> Vec<Buffer>;
}

/// One completion request.
pub struct Request {
    pub document: Buffer,
    /// The syntax tree, only when it matches `document.rope`.
    pub tree: Option<Tree>,
    /// The document's revision as seen by `document`: changes after the
    /// snapshot make the answer stale.
    pub revision: watch::Receiver<u64>,
    /// The revision `document.rope` holds (its materialised text is reused
    /// between requests at one revision).
    pub text_revision: u64,
    /// The cursor, a byte offset into `document.rope` (on a char boundary).
    pub cursor: usize,
    /// An item selected in the client's completion menu: complete as if it
    /// had been typed (its byte range in the rope, its text).
    pub selected: Option<(Range<usize>, String)>,
    /// Asked for explicitly: answered at once, with alternatives.
    pub invoked: bool,
}

/// What a request runs against.
pub struct Env<'a> {
    pub config: &'a CompletionConfig,
    /// The completion model, or why it cannot be used.
    pub model: Result<Model, String>,
    pub index: Arc<WorkspaceIndex>,
    pub roots: Vec<PathBuf>,
    pub buffers: &'a dyn OpenBuffers,
}

/// One suggestion, in the terms of the request's snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suggestion {
    /// What to insert over `range`.
    pub text: String,
    /// Bytes of the snapshot the text replaces: the cursor (empty), the
    /// selected menu item's range, or the closers the suggestion re-types.
    pub range: Range<usize>,
    /// For [`Engine::accept`].
    pub id: String,
}

impl Engine {
    /// Notes that a document was opened (`edit` None) or edited at byte
    /// range `edit` of its new text: its edits feed later prompts.
    pub fn touched(&self, document: &DocumentState, edit: Option<Range<usize>>) {
        document.touch(self.touches.fetch_add(1, Ordering::Relaxed) + 1, edit);
    }

    /// A document closed: its cached suggestions go.
    pub fn closed(&self, uri: &Url) {
        self.cache.lock().forget(uri.as_str());
    }

    /// The redactor for prompts from `root`, knowing the dotenv values typed
    /// into the open secret buffers; shared with rewrites. May walk the
    /// workspace for dotenv files: call it off the async runtime.
    pub fn redactor(
        &self,
        root: Option<&std::path::Path>,
        secret_buffers: &[ropey::Rope],
    ) -> Arc<crate::secrets::Redactor> {
        self.redactor.for_buffers(root, secret_buffers)
    }

    /// Builds the redactor for `root` and compiles its patterns ahead of
    /// the first completion (on the background thread): else the first one
    /// walks the workspace for dotenv files itself (7-8 ms for 500 files,
    /// the first completion of the benchmark's sessions) and compiles the
    /// patterns (another ~4 ms).
    pub fn warm_redactor(&self, root: std::path::PathBuf) {
        let cache = Arc::clone(&self.redactor);
        crate::background::spawn(move || {
            cache.get(Some(&root), Vec::new());
            crate::secrets::redact::warm_up();
        });
    }

    /// The statistics so far.
    pub fn stats(&self) -> Report {
        self.stats.lock().report()
    }

    /// The user accepted suggestion `id`; false if it is unknown or was
    /// already accepted.
    pub fn accept(&self, id: &str) -> bool {
        self.stats.lock().accept(id)
    }

    /// Answers one request: the suggestions (empty when there is nothing to
    /// offer, or the request was superseded or went stale).
    pub async fn complete(self: &Arc<Self>, request: Request, env: Env<'_>) -> Vec<Suggestion> {
        let started = Instant::now();
        let ticket = request.document.state.begin();
        let mut stages = StageTimes::default();
        let (outcome, model_time, suggestions) =
            self.run(&request, &env, &ticket, &mut stages).await;
        self.stats
            .lock()
            .record(outcome, started.elapsed(), model_time, &stages);
        suggestions
    }

    async fn run(
        self: &Arc<Self>,
        request: &Request,
        env: &Env<'_>,
        ticket: &tokio_util::sync::CancellationToken,
        stages: &mut StageTimes,
    ) -> (Outcome, Duration, Vec<Suggestion>) {
        let started = Instant::now();
        let none = |outcome, waited| (outcome, waited, Vec::new());
        let document = &request.document;
        // No completion inside a secret file: its text would be the prompt.
        if let Some(path) = document
            .uri
            .to_file_path()
            .ok()
            .filter(|p| crate::secrets::is_secret_path(p))
        {
            tracing::debug!(path = %path.display(), "no completion in a secret file");
            return none(Outcome::Empty, Duration::ZERO);
        }
        // Where the user is working counts as recently viewed: later prompts
        // for other files offer the code around it.
        self.touched(&document.state, Some(request.cursor..request.cursor));

        // An explicit request (Invoked) is answered at once; only automatic
        // ones wait for typing to pause.
        let invoked = request.invoked;
        if env.config.debounce_ms > 0 && !invoked {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(env.config.debounce_ms)) => {}
                () = ticket.cancelled() => return none(Outcome::Cancelled, Duration::ZERO),
            }
            if ticket.is_cancelled() {
                return none(Outcome::Cancelled, Duration::ZERO);
            }
        }

        // The item replaces `base`: the cursor, or a selected menu item's
        // range (the selection + completion replace it).
        let (base, typed_prefix) = match &request.selected {
            Some((range, text)) => (range.clone(), text.clone()),
            None => (request.cursor..request.cursor, String::new()),
        };
        let Some(at) = self.locate(request, env.config).await else {
            return none(Outcome::Error, Duration::ZERO);
        };
        stages.set(Stage::Locate, started.elapsed());
        let Located {
            text,
            cursor,
            decision,
            key,
        } = at;
        let (multiline, max_lines, stop) = match decision {
            Decision::Skip(reason) => {
                tracing::debug!(%reason, "no completion here");
                return none(Outcome::Empty, Duration::ZERO);
            }
            Decision::Complete {
                multiline,
                max_lines,
                stop,
            } => (multiline, max_lines, stop),
        };

        // An explicit request wants alternatives, not the cached suggestion.
        let hit = if invoked {
            None
        } else {
            self.cache.lock().get(&key)
        };
        let from_cache = |hit: Cached, waited: Duration| {
            let answer = self.suggestions(document, &base, &typed_prefix, &[hit]);
            (Outcome::Shown { from_cache: true }, waited, answer)
        };
        if let Some(hit) = hit {
            return from_cache(hit, Duration::ZERO);
        }

        // A model request still running for an earlier keystroke on this line
        // may already be producing what was just typed: wait for it rather than
        // ask again. One that cannot help is stopped (it would only occupy the
        // model).
        if !invoked {
            if let Some(InFlight {
                key: earlier,
                mut done,
                abort,
            }) = document.state.inflight()
            {
                if key.extends(&earlier) {
                    let waited = Instant::now();
                    tokio::select! {
                        _ = done.wait_for(|finished| *finished) => {}
                        () = ticket.cancelled() => {
                            return none(Outcome::Cancelled, waited.elapsed());
                        }
                    }
                    // The document may have changed while waiting.
                    if is_stale(&request.revision) {
                        return none(Outcome::Cancelled, waited.elapsed());
                    }
                    let hit = self.cache.lock().get(&key);
                    if let Some(hit) = hit {
                        return from_cache(hit, waited.elapsed());
                    }
                } else {
                    abort.cancel();
                }
            }
        }

        let model = match &env.model {
            Ok(model) => sample::with_deadline(model.clone(), env.config),
            Err(err) => {
                tracing::warn!(error = %err, "completion model unavailable");
                return none(Outcome::Error, Duration::ZERO);
            }
        };
        // The selection (if any) is on the cursor line.
        let cursor_line = document.rope.byte_to_line(base.start);
        let target = Target {
            cursor,
            line: cursor_line,
            multiline,
            stop,
        };
        let building = Instant::now();
        let built = prompt::build(self, request, env, &model, &text, target, Purpose::Request);
        let Some(Prompt { fim, ahead }) = built.await else {
            return none(Outcome::Error, Duration::ZERO);
        };
        stages.set(Stage::Context, building.elapsed());
        if ahead.is_some() {
            self.stats.lock().prompt_prepared();
        }
        if ticket.is_cancelled() {
            return none(Outcome::Cancelled, Duration::ZERO);
        }

        let model_started = Instant::now();
        // Each answer, postprocessed: the suggestion, or why it was dropped.
        let mut answers: Vec<(String, PostResult)> = Vec::new();
        if invoked {
            // Up to three distinct suggestions, the extra ones sampled warmer.
            let mut warmer = fim.clone();
            warmer.options.temperature = Some(model.config().temperature.max(0.8));
            let requests = [fim, warmer.clone(), warmer];
            let samples = futures::future::join_all(
                requests
                    .into_iter()
                    .map(|r| sample(&model, r, multiline, ticket.cancelled())),
            )
            .await;
            for sampled in samples {
                match sampled {
                    Ok(raw) => {
                        let done = finish(&text, cursor, &raw, multiline, max_lines, None);
                        answers.push((raw, done));
                    }
                    Err(Outcome::Cancelled) => {
                        return none(Outcome::Cancelled, model_started.elapsed())
                    }
                    Err(other) if answers.is_empty() => {
                        return none(other, model_started.elapsed())
                    }
                    Err(_) => {}
                }
            }
        } else {
            // The model request also postprocesses and caches its answer. It
            // runs here, in this request's task (no hand-off to another
            // thread on the way to the model); if this request goes away
            // first (a newer keystroke, the client's cancel), it goes on as a
            // task of its own, so the answer is there for the next request
            // (see the in-flight check above).
            let (done_tx, done_rx) = watch::channel(false);
            let abort = CancellationToken::new();
            let engine = Arc::clone(self);
            let task_key = key.clone();
            let task_text = Arc::clone(&text);
            let stop = abort.clone();
            let work = async move {
                let mut times = TaskTimes::start();
                let marks = times.http.clone();
                let (request, indent) = match ahead {
                    Some(ready) => (Sampled::Ready(ready.request), Some(ready.indent)),
                    None => (Sampled::Request(fim), None),
                };
                let sampled = sample(&model, request, multiline, std::future::pending());
                let outcome = tokio::select! {
                    sampled = crate::model::timing::recorded(marks, sampled) => sampled,
                    () = stop.cancelled() => return None,
                };
                let outcome = outcome.map(|raw| {
                    times.streamed = Some(Instant::now());
                    let done = finish(&task_text, cursor, &raw, multiline, max_lines, indent);
                    if let Ok(done) = &done {
                        engine.cache.lock().insert(task_key, done.clone());
                    }
                    (raw, done)
                });
                let _ = done_tx.send(true);
                times.finished = Some(Instant::now());
                Some((outcome, times))
            };
            document.state.set_inflight(InFlight {
                key: key.clone(),
                done: done_rx,
                abort,
            });
            let mut work = Detachable::new(work);
            tokio::select! {
                finished = &mut work => match finished {
                    Some((Ok(answer), times)) => {
                        times.record(model_started, stages);
                        answers.push(answer);
                    }
                    Some((Err(outcome), _)) => return none(outcome, model_started.elapsed()),
                    None => return none(Outcome::Cancelled, model_started.elapsed()),
                },
                () = ticket.cancelled() => {
                    return none(Outcome::Cancelled, model_started.elapsed());
                }
            }
        }
        let model_time = model_started.elapsed();

        // Discard a result for a document that has changed since.
        if is_stale(&request.revision) || ticket.is_cancelled() {
            return none(Outcome::Cancelled, model_time);
        }

        let mut completions: Vec<Cached> = Vec::new();
        for (raw, done) in answers {
            match done {
                Ok(done) if !completions.iter().any(|c| c.text == done.text) => {
                    completions.push(done)
                }
                Ok(_) => {}
                Err(rejected) => {
                    tracing::debug!(reason = rejected.reason(), raw = %crate::model::shorten_for_display(&raw, 200), "completion dropped");
                }
            }
        }
        let Some(first) = completions.first() else {
            return none(Outcome::Empty, model_time);
        };
        if invoked {
            self.cache.lock().insert(key, first.clone());
        }
        let answer = self.suggestions(document, &base, &typed_prefix, &completions);
        (Outcome::Shown { from_cache: false }, model_time, answer)
    }

    /// The text at the cursor (the selected menu item put in), the
    /// trigger's decision and the cache key. A large document is copied on
    /// the blocking pool (milliseconds for megabytes); up to
    /// [`INLINE_TEXT_MAX`] the copy costs less than the hop to the pool, so
    /// it is made here. `None` if the pool failed.
    async fn locate(&self, request: &Request, config: &CompletionConfig) -> Option<Located> {
        let rope = request.document.rope.clone();
        let tree = request.tree.clone();
        let selected = request.selected.clone();
        let state = Arc::clone(&request.document.state);
        let revision = request.text_revision;
        let known = state.text_at(revision);
        // Nothing to copy: no reason to hop to the pool.
        let known_is_cheap = known.is_some() && selected.is_none();
        let language = request.document.language;
        let uri = request.document.uri.clone();
        let mode = config.multiline;
        let mut cursor = request.cursor;
        let inline = rope.len_bytes() <= INLINE_TEXT_MAX;
        let work = move || {
            // The tree only when it matches the text; otherwise heuristics
            // (no reparse on the keystroke path).
            let mut tree = tree;
            let text: Arc<str> = match (&selected, known) {
                (None, Some(known)) => known,
                (None, None) => {
                    let text: Arc<str> = Arc::from(rope.to_string());
                    state.remember_text(revision, Arc::clone(&text));
                    text
                }
                (Some((range, typed)), _) => {
                    let mut text = rope.to_string();
                    text.replace_range(range.start..range.end.max(range.start), typed);
                    cursor = range.start + typed.len();
                    if !typed.is_empty() {
                        tree = None;
                    }
                    Arc::from(text)
                }
            };
            let decision = trigger::decide(&text, cursor, language, tree.as_ref(), mode);
            let key = Key::new(uri.as_str(), &text, cursor);
            Located {
                text,
                cursor,
                decision,
                key,
            }
        };
        if inline || known_is_cheap {
            return Some(work());
        }
        tokio::task::spawn_blocking(work).await.ok()
    }

    /// The suggestions for `completions`, placed over `base` (the cursor,
    /// or a selected menu item's range). Without a selection, the range
    /// extends over the closers the completion re-types (on the cursor line
    /// only).
    fn suggestions(
        &self,
        document: &Buffer,
        base: &Range<usize>,
        typed_prefix: &str,
        completions: &[Cached],
    ) -> Vec<Suggestion> {
        completions
            .iter()
            .map(|completion| {
                let mut range = base.clone();
                if typed_prefix.is_empty() && completion.replace_suffix_bytes > 0 {
                    let rope = &document.rope;
                    let cursor = base.end;
                    let line = rope.byte_to_line(cursor);
                    let line_end = rope.try_line_to_byte(line + 1).unwrap_or(rope.len_bytes());
                    range.end = (cursor + completion.replace_suffix_bytes).min(line_end);
                }
                let id = format!("c{}", self.next_item.fetch_add(1, Ordering::Relaxed) + 1);
                self.stats.lock().shown_id(id.clone());
                Suggestion {
                    text: format!("{typed_prefix}{}", completion.text),
                    range,
                    id,
                }
            })
            .collect()
    }
}

/// The request's text, as the trigger and the cache see it.
struct Located {
    text: Arc<str>,
    cursor: usize,
    decision: Decision,
    key: Key,
}

/// Whether the document changed (or closed) since the request's snapshot.
fn is_stale(revision: &watch::Receiver<u64>) -> bool {
    revision.has_changed().unwrap_or(true)
}

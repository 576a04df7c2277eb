//! The prompt for one request: context gathered from the document, the
//! other open documents and the index (on the blocking pool, under a hard
//! time cap), the layout kept stable while typing along a line, redaction.
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ropey::Rope;

use super::document::Window;
use super::{Engine, Env, Request};
use crate::completion::context::{self, ContextInput, OpenFile};
use crate::completion::postprocess::IndentStyle;
use crate::config::ModelConfig;
use crate::index::WorkspaceIndex;
use crate::model::{FimRequest, GenOptions, Model, TextStream};
use crate::secrets::Redactor;
use crate::syntax::Language;

/// Context gathering's hard cap; the windows around the cursor are always
/// included, snippets only as far as this allows.
const CONTEXT_DEADLINE: Duration = Duration::from_millis(20);
/// Most tokens a single-line completion may take (the stream is cut at the
/// first line anyway).
const SINGLE_LINE_MAX_TOKENS: u32 = 64;
/// Lines below the one it was chosen for where a prompt's layout (window
/// start, snippets) is kept: typing on and pressing Enter keeps the cache.
const KEPT_WINDOW_LINES: usize = 8;
/// Other open documents offered to the prompt builder, most recent first.
const OPEN_FILES: usize = 8;
/// Larger open documents are not scanned for similar code (nor for secrets).
const OPEN_FILE_MAX_BYTES: usize = 512 << 10;

/// Where the prompt is for, and what the trigger decided.
pub(super) struct Target {
    /// Byte offset in the request's text.
    pub(super) cursor: usize,
    /// The cursor's line (in the document).
    pub(super) line: usize,
    pub(super) multiline: bool,
    pub(super) stop: Vec<String>,
}

/// Another open document, snapshotted for the prompt builder (its text is
/// materialised where the builder runs).
struct Other {
    path: PathBuf,
    revision: u64,
    language: Option<Language>,
    rope: Rope,
    edits: Vec<std::ops::Range<usize>>,
    recency: usize,
}

/// What a prompt is built for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A request: takes the prompt built ahead when it fits.
    Request,
    /// A warm-up of the embedded model's cache.
    Warm,
    /// Ahead of the request expected at the last edit's end (after the
    /// edit's analysis, while the user pauses): kept in the document's
    /// state, the layout it chose not yet applied.
    Ahead,
}

/// The prompt for a request, and what was made with it when it was built
/// ahead.
pub(super) struct Prompt {
    pub(super) fim: FimRequest,
    pub(super) ahead: Option<Ahead>,
}

/// What a prompt built ahead comes with.
pub(super) struct Ahead {
    /// The model request for the prompt as it is, made then (its body
    /// already serialized), not yet sent.
    pub(super) request: TextStream,
    /// The indentation around the cursor, for postprocessing the answer.
    pub(super) indent: IndentStyle,
}

/// A prompt built ahead, with what it was built from.
pub(super) struct Prepared {
    inputs: Inputs,
    fim: FimRequest,
    /// The model request for `fim`, made (not sent: streams are lazy), and
    /// the indentation around the cursor.
    ahead: Ahead,
    /// The layout to keep from the request that takes it on.
    window: Option<Window>,
}

/// Everything a prompt is built from besides the document's text (its
/// revision stands for it): when all of it is the same at a request, a
/// prompt built ahead is the prompt the request would build. Shared values
/// are compared by identity through `Weak`s: a weak reference keeps the
/// allocation's address from being reused (so a different value can never
/// look the same) without keeping a replaced index or redactor alive.
/// Files read from disk for definitions count through the index: its
/// watcher's update of a changed file moves the generation.
struct Inputs {
    revision: u64,
    cursor: usize,
    line: usize,
    multiline: bool,
    stop: Vec<String>,
    /// The other open documents offered, in order: path, revision, recent edits.
    others: Vec<(PathBuf, u64, Vec<std::ops::Range<usize>>)>,
    diagnostics: Weak<Vec<(usize, String)>>,
    index: Weak<WorkspaceIndex>,
    index_generation: u64,
    /// `None` (nothing reused) when none was made yet.
    redactor: Option<Weak<Redactor>>,
    window_generation: u64,
    roots: Vec<PathBuf>,
    max_prompt_tokens: u32,
    latency_target_ms: u64,
    model: String,
    model_config: ModelConfig,
}

impl Inputs {
    /// The first input that differs between two builds (`None`: the same).
    fn difference(&self, other: &Self) -> Option<&'static str> {
        let same_redactor = match (&self.redactor, &other.redactor) {
            (Some(mine), Some(theirs)) => Weak::ptr_eq(mine, theirs),
            _ => false,
        };
        let checks = [
            (self.revision == other.revision, "text"),
            (
                self.cursor == other.cursor && self.line == other.line,
                "cursor",
            ),
            (
                self.multiline == other.multiline && self.stop == other.stop,
                "trigger",
            ),
            (self.others == other.others, "other documents"),
            (
                Weak::ptr_eq(&self.diagnostics, &other.diagnostics),
                "diagnostics",
            ),
            (
                Weak::ptr_eq(&self.index, &other.index)
                    && self.index_generation == other.index_generation,
                "index",
            ),
            (same_redactor, "redactor"),
            (self.window_generation == other.window_generation, "layout"),
            (
                self.roots == other.roots
                    && self.max_prompt_tokens == other.max_prompt_tokens
                    && self.latency_target_ms == other.latency_target_ms
                    && self.model == other.model
                    && self.model_config == other.model_config,
                "configuration",
            ),
        ];
        checks
            .into_iter()
            .find_map(|(same, what)| (!same).then_some(what))
    }
}

/// Builds the model request for `text` at `cursor` (here for small
/// documents, else on the blocking pool); `None` if the pool could not run
/// the builder, and for [`Purpose::Ahead`] (the prompt is kept in the
/// document's state instead).
pub(super) async fn build(
    engine: &Engine,
    request: &Request,
    env: &Env<'_>,
    model: &Model,
    text: &Arc<str>,
    target: Target,
    purpose: Purpose,
) -> Option<Prompt> {
    let document = &request.document;
    let (others, secret_buffers) = other_buffers(env, &document.uri);
    let diagnostics = document.state.diagnostics();
    let index = env.index.clone();
    let roots = env.roots.clone();
    let path = document.uri.to_file_path().ok();
    let root = path
        .as_ref()
        .and_then(|p| roots.iter().find(|r| p.starts_with(r)).cloned());
    let redactors = engine.redactor.clone();
    // Small enough to build here, with the redactor at hand: the hop to the
    // blocking pool cost more than the build itself (0.7 ms of 1.3 ms p50
    // after a pause, on the 2-core dev machine; see docs/performance.md).
    let inline = text.len() + others.iter().map(|o| o.rope.len_bytes()).sum::<usize>()
        <= super::INLINE_TEXT_MAX;
    // Asked even when the build will not use it: a prompt is only reused
    // with the very redactor it was built with.
    let known_redactor = redactors.cached_for_buffers(root.as_deref(), &secret_buffers);
    let inputs = (request.selected.is_none() && purpose != Purpose::Warm).then(|| Inputs {
        revision: request.text_revision,
        cursor: target.cursor,
        line: target.line,
        multiline: target.multiline,
        stop: target.stop.clone(),
        others: others
            .iter()
            .map(|o| (o.path.clone(), o.revision, o.edits.clone()))
            .collect(),
        diagnostics: Arc::downgrade(&diagnostics),
        index: Arc::downgrade(&index),
        index_generation: index.generation(),
        redactor: known_redactor.as_ref().map(Arc::downgrade),
        window_generation: document.state.window_generation(),
        roots: roots.clone(),
        max_prompt_tokens: env.config.max_prompt_tokens,
        latency_target_ms: env.config.latency_target_ms,
        model: model.name().to_owned(),
        model_config: model.config().clone(),
    });
    if let Some(now) = inputs.as_ref().filter(|_| purpose == Purpose::Request) {
        if let Some(prepared) = document.state.take_prepared() {
            match prepared.inputs.difference(now) {
                None => {
                    if let Some(window) = prepared.window {
                        document.state.set_window(window);
                    }
                    return Some(Prompt {
                        fim: prepared.fim,
                        ahead: Some(prepared.ahead),
                    });
                }
                Some(changed) => {
                    tracing::debug!(changed, "the prompt built ahead is out of date");
                }
            }
        } else {
            tracing::debug!("no prompt built ahead");
        }
    }
    let cached = known_redactor.filter(|_| inline);

    let Target {
        cursor,
        line: cursor_line,
        multiline,
        mut stop,
    } = target;
    let language = document.language;
    let context_text = Arc::clone(text);
    let max_prompt_tokens = env.config.max_prompt_tokens as usize;
    let counter_model = model.clone();
    let work = move |redactor: Option<Arc<Redactor>>| {
        let counter = move |s: &str| counter_model.count_tokens(s);
        let texts: Vec<String> = others.iter().map(|o| o.rope.to_string()).collect();
        let open: Vec<OpenFile<'_>> = others
            .iter()
            .zip(&texts)
            .map(|(o, text)| OpenFile {
                path: &o.path,
                language: o.language,
                text,
                recent_edits: &o.edits,
                recency: o.recency,
            })
            .collect();
        let input = ContextInput {
            text: &context_text,
            cursor,
            cursor_line: Some(cursor_line),
            path: path.as_deref(),
            root: root.as_deref(),
            language,
            index: Some(&index),
            open_files: &open,
            diagnostics: &diagnostics,
            max_prompt_tokens,
            counter: &counter,
            deadline: Instant::now() + CONTEXT_DEADLINE,
        };
        let ctx = context::build(&input);
        let relative = match (&path, &root) {
            (Some(p), Some(r)) => p.strip_prefix(r).ok().map(|p| p.display().to_string()),
            _ => None,
        }
        .or_else(|| path.as_ref().map(|p| p.display().to_string()));
        let repo = root
            .as_ref()
            .and_then(|r| r.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        // Finding the workspace's dotenv files may walk it: then this runs
        // on the blocking pool.
        let redactor =
            redactor.unwrap_or_else(|| redactors.for_buffers(root.as_deref(), &secret_buffers));
        (ctx, relative, repo, redactor)
    };
    let built = match cached {
        Some(redactor) => Ok(work(Some(redactor))),
        None => tokio::task::spawn_blocking(move || work(None)).await,
    };
    let (mut ctx, relative, repo, redactor) = built.ok()?;
    let timed_out = ctx.report.timed_out;
    // While the user types along one line (or goes on to the next few, or
    // opens one above), keep offering the snippets chosen there: they come
    // first in the prompt, so changing them (a half-typed word picks other
    // definitions) would throw away the whole KV cache of a local model, or
    // a server's prompt cache. The same goes for where the prefix window
    // starts: a window that slides by a line every few keystrokes changes
    // the prompt's start. So near where it was chosen, the window keeps its
    // start while it grows by no more than an eighth over the budgeted size.
    let kept = document.state.window().filter(|kept| {
        kept.line <= cursor_line + 1 && cursor_line <= kept.line + KEPT_WINDOW_LINES
    });
    let prefix_start = cursor - ctx.prefix.len();
    let mut new_window = None;
    match kept {
        Some(kept)
            if kept.prefix_start <= prefix_start
                && (kept.prefix_start == 0
                    || text.as_bytes().get(kept.prefix_start - 1) == Some(&b'\n'))
                && cursor - kept.prefix_start <= ctx.prefix.len() + ctx.prefix.len() / 8 =>
        {
            ctx.prefix = text[kept.prefix_start..cursor].to_string();
            ctx.snippets = kept.snippets;
        }
        _ => {
            new_window = Some(Window {
                line: cursor_line,
                prefix_start,
                snippets: ctx.snippets.clone(),
            })
        }
    }
    if !multiline {
        stop.push("\n\n".to_string());
    }
    let options = GenOptions {
        max_tokens: (!multiline).then(|| model.config().max_tokens.min(SINGLE_LINE_MAX_TOKENS)),
        temperature: None,
        stop,
        latency_target: (env.config.latency_target_ms > 0)
            .then(|| Duration::from_millis(env.config.latency_target_ms)),
    };
    let mut fim = ctx.into_fim_request(relative, repo, options);
    // After the kept-window logic, which may put raw buffer text back.
    let redacted = crate::completion::secrets::redact_request(&redactor, &mut fim);
    if redacted > 0 {
        tracing::debug!(parts = redacted, "completion prompt redacted");
    }
    if purpose == Purpose::Ahead {
        // A prompt cut short by the deadline (a busy machine) is not kept:
        // the request may do better.
        if timed_out {
            tracing::debug!("the prompt built ahead was cut short by the deadline; not kept");
        }
        if let Some(mut inputs) = inputs.filter(|_| !timed_out) {
            // Made for this build if none was known: the cache keeps it.
            inputs.redactor = Some(Arc::downgrade(&redactor));
            document.state.set_prepared(Prepared {
                inputs,
                ahead: Ahead {
                    request: model.fim(fim.clone()),
                    indent: super::sample::indent_around(text, cursor),
                },
                fim,
                window: new_window,
            });
        }
        return None;
    }
    if let Some(window) = new_window {
        document.state.set_window(window);
    }
    Some(Prompt { fim, ahead: None })
}

/// The other open documents worth offering (file URIs, not secret, not
/// huge; the most recently touched first), and the open secret buffers
/// (whose values the redactor must know). Rope clones only: cheap.
fn other_buffers(env: &Env<'_>, current: &url::Url) -> (Vec<Other>, Vec<Rope>) {
    let mut candidates = Vec::new();
    let mut secret_buffers = Vec::new();
    for buffer in env.buffers.open_buffers() {
        let Ok(path) = buffer.uri.to_file_path() else {
            continue;
        };
        let small = buffer.rope.len_bytes() <= OPEN_FILE_MAX_BYTES;
        // Secret files never feed completion context.
        if crate::secrets::is_secret_path(&path) {
            if small {
                secret_buffers.push(buffer.rope);
            }
            continue;
        }
        if buffer.uri == *current || !small {
            continue;
        }
        let (touched, edits) = buffer.state.recent();
        candidates.push((
            touched,
            path,
            buffer.revision,
            buffer.language,
            buffer.rope,
            edits,
        ));
    }
    candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
    let others = candidates
        .into_iter()
        .take(OPEN_FILES)
        .enumerate()
        .map(
            |(recency, (_, path, revision, language, rope, edits))| Other {
                path,
                revision,
                language,
                rope,
                edits,
                recency,
            },
        )
        .collect();
    (others, secret_buffers)
}

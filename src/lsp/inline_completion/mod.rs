//! `textDocument/inlineCompletion` (LSP 3.18; lsp-types 0.94 predates it, so
//! the types are ours), `fettle/stats` and `fettle.acceptCompletion`.
//!
//! A request: snapshot the document, decide whether and how much to
//! complete, answer from the typing-through cache if possible, otherwise
//! build the prompt (blocking pool, hard time cap), stream the model's
//! answer (stopping at the first line in single-line mode, or as soon as a
//! newer request for the document supersedes this one), then postprocess.
//! A result for a document that changed meanwhile is discarded.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::{Command, Range};

mod menu_item;
mod protocol;
mod shared;

pub use menu_item::as_completion_items;
pub use protocol::{InlineCompletionItem, InlineCompletionList, InlineCompletionParams};
pub use shared::CompletionState;
use shared::{open_files, secret_buffer_values, Ticket, Window};

use super::state::{Snapshot, State};
use crate::completion::cache::{Cached, Key};
use crate::completion::context::{self, ContextInput, OpenFile};
use crate::completion::postprocess::{self, IndentStyle};
use crate::completion::stats::{Outcome, Report};
use crate::completion::trigger::{self, Decision};
use crate::model::GenOptions;
use crate::position;

pub const ACCEPT_COMMAND: &str = "fettle.acceptCompletion";
/// Context gathering's hard cap; the windows around the cursor are always
/// included, snippets only as far as this allows.
const CONTEXT_DEADLINE: Duration = Duration::from_millis(20);
/// Most tokens a single-line completion may take (the stream is cut at the
/// first line anyway).
const SINGLE_LINE_MAX_TOKENS: u32 = 64;

pub async fn inline_completion(
    state: &Arc<State>,
    params: InlineCompletionParams,
) -> Result<Option<InlineCompletionList>> {
    let started = Instant::now();
    let uri = params.text_document.uri.clone();
    let Some(snapshot) = state.snapshot(&uri) else {
        return Err(Error::invalid_params(format!(
            "fettle: {uri} is not open (send textDocument/didOpen first)"
        )));
    };
    let config = state.config();
    if !config.completion.enabled {
        return Ok(None);
    }
    let ticket = state.completion.begin(&uri);
    let (outcome, model_time, list) = complete(state, &params, snapshot, &ticket).await;
    state
        .completion
        .stats
        .lock()
        .record(outcome, started.elapsed(), model_time);
    Ok(list)
}

/// The request's work; returns how it ended, the time spent waiting for
/// the model, and the answer.
async fn complete(
    state: &Arc<State>,
    params: &InlineCompletionParams,
    snapshot: Snapshot,
    ticket: &Ticket,
) -> (Outcome, Duration, Option<InlineCompletionList>) {
    let config = state.config();
    // No completion inside a secret file: its text would be the prompt.
    if let Some(path) = snapshot
        .uri
        .to_file_path()
        .ok()
        .filter(|p| crate::secrets::is_secret_path(p))
    {
        tracing::debug!(path = %path.display(), "no completion in a secret file");
        return (Outcome::Empty, Duration::ZERO, None);
    }
    let encoding = state.encoding();
    let mut text = snapshot.rope.to_string();
    let mut cursor = position::offset_of(&snapshot.rope, params.position, encoding);
    // Where the user is working counts as recently viewed: later prompts
    // for other files offer the code around it.
    state
        .completion
        .touched(&snapshot.uri, Some(cursor..cursor));
    // The item's range is in the document's terms: a position past the end
    // of a line or of the document is clamped (as the spec says), never
    // echoed back as sent.
    let at_cursor = position::position_of(&snapshot.rope, cursor, encoding);
    let mut base = Range {
        start: at_cursor,
        end: at_cursor,
    };
    // A selected item in the client's completion menu: complete as if it
    // had been typed, and replace its range with selection + completion.
    let mut typed_prefix = String::new();
    if let Some(selected) = params
        .context
        .as_ref()
        .and_then(|c| c.selected_completion_info.as_ref())
    {
        let sel = position::range_to_bytes(&snapshot.rope, selected.range, encoding);
        text.replace_range(sel.start..sel.end.max(sel.start), &selected.text);
        cursor = sel.start + selected.text.len();
        base = position::range_of(&snapshot.rope, sel.clone(), encoding);
        typed_prefix = selected.text.clone();
    }

    // An explicit request (Invoked) is answered at once; only automatic
    // ones wait for typing to pause.
    let invoked = params.context.as_ref().is_some_and(|c| c.trigger_kind == 1);
    if config.completion.debounce_ms > 0 && !invoked {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(config.completion.debounce_ms)) => {}
            () = ticket.notify.notified() => return (Outcome::Cancelled, Duration::ZERO, None),
        }
        if !state.completion.is_current(ticket) {
            return (Outcome::Cancelled, Duration::ZERO, None);
        }
    }

    // The tree only when it matches the text; otherwise heuristics (no
    // reparse on the keystroke path).
    let tree = (!snapshot.needs_reparse && typed_prefix.is_empty())
        .then_some(snapshot.tree.as_ref())
        .flatten();
    let (multiline, max_lines, stop) = match trigger::decide(
        &text,
        cursor,
        snapshot.language,
        tree,
        config.completion.multiline,
    ) {
        Decision::Skip(reason) => {
            tracing::debug!(%reason, "no completion here");
            return (Outcome::Empty, Duration::ZERO, None);
        }
        Decision::Complete {
            multiline,
            max_lines,
            stop,
        } => (multiline, max_lines, stop),
    };

    let key = Key::new(snapshot.uri.as_str(), &text, cursor);
    // An explicit request wants alternatives, not the cached suggestion.
    let hit = if invoked {
        None
    } else {
        state.completion.cache.lock().get(&key)
    };
    let from_cache = |hit: Cached, waited: Duration| {
        let list = answer(state, &snapshot, base, &typed_prefix, &[hit]);
        (Outcome::Shown { from_cache: true }, waited, Some(list))
    };
    if let Some(hit) = hit {
        return from_cache(hit, Duration::ZERO);
    }

    // A model request still running for an earlier keystroke on this line
    // may already be producing what was just typed: wait for it rather than
    // ask again. One that cannot help is stopped (it would only occupy the
    // model).
    if !invoked {
        let inflight = state
            .completion
            .inflight
            .get(&snapshot.uri)
            .map(|f| (f.key.clone(), f.done.clone(), f.abort.clone()));
        if let Some((earlier, mut done, abort)) = inflight {
            if key.extends(&earlier) {
                let waited = Instant::now();
                tokio::select! {
                    _ = done.wait_for(|finished| *finished) => {}
                    () = ticket.notify.notified() => {
                        return (Outcome::Cancelled, waited.elapsed(), None);
                    }
                }
                // The document may have changed while waiting.
                if state.snapshot(&snapshot.uri).map(|s| s.version) != Some(snapshot.version) {
                    return (Outcome::Cancelled, waited.elapsed(), None);
                }
                let hit = state.completion.cache.lock().get(&key);
                if let Some(hit) = hit {
                    return from_cache(hit, waited.elapsed());
                }
            } else {
                abort.abort();
            }
        }
    }

    let model = match state.models().get(&config.completion.model) {
        Ok(model) => super::model_status::for_completion(model, &config),
        Err(err) => {
            tracing::warn!(error = %err, "completion model unavailable");
            return (Outcome::Error, Duration::ZERO, None);
        }
    };
    // The selection (if any) is on the cursor line, so the client's line
    // number identifies it.
    let cursor_line = base.start.line as usize;
    // Shared by the prompt builder and the model task (no copies).
    let text: Arc<str> = Arc::from(text);
    let request = {
        let others = open_files(state, &snapshot.uri);
        let diagnostics = state
            .completion
            .diagnostics
            .get(&snapshot.uri)
            .map(|d| d.clone())
            .unwrap_or_default();
        let index = state.index();
        let roots = state.roots.read().clone();
        let path = snapshot.uri.to_file_path().ok();
        let language = snapshot.language;
        let context_text = Arc::clone(&text);
        let max_prompt_tokens = config.completion.max_prompt_tokens as usize;
        let counter_model = model.clone();
        let secret_values = secret_buffer_values(state);
        let redactors = Arc::clone(state);
        let built = tokio::task::spawn_blocking(move || {
            let root = path
                .as_ref()
                .and_then(|p| roots.iter().find(|r| p.starts_with(r)).cloned());
            let counter = move |s: &str| counter_model.count_tokens(s);
            let open: Vec<OpenFile<'_>> = others
                .iter()
                .map(|o| OpenFile {
                    path: &o.path,
                    language: o.language,
                    text: &o.text,
                    recent_edits: &o.edits,
                    recency: o.recency,
                })
                .collect();
            let input = ContextInput {
                text: &context_text,
                cursor,
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
            // May walk the workspace for dotenv files: here, off the runtime.
            let redactor = redactors
                .completion
                .redactor
                .get(root.as_deref(), secret_values);
            (ctx, relative, repo, redactor)
        })
        .await;
        let Ok((mut ctx, relative, repo, redactor)) = built else {
            return (Outcome::Error, Duration::ZERO, None);
        };
        // While the user types along one line, keep offering the snippets
        // chosen for that line: they come first in the prompt, so changing
        // them (a half-typed word picks other definitions) would throw away
        // the whole KV cache of a local model, or a server's prompt cache.
        // The same goes for where the prefix window starts: a window that
        // slides by a line every few keystrokes changes the prompt's start.
        // So on one line, the window keeps its start while it grows by no
        // more than an eighth over the budgeted size.
        // (The guard is released before the map is written: same shard.)
        let kept = state
            .completion
            .windows
            .get(&snapshot.uri)
            .filter(|kept| kept.line == cursor_line)
            .map(|kept| kept.clone());
        let prefix_start = cursor - ctx.prefix.len();
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
                state.completion.windows.insert(
                    snapshot.uri.clone(),
                    Window {
                        line: cursor_line,
                        prefix_start,
                        snippets: ctx.snippets.clone(),
                    },
                );
            }
        }
        let mut stop = stop;
        if !multiline {
            stop.push("\n\n".to_string());
        }
        let options = GenOptions {
            max_tokens: (!multiline).then(|| model.config().max_tokens.min(SINGLE_LINE_MAX_TOKENS)),
            temperature: None,
            stop,
        };
        let mut request = ctx.into_fim_request(relative, repo, options);
        // After the kept-window logic, which may put raw buffer text back.
        let redacted = crate::completion::secrets::redact_request(&redactor, &mut request);
        if redacted > 0 {
            tracing::debug!(parts = redacted, "completion prompt redacted");
        }
        request
    };
    if !state.completion.is_current(ticket) {
        return (Outcome::Cancelled, Duration::ZERO, None);
    }

    let model_started = Instant::now();
    // Each answer, postprocessed: the suggestion, or why it was dropped.
    let mut answers: Vec<(String, PostResult)> = Vec::new();
    if invoked {
        // Up to three distinct suggestions, the extra ones sampled warmer.
        let mut warmer = request.clone();
        warmer.options.temperature = Some(model.config().temperature.max(0.8));
        let requests = [request, warmer.clone(), warmer];
        let samples = futures::future::join_all(
            requests
                .into_iter()
                .map(|r| sample(&model, r, multiline, ticket.notify.notified())),
        )
        .await;
        for sample in samples {
            match sample {
                Ok(raw) => {
                    let done = finish(&text, cursor, &raw, multiline, max_lines);
                    answers.push((raw, done));
                }
                Err(Outcome::Cancelled) => {
                    return (Outcome::Cancelled, model_started.elapsed(), None)
                }
                Err(other) if answers.is_empty() => return (other, model_started.elapsed(), None),
                Err(_) => {}
            }
        }
    } else {
        // The model request runs as its own task, which also postprocesses
        // and caches the answer: if a newer keystroke supersedes this
        // request, the answer is still there for it (see the in-flight
        // check above).
        let (done_tx, done_rx) = tokio::sync::watch::channel(false);
        let task_state = Arc::clone(state);
        let task_key = key.clone();
        let task_text = Arc::clone(&text);
        let task_model = model.clone();
        let task = tokio::spawn(async move {
            let outcome = sample(&task_model, request, multiline, std::future::pending())
                .await
                .map(|raw| {
                    let done = finish(&task_text, cursor, &raw, multiline, max_lines);
                    if let Ok(done) = &done {
                        task_state
                            .completion
                            .cache
                            .lock()
                            .insert(task_key, done.clone());
                    }
                    (raw, done)
                });
            let _ = done_tx.send(true);
            outcome
        });
        state.completion.inflight.insert(
            snapshot.uri.clone(),
            shared::InFlight {
                key: key.clone(),
                done: done_rx,
                abort: task.abort_handle(),
            },
        );
        tokio::select! {
            joined = task => match joined {
                Ok(Ok(answer)) => answers.push(answer),
                Ok(Err(outcome)) => return (outcome, model_started.elapsed(), None),
                Err(_) => return (Outcome::Cancelled, model_started.elapsed(), None),
            },
            () = ticket.notify.notified() => {
                return (Outcome::Cancelled, model_started.elapsed(), None);
            }
        }
    }
    let model_time = model_started.elapsed();

    // Discard a result for a document that has changed since.
    if state.snapshot(&snapshot.uri).map(|s| s.version) != Some(snapshot.version)
        || !state.completion.is_current(ticket)
    {
        return (Outcome::Cancelled, model_time, None);
    }

    let mut completions: Vec<Cached> = Vec::new();
    for (raw, done) in answers {
        match done {
            Ok(done) if !completions.iter().any(|c| c.text == done.text) => completions.push(done),
            Ok(_) => {}
            Err(rejected) => {
                tracing::debug!(reason = rejected.reason(), raw = %crate::model::shorten_for_display(&raw, 200), "completion dropped");
            }
        }
    }
    let Some(first) = completions.first() else {
        return (Outcome::Empty, model_time, None);
    };
    if invoked {
        state.completion.cache.lock().insert(key, first.clone());
    }
    let list = answer(state, &snapshot, base, &typed_prefix, &completions);
    (Outcome::Shown { from_cache: false }, model_time, Some(list))
}

type PostResult = std::result::Result<Cached, postprocess::Rejected>;

/// Postprocesses `raw`, the model's answer at `cursor` of `text`.
fn finish(text: &str, cursor: usize, raw: &str, multiline: bool, max_lines: usize) -> PostResult {
    let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[cursor..].find('\n').map_or(text.len(), |i| cursor + i);
    let following = text.get(line_end + 1..).unwrap_or("");
    let input = postprocess::Input {
        raw,
        line_prefix: &text[line_start..cursor],
        line_suffix: text[cursor..line_end].trim_end_matches('\r'),
        following: &following[..window_end(following, 50)],
        preceding: &text[window_start(&text[..line_start], 50)..line_start],
        indent: IndentStyle::detect(text),
        multiline,
        max_lines,
    };
    postprocess::postprocess(&input).map(|done| Cached {
        text: done.text,
        replace_suffix_bytes: done.replace_suffix_bytes,
    })
}

/// Streams one FIM request to its end (or, in single-line mode, to the end
/// of its first line), unless `cancel` completes first.
async fn sample(
    model: &crate::model::Model,
    request: crate::model::FimRequest,
    multiline: bool,
    cancel: impl std::future::Future<Output = ()>,
) -> std::result::Result<String, Outcome> {
    let mut stream = model.fim(request);
    tokio::pin!(cancel);
    let mut raw = String::new();
    loop {
        tokio::select! {
            piece = stream.next() => match piece {
                None => return Ok(raw),
                Some(Ok(piece)) => {
                    raw.push_str(&piece);
                    // Single-line: the first line is all we keep, so stop
                    // paying for the rest (dropping the stream cancels it).
                    if !multiline && first_line_done(&raw) {
                        return Ok(raw);
                    }
                }
                Some(Err(err)) => {
                    super::model_status::log_failure(&err);
                    return Err(Outcome::Error);
                }
            },
            () = &mut cancel => return Err(Outcome::Cancelled),
        }
    }
}

/// The item for `completion`. `base` is where it goes in the client's
/// document: the cursor (empty range), or a selected menu item's range.
/// Without a selection, the range extends over the closers the completion
/// re-types (on the cursor line only).
fn answer(
    state: &State,
    snapshot: &Snapshot,
    base: Range,
    typed_prefix: &str,
    completions: &[Cached],
) -> InlineCompletionList {
    let items = completions
        .iter()
        .map(|c| item(state, snapshot, base, typed_prefix, c))
        .collect();
    InlineCompletionList { items }
}

fn item(
    state: &State,
    snapshot: &Snapshot,
    base: Range,
    typed_prefix: &str,
    completion: &Cached,
) -> InlineCompletionItem {
    let encoding = state.encoding();
    let mut range = base;
    if typed_prefix.is_empty() && completion.replace_suffix_bytes > 0 {
        let rope = &snapshot.rope;
        let cursor = position::offset_of(rope, base.end, encoding);
        let line = rope.byte_to_line(cursor);
        let line_end = rope.try_line_to_byte(line + 1).unwrap_or(rope.len_bytes());
        let end = (cursor + completion.replace_suffix_bytes).min(line_end);
        range.end = position::position_of(rope, end, encoding);
    }
    let id = format!(
        "c{}",
        state.completion.next_item.fetch_add(1, Ordering::Relaxed) + 1
    );
    state.completion.stats.lock().shown_id(id.clone());
    InlineCompletionItem {
        insert_text: format!("{typed_prefix}{}", completion.text),
        range,
        filter_text: None,
        command: Command {
            title: "Accept completion".to_string(),
            command: ACCEPT_COMMAND.to_string(),
            arguments: Some(vec![serde_json::json!({ "id": id })]),
        },
    }
}

/// Another open document, copied out for the prompt builder.
/// True once `raw` holds a complete first line with some content.
fn first_line_done(raw: &str) -> bool {
    let trimmed = raw.trim_start_matches(['\n', '\r']);
    trimmed.contains('\n') && !trimmed.trim().is_empty()
}

/// Byte offset in `text` after its first `lines` lines.
fn window_end(text: &str, lines: usize) -> usize {
    text.match_indices('\n')
        .nth(lines.saturating_sub(1))
        .map_or(text.len(), |(i, _)| i + 1)
}

/// Byte offset in `text` where its last `lines` lines start.
fn window_start(text: &str, lines: usize) -> usize {
    text.rmatch_indices('\n')
        .nth(lines)
        .map_or(0, |(i, _)| i + 1)
}

/// `fettle/stats`.
pub fn stats(state: &State) -> Report {
    state.completion.stats.lock().report()
}

/// `fettle.acceptCompletion`.
pub fn accept(state: &State, arguments: &[serde_json::Value]) -> Result<Option<serde_json::Value>> {
    let id = arguments
        .first()
        .and_then(|a| a.get("id"))
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            Error::invalid_params(format!(
                "{ACCEPT_COMMAND} expects [{{\"id\": \"…\"}}] (the id of the shown suggestion)"
            ))
        })?;
    if !state.completion.stats.lock().accept(id) {
        tracing::debug!(%id, "acceptance of an unknown or already accepted completion");
    }
    Ok(None)
}

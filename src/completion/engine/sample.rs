//! One model answer: streaming it (cut at the first line in single-line
//! mode, or when cancelled) and postprocessing it into a suggestion.
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;

use crate::completion::cache::Cached;
use crate::completion::postprocess::{self, IndentStyle};
use crate::completion::stats::Outcome;
use crate::config::{CompletionConfig, Provider};
use crate::model::{FimRequest, Model, ModelError, TextStream};

pub(super) type PostResult = Result<Cached, postprocess::Rejected>;

/// Lines before and after the cursor that tell the file's indentation:
/// 300 lines are plenty to vote on, and every completion scans them.
const INDENT_LINES: usize = 150;

/// The completion model, its requests bounded by `completion.deadline_ms`
/// (0: only the model's own limits). Not the embedded model: it has no
/// retries or servers to wait for, its first request loads the weights,
/// and an invoked request's samples queue on its one engine.
pub(super) fn with_deadline(model: Model, config: &CompletionConfig) -> Model {
    let deadline = config.deadline_ms;
    if deadline == 0 || model.config().provider == Provider::Local {
        return model;
    }
    model.with_deadline(Some(Duration::from_millis(deadline)))
}

/// The indentation of the lines around `cursor` of `text`.
pub(super) fn indent_around(text: &str, cursor: usize) -> IndentStyle {
    let (line_start, line_end) = line_bounds(text, cursor);
    indent_of_lines_around(text, line_start, line_end)
}

/// Where the cursor's line starts and ends (before its newline).
fn line_bounds(text: &str, cursor: usize) -> (usize, usize) {
    let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[cursor..].find('\n').map_or(text.len(), |i| cursor + i);
    (line_start, line_end)
}

/// The indentation of the lines around the line `line_start..line_end`.
fn indent_of_lines_around(text: &str, line_start: usize, line_end: usize) -> IndentStyle {
    // From the lines around the cursor: scanning a whole big file on
    // every completion cost more than the rest of postprocessing.
    IndentStyle::detect(
        &text[window_start(&text[..line_start], INDENT_LINES)
            ..line_end + window_end(&text[line_end..], INDENT_LINES)],
    )
}

/// Postprocesses `raw`, the model's answer at `cursor` of `text`; `indent`
/// is the lines' indentation there when it was found ahead (the scan,
/// 300 lines of memory a paused machine no longer has in its caches, was
/// the largest part of postprocessing after a pause).
pub(super) fn finish(
    text: &str,
    cursor: usize,
    raw: &str,
    multiline: bool,
    max_lines: usize,
    indent: Option<IndentStyle>,
) -> PostResult {
    let (line_start, line_end) = line_bounds(text, cursor);
    let following = text.get(line_end + 1..).unwrap_or("");
    let input = postprocess::Input {
        raw,
        line_prefix: &text[line_start..cursor],
        line_suffix: text[cursor..line_end].trim_end_matches('\r'),
        following: &following[..window_end(following, 50)],
        preceding: &text[window_start(&text[..line_start], 50)..line_start],
        indent: indent.unwrap_or_else(|| indent_of_lines_around(text, line_start, line_end)),
        multiline,
        max_lines,
    };
    postprocess::postprocess(&input).map(|done| Cached {
        text: done.text,
        replace_suffix_bytes: done.replace_suffix_bytes,
    })
}

/// What [`sample`] streams: a request, or the stream of one made ahead
/// (its body built, sent when first polled).
pub(super) enum Sampled {
    Request(FimRequest),
    Ready(TextStream),
}

impl From<FimRequest> for Sampled {
    fn from(request: FimRequest) -> Self {
        Sampled::Request(request)
    }
}

/// Streams one FIM request to its end (or, in single-line mode, to the end
/// of its first line), unless `cancel` completes first.
pub(super) async fn sample(
    model: &Model,
    request: impl Into<Sampled>,
    multiline: bool,
    cancel: impl Future<Output = ()>,
) -> Result<String, Outcome> {
    let mut stream = match request.into() {
        Sampled::Request(request) => model.fim(request),
        Sampled::Ready(stream) => stream,
    };
    tokio::pin!(cancel);
    let mut raw = String::new();
    loop {
        tokio::select! {
            piece = stream.next() => match piece {
                None => return Ok(raw),
                Some(Ok(piece)) => {
                    raw.push_str(&piece);
                    // Single-line: the first line is all we keep; the rest
                    // is not waited for (see `Model::release`).
                    if !multiline && first_line_done(&raw) {
                        model.release(stream);
                        return Ok(raw);
                    }
                }
                Some(Err(err)) => {
                    log_failure(&err);
                    return Err(Outcome::Error);
                }
            },
            () = &mut cancel => return Err(Outcome::Cancelled),
        }
    }
}

/// Logs a failed completion request: a paused model is expected (the
/// pause was logged, and announced, when it began), anything else is not.
fn log_failure(err: &ModelError) {
    match err {
        ModelError::Paused { .. } => tracing::debug!(error = %err, "completion skipped"),
        _ => tracing::warn!(error = %err, "completion request failed"),
    }
}

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

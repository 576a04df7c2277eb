//! `fettle.rewrite`: converts the arguments, runs the edit engine
//! (`crate::edit`) with progress and `fettle/taskEvent`s, and applies its
//! hunks as one versioned `workspace/applyEdit` — re-based onto the user's
//! typing when the rewritten lines are untouched, refused otherwise.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::{
    Diagnostic, DiagnosticSeverity, MessageType, NumberOrString, ProgressToken, Range, Url,
};

mod apply;

use super::agent::TaskEventNotification;
use super::progress::Progress;
use super::state::{Snapshot, State};
use crate::agent::types::{EventKind, TaskEvent};
use crate::config::ConfirmMode;
use crate::edit::{self, Problem, Reason, Refusal};
use crate::position::{self, PositionEncoding};
use apply::{apply, confirmed};

pub const REWRITE: &str = "fettle.rewrite";

const SHAPE: &str = r#"[{"uri": "file:///…", "range": {…}, "instruction": "…", "version": 3, "diagnostics": […]}] (instruction, version and diagnostics optional)"#;

/// The streamed text goes out in one `fettle/taskEvent` per this interval.
const TEXT_EVENT_INTERVAL: Duration = Duration::from_millis(50);

/// Rewrites in flight (for `window/workDoneProgress/cancel`) and statistics.
#[derive(Default)]
pub struct RewriteState {
    running: Mutex<Vec<(ProgressToken, CancellationToken)>>,
    counter: AtomicU64,
    pub stats: Mutex<edit::Stats>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    uri: Url,
    range: Range,
    instruction: Option<String>,
    version: Option<i32>,
    #[serde(default)]
    diagnostics: Vec<Diagnostic>,
}

/// Cancels the rewrites whose progress the user cancelled; false if none.
pub fn progress_cancelled(state: &State, token: &ProgressToken) -> bool {
    let running = state.rewrite.running.lock();
    let mut found = false;
    for (_, cancel) in running.iter().filter(|(t, _)| t == token) {
        tracing::info!(?token, "rewrite cancelled from its progress");
        cancel.cancel();
        found = true;
    }
    found
}

/// A rewrite's entry in `running`, removed however the rewrite ends
/// (a cancelled request drops the handler mid-way).
struct Registered<'a> {
    state: &'a State,
    cancel: CancellationToken,
}

impl<'a> Registered<'a> {
    fn new(state: &'a State, token: Option<&ProgressToken>) -> Self {
        let cancel = CancellationToken::new();
        if let Some(token) = token {
            state
                .rewrite
                .running
                .lock()
                .push((token.clone(), cancel.clone()));
        }
        Self { state, cancel }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        // Dropped with the request: stop the model too.
        self.cancel.cancel();
        self.state
            .rewrite
            .running
            .lock()
            .retain(|(_, c)| !c.is_cancelled());
    }
}

/// Records the outcome once, also when the request is cancelled (the
/// handler's future is then dropped mid-way).
struct Outcome<'a> {
    state: &'a State,
    started: Instant,
    model_time: Duration,
    /// Waiting for the editor: applying the edit, the user's confirmation.
    editor_time: Duration,
    recorded: bool,
}

impl Outcome<'_> {
    fn record(&mut self, refused: Option<Reason>) {
        self.recorded = true;
        self.state.rewrite.stats.lock().finished(
            refused,
            self.started.elapsed(),
            self.model_time,
            self.editor_time,
        );
    }
}

impl Drop for Outcome<'_> {
    fn drop(&mut self) {
        if !self.recorded {
            self.record(Some(Reason::Cancelled));
        }
    }
}

pub async fn rewrite(
    state: &Arc<State>,
    args: &[Value],
    token: Option<ProgressToken>,
) -> Result<Option<Value>> {
    let args = parse(args)?;
    let Some(snapshot) = state.parsed_snapshot(&args.uri).await else {
        return Err(Error::invalid_params(format!(
            "{REWRITE}: {} is not open in the editor (open it, then ask again)",
            args.uri
        )));
    };
    state.rewrite.stats.lock().requested();
    let mut outcome = Outcome {
        state,
        started: Instant::now(),
        model_time: Duration::ZERO,
        editor_time: Duration::ZERO,
        recorded: false,
    };
    let id = format!(
        "rewrite-{}",
        state.rewrite.counter.fetch_add(1, Ordering::Relaxed) + 1
    );
    // Registered before the progress begins: its cancel button can then
    // never be pressed too early.
    let progress = Progress::acquire(state, token, true).await;
    let registered = Registered::new(state, progress.token());
    progress.start("Fettle: rewriting").await;
    let result = run(
        state,
        &id,
        &args,
        snapshot,
        registered.cancel.clone(),
        &mut outcome,
    )
    .await;
    drop(registered);
    let (applied, summary) = match result {
        Ok(summary) => {
            outcome.record(None);
            (true, summary)
        }
        Err(refusal) => {
            outcome.model_time = outcome.model_time.max(refusal.model_time);
            outcome.record(Some(refusal.reason));
            tracing::info!(task = %id, reason = refusal.reason.as_str(), message = %refusal.message, "rewrite not applied");
            if refusal.reason == Reason::ModelTooSmall {
                // Offered instead of a plain warning: the fix is one click.
                crate::lsp::model_fetch::offer_coder(state, refusal.message.clone());
            } else if refusal.reason != Reason::Cancelled {
                state
                    .client
                    .show_message(MessageType::WARNING, format!("Fettle: {}", refusal.message))
                    .await;
            }
            (false, refusal.message)
        }
    };
    event(
        state,
        &id,
        EventKind::Status,
        &summary,
        json!({ "applied": applied }),
    )
    .await;
    progress.end(summary.clone()).await;
    Ok(Some(
        json!({ "applied": applied, "summary": summary, "taskId": id }),
    ))
}

fn parse(args: &[Value]) -> Result<Args> {
    let expected =
        |detail: String| Error::invalid_params(format!("{REWRITE} expects {SHAPE}; {detail}"));
    let value = match args.first() {
        Some(value) if value.is_object() => value,
        Some(value) => return Err(expected(format!("got {}", super::params::describe(value)))),
        None => return Err(expected("got no argument".to_owned())),
    };
    serde_json::from_value(value.clone()).map_err(|err| expected(err.to_string()))
}

async fn run(
    state: &Arc<State>,
    id: &str,
    args: &Args,
    snapshot: Snapshot,
    cancel: CancellationToken,
    outcome: &mut Outcome<'_>,
) -> std::result::Result<String, Refusal> {
    if let Some(version) = args.version.filter(|v| *v != snapshot.version) {
        return Err(Refusal::new(
            Reason::DocumentChanged,
            format!(
                "the document changed since this action was offered (version {version}, now {}); ask for the action again",
                snapshot.version
            ),
        ));
    }
    let path = args.uri.to_file_path().ok();
    if path.as_deref().is_some_and(crate::secrets::is_secret_path) {
        return Err(Refusal::new(
            Reason::Secret,
            "this file holds secrets, and Fettle never sends secret files to a model",
        ));
    }
    let encoding = state.encoding();
    let rope = snapshot.rope.clone();
    let range = position::range_to_bytes(&rope, args.range, encoding);
    let problems: Vec<Problem> = args
        .diagnostics
        .iter()
        .map(|d| problem(&rope, d, encoding))
        .collect();
    let roots = state.roots.read().clone();
    let root = path
        .as_ref()
        .and_then(|p| roots.iter().find(|r| p.starts_with(r)).cloned());
    let label = match (&path, &root) {
        (Some(p), Some(r)) => p.strip_prefix(r).map(|p| p.display().to_string()).ok(),
        (Some(p), None) => Some(p.display().to_string()),
        _ => None,
    }
    .unwrap_or_else(|| args.uri.to_string());
    let doc = edit::Snapshot {
        path: path.as_deref(),
        label: label.clone(),
        language: snapshot.language,
        rope: rope.clone(),
        tree: snapshot.tree.clone(),
    };
    let ask = edit::Ask {
        range,
        instruction: args.instruction.clone(),
        problems: problems.clone(),
    };
    let plan = edit::plan(&doc, &ask)?;
    let config = state.config();
    let model = state
        .models()
        .get_background(&config.edit.model)
        .map_err(|err| Refusal::new(Reason::Model, format!("the edit model: {err}")))?;
    let first_line = rope.byte_to_line(plan.range.start) + 1;
    event(
        state,
        id,
        EventKind::Status,
        &format!(
            "rewriting {label} from line {first_line}: {}",
            plan.instruction
        ),
        json!({ "uri": args.uri, "instruction": plan.instruction }),
    )
    .await;
    let phase = Instant::now();
    let redactor = redactor(state, root.clone()).await;
    let redactor_time = phase.elapsed();
    let (text_tx, forward) = forward_text(state, id);
    let index = state.index();
    let env = edit::Env {
        model: &model,
        index: &index,
        root: root.as_deref(),
        redactor: &redactor,
        max_prompt_tokens: config.edit.max_prompt_tokens as usize,
        text: Some(text_tx),
        cancel,
    };
    let phase = Instant::now();
    let result = edit::rewrite(&doc, plan, &problems, &env).await;
    let engine_time = phase.elapsed();
    drop(env);
    // Every streamed piece reaches the client before the outcome does.
    let _ = forward.await;
    let rewrite = result?;
    outcome.model_time = rewrite.model_time;
    let summary = rewrite.summary(&rope, &label);
    let diff = similar::TextDiff::from_lines(&rewrite.old, &rewrite.new)
        .unified_diff()
        .header(&label, &label)
        .to_string();
    let waiting = Instant::now();
    if config.edit.confirm == ConfirmMode::Ask && !confirmed(state, &summary, &diff).await {
        outcome.editor_time = waiting.elapsed();
        return Err(Refusal::new(
            Reason::Discarded,
            "discarded: the rewrite was not applied",
        ));
    }
    outcome.editor_time = waiting.elapsed();
    let phase = Instant::now();
    apply(
        state,
        &args.uri,
        &snapshot,
        &rewrite,
        &mut outcome.editor_time,
    )
    .await?;
    tracing::debug!(
        redactor_ms = ms(redactor_time),
        engine_ms = ms(engine_time),
        model_ms = ms(rewrite.model_time),
        apply_ms = ms(phase.elapsed()),
        editor_ms = ms(outcome.editor_time),
        "rewrite applied: where the time went"
    );
    event(
        state,
        id,
        EventKind::Edit,
        &summary,
        json!({ "uri": args.uri, "diff": diff }),
    )
    .await;
    Ok(summary)
}

/// The redactor for this workspace, knowing the values typed into open
/// secret buffers (built off the runtime: it may walk the workspace).
async fn redactor(
    state: &Arc<State>,
    root: Option<std::path::PathBuf>,
) -> Arc<crate::secrets::Redactor> {
    let secret_buffers: Vec<ropey::Rope> = state
        .documents
        .iter()
        .filter(|d| {
            d.key()
                .to_file_path()
                .is_ok_and(|p| crate::secrets::is_secret_path(&p))
        })
        .map(|d| d.document.rope.clone())
        .collect();
    let engine = state.completion.clone();
    let built =
        tokio::task::spawn_blocking(move || engine.redactor(root.as_deref(), &secret_buffers))
            .await;
    built.unwrap_or_else(|err| {
        tracing::error!(%err, "building the redactor failed; redacting secret shapes only");
        Arc::new(crate::secrets::Redactor::default())
    })
}

/// Sends the model's streamed text as `fettle/taskEvent`s, in order.
fn forward_text(
    state: &Arc<State>,
    id: &str,
) -> (mpsc::UnboundedSender<String>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let client = state.client.clone();
    let id = id.to_owned();
    let forward = tokio::spawn(async move {
        // The first piece goes out at once; after that, what arrives within
        // an interval goes out together (a preview needs no more, and a
        // notification per token would cost more than the rest of the
        // rewrite); the end of the stream flushes at once.
        let send = |text: String| {
            // A server that ignores `max_tokens` streams without end: no
            // notification past the documented size.
            let text = match crate::agent::output::bound_text(
                &text,
                crate::agent::output::MAX_FIELD_BYTES,
            ) {
                std::borrow::Cow::Borrowed(_) => text,
                std::borrow::Cow::Owned(cut) => cut,
            };
            client.send_notification::<TaskEventNotification>(TaskEvent {
                task_id: id.clone(),
                kind: EventKind::Text,
                text,
                data: Value::Null,
            })
        };
        let mut pending = String::new();
        let mut next_send = tokio::time::Instant::now();
        loop {
            let piece = if pending.is_empty() {
                rx.recv().await
            } else {
                match tokio::time::timeout_at(next_send, rx.recv()).await {
                    Ok(piece) => piece,
                    Err(_) => Some(String::new()),
                }
            };
            let Some(piece) = piece else {
                if !pending.is_empty() {
                    send(std::mem::take(&mut pending)).await;
                }
                break;
            };
            pending.push_str(&piece);
            let now = tokio::time::Instant::now();
            if now >= next_send && !pending.is_empty() {
                send(std::mem::take(&mut pending)).await;
                next_send = now + TEXT_EVENT_INTERVAL;
            }
        }
    });
    (tx, forward)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn event(state: &State, id: &str, kind: EventKind, text: &str, mut data: Value) {
    use crate::agent::output::{bound_json, bound_text, MAX_EVENT_BYTES, MAX_FIELD_BYTES};
    // Within the documented sizes, like the agent's events.
    let text = bound_text(text, MAX_FIELD_BYTES);
    bound_json(&mut data, MAX_EVENT_BYTES - MAX_FIELD_BYTES - 256);
    state
        .client
        .send_notification::<TaskEventNotification>(TaskEvent {
            task_id: id.to_owned(),
            kind,
            text: text.into_owned(),
            data,
        })
        .await;
}

fn problem(rope: &ropey::Rope, d: &Diagnostic, encoding: PositionEncoding) -> Problem {
    let severity = d.severity.map(|s| {
        match s {
            DiagnosticSeverity::ERROR => "error",
            DiagnosticSeverity::WARNING => "warning",
            DiagnosticSeverity::INFORMATION => "info",
            _ => "hint",
        }
        .to_owned()
    });
    let code = d.code.as_ref().map(|c| match c {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.clone(),
    });
    Problem {
        range: position::range_to_bytes(rope, d.range, encoding),
        severity,
        source: d.source.clone(),
        code,
        message: d.message.clone(),
    }
}

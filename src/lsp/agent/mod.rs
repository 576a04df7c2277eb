//! The agent's commands: `fettle.chat`, `fettle.fixDiagnostics`,
//! `fettle.cancel` and `fettle.undo`. The task runs on its own tokio task,
//! so cancelling the request (which drops this handler) cancels the task and
//! lets it stop cleanly rather than dropping it mid-write.

mod host;
pub use host::TaskEventNotification;
mod undo;

pub use undo::undo;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::{MessageType, ProgressToken, Range, Url};

use super::progress::Progress;
use super::state::State;
use crate::agent::prepare::{Notice, Overrides, Prepared};
use crate::agent::{
    run_task, CancellationToken, CheckGoal, Focus, TaskEnv, TaskResult, TaskStatus, SEE_DIAGNOSTICS,
};

pub const CHAT: &str = "fettle.chat";
pub const FIX_DIAGNOSTICS: &str = "fettle.fixDiagnostics";
pub const CANCEL: &str = "fettle.cancel";
pub const UNDO: &str = "fettle.undo";
pub const COMMANDS: [&str; 4] = [CHAT, FIX_DIAGNOSTICS, CANCEL, UNDO];

/// The running task (one at a time: two tasks editing the same files would
/// undo each other).
#[derive(Default)]
pub struct AgentState {
    running: Mutex<Option<(String, CancellationToken)>>,
    /// The running task's progress token (its cancel button cancels it).
    progress: Mutex<Option<ProgressToken>>,
    counter: AtomicU64,
}

// Unknown fields are refused: a misspelled or mistyped field (`{"textDocument": 7}`)
// must not quietly become "no file given" and start a whole-workspace task.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ChatArgs {
    message: String,
    uri: Option<Url>,
    range: Option<Range>,
    /// Continue the workspace's conversation: the earlier requests, their
    /// results and changes are told to the model (`agent::conversation`).
    #[serde(default, rename = "continue")]
    continue_conversation: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskIdArgs {
    task_id: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct UriArgs {
    uri: Option<Url>,
}

/// The argument shapes, in the words an error shows the user.
const CHAT_SHAPE: &str = r#"[{"message": "…", "uri": "file:///…", "range": {…}, "continue": true}] (uri, range and continue optional)"#;
const URI_SHAPE: &str = r#"[{"uri": "file:///…"}] or no argument"#;
const TASK_ID_SHAPE: &str = r#"[{"taskId": "…"}] or no argument"#;
const UNDO_SHAPE: &str = r#"[{"taskId": "…", "force": true}] or no argument"#;

/// The command's one argument object. Where every field is optional, no
/// argument, `null`, `{}` and `[]` (what Lua sends for `{}`) all mean
/// "the defaults". Errors say what shape was expected.
fn arg<T: for<'de> Deserialize<'de> + Default>(
    args: &[Value],
    command: &str,
    shape: &str,
    required: bool,
) -> Result<T> {
    let expected =
        |detail: String| Error::invalid_params(format!("{command} expects {shape}; {detail}"));
    let value = match args.first() {
        Some(value) if !super::params::is_empty(value) => value,
        _ if !required => return Ok(T::default()),
        None => return Err(expected("got no argument".to_owned())),
        Some(value) => return Err(expected(format!("got {}", super::params::describe(value)))),
    };
    if !value.is_object() {
        return Err(expected(format!("got {}", super::params::describe(value))));
    }
    serde_json::from_value(value.clone()).map_err(|err| expected(err.to_string()))
}

pub async fn chat(
    state: &Arc<State>,
    args: &[Value],
    token: Option<ProgressToken>,
) -> Result<Option<Value>> {
    let args: ChatArgs = arg(args, CHAT, CHAT_SHAPE, true)?;
    if args.message.trim().is_empty() {
        return Err(Error::invalid_params(format!(
            "{CHAT}: `message` is empty; say what to do"
        )));
    }
    let focus_lines = args.range.map(|r| (r.start.line + 1, r.end.line + 1));
    let conversation = Some(args.continue_conversation);
    run(
        state,
        args.message,
        args.uri,
        focus_lines,
        None,
        conversation,
        token,
    )
    .await
}

pub async fn fix_diagnostics(
    state: &Arc<State>,
    args: &[Value],
    token: Option<ProgressToken>,
) -> Result<Option<Value>> {
    let args: UriArgs = arg(args, FIX_DIAGNOSTICS, URI_SHAPE, false)?;
    let path = args.uri.as_ref().and_then(|uri| uri.to_file_path().ok());
    let (goal, check_goal) = match (&args.uri, path) {
        (Some(_), Some(path)) => (
            format!(
                "Fix the errors in {} so that it has no syntax or checker errors and the tests pass. {SEE_DIAGNOSTICS}",
                path.display()
            ),
            CheckGoal::CleanFile(path),
        ),
        (Some(uri), None) => (
            format!("Fix the errors in {uri} so that the tests pass."),
            CheckGoal::NoNewErrors,
        ),
        (None, _) => (
            format!("Fix the errors in the workspace so that the checkers report none and the tests pass. {SEE_DIAGNOSTICS}"),
            CheckGoal::Clean,
        ),
    };
    run(state, goal, args.uri, None, Some(check_goal), None, token).await
}

pub fn cancel(state: &Arc<State>, args: &[Value]) -> Result<Option<Value>> {
    let args: TaskIdArgs = arg(args, CANCEL, TASK_ID_SHAPE, false)?;
    if let Some((id, cancel)) = state.agent.running.lock().as_ref() {
        if args.task_id.as_ref().is_none_or(|wanted| wanted == id) {
            tracing::info!(task = %id, "cancelling");
            cancel.cancel();
        }
    }
    Ok(None)
}

fn internal(err: impl std::fmt::Display) -> Error {
    Error {
        code: tower_lsp::jsonrpc::ErrorCode::InternalError,
        message: format!("fettle: {err}").into(),
        data: None,
    }
}

async fn run(
    state: &Arc<State>,
    goal: String,
    uri: Option<Url>,
    lines: Option<(u32, u32)>,
    check_goal: Option<CheckGoal>,
    // A chat: `Some(continued)`; other tasks are no part of a conversation.
    conversation: Option<bool>,
    token: Option<ProgressToken>,
) -> Result<Option<Value>> {
    let request = goal.clone();
    let id = format!(
        "t{}-{}",
        std::process::id(),
        state.agent.counter.fetch_add(1, Ordering::Relaxed) + 1
    );
    let focus_path = uri.as_ref().and_then(|u| u.to_file_path().ok());
    let root = match pick_root(state, focus_path.as_deref()) {
        Some(root) => root,
        None => {
            return Ok(Some(
                failed(
                    state,
                    &id,
                    "no workspace folder is open; open a folder to run the agent",
                )
                .await,
            ))
        }
    };
    let config = state.config();
    let model = match state.models().get_background(&config.agent.model) {
        Ok(model) => model,
        Err(err) => {
            return Ok(Some(
                failed(
                    state,
                    &id,
                    &format!("the agent's model cannot be used: {err}"),
                )
                .await,
            ))
        }
    };
    let cancel = CancellationToken::new();
    {
        let mut running = state.agent.running.lock();
        if let Some((other, _)) = running.as_ref() {
            return Err(Error::invalid_params(format!(
                "fettle: task {other} is still running; wait for it or cancel it ({CANCEL})"
            )));
        }
        *running = Some((id.clone(), cancel.clone()));
    }
    let _clear = ClearRunning(state.clone());
    // Notices are shown as they happened, before any failure.
    let mut sandbox_notices = Vec::new();
    // It probes the sandbox and looks for checkers (processes, files): off
    // the async worker, and in this handler's own task, not in the
    // transport's synchronous start of it, which would hold up reading the
    // next message meanwhile.
    tokio::task::yield_now().await;
    let prepared = crate::runtime::blocking(|| {
        crate::agent::prepare::prepare(
            id.clone(),
            goal,
            root.clone(),
            &config,
            &Overrides {
                check_goal,
                ..Overrides::default()
            },
            &mut |notice| match notice {
                Notice::Sandbox(text) | Notice::CheckerMissing(text) => sandbox_notices.push(text),
                Notice::Checkers(list) => tracing::info!("checking with {}", list.join("; ")),
                Notice::TestCommandDetected { .. } | Notice::NoTestCommand => {}
            },
        )
    });
    for notice in sandbox_notices {
        state
            .client
            .show_message(MessageType::WARNING, format!("fettle: {notice}"))
            .await;
    }
    let Prepared { mut spec, store } = match prepared {
        Ok(prepared) => prepared,
        Err(err) => return Ok(Some(failed(state, &id, &err).await)),
    };
    spec.focus = focus_path.map(|path| Focus { path, lines });
    if conversation == Some(true) {
        let earlier = crate::runtime::blocking(|| crate::agent::conversation::load(&root));
        spec.history = earlier.for_prompt();
    }
    let progress = Progress::begin_cancellable(state, "Fettle agent", token).await;
    *state.agent.progress.lock() = progress.token().cloned();
    let (lsp_host, forwarder) = host::LspHost::new(state.clone(), progress);
    let reviewer = match crate::agent::prepare::reviewer_model(
        &config,
        &state.models(),
        config.agent.review,
    ) {
        Ok(reviewer) => reviewer,
        Err(err) => return Ok(Some(failed(state, &id, &err).await)),
    };
    let env = TaskEnv {
        model,
        reviewer,
        host: Arc::new(lsp_host),
        index: state.index(),
        store,
    };
    // Cancels the task when this handler is dropped (the client cancelled
    // the request): the task itself then stops at a safe point.
    if let Some(why) = crate::model::local::catalog::too_small_for(
        env.model.config(),
        "run the repair loop",
        "agent.model",
    ) {
        // The task fails at once (run_task says why); the fix is offered.
        crate::lsp::model_fetch::offer_coder(state, why);
    }
    let guard = cancel.clone().drop_guard();
    let task = tokio::spawn(run_task(spec, env, cancel));
    let result = task.await;
    guard.disarm();
    // The host (and its event sender) is gone with the task: flush events.
    let _ = forwarder.await;
    let result = match result {
        Ok(result) => result,
        Err(err) => {
            tracing::error!(%err, "agent task panicked");
            return Ok(Some(
                failed(state, &id, "the agent task crashed; see the log").await,
            ));
        }
    };
    tracing::info!(task = %id, status = result.status.as_str(), iterations = result.iterations, tool_calls = result.tool_calls, ms = result.elapsed_ms, "task finished");
    if matches!(result.status, TaskStatus::Failed) {
        state
            .client
            .show_message(MessageType::ERROR, format!("fettle: {}", result.summary))
            .await;
    }
    if !result.editor_notes.is_empty() {
        // Buffer and disk must agree after a task, or the user is told
        // precisely which files to look at.
        let lines: Vec<&str> = result
            .editor_notes
            .iter()
            .map(|n| n.message.as_str())
            .collect();
        state
            .client
            .show_message(
                MessageType::WARNING,
                format!("fettle: after the task:\n{}", lines.join("\n")),
            )
            .await;
    }
    let mut json = to_json(&result);
    if let Some(continued) = conversation {
        let turn = crate::agent::conversation::Turn {
            task_id: result.task_id.clone(),
            request,
            status: result.status.as_str().to_owned(),
            summary: result.summary.clone(),
            diff: result.diff.clone(),
        };
        match crate::agent::conversation::record(&root, continued, turn) {
            Ok(turns) => json["conversation"] = serde_json::json!({ "turns": turns }),
            Err(err) => tracing::warn!("the conversation could not be kept: {err}"),
        }
    }
    Ok(Some(json))
}

struct ClearRunning(Arc<State>);
impl Drop for ClearRunning {
    fn drop(&mut self) {
        *self.0.agent.running.lock() = None;
        *self.0.agent.progress.lock() = None;
    }
}

/// On `shutdown`: the running task stops at its next safe point (its
/// commands' process groups are killed) rather than being dropped at exit.
pub fn cancel_running(state: &State) {
    if let Some((id, cancel)) = state.agent.running.lock().as_ref() {
        tracing::info!(task = %id, "shutdown: cancelling the running task");
        cancel.cancel();
    }
}

/// `window/workDoneProgress/cancel`: the user pressed the cancel button of
/// the running task's progress.
pub fn progress_cancelled(state: &Arc<State>, token: &ProgressToken) {
    if state.agent.progress.lock().as_ref() != Some(token) {
        return;
    }
    if let Some((id, cancel)) = state.agent.running.lock().as_ref() {
        tracing::info!(task = %id, "cancelled from its progress");
        cancel.cancel();
    }
}

/// The command's answer, bounded like every event (`docs/lsp-extensions.md`).
fn to_json(result: &TaskResult) -> Value {
    let mut json = result.to_json(|p| {
        Url::from_file_path(p)
            .map(|u| u.to_string())
            .unwrap_or_else(|()| p.display().to_string())
    });
    crate::agent::output::bound_json(&mut json, crate::agent::output::MAX_EVENT_BYTES);
    json
}

/// A task that could not start: told to the user and answered as `failed`.
async fn failed(state: &State, id: &str, why: &str) -> Value {
    state
        .client
        .show_message(MessageType::ERROR, format!("fettle: {why}"))
        .await;
    to_json(&TaskResult::failed(id, why))
}

/// The workspace folder containing `path`, else the first one.
fn pick_root(state: &State, path: Option<&Path>) -> Option<PathBuf> {
    let roots = state.roots.read();
    path.and_then(|p| {
        roots
            .iter()
            .filter(|r| p.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .cloned()
    })
    .or_else(|| roots.first().cloned())
}

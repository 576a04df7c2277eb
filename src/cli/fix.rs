//! `fettle fix`: the repair loop from a terminal. Progress goes to stderr;
//! stdout gets the final diff (or, with `--json`, the task result). Exit
//! codes: 0 verified, 1 gave up (or failed, or cancelled), 2 usage or
//! configuration errors.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::agent::host::{BufferEdit, Host};
use crate::agent::prepare::{prepare, Notice, Overrides, Prepared};
use crate::agent::undo::{self, UndoError};
use crate::agent::{run_task, CheckGoal, EventKind, TaskEnv, TaskEvent, TaskStatus, DEFAULT_GOAL};

/// The goal of `fettle fix --trace FILE` without `--goal`.
const TRACE_GOAL: &str = "Fix the error in the stack trace given, where it starts (its innermost frame in the workspace), and keep the tests passing.";

/// The goal of `fettle fix --check`.
fn check_goal() -> String {
    format!(
        "Make the project's checkers report no errors (and keep the tests passing). {}",
        crate::agent::SEE_DIAGNOSTICS
    )
}
use crate::index::{IndexProgress, IndexSettings, WorkspaceIndex};
use crate::model::{shorten_for_display, Models};

#[derive(Debug, Args)]
pub struct FixArgs {
    /// What to achieve (default: "make the tests pass"; with --trace, fix
    /// the error in the trace).
    #[arg(long)]
    goal: Option<String>,
    /// The command that verifies the work (default: `agent.test_command`, else detected).
    #[arg(long = "test", value_name = "CMD")]
    test: Option<String>,
    /// Succeed only when the project's checkers (compiler, type checker,
    /// linter; see `fettle check`) report no errors, and the tests pass.
    #[arg(long)]
    check: bool,
    /// Most edit–test rounds (default: `agent.max_iterations`).
    #[arg(long, value_name = "N")]
    max_iterations: Option<u32>,
    /// Candidate fixes per attempt, each tested in its own copy of the
    /// workspace, the best kept (default: `agent.candidates`; at most 8).
    #[arg(long, value_name = "N")]
    candidates: Option<u32>,
    /// Continue the workspace's conversation: the model is told the earlier
    /// requests (from the editor's chat or `fettle fix`), how their tasks
    /// ended and what they changed. Without it a task starts a new one.
    #[arg(long = "continue")]
    continue_conversation: bool,
    /// With candidates, do not try small mechanical changes (an operator,
    /// a literal, two arguments swapped) before asking the model (default:
    /// `agent.mutants`).
    #[arg(long)]
    no_mutants: bool,
    /// Before reporting success, have a reviewer read the change (default:
    /// `agent.review`); a rejection costs one more round.
    #[arg(long)]
    review: bool,
    /// A stack trace (a file, `-` for stdin): its workspace frames' functions
    /// are shown to the model first (Python, Rust, Node.js, Go traces).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// When the tests fail, bisect the git history from REV (where they
    /// pass) to HEAD; the first bad commit and its diff go to the model.
    #[arg(long, value_name = "REV")]
    since: Option<String>,
    /// Like --since, walking back from HEAD to a commit that passes.
    #[arg(long, conflicts_with = "since")]
    bisect: bool,
    /// Write tests for the goal first, check that they fail, then make them
    /// pass (needs --goal); the tests stay in the diff.
    #[arg(long, requires = "goal")]
    tests_first: bool,
    /// Plan first: the model writes a short plan, followed by every attempt
    /// and revised after a failure (default: `agent.plan`).
    #[arg(long)]
    plan: bool,
    /// Approve every command the agent asks to run.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the task result as JSON on stdout instead of the diff.
    #[arg(long)]
    json: bool,
    /// Restore the files the last task changed (byte for byte) instead of running one.
    #[arg(long)]
    undo: bool,
    /// With --undo: which task (default: the latest).
    #[arg(long, value_name = "ID", requires = "undo")]
    task: Option<String>,
    /// With --undo: also restore files changed after the task.
    #[arg(long, requires = "undo")]
    force: bool,
    /// The workspace (default: the current directory).
    path: Option<PathBuf>,
}

pub fn run(args: FixArgs) -> i32 {
    crate::logging::init("warn");
    let root = match super::workspace_or_cwd(args.path.clone()) {
        Ok(root) => root,
        Err(code) => return code,
    };
    if args.undo {
        return undo(&root, args.task.as_deref(), args.force, args.json);
    }
    let config = match super::load_config(&root) {
        Ok(config) => config,
        Err(code) => return code,
    };
    if args.max_iterations == Some(0) {
        eprintln!("fettle: --max-iterations must be greater than 0");
        return 2;
    }
    if let Some(n) = args.candidates {
        if n == 0 || n > crate::config::MAX_CANDIDATES {
            eprintln!(
                "fettle: --candidates must be between 1 and {}",
                crate::config::MAX_CANDIDATES
            );
            return 2;
        }
    }
    if let Some(code) = install_missing_model(&config) {
        return code;
    }
    let models = Models::from_config(&config);
    let model = match models.get_background(&config.agent.model) {
        Ok(model) => model,
        Err(err) => {
            eprintln!(
                "fettle: the agent's model `{}` cannot be used: {err}",
                config.agent.model
            );
            return 2;
        }
    };
    let goal = args.goal.clone().unwrap_or_else(|| {
        if args.check {
            check_goal()
        } else if args.trace.is_some() {
            // A crash from elsewhere: passing tests do not mean it is fixed.
            TRACE_GOAL.to_owned()
        } else {
            DEFAULT_GOAL.to_owned()
        }
    });
    let id = format!("fix-{}-{}", std::process::id(), now_ms());
    let overrides = Overrides {
        test_command: args.test.clone(),
        max_iterations: args.max_iterations,
        candidates: args.candidates,
        no_mutants: args.no_mutants,
        review: args.review,
        plan: args.plan,
        tests_first: args.tests_first,
        bisect: match (&args.since, args.bisect) {
            (Some(rev), _) => Some(crate::agent::types::BisectRequest {
                since: Some(rev.clone()),
            }),
            (None, true) => Some(crate::agent::types::BisectRequest::default()),
            (None, false) => None,
        },
        check_goal: args.check.then_some(CheckGoal::Clean),
    };
    let request = goal.clone();
    let prepared = prepare(
        id,
        goal,
        root.clone(),
        &config,
        &overrides,
        &mut |notice| match notice {
            Notice::TestCommandDetected { command, reason } => {
                eprintln!("fettle: testing with `{command}` ({reason})");
            }
            Notice::NoTestCommand => {
                eprintln!(
                    "fettle: no test command found (give one with --test); verifying syntax only"
                );
            }
            Notice::Sandbox(text) | Notice::CheckerMissing(text) => eprintln!("fettle: {text}"),
            Notice::Checkers(list) => eprintln!("fettle: checking with {}", list.join("; ")),
        },
    );
    let Prepared { mut spec, store } = match prepared {
        Ok(prepared) => prepared,
        Err(err) => {
            eprintln!("fettle: {err}");
            return 2;
        }
    };
    if args.continue_conversation {
        spec.history = crate::agent::conversation::load(&root).for_prompt();
        if spec.history.is_none() {
            eprintln!("fettle: --continue: no earlier request in this workspace; starting a new conversation");
        }
    }
    if let Some(path) = &args.trace {
        match read_trace(path) {
            Ok(text) => spec.trace = Some(text),
            Err(err) => {
                eprintln!("fettle: --trace {}: {err}", path.display());
                return 2;
            }
        }
    }
    if args.check && spec.checkers.is_empty() {
        eprintln!(
            "fettle: --check: no checker for {} (`fettle check` says why); install one or set check.commands.<language>",
            root.display()
        );
        return 2;
    }
    let index = WorkspaceIndex::new(IndexSettings::from_config(&config.index));
    if config.index.enabled {
        index.index_roots(
            std::slice::from_ref(&root),
            &|_: IndexProgress| {},
            &CancellationToken::new(),
        );
    }
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let host = Arc::new(CliHost {
        yes: args.yes,
        interactive: std::io::stdin().is_terminal(),
    });
    let reviewer = match crate::agent::prepare::reviewer_model(
        &config,
        &models,
        args.review || config.agent.review,
    ) {
        Ok(reviewer) => reviewer,
        Err(err) => {
            eprintln!("fettle: {err}");
            return 2;
        }
    };
    let env = TaskEnv {
        model,
        reviewer,
        host,
        index: Arc::new(index),
        store,
    };
    let cancel = CancellationToken::new();
    let result = runtime.block_on(async {
        let on_signal = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nfettle: cancelling (Ctrl-C again to kill)…");
                on_signal.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    super::exit(130);
                }
            }
        });
        run_task(spec, env, cancel).await
    });
    runtime.shutdown_background();
    let turn = crate::agent::conversation::Turn {
        task_id: result.task_id.clone(),
        request,
        status: result.status.as_str().to_owned(),
        summary: result.summary.clone(),
        diff: result.diff.clone(),
    };
    if let Err(err) = crate::agent::conversation::record(&root, args.continue_conversation, turn) {
        eprintln!("fettle: the conversation could not be kept (a later --continue will not know this task): {err}");
    }

    eprintln!("\n{}", result.summary);
    eprintln!(
        "fettle: {} after {} iteration(s), {} tool call(s), {} tokens in / {} out, {:.1} s",
        result.status.as_str(),
        result.iterations,
        result.tool_calls,
        result.tokens.input,
        result.tokens.output,
        result.elapsed_ms as f64 / 1000.0
    );
    if !result.changed_files.is_empty() {
        eprintln!(
            "fettle: undo with `fettle fix --undo --task {}`",
            result.task_id
        );
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = if args.json {
        // One line of bounded size, whatever the task's commands wrote.
        let mut json = result.to_json(|p| p.display().to_string());
        crate::agent::output::bound_json(&mut json, crate::agent::output::MAX_EVENT_BYTES);
        writeln!(out, "{json}")
    } else {
        write!(out, "{}", result.diff)
    };
    if let Err(err) = written.and_then(|()| out.flush()) {
        eprintln!("fettle: cannot write the result: {err}");
    }
    match result.status {
        TaskStatus::Success => 0,
        _ => 1,
    }
}

/// The most of a trace file read.
const MAX_TRACE_FILE_BYTES: u64 = 1024 * 1024;

/// A trace from a file (a regular one, bounded) or stdin (`-`).
fn read_trace(path: &Path) -> Result<String, String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(std::io::stdin(), MAX_TRACE_FILE_BYTES),
            &mut text,
        )
        .map_err(|err| err.to_string())?;
        return Ok(text);
    }
    crate::fsread::read_regular_to_string(path, MAX_TRACE_FILE_BYTES).map_err(|err| err.to_string())
}

fn undo(root: &Path, task: Option<&str>, force: bool, json: bool) -> i32 {
    // No editor: nothing in the undo waits, so no runtime is needed.
    let undone = futures::executor::block_on(undo::undo(root, task, force, &undo::NoBuffers));
    let undone = match undone {
        Ok(undone) => undone,
        Err(err) => {
            eprintln!("fettle: {err}");
            return match err {
                UndoError::Restore(_) => 1,
                UndoError::Store(_) | UndoError::NotFound(_) => 2,
            };
        }
    };
    let report = &undone.report;
    for path in &report.restored {
        eprintln!("restored {}", path.display());
    }
    for path in &report.removed {
        eprintln!("removed {} (the task created it)", path.display());
    }
    for path in &report.unchanged {
        eprintln!("{} is already as before the task", path.display());
    }
    for (path, why) in &report.skipped {
        eprintln!(
            "skipped {} ({why}; --force restores it anyway)",
            path.display()
        );
    }
    for path in &report.removed_dirs {
        eprintln!("removed {}/ (the task created it)", path.display());
    }
    for (path, why) in &report.kept_dirs {
        eprintln!("kept {}/ ({why})", path.display());
    }
    for (path, why) in &report.left {
        eprintln!("kept {} ({why})", path.display());
    }
    for (path, trash) in &report.trashed {
        eprintln!(
            "moved {} to {} (kept, not deleted)",
            path.display(),
            trash.display()
        );
    }
    if json {
        let out = serde_json::json!({
            "taskId": undone.task_id,
            "restored": report.restored.iter().chain(report.removed.iter()).map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "unchanged": report.unchanged.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "skipped": report.skipped.iter().map(|(p, why)| serde_json::json!({"path": p.display().to_string(), "reason": why})).collect::<Vec<_>>(),
            "removedDirectories": report.removed_dirs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "keptDirectories": report.kept_dirs.iter().map(|(p, why)| serde_json::json!({"path": p.display().to_string(), "reason": why})).collect::<Vec<_>>(),
            "kept": report.left.iter().map(|(p, why)| serde_json::json!({"path": p.display().to_string(), "reason": why})).collect::<Vec<_>>(),
            "trashed": report.trashed.iter().map(|(p, to)| serde_json::json!({"path": p.display().to_string(), "movedTo": to.display().to_string()})).collect::<Vec<_>>(),
        });
        println!("{out}");
    }
    if report.skipped.is_empty() {
        0
    } else {
        1
    }
}

/// The agent's model is the embedded default and its weights are missing:
/// installs them first (`models.<name>.auto_fetch`), or says what to run.
/// `Some(exit code)` when the task cannot go on.
fn install_missing_model(config: &crate::config::Config) -> Option<i32> {
    use crate::model::local::fetch;
    let dest = fetch::auto_fetch_target(config.model(&config.agent.model)?)?;
    eprintln!(
        "fettle: the embedded model is not installed; installing it at {} (98 MB)",
        dest.display()
    );
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return Some(code),
    };
    match runtime.block_on(fetch::fetch_default(&dest, &mut |line: &str| {
        eprintln!("fettle: {line}")
    })) {
        Ok(done) => {
            eprintln!(
                "fettle: installed {} ({:.0} MB, checksum verified)",
                done.path.display(),
                done.bytes as f64 / 1e6
            );
            None
        }
        Err(err) => {
            eprintln!(
                "fettle: could not install the embedded model: {err:#}; run `fettle model fetch` with network access, or give the agent another model (agent.model)"
            );
            Some(2)
        }
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// The terminal: progress lines on stderr, approvals as a y/N prompt.
struct CliHost {
    yes: bool,
    interactive: bool,
}

impl CliHost {
    /// A yes/no question on the terminal: `--yes` says yes (`assumed`),
    /// no terminal says no (`refused`), else `question [y/N]` is asked.
    async fn ask(&self, assumed: String, refused: String, question: String) -> bool {
        if self.yes {
            eprintln!("fettle: {assumed}");
            return true;
        }
        if !self.interactive {
            eprintln!("fettle: {refused} and stdin is not a terminal (pass --yes to approve)");
            return false;
        }
        tokio::task::spawn_blocking(move || {
            eprint!("fettle: {question} [y/N] ");
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            if std::io::stdin().lock().read_line(&mut answer).is_err() {
                return false;
            }
            matches!(answer.trim(), "y" | "Y" | "yes")
        })
        .await
        .unwrap_or(false)
    }
}

impl Host for CliHost {
    fn event(&self, event: TaskEvent) {
        let line = match event.kind {
            EventKind::Status => format!("fettle: {}", event.text),
            EventKind::Text => format!("  model: {}", shorten_for_display(event.text.trim(), 300)),
            EventKind::ToolCall => format!("  → {}", event.text),
            EventKind::ToolResult => return,
            EventKind::Edit => format!("  ✎ {}", event.text),
            EventKind::Verify => {
                let mark = if event.data["passed"] == true {
                    "✓"
                } else {
                    "✗"
                };
                format!("  {mark} {}", event.text)
            }
        };
        eprintln!("{line}");
    }

    fn buffer(&self, _path: &Path) -> Option<String> {
        None
    }

    fn edit_buffer<'a>(&'a self, _: &'a Path, _: &'a str, _: &'a str) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async { BufferEdit::NotOpen })
    }

    fn approve_plan<'a>(&'a self, plan: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(self.ask(
            "following the plan (--yes)".to_owned(),
            "the plan needs approval".to_owned(),
            format!("the plan:\n{plan}\nfettle: follow it?"),
        ))
    }

    fn approve<'a>(&'a self, command: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(self.ask(
            format!("running `{command}` (--yes)"),
            format!("not running `{command}`: approval needed"),
            format!("run `{command}`?"),
        ))
    }
}

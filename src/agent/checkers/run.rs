//! Running checkers: like the tests (`agent::exec`: own process group,
//! timeout, limits, scrubbed environment, the sandbox), one after another,
//! and reading what each printed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::detect::{Checker, FILES};
use super::{locate, parse, CheckDiagnostic, Severity};
use crate::agent::exec::{self, CommandSpec, Limits};
use crate::agent::sandbox::SandboxPolicy;

/// Most files handed to a per-file checker in one run.
const MAX_FILES: usize = 1000;
/// Output kept for parsing: a big project's JSON diagnostics, in full.
const MAX_OUTPUT_BYTES: usize = 32 << 20;
const MAX_OUTPUT_LINES: usize = 1 << 20;

pub struct RunSettings<'a> {
    /// The workspace root (canonical): where checkers run, and the only
    /// place whose diagnostics are kept.
    pub root: &'a Path,
    pub timeout: Duration,
    pub allow_env: &'a [String],
    pub limits: Limits,
    pub sandbox: Option<&'a SandboxPolicy>,
}

/// What one checker run found.
#[derive(Clone, Debug)]
pub struct CheckRun {
    pub checker: Checker,
    /// The command as run (`{files}` filled in).
    pub command: String,
    pub diagnostics: Vec<CheckDiagnostic>,
    /// Errors without a place (a broken configuration).
    pub general: Vec<String>,
    /// The checker itself failed (not found, timed out, crashed, or exited
    /// non-zero without saying why in a form Fettle reads): what happened,
    /// with the head and tail of its output.
    pub failure: Option<String>,
    /// Diagnostics outside the workspace (dependencies), dropped.
    pub outside: usize,
    pub elapsed: Duration,
}

impl CheckRun {
    /// Errors, counting a failed run and each placeless error as one.
    pub fn errors(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
            + self.general.len()
            + usize::from(self.failure.is_some())
    }
}

/// Every checker run of one check.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub runs: Vec<CheckRun>,
}

impl CheckReport {
    pub fn errors(&self) -> usize {
        self.runs.iter().map(CheckRun::errors).sum()
    }

    /// Error diagnostics in `path`.
    pub fn errors_in(&self, path: &Path) -> usize {
        self.diagnostics()
            .filter(|d| d.severity == Severity::Error && d.path == path)
            .count()
    }

    pub fn diagnostics(&self) -> impl Iterator<Item = &CheckDiagnostic> {
        self.runs.iter().flat_map(|r| r.diagnostics.iter())
    }

    /// The checkers' names, for messages: "rustc, ruff".
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.runs.iter().map(|r| r.checker.name.as_str()).collect();
        names.join(", ")
    }
}

/// Runs `checkers` in `settings.root`. Per-file checkers get the files of
/// their language in `files`, or every such file of the project when
/// `files` is `None`; with none to check they do not run.
pub async fn run_checkers(
    checkers: &[Checker],
    files: Option<&[PathBuf]>,
    settings: &RunSettings<'_>,
    cancel: &CancellationToken,
) -> CheckReport {
    let mut report = CheckReport::default();
    for checker in checkers {
        if cancel.is_cancelled() {
            break;
        }
        if !checker.per_file() {
            // A checker that walks the tree itself would block on a FIFO
            // or read `/dev/zero` until its memory limit: a cloned
            // repository must not be able to do that to `fettle check`.
            let traps = traps(settings.root, checker);
            if !traps.is_empty() {
                report.runs.push(not_run(checker, &traps));
                continue;
            }
        }
        let command = if checker.per_file() {
            let chosen = match files {
                Some(files) => files
                    .iter()
                    .filter(|f| checker.covers(f) && f.starts_with(settings.root))
                    .take(MAX_FILES)
                    .cloned()
                    .collect(),
                None => project_files(settings.root, checker),
            };
            if chosen.is_empty() {
                continue;
            }
            let quoted: Vec<String> = chosen
                .iter()
                .map(|f| {
                    exec::shell_quote(&f.strip_prefix(settings.root).unwrap_or(f).to_string_lossy())
                })
                .collect();
            checker.command.replace(FILES, &quoted.join(" "))
        } else {
            checker.command.clone()
        };
        report
            .runs
            .push(run_one(checker, command, settings, cancel).await);
    }
    report
}

async fn run_one(
    checker: &Checker,
    command: String,
    settings: &RunSettings<'_>,
    cancel: &CancellationToken,
) -> CheckRun {
    let spec = CommandSpec {
        command: command.clone(),
        cwd: settings.root.to_path_buf(),
        timeout: settings.timeout,
        max_output_bytes: MAX_OUTPUT_BYTES,
        max_output_lines: MAX_OUTPUT_LINES,
        env_allow: settings.allow_env.to_vec(),
        limits: settings.limits,
        sandbox: settings.sandbox.cloned(),
    };
    let mut run = CheckRun {
        checker: checker.clone(),
        command,
        diagnostics: Vec::new(),
        general: Vec::new(),
        failure: None,
        outside: 0,
        elapsed: Duration::ZERO,
    };
    let outcome = match exec::run(&spec, cancel).await {
        Ok(outcome) => outcome,
        Err(err) => {
            run.failure = Some(format!("`{}` could not be started: {err}", run.command));
            return run;
        }
    };
    run.elapsed = outcome.elapsed;
    let parsed = parse::parse(checker.format, &outcome.output);
    let located = locate::locate(
        parsed.diagnostics,
        parse::unit(checker.format),
        settings.root,
        &checker.name,
    );
    run.diagnostics = located.diagnostics;
    run.outside = located.outside;
    run.general = parsed.general;
    let said_why = !run.diagnostics.is_empty() || !run.general.is_empty() || run.outside > 0;
    if outcome.timed_out || outcome.cancelled || outcome.signal.is_some() {
        run.failure = Some(outcome.describe());
    } else if outcome.exit_code == Some(127) {
        run.failure = Some(format!(
            "`{}`: command not found (exit 127):\n{}",
            run.command,
            crate::agent::output::head_tail(&outcome.output, 2048, 20)
        ));
    } else if !outcome.success() && !said_why {
        run.failure = Some(format!(
            "`{}` exited with {} without reporting a problem Fettle can read:\n{}",
            run.command,
            outcome.exit_code.unwrap_or(-1),
            crate::agent::output::head_tail(&outcome.output, 2048, 20)
        ));
    }
    tracing::debug!(
        checker = %checker.name,
        diagnostics = run.diagnostics.len(),
        outside = run.outside,
        elapsed_ms = run.elapsed.as_millis() as u64,
        failed = run.failure.is_some(),
        "checker ran"
    );
    run
}

/// Most traps named in a message.
const MAX_TRAPS_NAMED: usize = 5;

/// The files `checker` covers that are not regular files (FIFOs, sockets,
/// devices, links to them), walked as the checker would (`.gitignore`
/// honoured): "pipe.py is a FIFO (a pipe)".
fn traps(root: &Path, checker: &Checker) -> Vec<String> {
    let mut walk = ignore::WalkBuilder::new(root);
    if crate::fsread::ignore_files::guard_walk(&mut walk, root).is_err() {
        // The walk refuses the root itself; the checker would hang on the
        // same ignore file.
        return vec![format!(
            "an ignore file in {} is not a regular file",
            root.display()
        )];
    }
    walk.build()
        .filter_map(Result::ok)
        .filter(|e| !e.file_type().is_some_and(|t| t.is_file() || t.is_dir()))
        .filter(|e| checker.covers(e.path()))
        .filter_map(|e| {
            let kind = crate::fsread::non_regular_kind(e.path())
                .filter(|k| *k != crate::fsread::FileKind::Directory)?;
            let rel = e.path().strip_prefix(root).unwrap_or(e.path());
            Some(format!("{} is {}", rel.display(), kind.describe()))
        })
        .take(MAX_TRAPS_NAMED + 1)
        .collect()
}

/// The run of a checker Fettle did not start, and why.
fn not_run(checker: &Checker, traps: &[String]) -> CheckRun {
    let mut named = traps[..traps.len().min(MAX_TRAPS_NAMED)].join("; ");
    if traps.len() > MAX_TRAPS_NAMED {
        named.push_str("; …");
    }
    tracing::warn!(checker = %checker.name, "checker not run: {named}");
    CheckRun {
        checker: checker.clone(),
        command: checker.command.clone(),
        diagnostics: Vec::new(),
        general: Vec::new(),
        failure: Some(format!(
            "`{}` was not run: {named} — it would block on it or read it without end; remove or replace it",
            checker.command
        )),
        outside: 0,
        elapsed: Duration::ZERO,
    }
}

/// The project's files `checker` covers, as the index would walk them
/// (`.gitignore` honoured, hidden folders skipped), at most [`MAX_FILES`].
fn project_files(root: &Path, checker: &Checker) -> Vec<PathBuf> {
    let mut walk = ignore::WalkBuilder::new(root);
    // Ignore files that are FIFOs or devices would block or flood the walk.
    if let Err(err) = crate::fsread::ignore_files::guard_walk(&mut walk, root) {
        tracing::warn!("checker: not walking {}: {err}", root.display());
        return Vec::new();
    }
    let mut files: Vec<PathBuf> = walk
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .filter(|p| checker.covers(p) && !p.components().any(|c| c.as_os_str() == "node_modules"))
        .take(MAX_FILES)
        .collect();
    files.sort();
    files
}

//! Verification: the test command, the project's checkers and syntax
//! checks decide whether an attempt worked, and a score says whether it got
//! better or worse.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use crate::agent::checkers::{self, CheckReport, Checker};
use crate::agent::exec::{self, CommandOutcome, CommandSpec, Limits};
use crate::agent::output;
use crate::agent::verify::{parse_test_output, TestReport};
use crate::agent::CheckGoal;
use crate::syntax::{edit_errors, parse_str, Language};

/// Most checker diagnostics the model sees after an attempt.
const MAX_CHECKER_LINES: usize = 30;
/// Files past this size are not parsed for syntax errors.
const MAX_SYNTAX_CHECK_BYTES: u64 = 8 * 1024 * 1024;

/// Lower is better. Compared field by field: syntax errors first (code that
/// does not parse is worse than code that fails a test), then the
/// checkers' errors (code that does not type-check is worse, even where no
/// test covers it), then whether the tests could run at all, then failing
/// tests, then (reversed) passing ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Score {
    /// The review (`agent.review`) rejected the change: worse than any
    /// state it did not look at.
    pub rejected: bool,
    pub syntax_errors: u32,
    /// Errors the checkers reported (a failed checker run counts as one).
    pub checker_errors: u32,
    /// The test command failed without reporting test results (build
    /// error, crash, timeout).
    pub broken: bool,
    pub failed: u32,
    pub passed: u32,
}

impl Score {
    pub fn cmp_quality(&self, other: &Score) -> Ordering {
        self.rejected
            .cmp(&other.rejected)
            .then(self.syntax_errors.cmp(&other.syntax_errors))
            .then(self.checker_errors.cmp(&other.checker_errors))
            .then(self.broken.cmp(&other.broken))
            .then(self.failed.cmp(&other.failed))
            .then(other.passed.cmp(&self.passed))
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.rejected {
            parts.push("rejected by the review".to_owned());
        }
        if self.syntax_errors > 0 {
            parts.push(format!("{} syntax error(s)", self.syntax_errors));
        }
        if self.checker_errors > 0 {
            parts.push(format!("{} checker error(s)", self.checker_errors));
        }
        if self.broken && self.failed > 0 {
            parts.push(format!(
                "a build or collection error ({} failed, {} passed)",
                self.failed, self.passed
            ));
        } else if self.broken {
            parts.push("the test command failed without reporting test results".to_owned());
        } else {
            parts.push(format!("{} failed, {} passed", self.failed, self.passed));
        }
        parts.join("; ")
    }
}

/// [`Verification::first_problem`]'s size: an assertion and its `where`.
const FIRST_PROBLEM_LINES: usize = 2;
const FIRST_PROBLEM_CHARS: usize = 240;
/// What the user is shown of a test run whose results could not be read.
const UNREAD_TAIL_LINES: usize = 6;
const UNREAD_LINE_CHARS: usize = 200;

pub struct Verification {
    pub passed: bool,
    pub score: Score,
    pub outcome: Option<CommandOutcome>,
    pub report: Option<TestReport>,
    /// `path: line: message` for syntax errors in the checked files.
    pub syntax: Vec<String>,
    /// What the checkers reported; `None` when there are none.
    pub checks: Option<CheckReport>,
    /// Their errors as the model reads them (grouped by file, with the code).
    pub checks_for_model: String,
    /// Why the review rejected the change (the tests passed).
    pub review: Option<String>,
}

impl Verification {
    /// What the model reads: verdict, counts, failures mapped to files, and
    /// the head and tail of the output.
    pub fn for_model(&self, test_command: Option<&str>) -> String {
        self.for_model_within(test_command, 6 * 1024, 120)
    }

    /// [`Self::for_model`] with the test output cut to `max_bytes` and
    /// `max_lines` (head and tail): a small local model's context is a few
    /// thousand tokens, shared with the code and its answer.
    pub fn for_model_within(
        &self,
        test_command: Option<&str>,
        max_bytes: usize,
        max_lines: usize,
    ) -> String {
        let mut out = String::new();
        out.push_str(if self.passed { "PASSED" } else { "FAILED" });
        out.push_str(&format!(" ({})\n", self.score.describe()));
        if let Some(review) = &self.review {
            out.push_str(&format!(
                "The tests pass, but the review rejected the change:\n{review}\n"
            ));
        }
        if !self.syntax.is_empty() {
            out.push_str("Syntax errors:\n");
            // Thousands of files a command wrote: the first few, counted.
            for line in self.syntax.iter().take(MAX_CHECKER_LINES) {
                out.push_str(&format!("  {line}\n"));
            }
            if self.syntax.len() > MAX_CHECKER_LINES {
                out.push_str(&format!(
                    "  … and {} more\n",
                    self.syntax.len() - MAX_CHECKER_LINES
                ));
            }
        }
        if self.score.checker_errors > 0 {
            out.push_str(&self.checks_for_model);
        }
        if let (Some(cmd), Some(outcome)) = (test_command, &self.outcome) {
            out.push_str(&format!("`{cmd}`: {}\n", first_line(&outcome.describe())));
            if let Some(report) = &self.report {
                let summary = report.summary_for_model();
                if !summary.trim().is_empty() {
                    out.push_str(&summary);
                    if !summary.ends_with('\n') {
                        out.push('\n');
                    }
                }
            }
            if !self.passed && !outcome.output.trim().is_empty() {
                out.push_str("Output (head and tail):\n");
                out.push_str(&output::head_tail(&outcome.output, max_bytes, max_lines));
            }
        }
        out
    }

    /// The first thing that went wrong, in a line or two, for a fresh
    /// attempt's note on an earlier one (the counts alone do not say that
    /// its fix was a `NameError`): a syntax error, else a checker error,
    /// else the first failing test's message.
    pub fn first_problem(&self) -> Option<String> {
        let text = if let Some(review) = &self.review {
            review.clone()
        } else if let Some(line) = self.syntax.first() {
            line.clone()
        } else if let Some(d) = self.checks.as_ref().and_then(|c| {
            c.diagnostics()
                .find(|d| d.severity == crate::agent::checkers::Severity::Error)
        }) {
            let name = d
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{name}:{}: {}", d.span.start.line + 1, d.message)
        } else {
            self.report.as_ref()?.messages.first()?.clone()
        };
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(FIRST_PROBLEM_LINES)
            .collect();
        let joined = lines.join(" ");
        if joined.is_empty() {
            return None;
        }
        Some(match joined.char_indices().nth(FIRST_PROBLEM_CHARS) {
            Some((cut, _)) => format!("{}…", &joined[..cut]),
            None => joined,
        })
    }

    /// One line for events and logs.
    pub fn headline(&self) -> String {
        format!(
            "{}: {}",
            if self.passed { "passed" } else { "failed" },
            self.score.describe()
        )
    }

    /// The headline, and when the test command's output could not be read
    /// as test results, its status and last lines: for the user, whom the
    /// counts alone would not tell that, say, `pytest` is not installed.
    pub fn headline_for_user(&self) -> String {
        let headline = self.headline();
        let Some(outcome) = self.outcome.as_ref().filter(|_| self.score.broken) else {
            return headline;
        };
        let described = outcome.describe();
        let status = first_line(&described);
        let lines: Vec<&str> = outcome
            .output
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .collect();
        let tail = &lines[lines.len().saturating_sub(UNREAD_TAIL_LINES)..];
        if tail.is_empty() {
            return format!("{headline} ({status})");
        }
        let tail: Vec<String> = tail
            .iter()
            .map(|l| match l.char_indices().nth(UNREAD_LINE_CHARS) {
                Some((cut, _)) => format!("  {}…", &l[..cut]),
                None => format!("  {l}"),
            })
            .collect();
        format!(
            "{headline} ({status}); its last lines:\n{}",
            tail.join("\n")
        )
    }

    /// When the test command cannot start at all — its runner is missing
    /// where the server runs (`python3: No module named pytest` for
    /// `python3 -m pytest`; a shell's `pytest: not found`, exit 127) — no
    /// change to the workspace can help: the line that says so. A module
    /// of the workspace itself (`python3 -m mypkg.tests`) is not a runner.
    pub fn runner_missing(&self, test_command: Option<&str>, root: &Path) -> Option<String> {
        let outcome = self.outcome.as_ref().filter(|_| self.score.broken)?;
        let words: Vec<&str> = test_command?.split_whitespace().collect();
        let module = words
            .windows(2)
            .find(|w| w[0] == "-m")
            .map(|w| w[1])
            .filter(|m| {
                let top = m.split('.').next().unwrap_or(m);
                !root.join(top).exists() && !root.join(format!("{top}.py")).exists()
            });
        let program = words
            .first()
            .filter(|p| !p.contains('='))
            .map(|p| p.rsplit('/').next().unwrap_or(p));
        let not_found = outcome.exit_code == Some(127);
        outcome
            .output
            .lines()
            .map(str::trim)
            .find(|line| {
                let module_missing = module.is_some_and(|m| {
                    line.ends_with(&format!(": No module named {m}"))
                        && !line.starts_with("ModuleNotFoundError")
                });
                let program_missing = not_found
                    && program.is_some_and(|p| {
                        line.contains(p)
                            && (line.ends_with("not found")
                                || line.ends_with("No such file or directory"))
                    });
                module_missing || program_missing
            })
            .map(str::to_owned)
    }

    /// When the test command's output could not be read as test results:
    /// the line of it most likely to say why (the last that reads as an
    /// error, else the last), for a summary's first line — the one line
    /// an editor shows (`No module named pytest`, not only "failed").
    pub fn unread_cause(&self) -> Option<String> {
        let outcome = self.outcome.as_ref().filter(|_| self.score.broken)?;
        let lines: Vec<&str> = outcome
            .output
            .lines()
            .map(str::trim)
            .filter(|l| {
                !l.is_empty() && !l.chars().all(|c| matches!(c, '=' | '-' | '_' | '*' | ' '))
            })
            .collect();
        let says_why = |l: &&&str| {
            let lower = l.to_lowercase();
            [
                "error",
                "no module named",
                "not found",
                "cannot",
                "can't",
                "permission denied",
                "no such file",
            ]
            .iter()
            .any(|w| lower.contains(w))
        };
        let line = lines.iter().rev().find(says_why).or(lines.last())?;
        Some(match line.char_indices().nth(UNREAD_CAUSE_CHARS) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => (*line).to_owned(),
        })
    }
}

/// The most of a line [`Verification::unread_cause`] keeps.
const UNREAD_CAUSE_CHARS: usize = 160;

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

pub struct CheckSettings<'a> {
    pub root: &'a Path,
    pub test_command: Option<&'a str>,
    pub timeout: std::time::Duration,
    pub allow_env: &'a [String],
    pub limits: Limits,
    pub sandbox: Option<&'a crate::agent::sandbox::SandboxPolicy>,
    pub checkers: &'a [Checker],
    pub check_timeout: std::time::Duration,
    pub check_goal: &'a CheckGoal,
    /// The checkers' errors before the task; `None` while measuring them.
    pub baseline_checker_errors: Option<u32>,
}

impl CheckSettings<'_> {
    fn checker_settings(&self) -> checkers::RunSettings<'_> {
        checkers::RunSettings {
            root: self.root,
            timeout: self.check_timeout,
            allow_env: self.allow_env,
            limits: self.limits,
            sandbox: self.sandbox,
        }
    }
}

/// Runs the checkers (per-file ones on `files`).
pub async fn run_checks(
    settings: &CheckSettings<'_>,
    files: &[PathBuf],
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<CheckReport> {
    if settings.checkers.is_empty() {
        return None;
    }
    Some(
        checkers::run_checkers(
            settings.checkers,
            Some(files),
            &settings.checker_settings(),
            cancel,
        )
        .await,
    )
}

/// Whether the checkers' report meets the task's goal.
fn checks_pass(settings: &CheckSettings<'_>, report: Option<&CheckReport>) -> bool {
    let Some(report) = report else { return true };
    let errors = report.errors() as u32;
    let no_new = settings.baseline_checker_errors.is_none_or(|b| errors <= b);
    match settings.check_goal {
        CheckGoal::NoNewErrors => no_new,
        CheckGoal::Clean => errors == 0,
        CheckGoal::CleanFile(path) => no_new && report.errors_in(path) == 0,
    }
}

/// Runs the checkers and the test command (if any) and checks `files` for
/// syntax errors. `read` gives a file's current text (the editor's buffer
/// when open).
pub async fn verify(
    settings: &CheckSettings<'_>,
    files: &[PathBuf],
    read: &(dyn Fn(&Path) -> Option<String> + Sync),
    cancel: &tokio_util::sync::CancellationToken,
) -> std::io::Result<Verification> {
    let syntax = syntax_problems(settings.root, files, read);
    let checks = run_checks(settings, files, cancel).await;
    let checks_for_model = checks.as_ref().map_or_else(String::new, |report| {
        report.for_model(settings.root, None, MAX_CHECKER_LINES, true, read)
    });
    let mut score = Score {
        rejected: false,
        syntax_errors: syntax.len() as u32,
        checker_errors: checks.as_ref().map_or(0, |r| r.errors() as u32),
        broken: false,
        failed: 0,
        passed: 0,
    };
    let checks_ok = checks_pass(settings, checks.as_ref());
    let (mut outcome, mut report) = (None, None);
    let mut tests_ok = true;
    if let Some(command) = settings.test_command {
        let spec = test_spec(settings, command.to_owned());
        let ran = exec::run(&spec, cancel).await?;
        let parsed = parse_test_output(&ran.output, settings.root);
        tests_ok = ran.success();
        score.passed = parsed.passed.unwrap_or(0);
        score.failed = parsed.failed.unwrap_or(0);
        if !tests_ok && (score.failed == 0 || parsed.build_failed) {
            // Failing without a count — a build error, a crash or a
            // timeout — or with a count of errors where the tests did not
            // build or load (pytest's "1 error" of an import that breaks
            // collection): never progress over tests that ran and failed.
            score.broken = true;
        }
        outcome = Some(ran);
        report = Some(parsed);
    }
    Ok(Verification {
        passed: tests_ok && syntax.is_empty() && checks_ok,
        score,
        outcome,
        report,
        syntax,
        checks,
        checks_for_model,
        review: None,
    })
}

pub fn test_spec(settings: &CheckSettings<'_>, command: String) -> CommandSpec {
    CommandSpec {
        command,
        cwd: settings.root.to_path_buf(),
        timeout: settings.timeout,
        // The whole output is kept for parsing; the model sees head+tail.
        max_output_bytes: 256 * 1024,
        max_output_lines: 4000,
        env_allow: settings.allow_env.to_vec(),
        limits: settings.limits,
        sandbox: settings.sandbox.cloned(),
    }
}

/// Syntax errors in `files`, as `path:line: message` (a few per file).
pub fn syntax_problems(
    root: &Path,
    files: &[PathBuf],
    read: &(dyn Fn(&Path) -> Option<String> + Sync),
) -> Vec<String> {
    let mut out = Vec::new();
    for path in files {
        let Some(lang) = Language::from_path(path) else {
            continue;
        };
        // A huge file a command wrote is not read whole and parsed for a
        // handful of syntax errors.
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.len() > MAX_SYNTAX_CHECK_BYTES) {
            tracing::info!(path = %path.display(), "too large to check its syntax");
            continue;
        }
        let Some(text) = read(path) else { continue };
        let Some(tree) = parse_str(lang, &text, None) else {
            continue;
        };
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        for err in edit_errors(&tree, &text, 5) {
            let end = err.range.start.min(text.len());
            let line = text.as_bytes()[..end]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            out.push(format!("{rel}:{line}: {}", err.message));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn broken(output: &str, exit_code: i32) -> Verification {
        Verification {
            passed: false,
            score: Score {
                rejected: false,
                syntax_errors: 0,
                checker_errors: 0,
                broken: true,
                failed: 0,
                passed: 0,
            },
            outcome: Some(CommandOutcome {
                exit_code: Some(exit_code),
                signal: None,
                timed_out: false,
                cancelled: false,
                output: output.to_owned(),
                total_output_bytes: output.len(),
                elapsed: Duration::from_millis(40),
                timeout: Duration::from_secs(60),
            }),
            report: None,
            syntax: Vec::new(),
            checks: None,
            checks_for_model: String::new(),
            review: None,
        }
    }

    #[test]
    fn tests_that_do_not_load_are_worse_than_tests_that_fail() {
        let ran = Score {
            rejected: false,
            syntax_errors: 0,
            checker_errors: 0,
            broken: false,
            failed: 5,
            passed: 1,
        };
        // pytest's "1 error" when an import breaks collection.
        let not_collected = Score {
            broken: true,
            failed: 1,
            passed: 0,
            ..ran
        };
        assert_eq!(not_collected.cmp_quality(&ran), Ordering::Greater);
        assert_eq!(
            not_collected.describe(),
            "a build or collection error (1 failed, 0 passed)"
        );
    }

    #[test]
    fn a_missing_runner_is_told_from_a_missing_import() {
        let root = tempfile::tempdir().unwrap();
        let python = broken("/usr/bin/python3: No module named pytest\n", 1);
        assert_eq!(
            python.runner_missing(Some("python3 -m pytest -q"), root.path()),
            Some("/usr/bin/python3: No module named pytest".to_owned())
        );
        let shell = broken("sh: 1: cargo-nextest: not found\n", 127);
        assert!(shell
            .runner_missing(Some("cargo-nextest run"), root.path())
            .is_some());
        // The code under test imports what is missing: an edit may fix it.
        let import = broken("E   ModuleNotFoundError: No module named 'hypothesis'\n", 1);
        assert_eq!(
            import.runner_missing(Some("python3 -m pytest"), root.path()),
            None
        );
        // A module of the workspace run with -m: its own code may be at fault.
        std::fs::create_dir(root.path().join("mypkg")).unwrap();
        let own = broken("/usr/bin/python3: No module named mypkg.tests\n", 1);
        assert_eq!(
            own.runner_missing(Some("python3 -m mypkg.tests"), root.path()),
            None
        );
        // Not found, but not exit 127 (a test that looked for a file).
        let file = broken("tests/run.sh: data.csv: not found\n", 1);
        assert_eq!(file.runner_missing(Some("tests/run.sh"), root.path()), None);
    }
}

//! One task: read → plan → act → verify → repair, within a budget.
//!
//! An *iteration* is one attempt: model turns (each may call tools) until the
//! model ends its turn without a tool call, then verification. An attempt
//! that scores worse than the best so far is rolled back before the next;
//! when the task gives up, the best state reached (or the original) is
//! restored.

mod check;
mod code_blocks;
mod diff;
mod explain;
mod files;
mod fresh;
mod prompt;
mod tools;
mod tried;
mod turn;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::checkpoint::CheckpointStore;
use super::confined::Confined;
use super::host::Host;
use super::paths::WorkspacePaths;
use super::protected::Protected;
use super::redact::Redactor;
use super::types::{EventKind, TaskEvent, TaskResult, TaskSpec, Tokens};
use crate::index::WorkspaceIndex;
use crate::model::{Message, Model};
use tokio_util::sync::CancellationToken;

use check::{CheckSettings, Verification};
use explain::{Attempt, StopCause};
use files::{CommandEffects, Files, TreeBytes};

/// Malformed answers (e.g. tool arguments that are not JSON) the model may
/// send in a row before the task stops.
const MAX_MALFORMED_TURNS: u32 = 3;
/// Attempts a model may end without having made a single tool call before
/// the task stops: one reminder, then it is clear the model cannot.
const NO_TOOL_ATTEMPTS: u32 = 2;

/// The repo map's size for a local model (the full one is 1024 tokens).
const LOCAL_REPO_MAP_TOKENS: usize = 300;
/// Files shown whole in a local model's first message, and their largest
/// size.
const LOCAL_CODE_FILES: usize = 2;
const LOCAL_CODE_BYTES: usize = 8 * 1024;
/// When no file the failure names can be shown: how many of the repo
/// map's best-ranked files are considered instead.
const LOCAL_RANKED_FALLBACK: usize = 3;
/// The test output a local model is shown (head and tail); the failing
/// tests and their messages come first, parsed, whatever the size.
const LOCAL_TEST_OUTPUT_BYTES: usize = 1536;

/// What a task runs against.
pub struct TaskEnv {
    pub model: Model,
    pub host: Arc<dyn Host>,
    pub index: Arc<WorkspaceIndex>,
    pub store: CheckpointStore,
}

/// Runs the task to its end and returns its result; never panics on bad
/// input, a failing model or a hanging test (those end the task with a
/// status and an explanation).
pub async fn run_task(spec: TaskSpec, env: TaskEnv, cancel: CancellationToken) -> TaskResult {
    let started = Instant::now();
    if let Some(why) = crate::model::local::catalog::too_small_for(
        env.model.config(),
        "run the repair loop",
        "agent.model",
    ) {
        // Said at once, before any test runs: the small model would spend
        // minutes of turns and then give up.
        let mut result = TaskResult::failed(&spec.id, capitalized(&why));
        result.elapsed_ms = started.elapsed().as_millis() as u64;
        return result;
    }
    let paths = match WorkspacePaths::new(&spec.root) {
        Ok(paths) => paths,
        Err(err) => {
            let why = format!(
                "The workspace {} cannot be used: {err}",
                spec.root.display()
            );
            return TaskResult::failed(&spec.id, why);
        }
    };
    // The root's handle, opened once: every file access of the task is
    // confined by the kernel below it (the path checks are the friendly part).
    let disk = match Confined::open_root(paths.root()) {
        Ok(disk) => disk.allow_hardlinks(spec.allow_hardlinks),
        Err(err) => {
            let why = format!(
                "The workspace {} cannot be opened: {err}",
                spec.root.display()
            );
            return TaskResult::failed(&spec.id, why);
        }
    };
    let protected = Protected::new(
        paths.root(),
        &spec.protected_paths,
        spec.test_command.as_deref(),
    );
    let files = Files::new(
        paths.with_protected(protected),
        disk,
        env.host.clone(),
        env.store,
        spec.id.clone(),
        spec.goal.clone(),
        spec.unsaved_buffers,
    );
    let redactor = Redactor::from_workspace(&spec.root);
    let mut task = Task {
        spec,
        model: env.model,
        host: env.host,
        index: env.index,
        files,
        redactor,
        cancel,
        started,
        messages: Vec::new(),
        iterations: 0,
        tool_calls: 0,
        tokens: Tokens::default(),
        attempts: Vec::new(),
        dirty: true,
        last_text: String::new(),
        restore_note: None,
        reflection: None,
        boundary: prompt::Boundary::random(),
        command_note: None,
        baseline_checker_errors: None,
        last_checks: None,
        event_budget: Default::default(),
        edits_in_attempt: 0,
        answer_note: None,
        code_refused: None,
        answered_the_same_code: false,
        repeated_an_attempt: false,
        tested_states: Default::default(),
        same_code_again: 0,
        answer_cap: None,
        code_answers: 0,
        unchanged_attempts: 0,
        brief: String::new(),
        attempt_notes: Vec::new(),
    };
    task.run().await
}

pub(crate) struct Task {
    spec: TaskSpec,
    model: Model,
    host: Arc<dyn Host>,
    index: Arc<WorkspaceIndex>,
    files: Files,
    redactor: Redactor,
    cancel: CancellationToken,
    started: Instant,
    messages: Vec<Message>,
    iterations: u32,
    tool_calls: u32,
    tokens: Tokens,
    attempts: Vec<Attempt>,
    /// Files changed since the last verification.
    dirty: bool,
    /// The model's last words (its summary when it ends a turn).
    last_text: String,
    /// What giving up put back, for the summary.
    restore_note: Option<String>,
    /// The model's own account when it ran out of attempts.
    reflection: Option<String>,
    /// The per-task tag around workspace data in the prompt.
    boundary: prompt::Boundary,
    /// What the last verification's test command changed in the workspace,
    /// for the model's next message.
    command_note: Option<String>,
    /// The checkers' errors before any change (set by the baseline).
    baseline_checker_errors: Option<u32>,
    /// The checkers' last report while no file changed since (`dirty`
    /// false), for the `diagnostics` tool.
    last_checks: Option<crate::agent::checkers::CheckReport>,
    /// What the task's events took so far (they are bounded).
    event_budget: parking_lot::Mutex<super::output::EventBudget>,
    /// Files the current attempt's edits changed.
    edits_in_attempt: u32,
    /// What became of the code in the model's last answer, for the
    /// feedback.
    answer_note: Option<String>,
    /// Why this attempt's answer code was not applied (for the summary).
    code_refused: Option<String>,
    /// Answers that held code for a definition (applied or not): a model
    /// that writes code is trying, even without tool calls.
    code_answers: u32,
    /// Attempts in a row that changed no file: the next turns sample
    /// instead of repeating the same answer.
    unchanged_attempts: u32,
    /// For a local model: the first message as of the files' current
    /// state (its code and test results), which each attempt starts from.
    brief: String,
    /// For a local model: one line per failed attempt, for the next.
    attempt_notes: Vec<String>,
    /// Whether the last answer's code was only the code as it is, or led
    /// back to a state already tested.
    answered_the_same_code: bool,
    /// Whether it was the latter.
    repeated_an_attempt: bool,
    /// For a local model: the states of the files whose tests ran.
    tested_states: std::collections::HashSet<tried::StateKey>,
    /// Answers in this attempt that repeated the code as it is (each asked
    /// again, sampled hotter).
    same_code_again: u32,
    /// The most output tokens the next turn may use, when less than usual.
    answer_cap: Option<u32>,
}

impl Task {
    async fn run(&mut self) -> TaskResult {
        self.status(&format!("Started: {}", self.spec.goal.trim()));
        // The first prompt quotes open buffers: let pending typing arrive.
        self.host.settle(&[]).await;
        let baseline = match self.verify().await {
            Ok(v) => v,
            Err(cause) => return self.finish(cause, None).await,
        };
        self.baseline_checker_errors = Some(baseline.score.checker_errors);
        self.remember_tested_state();
        self.event(
            EventKind::Verify,
            format!("Before any change: {}", baseline.headline()),
            json!({ "iteration": 0, "passed": baseline.passed, "score": score_json(&baseline.score) }),
        );
        if baseline.passed && self.spec.nothing_to_do_when_passing() {
            self.last_text = if self.spec.goal_is_tests() {
                "The tests already pass; nothing to do."
            } else {
                "The checkers report no errors and the tests pass; nothing to do."
            }
            .to_owned();
            return self.finish(StopCause::Success, Some(&baseline)).await;
        }
        let mut best: (check::Score, Option<TreeBytes>) = (baseline.score, None);
        let mut first = self.first_message(&baseline);
        if let Some(note) = self.command_note.take() {
            // It names files, which the workspace named.
            first.push_str(&format!("\n{}\n", prompt::defuse(&note)));
        }
        let system = match self.compact_prompt() {
            true => self.boundary.local_system_prompt(),
            false => self.boundary.system_prompt(),
        };
        self.push(Message::system(system));
        self.brief = first.clone();
        self.push(Message::user(first));

        let mut last = baseline;
        while self.iterations < self.spec.budget.max_iterations {
            self.iterations += 1;
            let iteration = self.iterations;
            self.status(&format!(
                "Iteration {iteration} of {}",
                self.spec.budget.max_iterations
            ));
            let acted = self.act().await;
            if let Err(cause) = acted {
                // Budget or cancellation mid-attempt: judge what is there.
                if matches!(cause, StopCause::Cancelled) {
                    return self.finish(cause, Some(&last)).await;
                }
                // Out of time means no more test runs either.
                if self.dirty && !matches!(cause, StopCause::Timeout) {
                    if let Ok(v) = self.verify().await {
                        self.record_attempt(iteration, &v, &mut best).await;
                        last = v;
                        if last.passed {
                            return self.finish(StopCause::Success, Some(&last)).await;
                        }
                    }
                }
                return self.give_up(cause, best, &last).await;
            }
            self.unchanged_attempts = match self.edits_in_attempt {
                0 => self.unchanged_attempts + 1,
                _ => 0,
            };
            if self.tool_calls == 0 && self.code_answers == 0 && iteration >= NO_TOOL_ATTEMPTS {
                let cause = StopCause::NoToolUse {
                    model: self.model.name().to_owned(),
                    turns: iteration,
                };
                return self.give_up(cause, best, &last).await;
            }
            let verification = if self.dirty {
                match self.verify().await {
                    Ok(v) => v,
                    Err(cause) => return self.give_up(cause, best, &last).await,
                }
            } else {
                // Nothing changed since the last run: its verdict stands.
                last
            };
            self.remember_tested_state();
            // What this attempt changed, before a rollback undoes it.
            let attempt_diff =
                (self.compact_prompt() && self.edits_in_attempt > 0).then(|| self.files.diff());
            let rolled_back = self
                .record_attempt(iteration, &verification, &mut best)
                .await;
            if verification.passed {
                return self.finish(StopCause::Success, Some(&verification)).await;
            }
            let answer_note = self.answer_note.take();
            if self.compact_prompt() {
                self.note_attempt(
                    iteration,
                    attempt_diff.as_deref(),
                    answer_note.as_deref(),
                    &verification,
                    rolled_back.is_some(),
                );
                self.fresh_conversation(rolled_back.is_none().then_some(&verification));
                last = verification;
                continue;
            }
            let mut feedback = self.feedback(
                &verification,
                rolled_back.as_deref(),
                answer_note.as_deref(),
            );
            if self.tool_calls == 0 {
                feedback.push_str(match self.compact_prompt() {
                    true => prompt::SHOW_THE_CODE,
                    false => prompt::USE_THE_TOOLS,
                });
            }
            self.push(Message::user(feedback));
            last = verification;
        }
        self.give_up(StopCause::Iterations, best, &last).await
    }

    /// Model turns until one ends without a tool call.
    async fn act(&mut self) -> Result<(), StopCause> {
        let mut malformed = 0;
        self.edits_in_attempt = 0;
        self.answer_note = None;
        self.code_refused = None;
        self.same_code_again = 0;
        self.answer_cap = None;
        // Where the attempt starts: a retry within it starts there again.
        let start_len = self.messages.len();
        let before = self.files.capture();
        let dirty_before = self.dirty;
        loop {
            self.check_budget()?;
            // The sampling of a retry stays (`same_code_again`), the verdict
            // on the last answer goes.
            self.answered_the_same_code = false;
            self.repeated_an_attempt = false;
            let turn = self.model_turn().await?;
            let calls = turn.tool_calls.clone();
            self.push(Message {
                tool_calls: calls.clone(),
                ..Message::assistant(turn.text.clone())
            });
            if !turn.text.trim().is_empty() {
                self.last_text = turn.text.trim().to_owned();
            }
            if calls.is_empty() {
                if let Some(note) = turn.note {
                    // A malformed answer: tell the model and let it retry,
                    // a few times.
                    malformed += 1;
                    if malformed > MAX_MALFORMED_TURNS {
                        return Err(StopCause::Model(format!(
                            "{MAX_MALFORMED_TURNS} malformed answers in a row; the last: {note}"
                        )));
                    }
                    self.push(Message::user(prompt::defuse(&note).into_owned()));
                    continue;
                }
                if self.edits_in_attempt == 0 {
                    // Code instead of an edit call: the model still said
                    // what to change. Not after edits: a summary that
                    // quotes code must not undo them.
                    self.answer_note = self.apply_answer_code(&turn.text).await?;
                }
                self.undo_a_repeat(&before, dirty_before).await;
                if self.ask_again_for_the_same_code(start_len) {
                    continue;
                }
                return Ok(());
            }
            let results = self.run_tools(&calls).await?;
            for message in results {
                self.push(message);
            }
        }
    }

    /// Verifies the current state and records it as an attempt; rolls back
    /// when it is worse than the best so far. Returns the rollback note.
    async fn record_attempt(
        &mut self,
        iteration: u32,
        v: &Verification,
        best: &mut (check::Score, Option<TreeBytes>),
    ) -> Option<String> {
        let changed: Vec<String> = self
            .files
            .changed_files()
            .iter()
            .map(|p| self.files.paths.relative(p))
            .collect();
        let ordering = v.score.cmp_quality(&best.0);
        // Fresh attempts each start from the best state: a change that is
        // no better would otherwise be shown as the code to fix, and a
        // small model copies it (measured: one rewrite, then the same
        // rewrite three attempts in a row).
        let undo_equal = self.compact_prompt() && self.edits_in_attempt > 0;
        let worse = ordering == std::cmp::Ordering::Greater;
        if ordering == std::cmp::Ordering::Less {
            *best = (v.score, Some(self.files.capture()));
        }
        let mut note = None;
        if worse || (ordering == std::cmp::Ordering::Equal && undo_equal) {
            let target = best.1.clone().unwrap_or_else(|| self.files.originals());
            match self.files.restore(&target).await {
                Ok(restored) if worse => {
                    let names: Vec<String> = restored
                        .iter()
                        .map(|p| self.files.paths.relative(p))
                        .collect();
                    note = Some(format!(
                        "This attempt made things worse ({} → {}), so Fettle rolled it back; {} now as they were at the best state so far ({}).",
                        best.0.describe(),
                        v.score.describe(),
                        if names.is_empty() { "the files are".to_owned() } else { names.join(", ") + " are" },
                        best.0.describe()
                    ));
                    self.dirty = true;
                }
                Ok(restored) if !restored.is_empty() => {
                    note = Some(format!(
                        "This attempt was no better ({}), so Fettle undid it.",
                        v.score.describe()
                    ));
                    self.dirty = true;
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "rollback failed"),
            }
        }
        self.event(
            EventKind::Verify,
            format!("Iteration {iteration}: {}", v.headline()),
            json!({
                "iteration": iteration,
                "passed": v.passed,
                "score": score_json(&v.score),
                "rolledBack": note.is_some(),
            }),
        );
        self.attempts.push(Attempt {
            iteration,
            changed,
            outcome: v.headline(),
            rolled_back: note.is_some(),
            model_note: self.last_text.clone(),
            code_refused: self.code_refused.take(),
        });
        note
    }

    /// How verification runs: the spec's test command (or `test_command`),
    /// checkers, limits and sandbox.
    fn check_settings<'a>(&'a self, test_command: Option<&'a str>) -> CheckSettings<'a> {
        CheckSettings {
            root: self.files.root(),
            test_command,
            timeout: self.spec.test_timeout,
            allow_env: &self.spec.allow_env,
            limits: self.spec.limits,
            sandbox: self.spec.sandbox.as_ref(),
            checkers: &self.spec.checkers,
            check_timeout: self.spec.check_timeout,
            check_goal: &self.spec.check_goal,
            baseline_checker_errors: self.baseline_checker_errors,
        }
    }

    /// The files verification looks at: those the task touched, and the
    /// one the user pointed at.
    fn checked_files(&self) -> Vec<PathBuf> {
        let mut checked = self.files.touched.clone();
        if let Some(focus) = &self.spec.focus {
            if !checked.contains(&focus.path) {
                checked.push(focus.path.clone());
            }
        }
        checked
    }

    async fn verify(&mut self) -> Result<Verification, StopCause> {
        // Tests and checkers (`cargo check` writes `target/`) may change the
        // workspace: what they change is tracked and undone with the rest.
        let runs = self.spec.test_command.is_some() || !self.spec.checkers.is_empty();
        let before = match runs {
            true => self.files.before_command().await,
            false => None,
        };
        let checked = self.checked_files();
        let settings = self.check_settings(self.spec.test_command.as_deref());
        let mut what: Vec<String> = Vec::new();
        if !settings.checkers.is_empty() {
            let names: Vec<&str> = settings.checkers.iter().map(|c| c.name.as_str()).collect();
            what.push(format!("the checkers ({})", names.join(", ")));
        }
        if let Some(cmd) = settings.test_command {
            what.push(format!("`{cmd}`"));
        }
        what.push("syntax checks".to_owned());
        self.event(
            EventKind::Status,
            format!("Verifying: {}", what.join(", ")),
            json!({}),
        );
        let files = &self.files;
        let read = |p: &std::path::Path| files.text(p);
        let result = check::verify(&settings, &checked, &read, &self.cancel).await;
        if runs {
            // Even when cancelled: what the tests changed is undone with the rest.
            let effects = self.files.after_command(before).await;
            self.command_note = self.command_effects(&effects, "The test command");
        }
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        self.dirty = false;
        let mut verification =
            result.map_err(|err| StopCause::Error(format!("could not run the tests: {err}")))?;
        self.last_checks = verification.checks.take();
        Ok(verification)
    }

    fn check_budget(&self) -> Result<(), StopCause> {
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        let budget = &self.spec.budget;
        if self.tool_calls >= budget.max_tool_calls {
            return Err(StopCause::ToolCalls);
        }
        if self.tokens.total() >= budget.max_tokens {
            return Err(StopCause::Tokens);
        }
        if self.started.elapsed() >= budget.timeout {
            return Err(StopCause::Timeout);
        }
        Ok(())
    }

    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.started + self.spec.budget.timeout)
    }

    fn push(&mut self, mut message: Message) {
        // Nothing secret leaves the machine: every message is redacted once,
        // when it enters the conversation.
        if let std::borrow::Cow::Owned(redacted) =
            self.redactor.redact_in_sequence(&message.content)
        {
            message.content = redacted;
        }
        self.messages.push(message);
    }

    fn event(&self, kind: EventKind, mut text: String, mut data: serde_json::Value) {
        // Each event, and all of them together, within fixed sizes: the
        // editor and `--json` must not receive what a command wrote.
        let last = kind == EventKind::Status && data.get("status").is_some();
        self.event_budget.lock().shape(&mut text, &mut data, last);
        self.host.event(TaskEvent {
            task_id: self.spec.id.clone(),
            kind,
            text,
            data,
        });
    }

    /// Tells the user (an event) what a command changed in the workspace;
    /// returns the same for the model.
    fn command_effects(&self, effects: &CommandEffects, who: &str) -> Option<String> {
        let text = effects.describe(who)?;
        let changes: Vec<serde_json::Value> = effects
            .changes
            .iter()
            .map(|(path, change, lost)| {
                json!({ "path": path, "change": change.as_str(), "restorable": lost.is_none() })
            })
            .collect();
        self.event(
            EventKind::Status,
            text.clone(),
            json!({ "commandChanges": changes }),
        );
        Some(text)
    }

    fn status(&self, text: &str) {
        self.event(EventKind::Status, text.to_owned(), json!({}));
    }

    fn first_message(&self, baseline: &Verification) -> String {
        let focus_excerpt = self.spec.focus.as_ref().and_then(|focus| {
            let text = self.files.text(&focus.path)?;
            let rel = self.files.paths.relative(&focus.path);
            let lines: Vec<&str> = text.lines().collect();
            let (start, end) = match focus.lines {
                Some((a, b)) => (a.max(1) as usize, (b as usize).min(lines.len())),
                None => (1, lines.len().min(200)),
            };
            let numbered = tools::numbered(&lines, start, end);
            Some(self.boundary.data("file", &rel, &numbered))
        });
        let mut focus = super::repo_map::Focus::from_text(
            &format!("{}\n{}", self.spec.goal, baseline.for_model(None)),
            self.files.root(),
            &self.index,
        );
        if let Some(f) = &self.spec.focus {
            focus.paths.push(f.path.clone());
        }
        if let Some(outcome) = &baseline.outcome {
            let more =
                super::repo_map::Focus::from_text(&outcome.output, self.files.root(), &self.index);
            focus.paths.extend(more.paths);
            focus.identifiers.extend(more.identifiers);
        }
        let local = self.compact_prompt();
        let map_tokens = if local { LOCAL_REPO_MAP_TOKENS } else { 1024 };
        let map = super::repo_map::repo_map(&self.index, self.files.root(), &focus, map_tokens);
        let mut message = prompt::task_message(
            &self.boundary,
            &self.spec,
            focus_excerpt,
            &map,
            &self.verification_for_model(baseline),
            local,
        );
        if local {
            message.push_str(&self.code_under_test(&focus));
        }
        message
    }

    /// For a local model: the files the goal and the failure name that the
    /// task may change, whole, so that the first answer can already be the
    /// fix (a `read_file` turn costs such a model a minute on a laptop).
    /// A failed assertion names only the test file (which the task may not
    /// change): then the files defining the names the failure mentions
    /// (`where 8 = levenshtein(...)`), and failing those the repo map's
    /// best-ranked files (the test file imports the code) — each a
    /// fallback, so a file more costs prefill only when nothing was shown.
    fn code_under_test(&self, focus: &super::repo_map::Focus) -> String {
        let definers = || {
            focus
                .identifiers
                .iter()
                .flat_map(|identifier| self.index.definitions(identifier))
                .map(|d| d.path.to_path_buf())
                .collect::<Vec<_>>()
        };
        let ranked = || {
            super::repo_map::rank_files(&self.index, focus)
                .into_iter()
                .take(LOCAL_RANKED_FALLBACK)
                .map(|(path, _)| path)
                .collect::<Vec<_>>()
        };
        let mut out = String::new();
        let mut shown = 0;
        let mut seen = std::collections::HashSet::new();
        let tiers: [&dyn Fn() -> Vec<PathBuf>; 3] = [&|| focus.paths.clone(), &definers, &ranked];
        for tier in tiers {
            if shown > 0 {
                break;
            }
            for path in tier() {
                if shown == LOCAL_CODE_FILES || !seen.insert(path.clone()) {
                    continue;
                }
                let rel = self.files.paths.relative(&path);
                if self.files.paths.check_writable(&rel, &path).is_err()
                    || crate::agent::redact::is_secret_path(&path)
                {
                    continue;
                }
                let Some(text) = self.files.text(&path) else {
                    continue;
                };
                if text.len() > LOCAL_CODE_BYTES {
                    continue;
                }
                if shown == 0 {
                    out.push_str(
                        "\nThe code to fix (the files the failure points to that you may change):\n",
                    );
                }
                out.push_str(&self.boundary.data("file", &rel, text.trim_end()));
                out.push('\n');
                shown += 1;
            }
        }
        if shown > 0 {
            // Last, where a small model looks: shown its code, it otherwise
            // tends to answer with that code unchanged.
            out.push_str(prompt::FIX_THE_CODE_SHOWN);
        }
        out
    }

    /// What the model is told of a verification: the test output cut
    /// shorter for a local model.
    fn verification_for_model(&self, v: &Verification) -> String {
        let command = self.spec.test_command.as_deref();
        match self.compact_prompt() {
            true => v.for_model_within(command, LOCAL_TEST_OUTPUT_BYTES, 40),
            false => v.for_model(command),
        }
    }

    fn feedback(
        &self,
        v: &Verification,
        rolled_back: Option<&str>,
        answer_note: Option<&str>,
    ) -> String {
        let mut out = String::new();
        if let Some(note) = answer_note {
            // It quotes paths and tool output.
            out.push_str(&prompt::defuse(note));
            out.push('\n');
        }
        out.push_str(&format!(
            "Verification after iteration {} of {} failed.\n",
            self.iterations, self.spec.budget.max_iterations
        ));
        out.push_str(&self.boundary.data(
            "verification",
            "fettle",
            &self.verification_for_model(v),
        ));
        out.push('\n');
        if let Some(note) = rolled_back {
            // It names files, which the workspace (or the model) named.
            out.push_str(&prompt::defuse(note));
            out.push('\n');
        }
        if let Some(note) = &self.command_note {
            out.push_str(&prompt::defuse(note));
            out.push('\n');
        }
        out.push_str("Read the failures, fix the code, and end your turn when done.");
        out
    }

    async fn give_up(
        &mut self,
        cause: StopCause,
        best: (check::Score, Option<TreeBytes>),
        last: &Verification,
    ) -> TaskResult {
        if matches!(cause, StopCause::Cancelled) {
            return self.finish(cause, Some(last)).await;
        }
        let target = best.1.clone().unwrap_or_else(|| self.files.originals());
        let restored = match self.files.restore(&target).await {
            Ok(paths) => paths,
            Err(err) => {
                tracing::warn!(%err, "could not restore the best state");
                Vec::new()
            }
        };
        let kept_best = best.1.is_some();
        self.attempts_restored(restored, kept_best, best.0);
        if let Some(note) = self.files.take_kept_dirs_note() {
            self.status(&note);
            let text = match self.restore_note.take() {
                Some(text) => format!("{text} {note}"),
                None => note,
            };
            self.restore_note = Some(text);
        }
        if matches!(cause, StopCause::Iterations | StopCause::ToolCalls) {
            self.reflect().await;
        }
        self.finish(cause, Some(last)).await
    }

    /// Out of attempts but not of time or tokens: one last turn, in words,
    /// for the model's own account of what failed and what it would
    /// try next (it goes into the summary).
    async fn reflect(&mut self) {
        if self.check_budget_for_reflection().is_err() {
            return;
        }
        self.push(Message::user(prompt::REFLECTION));
        // The tools stay declared (Anthropic refuses a conversation holding
        // tool calls without them); any call now is ignored, only words count.
        match self.model_turn().await {
            Ok(turn) if !turn.text.trim().is_empty() => {
                self.reflection = Some(turn.text.trim().to_owned());
            }
            Ok(_) => {}
            Err(cause) => tracing::info!(?cause, "no reflection from the model"),
        }
    }

    fn check_budget_for_reflection(&self) -> Result<(), StopCause> {
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        if self.tokens.total() >= self.spec.budget.max_tokens {
            return Err(StopCause::Tokens);
        }
        if self.started.elapsed() >= self.spec.budget.timeout {
            return Err(StopCause::Timeout);
        }
        Ok(())
    }

    fn attempts_restored(&mut self, restored: Vec<PathBuf>, kept_best: bool, score: check::Score) {
        let names: Vec<String> = restored
            .iter()
            .map(|p| self.files.paths.relative(p))
            .collect();
        let what = if kept_best {
            format!("the best state reached ({})", score.describe())
        } else {
            "the original files (no attempt improved on them)".to_owned()
        };
        let text = if names.is_empty() {
            format!("Kept {what}.")
        } else {
            format!("Restored {what}: {}.", names.join(", "))
        };
        self.status(&text);
        self.restore_note = Some(text);
    }

    async fn finish(&mut self, cause: StopCause, last: Option<&Verification>) -> TaskResult {
        let status = cause.status();
        let summary = explain::summary(&explain::Context {
            cause: &cause,
            goal: &self.spec.goal,
            attempts: &self.attempts,
            last: last.map(|v| v.for_model(self.spec.test_command.as_deref())),
            last_failure_focus: last
                .and_then(|v| v.report.as_ref())
                .map(|r| r.summary_for_model()),
            model_text: &self.last_text,
            restore_note: self.restore_note.as_deref(),
            reflection: self.reflection.as_deref(),
            budget: &self.spec.budget,
            test_timed_out: last
                .and_then(|v| v.outcome.as_ref())
                .is_some_and(|o| o.timed_out),
        });
        let editor_notes = self.files.finish(status.as_str());
        let summary = match self.files.unrestorable_note() {
            Some(note) => format!("{summary}\n\n{note}"),
            None => summary,
        };
        // It quotes the model and the tests: shown in a message box, kept short.
        let summary =
            super::output::bound_text(&summary, super::output::MAX_FIELD_BYTES).into_owned();
        let result = TaskResult {
            task_id: self.spec.id.clone(),
            status,
            summary,
            changed_files: self.files.changed_files(),
            diff: self.files.diff(),
            iterations: self.iterations,
            tool_calls: self.tool_calls,
            tokens: self.tokens,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            editor_notes,
        };
        self.event(
            EventKind::Status,
            format!("Finished: {}", status.as_str()),
            json!({
                "status": status.as_str(),
                "iterations": result.iterations,
                "toolCalls": result.tool_calls,
                "tokens": result.tokens,
                "elapsedMs": result.elapsed_ms,
            }),
        );
        result
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn score_json(score: &check::Score) -> serde_json::Value {
    json!({
        "syntaxErrors": score.syntax_errors,
        "checkerErrors": score.checker_errors,
        "broken": score.broken,
        "failed": score.failed,
        "passed": score.passed,
    })
}

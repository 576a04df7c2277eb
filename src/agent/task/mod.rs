//! One task: read → plan → act → verify → repair, within a budget.
//!
//! An *iteration* is one attempt: model turns (each may call tools) until the
//! model ends its turn without a tool call, then verification. An attempt
//! that scores worse than the best so far is rolled back before the next;
//! when the task gives up, the best state reached (or the original) is
//! restored.

mod act;
mod approaches;
mod bisecting;
mod brief;
mod call_path;
mod candidates;
mod check;
mod code_blocks;
mod diff;
mod events;
mod explain;
mod failing_tests;
mod files;
mod finish;
mod fresh;
mod line_fixes;
mod mutants;
mod plan;
mod prompt;
mod reproduce;
mod review;
mod spectrum;
mod stack;
mod tests_first;
mod tools;
mod tried;
mod turn;
mod undefined;
mod verifying;

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::checkpoint::CheckpointStore;
use super::confined::Confined;
use super::host::Host;
use super::paths::WorkspacePaths;
use super::protected::Protected;
use super::redact::Redactor;
use super::types::{EventKind, TaskResult, TaskSpec, Tokens};
use crate::index::WorkspaceIndex;
use crate::model::{Message, Model};
use tokio_util::sync::CancellationToken;

use events::{capitalized, score_json};
use explain::{Attempt, StopCause};
use files::{Files, TreeBytes};

/// Malformed answers (e.g. tool arguments that are not JSON) the model may
/// send in a row before the task stops.
const MAX_MALFORMED_TURNS: u32 = 3;
/// Attempts a model may end without having made a single tool call before
/// the task stops: one reminder, then it is clear the model cannot.
const NO_TOOL_ATTEMPTS: u32 = 2;
/// Attempts in a row whose every change was refused because the user left
/// the file alone, before the task stops.
const LEFT_ALONE_ATTEMPTS: u32 = 2;

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
    /// The reviewer's model (`agent.review_model`); `None`: `model`.
    pub reviewer: Option<Model>,
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
        reviewer: env.reviewer,
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
        approach_cap: None,
        code_answers: 0,
        unchanged_attempts: 0,
        left_alone_attempts: 0,
        brief: String::new(),
        attempt_notes: Vec::new(),
        candidate: None,
        suspects: Vec::new(),
        spectrum: None,
        coverage_json: None,
        failure_focus: Default::default(),
        candidate_log: Vec::new(),
        copy_area: None,
        mutated_states: Default::default(),
        mutants_time: std::time::Duration::ZERO,
        first_test_run: None,
        review: Default::default(),
        bisect_note: None,
        bisect_json: None,
        tests_written: Vec::new(),
        trace_unreproduced: false,
        reproducing: false,
        passed_before: false,
        plan: Default::default(),
    };
    task.run().await
}

pub(crate) struct Task {
    spec: TaskSpec,
    model: Model,
    reviewer: Option<Model>,
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
    /// Attempts in a row that changed nothing because every change was to
    /// a file left alone.
    left_alone_attempts: u32,
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
    /// The most a candidate's approach lets its answer take.
    approach_cap: Option<u32>,
    /// The candidate being drafted (1-based) and its temperature, with
    /// `agent.candidates` > 1.
    candidate: Option<(u32, f64)>,
    /// The functions the failure may come from (the candidates' hints).
    suspects: Vec<approaches::Suspect>,
    /// What the traced test run recorded (`agent.coverage`).
    spectrum: Option<spectrum::Spectrum>,
    /// The traced run, for the result.
    coverage_json: Option<serde_json::Value>,
    /// What the failure points at: the `repo_map` tool's default focus.
    failure_focus: crate::agent::repo_map::Focus,
    /// Each candidate's verdict, for the result.
    candidate_log: Vec<serde_json::Value>,
    /// Where the candidates' copies of the workspace go; `None`: a single
    /// line of attempts.
    copy_area: Option<Arc<crate::agent::isolated::CopyArea>>,
    /// The states of the code mechanical changes were tried on, and the
    /// time they took (`agent.mutants`).
    mutated_states: std::collections::HashSet<tried::StateKey>,
    mutants_time: std::time::Duration,
    /// How long the tests took before any change.
    first_test_run: Option<std::time::Duration>,
    /// What the review found and said.
    review: review::ReviewLog,
    /// What a bisection found, for every first message.
    bisect_note: Option<String>,
    /// The same, for the result.
    bisect_json: Option<serde_json::Value>,
    /// The test files written first (`--tests-first`).
    tests_written: Vec<String>,
    /// A trace was given and the tests passed before any change: they do
    /// not reproduce its error, so success does not show it is fixed.
    trace_unreproduced: bool,
    /// Writing a test that reproduces the given trace's error (the tests
    /// passed before any change), before the fix.
    reproducing: bool,
    /// The tests passed before any change: passing, they cannot show the
    /// goal reached, and with nothing changed it is not.
    passed_before: bool,
    /// The plan (`agent.plan`).
    plan: plan::PlanState,
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
        self.first_test_run = baseline.outcome.as_ref().map(|o| o.elapsed);
        self.remember_tested_state();
        self.keep_failing_tests(&baseline);
        self.event(
            EventKind::Verify,
            format!("Before any change: {}", baseline.headline_for_user()),
            json!({ "iteration": 0, "passed": baseline.passed, "score": score_json(&baseline.score) }),
        );
        if baseline
            .runner_missing(self.spec.test_command.as_deref(), self.files.root())
            .is_some()
        {
            // Attempts would only re-run a command that cannot start. The
            // summary quotes the line that says why.
            let cause = StopCause::Error(
                "it cannot start, and no change to the workspace can fix that: install what it runs where the server runs (an editor starts the server with its own PATH), or set `agent.test_command`".to_owned(),
            );
            return self.finish(cause, Some(&baseline)).await;
        }
        self.passed_before = baseline.passed;
        self.trace_unreproduced = baseline.passed && self.given_trace().is_some();
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
        if !baseline.passed {
            self.bisect_history().await;
        }
        // A trace whose error the tests do not show: a test that
        // reproduces it is written first, so that success means fixed.
        self.reproducing = self.trace_unreproduced
            && !self.spec.tests_first
            && self.spec.test_command.is_some()
            && !self.spec.asks_a_question();
        let baseline = match self.spec.tests_first || self.reproducing {
            false => baseline,
            true => match self.write_tests_first(&baseline).await {
                Ok(v) => {
                    // The tests written are the new start, kept when the
                    // implementation gives up.
                    self.remember_tested_state();
                    best = (v.score, Some(self.files.capture()));
                    self.trace_unreproduced = false;
                    v
                }
                Err(StopCause::Error(why)) if self.reproducing => {
                    // Not the user's request: the fix goes on without a
                    // reproducer (and its success says so).
                    self.no_reproducer(&why).await;
                    baseline
                }
                Err(cause) => return self.give_up(cause, best, &baseline).await,
            },
        };
        self.reproducing = false;
        // The conversation that wrote the tests is done: the repair starts
        // its own (one system prompt, its first message).
        self.messages.clear();
        if !baseline.passed {
            self.spectrum = self.run_spectrum(&baseline).await;
            if self.cancel.is_cancelled() {
                return self.finish(StopCause::Cancelled, Some(&baseline)).await;
            }
        }
        // Computed once per state: the first message and the `repo_map` tool use it.
        self.failure_focus = self.focus_of_failure(&baseline);
        if !baseline.passed {
            // Before the first message, which lists them.
            self.suspects = self.suspects(&baseline);
            self.suspects_event();
        }
        if self.spec.plan && !self.spec.asks_a_question() {
            let context = self.first_message(&baseline);
            if let Err(cause) = self.make_plan(&context).await {
                return self.finish(cause, Some(&baseline)).await;
            }
        }
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
        // The plan changes as it is done and revised: each message quotes
        // its current version.
        self.brief = first.clone();
        first.push_str(&self.plan_for_prompt());
        self.push(Message::user(first));
        // A question is answered once, in words: no candidates, and no
        // mechanical changes the user did not ask for.
        let candidates = match self.spec.asks_a_question() {
            true => 1,
            false => self.spec.candidates,
        };
        self.copy_area = match candidates::copy_area(candidates) {
            Ok(area) => area,
            Err(why) => {
                self.status(&format!(
                    "One line of attempts instead of candidates: {why}"
                ));
                None
            }
        };

        let mut last = baseline;
        while self.iterations < self.spec.budget.max_iterations {
            self.iterations += 1;
            let iteration = self.iterations;
            self.status(&format!(
                "Iteration {iteration} of {}",
                self.spec.budget.max_iterations
            ));
            let refused_before = self.files.left_alone_refusals();
            let acted = match self.copy_area.clone() {
                Some(area) => self.act_with_candidates(area, last.score).await,
                None => self.act().await,
            };
            if let Err(cause) = acted {
                // Budget or cancellation mid-attempt: judge what is there.
                if matches!(cause, StopCause::Cancelled) {
                    return self.finish(cause, Some(&last)).await;
                }
                // Out of time means no more test runs either.
                if self.dirty && !matches!(cause, StopCause::Timeout) {
                    if let Ok(mut v) = self.verify().await {
                        if v.passed {
                            self.review_change(&mut v).await;
                        }
                        self.record_attempt(iteration, &v, &mut best).await;
                        last = v;
                        if last.passed {
                            return self.finish(StopCause::Success, Some(&last)).await;
                        }
                    }
                }
                return self.give_up(cause, best, &last).await;
            }
            if self.spec.asks_a_question()
                && !self.dirty
                && self.edits_in_attempt == 0
                && !self.last_text.is_empty()
            {
                // A question answered in words: nothing to verify or repair.
                return self.finish(StopCause::Answered, Some(&last)).await;
            }
            self.unchanged_attempts = match self.edits_in_attempt {
                0 => self.unchanged_attempts + 1,
                _ => 0,
            };
            let refused = self.files.left_alone_refusals();
            self.left_alone_attempts = match (self.edits_in_attempt, refused > refused_before) {
                (0, true) => self.left_alone_attempts + 1,
                _ => 0,
            };
            if self.left_alone_attempts >= LEFT_ALONE_ATTEMPTS {
                let cause = StopCause::LeftAlone(self.files.left_alone_names());
                return self.give_up(cause, best, &last).await;
            }
            if self.tool_calls == 0 && self.code_answers == 0 && iteration >= NO_TOOL_ATTEMPTS {
                let cause = StopCause::NoToolUse {
                    model: self.model.name().to_owned(),
                    turns: iteration,
                };
                return self.give_up(cause, best, &last).await;
            }
            let mut verification = if self.dirty {
                match self.verified_with_imports().await {
                    Ok(v) => v,
                    Err(cause) => return self.give_up(cause, best, &last).await,
                }
            } else {
                // Nothing changed since the last run: its verdict stands.
                last
            };
            if verification.passed && self.nothing_done() {
                self.ask_for_a_change(iteration, &verification);
                last = verification;
                continue;
            }
            if verification.passed {
                self.review_change(&mut verification).await;
            }
            self.remember_tested_state();
            // What this attempt changed, before a rollback undoes it.
            let attempt_diff =
                (self.compact_prompt() && self.edits_in_attempt > 0).then(|| self.files.diff());
            let rolled_back = self
                .record_attempt(iteration, &verification, &mut best)
                .await;
            if verification.passed {
                self.plan_passed();
                return self.finish(StopCause::Success, Some(&verification)).await;
            }
            let answer_note = self.answer_note.take();
            self.advance_plan(&verification, rolled_back.is_some())
                .await;
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
            feedback.push_str(&self.plan_for_prompt());
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
}

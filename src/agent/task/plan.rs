//! Plan-then-execute (`agent.plan`, `fettle fix --plan`): before the first
//! attempt the model writes a short numbered plan — the files and
//! functions to change, the test that should go green, the order — in
//! words, without tools. With `agent.plan_approval` the user approves it
//! (the editor's message request, the terminal's y/N); declined, the task
//! stops before any change. The plan goes into every attempt's first
//! message. A plan of two or more steps that change code is executed one
//! step per attempt: each step's change is verified by the tests and
//! checkers (nothing that passed may fail: a step that makes things worse
//! is rolled back) before the next step; the last step is done when the
//! tests pass. After a failed step or a last step that leaves the tests
//! failing, the model revises the plan with the failure (the plan is kept
//! and corrected, not restarted; the steps done stay done). Each version
//! and each step done is an event; `--json` has the last version, how
//! often it was revised and how many steps were done.

use serde_json::json;

use super::check::Verification;
use super::explain::StopCause;
use super::{prompt, Task};
use crate::agent::types::EventKind;
use crate::model::Message;

/// The plan's length: steps, and tokens for the answer.
const MAX_STEPS: usize = 8;
const PLAN_MAX_TOKENS: u32 = 384;
/// The temperature of a revision asked for again after it repeated the plan.
const REVISE_AGAIN_TEMPERATURE: f64 = 0.7;
/// Failing tests named in a revision's request.
const MAX_FAILING_NAMED: usize = 5;

const PLAN_INSTRUCTION: &str = "Before changing anything, write a short plan: at most six numbered steps, one line each, naming the file and function each step changes, ending with the test that should pass. No code, no tool calls.";

/// The plan and its history, for the prompt and the result.
#[derive(Default)]
pub(super) struct PlanState {
    pub steps: Vec<String>,
    pub revisions: u32,
    /// Steps done and verified, from the first.
    pub done: usize,
}

impl PlanState {
    /// The JSON of the result's `plan`.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        (!self.steps.is_empty())
            .then(|| json!({ "steps": self.steps, "revisions": self.revisions, "done": self.done }))
    }

    /// The step (0-based) the next attempt does alone: the first not done,
    /// while another step that changes code follows it. `None`: the
    /// attempt does what is left of the plan.
    pub fn step_in_progress(&self) -> Option<usize> {
        let mut changing =
            (self.done..self.steps.len()).filter(|&i| !is_check_step(&self.steps[i]));
        let first = changing.next()?;
        changing.next().map(|_| first)
    }
}

/// A step that only runs or names a test ("Run test_x.py", "test_y should
/// pass") — the verification every attempt gets — or only reads: not a
/// change.
fn is_check_step(step: &str) -> bool {
    let body = step
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches(['.', ')'])
        .trim()
        .trim_start_matches('*')
        .to_lowercase();
    // Running a test, and reading (the 1.5B's first step is often
    // "**Understand the failure**").
    const NOT_CHANGES: [&str; 17] = [
        "run ",
        "rerun",
        "re-run",
        "verify",
        "confirm",
        "ensure the test",
        "check that the test",
        "execute the test",
        "test ",
        "understand",
        "analy",
        "identify",
        "investigate",
        "read ",
        "review",
        "locate",
        "look at",
    ];
    NOT_CHANGES.iter().any(|c| body.starts_with(c))
        || body.contains("should pass")
        || body.contains("should now pass")
        || body.contains("should succeed")
}

impl Task {
    /// The first plan (see the module's text); `Err` when the user declined it.
    pub(super) async fn make_plan(&mut self, first: &str) -> Result<(), StopCause> {
        self.status("Planning");
        let steps = match self.ask_for_plan(first, PLAN_INSTRUCTION, 0.0).await {
            Ok(steps) => steps
                .iter()
                .enumerate()
                .map(|(i, step)| match step_number(step) {
                    Some((_, text)) => format!("{}. {text}", i + 1),
                    None => step.clone(),
                })
                .collect(),
            // The cause reaches the user, not only the log (a model's time
            // limit hid here once).
            Err(why) => {
                self.status(&format!("No plan: {why}; going on without one"));
                return Ok(());
            }
        };
        self.plan.steps = steps;
        self.plan_event("Plan");
        if self.spec.plan_approval {
            let text = self.plan.steps.join("\n");
            if !self.host.approve_plan(&text).await {
                self.last_text = "The plan was declined; nothing was changed.".to_owned();
                return Err(StopCause::Cancelled);
            }
        }
        Ok(())
    }

    /// After an attempt that did not pass: the step it did is done when
    /// it changed the code and made nothing worse (`rolled_back`: it did);
    /// otherwise, or when no step is left, the plan is corrected with
    /// what failed.
    pub(super) async fn advance_plan(&mut self, v: &Verification, rolled_back: bool) {
        if let Some(step) = self.plan.step_in_progress() {
            if !rolled_back && self.edits_in_attempt > 0 {
                self.plan.done = step + 1;
                self.event(
                    EventKind::Status,
                    format!(
                        "Plan step {} of {} done and verified ({}; nothing got worse)",
                        step + 1,
                        self.plan.steps.len(),
                        v.score.describe()
                    ),
                    json!({ "planStepDone": step + 1, "score": super::score_json(&v.score) }),
                );
                return;
            }
        }
        self.revise_plan(v).await;
    }

    /// After the tests pass: every step is done.
    pub(super) fn plan_passed(&mut self) {
        self.plan.done = self.plan.steps.len();
    }

    /// After a failed attempt: the plan corrected with what failed and the
    /// tests still failing. Greedily the 1.5B gave back the same plan after
    /// each failure, or — shown the plan as the attempts see it, "do step
    /// 2 now" — answered with code (17 revisions of 17 in a QuixBugs run);
    /// so the plan is quoted without the attempt's order, and an answer
    /// that repeats the plan or has no steps is asked for once more,
    /// sampled and told what was wrong with it.
    async fn revise_plan(&mut self, v: &Verification) {
        if self.plan.steps.is_empty() || self.check_budget().is_err() {
            return;
        }
        let failure = v.first_problem().unwrap_or_else(|| v.score.describe());
        let kept = match self.plan.done {
            0 => String::new(),
            1 => " Step 1 is done: keep it first.".to_owned(),
            k => format!(" Steps 1–{k} are done: keep them first."),
        };
        let failing = still_failing(v);
        let instruction = format!(
            "The last attempt failed: {}.{failing} Revise the plan — do not fix the code now: keep the steps that still hold, correct or add the ones that failed.{kept} Answer with the numbered steps only (at most six, one line each, starting `1.`), no code.",
            prompt::defuse(&failure)
        );
        let brief = format!("{}{}", self.brief, self.plan_to_revise());
        let mut answer = self.ask_for_plan(&brief, &instruction, 0.0).await;
        let repeated = matches!(&answer, Ok(steps) if repeats(&self.plan.steps, steps));
        let again = match &answer {
            // Asked for a whole plan again, the 1.5B copied the one quoted
            // (45 of 74 revisions, at 0.7 too): asked which step is wrong,
            // it has to write one.
            Ok(_) if repeated => Some(
                "This plan has already failed as it is, so one of its steps is wrong: answer with that step's number and the corrected step, on one line (`2. In x.py, …`) — aim it at what the still-failing tests check, in code the plan does not name yet if need be; a number one past the last adds a step.",
            ),
            Err(PlanFailure::NoSteps(_)) => Some(
                "Your last answer was code, not a plan: answer with the numbered steps of the revised plan, in words.",
            ),
            _ => None,
        };
        if let Some(again) = again.filter(|_| self.check_budget().is_ok()) {
            answer = self
                .ask_for_plan(
                    &brief,
                    &format!("{instruction} {again}"),
                    REVISE_AGAIN_TEMPERATURE,
                )
                .await;
            // Only the answer to "which step" is read as a correction: a
            // one-step answer to "revise the plan" is the whole plan.
            if repeated {
                answer = answer.map(|steps| self.with_correction(steps));
            }
        }
        let steps = match answer {
            Ok(steps) if !repeats(&self.plan.steps, &steps) => steps,
            Ok(_) => {
                self.status("The plan stays as it was (its revision came back the same)");
                return;
            }
            Err(why) => {
                self.status(&format!("The plan stays as it was (no revision: {why})"));
                return;
            }
        };
        self.plan.steps = steps;
        self.plan.revisions += 1;
        // What was done stays done; at least one step is left to do.
        self.plan.done = self.plan.done.min(self.plan.steps.len().saturating_sub(1));
        self.plan_event("Plan revised");
    }

    /// A revision's answer as the whole plan (see [`corrected`]); a step
    /// done that was corrected is to do again, and those after it.
    fn with_correction(&mut self, answer: Vec<String>) -> Vec<String> {
        let (steps, number) = corrected(&self.plan.steps, answer);
        if let Some(n) = number.filter(|_| !repeats(&self.plan.steps, &steps)) {
            self.plan.done = self.plan.done.min(n - 1);
        }
        steps
    }

    /// The plan as a revision's request quotes it: its steps, those done
    /// marked, without the order an attempt is given.
    fn plan_to_revise(&self) -> String {
        format!(
            "\nThe plan so far (the steps marked done are verified; the last attempt followed it and failed):\n{}\n",
            self.marked_steps().join("\n")
        )
    }

    /// The plan's steps, those done marked.
    fn marked_steps(&self) -> Vec<String> {
        self.plan
            .steps
            .iter()
            .enumerate()
            .map(|(i, step)| match i < self.plan.done {
                true => format!("{step} (done)"),
                false => step.clone(),
            })
            .collect()
    }

    /// The plan as the first message quotes it.
    pub(super) fn plan_for_prompt(&self) -> String {
        if self.plan.steps.is_empty() {
            return String::new();
        }
        let marked = self.marked_steps();
        let now = match self.plan.step_in_progress() {
            Some(k) => format!(
                "Do step {} now, and only it; the tests run after it, and the next step comes after that.\n",
                k + 1
            ),
            None if self.plan.done > 0 => "Do the rest of the plan now.\n".to_owned(),
            None => String::new(),
        };
        format!(
            "\nThe plan (follow it; each attempt is verified by the tests):\n{}\n{now}",
            marked.join("\n")
        )
    }

    fn plan_event(&self, what: &str) {
        self.event(
            EventKind::Status,
            format!("{what}:\n{}", self.plan.steps.join("\n")),
            json!({ "plan": self.plan.steps, "revision": self.plan.revisions }),
        );
    }

    /// One words-only turn with `context` (the task's first message) and
    /// `instruction`: its numbered lines; `Err` says why there is no answer.
    async fn ask_for_plan(
        &mut self,
        context: &str,
        instruction: &str,
        temperature: f64,
    ) -> Result<Vec<String>, PlanFailure> {
        let system = match self.compact_prompt() {
            true => self.boundary.local_system_prompt(),
            false => self.boundary.system_prompt(),
        };
        let messages = vec![
            Message::system(system),
            Message::user(format!("{context}\n\n{instruction}")),
        ];
        let model = self.model.clone();
        let text = self
            .words_only_turn(&model, messages, PLAN_MAX_TOKENS, temperature)
            .await
            .inspect_err(|why| tracing::warn!(%why, "no plan from the model"))
            .map_err(PlanFailure::Failed)?;
        // Every answer, to see what a revision that "came back the same"
        // said (FETTLE_LOG=fettle::agent=debug).
        tracing::debug!(%temperature, answer = %text, "the plan's answer");
        let steps = numbered_steps(&text);
        if steps.is_empty() {
            tracing::info!(answer = %text, "the plan's answer had no numbered steps");
            let start: Vec<&str> = text.split_whitespace().take(10).collect();
            return Err(PlanFailure::NoSteps(start.join(" ")));
        }
        Ok(steps)
    }
}

/// Why a planning turn gave no steps.
enum PlanFailure {
    /// The turn failed (time, cancellation, the model's error).
    Failed(String),
    /// The answer had no numbered steps (the 1.5B answered with code); its
    /// first words.
    NoSteps(String),
}

impl std::fmt::Display for PlanFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanFailure::Failed(why) => f.write_str(why),
            PlanFailure::NoSteps(start) => {
                write!(
                    f,
                    "the model's answer had no numbered steps (it began: {start} …)"
                )
            }
        }
    }
}

/// " Still failing: a, b, c." (the tests of the last run), or empty.
fn still_failing(v: &Verification) -> String {
    let Some(report) = v.report.as_ref().filter(|r| !r.failing_tests.is_empty()) else {
        return String::new();
    };
    let names: Vec<String> = report
        .failing_tests
        .iter()
        .take(MAX_FAILING_NAMED)
        .map(|t| format!("`{}`", prompt::defuse(t)))
        .collect();
    let more = report.failing_tests.len().saturating_sub(MAX_FAILING_NAMED);
    let more = match more {
        0 => String::new(),
        k => format!(" and {k} more"),
    };
    format!(" Still failing: {}{more}.", names.join(", "))
}

/// `1. …`, `2) …`, `- …` lines (at most [`MAX_STEPS`]), renumbered — but
/// for a single numbered line, which keeps its number: the answer to
/// "which step was wrong" ([`step_number`]).
fn numbered_steps(text: &str) -> Vec<String> {
    let mut steps: Vec<String> = Vec::new();
    let mut first_number = None;
    for line in text.lines() {
        let line = line.trim();
        let body = line
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .strip_prefix(['.', ')'])
            .filter(|_| line.starts_with(|c: char| c.is_ascii_digit()))
            .or_else(|| line.strip_prefix("- "))
            .or_else(|| line.strip_prefix("* "));
        if let Some(body) = body.map(str::trim).filter(|b| !b.is_empty()) {
            if steps.is_empty() {
                first_number = step_number(line).map(|(n, _)| n);
            }
            let body: String = body.chars().take(240).collect();
            steps.push(format!("{}. {body}", steps.len() + 1));
            if steps.len() == MAX_STEPS {
                break;
            }
        }
    }
    if let (Some(n), [only]) = (first_number, steps.as_mut_slice()) {
        *only = format!("{n}.{}", only.trim_start_matches("1."));
    }
    steps
}

/// `plan` with a revision's `answer`: an answer of one numbered step is
/// the correction of the step of that number (one past the last: a step
/// added), returned with the number; more steps are the whole plan.
fn corrected(plan: &[String], answer: Vec<String>) -> (Vec<String>, Option<usize>) {
    let Some((number, text)) = (match answer.as_slice() {
        [only] => step_number(only),
        _ => None,
    }) else {
        return (answer, None);
    };
    let mut steps = plan.to_vec();
    match number {
        n if (1..=steps.len()).contains(&n) => steps[n - 1] = format!("{n}. {text}"),
        n if n == steps.len() + 1 => steps.push(format!("{n}. {text}")),
        // Numbered past the plan: a plan of its own, numbered from 1.
        _ => return (vec![format!("1. {text}")], None),
    }
    (steps, Some(number))
}

/// Whether `revised` only repeats `plan`: each of its steps the same as
/// the plan's step of that number or the start of it, markdown emphasis,
/// case and spacing aside — an answer cut at its token limit (seen: the 1.5B's "revisions"
/// of `lcs_length`, its plan again up to `3. **Test`), or fewer steps.
fn repeats(plan: &[String], revised: &[String]) -> bool {
    // Case too: asked which step is wrong, the 1.5B gave the whole plan
    // again without its bold and in lower case ("Identify the issue").
    let plain = |step: &str| {
        let words = step.replace(['*', '_', '`'], "").to_lowercase();
        words.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    !revised.is_empty()
        && revised.len() <= plan.len()
        && revised
            .iter()
            .zip(plan)
            .all(|(new, old)| plain(old).starts_with(&plain(new)))
}

/// `3. In x.py, …` → (3, "In x.py, …"); `None` for a line not numbered.
fn step_number(line: &str) -> Option<(usize, &str)> {
    let line = line.trim();
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let number = line[..digits].parse().ok()?;
    let text = line[digits..].strip_prefix(['.', ')'])?.trim();
    (!text.is_empty()).then_some((number, text))
}

#[cfg(test)]
mod tests {
    use super::{corrected, numbered_steps, repeats, PlanState};

    #[test]
    fn a_plan_cut_short_repeats_it() {
        let plan = vec![
            "1. **Fix the loop** in `f`.".to_owned(),
            "2. **Test the Corrected Function**: run test_f.py.".to_owned(),
        ];
        assert!(repeats(&plan, &plan));
        assert!(repeats(
            &plan,
            &[
                "1. **Fix the loop** in `f`.".to_owned(),
                "2. **Test**".to_owned()
            ]
        ));
        assert!(repeats(&plan, &plan[..1]));
        assert!(repeats(
            &plan,
            &[
                "1. Fix the loop  in f.".to_owned(),
                "2. test the corrected function: run test_f.py.".to_owned()
            ]
        ));
        assert!(!repeats(&plan, &["1. Fix the bound in `g`.".to_owned()]));
        let longer = [plan.clone(), vec!["3. Check `g`.".to_owned()]].concat();
        assert!(!repeats(&plan, &longer));
        assert!(!repeats(&plan, &[]));
    }

    #[test]
    fn a_single_step_is_the_correction_of_the_step_it_numbers() {
        let plan = vec![
            "1. In a.py, check `f`.".to_owned(),
            "2. Run test_a.py.".to_owned(),
        ];
        // The answer to "which step is wrong" keeps its number…
        let answer = numbered_steps("3. In b.py, fix `g`: the bound is one short.");
        assert_eq!(answer, ["3. In b.py, fix `g`: the bound is one short."]);
        assert_eq!(
            corrected(&plan, answer),
            (
                vec![
                    "1. In a.py, check `f`.".to_owned(),
                    "2. Run test_a.py.".to_owned(),
                    "3. In b.py, fix `g`: the bound is one short.".to_owned()
                ],
                Some(3)
            )
        );
        let (steps, number) = corrected(&plan, numbered_steps("1) In a.py, fix `f`'s loop."));
        assert_eq!(steps[0], "1. In a.py, fix `f`'s loop.");
        assert_eq!((steps.len(), number), (2, Some(1)));
        // …a number past the plan's end is no correction, and several
        // steps are the whole plan, renumbered.
        let far = numbered_steps("7. Rewrite everything.");
        assert_eq!(
            corrected(&plan, far),
            (vec!["1. Rewrite everything.".to_owned()], None)
        );
        let whole = numbered_steps("2. In a.py, fix `f`.\n3. Run test_a.py.");
        assert_eq!(whole, ["1. In a.py, fix `f`.", "2. Run test_a.py."]);
        assert_eq!(corrected(&plan, whole.clone()), (whole, None));
    }

    #[test]
    fn steps_are_the_numbered_or_bulleted_lines() {
        let text = "Here is the plan:\n1. In stats.py, fix `median` for even lengths.\n2) Keep `mean` as it is.\n- Run test_stats.py::test_even\n\nThat's all.";
        assert_eq!(
            numbered_steps(text),
            [
                "1. In stats.py, fix `median` for even lengths.",
                "2. Keep `mean` as it is.",
                "3. Run test_stats.py::test_even"
            ]
        );
        assert!(numbered_steps("No plan here.").is_empty());
        assert!(numbered_steps("2026 was a year").is_empty());
    }

    #[test]
    fn a_plan_of_several_changes_is_done_one_step_at_a_time() {
        let mut plan = PlanState {
            steps: vec![
                "1. In parse.py, fix `parse`.".to_owned(),
                "2. In render.py, fix `render`.".to_owned(),
                "3. Run test_all.py: it should pass.".to_owned(),
            ],
            ..Default::default()
        };
        assert_eq!(plan.step_in_progress(), Some(0));
        plan.done = 1;
        // The last change: the attempt does the rest.
        assert_eq!(plan.step_in_progress(), None);
        // One change and a check: no steps.
        plan.steps.remove(1);
        plan.done = 0;
        assert_eq!(plan.step_in_progress(), None);
        for check in [
            "2. Run pytest",
            "3. test_stats.py::test_mean should pass.",
            "4) Verify the fix",
            "1. **Understand the Failure**: `parse` returns the wrong element",
        ] {
            assert!(super::is_check_step(check), "{check}");
        }
        for change in [
            "1. In stats.py, check `total`.",
            "2. Add a test for x",
            "1. Fix the loop bound in run_all()",
        ] {
            assert!(!super::is_check_step(change), "{change}");
        }
    }
}

//! Plan-then-execute (`agent.plan`, `fettle fix --plan`): before the first
//! attempt the model writes a short numbered plan — the files and
//! functions to change, the test that should go green, the order — in
//! words, without tools. With `agent.plan_approval` the user approves it
//! (the editor's message request, the terminal's y/N); declined, the task
//! stops before any change. The plan goes into every attempt's first
//! message; after a failed attempt the model revises it with the failure
//! (the plan is kept and corrected, not restarted). Each version is an
//! event, and `--json` has the last one and how often it was revised.

use serde_json::json;

use super::check::Verification;
use super::explain::StopCause;
use super::{prompt, Task};
use crate::agent::types::EventKind;
use crate::model::Message;

/// The plan's length: steps, and tokens for the answer.
const MAX_STEPS: usize = 8;
const PLAN_MAX_TOKENS: u32 = 384;

const PLAN_INSTRUCTION: &str = "Before changing anything, write a short plan: at most six numbered steps, one line each, naming the file and function each step changes, ending with the test that should pass. No code, no tool calls.";

/// The plan and its history, for the prompt and the result.
#[derive(Default)]
pub(super) struct PlanState {
    pub steps: Vec<String>,
    pub revisions: u32,
}

impl PlanState {
    /// The JSON of the result's `plan`.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        (!self.steps.is_empty())
            .then(|| json!({ "steps": self.steps, "revisions": self.revisions }))
    }
}

impl Task {
    /// The first plan (see the module's text); `Err` when the user declined it.
    pub(super) async fn make_plan(&mut self, first: &str) -> Result<(), StopCause> {
        self.status("Planning");
        let steps = self.ask_for_plan(first, PLAN_INSTRUCTION).await;
        if steps.is_empty() {
            self.status("The model gave no plan; going on without one");
            return Ok(());
        }
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

    /// After a failed attempt: the plan corrected with what failed.
    pub(super) async fn revise_plan(&mut self, v: &Verification) {
        if self.plan.steps.is_empty() || self.check_budget().is_err() {
            return;
        }
        let failure = v.first_problem().unwrap_or_else(|| v.score.describe());
        let instruction = format!(
            "The last attempt failed: {}. Revise the plan: keep the steps that still hold, correct or add the ones that failed. At most six numbered steps, one line each; no code.",
            prompt::defuse(&failure)
        );
        let brief = self.brief.clone();
        let steps = self.ask_for_plan(&brief, &instruction).await;
        if steps.is_empty() || steps == self.plan.steps {
            return;
        }
        self.plan.steps = steps;
        self.plan.revisions += 1;
        self.plan_event("Plan revised");
    }

    /// The plan as the first message quotes it.
    pub(super) fn plan_for_prompt(&self) -> String {
        if self.plan.steps.is_empty() {
            return String::new();
        }
        format!(
            "\nThe plan (follow it; each attempt is verified by the tests):\n{}\n",
            self.plan.steps.join("\n")
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
    /// `instruction`: its numbered lines.
    async fn ask_for_plan(&mut self, context: &str, instruction: &str) -> Vec<String> {
        let system = match self.compact_prompt() {
            true => self.boundary.local_system_prompt(),
            false => self.boundary.system_prompt(),
        };
        let messages = vec![
            Message::system(system),
            Message::user(format!("{context}\n\n{instruction}")),
        ];
        let model = self.model.clone();
        let text = match self
            .words_only_turn(&model, messages, PLAN_MAX_TOKENS)
            .await
        {
            Ok(text) => text,
            Err(why) => {
                tracing::warn!(%why, "no plan from the model");
                return Vec::new();
            }
        };
        numbered_steps(&text)
    }
}

/// `1. …`, `2) …`, `- …` lines (at most [`MAX_STEPS`]), renumbered.
fn numbered_steps(text: &str) -> Vec<String> {
    let mut steps: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let body = line
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .strip_prefix(['.', ')'])
            .filter(|_| line.starts_with(|c: char| c.is_ascii_digit()))
            .or_else(|| line.strip_prefix("- "))
            .or_else(|| line.strip_prefix("* "));
        if let Some(body) = body.map(str::trim).filter(|b| !b.is_empty()) {
            let body: String = body.chars().take(240).collect();
            steps.push(format!("{}. {body}", steps.len() + 1));
            if steps.len() == MAX_STEPS {
                break;
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::numbered_steps;

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
}

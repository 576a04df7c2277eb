//! Why a task stopped, and the summary it ends with: on success the model's
//! own words; when giving up, an honest account of what was tried, what
//! failed, and what to try next.

use crate::agent::types::{Budget, TaskStatus};

#[derive(Debug, Clone)]
pub enum StopCause {
    Success,
    /// The goal was a question and the model answered it in words.
    Answered,
    Iterations,
    ToolCalls,
    Tokens,
    Timeout,
    Cancelled,
    /// The model could not be reached or answered garbage.
    Model(String),
    /// Fettle itself could not go on (e.g. the test command cannot start).
    Error(String),
    /// The model answered its first turns without a single tool call: it
    /// cannot drive the tools (small local models cannot), and more
    /// attempts would only re-run the same checks.
    NoToolUse {
        model: String,
        turns: u32,
    },
    /// Attempt after attempt, every change the model made was to files the
    /// user chose to keep the agent out of (unsaved changes): more attempts
    /// would only be refused the same way.
    LeftAlone(Vec<String>),
}

impl StopCause {
    pub fn status(&self) -> TaskStatus {
        match self {
            StopCause::Success | StopCause::Answered => TaskStatus::Success,
            StopCause::Cancelled => TaskStatus::Cancelled,
            StopCause::Model(_) | StopCause::Error(_) => TaskStatus::Failed,
            _ => TaskStatus::GaveUp,
        }
    }

    fn describe(&self, budget: &Budget) -> String {
        match self {
            StopCause::Success => "verification passed".to_owned(),
            StopCause::Answered => "the question was answered".to_owned(),
            StopCause::Iterations => format!(
                "the iteration budget ({} attempts, `agent.max_iterations`) is spent",
                budget.max_iterations
            ),
            StopCause::ToolCalls => format!(
                "the tool-call budget ({}, `agent.max_tool_calls`) is spent",
                budget.max_tool_calls
            ),
            StopCause::Tokens => format!(
                "the token budget ({}, `agent.max_tokens`) is spent",
                budget.max_tokens
            ),
            StopCause::Timeout => format!(
                "the time limit ({} s, `agent.timeout_s`) is reached",
                budget.timeout.as_secs()
            ),
            StopCause::Cancelled => "the task was cancelled".to_owned(),
            StopCause::Model(err) => format!("the model failed: {err}"),
            StopCause::Error(err) => err.clone(),
            StopCause::LeftAlone(files) => format!(
                "every change the model tried was to {}, which the task may not change (open with unsaved changes, left alone), so no attempt could change anything",
                files.join(", ")
            ),
            StopCause::NoToolUse { model, turns } => format!(
                "the model `{model}` made no tool call in its first {turns} turns and wrote no code to put in place, so it cannot read, search or edit the workspace (a model too small for the task, or a server that does not pass tool calls through)"
            ),
        }
    }
}

/// One verified attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub iteration: u32,
    /// Files differing from the original when it was verified.
    pub changed: Vec<String>,
    pub outcome: String,
    pub rolled_back: bool,
    pub model_note: String,
    /// Why the code in the model's answer was not applied, when it was not.
    pub code_refused: Option<String>,
}

pub struct Context<'a> {
    pub cause: &'a StopCause,
    pub goal: &'a str,
    pub attempts: &'a [Attempt],
    pub last: Option<String>,
    pub last_failure_focus: Option<String>,
    pub model_text: &'a str,
    pub restore_note: Option<&'a str>,
    pub budget: &'a Budget,
    /// The last test run hit its timeout.
    pub test_timed_out: bool,
    /// The model's own account, asked for when the attempts ran out.
    pub reflection: Option<&'a str>,
    /// The last test run reported no results: the line that says why.
    pub tests_could_not_run: Option<String>,
}

pub fn summary(cx: &Context<'_>) -> String {
    if matches!(cx.cause, StopCause::Success | StopCause::Answered) {
        let text = cx.model_text.trim();
        return if text.is_empty() {
            "Verification passed.".to_owned()
        } else if text.starts_with("```") {
            // The first line is all a notification shows: not a fence.
            format!("The model answered with code:\n{text}")
        } else {
            text.to_owned()
        };
    }
    // The first line is all an editor's notification shows: the reason
    // the tests could not run goes there, not only in the details.
    let could_not_run = cx
        .tests_could_not_run
        .as_deref()
        .map(|why| format!("the test command failed without test results (`{why}`); "))
        .unwrap_or_default();
    let mut out = format!(
        "Stopped without reaching the goal ({}): {could_not_run}{}.\n",
        cx.goal.trim(),
        cx.cause.describe(cx.budget)
    );
    if cx.attempts.is_empty() {
        out.push_str("No attempt was verified.\n");
    } else {
        out.push_str("What was tried:\n");
        for a in cx.attempts {
            let files = if a.changed.is_empty() {
                "no file changes".to_owned()
            } else {
                format!("changed {}", a.changed.join(", "))
            };
            out.push_str(&format!(
                "- attempt {}: {files} → {}{}\n",
                a.iteration,
                a.outcome,
                if a.rolled_back {
                    " (worse than before; rolled back)"
                } else {
                    ""
                }
            ));
            if let Some(why) = &a.code_refused {
                // "The model said: ```python" told the user nothing.
                out.push_str(&format!(
                    "  (the code in its answer was not applied: {})\n",
                    crate::model::shorten_for_display(why, 160)
                ));
            } else if !a.model_note.trim().is_empty() {
                let note = without_repetition(a.model_note.trim());
                let first = note.lines().next().unwrap_or("");
                out.push_str(&format!(
                    "  (the model said: {})\n",
                    crate::model::shorten_for_display(first, 160)
                ));
            }
        }
    }
    if let Some(note) = cx.restore_note {
        out.push_str(note);
        out.push('\n');
    }
    if let Some(focus) = cx
        .last_failure_focus
        .as_deref()
        .filter(|f| !f.trim().is_empty())
    {
        out.push_str("What still fails:\n");
        for line in focus.lines().take(12) {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    } else if let Some(last) = cx.last.as_deref() {
        out.push_str("Last verification:\n");
        for line in last.lines().take(8) {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    if let Some(reflection) = cx.reflection {
        out.push_str("The model's assessment: ");
        out.push_str(&crate::model::shorten_for_display(
            &without_repetition(reflection),
            800,
        ));
        out.push('\n');
    } else if !cx.model_text.trim().is_empty() {
        out.push_str("The model's last note: ");
        out.push_str(&crate::model::shorten_for_display(
            &without_repetition(cx.model_text.trim()),
            400,
        ));
        out.push('\n');
    }
    out.push_str("Next: ");
    out.push_str(&next_step(cx));
    out
}

/// A concrete suggestion from how the task stopped.
fn next_step(cx: &Context<'_>) -> String {
    match cx.cause {
        StopCause::Cancelled => "run the task again, or `fettle.undo` / `fettle fix --undo` to drop its changes.".to_owned(),
        StopCause::Model(_) => "check the model with `fettle doctor`, then run the task again.".to_owned(),
        StopCause::Error(_) => "fix the problem above (the test command must run from the workspace root), then run again.".to_owned(),
        StopCause::NoToolUse { .. } => NO_TOOL_USE_ADVICE.to_owned(),
        StopCause::LeftAlone(files) => format!(
            "save {} in the editor (or answer \"Save and continue\" when asked), then run the task again.",
            files.join(", ")
        ),
        _ if cx.test_timed_out => "the test command did not finish within `agent.test_timeout_s`: look for a hang (an infinite loop, a server waiting for input) or raise the limit.".to_owned(),
        StopCause::Tokens | StopCause::ToolCalls | StopCause::Timeout | StopCause::Iterations => {
            let target = cx
                .last_failure_focus
                .as_deref()
                .and_then(first_lead)
                .unwrap_or_else(|| "narrow the goal to one failing test".to_owned());
            format!(
                "{target}; give the task more room (a larger budget) or a more specific goal, or use a stronger model."
            )
        }
        StopCause::Success | StopCause::Answered => String::new(),
    }
}

/// What to configure instead of a model that cannot call tools.
const NO_TOOL_USE_ADVICE: &str = "give the agent a model that can call tools (the embedded model stays fine for ghost text). With Ollama (`ollama pull qwen2.5-coder:7b`), in ~/.config/fettle/config.toml:
  [models.coder]
  provider = \"ollama\"
  model = \"qwen2.5-coder:7b\"
  [agent]
  model = \"coder\"
or a llama.cpp server (`llama-server -m <model>.gguf --jinja`): provider = \"llamacpp\" (its default base_url is http://127.0.0.1:8080); or a remote provider (see docs/models.md). Then run the task again.";

/// `text` with repeated sentences or lines dropped after their first
/// occurrence (a small model stuck in a loop repeats itself), marked.
pub fn without_repetition(text: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut out = String::new();
    let mut dropped = false;
    for line in text.split_inclusive('\n') {
        let mut kept_line = String::new();
        for sentence in line.split_inclusive(". ") {
            let key = sentence.trim().trim_end_matches('.').to_lowercase();
            if key.len() > 3 && !seen.insert(key) {
                dropped = true;
                continue;
            }
            kept_line.push_str(sentence);
        }
        if !kept_line.trim().is_empty() || kept_line.is_empty() && !line.trim().is_empty() {
            out.push_str(&kept_line);
        } else if line.trim().is_empty() {
            out.push_str(line);
        }
    }
    if dropped {
        let trimmed = out.trim_end().to_owned();
        return format!("{trimmed} […repeated]");
    }
    out
}

/// Where to start, from a failure summary's "Failing tests:" and
/// "Locations:" sections (their first entries).
fn first_lead(summary: &str) -> Option<String> {
    let first_in = |section: &str| {
        summary
            .lines()
            .skip_while(|l| l.trim() != section)
            .nth(1)
            .and_then(|l| l.trim().strip_prefix("- "))
            .map(str::to_owned)
    };
    match (first_in("Failing tests:"), first_in("Locations:")) {
        (Some(test), Some(place)) => Some(format!(
            "start from the failing test `{test}` (see `{place}`)"
        )),
        (Some(test), None) => Some(format!("start from the failing test `{test}`")),
        (None, Some(place)) => Some(format!("start at `{place}`")),
        (None, None) => None,
    }
}
